"""``python -m fairaudit``: the command line (see :mod:`fairaudit.cli`)."""

import gc
import sys

from .executors import quiet_worker_cleanup, start_workers_for, stop_workers


def _early_workers(argv: list[str]) -> None:
    """An ``audit`` command's worker processes, started before this process imports the families:
    both import side by side (~1.5 s each), so the workers are ready when the first replicates are
    (:func:`fairaudit.executors.start_workers_for`). Only the flags that decide whether replicates
    run on local processes are read here, leniently: whatever they say, :mod:`fairaudit.cli` parses
    the whole command (and reports its mistakes); a worker started for nothing stops when the
    command ends."""
    if not argv or argv[0] != "audit" or any(flag in argv for flag in ("-h", "--help", "--scheduler")):
        return
    flags = {"--jobs": None, "--bootstrap": None, "--methods": "pca"}
    for index, word in enumerate(argv):
        name, equals, value = word.partition("=")
        if name in flags:
            flags[name] = value if equals else (argv[index + 1] if index + 1 < len(argv) else None)
    start_workers_for(flags["--methods"], jobs=flags["--jobs"], bootstrap=flags["--bootstrap"])


quiet_worker_cleanup()
_early_workers(sys.argv[1:])
gc.disable()  # importing the command's ~1,600 modules ran ~350 collections that freed nothing (0.12–0.2 s)
from .cli import main  # noqa: E402

gc.freeze()  # the modules' objects live as long as the command: later collections skip them (a 1,000,000-row PCA audit spent 0.18–0.33 s in collections, 0.10 s frozen)
gc.enable()
try:
    code = main()
finally:
    stop_workers()
raise SystemExit(code)
