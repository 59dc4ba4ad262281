"""Reproduce the papers' experiments: ``python -m fairaudit.reproduce NAME [--json FILE]``.

Each paper has a module here (``samadi``, ``fairer_nmf``, ``jevd``, ``fufs``, ``fair_cpd``) that
reads the papers' data from ``../shared/datasets`` (or ``--datasets DIR`` /
``FAIRAUDIT_DATASETS``), runs the experiment with the paper's settings, and returns
:class:`Row` objects: the paper's printed value (``None`` where the paper prints none) beside
ours. The command prints them per table/figure, writes them as JSON
(``{"records": [{"paper", "experiment", "method", "rank", "group", "metric", "paper_value",
"value"}]}``) and, with ``--markdown``, writes ``docs/reproductions.md`` from the same output
together with each module's :data:`NOTES` (the honest sentence where a claim does not
reproduce, and the evidence why).

A paper module provides::

    TITLE: str                        # "Samadi et al. 2018, The Price of Fair PCA"
    EXPERIMENTS: dict[str, str]       # experiment id → what it is ("credit: loss per group over d")
    NOTES: dict[str, str]             # experiment id → what holds, what does not and why
    def run(datasets: Path, *, quick: bool, log: Callable[[str], None]) -> list[Row]: ...

``quick`` runs a reduced version (fewer ranks/trials) for the test suite; the published
figures come from full runs.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import FairAuditError

PAPERS: dict[str, str] = {
    "samadi": "fairaudit.reproduce.samadi",
    "fairer-nmf": "fairaudit.reproduce.fairer_nmf",
    "jevd": "fairaudit.reproduce.jevd",
    "fufs": "fairaudit.reproduce.fufs",
    "fair-cpd": "fairaudit.reproduce.fair_cpd",
}
"""Reproduction name (the command's NAME) → module implementing it."""

DATASETS_ENV = "FAIRAUDIT_DATASETS"


@dataclass(frozen=True)
class Row:
    """One number of a reproduction: the paper's value (or ``None``) beside ours."""

    paper: str
    experiment: str
    method: str
    metric: str
    value: float
    paper_value: float | None = None
    rank: int | None = None
    group: str | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("value", "paper_value"):
            if out[key] is not None and not math.isfinite(out[key]):
                out[key] = None
        return out


class DatasetsMissing(FairAuditError):
    """The papers' data folder is not where the reproduction looks for it."""


def datasets_folder(given: str | os.PathLike | None = None) -> Path:
    """The papers' data: ``given``, else ``$FAIRAUDIT_DATASETS``, else ``../shared/datasets``
    next to this checkout; a clear error when it is absent."""
    candidates = [given, os.environ.get(DATASETS_ENV), Path(__file__).resolve().parents[3] / "shared" / "datasets"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    tried = ", ".join(str(c) for c in candidates if c)
    raise DatasetsMissing(
        f"the papers' data sets were not found (looked in {tried}); they are not shipped with fairaudit. "
        f"Point --datasets (or ${DATASETS_ENV}) at a folder laid out like ../shared/datasets."
    )


def paper_module(name: str):
    if name not in PAPERS:
        raise FairAuditError(f"unknown reproduction {name!r}; available: {', '.join(PAPERS)} (or --list).")
    return importlib.import_module(PAPERS[name])


def run(name: str, datasets: Path, *, quick: bool = False, log: Callable[[str], None] = lambda _: None) -> list[Row]:
    """The rows of reproduction ``name``."""
    return list(paper_module(name).run(datasets, quick=quick, log=log))
