"""The schema modules are on the server's start-up path: importing them loads nothing beyond what they must have."""

import ast
import subprocess
import sys

# Each costs start-up time (inspect loads ast, dis and tokenize; pathlib loads urllib.parse and ipaddress; dataclasses
# loads inspect; uuid loads platform), and the schema code only needs one once a tool's annotations mention it.
NOT_IMPORTED = ("inspect", "dataclasses", "uuid", "pathlib", "decimal", "base64", "textwrap")

SCRIPT = """
import importlib.util, sys, types

# tooldeck/__init__.py imports the whole server; load the subpackages without it.
package = types.ModuleType("tooldeck")
package.__path__ = list(importlib.util.find_spec("tooldeck").submodule_search_locations)
sys.modules["tooldeck"] = package

# What the schema needs anyway. orjson itself imports inspect, dataclasses and uuid today, so they are
# forgotten before the schema is imported: if it imported them, they would be loaded again.
import orjson, typing, tooldeck.protocol.errors
for name in NOT_IMPORTED:
    sys.modules.pop(name, None)
before = set(sys.modules)

import tooldeck.schema.generate, tooldeck.schema.validate

print(sorted(set(sys.modules) - before))
"""


def test_the_schema_imports_only_its_own_modules() -> None:
    script = f"NOT_IMPORTED = {NOT_IMPORTED!r}\n{SCRIPT}"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    added = ast.literal_eval(result.stdout)
    assert "tooldeck.schema.generate" in added
    others = [name for name in added if name != "tooldeck.schema" and not name.startswith("tooldeck.schema.")]
    assert others == []
