#!/usr/bin/env bash
# conformance.sh - run the official MCP conformance suite (@modelcontextprotocol/conformance) against
# `tooldeck serve examples/conformance_deck.py`, and print one line per scenario and a closing
# "N passed, M failed[, K skipped][, X expected failures]" line.
#
# Two pinned versions of the suite are installed side by side:
#   0.1.16          the default: the 2025-11-25 wire, one suite run per scenario, over HTTP or stdio.
#   0.2.0-alpha.12  with --spec-version: the suite that knows revision 2026-07-28 and its requirement sets. One suite
#                   run covers every selected scenario, at the wire of the revision named (HTTP only).
#
# Usage:
#   scripts/conformance.sh --http  [options]   # start `tooldeck serve DECK --http --port <free>`, test it, stop it
#   scripts/conformance.sh --stdio [options]   # `tooldeck serve DECK` over stdio, bridged to HTTP by supergateway
#   scripts/conformance.sh --install           # only install the pinned tools
#   scripts/conformance.sh --http --spec-version 2026-07-28   # the official 2026-07-28 bar (50 run, 37 scored)
#   scripts/conformance.sh --http --spec-version 2025-11-25   # the same endpoint at the legacy wire (33, 30 scored)
#
# Options:
#   --spec-version REV   2026-07-28 (or draft) or 2025-11-25: use suite 0.2.0-alpha.12 at that revision's wire.
#                        Without it: suite 0.1.16 at the 2025-11-25 wire.
#   --suite NAME         with 0.1.16: tools (default): server-initialize, ping, tools-list, tools-call-* but sampling
#                        and elicitation, dns-rebinding-protection, server-sse-multiple-streams, server-sse-polling;
#                        all: every server scenario of the suite.
#                        with --spec-version: required (default): the server scenarios the revision's frozen
#                        requirement set names, scored and not scored (the suite's `--requirements REV`);
#                        all: every server scenario applicable at REV, pending ones included
#                        (`--suite all --spec-version REV`).
#   --scenario NAME      run NAME instead of a suite (repeatable; `--list` shows the names). With --spec-version it
#                        runs at that wire even outside the scenario's applicability window (the suite's --force).
#   --baseline FILE      expected failures, in the suite's --expected-failures format: a YAML mapping whose `server`
#                        list names whole scenarios ("NAME") or single checks ("NAME:CHECK-ID"). A listed failure is
#                        reported XFAIL and does not fail the run; a listed entry that passes is stale and fails it.
#   --strict             a scenario with WARNING checks counts as failed
#   --deck FILE          the deck to serve (default: examples/conformance_deck.py)
#   --timeout SECONDS    limit for one scenario (default: 90)
#   --out DIR            keep each scenario's checks.json and log here (default: a temporary directory,
#                        removed after a run in which nothing failed)
#   --list               print the scenarios the options select, and exit
#   -h, --help
#
# In --stdio mode the HTTP-transport scenarios (dns-rebinding-protection, server-sse-multiple-streams,
# server-sse-polling) are skipped when a suite selects them: through the bridge they would test supergateway, not
# tooldeck. Name them with --scenario to run them anyway.
#
# Environment:
#   TOOLDECK_CONFORMANCE_HOME  where the npm packages go (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-conformance)
#   TOOLDECK_NODE_HOME         where Node 22 goes, shared with scripts/interop.sh (see scripts/node.sh; default:
#                              ${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-node)
#   TOOLDECK                   the tooldeck command (default: .venv/bin/tooldeck of this checkout, else `tooldeck`)
#   TOOLDECK_CONFORMANCE_RUNNER  a command (split on blanks) run instead of the pinned suite, with the suite's
#                              arguments: `list --server`, then `server --url URL --scenario NAME -o DIR` per scenario;
#                              with --spec-version, `list --requirements REV` (or `list --server --spec-version REV`)
#                              and one `server --url URL --requirements REV -o DIR --timeout MS` (or `--suite all
#                              --spec-version REV`, or `--scenario NAME --spec-version REV --force` per name).
#                              For testing this script: with it, --http mode needs neither node nor the install.
#
# A scenario passes only if the suite exited 0 and wrote one results file (checks.json) that parses and holds at
# least one SUCCESS check and no FAILURE (and, with --strict, no WARNING). With --spec-version one suite run covers
# many scenarios, so its exit status is read for the run: 1 (a scored scenario failed) must match a failure seen here,
# any other non-zero status fails every scenario that has no results yet. Scenarios the requirement set runs but does
# not score are marked "(not scored: REASON)"; tooldeck holds them to the same bar. A scenario whose every check the
# suite itself records as SKIPPED (tasks-status-notifications in 0.2.0-alpha.12, whose harness is not written yet) is
# reported SKIP with the suite's reason and counted as skipped.
#
# Exit status: 0 when no scenario failed, 1 when one did, 2 when the run could not start (or selected no scenario).
set -u

CONFORMANCE_VERSION=0.1.16
MODERN_VERSION=0.2.0-alpha.12  # installed under an npm alias, beside 0.1.16 in the same node_modules
MODERN_ALIAS=mcp-conformance-modern
SUPERGATEWAY_VERSION=4.0.0
HTTP_SCENARIOS=(dns-rebinding-protection server-sse-multiple-streams server-sse-polling)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOME_DIR="${TOOLDECK_CONFORMANCE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-conformance}"
# shellcheck source=node.sh
. "$ROOT/scripts/node.sh"   # NODE: Node 22, one copy shared with scripts/interop.sh (the suite needs node >= 22)
SUITE_JS="$HOME_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
MODERN_JS="$HOME_DIR/node_modules/$MODERN_ALIAS/dist/index.js"
BRIDGE_JS="$HOME_DIR/node_modules/supergateway/dist/index.js"

die() { echo "conformance.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }

# --- arguments ----------------------------------------------------------------------------------------------------
MODE="" SUITE="" SPEC="" BASELINE="" STRICT=0 DECK="$ROOT/examples/conformance_deck.py" TIMEOUT=90 OUT="" LIST=0 INSTALL_ONLY=0
NAMED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --http) MODE=http; shift ;;
    --stdio) MODE=stdio; shift ;;
    --install) INSTALL_ONLY=1; shift ;;
    --suite) [ $# -ge 2 ] || die "--suite needs a value"; SUITE="$2"; shift 2 ;;
    --scenario) [ $# -ge 2 ] || die "--scenario needs a value"; NAMED+=("$2"); shift 2 ;;
    --spec-version) [ $# -ge 2 ] || die "--spec-version needs a value"; SPEC="$2"; shift 2 ;;
    --baseline) [ $# -ge 2 ] || die "--baseline needs a value"; BASELINE="$2"; shift 2 ;;
    --strict) STRICT=1; shift ;;
    --deck) [ $# -ge 2 ] || die "--deck needs a value"; DECK="$2"; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; TIMEOUT="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; OUT="$2"; shift 2 ;;
    --list) LIST=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case "$SPEC" in
  "") SUITE="${SUITE:-tools}"
      case "$SUITE" in tools|all) ;; *) die "--suite must be tools or all, got '$SUITE'" ;; esac ;;
  draft|2026-07-28|2025-11-25)
      [ "$SPEC" = draft ] && SPEC=2026-07-28
      SUITE="${SUITE:-required}"
      case "$SUITE" in required|all) ;; *) die "with --spec-version, --suite must be required or all, got '$SUITE'" ;; esac
      [ "$MODE" = stdio ] && die "--spec-version needs --http: the stdio bridge (supergateway) is set up for suite 0.1.16 only" ;;
  *) die "--spec-version must be 2026-07-28 (or draft) or 2025-11-25, got '$SPEC'" ;;
esac
if [ -n "$BASELINE" ]; then
  [ -f "$BASELINE" ] || die "no baseline file $BASELINE"
  BASELINE="$(cd "$(dirname "$BASELINE")" && pwd)/$(basename "$BASELINE")"
fi
if [ $INSTALL_ONLY = 0 ] && [ $LIST = 0 ] && [ -z "$MODE" ]; then usage >&2; die "choose --http or --stdio"; fi

# --- install (idempotent: npm runs only when a pinned version is missing) --------------------------------------------
installed_version() {  # the version field of an installed package's package.json, or nothing
  local manifest="$HOME_DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] && python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest"
}
install_tools() {
  local want=("@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
              "$MODERN_ALIAS@npm:@modelcontextprotocol/conformance@$MODERN_VERSION"
              "supergateway@$SUPERGATEWAY_VERSION")
  local spec name missing=0
  for spec in "${want[@]}"; do
    name="${spec%%@npm:*}"; name="${name%@*}"  # an alias is installed under its own name
    [ "$(installed_version "$name")" = "${spec##*@}" ] || missing=1
  done
  [ $missing = 0 ] && return 0
  command -v npm >/dev/null || die "npm is not installed; it is needed once, to install ${want[*]} into $HOME_DIR"
  mkdir -p "$HOME_DIR" || die "cannot create $HOME_DIR"
  [ -f "$HOME_DIR/package.json" ] || echo '{"name": "tooldeck-conformance-tools", "private": true}' > "$HOME_DIR/package.json"
  echo "installing ${want[*]} into $HOME_DIR" >&2
  # The system npm may run on node < 22; the packages only warn about their engine while installing.
  (cd "$HOME_DIR" && npm install --no-audit --no-fund --save-exact --loglevel=error "${want[@]}") >&2 \
    || die "npm install failed (into $HOME_DIR)"
}
if [ -z "${TOOLDECK_CONFORMANCE_RUNNER:-}" ] || [ "$MODE" = stdio ] || [ $INSTALL_ONLY = 1 ]; then
  mkdir -p "$HOME_DIR" || die "cannot create $HOME_DIR"
  (
    flock 9 2>/dev/null || true  # two runs at once install once
    install_tools
  ) 9>"$HOME_DIR/.install.lock" || exit 2
  install_node || die "node $NODE_VERSION could not be installed"
  if [ ! -x "$NODE" ] || [ ! -f "$SUITE_JS" ] || [ ! -f "$MODERN_JS" ] || [ ! -f "$BRIDGE_JS" ]; then
    die "the install in $HOME_DIR is incomplete; remove it and retry"
  fi
  [ $INSTALL_ONLY = 1 ] && { echo "tools installed in $HOME_DIR (node $("$NODE" --version))"; exit 0; }
fi
if [ -n "${TOOLDECK_CONFORMANCE_RUNNER:-}" ]; then
  read -r -a RUNNER <<< "$TOOLDECK_CONFORMANCE_RUNNER"
  [ ${#RUNNER[@]} -gt 0 ] || die "TOOLDECK_CONFORMANCE_RUNNER is blank"
  RUNNER_NAME="runner ${RUNNER[*]}"
elif [ -n "$SPEC" ]; then
  RUNNER=("$NODE" "$MODERN_JS")
  RUNNER_NAME="conformance $MODERN_VERSION at the $SPEC wire, node $("$NODE" --version)"
else
  RUNNER=("$NODE" "$SUITE_JS")
  RUNNER_NAME="conformance $CONFORMANCE_VERSION, node $("$NODE" --version)"
fi

# --- scenarios ----------------------------------------------------------------------------------------------------
in_list() { local x="$1"; shift; local y; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }
NOT_SCORED=()  # with --spec-version required: "NAME REASON" for what the requirement set runs but does not score
if [ -z "$SPEC" ]; then
  mapfile -t KNOWN < <("${RUNNER[@]}" list --server | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p')
elif [ "$SUITE" = required ] && [ ${#NAMED[@]} = 0 ]; then
  # Scored server scenarios are "  - NAME" under "Server scenarios"; unscored ones "    - NAME [server]" under a
  # "  REASON (N):" line of the "never scored" part.
  LISTING="$("${RUNNER[@]}" list --requirements "$SPEC")" || die "the suite could not list the $SPEC requirements"
  mapfile -t KNOWN < <(awk '
    /^Server scenarios/ { part = "server"; next }
    /^[A-Z]/ { part = /never scored/ ? "unscored" : ""; next }
    part == "server" && /^  - / { print $2 }
    part == "unscored" && /^    - .*\[server\]/ { print $2 }' <<< "$LISTING")
  mapfile -t NOT_SCORED < <(awk '
    /^[A-Z]/ { part = /never scored/ ? "unscored" : ""; next }
    part == "unscored" && /^  [a-z-]+ \([0-9]+\):/ { reason = $1; next }
    part == "unscored" && /^    - .*\[server\]/ { print $2, reason }' <<< "$LISTING")
else
  mapfile -t KNOWN < <("${RUNNER[@]}" list --server --spec-version "$SPEC" | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p')
  if [ ${#NAMED[@]} -gt 0 ]; then  # a named scenario may lie outside the window (--force runs it): know them all
    mapfile -t -O ${#KNOWN[@]} KNOWN < <("${RUNNER[@]}" list --server | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p')
  fi
fi
[ ${#KNOWN[@]} -gt 0 ] || die "the conformance suite listed no server scenarios"

if [ ${#NAMED[@]} -gt 0 ]; then
  for s in "${NAMED[@]}"; do in_list "$s" "${KNOWN[@]}" || die "no server scenario '$s' (see --list)"; done
  SCENARIOS=("${NAMED[@]}")
elif [ "$SUITE" = all ] || [ "$SUITE" = required ]; then
  SCENARIOS=("${KNOWN[@]}")
else
  SCENARIOS=()
  for s in "${KNOWN[@]}"; do
    case "$s" in
      tools-call-sampling|tools-call-elicitation) ;;
      server-initialize|ping|tools-list|tools-call-*) SCENARIOS+=("$s") ;;
      *) in_list "$s" "${HTTP_SCENARIOS[@]}" && SCENARIOS+=("$s") ;;
    esac
  done
fi
[ ${#SCENARIOS[@]} -gt 0 ] || die "the '$SUITE' suite selects none of the suite's ${#KNOWN[@]} server scenarios"
if [ $LIST = 1 ]; then printf '%s\n' "${SCENARIOS[@]}"; exit 0; fi

# --- the baseline -------------------------------------------------------------------------------------------------
baseline_entries() {  # the baseline's server entries, one a line; a malformed file: its line, and status 1
  python3 - "$1" <<'PY'
import re, sys
# The suite's format, read without a YAML library: top-level keys `server:` / `client:`, each a list of plain strings.
key, entries = None, []
for number, raw in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
    if not line.strip():
        continue
    if match := re.fullmatch(r"(server|client):\s*(\[\])?", line):
        key = match.group(1)
    elif (match := re.fullmatch(r"\s+-\s+(['\"]?)([A-Za-z0-9_./-]+(?::[A-Za-z0-9_./-]+)?)\1", line)) and key:
        if key == "server":
            entries.append(match.group(2))
    else:
        print(f"{sys.argv[1]}:{number}: expected 'server:' or '  - SCENARIO[:CHECK-ID]', got {line.strip()!r}")
        sys.exit(1)
print("\n".join(entries))
PY
}
BASELINE_LINES=()
if [ -n "$BASELINE" ]; then
  BASELINE_TEXT="$(baseline_entries "$BASELINE")" || die "$BASELINE_TEXT"
  mapfile -t BASELINE_LINES <<< "$BASELINE_TEXT"
  for entry in "${BASELINE_LINES[@]}"; do
    [ -z "$entry" ] || in_list "${entry%%:*}" "${KNOWN[@]}" || die "$BASELINE names '${entry%%:*}', not a server scenario of this suite"
  done
fi

# --- the server -------------------------------------------------------------------------------------------------------
TOOLDECK="${TOOLDECK:-}"
if [ -z "$TOOLDECK" ]; then
  if [ -x "$ROOT/.venv/bin/tooldeck" ]; then TOOLDECK="$ROOT/.venv/bin/tooldeck"; else TOOLDECK=tooldeck; fi
fi
command -v "$TOOLDECK" >/dev/null || die "tooldeck not found (set TOOLDECK or create $ROOT/.venv)"
[ -f "$DECK" ] || die "no deck file $DECK"
command -v curl >/dev/null || die "curl is needed to see when the server is up"

OUT_IS_TEMP=0
if [ -z "$OUT" ]; then
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/tooldeck-conformance.XXXXXX")" || die "cannot create a temporary directory"
  OUT_IS_TEMP=1
fi
mkdir -p "$OUT" || die "cannot create $OUT"

SERVER_PID=""
stop_server() {  # only the process group this script started
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM -- "-$SERVER_PID" 2>/dev/null
  local _
  for _ in $(seq 50); do kill -0 -- "-$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
wait_until_up() {  # any HTTP status from the endpoint means the server answers
  local url="$1" deadline=$((SECONDS + 30)) code
  while [ $SECONDS -lt $deadline ]; do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$OUT/server.log" >&2; die "the server exited before answering"; }
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url")"
    [ -n "$code" ] && [ "$code" != 000 ] && return 0
    sleep 0.2
  done
  tail -n 20 "$OUT/server.log" >&2
  die "$url did not answer within 30 s (log: $OUT/server.log)"
}

PORT="$(free_port)" || die "no free port"
URL="http://127.0.0.1:$PORT/mcp"
if [ "$MODE" = http ]; then
  setsid "$TOOLDECK" serve "$DECK" --http --host 127.0.0.1 --port "$PORT" > "$OUT/server.log" 2>&1 &
  SERVER_PID=$!
else
  # --stateful gives each MCP session its own tooldeck process, so notifications reach the right client;
  # --sessionTimeout stops a finished scenario's process.
  setsid "$NODE" "$BRIDGE_JS" --stdio "$(printf '%q ' "$TOOLDECK" serve "$DECK")" \
    --outputTransport streamableHttp --stateful --sessionTimeout 10000 --port "$PORT" > "$OUT/server.log" 2>&1 &
  SERVER_PID=$!
fi
wait_until_up "$URL"
echo "$RUNNER_NAME, $MODE mode, $URL, ${#SCENARIOS[@]} scenarios"

# --- run ------------------------------------------------------------------------------------------------------------------
expected_of() {  # scenario -> its baseline entries ("*" for the whole scenario, else check ids), one a line
  local entry
  for entry in "${BASELINE_LINES[@]}"; do
    [ "$entry" = "$1" ] && echo "*"
    [ "${entry%%:*}" = "$1" ] && [ "$entry" != "$1" ] && echo "${entry#*:}"
  done
}

summarize() {  # checks.json, baseline check ids... -> "SUCCESSES FAILURES WARNINGS EXCUSED STALE SKIPPED remark"
  python3 - "$@" <<'PY'
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as file:
        checks = json.load(file)
except (OSError, ValueError) as exc:
    sys.exit(f"unparsable results: {exc}")
if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
    sys.exit("unparsable results: not a list of checks")
expected = set(sys.argv[2:])  # as the suite's baseline: a listed FAILURE or WARNING is excused, a listed SUCCESS stale
excused = [c for c in checks if c.get("status") in ("FAILURE", "WARNING") and c.get("id") in expected]
stale = sorted({c.get("id") for c in checks if c.get("status") == "SUCCESS" and c.get("id") in expected}
               - {c.get("id") for c in excused})
checks = [c for c in checks if c not in excused]
by = {s: [c for c in checks if c.get("status") == s] for s in ("SUCCESS", "FAILURE", "WARNING", "SKIPPED")}
def note(check):
    text = str(check.get("errorMessage") or check.get("description") or "").strip()
    return f"{check.get('id')}: {text.splitlines()[0][:200]}" if text else str(check.get("id"))
notes = [note(c) for c in by["FAILURE"] + by["WARNING"]] + [f"stale baseline entry {id}: it passes" for id in stale]
if by["SKIPPED"] and len(by["SKIPPED"]) == len(checks):  # the suite itself skipped the scenario: say why
    notes = [note(c) for c in by["SKIPPED"]]
print(len(by["SUCCESS"]), len(by["FAILURE"]), len(by["WARNING"]), len(excused), len(stale), len(by["SKIPPED"]),
      "; ".join(notes))
PY
}
verdict() {  # scenario, runner status, its directory -> a PASS, XFAIL or FAIL line; status 0 unless FAIL
  local s="$1" status="$2" dir="$3" files summary ok bad warn excused stale skip remark line passed=1 whole=0 tag=""
  local expected=()
  mapfile -t expected < <(expected_of "$s")
  if [ ${#expected[@]} -gt 0 ] && [ "${expected[0]}" = "*" ]; then whole=1 expected=(); fi
  mapfile -t files < <(find "$dir" -name checks.json)
  if [ ${#files[@]} != 1 ]; then
    passed=0 line="no results (see $dir/run.log)"
    [ ${#files[@]} -gt 1 ] && line="${#files[@]} results files in $dir, expected one"
  elif ! summary="$(summarize "${files[0]}" "${expected[@]}" 2>&1)"; then
    passed=0 line="$(tail -n 1 <<< "$summary") (${files[0]})"
  else
    read -r ok bad warn excused stale skip remark <<< "$summary"
    line="$ok/$((ok + bad)) checks"
    [ "$warn" -gt 0 ] && line="$line, $warn warning(s)"
    [ "$excused" -gt 0 ] && line="$line, $excused failing check(s) in the baseline"
    [ -n "$remark" ] && line="$line: $remark"
    if [ "$ok$bad$warn$excused" = 0000 ] && [ "$skip" -gt 0 ]; then  # every check SKIPPED, by the suite itself
      tag=SKIP line="the suite skips every check ($skip): $remark"
    fi
    [ "$ok" -gt 0 ] || [ "$tag" = SKIP ] || { passed=0; line="$line; no check succeeded"; }
    [ "$bad" = 0 ] || passed=0
    [ "$stale" = 0 ] || passed=0
    [ $STRICT = 1 ] && [ "$warn" -gt 0 ] && passed=0
    [ $passed = 1 ] && [ "$excused" -gt 0 ] && tag=XFAIL
  fi
  # A results file does not outweigh the runner's own verdict, but the suite's 1 for failures the baseline excuses
  # is no verdict of its own.
  [ "$status" = 1 ] && [ "${excused:-0}" -gt 0 ] && [ "${bad:-1}" = 0 ] && status=0
  case "$status" in
    0) ;;
    124|137) passed=0 line="$line; timed out after ${TIMEOUT} s" ;;
    *) passed=0 line="$line; the runner exited $status (see $dir/run.log)" ;;
  esac
  local reason
  for reason in "${NOT_SCORED[@]}"; do [ "${reason%% *}" = "$s" ] && line="$line (not scored: ${reason#* })"; done
  if [ $whole = 1 ]; then  # the whole scenario is expected to fail
    if [ $passed = 1 ]; then passed=0 line="$line; stale baseline entry: the scenario passes now"; else tag=XFAIL; fi
  fi
  if [ $passed = 0 ] && [ "$tag" != XFAIL ]; then tag=FAIL; elif [ -z "$tag" ]; then tag=PASS; fi
  printf '%-5s %-30s %s\n' "$tag" "$s" "$line"
  case "$tag" in PASS) return 0 ;; XFAIL) return 3 ;; SKIP) return 4 ;; *) return 1 ;; esac
}

PASSED=0 FAILED=0 SKIPPED=0 EXPECTED=0
count() {  # a verdict's status -> the counters
  case "$1" in
    0) PASSED=$((PASSED + 1)) ;; 3) EXPECTED=$((EXPECTED + 1)) ;; 4) SKIPPED=$((SKIPPED + 1)) ;; *) FAILED=$((FAILED + 1)) ;;
  esac
}
if [ -z "$SPEC" ]; then
  for s in "${SCENARIOS[@]}"; do
    if [ "$MODE" = stdio ] && [ ${#NAMED[@]} = 0 ] && in_list "$s" "${HTTP_SCENARIOS[@]}"; then
      printf 'SKIP  %-30s HTTP transport scenario: over the stdio bridge it would test supergateway\n' "$s"
      SKIPPED=$((SKIPPED + 1)); continue
    fi
    dir="$OUT/$s"; rm -rf "$dir"; mkdir -p "$dir"
    timeout --kill-after=5 "$TIMEOUT" "${RUNNER[@]}" server --url "$URL" --scenario "$s" -o "$dir" \
      > "$dir/run.log" 2>&1
    verdict "$s" $? "$dir"; count $?
  done
else
  # One suite run for the whole selection (named scenarios: one run each); the suite names each results directory
  # server-NAME-<timestamp>, and each moves to OUT/NAME as in a per-scenario run.
  RAW="$OUT/.raw"; rm -rf "$RAW"; mkdir -p "$RAW"
  RUNS=()
  if [ ${#NAMED[@]} -gt 0 ]; then
    for s in "${SCENARIOS[@]}"; do RUNS+=("--scenario $s --spec-version $SPEC --force"); done
  elif [ "$SUITE" = required ]; then
    RUNS=("--requirements $SPEC")
  else
    RUNS=("--suite all --spec-version $SPEC")
  fi
  RUN_STATUS=0
  for run in "${RUNS[@]}"; do
    read -r -a selection <<< "$run"
    limit=$((TIMEOUT * ${#SCENARIOS[@]} / ${#RUNS[@]} + 30))
    timeout --kill-after=5 "$limit" "${RUNNER[@]}" server --url "$URL" "${selection[@]}" -o "$RAW" \
      --timeout "$((TIMEOUT * 1000))" >> "$OUT/run.log" 2>&1
    status=$?
    [ $status -gt $RUN_STATUS ] && RUN_STATUS=$status
  done
  for s in "${SCENARIOS[@]}"; do
    dir="$OUT/$s"; rm -rf "$dir"; mkdir -p "$dir"
    for found in "$RAW"/server-"$s"-*; do
      [[ "$found" =~ /server-$s-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9-]+Z$ ]] && mv "$found" "$dir/"
    done
    status=0  # 1 is the suite's "a scored scenario failed", checked against the verdicts below
    if [ $RUN_STATUS != 0 ] && [ $RUN_STATUS != 1 ] && [ -z "$(find "$dir" -name checks.json)" ]; then
      status=$RUN_STATUS
    fi
    ln -s ../run.log "$dir/run.log"
    verdict "$s" "$status" "$dir"; count $?
  done
  rmdir "$RAW" 2>/dev/null
  if [ $RUN_STATUS = 1 ] && [ $FAILED = 0 ] && [ $EXPECTED = 0 ]; then
    echo "FAIL  the suite's verdict             it exited 1 (a scored scenario failed), which no line above shows (see $OUT/run.log)"
    FAILED=$((FAILED + 1))
  fi
fi

stop_server
if [ $OUT_IS_TEMP = 1 ] && [ $FAILED = 0 ]; then rm -rf "$OUT"; else echo "details: $OUT"; fi
closing="$PASSED passed, $FAILED failed"
[ $SKIPPED -gt 0 ] && closing="$closing, $SKIPPED skipped"
[ $EXPECTED -gt 0 ] && closing="$closing, $EXPECTED expected failures"
echo "$closing"
[ $FAILED = 0 ]
