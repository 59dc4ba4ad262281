"""``python -m fairaudit``: the command line (see :mod:`fairaudit.cli`)."""

from .cli import main

raise SystemExit(main())
