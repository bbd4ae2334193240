#!/usr/bin/env bash
# Set up blockwise in ./.venv (idempotent): Graphviz's `dot`, then the package and its pinned deps.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v dot >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing graphviz (dot)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz) >/dev/null
  else
    echo "setup: Graphviz 'dot' is missing; install the graphviz package (SVG export and the TUI need it)" >&2
  fi
fi
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
log=.venv/setup.log
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" >"$log" 2>&1; then
  tail -20 "$log" >&2; echo "setup: pip install failed (full log: $log)" >&2; exit 1
fi
.venv/bin/python -c "import tvm, engine" || { echo "setup: install failed" >&2; exit 1; }
