#!/usr/bin/env bash
# One command for every check: set up, then lint, type-check, and run the
# whole test suite, notebooks included (strict nbval) and the browser test.
set -euo pipefail
cd "$(dirname "$0")/.."
# The PostgreSQL tests need the server's binaries (setup installs them with apt
# when missing); AGENT17_WITH_POSTGRES=0 skips that, and those tests then skip
# with a message (outside CI, where they fail instead).
AGENT17_WITH_POSTGRES="${AGENT17_WITH_POSTGRES:-1}" bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check agent17 tests
.venv/bin/ruff format --check agent17 tests
echo "== mypy --strict"
.venv/bin/mypy --strict agent17
echo "== pytest (package tests, process races, notebooks, browser)"
mkdir -p test-artifacts
# This run's temporary folder, removed when the script exits (on Ctrl-C too;
# test-artifacts/ itself stays, with the browser screenshots): pytest's
# tmp_path lives under it (--basetemp), and through TMPDIR so does every
# tempfile.mkdtemp/TemporaryDirectory of the code under test, of the notebook
# kernels and of Chromium. Nothing is left in /tmp.
scratch="$(mktemp -d "$PWD/test-artifacts/tmp.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"
# stdin from /dev/null: IPython refuses to import when there is no stdin at all (CI).
# Not exec'd, so the trap runs; pytest's exit status is still the script's (set -e).
.venv/bin/python -m pytest -p no:cacheprovider --basetemp "$scratch/pytest" \
  --nbval --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg \
  tests notebooks "$@" < /dev/null
