#!/usr/bin/env bash
# Build the browser edition into site/: a static JupyterLite site (Python in
# WebAssembly through Pyodide) that opens the core notebooks with nothing to
# install and makes no request outside its own origin at run time.
# Every download is pinned in scripts/site/pins.txt and cached under
# .site-cache/ (a second build reaches no registry). Needs python3 (3.11+),
# npm and node. Serve the result with: python3 -m http.server -d site
set -euo pipefail
cd "$(dirname "$0")/.."

cache=.site-cache
venv=$cache/venv
pins=scripts/site/pins.txt
wanted=$(awk '$1 == "build" { print $2 "==" $3 }' "$pins")
# The build's tools live in their own venv, remade when their pins change.
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.pins" 2>/dev/null)" != "$wanted" ]; then
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # one requirement per word
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $wanted
  printf '%s' "$wanted" >"$venv/.pins"
fi
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "site.sh: npm and node are needed to fetch Pyodide and Graphviz's WebAssembly build" \
    "and to compile the site's Python with Pyodide (apt-get install npm)" >&2
  exit 1
fi
exec "$venv/bin/python" scripts/site/build.py "$@"
