#!/usr/bin/env python3
"""definition_mutants.py - weaken each check that decides what a tool definition may do, one step at a time, and
see that a test fails.

Each mutation below changes one line of a copy of src/ (a level one step lower in the semver classifier, a limit
one larger, a refusal skipped), then runs the tests named for it with that copy first on the path. A mutation no
test catches is a check the suite does not guard: the run ends with the survivors and exit status 1.

    scripts/definition_mutants.py                 # all of them (a few minutes)
    scripts/definition_mutants.py "pin ignored"   # the ones named
    scripts/definition_mutants.py --list
    scripts/definition_mutants.py --check         # only see that each text to change is still there (a second)

Run it from the repository with the project's Python (the one that runs pytest). Nothing in the tree is changed.
The runner is mutants.py (shared with security_mutants.py).
"""

from __future__ import annotations

import sys

from mutants import Mutation, main

M = "src/tooldeck/manifest/"
T = "tests/manifest/"
CH = [T + "test_changes.py", T + "test_manager.py"]
MG = [T + "test_manager.py", T + "test_watch.py", "-k", "not serve"]
DF = [T + "test_definition.py", T + "test_reading.py"]
RD = [T + "test_reading.py", T + "test_definition.py", T + "test_watch.py", "-k", "not serve"]
CM = [T + "test_command.py", T + "test_handlers.py"]
HD = [T + "test_handlers.py", T + "test_mapping.py", T + "test_manager.py"]
MP = [T + "test_mapping.py", T + "test_deck_manifest.py", T + "test_handlers.py"]
CLI = ["tests/cli/test_definitions.py"]
MUTATIONS: list[Mutation] = []


def m(name: str, file: str, old: str, new: str, tests: list[str]) -> None:
    MUTATIONS.append(Mutation(name, file, old, new, tests))


C = M + "changes.py"
m(
    "cap removed major->minor",
    C,
    'yield Change(MAJOR, format_path(("capabilities", index)), f"capability {name!r} removed")',
    'yield Change(MINOR, format_path(("capabilities", index)), f"capability {name!r} removed")',
    CH,
)
m(
    "cap added minor->patch",
    C,
    'yield Change(MINOR, format_path(where), f"capability {name!r} added")',
    'yield Change(PATCH, format_path(where), f"capability {name!r} added")',
    CH,
)
m(
    "param removed major->minor",
    C,
    'yield Change(MAJOR, format_path((*old_where, index)), f"parameter {name!r} of {cap!r} removed")',
    'yield Change(MINOR, format_path((*old_where, index)), f"parameter {name!r} of {cap!r} removed")',
    CH,
)
m(
    "required param added major->minor",
    C,
    'yield Change(MAJOR, format_path(here), f"required parameter',
    'yield Change(MINOR, format_path(here), f"required parameter',
    CH,
)
m(
    "optional param added minor->patch",
    C,
    'yield Change(MINOR, format_path(here), f"optional parameter',
    'yield Change(PATCH, format_path(here), f"optional parameter',
    CH,
)
m(
    "now required major->minor",
    C,
    'yield Change(MAJOR, format_path((*here, "required"))',
    'yield Change(MINOR, format_path((*here, "required"))',
    CH,
)
m(
    "now optional minor->patch",
    C,
    'yield Change(MINOR, path, f"parameter {name!r} of {cap!r} is now optional")',
    'yield Change(PATCH, path, f"parameter {name!r} of {cap!r} is now optional")',
    CH,
)
m("type change major->minor", C, 'level = MINOR if how == "widened" else MAJOR', "level = MINOR", CH)
m(
    "widened minor->patch",
    C,
    'level = MINOR if how == "widened" else MAJOR',
    'level = PATCH if how == "widened" else MAJOR',
    CH,
)
m(
    "narrowed counts as widened",
    C,
    'how = "widened" if now == "any" else',
    'how = "widened" if "any" in (now, was) else',
    CH,
)
m(
    "return removed major->minor",
    C,
    'yield Change(MAJOR, format_path((*old_where, "return", "schema"))',
    'yield Change(MINOR, format_path((*old_where, "return", "schema"))',
    CH,
)
m(
    "return added minor->patch",
    C,
    'yield Change(MINOR, format_path((*here, "schema")), f"return schema of {cap!r} added")',
    'yield Change(PATCH, format_path((*here, "schema")), f"return schema of {cap!r} added")',
    CH,
)
m(
    "return changed major->minor",
    C,
    'yield Change(MAJOR, format_path((*here, "schema")), f"return schema of {cap!r} changed")',
    'yield Change(MINOR, format_path((*here, "schema")), f"return schema of {cap!r} changed")',
    CH,
)
m(
    "level raised major->minor",
    C,
    'level, how = (MAJOR, "raised") if now > was else (MINOR, "lowered")',
    'level, how = (MINOR, "raised") if now > was else (MINOR, "lowered")',
    CH,
)
m(
    "level lowered minor->patch",
    C,
    'level, how = (MAJOR, "raised") if now > was else (MINOR, "lowered")',
    'level, how = (MAJOR, "raised") if now > was else (PATCH, "lowered")',
    CH,
)
m(
    "scope gained major->minor",
    C,
    'yield Change(MAJOR, path, f"scopes of {cap!r} gained',
    'yield Change(MINOR, path, f"scopes of {cap!r} gained',
    CH,
)
m(
    "scope dropped minor->patch",
    C,
    'yield Change(MINOR, path, f"scopes of {cap!r} dropped',
    'yield Change(PATCH, path, f"scopes of {cap!r} dropped',
    CH,
)
m(
    "task to required counts minor",
    C,
    'level = MINOR if now == "optional" else MAJOR',
    'level = MINOR if now != "forbidden" else MAJOR',
    CH,
)
m("task any change minor", C, 'level = MINOR if now == "optional" else MAJOR', "level = MINOR", CH)
m(
    "effective: tool over capability",
    C,
    """    if key in cap:
        return cap[key]
    return tool.get(key, INHERITED[key])""",
    """    if key in tool:
        return tool[key]
    return cap.get(key, INHERITED[key])""",
    CH,
)
m("inherited level default 0->1", C, 'INHERITED = {"securityLevel": 0,', 'INHERITED = {"securityLevel": 1,', CH)
m("judge bump one step short", C, "if RANK[bump] < RANK[needed]:", "if RANK[bump] < RANK[needed] - 1:", CH)
m(
    "zero major: major needs patch",
    C,
    "ZERO_MAJOR = {MAJOR: MINOR, MINOR: PATCH, PATCH: PATCH}",
    "ZERO_MAJOR = {MAJOR: PATCH, MINOR: PATCH, PATCH: PATCH}",
    CH,
)
m(
    "zero major: minor needs none",
    C,
    "ZERO_MAJOR = {MAJOR: MINOR, MINOR: PATCH, PATCH: PATCH}",
    "ZERO_MAJOR = {MAJOR: MINOR, MINOR: NONE, PATCH: NONE}",
    CH,
)
m(
    "zero major applies to 1.x",
    C,
    "needed = ZERO_MAJOR[required] if version.major == 0 else required",
    "needed = ZERO_MAJOR[required] if version.major <= 1 else required",
    CH,
)
m(
    "prerelease: any 0.x promises nothing",
    C,
    """    if version.prerelease:
        return True, f"{step} starts""",
    """    if version.prerelease or version.major == 0:
        return True, f"{step} starts""",
    CH,
)
m(
    "same version with changes allowed",
    C,
    """    if bump == NONE:
        # A pre-release""",
    """    if bump == NONE and False:
        # A pre-release""",
    CH,
)
m(
    "downgrade not detected",
    C,
    """    if order < 0:
        return DOWNGRADE""",
    """    if order < 0 and new.major != old.major:
        return DOWNGRADE""",
    CH,
)
m(
    "bump major misread as minor",
    C,
    """    if new.major != old.major:
        return MAJOR""",
    """    if new.major > old.major + 1:
        return MAJOR""",
    CH,
)
m("canonical: true == 1", C, "    return (type(value) is bool, value)", "    return value", CH)
m(
    "others: nothing else compared",
    C,
    """    for key in sorted((old.keys() | new.keys()) - skip):""",
    """    for key in []:""",
    CH,
)
m("tool field once: served always true", C, """        if was != now and not served:""", """        if False:""", CH)
G = M + "manager.py"
m("pin ignored", G, "if pinned is not None and pinned != definition.digest:", "if False:", MG)
m("retired ignored", G, "last = current or state.retired.get(definition.id)", "last = current", MG)
m("pins not recorded", G, "new.pins[(applied.id, served.definition.version)] = served.definition.digest", "pass", MG)
m(
    "name taken by python tool",
    G,
    "if name in self._registry and name not in own and name not in leaving:",
    "if False:",
    MG,
)
m("name claimed twice", G, "elif claimed.setdefault(name, definition.id) != definition.id:", "elif False:", MG)
m("unique ids unchecked", G, "problems = check_unique_ids(definitions)", "problems = []", MG)
m(
    "verdict ignored",
    G,
    """        if not verdict.ok:
            message""",
    """        if False:
            message""",
    MG,
)
m(
    "rollback takes a taken name",
    G,
    "            if name in self._registry and name not in own:",
    "            if False:",
    MG,
)
m(
    "same digest re-registered silently when unchanged",
    G,
    'return None if current is not None else (action, "")',
    "return None",
    MG,
)
FL = [T + "test_fleet.py", T + "test_store.py"]
m("memory store commits at any revision", M + "store.py", "if expected != self._revision:", "if False:", FL)
m("redis store commits at any revision", M + "store_redis.py", "if current ~= tonumber(ARGV[1]) then return false end",
  "", FL)  # fmt: skip
m(
    "fleet judges by a state it has left",
    M + "fleet.py",
    "                change = None  # refused by a state the fleet has left: judged again on the one it serves",
    "                raise",
    FL,
)
m("joining offers what the fleet decided", M + "fleet.py", "            if pinned is None:", "            if True:", FL)
m(
    "a committed change is not told",
    M + "fleet.py",
    'self.bus.publish(TOPIC, {"revision": revision, "epoch": epoch})',
    "pass",
    FL,
)
m("epochs ignored", M + "fleet.py", 'if revision <= self.revision and payload.get("epoch") == self.epoch:',
  "if revision <= self.revision:", FL)  # fmt: skip
D = M + "definition.py"
m("semver unchecked", D, 'if not semver.Version.is_valid(document["version"]):', "if False:", DF + CLI)
m(
    "id pattern unchecked",
    D,
    "    if not NAME_PATTERN.fullmatch(tool_id):\n        yield",
    "    if False:\n        yield",
    DF,
)
m(
    "tool name unchecked",
    D,
    "if NAME_PATTERN.fullmatch(tool_id) and not NAME_PATTERN.fullmatch(tool_name):",
    "if False:",
    DF,
)
m("cap names unique unchecked", D, "        if name in seen:", "        if False:", DF)
m("param names unique unchecked", D, "            if p_name in params:", "            if False:", DF)
m("return schema unchecked", D, "                Validator(schema, values=False)", "                pass", DF)
m(
    "int range one more",
    D,
    "return not _INT_MIN <= value <= _INT_MAX",
    "return not _INT_MIN - 1 <= value <= _INT_MAX + 1",
    DF,
)
m("nan allowed", D, "return not math.isfinite(value)", "return False", DF)
m(
    "schema hides nothing",
    D,
    "lines = _validator().errors(document, values=False, names=_names())",
    "lines = _validator().errors(document)",
    DF,
)
S = M + "definition.schema.json"
m("level max 11", S, '"minimum": 0,\n      "maximum": 10', '"minimum": 0,\n      "maximum": 11', DF + MP)
m("level min -1", S, '"minimum": 0,\n      "maximum": 10', '"minimum": -1,\n      "maximum": 10', DF + MP)
m(
    "additional props allowed",
    S,
    """  "type": "object",
  "required": ["id", "name", "version", "description", "capabilities"],
  "additionalProperties": false,""",
    """  "type": "object",
  "required": ["id", "name", "version", "description", "capabilities"],""",
    DF,
)
R = M + "reading.py"
m("size limit one more", R, "    if size > MAX_FILE_BYTES:  #", "    if size > MAX_FILE_BYTES + 1:  #", RD)
m("fifo allowed", R, "    if kind != stat.S_IFREG:", "    if kind not in (stat.S_IFREG, stat.S_IFIFO):", RD)
m("devices allowed", R, "    if kind != stat.S_IFREG:", "    if kind not in (stat.S_IFREG, stat.S_IFCHR):", RD)
m("containment off", R, "if os.path.commonpath([real, root]) != root or real == root:", "if False:", RD)
m(
    "containment: the dir itself",
    R,
    "if os.path.commonpath([real, root]) != root or real == root:",
    "if os.path.commonpath([real, root]) != root:",
    RD,
)
m(
    "anchors allowed",
    R,
    'if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:',
    "if isinstance(event, yaml.AliasEvent):",
    RD,
)
m(
    "aliases allowed",
    R,
    'if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:',
    "if False:",
    RD,
)
m("yaml depth one more", R, "            if depth > MAX_DEPTH:", "            if depth > MAX_DEPTH + 1:", RD)
m("json depth one more", R, "if _deeper_than(document, MAX_DEPTH):", "if _deeper_than(document, MAX_DEPTH + 1):", RD)
m("yaml problem unelided", R, 'return text if len(text) <= 3 or text.startswith("\'<") else "\'…\'"', "return text", RD)
K = M + "command.py"
m(
    "timeout doubled",
    K,
    "done, _ = await asyncio.wait([work], timeout=self.timeout)",
    "done, _ = await asyncio.wait([work], timeout=self.timeout * 2)",
    CM,
)
m(
    "output limit one more",
    K,
    "                if len(self.data) > self.limit:",
    "                if len(self.data) > self.limit + 1:",
    CM,
)
m(
    "env gains HOME",
    K,
    'BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")',
    'BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "HOME")',
    CM,
)
m(
    "placeholders unchecked",
    K,
    "            if re.fullmatch(_PLACEHOLDER.format(re.escape(name)), word):",
    "            if False:",
    CM,
)
m("files unchecked at call", K, "        self._check_files()\n", "", CM)
m("output unchecked", K, "            self._check_output(result, *self.output)", "            pass", CM)
m(
    "stderr to client",
    K,
    'return ToolError(f"command {self.display!r} {what} (details in the server log, ref {ref})")',
    'return ToolError(f"command {self.display!r} {what} (details in the server log, ref {ref}): {tail}")',
    CM,
)
m("no own session", K, "                start_new_session=True,", "                start_new_session=False,", CM)
m(
    "stderr unescaped",
    K,
    '        return " | ".join(escape(line) for line in cut)',
    '        return " | ".join(cut)',
    CM,
)
m(
    "args not digested",
    M + "scripts.py",
    '        elif not word.startswith("-") and os.path.isfile(os.path.join(cwd, word)):',
    "        elif False:",
    DF + CM,
)
H = M + "handlers.py"
m(
    "optional required param ok",
    H,
    """        if default is NO_DEFAULT and not declared[name]:""",
    """        if False:""",
    HD,
)
m(
    "missing param ok",
    H,
    """        if missing:
            raise""",
    """        if False:
            raise""",
    HD,
)
m(
    "required unknown ok",
    H,
    """        if default is NO_DEFAULT and name not in declared:""",
    """        if False:""",
    HD,
)
P = M + "mapping.py"
m(
    "tool level over capability",
    P,
    'level = capability.get("securityLevel", document.get("securityLevel"))',
    'level = document.get("securityLevel", capability.get("securityLevel"))',
    MP,
)
m(
    "tool scopes over capability",
    P,
    'scopes = capability.get("scopes", document.get("scopes"))',
    'scopes = document.get("scopes", capability.get("scopes"))',
    MP,
)
m("extra arguments allowed", P, '    schema["additionalProperties"] = False', "    pass", MP)
m(
    "required not sent",
    P,
    """    if required:
        schema["required"] = required""",
    """    pass""",
    MP,
)
W = M + "watch.py"
m(
    "watch: events decide deletion",
    W,
    "            if os.path.lexists(path):\n                changed.add(path)",
    "            if False:\n                changed.add(path)",
    [T + "test_watch.py"],
)
m(
    "watch: not within",
    W,
    "candidates[path] = load_definition(path, within=self.directory)",
    "candidates[path] = load_definition(path)",
    [T + "test_watch.py", "-k", "not serve"],
)
m(
    "watch: batch errors end it",
    W,
    "            except Exception as exc:  # one bad batch",
    "            except ZeroDivisionError as exc:  # one bad batch",
    [T + "test_watch.py", "-k", "not serve"],
)
m(
    "watch: scripts not followed",
    W,
    "            if users:  # a command",
    "            if False:  # a command",
    [T + "test_watch.py", "-k", "not serve"],
)
m(
    "load dir: not within",
    G,
    "definitions, problems = read_definitions(paths, within=path if directory else None)",
    "definitions, problems = read_definitions(paths)",
    [T, "-k", "not serve", *CLI],
)
V = "src/tooldeck/cli/definitions.py"
m(
    "validate skips manager check",
    V,
    '    problems.extend(_manager(getattr(args, "deck", None)).check(definitions))',
    "    pass",
    CLI,
)
m(
    "validate dir not within",
    V,
    "definitions.append(load_definition(file, within=path if directory else None))",
    "definitions.append(load_definition(file))",
    CLI,
)


if __name__ == "__main__":
    sys.exit(main(MUTATIONS, sys.argv[1:], "definition-mutants-"))
