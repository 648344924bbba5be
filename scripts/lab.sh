#!/usr/bin/env bash
# Open the course: set up (quick when done), then JupyterLab on notebooks/,
# with nothing popping up in front of the class: no "get Jupyter news?"
# question, no update check, no extension manager reaching out to PyPI.
# Works as root too (--allow-root is added only then). Extra arguments go to
# `jupyter lab`, e.g. --no-browser --port 8899.
#
# The settings are passed to this server only (command-line flags and a
# settings overrides file kept inside .venv); the user's own Jupyter
# configuration in the home folder is neither read differently nor changed.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT17_SKIP_BROWSER=1 bash scripts/setup.sh

# JupyterLab reads `overrides.json` in its app settings folder as the defaults
# of every setting; a user's own choice in the Settings editor still wins.
settings=.venv/share/agent17/lab-settings
mkdir -p "$settings"
cat >"$settings/overrides.json.$$" <<'JSON'
{
  "@jupyterlab/apputils-extension:notification": {
    "fetchNews": "false",
    "checkForUpdates": false
  }
}
JSON
mv -f "$settings/overrides.json.$$" "$settings/overrides.json"

args=(
  --LabApp.app_settings_dir="$PWD/$settings"
  --LabApp.news_url=None
  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
  --LabApp.extension_manager=readonly
)
if [ "$(id -u)" = "0" ]; then
  args+=(--allow-root)
fi
exec .venv/bin/jupyter lab "${args[@]}" "$@" notebooks/
