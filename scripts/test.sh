#!/usr/bin/env bash
# One command for every check: set up, then lint, type-check, and run the
# whole test suite, notebooks included (strict nbval) and the browser test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check agent17 tests
.venv/bin/ruff format --check agent17 tests
echo "== mypy --strict"
.venv/bin/mypy --strict agent17
echo "== pytest (package tests, process races, notebooks, browser)"
mkdir -p test-artifacts
# stdin from /dev/null: IPython refuses to import when there is no stdin at all (CI).
exec .venv/bin/python -m pytest -p no:cacheprovider \
  --nbval --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg \
  tests notebooks "$@" < /dev/null
