"""Tests for manifest/definition.py: the seed's example, every schema and registration rule with its exact problem
line, JSON and YAML alike, reading errors with line and column, and the files of a directory."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from seeds import seed_calculator
from tooldeck.manifest.definition import (
    Definition,
    DefinitionError,
    Problem,
    check_document,
    check_unique_ids,
    definition_files,
    digest,
    format_schema,
    load_definition,
    parse_definition,
)


def problems_of(change: Callable[[dict[str, Any]], Any]) -> list[str]:
    document = seed_calculator()
    change(document)
    return [str(problem) for problem in check_document(document, "calc.json")]


def test_the_seed_example_validates_as_it_stands() -> None:
    document = seed_calculator()
    assert document["id"] == "calculator" and [c["name"] for c in document["capabilities"]] == ["add", "subtract"]
    assert check_document(document, "calc.json") == []
    definition = parse_definition(document, "calc.json")
    assert (definition.id, definition.version, definition.label) == ("calculator", "1.0.0", "calculator@1.0.0")
    assert definition.tool_names() == ["calculator.add", "calculator.subtract"]
    assert definition.digest == digest(document) and len(definition.digest) == 64
    assert repr(definition) == f"<Definition calculator@1.0.0 {definition.digest[:12]}>"


def test_the_shipped_schema_is_the_file_beside_the_module() -> None:
    schema = format_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["id", "name", "version", "description", "capabilities"]


@pytest.mark.parametrize("key", ["id", "name", "version", "description", "capabilities"])
def test_each_required_property(key: str) -> None:
    assert problems_of(lambda d: d.pop(key)) == [f"calc.json: $: missing required property {key!r}"]


def set_(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


SCHEMA_CASES = [
    (["capabilities"], [], "$.capabilities: expected at least 1 item, got 0"),
    (["capabilities"], {}, "$.capabilities: expected array, got an empty object"),
    (["id"], 3, "$.id: expected string, got an integer"),
    (["id"], "", '$.id: expected at least 1 character, got an empty string'),
    (["name"], None, "$.name: expected string, got null"),
    (["description"], ["x"], '$.description: expected string, got an array'),
    (["version"], 1.0, '$.version: expected string, got a number; quote it, as in version: "1.0.0"'),
    (["capabilities", 0, "name"], "", '$.capabilities[0].name: expected at least 1 character, got an empty string'),
    (["capabilities", 0, "parameters", 0, "required"], "yes",
     '$.capabilities[0].parameters[0].required: expected boolean, got a string'),
    (["capabilities", 1, "parameters", 0, "type"], "numbr",
     '$.capabilities[1].parameters[0].type: expected one of "string", "number", "boolean", "object", "array", "any", '
     'got a string'),
    (["securityLevel"], 11, "$.securityLevel: expected a number <= 10, got an integer"),
    (["securityLevel"], -1, "$.securityLevel: expected a number >= 0, got an integer"),
    (["securityLevel"], 1.5, "$.securityLevel: expected integer, got a number"),
    (["securityLevel"], True, "$.securityLevel: expected integer, got a boolean"),
    (["securityLevel"], "1", '$.securityLevel: expected integer, got a string'),
    (["capabilities", 0, "securityLevel"], 11, "$.capabilities[0].securityLevel: expected a number <= 10, got an integer"),
    (["extra"], 1, "$: unexpected property at key 8 of 8 (a name the format does not have, not repeated here)"),
    (["securityLevle"], 1, "$: unexpected property 'securityLevle'; did you mean 'securityLevel'?"),
    (["capabilities", 0, "extra"], 1,
     "$.capabilities[0]: unexpected property at key 5 of 5 (a name the format does not have, not repeated here)"),
    (["capabilities", 0, "parameters", 0, "default"], 1,
     "$.capabilities[0].parameters[0]: unexpected property at key 5 of 5 (a name the format does not have, not "
     "repeated here)"),
    (["capabilities", 0, "return", "schema"], 3, "$.capabilities[0].return.schema: expected boolean or object, got an integer"),
    (["metadata", "tags"], ["a", 1], "$.metadata.tags[1]: expected string, got an integer"),
    (["scopes"], ["has space"], '$.scopes[0]: expected a string matching \'^[!#-\\[\\]-~]+$\', got a string'),
    (["task"], "sometimes", '$.task: expected one of "forbidden", "optional", "required", got a string'),
    (["annotations"], {"readOnly": True}, "$.annotations: unexpected property 'readOnly'; did you mean 'readOnlyHint'?"),
    (["handler"], 5, "$.handler: expected string or object, got an integer"),
    (["handler"], "nocolon",
     "$.handler: expected a string matching '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
     "(\\.[A-Za-z_][A-Za-z0-9_]*)*$', got a string"),
    (["handler"], {"command": []}, "$.handler.command: expected at least 1 item, got 0"),
    (["handler"], {"command": [""]}, '$.handler.command[0]: expected at least 1 character, got an empty string'),
    (["handler"], {"command": ["x"], "timeout": 0}, "$.handler.timeout: expected a number > 0, got an integer"),
    (["handler"], {"command": ["x"], "env": ["A B"]},
     "$.handler.env[0]: expected a string matching '^[A-Za-z_][A-Za-z0-9_]*$', got a string"),
    (["capabilities", 0, "handler"], {"command": ["x"], "shell": True},
     "$.capabilities[0].handler: unexpected property at key 2 of 2 (a name the format does not have, not repeated here)"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "expected"), SCHEMA_CASES)
def test_each_schema_rule_has_its_exact_problem_line(path: list[Any], value: Any, expected: str) -> None:
    assert problems_of(set_(path, value)) == [f"calc.json: {expected}"]


def test_a_handler_without_command_says_so() -> None:
    assert problems_of(set_(["handler"], {"cmd": ["x"]})) == [
        "calc.json: $.handler: missing required property 'command'",
        "calc.json: $.handler: unexpected property at key 1 of 1 (a name the format does not have, not repeated here)",
    ]


def test_every_schema_problem_is_listed_not_only_the_first() -> None:
    def change(document: dict[str, Any]) -> None:
        document["securityLevel"] = 11
        document["capabilities"][1]["parameters"][0]["type"] = "numbr"
        del document["name"]

    assert len(problems_of(change)) == 3


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0-", "01.0.0", ""])
def test_the_version_must_be_semantic(version: str) -> None:
    assert problems_of(set_(["version"], version)) == [
        "calc.json: $.version: is not a semantic version (MAJOR.MINOR.PATCH, like 1.0.0)"
    ]


@pytest.mark.parametrize("version", ["0.0.1", "1.0.0-rc.1", "2.3.4+build.5"])
def test_semantic_versions_with_pre_release_and_build_pass(version: str) -> None:
    assert problems_of(set_(["version"], version)) == []


def test_capability_names_are_unique_within_a_tool() -> None:
    assert problems_of(set_(["capabilities", 1, "name"], "add")) == [
        "calc.json: $.capabilities[1].name: capability 'add' is already defined at $.capabilities[0]"
    ]


def test_parameter_names_are_unique_within_a_capability() -> None:
    assert problems_of(set_(["capabilities", 0, "parameters", 1, "name"], "a")) == [
        "calc.json: $.capabilities[0].parameters[1].name: parameter 'a' is already defined at "
        "$.capabilities[0].parameters[0]"
    ]


def test_the_same_parameter_name_in_two_capabilities_is_fine() -> None:
    assert problems_of(lambda d: None) == []  # add and subtract both take a and b


def test_an_id_that_cannot_start_a_tool_name() -> None:
    assert problems_of(set_(["id"], "my tool")) == [
        "calc.json: $.id: cannot start an MCP tool name: use 1-128 characters of A-Z a-z 0-9 _ - . only"
    ]


@pytest.mark.parametrize("name", ["a/b", "x" * 118, "ü"])
def test_a_capability_that_cannot_form_a_tool_name(name: str) -> None:
    assert problems_of(set_(["capabilities", 0, "name"], name)) == [
        f"calc.json: $.capabilities[0].name: with the id it forms a tool name ({len(name) + 11} characters) that is "
        "not a valid MCP tool name: 1-128 characters of A-Z a-z 0-9 _ - ."
    ]


def test_a_tool_name_of_exactly_128_characters_passes() -> None:
    assert problems_of(set_(["capabilities", 0, "name"], "x" * 117)) == []  # "calculator." is 11 characters


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "strnig"}, '$.type: expected one of "array", "boolean", "integer", "null", "number", "object", '
                             '"string" or array, got a string'),
        ({"minimum": "a"}, "$.minimum: expected number, got a string"),
    ],
)  # fmt: skip
def test_a_return_schema_must_be_a_usable_json_schema(schema: dict[str, Any], reason: str) -> None:
    assert problems_of(set_(["capabilities", 0, "return", "schema"], schema)) == [
        f"calc.json: $.capabilities[0].return.schema: invalid JSON Schema (2020-12): {reason}"
    ]


def test_rules_are_checked_only_once_the_shape_is_right() -> None:
    def change(document: dict[str, Any]) -> None:
        document["version"] = "1.0"
        document["extra"] = True

    assert problems_of(change) == [
        "calc.json: $: unexpected property at key 8 of 8 (a name the format does not have, not repeated here)"
    ]


def test_parse_definition_raises_with_every_problem() -> None:
    document = seed_calculator()
    document["version"] = "v1"
    document["capabilities"][1]["name"] = "add"
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document, "calc.json")
    assert [problem.to_json() for problem in caught.value.problems] == [
        {"file": "calc.json", "path": "$.version",
         "message": "is not a semantic version (MAJOR.MINOR.PATCH, like 1.0.0)"},
        {"file": "calc.json", "path": "$.capabilities[1].name",
         "message": "capability 'add' is already defined at $.capabilities[0]"},
    ]  # fmt: skip
    assert str(caught.value) == "\n".join(str(problem) for problem in caught.value.problems)


def test_the_digest_ignores_key_order_and_layout_but_not_content() -> None:
    document = seed_calculator()
    reordered = dict(reversed(list(copy.deepcopy(document).items())))
    assert digest(reordered) == digest(document)
    document["description"] += "."
    assert digest(document) != digest(reordered)


# --- files ----------------------------------------------------------------------------------------------------------


def test_the_digest_covers_the_files_a_command_names(tmp_path: Path) -> None:
    import hashlib
    import shutil

    (tmp_path / "ops.sh").write_text("#!/bin/sh\necho 1\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "helper.py").write_text("print(1)\n")
    document = seed_calculator()
    document["handler"] = {"command": ["./ops.sh", "--verbose"]}
    document["capabilities"][1]["handler"] = {"command": ["python3", "helper.py", "-m", "x"], "cwd": "work"}
    (tmp_path / "calc.json").write_text(json.dumps(document))
    first = load_definition(tmp_path / "calc.json")

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    assert first.files == {"ops.sh": sha(tmp_path / "ops.sh"), "work/helper.py": sha(tmp_path / "work" / "helper.py")}
    assert first.digest == digest(document, first.files) != digest(document)
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("elsewhere"))
    assert load_definition(moved / "calc.json").digest == first.digest  # where the directory is does not count
    for changed in (tmp_path / "ops.sh", tmp_path / "work" / "helper.py"):
        changed.write_text(changed.read_text() + "# changed\n")
        again = load_definition(tmp_path / "calc.json")
        assert again.digest != first.digest
        first = again
    (tmp_path / "ops.sh").unlink()
    assert load_definition(tmp_path / "calc.json").files["ops.sh"] == "missing"


def test_json_and_yaml_files_of_the_same_definition_have_the_same_digest(tmp_path: Path) -> None:
    document = seed_calculator()
    (tmp_path / "calc.json").write_text(json.dumps(document, indent=2))
    (tmp_path / "calc.yaml").write_text(yaml.safe_dump(document, sort_keys=True))
    from_json = load_definition(tmp_path / "calc.json")
    from_yaml = load_definition(tmp_path / "calc.yaml")
    assert from_json.document == from_yaml.document == document
    assert from_json.digest == from_yaml.digest == digest(document)
    assert from_json.source == str(tmp_path / "calc.json") and from_json.base_dir == str(tmp_path)


def test_a_definition_built_in_code_has_no_source_and_the_working_directory_as_base(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    definition = Definition(seed_calculator())
    assert definition.source is None and definition.base_dir == str(tmp_path)


YAML_HEAD = "id: calc\nname: Calc\nversion: 1.0.0\ndescription: d\ncapabilities:\n  - name: add\n    description: d\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (YAML_HEAD + "metadata:\n  released: 2024-01-01\n",
         "calc.yaml: $.metadata.released: a YAML date is not a JSON value; quote it to make it a string"),
        (YAML_HEAD + "metadata:\n  1: one\n", "calc.yaml: $.metadata: key 1 of 1 is a YAML int, not a string; quote it"),
        (YAML_HEAD + "metadata:\n  true: yes\n",
         "calc.yaml: $.metadata: key 1 of 1 is a YAML bool, not a string; quote it"),
        (YAML_HEAD + "metadata:\n  n: .nan\n",
         "calc.yaml: $.metadata.n: NaN or an infinity is not a JSON number; quote it to make it a string"),
        (YAML_HEAD + "metadata:\n  tags: [-.inf]\n",
         "calc.yaml: $.metadata.tags[0]: NaN or an infinity is not a JSON number; quote it to make it a string"),
        (YAML_HEAD + "metadata:\n  big: 18446744073709551616\n",
         "calc.yaml: $.metadata.big: an integer that does not fit in 64 bits, as JSON numbers must here; quote it "
         "to make it a string"),
        (YAML_HEAD.replace("1.0.0", "1.0"), 'calc.yaml: $.version: expected string, got a number; quote it, as in version: "1.0.0"'),
        ("", "calc.yaml: $: expected object, got null"),
    ],
)  # fmt: skip
def test_yaml_only_problems(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "calc.yaml").write_text(text)
    with pytest.raises(DefinitionError) as caught:
        load_definition(tmp_path / "calc.yaml", "calc.yaml")
    assert str(caught.value) == expected


# The YAML library words its own errors (libyaml and the pure-Python loader differently); tooldeck adds the place.
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("id: calc\nname: [unclosed\n", r".+ at line 3, column 1"),
        ("id: calc\n  name: x\n", r"mapping values are not allowed .+ at line 2, column 7"),
        ("id: calc\nname: 'open\n", r".+ at line 3, column 1"),
        # safe loading: a Python object tag is refused, not built
        ("!!python/object/apply:os.system ['true']\n", r"could not determine a constructor .+ at line 1, column 1"),
    ],
)
def test_yaml_syntax_errors_have_line_and_column(tmp_path: Path, text: str, reason: str) -> None:
    (tmp_path / "calc.yaml").write_text(text)
    with pytest.raises(DefinitionError) as caught:
        load_definition(tmp_path / "calc.yaml", "calc.yaml")
    assert re.fullmatch(rf"calc\.yaml: \$: not valid YAML: {reason}", str(caught.value)), str(caught.value)


def test_the_largest_integers_json_holds_here_pass(tmp_path: Path) -> None:
    (tmp_path / "calc.yaml").write_text(
        YAML_HEAD + "metadata:\n  big: 18446744073709551615\n  small: -9223372036854775808\n"
    )
    assert load_definition(tmp_path / "calc.yaml").document["metadata"] == {"big": 2**64 - 1, "small": -(2**63)}


def test_yml_is_yaml_too(tmp_path: Path) -> None:
    (tmp_path / "calc.yml").write_text(YAML_HEAD)
    assert load_definition(tmp_path / "calc.yml").id == "calc"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"id": "calc",\n  "name": }\n', "unexpected character, expected a JSON value at line 2, column 11"),
        # the column counts characters, not bytes, and the line is found in a file with non-ASCII text before it
        ('{"id": "ééééééééééééééééééé",\n "name": }\n'.encode(),
         "unexpected character, expected a JSON value at line 2, column 10"),
        (b'{"id": "calc"', "unexpected end of data at line 1, column 14"),
        (b"", "Input is a zero-length, empty document at line 1, column 1"),
    ],
)  # fmt: skip
def test_json_syntax_errors_have_line_and_column(tmp_path: Path, data: bytes, expected: str) -> None:
    (tmp_path / "calc.json").write_bytes(data)
    with pytest.raises(DefinitionError) as caught:
        load_definition(tmp_path / "calc.json", "calc.json")
    assert str(caught.value) == f"calc.json: $: not valid JSON: {expected}"


def test_a_directory_or_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(DefinitionError, match=r"^dir\.json: \$: is a directory, not a definition file$"):
        load_definition(tmp_path / "dir.json", "dir.json")
    with pytest.raises(DefinitionError) as caught:
        load_definition(tmp_path / "missing.json")
    assert str(caught.value) == f"{tmp_path / 'missing.json'}: $: no such file"


def test_problems_in_a_file_are_named_by_its_label(tmp_path: Path) -> None:
    document = seed_calculator()
    document["securityLevel"] = 11
    (tmp_path / "calc.json").write_text(json.dumps(document))
    with pytest.raises(DefinitionError) as caught:
        load_definition(tmp_path / "calc.json")
    assert caught.value.problems == [
        Problem(str(tmp_path / "calc.json"), "$.securityLevel", "expected a number <= 10, got an integer")
    ]


def test_ids_are_unique_across_files() -> None:
    first = Definition(seed_calculator(), source="a/calc.json")
    other = seed_calculator()
    other["name"] = "Another calculator"
    second = Definition(other, source="b/calc.yaml")
    unrelated = seed_calculator()
    unrelated["id"] = "abacus"
    assert check_unique_ids([first, Definition(unrelated, source="c.json")]) == []
    assert [str(p) for p in check_unique_ids([first, second, Definition(unrelated, source="c.json")])] == [
        "b/calc.yaml: $.id: id 'calculator' is also defined in a/calc.json"
    ]
    # definitions built in code have no file to name
    assert [str(p) for p in check_unique_ids([Definition(seed_calculator()), Definition(other)])] == [
        "calculator: $.id: id 'calculator' is defined twice"
    ]


def test_definition_files_are_sorted_and_skip_hidden_and_other_files(tmp_path: Path) -> None:
    for name in ["b.yaml", "a.json", ".hidden.json", "c.yml", "notes.txt", "d.json~", "A.json"]:
        (tmp_path / name).write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "e.json").write_text("{}")
    assert definition_files(str(tmp_path)) == [str(tmp_path / n) for n in ["A.json", "a.json", "b.yaml", "c.yml"]]
