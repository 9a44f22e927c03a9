"""What changed between two versions of a tool definition, and whether the version bump is big enough for it.

A host approves a tool at a version; a definition that changes under that version, or breaks callers under a
smaller bump than semver promises, is refused. ``classify`` lists every difference with its level, ``bump_of``
measures the version step, and ``check_upgrade`` puts the two together.

Classification (capabilities are matched by name, parameters by name within their capability; a capability's
effective securityLevel / scopes / task is its own value, else the tool's, else 0 / [] / "forbidden"; an absent
field and its default are the same, so ``"required": false`` added explicitly is no change)::

    what differs                                       level   why
    -------------------------------------------------  ------  -----------------------------------------------
    capability removed                                 major   callers of it fail
    parameter removed                                  major   inputSchema forbids extra properties
    required parameter added                           major   old calls lack it
    parameter optional -> required                     major   old calls may lack it
    parameter type X -> Y, or any -> X (narrowed)      major   old arguments may no longer validate
    return schema changed (key order ignored), removed major   callers parse the result by it
    effective securityLevel raised                     major   approved callers may be refused
    effective scopes gained a scope                    major   approved tokens may lack it
    task support -> required, or -> forbidden          major   callers must change how they call
    capability added                                   minor
    optional parameter added                           minor
    parameter required -> optional                     minor
    parameter type X -> any (widened)                  minor
    return schema added where there was none           minor
    effective securityLevel lowered                    minor
    effective scopes dropped a scope                   minor
    task forbidden -> optional, required -> optional   minor
    anything else: name, descriptions, title,          patch   what the model reads changes, calls do not
    annotations, icons, metadata, handler, $schema,
    parameter or capability order, return description

Versions (semver precedence, build metadata ignored): the bump must be at least the level needed. Under major
version 0 (semver §4) the Cargo convention applies: a breaking change needs a minor bump, a minor change a patch
bump. A pre-release old version promises nothing: any higher version may carry any change. The same version with
any change is refused (the rug pull this module exists for); a lower version is refused (rollback is its own path).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import semver

from tooldeck.protocol.paths import format_path

MAJOR, MINOR, PATCH = "major", "minor", "patch"
NONE, DOWNGRADE = "none", "downgrade"
RANK = {NONE: 0, PATCH: 1, MINOR: 2, MAJOR: 3}
# Under 0.y.z everything moves down one step (Cargo): 0.1 -> 0.2 may break, 0.1.0 -> 0.1.1 may add.
ZERO_MAJOR = {MAJOR: MINOR, MINOR: PATCH, PATCH: PATCH}
INHERITED = {"securityLevel": 0, "scopes": [], "task": "forbidden"}
# Fields compared by meaning rather than as raw values, so the generic "anything else" pass skips them.
TOOL_FIELDS = {"id", "version", "capabilities", *INHERITED}
CAPABILITY_FIELDS = {"name", "parameters", "return", *INHERITED}
PARAMETER_FIELDS = {"name", "type", "required"}

Parts = tuple[str | int, ...]


class Change(NamedTuple):
    """One difference: its level, where it is (in the new definition; in the old one for removals), and what."""

    level: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.message} ({self.path})"


class Verdict(NamedTuple):
    """The result of checking an upgrade: ``ok`` says whether the new version may replace the old one."""

    changes: list[Change]
    required: str | None
    bump: str
    ok: bool
    message: str


def classify(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every difference between two definitions of the same tool, major ones first, then in definition order."""
    if old["id"] != new["id"]:
        raise ValueError(f"cannot compare different tools: id {old['id']!r} and {new['id']!r}")
    changes = [*_capabilities(old, new), *_tool_fields(old, new)]
    return sorted(changes, key=lambda change: -RANK[change.level])  # stable: definition order within a level


def required_bump(changes: list[Change]) -> str | None:
    """The highest level among ``changes``; None when there are none."""
    return max((change.level for change in changes), key=RANK.__getitem__, default=None)


def bump_of(old_version: str, new_version: str) -> str:
    """The step from ``old_version`` to ``new_version``: the highest of major.minor.patch that differs, ``"none"``
    when they are equal by semver precedence (build metadata ignored), ``"downgrade"`` when the new one is lower. A
    step that only leaves a pre-release of the same major.minor.patch (1.0.0-rc.1 -> 1.0.0) counts as a patch."""
    old, new = semver.Version.parse(old_version), semver.Version.parse(new_version)
    order = new.compare(old)
    if order == 0:
        return NONE
    if order < 0:
        return DOWNGRADE
    if new.major != old.major:
        return MAJOR
    if new.minor != old.minor:
        return MINOR
    return PATCH


def check_upgrade(old: dict[str, Any], new: dict[str, Any]) -> Verdict:
    """Whether ``new`` may replace ``old``: its version must be higher, by at least the step its changes need."""
    changes = classify(old, new)
    required = required_bump(changes)
    bump = bump_of(old["version"], new["version"])
    ok, message = _judge(old["version"], new["version"], bump, changes)
    return Verdict(changes, required, bump, ok, message)


def _judge(old_v: str, new_v: str, bump: str, changes: list[Change]) -> tuple[bool, str]:
    step = f"{old_v} -> {new_v}"
    if bump == DOWNGRADE:
        return False, f"{step} is a lower version; use rollback"
    if not changes:
        return True, f"{step}: no change" if bump == NONE else f"{step} is a {bump} bump; the definition is unchanged"
    version = semver.Version.parse(old_v)
    required = changes[0].level  # major ones come first
    needed = ZERO_MAJOR[required] if version.major == 0 else required
    top = f"{changes[0].message} ({changes[0].path})"
    if bump == NONE:
        # A pre-release may change freely, but only by moving on: the next pre-release is the least step.
        if version.prerelease:
            wanted = f"a higher version ({version.bump_prerelease()})"
        else:
            wanted = f"a {needed} bump ({_smallest(version, needed)})"
        return False, f"same version {new_v} but the definition changed: {top} needs {wanted}"
    count = f"{len(changes)} change{'s' if len(changes) > 1 else ''}"
    if version.prerelease:
        return True, f"{step} starts from a pre-release, which promises nothing: {count} allowed (largest: {required})"
    if RANK[bump] < RANK[needed]:
        return False, f"{step} is a {bump} bump, but {top} needs a {needed} one ({_smallest(version, needed)})"
    zero = f", which needs only {needed} under 0.x" if needed != required else ""
    return True, f"{step} is a {bump} bump, enough for {count} (largest: {required}{zero})"


def _smallest(version: semver.Version, level: str) -> semver.Version:
    """The lowest version above ``version`` with a step of ``level``."""
    if level == MAJOR:
        return version.bump_major()
    if level == MINOR:
        return version.bump_minor()
    return version.bump_patch()


def _capabilities(old: dict[str, Any], new: dict[str, Any]) -> Iterator[Change]:
    old_caps = {cap["name"]: (index, cap) for index, cap in enumerate(old["capabilities"])}
    new_caps = {cap["name"]: (index, cap) for index, cap in enumerate(new["capabilities"])}
    for name, (index, _) in old_caps.items():
        if name not in new_caps:
            yield Change(MAJOR, format_path(("capabilities", index)), f"capability {name!r} removed")
    for name, (index, cap) in new_caps.items():
        where: Parts = ("capabilities", index)
        if name not in old_caps:
            yield Change(MINOR, format_path(where), f"capability {name!r} added")
            continue
        old_index, old_cap = old_caps[name]
        yield from _parameters(name, (*where, "parameters"), ("capabilities", old_index, "parameters"), old_cap, cap)
        yield from _return(name, where, ("capabilities", old_index), old_cap, cap)
        yield from _inherited(name, where, ("capabilities", old_index), old, old_cap, new, cap)
        yield from _others(f" of {name!r}", where, ("capabilities", old_index), old_cap, cap, CAPABILITY_FIELDS)
    if [n for n in old_caps if n in new_caps] != [n for n in new_caps if n in old_caps]:
        yield Change(PATCH, "$.capabilities", "order of capabilities changed")


def _parameters(cap: str, where: Parts, old_where: Parts, old_cap: dict, new_cap: dict) -> Iterator[Change]:
    olds = {p["name"]: (index, p) for index, p in enumerate(old_cap.get("parameters", []))}
    news = {p["name"]: (index, p) for index, p in enumerate(new_cap.get("parameters", []))}
    for name, (index, _) in olds.items():
        if name not in news:
            yield Change(MAJOR, format_path((*old_where, index)), f"parameter {name!r} of {cap!r} removed")
    for name, (index, param) in news.items():
        here: Parts = (*where, index)
        required = param.get("required", False)
        if name not in olds:
            if required:
                yield Change(MAJOR, format_path(here), f"required parameter {name!r} added to {cap!r}")
            else:
                yield Change(MINOR, format_path(here), f"optional parameter {name!r} added to {cap!r}")
            continue
        old_index, old_param = olds[name]
        was_required = old_param.get("required", False)
        if required and not was_required:
            yield Change(MAJOR, format_path((*here, "required")), f"parameter {name!r} of {cap!r} is now required")
        elif was_required and not required:
            path = format_path((*here, "required") if "required" in param else here)
            yield Change(MINOR, path, f"parameter {name!r} of {cap!r} is now optional")
        was, now = old_param["type"], param["type"]
        if was != now:
            # "any" accepts every value, so only a move to it can never reject an argument that passed before.
            how = "widened" if now == "any" else "narrowed" if was == "any" else "changed"
            level = MINOR if how == "widened" else MAJOR
            yield Change(
                level, format_path((*here, "type")), f"type of parameter {name!r} of {cap!r} {how} from {was} to {now}"
            )
        yield from _others(
            f" of parameter {name!r} of {cap!r}", here, (*old_where, old_index), old_param, param, PARAMETER_FIELDS
        )
    if [n for n in olds if n in news] != [n for n in news if n in olds]:
        yield Change(PATCH, format_path(where), f"order of parameters of {cap!r} changed")


def _return(cap: str, where: Parts, old_where: Parts, old_cap: dict, new_cap: dict) -> Iterator[Change]:
    old_ret, new_ret = old_cap.get("return") or {}, new_cap.get("return") or {}
    here: Parts = (*where, "return")
    if "schema" in old_ret and "schema" not in new_ret:
        yield Change(MAJOR, format_path((*old_where, "return", "schema")), f"return schema of {cap!r} removed")
    elif "schema" in new_ret and "schema" not in old_ret:
        yield Change(MINOR, format_path((*here, "schema")), f"return schema of {cap!r} added")
    elif _canonical(old_ret.get("schema")) != _canonical(new_ret.get("schema")):
        yield Change(MAJOR, format_path((*here, "schema")), f"return schema of {cap!r} changed")
    old_rest = {k: v for k, v in old_ret.items() if k != "schema"}
    new_rest = {k: v for k, v in new_ret.items() if k != "schema"}
    yield from _others(f" of the return of {cap!r}", here, (*old_where, "return"), old_rest, new_rest, set())


def _inherited(
    cap: str, where: Parts, old_where: Parts, old: dict, old_cap: dict, new: dict, new_cap: dict
) -> Iterator[Change]:
    """securityLevel, scopes and task as the capability is served: its own value, else the tool's."""
    for key in INHERITED:
        was, now = _effective(key, old, old_cap), _effective(key, new, new_cap)
        if was == now:
            continue
        # Point at the field the new value comes from; when both are gone, at the old one that held the value.
        if key in new_cap:
            path = format_path((*where, key))
        elif key in new or key not in old_cap:
            path = format_path((key,))
        else:
            path = format_path((*old_where, key))
        if key == "securityLevel":
            level, how = (MAJOR, "raised") if now > was else (MINOR, "lowered")
            yield Change(level, path, f"security level of {cap!r} {how} from {was} to {now}")
        elif key == "scopes":
            gained = [scope for scope in now if scope not in was]
            dropped = [scope for scope in was if scope not in now]
            if gained:
                yield Change(MAJOR, path, f"scopes of {cap!r} gained {_names(gained)}")
            if dropped:
                yield Change(MINOR, path, f"scopes of {cap!r} dropped {_names(dropped)}")
            if not gained and not dropped:
                yield Change(PATCH, path, f"order of scopes of {cap!r} changed")
        else:
            # "optional" is the only setting every old caller can live with: both kinds of call keep working.
            level = MINOR if now == "optional" else MAJOR
            yield Change(level, path, f"task support of {cap!r} changed from {was} to {now}")


def _effective(key: str, tool: dict, cap: dict) -> Any:
    if key in cap:
        return cap[key]
    return tool.get(key, INHERITED[key])


def _tool_fields(old: dict, new: dict) -> Iterator[Change]:
    new_caps = {cap["name"]: cap for cap in new["capabilities"]}
    kept = [(cap, new_caps[cap["name"]]) for cap in old["capabilities"] if cap["name"] in new_caps]
    for key in INHERITED:
        was, now = old.get(key, INHERITED[key]), new.get(key, INHERITED[key])
        # Already counted when a capability served the tool's value and its effective value moved: once is enough.
        served = any(
            (key not in old_cap or key not in new_cap)
            and _effective(key, old, old_cap) != _effective(key, new, new_cap)
            for old_cap, new_cap in kept
        )
        if was != now and not served:
            yield Change(PATCH, f"$.{key}", f"tool {key} changed from {_show(was)} to {_show(now)}")
    yield from _others("", (), (), old, new, TOOL_FIELDS, prefix="tool ")


def _others(
    owner: str, where: Parts, old_where: Parts, old: dict, new: dict, skip: set[str], prefix: str = ""
) -> Iterator[Change]:
    """A patch change for every other field that differs (present in either, compared canonically)."""
    for key in sorted((old.keys() | new.keys()) - skip):
        if key in old and key in new and _canonical(old[key]) == _canonical(new[key]):
            continue
        path = format_path((*where, key)) if key in new else format_path((*old_where, key))
        how = "added" if key not in old else "removed" if key not in new else "changed"
        yield Change(PATCH, path, f"{prefix}{key}{owner} {how}")


def _canonical(value: Any) -> Any:
    """A form that compares equal exactly when two JSON values mean the same: key order ignored, and true kept
    apart from 1 (Python's ``True == 1`` would hide a ``const`` changing from true to 1)."""
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    return (type(value) is bool, value)


def _show(value: Any) -> str:
    return (_names(value) or "none") if isinstance(value, list) else str(value)


def _names(scopes: list[str]) -> str:
    return ", ".join(repr(scope) for scope in scopes)
