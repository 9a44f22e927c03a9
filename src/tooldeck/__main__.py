"""``python -m tooldeck``: the same as the ``tooldeck`` command."""

from .cli import main

raise SystemExit(main())
