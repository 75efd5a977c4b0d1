"""``python -m servegate`` is the console script."""

from servegate.commands.dispatch import main

raise SystemExit(main())
