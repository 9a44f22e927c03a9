"""The schema modules are on the server's start-up path: importing them loads nothing beyond what they must have."""

from helpers import modules_added_by

# Each costs start-up time (inspect loads ast, dis and tokenize; pathlib loads urllib.parse and ipaddress; dataclasses
# loads inspect; uuid loads platform), and the schema code only needs one once a tool's annotations mention it.
NOT_IMPORTED = ("inspect", "dataclasses", "uuid", "pathlib", "decimal", "base64", "textwrap")


def test_the_schema_imports_only_its_own_modules() -> None:
    # What the schema needs anyway is preloaded. orjson itself imports inspect, dataclasses and uuid today, so they
    # are forgotten before the schema is imported: if it imported them, they would be loaded again.
    added = modules_added_by(
        "import tooldeck.schema.generate, tooldeck.schema.validate",
        preload="import orjson, typing, tooldeck.protocol.errors",
        forget=NOT_IMPORTED,
    )
    assert "tooldeck.schema.generate" in added
    others = [name for name in added if name != "tooldeck.schema" and not name.startswith("tooldeck.schema.")]
    assert others == []
