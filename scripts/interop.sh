#!/usr/bin/env bash
# interop.sh - official TypeScript MCP clients against `tooldeck serve DECK`: the SDK v2 client and the Inspector at
# 2026-07-28 (DECK: examples/conformance_deck.py), and the 1.x SDK most hosts ship, at 2025-11-25.
#
#   scripts/interop.sh --client [--transport http|stdio]
#       tests/interop/ts_client.mjs: @modelcontextprotocol/client (pinned to 2026-07-28) lists and calls tools,
#       answers elicitations through input-required round trips, and runs tasks through the tasks extension with
#       @modelcontextprotocol/ext-tasks (tasks/get polling, tasks/update answers, tasks/cancel).
#   scripts/interop.sh --client-v1
#       tests/interop/ts_sdk_v1_progress.mjs: the TypeScript SDK 1.x client (@modelcontextprotocol/sdk, what most hosts
#       ship) calls a tool that reports progress in steps, over stdio and Streamable HTTP (pass
#       --deck tests/interop/progress_deck.py).
#   scripts/interop.sh --inspector
#       tests/interop/inspector_cli.mjs: the MCP Inspector's CLI with --protocol-era modern lists tools and calls one
#       (and, to tell the eras apart, calls it once more with --protocol-era legacy).
#   scripts/interop.sh --install
#       only install the pinned packages.
#
# Each run starts its own `tooldeck serve` (HTTP on a free port, or stdio), prints one JSON report on stdout and
# exits 0 when every step saw what it expected, 1 when one did not (the report's "failures" say which), and 2 when
# the run could not start (npm missing, install failed, bad arguments).
#
# Options:
#   --deck FILE          the deck to serve (default: examples/conformance_deck.py)
#   -h, --help
#
# Environment:
#   TOOLDECK_INTEROP_HOME  where the npm packages go (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-interop),
#                          installed on first use (about 30 s) the way scripts/conformance.sh installs its suite
#   TOOLDECK_NODE_HOME     where Node 22 goes, shared with scripts/conformance.sh (see scripts/node.sh)
#   TOOLDECK               the tooldeck command (default: .venv/bin/tooldeck of this checkout, else `tooldeck`)
set -u

CLIENT_VERSION=2.4.0       # @modelcontextprotocol/client: the SDK v2 client, which speaks 2026-07-28
EXT_TASKS_VERSION=0.2.2    # @modelcontextprotocol/ext-tasks: the tasks extension's requester (V2 = 2026-07-28)
INSPECTOR_VERSION=2.12.0   # @modelcontextprotocol/inspector: its CLI has --protocol-era modern
SDK_V1_VERSION=1.32.2      # @modelcontextprotocol/sdk: the 1.x client most hosts ship (2025-11-25 and older)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOME_DIR="${TOOLDECK_INTEROP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-interop}"
# shellcheck source=node.sh
. "$ROOT/scripts/node.sh"   # NODE: Node 22, one copy shared with scripts/conformance.sh (the Inspector needs >= 22.19)
INSPECTOR_JS="$HOME_DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

die() { echo "interop.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }

# --- arguments ----------------------------------------------------------------------------------------------------
MODE="" TRANSPORT=http DECK="$ROOT/examples/conformance_deck.py"
while [ $# -gt 0 ]; do
  case "$1" in
    --client) MODE=client; shift ;;
    --client-v1) MODE=client-v1; shift ;;
    --inspector) MODE=inspector; shift ;;
    --install) MODE=install; shift ;;
    --transport) [ $# -ge 2 ] || die "--transport needs a value"; TRANSPORT="$2"; shift 2 ;;
    --deck) [ $# -ge 2 ] || die "--deck needs a value"; DECK="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ -n "$MODE" ] || { usage >&2; die "choose --client, --client-v1, --inspector or --install"; }
case "$TRANSPORT" in http|stdio) ;; *) die "--transport must be http or stdio, got '$TRANSPORT'" ;; esac
[ "$MODE" = inspector ] && [ "$TRANSPORT" != http ] && die "--inspector runs over HTTP only"

# --- install (idempotent: npm runs only when a pinned version is missing) --------------------------------------------
installed_version() {  # the version field of an installed package's package.json, or nothing
  local manifest="$HOME_DIR/node_modules/$1/package.json"
  [ -f "$manifest" ] && python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest"
}
install_tools() {
  local want=("@modelcontextprotocol/client@$CLIENT_VERSION" "@modelcontextprotocol/ext-tasks@$EXT_TASKS_VERSION"
              "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" "@modelcontextprotocol/sdk@$SDK_V1_VERSION")
  local spec missing=0
  for spec in "${want[@]}"; do
    [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || missing=1
  done
  [ $missing = 0 ] && return 0
  command -v npm >/dev/null || die "npm is not installed; it is needed once, to install ${want[*]} into $HOME_DIR"
  [ -f "$HOME_DIR/package.json" ] \
    || echo '{"name": "tooldeck-interop-tools", "private": true}' > "$HOME_DIR/package.json"
  echo "installing ${want[*]} into $HOME_DIR" >&2
  # The system npm may run on node < 22; the packages only warn about their engine while installing.
  (cd "$HOME_DIR" && npm install --no-audit --no-fund --save-exact --loglevel=error "${want[@]}") >&2 \
    || die "npm install failed (into $HOME_DIR)"
}
mkdir -p "$HOME_DIR" || die "cannot create $HOME_DIR"
(
  flock 9 2>/dev/null || true  # two runs at once install once
  install_tools
) 9>"$HOME_DIR/.install.lock" || exit 2
install_node || die "node $NODE_VERSION could not be installed"
EXT_TASKS_MANIFEST="$HOME_DIR/node_modules/@modelcontextprotocol/ext-tasks/package.json"
SDK_V1_MANIFEST="$HOME_DIR/node_modules/@modelcontextprotocol/sdk/package.json"
[ -x "$NODE" ] && [ -f "$INSPECTOR_JS" ] && [ -f "$EXT_TASKS_MANIFEST" ] && [ -f "$SDK_V1_MANIFEST" ] \
  || die "the install in $HOME_DIR is incomplete; remove it and retry"
if [ "$MODE" = install ]; then
  echo "tools installed in $HOME_DIR (node $("$NODE" --version))"
  exit 0
fi

# --- run ------------------------------------------------------------------------------------------------------------
TOOLDECK="${TOOLDECK:-}"
if [ -z "$TOOLDECK" ]; then
  if [ -x "$ROOT/.venv/bin/tooldeck" ]; then TOOLDECK="$ROOT/.venv/bin/tooldeck"; else TOOLDECK=tooldeck; fi
fi
command -v "$TOOLDECK" >/dev/null || die "tooldeck not found (set TOOLDECK or create $ROOT/.venv)"
[ -f "$DECK" ] || die "no deck file $DECK"

if [ "$MODE" = client-v1 ]; then
  exec "$NODE" "$ROOT/tests/interop/ts_sdk_v1_progress.mjs" --modules "$HOME_DIR/node_modules" \
    --tooldeck "$TOOLDECK" --deck "$DECK"
fi
if [ "$MODE" = client ]; then
  exec "$NODE" "$ROOT/tests/interop/ts_client.mjs" --modules "$HOME_DIR/node_modules" --tooldeck "$TOOLDECK" \
    --deck "$DECK" --transport "$TRANSPORT"
fi
exec "$NODE" "$ROOT/tests/interop/inspector_cli.mjs" --node "$NODE" --inspector "$INSPECTOR_JS" \
  --tooldeck "$TOOLDECK" --deck "$DECK"
