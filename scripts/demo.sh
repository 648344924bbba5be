#!/usr/bin/env bash
# One command for the main job: set up, then run the offline demo
# (the Lead builds A, B and C; alice and bob steal the work). Extra
# arguments go to `agent17 demo`, e.g. --workspace ./demo-workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT17_SKIP_BROWSER=1 bash scripts/setup.sh
exec .venv/bin/agent17 demo "$@"
