#!/usr/bin/env bash
# Creates the benchmark peer venvs (idempotent) and makes sure tooldeck is installed in the project venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3

make_venv() {  # make_venv DIR SPEC...: a venv holding SPEC and its dependencies, nothing else
    local dir="$1"; shift
    # A venv made for another spec is made afresh: pip never removes what an earlier spec added.
    if [ ! -x "$dir/bin/python" ] || [ "$(cat "$dir/.bench-spec" 2>/dev/null)" != "$*" ]; then
        "$PYTHON" -m venv --clear "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    echo "$*" >"$dir/.bench-spec"
}

# The peers are measured as their users install them: `pip install mcp==2.3.0` / `pip install 'fastmcp>=4,<5'`
# and nothing added (so over HTTP, uvicorn on h11 and asyncio: neither brings uvloop or httptools).
make_venv benchmarks/.venvs/mcp "mcp==2.3.0"
make_venv benchmarks/.venvs/fastmcp "fastmcp>=4,<5"

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# Always (re)install, so dependencies added to pyproject.toml (uvloop, ...) are what gets measured. tooldeck is
# under construction: a failed install is reported, and run.py then records the tooldeck server as failed.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e . \
    || echo "warning: could not install tooldeck into .venv (run.py will skip it)" >&2
.venv/bin/python -c "import orjson" 2>/dev/null \
    || .venv/bin/python -m pip install --quiet --disable-pip-version-check orjson
# granian, for http_servers.py only (the HTTP server compared with uvicorn; tooldeck never imports it).
.venv/bin/python -m pip install --quiet --disable-pip-version-check 'granian>=2.8,<3' \
    || echo "warning: could not install granian into .venv (http_servers.py needs it)" >&2

echo "mcp $(benchmarks/.venvs/mcp/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))')"
echo "fastmcp $(benchmarks/.venvs/fastmcp/bin/python -c 'import importlib.metadata as m; print(m.version("fastmcp"))')"
