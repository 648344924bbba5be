#!/bin/sh
# Re-render every diagram of the chapter (assets/*.dot) to SVG with graphviz's `dot`.
set -eu
cd "$(dirname "$0")/../assets"
found=0
for source in *.dot; do
    [ -e "$source" ] || continue  # no match: the pattern itself
    found=1
    dot -Tsvg "$source" -o "${source%.dot}.svg"
    echo "rendered ${source%.dot}.svg"
done
if [ "$found" = 0 ]; then
    echo "render_assets: no assets/*.dot to render" >&2
    exit 1
fi
