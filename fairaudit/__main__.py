"""``python -m fairaudit``: the command line (see :mod:`fairaudit.cli`)."""

import gc

gc.disable()  # importing the command's ~1,600 modules ran ~350 collections that freed nothing (0.12–0.2 s)
from .cli import main  # noqa: E402

gc.freeze()  # the modules' objects live as long as the command: later collections skip them (a 1,000,000-row PCA audit spent 0.18–0.33 s in collections, 0.10 s frozen)
gc.enable()
raise SystemExit(main())
