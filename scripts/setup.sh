#!/usr/bin/env bash
# Set up everything agent17 needs on a fresh Debian/Ubuntu machine or in CI:
# Graphviz and Chromium from apt (only when missing), a venv in .venv, and the
# package with its development extras. Safe to run again; fast when done.
set -euo pipefail
cd "$(dirname "$0")/.."

want=()
command -v dot >/dev/null 2>&1 || want+=(graphviz)
if [ "${AGENT17_SKIP_BROWSER:-0}" != "1" ] && [ ! -x /usr/bin/chromium ]; then
  want+=(chromium)
fi
if [ ${#want[@]} -gt 0 ]; then
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

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.agent17-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing agent17 and its extras into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
