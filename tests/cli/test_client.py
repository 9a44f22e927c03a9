"""The client commands in process (a deck file, or the demo deck when no TARGET is given), as real subprocesses:
every command, the word grammar, key=value conversion through the inputSchema, and one clear line for every mistake."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK
from tooldeck.cli.arguments import prompt_arguments, split_arguments, tool_arguments
from tooldeck.protocol.errors import TargetError

DECK = "tests/cli/decks/client_deck.py"
DECK_TOOLS = ["kinds", "greet", "build", "chatty", "hang", "fail"]


def run(*args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, *args], capture_output=True, text=True, cwd=ROOT, timeout=60, stdin=stdin)


def one_line(done: subprocess.CompletedProcess[str], status: int, start: str) -> None:
    assert done.returncode == status, done.stderr
    assert done.stderr.startswith(start), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


# --- every command, against the demo deck (no TARGET) and a deck file ---------------------------------------------


def test_tools_without_target_lists_the_demo_deck() -> None:
    done = run("tools")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("calculate(expression: string) -> number\n")
    assert "count_primes(limit: integer) -> object  [task: optional]" in done.stdout
    assert "calculator.divide(a: number, b: number) -> number" in done.stdout


def test_tools_of_a_deck_file_follow_every_page() -> None:
    done = run("tools", DECK, "--json")  # the deck's page size is 2: three pages of tools
    assert done.returncode == 0, done.stderr
    assert [tool["name"] for tool in orjson.loads(done.stdout)["tools"]] == DECK_TOOLS


def test_a_deck_printing_does_not_reach_the_output(tmp_path: Path) -> None:
    deck = tmp_path / "loud.py"
    deck.write_text(
        "from tooldeck import Deck\nprint('loading')\ndeck = Deck('loud')\n"
        "@deck.tool\ndef shout() -> str:\n    print('shouting')\n    return 'HI'\n"
    )
    done = run("call", str(deck), "shout")
    assert (done.returncode, done.stdout, done.stderr) == (0, "HI\n", "loading\nshouting\n")


def test_call_without_target_calls_the_demo_deck() -> None:
    done = run("call", "calculate", "expression=2 * (3 + 4)")
    assert (done.returncode, done.stdout, done.stderr) == (0, "14.0\n", "")


def test_call_prints_structured_results_as_pretty_json() -> None:
    done = run("call", "convert_units", "value=100", "from_unit=C", "to_unit=F")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('{\n  "value": 100.0,\n')
    assert orjson.loads(done.stdout)["result"] == 212.0


def test_call_a_deck_file_tool_with_text_result() -> None:
    done = run("call", DECK, "greet", "who=Ada")
    assert (done.returncode, done.stdout) == (0, "hello Ada\n")


def test_call_json_prints_the_wire_result() -> None:
    done = run("call", DECK, "greet", '{"who": "Ada"}', "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {
        "content": [{"type": "text", "text": "hello Ada"}],
        "structuredContent": {"result": "hello Ada"},
        "isError": False,
    }


def test_call_is_error_exits_1_with_the_message_on_one_line() -> None:
    done = run("call", DECK, "fail")
    one_line(done, 1, "tooldeck: fail: the flux capacitor is broken")
    assert done.stdout == ""


def test_call_shows_log_messages_on_stderr() -> None:
    done = run("call", DECK, "chatty")
    assert (done.returncode, done.stdout) == (0, "done\n")
    assert "[warning] store: disk almost full\n" in done.stderr


def test_resources_lists_resources_and_templates() -> None:
    done = run("resources", DECK)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "config://app  config (application/json)\n    The app's settings.\n"
        "data://blob  blob (application/octet-stream)\n"
        "templates:\nusers://{user_id}/profile  profile\n    A user's profile.\n"
    )
    listing = orjson.loads(run("resources", DECK, "--json").stdout)
    assert [r["uri"] for r in listing["resources"]] == ["config://app", "data://blob"]
    assert [t["uriTemplate"] for t in listing["resourceTemplates"]] == ["users://{user_id}/profile"]


def test_resources_of_the_demo_deck_are_none() -> None:
    done = run("resources", "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {"resources": [], "resourceTemplates": []}


def test_read_prints_text_and_writes_binary_bytes() -> None:
    assert run("read", DECK, "config://app").stdout == '{"theme":"dark"}\n'
    assert run("read", DECK, "users://7/profile").stdout == "profile of 7\n"  # a URI with no '=' ...
    done = subprocess.run([*TOOLDECK, "read", DECK, "data://blob"], capture_output=True, cwd=ROOT, timeout=60)
    assert done.stdout == bytes(range(256))
    done = run("read", DECK, "config://app", "--json")
    assert orjson.loads(done.stdout)["contents"][0]["mimeType"] == "application/json"


def test_read_a_uri_with_equals_signs_is_a_name_not_an_argument() -> None:
    done = run("read", DECK, "users://7/profile?x=1")
    one_line(done, 2, "tooldeck: ")
    assert "users://7/profile?x=1" in done.stderr  # the server's -32002 names the URI it was given


def test_prompts_and_prompt() -> None:
    done = run("prompts", DECK)
    assert (done.returncode, done.stdout) == (0, "review(code, language?)\n    Ask for a code review.\n")
    done = run("prompt", DECK, "review", "code=x = 1", "language=go")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "# Ask for a code review.\n\n[user]\nReview this go code:\nx = 1\n"
    wire = orjson.loads(run("prompt", DECK, "review", '{"code": "y"}', "--json").stdout)
    assert wire["messages"][0]["content"] == {"type": "text", "text": "Review this python code:\ny"}


def test_options_may_come_after_the_words() -> None:
    done = run("call", DECK, "greet", "--json", "who=Ada")
    assert orjson.loads(done.stdout)["structuredContent"] == {"result": "hello Ada"}


# --- key=value conversion through the inputSchema ---------------------------------------------------------------


def test_key_value_arguments_get_the_schema_types_in_a_real_call() -> None:
    done = run("call", DECK, "kinds", "count=3", "ratio=2", "flag=true", 'tags=["a", "b"]', 'extra:={"k": 1}')
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {
        "count": [3, "int"],
        "ratio": [2.0, "float"],
        "flag": [True, "bool"],
        "tags": [["a", "b"], "list"],
        "extra": [{"k": 1}, "dict"],
        "name": ["x", "str"],
    }


KINDS = {
    "name": "kinds",
    "inputSchema": {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array"},
            "extra": {"type": "object"},
            "name": {"type": "string"},
            "maybe": {"type": ["integer", "null"]},
            "choice": {"enum": ["a", 1]},
            "shape": {"$ref": "#/$defs/Shape"},
            "free": {},
        },
        "$defs": {"Shape": {"type": "integer"}},
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (["count=3"], {"count": 3}),
        (["count=3.0"], {"count": 3}),
        (["ratio=3"], {"ratio": 3}),
        (["ratio=2.5"], {"ratio": 2.5}),
        (["flag=True"], {"flag": True}),
        (["flag=false"], {"flag": False}),
        (["tags=[1, 2]"], {"tags": [1, 2]}),
        (['extra={"a": {"b": 1}}'], {"extra": {"a": {"b": 1}}}),
        (["name=3"], {"name": "3"}),
        (["name=a=b"], {"name": "a=b"}),
        (["name="], {"name": ""}),
        (['name:="quoted"'], {"name": "quoted"}),
        (["count:=3.5"], {"count": 3.5}),  # raw JSON is not converted: the server judges it
        (["maybe=null"], {"maybe": None}),
        (["maybe=4"], {"maybe": 4}),
        (["choice=a"], {"choice": "a"}),
        (["choice=1"], {"choice": 1}),
        (["shape=7"], {"shape": 7}),
        (["free=[1]"], {"free": [1]}),
        (["free=plain words"], {"free": "plain words"}),
        (['{"count": 1, "name": "j"}', "count=2"], {"count": 2, "name": "j"}),
    ],
)
def test_conversion(tokens: list[str], expected: dict[str, Any]) -> None:
    assert tool_arguments(tokens, KINDS) == expected


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (["count=three"], "count=three: count takes an integer, like 3"),
        (["count=2.5"], "count=2.5: count takes an integer, like 3"),
        (["ratio=x"], "ratio=x: ratio takes a number, like 2.5"),
        (["flag=yes"], "flag=yes: flag takes true or false"),
        (["tags=a,b"], "tags=a,b: tags takes a JSON array, like '[1, 2]'"),
        (["extra=[1]"], "extra=[1]: extra takes a JSON object, like '{\"a\": 1}'"),
        (["maybe=x"], "maybe=x: maybe takes an integer, like 3 or null"),
        (["choice=b"], "choice=b: choice is one of a | 1"),
        (["nope=1"], "kinds has no parameter 'nope' (parameters: count, ratio, flag, tags, extra, name, maybe,"),
        (["count:=[1"], "count:=[1: not valid JSON"),
        (["=1"], "'=1': an argument needs a name, like x=3 or x:=[1, 2]"),
        (["{bad"], "arguments are not valid JSON"),
        (["[1]"], "arguments must be a JSON object"),
    ],
)
def test_conversion_errors_name_the_parameter_and_the_type(tokens: list[str], message: str) -> None:
    with pytest.raises(TargetError) as raised:
        tool_arguments(tokens, KINDS)
    assert str(raised.value).startswith(message), str(raised.value)


def test_prompt_arguments_are_strings() -> None:
    review = {"name": "review", "arguments": [{"name": "code", "required": True}, {"name": "language"}]}
    assert prompt_arguments(["code=1", 'language:="go"'], review) == {"code": "1", "language": "go"}
    with pytest.raises(TargetError, match=r"^code: prompt arguments are strings"):
        prompt_arguments(["code:=1"], review)
    with pytest.raises(TargetError, match=r"^prompt review has no argument 'lang' \(arguments: code, language\)"):
        prompt_arguments(["lang=go"], review)


def test_the_words_split_into_names_then_arguments() -> None:
    assert split_arguments(["app.py:deck", "add", "a=1", "b:=2", '{"c": 3}']) == (
        ["app.py:deck", "add"],
        ["a=1", "b:=2", '{"c": 3}'],
    )
    with pytest.raises(TargetError, match="'b' comes after the arguments"):
        split_arguments(["add", "a=1", "b"])


# --- one clear line for each mistake --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (("call", DECK, "kinds", "count=x"), 2, "tooldeck: count=x: count takes an integer, like 3"),
        (("call", DECK, "greet", "whom=x"), 2, "tooldeck: greet has no parameter 'whom' (parameters: who)"),
        (("call", DECK, "greet", "who=x", "extra"), 2, "tooldeck: 'extra' comes after the arguments"),
        (("call",), 2, "tooldeck: TOOL is missing: tooldeck call [TARGET] TOOL [key=value ...]"),
        (("call", "a", "b", "c"), 2, "tooldeck: too many names (a b c): the words are tooldeck call [TARGET] TOOL"),
        (("call", DECK), 2, f"tooldeck: unknown tool '{DECK}' (tools: calculate,"),
        (("call", DECK, "nope"), 2, "tooldeck: unknown tool 'nope' (tools: kinds, greet, build, chatty, hang, fail)"),
        (("call", DECK, "greet", "--task"), 2, "tooldeck: greet does not run as a task"),
        (("tools", "a", "b"), 2, "tooldeck: too many names (a b): the words are tooldeck tools [TARGET]"),
        (("tools", DECK, "--url", "http://x/mcp"), 2, "tooldeck: a TARGET and --url both name a server"),
        (("tools", DECK, "--", "python"), 2, "tooldeck: a TARGET and a command after -- both name a server"),
        (("tools", "--url", "http://x/mcp", "--", "py"), 2, "tooldeck: --url and a command after -- both name"),
        (("tools", "--token", "t"), 2, "tooldeck: --header and --token are sent to a server at --url"),
        (("tools", "--url", "http://x/mcp", "--header", "nocolon"), 2, "tooldeck: --header 'nocolon': write a"),
        (("tools", "--"), 2, "tooldeck: nothing after '--': give the MCP server command to run"),
        (("read",), 2, "tooldeck: URI is missing: tooldeck read [TARGET] URI"),
        (("read", DECK, "nothing://here"), 2, "tooldeck: "),
        (("prompt", DECK, "review", "lang=go"), 2, "tooldeck: prompt review has no argument 'lang'"),
        (("prompt", DECK, "review"), 2, "tooldeck: "),  # the server's -32602 for the missing argument
        (("prompt", DECK, "nope"), 2, "tooldeck: unknown prompt 'nope' (prompts: review)"),
        (("tools", "missing_file.py"), 2, "tooldeck: missing_file.py: no such file"),
    ],
)
def test_mistakes_are_one_clear_line(args: tuple[str, ...], status: int, message: str) -> None:
    one_line(run(*args), status, message)


def test_a_lone_target_like_name_gets_a_hint() -> None:
    done = run("call", DECK)
    assert f"; if {DECK} is a TARGET, name the tool after it" in done.stderr


def test_a_closed_pipe_exits_quietly() -> None:
    # `tooldeck tools | head -1`, made certain: the reader is gone before the first write.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*TOOLDECK, "tools"], stdout=write_end, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == b""


def test_head_of_a_listing() -> None:
    done = subprocess.run(
        f"{' '.join(TOOLDECK)} tools | head -1", shell=True, capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert (done.stdout, done.stderr) == ("calculate(expression: string) -> number\n", "")
