"""`python -m agent17` is the same CLI as the `agent17` console script."""

from agent17.cli import main

raise SystemExit(main())
