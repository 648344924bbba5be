#!/usr/bin/env bash
# Set up everything agent17 needs on a fresh Debian/Ubuntu machine or in CI:
# a check that Python is 3.11 or newer (before anything is installed),
# Graphviz, Chromium, rsync and Python's venv module from apt (only when missing;
# PostgreSQL too when AGENT17_WITH_POSTGRES=1, as scripts/test.sh sets it), a
# venv in .venv, the package with its development extras, and the notebooks
# marked trusted. Safe to run again; fast when done. PYTHON picks the Python
# (default: python3).
#
#   bash scripts/setup.sh            everything, the test tools too (test.sh, demo.sh)
#   bash scripts/setup.sh --course   only what the course needs (lab.sh): Graphviz, the
#                                    package and its own dependencies (JupyterLab,
#                                    ipywidgets, graphviz, pydantic, openai); no test
#                                    tools, no Chromium, no npm
set -euo pipefail
cd "$(dirname "$0")/.."

course=0
if [ "${1:-}" = "--course" ]; then
  course=1
  AGENT17_SKIP_BROWSER=1
fi

python="${PYTHON:-python3}"
hint="e.g. PYTHON=python3.12 ./scripts/demo.sh (or test.sh)"

# One line and a non-zero exit unless Python $1 exists and is 3.11 or newer;
# $2 says what to do about it.
require_python() {
  local found version
  if ! found="$(command -v "$1" 2>/dev/null)"; then
    echo "setup: found no Python at '$1'; agent17 needs Python 3.11 or newer: $2" >&2
    exit 1
  fi
  # sys.version rather than f-strings: an old Python must still get this far.
  version="$("$1" -c 'import sys; print(sys.version.split()[0]); sys.exit(sys.version_info < (3, 11))' 2>/dev/null)" &&
    return 0
  if [ -n "$version" ]; then
    echo "setup: $found is Python $version, but agent17 needs Python 3.11 or newer: $2" >&2
  else
    echo "setup: $found does not run as a Python; agent17 needs Python 3.11 or newer: $2" >&2
  fi
  exit 1
}

# A venv made without ensurepip has no pip: make it again rather than use it.
if [ -x .venv/bin/python ] && [ -x .venv/bin/pip ]; then
  make_venv=0
  require_python .venv/bin/python "delete .venv and run this again with PYTHON pointing at one, $hint"
else
  make_venv=1
  require_python "$python" "install one and point PYTHON at it, $hint"
fi

want=()
command -v dot >/dev/null 2>&1 || want+=(graphviz)
if [ "${AGENT17_SKIP_BROWSER:-0}" != "1" ] && [ ! -x /usr/bin/chromium ]; then
  want+=(chromium)
fi
# The browser edition's test builds the site (./scripts/site.sh), which fetches
# Pyodide and Graphviz's WebAssembly build from npm.
if [ "${AGENT17_SKIP_BROWSER:-0}" != "1" ] && ! command -v npm >/dev/null 2>&1; then
  want+=(npm)
fi
# The PostgreSQL tests start a throwaway cluster of their own (initdb and pg_ctl,
# run as the user `postgres` that Debian's package makes), so scripts/test.sh
# asks for the server's binaries; the demo and the course do not need them.
have_postgres() {
  { command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; } &&
    id postgres >/dev/null 2>&1
}
if [ "${AGENT17_WITH_POSTGRES:-0}" = "1" ] && ! have_postgres; then
  want+=(postgresql)
fi
# The state-file tests copy a workspace the ways users do, rsync -a among them.
command -v rsync >/dev/null 2>&1 || want+=(rsync)
# Debian and Ubuntu ship venv's ensurepip apart, in python3.X-venv; without
# it `python -m venv` stops halfway with a venv that has no pip.
if [ "$make_venv" = 1 ] && ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
  want+=("python$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv")
fi
if [ ${#want[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: ${want[*]} missing and there is no apt-get here: install them with this system's package manager, then run this again" >&2
    exit 1
  fi
  if [ "$(id -u)" = "0" ]; then sudo=""; else sudo="sudo"; fi
  echo "setup: installing ${want[*]} with apt-get"
  # A mirror can hiccup: try a few times before giving up.
  for attempt in 1 2 3; do
    if $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${want[@]}" >/dev/null; then
      break
    fi
    [ "$attempt" = 3 ] && { echo "setup: apt-get failed" >&2; exit 1; }
    sleep 5
  done
fi

if [ "$make_venv" = 1 ]; then
  if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
    echo "setup: $(command -v "$python") cannot make a venv (it has no ensurepip module): point PYTHON at a Python that can, $hint" >&2
    exit 1
  fi
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
# Up to date when its stamp is newer than pyproject.toml; the full install has the
# course in it too.
fresh() { [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ]; }
stamp=.venv/.agent17-installed
course_stamp=.venv/.agent17-course-installed
if [ "$course" = 1 ]; then
  if ! fresh "$stamp" && ! fresh "$course_stamp"; then
    runtime="$(.venv/bin/python -c 'import re, tomllib
with open("pyproject.toml", "rb") as file:
    needs = tomllib.load(file)["project"]["dependencies"]
print(", ".join(re.match(r"[\w.-]+", need).group(0) for need in needs))')"
    echo "setup: installing the course into .venv: agent17 and what it runs on ($runtime); not the test tools"
    .venv/bin/python -m pip install -q -e .
    touch "$course_stamp"
  fi
elif ! fresh "$stamp"; then
  echo "setup: installing agent17 and its extras into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi

# Trusted notebooks show their saved pictures (SVG, HTML) the first time they
# are opened, before any cell has run. A notebook's signature is its content's
# hash, so a notebook that changed is signed again; one already signed is left.
if ! trusted="$(.venv/bin/jupyter trust notebooks/*.ipynb 2>&1)"; then
  echo "setup: could not mark the notebooks trusted (they still run; saved pictures show after a run):" >&2
  echo "$trusted" >&2
fi
