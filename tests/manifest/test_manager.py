"""Tests for manifest/manager.py: the version rules, digest pins, all-or-nothing sets applied in one swap, rollback,
name clashes, loading files and directories, and what the manager logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tooldeck import Deck
from tooldeck.manifest.definition import Definition, DefinitionError
from tooldeck.manifest.manager import Applied, ManagerError, ToolManager
from tooldeck.protocol.errors import RegistrationError
from tooldeck.tools.registry import ToolRegistry


def calc(version: str = "1.0.0", *capabilities: str, tool_id: str = "calculator", **extra: Any) -> dict[str, Any]:
    """A definition with the given capabilities (add and subtract by default), each taking a required number x."""
    return {
        "id": tool_id,
        "name": "Calculator",
        "version": version,
        "description": "Arithmetic",
        "capabilities": [
            {
                "name": name,
                "description": f"Does {name}",
                "parameters": [{"name": "x", "type": "number", "required": True}],
            }
            for name in capabilities or ("add", "subtract")
        ],
        **extra,
    }


def tool_wide(capability: str, x: float) -> str:
    return f"{capability}({x})"


class Counted:
    """A manager over a fresh registry, counting the registry's change events (one per swap)."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.events = 0
        self.registry.subscribe(self.count)
        self.manager = ToolManager(self.registry)
        self.manager.implements("calculator")(tool_wide)
        self.manager.implements("abacus")(tool_wide)

    def count(self) -> None:
        self.events += 1

    def names(self) -> list[str]:
        return [tool.name for tool in self.registry]


@pytest.fixture
def counted() -> Counted:
    return Counted()


def refusal(exc: pytest.ExceptionInfo[DefinitionError]) -> list[str]:
    return [str(problem) for problem in exc.value.problems]


# --- registering and the version rules ------------------------------------------------------------------------------


def test_register(counted: Counted) -> None:
    applied = counted.manager.register(calc())
    assert (applied.id, applied.action, applied.old_version, applied.new_version) == (
        "calculator", "registered", None, "1.0.0"
    )  # fmt: skip
    assert str(applied) == "tool definition calculator: registered 1.0.0"
    assert counted.names() == ["calculator.add", "calculator.subtract"] and counted.events == 1
    assert "calculator" in counted.manager and "other" not in counted.manager
    definition = counted.manager.get("calculator")
    assert definition is not None and definition.label == "calculator@1.0.0"
    assert counted.manager.definitions() == [definition] and counted.manager.history("calculator") == []
    assert counted.registry.get("calculator.add").fn(x=2) == "add(2)"  # type: ignore[union-attr]


def test_the_same_version_identical_is_unchanged(counted: Counted) -> None:
    counted.manager.register(calc())
    tools = list(counted.registry)
    applied = counted.manager.register(calc())
    assert str(applied) == "tool definition calculator: unchanged 1.0.0" and applied.action == "unchanged"
    assert list(counted.registry) == tools and counted.events == 1  # the same Tool objects, no change event


def test_the_same_version_changed_is_refused_by_its_pin(counted: Counted) -> None:
    first = counted.manager.register(calc())
    served = counted.manager.get("calculator")
    assert first.action == "registered" and served is not None
    changed = Definition(calc(description="Arithmetic, improved"), source="calc.json")
    with pytest.raises(DefinitionError) as caught:
        counted.manager.register(changed)
    assert refusal(caught) == [
        f"calc.json: $.version: calculator@1.0.0 was served with digest sha256:{served.digest[:12]}…; this definition "
        f"differs (sha256:{changed.digest[:12]}…): a changed definition needs a new version"
    ]
    assert counted.manager.get("calculator") is served and counted.events == 1


def test_a_lower_version_is_refused(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    with pytest.raises(DefinitionError) as caught:
        counted.manager.register(calc("0.9.0"))
    assert refusal(caught) == ["calculator: $.version: 1.0.0 -> 0.9.0 is a lower version; use rollback"]


def test_a_minor_upgrade_adds_a_capability(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    old_add = counted.registry.get("calculator.add")
    applied = counted.manager.register(calc("1.1.0", "add", "subtract", "multiply"))
    assert (applied.action, applied.old_version, applied.new_version, applied.change) == (
        "upgraded", "1.0.0", "1.1.0", "minor: capability 'multiply' added"
    )  # fmt: skip
    assert str(applied) == "tool definition calculator: upgraded 1.0.0 -> 1.1.0 (minor: capability 'multiply' added)"
    assert counted.names() == ["calculator.add", "calculator.subtract", "calculator.multiply"]
    new_add = counted.registry.get("calculator.add")
    assert new_add is not old_add and new_add.version == "1.1.0"  # type: ignore[union-attr]
    assert counted.events == 2
    assert [d.version for d in counted.manager.history("calculator")] == ["1.0.0"]


def test_a_major_upgrade_removes_a_capability(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    applied = counted.manager.register(calc("2.0.0", "add"))
    assert str(applied) == "tool definition calculator: upgraded 1.0.0 -> 2.0.0 (major: capability 'subtract' removed)"
    assert counted.names() == ["calculator.add"] and counted.events == 2


def test_a_patch_upgrade_changes_documentation(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    applied = counted.manager.register(calc("1.0.1", description="Arithmetic, better explained"))
    assert str(applied) == "tool definition calculator: upgraded 1.0.0 -> 1.0.1 (patch: tool description changed)"


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (calc("1.0.1", "add", "subtract", "multiply"),
         "1.0.0 -> 1.0.1 is a patch bump, but capability 'multiply' added ($.capabilities[2]) needs a minor one "
         "(1.1.0)"),
        (calc("1.1.0", "add"),
         "1.0.0 -> 1.1.0 is a minor bump, but capability 'subtract' removed ($.capabilities[1]) needs a major one "
         "(2.0.0)"),
    ],
)  # fmt: skip
def test_a_bump_too_small_for_the_change_is_refused(counted: Counted, new: dict[str, Any], message: str) -> None:
    counted.manager.register(calc("1.0.0"))
    with pytest.raises(DefinitionError) as caught:
        counted.manager.register(new)
    assert refusal(caught) == [f"calculator: $.version: {message}"]
    assert counted.manager.get("calculator").version == "1.0.0"  # type: ignore[union-attr]
    assert counted.names() == ["calculator.add", "calculator.subtract"] and counted.events == 1


# --- rollback -------------------------------------------------------------------------------------------------------


def test_rollback_restores_the_previous_tool_objects_and_logs(
    counted: Counted, caplog: pytest.LogCaptureFixture
) -> None:
    counted.manager.register(calc("1.0.0"))
    first = list(counted.registry)
    counted.manager.register(calc("1.1.0", "add", "subtract", "multiply"))
    second = list(counted.registry)
    counted.manager.register(calc("2.0.0", "add"))
    with caplog.at_level(logging.INFO, logger="tooldeck.manifest"):
        applied = counted.manager.rollback("calculator")
        assert str(applied) == "tool definition calculator: rolled back 2.0.0 -> 1.1.0"
        assert sorted(counted.registry, key=lambda tool: tool.name) == sorted(second, key=lambda tool: tool.name)
        assert all(counted.registry.get(tool.name) is tool for tool in second)
        assert str(counted.manager.rollback("calculator")) == "tool definition calculator: rolled back 1.1.0 -> 1.0.0"
    assert all(counted.registry.get(tool.name) is tool for tool in first) and len(counted.registry) == 2
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "tool definition calculator: rolled back 2.0.0 -> 1.1.0"),
        ("WARNING", "tool definition calculator: rolled back 1.1.0 -> 1.0.0"),
    ]
    assert counted.manager.history("calculator") == [] and counted.events == 5
    with pytest.raises(ManagerError) as caught:
        counted.manager.rollback("calculator")
    assert str(caught.value) == "cannot roll back 'calculator': no earlier version was served"


def test_rollback_of_an_unknown_id() -> None:
    with pytest.raises(ManagerError) as caught:
        Counted().manager.rollback("nope")
    assert str(caught.value) == "cannot roll back 'nope': it is not served"


def test_after_a_rollback_the_higher_version_may_come_back(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    counted.manager.register(calc("2.0.0", "add"))
    counted.manager.rollback("calculator")
    assert str(counted.manager.register(calc("2.0.0", "add"))) == (
        "tool definition calculator: upgraded 1.0.0 -> 2.0.0 (major: capability 'subtract' removed)"
    )


def test_rollback_does_not_take_a_name_that_was_taken_since() -> None:
    deck = Deck("d")
    deck.implements("calculator")(tool_wide)
    deck.manager.register(calc("1.0.0"))
    deck.manager.register(calc("2.0.0", "add"))

    @deck.tool(name="calculator.subtract")
    def python_subtract(x: float) -> float:
        return -x

    with pytest.raises(ManagerError) as caught:
        deck.manager.rollback("calculator")
    assert str(caught.value) == (
        "cannot roll back 'calculator': tool 'calculator.subtract' is now served by a Python tool"
    )
    assert deck.tools.get("calculator.subtract").fn is python_subtract  # type: ignore[union-attr]
    assert deck.manager.get("calculator").version == "2.0.0"  # type: ignore[union-attr]
    assert [d.version for d in deck.manager.history("calculator")] == ["1.0.0"]


# --- unregistering and pins -----------------------------------------------------------------------------------------


def test_unregister_removes_the_tools(counted: Counted) -> None:
    counted.manager.register(calc())
    counted.manager.register(calc(tool_id="abacus"))
    applied = counted.manager.unregister("calculator")
    assert str(applied) == "tool definition calculator: unregistered 1.0.0" and applied.new_version is None
    assert counted.names() == ["abacus.add", "abacus.subtract"] and "calculator" not in counted.manager
    assert counted.events == 3


def test_unregister_of_an_unknown_id(counted: Counted) -> None:
    with pytest.raises(DefinitionError) as caught:
        counted.manager.unregister("nope")
    assert refusal(caught) == ["nope: $.id: no tool definition 'nope' is served"]


def test_pins_survive_unregister(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    counted.manager.unregister("calculator")
    with pytest.raises(DefinitionError, match=r"calculator@1\.0\.0 was served with digest sha256:"):
        counted.manager.register(calc("1.0.0", "add"))
    assert counted.names() == []
    assert counted.manager.register(calc("1.0.0")).action == "registered"  # the pinned content is still welcome


# --- sets: all or nothing, one swap ---------------------------------------------------------------------------------


def test_apply_is_all_or_nothing(counted: Counted) -> None:
    counted.manager.register(calc("1.0.0"))
    before = list(counted.registry)
    good = Definition(calc(tool_id="abacus"), source="abacus.json")
    lower = Definition(calc("0.1.0"), source="calc.json")
    also_bad = Definition(calc(tool_id="ruler"), source="ruler.json")  # no handler bound for 'ruler'
    with pytest.raises(DefinitionError) as caught:
        counted.manager.apply([good, lower, also_bad])
    assert refusal(caught) == [
        "calc.json: $.version: 1.0.0 -> 0.1.0 is a lower version; use rollback",
        "ruler.json: $.capabilities[0]: capability 'add' has no handler: add \"handler\" to it (or to the tool), or "
        "bind a function with @deck.implements('ruler.add') before loading the definition",
        "ruler.json: $.capabilities[1]: capability 'subtract' has no handler: add \"handler\" to it (or to the tool), "
        "or bind a function with @deck.implements('ruler.subtract') before loading the definition",
    ]
    assert list(counted.registry) == before and counted.events == 1 and "abacus" not in counted.manager


def test_a_set_is_applied_in_one_swap(counted: Counted, caplog: pytest.LogCaptureFixture) -> None:
    counted.manager.implements("ruler")(tool_wide)
    counted.manager.register(calc("1.0.0"))
    counted.manager.register(calc(tool_id="ruler"))
    assert counted.events == 2
    with caplog.at_level(logging.INFO, logger="tooldeck.manifest"):
        done = counted.manager.apply(
            [Definition(calc("1.1.0", "add", "subtract", "divide")), Definition(calc(tool_id="abacus"))],
            remove=["ruler"],
        )
    assert counted.events == 3
    assert [str(applied) for applied in done] == [
        "tool definition calculator: upgraded 1.0.0 -> 1.1.0 (minor: capability 'divide' added)",
        "tool definition abacus: registered 1.0.0",
        "tool definition ruler: unregistered 1.0.0",
    ]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [str(a) for a in done]
    assert counted.names() == [
        "calculator.add", "calculator.subtract", "calculator.divide", "abacus.add", "abacus.subtract"
    ]  # fmt: skip


def test_an_unchanged_set_changes_nothing_and_logs_nothing(counted: Counted, caplog: pytest.LogCaptureFixture) -> None:
    counted.manager.register(calc())
    with caplog.at_level(logging.INFO, logger="tooldeck.manifest"):
        done = counted.manager.apply([Definition(calc())])
    assert [applied.action for applied in done] == ["unchanged"] and counted.events == 1 and caplog.records == []


def test_duplicate_ids_in_a_set(counted: Counted) -> None:
    with pytest.raises(DefinitionError) as caught:
        counted.manager.apply([Definition(calc(), source="a.json"), Definition(calc("2.0.0"), source="b.json")])
    assert refusal(caught)[0] == "b.json: $.id: id 'calculator' is also defined in a.json"
    with pytest.raises(DefinitionError) as caught:
        counted.manager.apply([Definition(calc()), Definition(calc("2.0.0"))])
    assert refusal(caught)[0] == "calculator: $.id: id 'calculator' is defined twice"
    assert counted.names() == []


# --- name clashes ---------------------------------------------------------------------------------------------------


def test_a_name_taken_by_a_python_tool_is_refused() -> None:
    deck = Deck("d")
    deck.implements("calculator")(tool_wide)
    deck.add_tool(lambda x: x, name="calculator.add")
    with pytest.raises(DefinitionError) as caught:
        deck.manager.register(Definition(calc(), source="calc.json"))
    assert refusal(caught) == ["calc.json: $.id: tool 'calculator.add' is already served by a Python tool"]
    assert [tool.name for tool in deck.tools] == ["calculator.add"]


def test_a_name_taken_by_another_definition_is_refused(counted: Counted) -> None:
    counted.manager.implements("calculator.sci")(tool_wide)
    counted.manager.register(calc("1.0.0", "sci.log"))
    with pytest.raises(DefinitionError) as caught:
        counted.manager.register(Definition(calc("1.0.0", "log", tool_id="calculator.sci"), source="sci.json"))
    assert refusal(caught) == [
        "sci.json: $.id: tool 'calculator.sci.log' is already served by tool definition 'calculator@1.0.0'"
    ]


def test_a_name_claimed_twice_in_one_set_is_refused(counted: Counted) -> None:
    counted.manager.implements("calculator.sci")(tool_wide)
    with pytest.raises(DefinitionError) as caught:
        counted.manager.apply(
            [Definition(calc("1.0.0", "sci.log")), Definition(calc("1.0.0", "log", tool_id="calculator.sci"))]
        )
    assert refusal(caught) == ["calculator.sci: $.id: tool 'calculator.sci.log' is also defined by 'calculator'"]


def test_a_name_given_up_in_the_same_set_may_be_taken(counted: Counted) -> None:
    counted.manager.implements("calculator.sci")(tool_wide)
    counted.manager.register(calc("1.0.0", "sci.log"))
    counted.manager.apply([Definition(calc("1.0.0", "log", tool_id="calculator.sci"))], remove=["calculator"])
    assert counted.names() == ["calculator.sci.log"]
    assert counted.registry.get("calculator.sci.log").definition.id == "calculator.sci"  # type: ignore[union-attr]


# --- binding and loading --------------------------------------------------------------------------------------------


def test_implements_refusals(counted: Counted) -> None:
    with pytest.raises(RegistrationError) as caught:
        counted.manager.implements("")
    assert str(caught.value) == "implements() takes 'tool-id.capability' or 'tool-id', got ''"
    with pytest.raises(RegistrationError) as caught:
        counted.manager.implements("calculator.add")(3)  # type: ignore[arg-type]
    assert str(caught.value) == "@implements('calculator.add') must decorate a function, got int"
    with pytest.raises(RegistrationError, match=r"^@implements\('calculator'\) is already bound to <function"):
        counted.manager.implements("calculator")(lambda capability, x: x)
    assert counted.manager.implements("calculator")(tool_wide) is tool_wide  # binding the same function again is fine


def test_load_a_file_or_a_directory(tmp_path: Path, counted: Counted) -> None:
    (tmp_path / "b_calc.json").write_text(json.dumps(calc()))
    (tmp_path / "a_abacus.yaml").write_text(json.dumps(calc(tool_id="abacus")))  # JSON is YAML too
    (tmp_path / ".draft.json").write_text("{ not even JSON")
    (tmp_path / "README.md").write_text("not a definition")
    done = counted.manager.load(tmp_path)
    assert [str(applied) for applied in done] == [
        "tool definition abacus: registered 1.0.0",
        "tool definition calculator: registered 1.0.0",
    ]
    assert counted.events == 1
    definition = counted.manager.get("calculator")
    assert definition is not None and definition.source == str(tmp_path / "b_calc.json")
    (tmp_path / "b_calc.json").write_text(json.dumps(calc("1.0.1", description="Better")))
    assert [applied.action for applied in counted.manager.load(tmp_path / "b_calc.json")] == ["upgraded"]
    assert counted.manager.register(str(tmp_path / "a_abacus.yaml")).action == "unchanged"  # a path works too
    assert counted.events == 2


def test_load_refuses_the_whole_directory_for_one_bad_file(tmp_path: Path, counted: Counted) -> None:
    (tmp_path / "a.json").write_text(json.dumps(calc()))
    (tmp_path / "b.json").write_text(json.dumps(calc(securityLevel=11, tool_id="abacus")))
    (tmp_path / "c.json").write_text(json.dumps(calc("3.0.0")))
    with pytest.raises(DefinitionError) as caught:
        counted.manager.load(tmp_path)
    assert refusal(caught) == [
        f"{tmp_path / 'b.json'}: $.securityLevel: expected a number <= 10, got an integer",
        f"{tmp_path / 'c.json'}: $.id: id 'calculator' is also defined in {tmp_path / 'a.json'}",
    ]
    assert counted.names() == [] and counted.events == 0


def test_load_reads_a_directory_by_the_watcher_s_rules(tmp_path: Path, counted: Counted) -> None:
    (tmp_path / "served").mkdir()
    (tmp_path / "calc.json").write_text(json.dumps(calc()))
    (tmp_path / "served" / "calc.json").symlink_to(tmp_path / "calc.json")
    with pytest.raises(DefinitionError) as caught:
        counted.manager.load(tmp_path / "served")
    assert refusal(caught) == [
        f"{tmp_path / 'served' / 'calc.json'}: $: leads outside the directory (a symbolic link); only files inside "
        "the watched directory are read"
    ]
    assert counted.manager.load(tmp_path / "served" / "calc.json")[0].action == "registered"  # named, it is read


def test_applied_lines() -> None:
    assert str(Applied("t", "registered", None, "1.0.0")) == "tool definition t: registered 1.0.0"
    assert str(Applied("t", "unregistered", "1.0.0", None)) == "tool definition t: unregistered 1.0.0"
    assert (
        str(Applied("t", "upgraded", "1.0.0", "2.0.0", "major: x"))
        == "tool definition t: upgraded 1.0.0 -> 2.0.0 (major: x)"
    )


def test_history_keeps_the_last_versions_and_survives_unregister() -> None:
    from tooldeck.manifest.manager import HISTORY

    manager = Counted().manager
    with pytest.raises(ManagerError, match="no earlier version was served"):
        manager.rollback(manager.register(calc("0.9.0")).id)
    manager.unregister("calculator")
    for patch in range(HISTORY + 3):
        manager.register(calc(f"1.0.{patch}"))
    assert [d.version for d in manager.history("calculator")] == [f"1.0.{p}" for p in range(2, HISTORY + 2)]
    manager.unregister("calculator")
    assert [d.version for d in manager.history("calculator")] == [f"1.0.{p}" for p in range(2, HISTORY + 2)]
    assert manager.get("calculator") is None and manager.last_served("calculator").version == "1.0.12"
    assert manager.register(calc("2.0.0")).action == "registered"
    assert [d.version for d in manager.history("calculator")] == [f"1.0.{p}" for p in range(3, HISTORY + 3)]
    assert manager.rollback("calculator").new_version == "1.0.12"  # only rollback goes back


# --- an id keeps its history across unregistering ---------------------------------------------------------------


def test_unregistered_and_added_back_lower_is_refused_as_a_downgrade(counted: Counted) -> None:
    counted.manager.register(calc("2.0.0", securityLevel=9))
    counted.manager.unregister("calculator")
    with pytest.raises(DefinitionError) as caught:
        counted.manager.register(calc("0.0.1", securityLevel=0))
    assert refusal(caught) == [
        "calculator: $.version: 2.0.0 -> 0.0.1 is a lower version: calculator@2.0.0 was served until it was "
        "unregistered, and an id keeps its history across that (only rollback goes back)"
    ]
    assert counted.names() == []


@pytest.mark.parametrize(
    ("new", "ok"),
    [
        (calc("2.0.0", securityLevel=9), True),  # the same again: welcome back
        (calc("2.0.1", securityLevel=9), True),  # higher, no change: any bump will do
        (calc("2.0.1", securityLevel=0), False),  # a lower level is a minor change: 2.0.1 is too small a step
        (calc("2.1.0", securityLevel=0), True),
        (calc("2.1.0", "add", securityLevel=9), False),  # a removed capability needs a major bump
        (calc("3.0.0", "add", securityLevel=9), True),
        (calc("1.9.9", securityLevel=9), False),
    ],
)
def test_added_back_after_unregister_it_is_judged_as_an_upgrade_of_the_last_version(
    counted: Counted, new: dict[str, Any], ok: bool
) -> None:
    counted.manager.register(calc("2.0.0", securityLevel=9))
    counted.manager.unregister("calculator")
    if ok:
        assert counted.manager.register(new).action == "registered"
        assert counted.manager.get("calculator").version == new["version"]
    else:
        with pytest.raises(DefinitionError, match=r"calculator@2\.0\.0 was served until it was unregistered"):
            counted.manager.register(new)
        assert "calculator" not in counted.manager


def test_a_handler_serving_many_capabilities_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tooldeck.manifest import handlers

    reads = []
    real = handlers.inspect_function
    monkeypatch.setattr(handlers, "inspect_function", lambda fn, **kw: reads.append(fn) or real(fn, **kw))

    def shared(capability: str, x: float) -> str:
        return capability

    manager = ToolManager(ToolRegistry())
    manager.implements("calculator")(shared)
    manager.register(calc("1.0.0", "add", "subtract", "multiply"))
    manager.register(calc("1.0.1", "add", "subtract", "multiply"))
    assert reads == [shared]


def test_an_upgrade_reuses_the_validators_of_unchanged_schemas() -> None:
    manager = Counted().manager
    manager.register(calc("1.0.0", "add", "subtract"))
    before = {tool.name: tool for tool in manager._registry}
    changed = calc("1.1.0", "add", "subtract")
    changed["capabilities"][1]["parameters"][0]["description"] = "the number"  # a different inputSchema
    manager.register(changed)
    after = {tool.name: tool for tool in manager._registry}
    assert after["calculator.add"] is not before["calculator.add"]  # a new Tool for the new version ...
    assert after["calculator.add"].input_validator is before["calculator.add"].input_validator  # ... same schema
    assert after["calculator.subtract"].input_validator is not before["calculator.subtract"].input_validator


def test_upgrade_replaces_a_served_definition_only() -> None:
    manager = Counted().manager
    with pytest.raises(ManagerError, match=r"^cannot upgrade 'calculator': it is not served \(register it\)$"):
        manager.upgrade(calc("1.0.0"))
    manager.register(calc("1.0.0"))
    applied = manager.upgrade(calc("1.1.0", "add", "subtract", "multiply"))
    assert str(applied) == "tool definition calculator: upgraded 1.0.0 -> 1.1.0 (minor: capability 'multiply' added)"
