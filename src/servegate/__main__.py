"""``python -m servegate`` is the console script."""

from servegate.cli import main

raise SystemExit(main())
