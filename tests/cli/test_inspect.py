"""``tooldeck inspect``: the summary (text and JSON) and the lint warnings, run as a real command against the demo deck
and small decks written to temporary files; what it shows is compared with what a client gets from tools/list."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from helpers import client
from mcp_schema import LATEST
from stdio_client import ROOT, TOOLDECK
from tooldeck.loader import load_deck

SHOP = '''
from dataclasses import dataclass
from typing import Optional

from tooldeck import Deck

print("importing the shop")  # an import-time print: never on stdout
deck = Deck("shop", version="2.1.0", title="Shop", instructions="Look things up in the shop.\\nSecond line.")


@dataclass
class Item:
    sku: str
    price: float


@deck.tool(annotations={"readOnlyHint": True, "openWorldHint": False}, task="optional", version="1.2.0")
def find(query: str, limit: int = 10, tag: Optional[str] = None) -> list[Item]:
    """Find items by words.

    Args:
        query: words to look for.
        limit: at most this many.
    """
    return []


@deck.tool(security_level=5, scopes=["shop:write"])
def restock(sku: str) -> None:
    """Restock an item."""


@deck.tool
def label(item: Item) -> str:
    return item.sku


@deck.resource("shop://catalog", mime_type="application/json", description="Everything on sale.")
def catalog() -> dict:
    return {}


@deck.resource_template("shop://items/{sku}", title="An item")
def item(sku: str) -> str:
    """One item."""
    return sku


@deck.prompt
def pitch(sku: str, tone: str = "warm") -> str:
    """Write a sales pitch."""
    return sku
'''

SHOP_TEXT = f"""\
shop 2.1.0 (Shop), protocol {LATEST}
  Look things up in the shop.

Tools (2)
  find
    Find items by words.
    parameters:
      query: string, required — words to look for.
      limit: integer, default 10 — at most this many.
      tag: string | null, default null
    returns: array[Item]
    annotations: readOnlyHint, openWorldHint=false
    tasks optional · security level default · version 1.2.0
  label
    parameters:
      item: Item, required
    returns: string
    tasks forbidden · security level default
  not listed for a local session (security level or scopes): restock

Resources (1)
  shop://catalog  catalog (application/json) — Everything on sale.
Resource templates (1)
  shop://items/{{sku}}  An item — One item.
Prompts (1)
  pitch(sku, tone?) — Write a sales pitch.

Lint: 3 warnings, 2 infos
  info: find: $.inputSchema.properties.tag: parameter 'tag' has no description (document it in the docstring's \
Args section, or with Annotated[..., 'what it is']) [param-no-description]
  warning: find: $.inputSchema.properties.tag.type: type is a list ["string", "null"]; hosts that read one type per \
schema drop or refuse it: make it a plain type with a default [type-array]
  warning: label: $.description: the tool has no description; write a docstring saying what it does and when to \
use it [no-description]
  info: label: $.inputSchema.properties.item: parameter 'item' has no description (document it in the docstring's \
Args section, or with Annotated[..., 'what it is']) [param-no-description]
  warning: label: $.inputSchema.properties.item.$ref: $ref '#/$defs/Item': hosts that do not resolve references see \
an empty schema; inline the definition (a flat set of parameters) [ref]
"""


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, "inspect", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def write(tmp_path: Path, source: str, name: str = "deck.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


async def listed(target: str) -> dict[str, list[dict[str, Any]]]:
    """What a schema-checked client gets from the deck's lists, to compare with what inspect printed."""
    async with client(load_deck(target)) as c:
        return {
            "tools": await c.list_tools(),
            "resources": (await c.request("resources/list"))["resources"],
            "resourceTemplates": (await c.request("resources/templates/list"))["resourceTemplates"],
            "prompts": (await c.request("prompts/list"))["prompts"],
        }


def test_the_summary_for_people(tmp_path: Path) -> None:
    done = inspect(write(tmp_path, SHOP))
    assert (done.returncode, done.stderr) == (0, "importing the shop\n")
    assert done.stdout == SHOP_TEXT


async def test_the_json_is_what_a_host_sees_plus_the_warnings(tmp_path: Path) -> None:
    target = write(tmp_path, SHOP)
    done = inspect(target, "--json")
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)
    assert list(summary) == ["server", "tools", "resources", "resourceTemplates", "prompts", "unlisted", "warnings"]
    assert {key: summary[key] for key in ("tools", "resources", "resourceTemplates", "prompts")} == await listed(target)
    server = summary["server"]
    assert {k: server[k] for k in ("name", "version", "title", "protocolVersion", "instructions")} == {
        "name": "shop", "version": "2.1.0", "title": "Shop", "protocolVersion": LATEST,
        "instructions": "Look things up in the shop.\nSecond line.",
    }  # fmt: skip
    assert set(server["capabilities"]) >= {"tools", "resources", "prompts", "tasks"}
    assert summary["unlisted"] == {"tools": ["restock"], "resources": 0, "resourceTemplates": 0, "prompts": 0}
    assert [(w["severity"], w["code"], w["tool"], w["path"]) for w in summary["warnings"]] == [
        ("info", "param-no-description", "find", "$.inputSchema.properties.tag"),
        ("warning", "type-array", "find", "$.inputSchema.properties.tag.type"),
        ("warning", "no-description", "label", "$.description"),
        ("info", "param-no-description", "label", "$.inputSchema.properties.item"),
        ("warning", "ref", "label", "$.inputSchema.properties.item.$ref"),
    ]
    assert all(set(w) == {"severity", "code", "tool", "path", "message"} for w in summary["warnings"])


def test_the_demo_deck_when_no_target_is_given_and_hosts_can_read_all_of_it() -> None:
    done = inspect("--json", "--strict")
    assert done.returncode == 0, done.stdout + done.stderr  # --strict: no warning-level finding in the demo
    summary = orjson.loads(done.stdout)
    assert summary["server"]["name"] == "tooldeck-demo"
    assert {"calculate", "convert_units", "count_primes"} <= {tool["name"] for tool in summary["tools"]}
    text = inspect()
    assert text.returncode == 0
    assert text.stdout.startswith(f"tooldeck-demo {summary['server']['version']} (tooldeck demo), protocol {LATEST}\n")
    for tool in summary["tools"]:
        assert f"\n  {tool['name']}" in text.stdout


def test_strict_fails_on_warnings_but_not_on_infos(tmp_path: Path) -> None:
    assert inspect(write(tmp_path, SHOP), "--strict").returncode == 1
    infos_only = "from tooldeck import Deck\ndeck = Deck('d')\n@deck.tool\ndef f(x: int) -> int:\n    '''Echo.'''\n"
    done = inspect(write(tmp_path, infos_only, "infos.py"), "--strict")
    assert done.returncode == 0
    assert done.stdout.endswith(
        "Lint: 0 warnings, 1 infos\n  info: f: $.inputSchema.properties.x: parameter 'x' has no description "
        "(document it in the docstring's Args section, or with Annotated[..., 'what it is']) [param-no-description]\n"
    )


@pytest.mark.parametrize(("length", "warned"), [(1024, False), (1025, True)])
def test_a_description_longer_than_1024_characters(tmp_path: Path, length: int, warned: bool) -> None:
    source = (
        "from tooldeck import Deck\ndeck = Deck('d')\n"
        f"deck.add_tool(lambda: 1, name='long', description={'x' * length!r})\n"
    )
    summary = orjson.loads(inspect(write(tmp_path, source), "--json").stdout)
    codes = [(w["code"], w["path"]) for w in summary["warnings"]]
    assert codes == ([("long-description", "$.description")] if warned else [])


def test_hand_written_schemas_missing_types_unions_and_odd_names(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "anything": {"description": "no type at all"},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "a union"},
            "odd name": {"type": "array", "items": {"type": ["number", "null"]}, "description": "nested"},
            "fixed": {"const": 3, "description": "a const is typed enough"},
        },
        "$defs": {"Unused": {"type": ["string", "null"]}},
    }
    source = (
        "from tooldeck import Deck\ndeck = Deck('d')\n"
        f"deck.add_tool(lambda **kw: 1, name='raw', description='Raw.', input_schema={schema!r})\n"
    )
    summary = orjson.loads(inspect(write(tmp_path, source), "--json").stdout)
    assert [(w["code"], w["path"]) for w in summary["warnings"]] == [
        ("missing-type", "$.inputSchema.properties.anything"),
        ("top-level-union", "$.inputSchema.properties.either.oneOf"),
        ("type-array", '$.inputSchema.properties["odd name"].items.type'),
        ("type-array", "$.inputSchema.$defs.Unused.type"),
    ]


def test_every_page_of_a_paginated_deck(tmp_path: Path) -> None:
    source = "from tooldeck import Deck\ndeck = Deck('d', page_size=2)\n" + "".join(
        f"deck.add_tool(lambda: 1, name='t{n}', description='T.')\n" for n in range(5)
    )
    summary = orjson.loads(inspect(write(tmp_path, source), "--json").stdout)
    assert [tool["name"] for tool in summary["tools"]] == ["t0", "t1", "t2", "t3", "t4"]


def test_a_policy_shows_what_its_stdio_user_sees(tmp_path: Path) -> None:
    target = write(tmp_path, SHOP)
    policy = tmp_path / "policy.toml"
    policy.write_text('[authentication.stdio]\nscopes = ["shop:write"]\n')
    done = inspect(target, "--policy", str(policy))
    assert done.returncode == 0, done.stderr
    assert "  restock\n    Restock an item.\n    parameters:\n      sku: string, required\n" in done.stdout
    assert "    tasks forbidden · security level 5 · scopes shop:write\n" in done.stdout
    assert "not listed" not in done.stdout
    policy.write_text("[authentication.stdio]\nscopes = 3\n")
    done = inspect(target, "--policy", str(policy))
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr == f"importing the shop\ntooldeck: {policy}:2: authentication.stdio.scopes: expected array, got 3\n"
    )


def test_a_target_that_does_not_load_is_one_line(tmp_path: Path) -> None:
    done = inspect(str(tmp_path / "missing.py"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tooldeck: {tmp_path / 'missing.py'}: no such file\n"


def test_the_readme_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    readme = (Path(ROOT) / "README.md").read_text()
    section = readme.split("\n## Connect a host\n", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"```bash\n(.*?)```", section, re.S)[-1].strip().splitlines()
    (expected,) = re.findall(r"```text\n(.*?)```", section, re.S)
    (tmp_path / "app.py").write_text(re.findall(r"```python\n(.*?)```", readme, re.S)[0])
    words = shlex.split(command)
    assert words[:2] == ["tooldeck", "inspect"]
    done = subprocess.run([*TOOLDECK, *words[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == expected
