#!/usr/bin/env bash
# Creates the benchmark peer venvs (idempotent) and makes sure tooldeck is installed in the project venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3

make_venv() {  # make_venv DIR SPEC...
    local dir="$1"; shift
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

# uvloop and httptools: the HTTP rows run every server under uvicorn with the same event loop and HTTP parser
# that tooldeck's own `serve --http` picks up (servers/serve_http.py); `pip install mcp` alone would give h11+asyncio.
make_venv benchmarks/.venvs/mcp "mcp==2.3.0" orjson uvloop httptools
make_venv benchmarks/.venvs/fastmcp "fastmcp>=4,<5" orjson uvloop httptools

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# Always (re)install, so dependencies added to pyproject.toml (uvloop, ...) are what gets measured. tooldeck is
# under construction: a failed install is reported, and run.py then records the tooldeck server as failed.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e . \
    || echo "warning: could not install tooldeck into .venv (run.py will skip it)" >&2
.venv/bin/python -c "import orjson" 2>/dev/null \
    || .venv/bin/python -m pip install --quiet --disable-pip-version-check orjson

echo "mcp $(benchmarks/.venvs/mcp/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))')"
echo "fastmcp $(benchmarks/.venvs/fastmcp/bin/python -c 'import importlib.metadata as m; print(m.version("fastmcp"))')"
