#!/bin/sh
# Re-render the chapter's diagrams (assets/*.dot) to SVG with graphviz's `dot`.
set -eu
cd "$(dirname "$0")/../assets"
for source in idle_loop.dot claim_transaction.dot; do
    dot -Tsvg "$source" -o "${source%.dot}.svg"
    echo "rendered ${source%.dot}.svg"
done
