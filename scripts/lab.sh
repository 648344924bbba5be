#!/usr/bin/env bash
# Open the course in JupyterLab: set up what the course needs and nothing more
# (scripts/setup.sh --course says what it installs: Graphviz, the package with
# JupyterLab, ipywidgets, graphviz, pydantic and openai; not the test tools;
# quick when done), build or update the student edition in course/
# (scripts/student_edition.py: the answers to the predictions not shown, the
# quiz blank, no teacher's guide; a notebook the student changed is never
# replaced), then JupyterLab on it. A class works in course/ (gitignored),
# never on the committed notebooks.
#
#   ./scripts/lab.sh             the student edition (course/, or $AGENT17_COURSE_DIR)
#   ./scripts/lab.sh --teacher   the committed notebooks/, answers and all
#
# Nothing pops up in front of the class: no "get Jupyter news?" question, no
# update check, no extension manager reaching out to PyPI; a Markdown file
# (the glossary) opens rendered. Works as root too (--allow-root is added only
# then). Extra arguments go to `jupyter lab`, e.g. --no-browser --port 8899.
#
# The settings are passed to this server only (command-line flags and a
# settings overrides file kept inside .venv); the user's own Jupyter
# configuration in the home folder is neither read differently nor changed.
set -euo pipefail
cd "$(dirname "$0")/.."
teacher=0
if [ "${1:-}" = "--teacher" ]; then
  teacher=1
  shift
fi
bash scripts/setup.sh --course

# JupyterLab reads `overrides.json` in its app settings folder as the defaults
# of every setting; a user's own choice in the Settings editor still wins.
settings=.venv/share/agent17/lab-settings
mkdir -p "$settings"
cat >"$settings/overrides.json.$$" <<'JSON'
{
  "@jupyterlab/apputils-extension:notification": {
    "fetchNews": "false",
    "checkForUpdates": false
  },
  "@jupyterlab/docmanager-extension:plugin": {
    "defaultViewers": {"markdown": "Markdown Preview"}
  }
}
JSON
mv -f "$settings/overrides.json.$$" "$settings/overrides.json"

if [ "$teacher" = 1 ]; then
  # setup.sh signs notebooks/*.ipynb; the optional ones are signed here.
  shopt -s nullglob
  extra=(notebooks/extra/*.ipynb)
  if [ "${#extra[@]}" -gt 0 ]; then
    .venv/bin/jupyter trust "${extra[@]}" >/dev/null 2>&1 || true
  fi
  root="$PWD"
else
  root="${AGENT17_COURSE_DIR:-$PWD/course}"
  .venv/bin/python scripts/student_edition.py --into "$root"
fi

# The root holds notebooks/ and assets/ side by side, so the notebooks' ../assets/
# pictures are served; the file browser starts in notebooks/.
args=(
  --ServerApp.root_dir="$root"
  --ContentsManager.preferred_dir=notebooks
  --LabApp.app_settings_dir="$PWD/$settings"
  --LabApp.news_url=None
  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
  --LabApp.extension_manager=readonly
)
if [ "$(id -u)" = "0" ]; then
  args+=(--allow-root)
fi
exec .venv/bin/jupyter lab "${args[@]}" "$@"
