"""Tests for manifest/changes.py: every classification rule both ways, version steps, and upgrade verdicts."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.manifest.changes import MAJOR, MINOR, PATCH, Change, bump_of, check_upgrade, classify, required_bump

Definition = dict[str, Any]
Edit = Callable[[Definition], object]

# The calculator of seed 002, cut to what the rules need.
BASE: Definition = {
    "id": "calculator",
    "name": "Calculator Tool",
    "version": "1.0.0",
    "description": "Performs basic arithmetic operations",
    "capabilities": [
        {
            "name": "add",
            "description": "Adds two numbers",
            "parameters": [
                {"name": "a", "description": "First number", "type": "number", "required": True},
                {"name": "b", "description": "Second number", "type": "number", "required": True},
            ],
            "return": {
                "description": "The sum of the two numbers",
                "schema": {"type": "object", "properties": {"result": {"type": "number"}}},
            },
        },
        {
            "name": "subtract",
            "description": "Subtracts the second number from the first",
            "parameters": [
                {"name": "a", "description": "First number", "type": "number", "required": True},
                {"name": "b", "description": "Second number", "type": "number", "required": True},
            ],
        },
    ],
    "securityLevel": 1,
    "metadata": {"category": "utility", "tags": ["math", "calculation"]},
}


def edited(*edits: Edit, version: str | None = None) -> Definition:
    definition = copy.deepcopy(BASE)
    for edit in edits:
        edit(definition)
    if version is not None:
        definition["version"] = version
    return definition


def cap(definition: Definition, name: str) -> dict[str, Any]:
    return next(c for c in definition["capabilities"] if c["name"] == name)


def param(definition: Definition, capability: str, name: str) -> dict[str, Any]:
    return next(p for p in cap(definition, capability)["parameters"] if p["name"] == name)


def on_tool(**fields: Any) -> Edit:
    return lambda d: d.update(fields)


def drop_tool(key: str) -> Edit:
    return lambda d: d.pop(key)


def on_cap(name: str, /, **fields: Any) -> Edit:
    return lambda d: cap(d, name).update(fields)


def drop_cap_field(name: str, key: str) -> Edit:
    return lambda d: cap(d, name).pop(key)


def on_param(capability: str, name: str, /, **fields: Any) -> Edit:
    return lambda d: param(d, capability, name).update(fields)


def drop_param_field(capability: str, name: str, key: str) -> Edit:
    return lambda d: param(d, capability, name).pop(key)


def on_return(name: str, /, **fields: Any) -> Edit:
    return lambda d: cap(d, name)["return"].update(fields)


NEW_CAPABILITY = {"name": "divide", "description": "Divides", "parameters": [{"name": "a", "type": "number"}]}
SAME: Edit = lambda d: None  # noqa: E731

# (what, edit to the old definition, edit to the new one, level old -> new, level new -> old). The last column runs
# the same change backwards, so each row checks a rule and its inverse.
TABLE: list[tuple[str, Edit, Edit, str | None, str | None]] = [
    ("nothing", SAME, SAME, None, None),
    ("capability added", SAME, lambda d: d["capabilities"].append(copy.deepcopy(NEW_CAPABILITY)), MINOR, MAJOR),
    ("capability renamed", SAME, on_cap("subtract", name="minus"), MAJOR, MAJOR),
    ("capabilities reordered", SAME, lambda d: d["capabilities"].reverse(), PATCH, PATCH),
    (
        "optional parameter added",
        SAME,
        lambda d: cap(d, "add")["parameters"].append({"name": "c", "type": "number"}),
        MINOR,
        MAJOR,
    ),
    (
        "optional parameter added, explicit false",
        SAME,
        lambda d: cap(d, "add")["parameters"].append({"name": "c", "type": "number", "required": False}),
        MINOR,
        MAJOR,
    ),
    (
        "required parameter added",
        SAME,
        lambda d: cap(d, "add")["parameters"].append({"name": "c", "type": "number", "required": True}),
        MAJOR,
        MAJOR,
    ),
    (
        "parameters added to one without any",
        drop_cap_field("subtract", "parameters"),
        on_cap("subtract", parameters=[{"name": "a", "type": "number", "required": True}]),
        MAJOR,
        MAJOR,
    ),
    ("parameters reordered", SAME, lambda d: cap(d, "add")["parameters"].reverse(), PATCH, PATCH),
    ("required -> optional", SAME, on_param("add", "b", required=False), MINOR, MAJOR),
    ("required -> absent (optional)", SAME, drop_param_field("add", "b", "required"), MINOR, MAJOR),
    (
        "absent required -> explicit false",
        drop_param_field("add", "b", "required"),
        on_param("add", "b", required=False),
        None,
        None,
    ),
    ("type changed", SAME, on_param("add", "a", type="string"), MAJOR, MAJOR),
    ("type widened to any", SAME, on_param("add", "a", type="any"), MINOR, MAJOR),
    ("parameter description", SAME, on_param("add", "a", description="The first"), PATCH, PATCH),
    ("parameter description removed", SAME, drop_param_field("add", "a", "description"), PATCH, PATCH),
    ("return schema changed", SAME, on_return("add", schema={"type": "number"}), MAJOR, MAJOR),
    ("return schema removed", SAME, lambda d: cap(d, "add")["return"].pop("schema"), MAJOR, MINOR),
    ("return removed", SAME, drop_cap_field("add", "return"), MAJOR, MINOR),
    ("return schema added", SAME, on_cap("subtract", **{"return": {"schema": {"type": "number"}}}), MINOR, MAJOR),
    (
        "return schema true -> 1",
        on_return("add", schema={"const": True}),
        on_return("add", schema={"const": 1}),
        MAJOR,
        MAJOR,
    ),
    ("return description", SAME, on_return("add", description="a + b"), PATCH, PATCH),
    ("tool securityLevel raised", SAME, on_tool(securityLevel=3), MAJOR, MINOR),
    ("tool securityLevel removed (to 0)", SAME, drop_tool("securityLevel"), MINOR, MAJOR),
    ("capability securityLevel raised", SAME, on_cap("add", securityLevel=5), MAJOR, MINOR),
    ("capability restates the tool's level", SAME, on_cap("add", securityLevel=1), None, None),
    (
        "tool level raised, every capability overrides",
        lambda d: [c.update(securityLevel=2) for c in d["capabilities"]],
        on_tool(securityLevel=9),
        PATCH,
        PATCH,
    ),
    ("tool securityLevel 0 made explicit", drop_tool("securityLevel"), on_tool(securityLevel=0), None, None),
    ("tool scope gained", SAME, on_tool(scopes=["calc:use"]), MAJOR, MINOR),
    (
        "capability scope gained",
        on_tool(scopes=["calc:use"]),
        on_cap("add", scopes=["calc:use", "calc:admin"]),
        MAJOR,
        MINOR,
    ),
    ("scope swapped", on_tool(scopes=["calc:read"]), on_tool(scopes=["calc:write"]), MAJOR, MAJOR),
    ("scopes reordered", on_tool(scopes=["a", "b"]), on_tool(scopes=["b", "a"]), PATCH, PATCH),
    ("task forbidden -> optional", SAME, on_tool(task="optional"), MINOR, MAJOR),
    ("task forbidden -> required", SAME, on_tool(task="required"), MAJOR, MAJOR),
    ("task optional -> required", on_tool(task="optional"), on_cap("add", task="required"), MAJOR, MINOR),
    ("task absent -> forbidden", SAME, on_tool(task="forbidden"), None, None),
    ("tool name", SAME, on_tool(name="Calc"), PATCH, PATCH),
    ("tool description", SAME, on_tool(description="Arithmetic"), PATCH, PATCH),
    ("tool title", SAME, on_tool(title="Calculator"), PATCH, PATCH),
    ("metadata", SAME, lambda d: d["metadata"]["tags"].append("new"), PATCH, PATCH),
    (
        "metadata key order",
        SAME,
        on_tool(metadata={"tags": ["math", "calculation"], "category": "utility"}),
        None,
        None,
    ),
    ("tool handler", SAME, on_tool(handler={"command": ["calc"]}), PATCH, PATCH),
    ("$schema", SAME, on_tool(**{"$schema": "https://example.com/tool.json"}), PATCH, PATCH),
    ("capability description", SAME, on_cap("add", description="Sums"), PATCH, PATCH),
    ("capability annotations", SAME, on_cap("add", annotations={"readOnlyHint": True}), PATCH, PATCH),
    (
        "annotations true -> 1",
        on_cap("add", annotations={"x": True}),
        on_cap("add", annotations={"x": 1}),
        PATCH,
        PATCH,
    ),
    ("capability icons", SAME, on_cap("add", icons=[{"src": "https://example.com/a.png"}]), PATCH, PATCH),
    ("capability handler", SAME, on_cap("add", handler="calc:add"), PATCH, PATCH),
    ("version alone", SAME, on_tool(version="9.9.9"), None, None),
]


@pytest.mark.parametrize(("what", "before", "after", "forward", "backward"), TABLE, ids=[row[0] for row in TABLE])
def test_each_rule_both_ways(what: str, before: Edit, after: Edit, forward: str | None, backward: str | None) -> None:
    old, new = edited(before), edited(before, after)
    assert required_bump(classify(old, new)) == forward
    assert required_bump(classify(new, old)) == backward


def test_the_changes_name_what_and_where_major_first() -> None:
    new = edited(
        on_tool(description="Arithmetic"),
        lambda d: d["capabilities"].pop(1),
        on_param("add", "a", type="any"),
        on_param("add", "b", type="string", required=False),
        lambda d: cap(d, "add")["parameters"].append({"name": "c", "type": "number", "required": True}),
        on_return("add", schema={"type": "object"}),
        on_cap("add", securityLevel=4, scopes=["calc:use"], task="optional"),
    )
    assert classify(BASE, new) == [
        Change(MAJOR, "$.capabilities[1]", "capability 'subtract' removed"),
        Change(
            MAJOR,
            "$.capabilities[0].parameters[1].type",
            "type of parameter 'b' of 'add' changed from number to string",
        ),
        Change(MAJOR, "$.capabilities[0].parameters[2]", "required parameter 'c' added to 'add'"),
        Change(MAJOR, "$.capabilities[0].return.schema", "return schema of 'add' changed"),
        Change(MAJOR, "$.capabilities[0].securityLevel", "security level of 'add' raised from 1 to 4"),
        Change(MAJOR, "$.capabilities[0].scopes", "scopes of 'add' gained 'calc:use'"),
        Change(
            MINOR, "$.capabilities[0].parameters[0].type", "type of parameter 'a' of 'add' widened from number to any"
        ),
        Change(MINOR, "$.capabilities[0].parameters[1].required", "parameter 'b' of 'add' is now optional"),
        Change(MINOR, "$.capabilities[0].task", "task support of 'add' changed from forbidden to optional"),
        Change(PATCH, "$.description", "tool description changed"),
    ]


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        (
            SAME,
            on_param("add", "a", type="any"),
            [
                Change(
                    MINOR,
                    "$.capabilities[0].parameters[0].type",
                    "type of parameter 'a' of 'add' widened from number to any",
                )
            ],
        ),
        (
            on_param("add", "a", type="any"),
            on_param("add", "a", type="number"),
            [
                Change(
                    MAJOR,
                    "$.capabilities[0].parameters[0].type",
                    "type of parameter 'a' of 'add' narrowed from any to number",
                )
            ],
        ),
        (
            on_param("add", "b", required=False),
            on_param("add", "b", required=True),
            [Change(MAJOR, "$.capabilities[0].parameters[1].required", "parameter 'b' of 'add' is now required")],
        ),
        (  # removals point into the old definition
            SAME,
            lambda d: cap(d, "subtract")["parameters"].pop(0),
            [Change(MAJOR, "$.capabilities[1].parameters[0]", "parameter 'a' of 'subtract' removed")],
        ),
        (
            SAME,
            lambda d: cap(d, "add")["return"].pop("schema"),
            [Change(MAJOR, "$.capabilities[0].return.schema", "return schema of 'add' removed")],
        ),
        (  # the tool's level is what 'add' and 'subtract' are served with: reported for each, at the tool's field
            SAME,
            on_tool(securityLevel=3),
            [
                Change(MAJOR, "$.securityLevel", "security level of 'add' raised from 1 to 3"),
                Change(MAJOR, "$.securityLevel", "security level of 'subtract' raised from 1 to 3"),
            ],
        ),
        (
            on_tool(scopes=["a", "b"]),
            on_tool(scopes=["b", "c"]),
            [
                Change(MAJOR, "$.scopes", "scopes of 'add' gained 'c'"),
                Change(MAJOR, "$.scopes", "scopes of 'subtract' gained 'c'"),
                Change(MINOR, "$.scopes", "scopes of 'add' dropped 'a'"),
                Change(MINOR, "$.scopes", "scopes of 'subtract' dropped 'a'"),
            ],
        ),
        (
            lambda d: [c.update(task="optional") for c in d["capabilities"]],
            on_tool(task="required"),
            [Change(PATCH, "$.task", "tool task changed from forbidden to required")],
        ),
        (
            SAME,
            lambda d: cap(d, "add")["parameters"].reverse(),
            [Change(PATCH, "$.capabilities[0].parameters", "order of parameters of 'add' changed")],
        ),
        (
            SAME,
            on_return("add", description="a + b"),
            [Change(PATCH, "$.capabilities[0].return.description", "description of the return of 'add' changed")],
        ),
        (
            SAME,
            drop_tool("metadata"),
            [Change(PATCH, "$.metadata", "tool metadata removed")],
        ),
    ],
    ids=[
        "widened",
        "narrowed",
        "now required",
        "parameter removed",
        "return schema removed",
        "tool level raised",
        "scopes gained and dropped",
        "tool task nobody inherits",
        "parameters reordered",
        "return description",
        "metadata removed",
    ],
)
def test_messages_and_paths(old: Edit, new: Edit, changes: list[Change]) -> None:
    assert classify(edited(old), edited(old, new)) == changes


def test_return_schema_key_order_is_no_change() -> None:
    reordered = {"properties": {"result": {"type": "number"}}, "type": "object"}
    assert list(reordered) != list(cap(BASE, "add")["return"]["schema"])
    assert classify(BASE, edited(on_return("add", schema=reordered))) == []


def test_different_tools_are_not_compared() -> None:
    with pytest.raises(ValueError, match="different tools"):
        classify(BASE, edited(on_tool(id="abacus")))
    with pytest.raises(ValueError, match="different tools"):
        check_upgrade(BASE, edited(on_tool(id="abacus"), version="2.0.0"))


@pytest.mark.parametrize(
    ("old", "new", "bump"),
    [
        ("1.0.0", "2.0.0", "major"),
        ("1.2.3", "1.3.0", "minor"),
        ("1.2.3", "1.2.4", "patch"),
        ("1.2.3", "1.2.3", "none"),
        ("1.2.3", "1.2.2", "downgrade"),
        ("2.0.0", "1.9.9", "downgrade"),
        ("1.2.3", "10.0.0", "major"),  # numeric, not string, comparison
        ("1.9.0", "1.10.0", "minor"),
        ("1.0.0+build.1", "1.0.0+build.2", "none"),  # build metadata has no precedence
        ("1.0.0", "1.0.1+build.7", "patch"),
        ("1.0.0-rc.1", "1.0.0", "patch"),  # only the pre-release left
        ("1.0.0-rc.1", "1.0.0-rc.2", "patch"),
        ("1.0.0-rc.2", "1.0.0-rc.10", "patch"),
        ("1.0.0-rc.2", "1.0.0-rc.1", "downgrade"),
        ("1.0.0", "1.0.0-rc.1", "downgrade"),  # a pre-release comes before its release
        ("1.0.0", "2.0.0-alpha", "major"),
        ("1.0.0-beta", "1.0.0-alpha", "downgrade"),
        ("0.1.0", "0.2.0", "minor"),
        ("0.1.0", "0.1.1", "patch"),
        ("0.9.0", "1.0.0", "major"),
        ("0.0.1", "0.0.2", "patch"),
    ],
)
def test_bump_of(old: str, new: str, bump: str) -> None:
    assert bump_of(old, new) == bump


def test_bump_of_refuses_what_is_not_semver() -> None:
    with pytest.raises(ValueError, match="not valid SemVer"):
        bump_of("1.0", "1.1.0")


REMOVE_SUBTRACT: Edit = lambda d: d["capabilities"].pop(1)  # noqa: E731
ADD_DIVIDE: Edit = lambda d: d["capabilities"].append(copy.deepcopy(NEW_CAPABILITY))  # noqa: E731
DESCRIBE: Edit = on_tool(description="Arithmetic")


@pytest.mark.parametrize(
    ("old_version", "edit", "new_version", "ok", "message"),
    [
        (
            "1.0.0",
            REMOVE_SUBTRACT,
            "1.1.0",
            False,
            "1.0.0 -> 1.1.0 is a minor bump, but capability 'subtract' removed ($.capabilities[1]) needs a major one (2.0.0)",
        ),
        (
            "1.0.0",
            REMOVE_SUBTRACT,
            "2.0.0",
            True,
            "1.0.0 -> 2.0.0 is a major bump, enough for 1 change (largest: major)",
        ),
        (
            "1.2.3",
            ADD_DIVIDE,
            "1.2.4",
            False,
            "1.2.3 -> 1.2.4 is a patch bump, but capability 'divide' added ($.capabilities[2]) needs a minor one (1.3.0)",
        ),
        ("1.2.3", ADD_DIVIDE, "1.3.0", True, "1.2.3 -> 1.3.0 is a minor bump, enough for 1 change (largest: minor)"),
        ("1.2.3", ADD_DIVIDE, "3.0.0", True, "1.2.3 -> 3.0.0 is a major bump, enough for 1 change (largest: minor)"),
        ("1.0.0", DESCRIBE, "1.0.1", True, "1.0.0 -> 1.0.1 is a patch bump, enough for 1 change (largest: patch)"),
        (
            "1.0.0",
            DESCRIBE,
            "1.0.0",
            False,
            "same version 1.0.0 but the definition changed: tool description changed ($.description) needs a patch bump (1.0.1)",
        ),
        (
            "1.0.0",
            REMOVE_SUBTRACT,
            "1.0.0+build.2",
            False,
            "same version 1.0.0+build.2 but the definition changed: capability 'subtract' removed ($.capabilities[1]) needs a major bump (2.0.0)",
        ),
        ("1.0.0", SAME, "1.0.0", True, "1.0.0 -> 1.0.0: no change"),
        ("1.0.0", SAME, "1.0.1", True, "1.0.0 -> 1.0.1 is a patch bump; the definition is unchanged"),
        ("1.0.1", SAME, "1.0.0", False, "1.0.1 -> 1.0.0 is a lower version; use rollback"),
        ("2.0.0", REMOVE_SUBTRACT, "1.0.0", False, "2.0.0 -> 1.0.0 is a lower version; use rollback"),
        # 0.x: Cargo's convention, everything one step down.
        (
            "0.1.0",
            REMOVE_SUBTRACT,
            "0.1.1",
            False,
            "0.1.0 -> 0.1.1 is a patch bump, but capability 'subtract' removed ($.capabilities[1]) needs a minor one (0.2.0)",
        ),
        (
            "0.1.0",
            REMOVE_SUBTRACT,
            "0.2.0",
            True,
            "0.1.0 -> 0.2.0 is a minor bump, enough for 1 change (largest: major, which needs only minor under 0.x)",
        ),
        (
            "0.1.0",
            ADD_DIVIDE,
            "0.1.1",
            True,
            "0.1.0 -> 0.1.1 is a patch bump, enough for 1 change (largest: minor, which needs only patch under 0.x)",
        ),
        (
            "0.1.0",
            DESCRIBE,
            "0.1.0",
            False,
            "same version 0.1.0 but the definition changed: tool description changed ($.description) needs a patch bump (0.1.1)",
        ),
        # A pre-release promises nothing, but still has to move on.
        (
            "1.0.0-rc.1",
            REMOVE_SUBTRACT,
            "1.0.0-rc.2",
            True,
            "1.0.0-rc.1 -> 1.0.0-rc.2 starts from a pre-release, which promises nothing: 1 change allowed (largest: major)",
        ),
        (
            "1.0.0-rc.1",
            REMOVE_SUBTRACT,
            "1.0.0",
            True,
            "1.0.0-rc.1 -> 1.0.0 starts from a pre-release, which promises nothing: 1 change allowed (largest: major)",
        ),
        (
            "1.0.0-rc.1",
            REMOVE_SUBTRACT,
            "1.0.0-rc.1",
            False,
            "same version 1.0.0-rc.1 but the definition changed: capability 'subtract' removed ($.capabilities[1]) needs a higher version (1.0.0-rc.2)",
        ),
        ("1.0.0-rc.2", DESCRIBE, "1.0.0-rc.1", False, "1.0.0-rc.2 -> 1.0.0-rc.1 is a lower version; use rollback"),
        # A release cut after a pre-release of the next one: 1.0.0 -> 2.0.0-rc.1 is major.
        (
            "1.0.0",
            REMOVE_SUBTRACT,
            "1.0.1-rc.1",
            False,
            "1.0.0 -> 1.0.1-rc.1 is a patch bump, but capability 'subtract' removed ($.capabilities[1]) needs a major one (2.0.0)",
        ),
        (
            "1.0.0",
            REMOVE_SUBTRACT,
            "2.0.0-rc.1",
            True,
            "1.0.0 -> 2.0.0-rc.1 is a major bump, enough for 1 change (largest: major)",
        ),
    ],
)
def test_check_upgrade(old_version: str, edit: Edit, new_version: str, ok: bool, message: str) -> None:
    old, new = edited(version=old_version), edited(edit, version=new_version)
    verdict = check_upgrade(old, new)
    assert (verdict.ok, verdict.message) == (ok, message)
    assert verdict.changes == classify(old, new)
    assert verdict.required == required_bump(verdict.changes)
    assert verdict.bump == bump_of(old_version, new_version)


def test_the_verdict_counts_every_change_and_names_the_largest() -> None:
    verdict = check_upgrade(BASE, edited(REMOVE_SUBTRACT, ADD_DIVIDE, DESCRIBE, version="1.1.0"))
    assert verdict.required == MAJOR
    assert verdict.bump == MINOR
    assert not verdict.ok
    assert [change.level for change in verdict.changes] == [MAJOR, MINOR, PATCH]
    assert str(verdict.changes[0]) == "major: capability 'subtract' removed ($.capabilities[1])"
    assert check_upgrade(BASE, edited(REMOVE_SUBTRACT, ADD_DIVIDE, DESCRIBE, version="2.0.0")).message == (
        "1.0.0 -> 2.0.0 is a major bump, enough for 3 changes (largest: major)"
    )


def test_required_bump_is_the_highest_level() -> None:
    patch, minor, major = Change(PATCH, "$", "p"), Change(MINOR, "$", "n"), Change(MAJOR, "$", "j")
    assert required_bump([]) is None
    assert required_bump([patch]) == PATCH
    assert required_bump([patch, minor, patch]) == MINOR
    assert required_bump([patch, major, minor]) == MAJOR


def test_classify_leaves_its_inputs_alone() -> None:
    old, new = edited(), edited(REMOVE_SUBTRACT, on_tool(securityLevel=4))
    before = copy.deepcopy((old, new))
    classify(old, new)
    assert (old, new) == before
