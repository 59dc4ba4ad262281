"""The worst-served subgroup: a search over the intersections of several sensitive columns.

With sensitive columns ``c_1 … c_m`` the audit's groups are the observed *cells* (full
intersections, ``"sex=f & race=black"``). A *subgroup* fixes the values of ``1 … m`` of the
columns (``"sex=f"``, ``"race=black"``, ``"sex=f & race=black"``): a union of cells. This module
enumerates the candidates (:func:`candidate_subgroups`: at least ``min_rows`` rows, and at least
that many left for the rest; a candidate with the same rows as a shorter one is the shorter one),
and judges the search (:func:`judge_subgroups`) from its comparison rows, which the family's
search writes (the PCA family: :mod:`fairaudit.pca.subgroups`) into
:attr:`fairaudit.audit.AuditResult.comparisons` under the metric :data:`SUBGROUP_METRIC` — one
row per candidate and rank: the candidate's loss against the rest of the rows (``other`` =
:data:`REST`), its bootstrap interval, standard error and Wald p-value, and the permutation
test's null (random subgroups of the same size).

The rule (``docs/subgroups.md``): every candidate at every judged rank is one test; each test's
p-value is the intersection–union of the bootstrap and the permutation test (the larger,
:func:`fairaudit.verdicts.pair_pvalue`), and Holm's correction over *all* of them (candidates ×
ranks) controls the family-wise rate of a false gap at ``α = 1 − confidence``, whichever
subgroup the search ends up naming. A candidate is a gap by the verdicts' three conditions
(interval excludes 0, adjusted p at most α, error ratio at least the tolerance) with the
candidate the worse served; the finding names the gap with the largest difference, or, with
none, the candidate with the largest difference and what the search could have detected.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError
from .groups import INTERSECTION_SEPARATOR
from .verdicts import (
    Evidence,
    Pair,
    Settings,
    pair_from_row,
    settle_pairs,
)
from .vocabulary import term

SUBGROUP_METRIC = "subgroup_loss"
"""The comparisons' ``metric`` of the subgroup search's rows (the family's loss, a subgroup's
against the rest's)."""

REST = "everyone else"
"""The comparisons' ``other`` of a subgroup row: the rows outside the subgroup."""

SEARCHED_VARIANT = "vanilla"
"""The representation searched: vanilla's (the map the audit's headline verdict judges)."""


@dataclass(frozen=True)
class Subgroup:
    """A candidate: its ``label`` (``"column=value"`` parts joined by ``" & "``), the audit
    groups (cells) it unites (``cells``, a boolean mask over the labels), its ``rows`` and how
    many columns it fixes (``columns``)."""

    label: str
    cells: np.ndarray
    rows: int
    columns: int


def cell_values(labels: Sequence[str], columns: Sequence[str]) -> list[tuple[str, ...]]:
    """Each audit group's value of every sensitive column, as ``"column=value"``: its label split
    at ``" & "`` (:data:`fairaudit.groups.INTERSECTION_SEPARATOR`); a part without ``column=`` is
    prefixed with its column's name. ``ParameterError`` when a label does not split into one
    part per column (a value holding ``" & "``)."""
    out = []
    for label in labels:
        parts = str(label).split(INTERSECTION_SEPARATOR)
        if len(parts) != len(columns):
            raise ParameterError(
                f"the subgroup search ({term('subgroups')}) cannot tell the sensitive columns apart in group {label!r}: "
                f"a value contains {INTERSECTION_SEPARATOR.strip()!r}; rename that value or merge it ({term('merge')})."
            )
        out.append(tuple(part if part.startswith(f"{column}=") else f"{column}={part}" for column, part in zip(columns, parts, strict=True)))
    return out


def candidate_subgroups(labels: Sequence[str], sizes: Sequence[int], columns: Sequence[str], min_rows: int) -> list[Subgroup]:
    """Every subgroup fixing ``1 … m`` of the ``m`` sensitive ``columns`` that occurs, with at
    least ``min_rows`` rows and at least ``min_rows`` rows outside it, in order of the columns
    it fixes; one with exactly the rows of an earlier (shorter) candidate is left out."""
    values = cell_values(labels, columns)
    sizes = np.asarray(sizes, dtype=int)
    total = int(sizes.sum())
    seen: set[bytes] = set()
    out = []
    for count in range(1, len(columns) + 1):
        for fixed in itertools.combinations(range(len(columns)), count):
            for combo in dict.fromkeys(tuple(cell[j] for j in fixed) for cell in values):
                cells = np.array([tuple(cell[j] for j in fixed) == combo for cell in values])
                rows = int(sizes[cells].sum())
                key = np.packbits(cells).tobytes()
                if rows < min_rows or total - rows < min_rows or key in seen:
                    continue
                seen.add(key)
                out.append(Subgroup(INTERSECTION_SEPARATOR.join(combo), cells, rows, count))
    return out


@dataclass
class SubgroupVerdict(Evidence):
    """The search judged: ``verdict`` (``"gap"``: some subgroup is served worse than the rest
    by every condition; ``"no_evidence"``; ``"info"``: no intervals, or no candidate),
    ``headline`` the comparison the finding states (a :class:`~fairaudit.verdicts.Pair`, its
    ``group`` the subgroup, ``other`` :data:`REST`), ``worst`` the next-worst candidates at its
    rank, ``candidates`` the subgroups searched (of ``columns``, each with at least
    ``min_rows`` rows), ``ranks`` the judged ranks, ``comparisons`` the tests Holm's
    correction counted, ``gaps`` the number of (candidate, rank) gaps."""

    method: str
    variant: str
    verdict: str
    rank: int | None
    headline: Pair | None
    worst: list[Pair]
    candidates: int
    columns: list[str]
    ranks: list[int]
    comparisons: int
    gaps: int
    min_rows: int
    confidence: float
    flag_ratio: float
    permutation: bool
    why_not: str = ""
    kind: str = "worst subgroup"


def judge_subgroups(
    rows: Sequence[Mapping],
    settings: Settings,
    *,
    method: str,
    columns: Sequence[str],
    degenerate: Mapping[int, str] | None = None,
    no_intervals: str = "",
    shown: int = 3,
) -> SubgroupVerdict | None:
    """Judge the subgroup search from its comparison ``rows`` (dicts of
    :data:`fairaudit.verdicts.COMPARISON_COLUMNS` with metric :data:`SUBGROUP_METRIC`) under
    ``settings`` (module docstring). Candidates or rests below ``settings.min_judged_rows`` and
    ``degenerate`` ranks are never judged nor named. ``None`` when there are no rows."""
    rows = [r for r in rows if r["metric"] == SUBGROUP_METRIC and r["variant"] == SEARCHED_VARIANT]
    if not rows:
        return None
    minimum = settings.min_judged_rows
    judged = [r for r in rows if r["rows"] >= minimum and r["other_rows"] >= minimum and int(r["rank"]) not in (degenerate or {})
              and math.isfinite(r["difference"])]
    base = dict(method=method, variant=SEARCHED_VARIANT, columns=list(columns), min_rows=minimum, confidence=settings.confidence,
                flag_ratio=settings.flag_ratio, permutation=any(math.isfinite(r["p_permutation"]) for r in judged))
    if not judged:
        return SubgroupVerdict(**base, verdict="info", rank=None, headline=None, worst=[], candidates=0, ranks=[], comparisons=0,
                               gaps=0, why_not=f"no subgroup has at least {minimum} rows with as many outside it")
    pairs = [pair_from_row(r) for r in judged]
    tests = settle_pairs(pairs, settings)
    for p in pairs:
        if p.verdict == "gap" and p.difference <= 0:  # the rest served worse: not a badly served subgroup
            p.failed, p.verdict = ["tolerance"], "no_evidence"
    gaps = [p for p in pairs if p.verdict == "gap"]
    headline = max(gaps or pairs, key=lambda p: (p.difference, -(p.p if p.tested else 1.0)))
    others = sorted((p for p in pairs if p.rank == headline.rank and p is not headline), key=lambda p: -p.difference)
    verdict = "gap" if gaps else ("no_evidence" if tests else "info")
    return SubgroupVerdict(
        **base, verdict=verdict, rank=headline.rank, headline=headline, worst=others[:shown],
        candidates=len({p.group for p in pairs}), ranks=sorted({p.rank for p in pairs}), comparisons=tests, gaps=len(gaps),
        why_not="" if tests else (no_intervals or "no intervals"),
    )


def worst_subgroup(result, *, confidence: float | None = None, flag_ratio: float | None = None,
                   min_rows: int | None = None, method: str = "pca") -> SubgroupVerdict | None:
    """The worst-served subgroup of an audit run with ``AuditConfig(subgroups=True)``
    (:class:`fairaudit.audit.AuditResult`, or one read back from its JSON), judged under the
    run's settings or the ones given here. ``None`` when the result holds no subgroup search
    for ``method``."""
    from .audit import family_run

    run = family_run(result.config, method)
    found = Settings.of_run(run)
    settings = Settings(found.confidence if confidence is None else float(confidence),
                        found.flag_ratio if flag_ratio is None else float(flag_ratio),
                        found.min_judged_rows if min_rows is None else int(min_rows))
    compared = result.comparisons
    rows = [] if compared is None or compared.empty else compared[compared.method == method].to_dict("records")
    summary = (getattr(result, "uncertainty", None) or {}).get(method, {})
    degenerate = {int(rank): reason for rank, reason in summary.get("degenerate_ranks", {}).items()}
    columns = list(result.data.get("sensitive") or [])
    return judge_subgroups(rows, settings, method=method, columns=columns, degenerate=degenerate)
