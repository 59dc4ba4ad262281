"""The verdict engine: which groups differ, decided from an audit's evidence, apart from its words.

An audit measures a lower-is-better quantity per group (PCA's reconstruction loss, NMF's relative
loss, CP's residual fit) at every rank, with bootstrap replicates. This module turns that into
verdicts in two steps:

1. :func:`pairwise_comparisons` — a pure function the audit driver calls after the replicates:
   for every pair of groups, at every rank and variant, the difference, its bootstrap standard
   error, percentile interval and Wald p-value, the tolerance's ratio and (PCA) the permutation
   test's null. The rows form :attr:`fairaudit.audit.AuditResult.comparisons`
   (:data:`COMPARISON_COLUMNS`), in the JSON too. Feature selection's per-group cluster share is
   compared with parity the same way (``other`` empty).
2. :func:`judge_disparity`, :func:`judge_balance`, :func:`judge_leakage` — decide, from those
   rows (or the leakage test's records), under the run's :class:`Settings` (confidence,
   tolerance, smallest group to judge, reference group), and return evidence objects
   (:class:`DisparityVerdict`, :class:`BalanceVerdict`, :class:`LeakageVerdict`) with ``to_dict()``.
   :mod:`fairaudit.findings` only writes sentences from them; the JSON carries them.

The rules (``docs/architecture.md``, "Verdicts for k groups"):

* **Groups too small to judge** (fewer rows than ``min_judged_rows``, :data:`MIN_JUDGED_ROWS`)
  take part in no test and are never the reference; each is reported with the smallest
  difference from the reference its size lets the audit detect (:func:`detectable`).
* **Pairs.** With the reference chosen by the data (the default: the best-served group large
  enough to judge), every pair of judged groups is tested at every non-degenerate rank — choosing
  the best group after seeing the data is a selection, so the correction covers all pairs. With
  a reference the user names, each judged group is compared with it (``k − 1`` tests per rank).
* **Tests.** A pair's difference is tested by the bootstrap Wald test ``z = difference / SE``
  (SE: the standard deviation of the replicates' differences; a percentile p-value cannot go
  below ``1/B``), and for PCA also against random regroupings of the same rows
  (:func:`fairaudit.pca.audit._gap_pvalues`: a group's loss is measured against its own best fit
  on the same rows, which flatters small groups) — a normal fit to the permuted differences where
  the observed one lies beyond all of them (200 permutations cannot go below ``1/201``). The two
  are combined as an intersection–union test: ``p = max(p_bootstrap, p_permutation)``.
* **Multiple comparisons.** Holm's step-down correction over pairs × ranks controls the
  family-wise error at ``α = 1 − confidence`` per variant (vanilla over every judged rank, since
  the headline rank is chosen after seeing them; a fair variant, the held-out rows and CP at the
  one rank they are judged at).
* **Gap.** A pair differs when its Holm-adjusted p-value is at most α, its percentile interval
  excludes 0, and the difference is material: the tolerance ``flag_ratio`` on the error ratio
  ``error / (error − difference)`` where the family records an error, else on the ratio of the
  two values.

References
----------
S. Holm. "A simple sequentially rejective multiple test procedure". Scand. J. Statist. 6, 1979.
R. L. Berger, J. C. Hsu. "Bioequivalence trials, intersection–union tests and equivalence
confidence sets". Statistical Science 11(4), 1996 (the intersection–union test).
B. Efron, R. J. Tibshirani. *An Introduction to the Bootstrap*. Chapman & Hall, 1993, §16.4
(tests from the bootstrap standard error).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from .errors import ParameterError
from .uncertainty import MIN_FINITE_SHARE, bootstrap_interval
from .vocabulary import term

MIN_JUDGED_ROWS = 30
"""The fewest rows a group needs to be judged (``AuditConfig(min_judged_rows=…)``). The usual floor
for a normal approximation of a mean, which the bootstrap standard error and the Wald test rest
on; the data do not pin it down more sharply. Measured (``benchmarks/bench_coverage.py``, 200
samples × 100 replicates, two Gaussian groups): the percentile interval of a small group's PCA
loss covers the population value in 0.88 of samples at 15 and at 30 rows, 0.94 at 300 (nominal
0.95) — small groups' intervals are optimistic — and the Wald test finds a difference of 0.72
between a 500-row and a small group in 0.46 of samples at 15 rows, 0.73 at 30. On identically
distributed rows in random groups of 750/750/25, judging the 25-row group (``min_judged_rows=10``)
gave 1 false PCA gap in 20 seeds (every headline that group's), 0 at the default; NMF 0 and 0
(``benchmarks/bench_verdicts.py``'s designs). Raise it to judge more strictly."""

POWER = 0.8
"""The power at which :func:`detectable` states the smallest difference a test could see."""

NUMERICALLY_ZERO = 1e-9
"""A rank whose every group value is below this share of the largest value over ranks is
degenerate (an exact fit: nothing to compare)."""

COMPARISON_COLUMNS = [
    "method", "variant", "rank", "metric", "group", "other", "rows", "other_rows", "value", "other_value",
    "difference", "ci_low", "ci_high", "se", "p_bootstrap", "p_permutation", "null_mean", "null_sd",
    "ratio", "ratio_of", "replicates",
]
"""The pairwise comparisons' columns (:attr:`fairaudit.audit.AuditResult.comparisons`).

One row per pair of groups (``group`` the worse served at the point estimate, so ``difference =
value − other_value ≥ 0``) per variant, rank and per-group metric (``heldout_`` ones too);
``rows``/``other_rows`` each group's rows in the family's input; ``ci_low``/``ci_high`` the
percentile interval of the replicates' differences (the pair fixed), ``se`` their standard
deviation, ``p_bootstrap`` the two-sided Wald p-value ``2Φ(−|difference|/se)``;
``p_permutation``, ``null_mean``, ``null_sd`` the two-sided permutation test against random
regroupings and the permuted differences' mean and standard deviation (PCA; NaN elsewhere);
``ratio`` the quantity the tolerance applies to and ``ratio_of`` which: ``"error"`` — the worse
group's error over its error were it served as well as the other (PCA, NMF), ``"value"`` — the
two values' ratio (CP). Feature selection's rows compare a group's ``cluster_share`` with parity:
``other`` empty, ``other_value`` 1, ``difference`` the shortfall ``1 − value``. ``replicates``:
the finite replicate differences behind the interval (0 without intervals)."""

COMPARISON_TEXT_COLUMNS = ("method", "variant", "metric", "group", "other", "ratio_of")
COMPARISON_COUNT_COLUMNS = ("rank", "rows", "other_rows", "replicates")


# ============================================================================ the comparisons
@dataclass(frozen=True)
class PermutationNull:
    """A pair's difference ``value_a − value_b`` (in the order of its key) under random
    regroupings: the permuted differences' ``mean`` and ``sd``, and the two-sided ``pvalue`` of
    the observed difference (:func:`permutation_pvalue`)."""

    mean: float
    sd: float
    pvalue: float


def permutation_pvalue(observed: float, permuted: np.ndarray) -> float:
    """Two-sided p-value of ``observed`` against the ``permuted`` values of the same statistic:
    ``2 (1 + #{as extreme, on its side}) / (1 + P)``, capped at 1; where the observed value lies
    beyond every permuted one, the normal fit to them (``2Φ(−|observed − mean| / sd)``) when
    smaller — ``P`` permutations alone cannot give less than ``2/(1 + P)``, and Holm over many
    pairs and ranks needs less."""
    permuted = np.asarray(permuted, dtype=float)
    permuted = permuted[np.isfinite(permuted)]
    if not permuted.size or not math.isfinite(observed):
        return math.nan
    slack = 1e-12 * max(abs(observed), 1.0)
    above = int(np.count_nonzero(permuted >= observed - slack))
    below = int(np.count_nonzero(permuted <= observed + slack))
    empirical = min(1.0, 2.0 * (1 + min(above, below)) / (1 + permuted.size))
    if min(above, below) > 0:
        return empirical
    sd = float(np.std(permuted, ddof=1)) if permuted.size > 1 else 0.0
    if sd <= 0:
        return empirical
    return min(empirical, 2.0 * float(norm.sf(abs(observed - float(np.mean(permuted))) / sd)))


def wald_pvalue(difference: float, se: float, replicates: np.ndarray | None = None) -> float:
    """Two-sided p-value of ``difference`` from its bootstrap standard error: ``2Φ(−|d|/se)``.
    With ``se`` 0 (every replicate the same): 0 when the replicates all lie on the side of a
    non-zero difference, else 1; NaN without a standard error."""
    if not math.isfinite(difference) or not math.isfinite(se):
        return math.nan
    if se <= 0:
        same_side = replicates is not None and difference != 0 and bool(np.all(np.sign(replicates) == np.sign(difference)))
        return 0.0 if same_side else 1.0
    return float(2.0 * norm.sf(abs(difference) / se))


@dataclass(frozen=True)
class DisparityMetric:
    """What :func:`pairwise_comparisons` compares: a per-group metric (lower is better, e.g.
    ``"loss"``), the per-group error its tolerance ratio uses (``"error"``; ``None``: the ratio of
    the values) — :class:`fairaudit.uncertainty.Disparity`'s ``metric`` and ``error`` — or, with
    ``parity`` set, a higher-is-better per-group metric compared with that parity value (feature
    selection's ``cluster_share``, parity 1)."""

    metric: str
    error: str | None = None
    parity: float | None = None


Key = tuple[str, int, str, str]
"""``(variant, rank, group, metric)``, as :class:`fairaudit.uncertainty.Replicates` keys them."""


def pairwise_comparisons(
    method: str,
    labels: Sequence[str],
    rows: Sequence[int],
    metrics: Iterable[DisparityMetric],
    points: Mapping[Key, float],
    replicates: Mapping[Key, np.ndarray] | None = None,
    confidence: float = 0.95,
    nulls: Mapping[tuple[str, int, str], Mapping[tuple[int, int], PermutationNull]] | None = None,
    prefixes: Sequence[str] = ("",),
) -> list[tuple]:
    """Every pair of groups compared, for every variant and rank of each metric in ``metrics``
    (and its ``prefixes``' versions: ``"heldout_"``): rows of :data:`COMPARISON_COLUMNS`.

    ``points`` and ``replicates`` map ``(variant, rank, group, metric)`` to the point estimate and
    to its bootstrap replicates (``None``: no intervals — the rows then carry the differences and
    ratios alone); ``rows`` are each group's rows (in ``labels``' order); ``nulls`` the permutation
    nulls by ``(variant, rank, metric)`` and label-index pair ``(a, b)``, ``a < b``, of the
    difference ``value_a − value_b``. Pure: the driver calls it once the replicates are in."""
    index = {label: i for i, label in enumerate(labels)}
    out: list[tuple] = []
    for spec in metrics:
        for prefix in prefixes:
            metric = prefix + spec.metric
            values = _per_group(points, metric, index)
            errors = _per_group(points, prefix + spec.error, index) if spec.error else {}
            for (variant, rank), found in values.items():
                draws = _replicate_rows(replicates, variant, rank, metric, labels) if replicates is not None else None
                null = (nulls or {}).get((variant, rank, metric), {})
                if spec.parity is not None:
                    out += _parity_rows(method, variant, rank, metric, labels, rows, found, draws, spec.parity, confidence)
                    continue
                error = errors.get((variant, rank))
                for a in range(len(labels)):
                    for b in range(a + 1, len(labels)):
                        if not (math.isfinite(found[a]) and math.isfinite(found[b])):
                            continue
                        out.append(_pair_row(method, variant, rank, metric, labels, rows, found, error, draws, a, b,
                                             null.get((a, b)), confidence))
    return out


def _per_group(points: Mapping[Key, float], metric: str, index: Mapping[str, int]) -> dict[tuple[str, int], np.ndarray]:
    found: dict[tuple[str, int], np.ndarray] = {}
    for (variant, rank, group, name), value in points.items():
        if name == metric and group in index:
            found.setdefault((variant, int(rank)), np.full(len(index), np.nan))[index[group]] = float(value)
    return found


def _replicate_rows(replicates: Mapping[Key, np.ndarray], variant: str, rank: int, metric: str, labels) -> np.ndarray | None:
    """The replicates of every group of one fit as a ``(k, B)`` array (``None`` when there are none)."""
    stacked = [replicates.get((variant, int(rank), label, metric)) for label in labels]
    if all(draw is None for draw in stacked):
        return None
    count = max(len(draw) for draw in stacked if draw is not None)
    return np.vstack([np.full(count, np.nan) if draw is None else np.asarray(draw, dtype=float) for draw in stacked])


EQUAL_WITHIN = 1e-6
"""Two groups' values that differ by at most this share of the larger are equal to rounding: the
difference gets bootstrap p = 1. Fair PCA's exact solver equalises the groups' losses to about
1e-9 of their size, and every replicate keeps the sign of that rounding, so a Wald test would call
it significant (p ≈ 0) though no tolerance could; a difference this small is never a gap."""


def interval_and_se(differences: np.ndarray | None, confidence: float) -> tuple[float, float, float, int]:
    """``(ci_low, ci_high, se, finite replicates)`` of a difference's replicates (NaN when fewer
    than :data:`fairaudit.uncertainty.MIN_FINITE_SHARE` of them are finite)."""
    if differences is None:
        return math.nan, math.nan, math.nan, 0
    finite = differences[np.isfinite(differences)]
    if finite.size < max(2, math.ceil(MIN_FINITE_SHARE * differences.size)):
        return math.nan, math.nan, math.nan, int(finite.size)
    low, high = bootstrap_interval(finite, confidence)
    return low, high, float(np.std(finite, ddof=1)), int(finite.size)


def _pair_row(method, variant, rank, metric, labels, rows, values, errors, draws, a, b, null, confidence) -> tuple:
    worse, better = (a, b) if values[a] >= values[b] else (b, a)
    difference = float(values[worse] - values[better])
    replicate_differences = None if draws is None else draws[worse] - draws[better]
    low, high, se, count = interval_and_se(replicate_differences, confidence)
    p_boot = wald_pvalue(difference, se, None if replicate_differences is None else replicate_differences[np.isfinite(replicate_differences)])
    if abs(difference) <= EQUAL_WITHIN * max(abs(float(values[worse])), abs(float(values[better]))):
        p_boot = 1.0  # equal to rounding (an exact fair solver's equalised losses): no evidence of a difference
    sign = 1.0 if worse == a else -1.0  # the null is of values[a] − values[b]
    p_perm, null_mean, null_sd = (null.pvalue, sign * null.mean, null.sd) if null is not None else (math.nan, math.nan, math.nan)
    if errors is not None and math.isfinite(errors[worse]):
        ratio, ratio_of = error_ratio(float(errors[worse]), difference), "error"
    else:
        ratio, ratio_of = _value_ratio(float(values[worse]), float(values[better])), "value"
    return (method, variant, int(rank), metric, labels[worse], labels[better], int(rows[worse]), int(rows[better]),
            float(values[worse]), float(values[better]), difference, low, high, se, p_boot, p_perm, null_mean, null_sd,
            ratio, ratio_of, count)


def _parity_rows(method, variant, rank, metric, labels, rows, values, draws, parity: float, confidence: float) -> list[tuple]:
    """A higher-is-better per-group value against ``parity``: the shortfall ``parity − value``."""
    out = []
    for g, label in enumerate(labels):
        if not math.isfinite(values[g]):
            continue
        shortfall = parity - float(values[g])
        replicate_shortfalls = None if draws is None else parity - draws[g]
        low, high, se, count = interval_and_se(replicate_shortfalls, confidence)
        p_boot = wald_pvalue(shortfall, se, None if replicate_shortfalls is None else replicate_shortfalls[np.isfinite(replicate_shortfalls)])
        out.append((method, variant, int(rank), metric, label, "", int(rows[g]), 0, float(values[g]), parity, shortfall,
                    low, high, se, p_boot, math.nan, math.nan, math.nan, _value_ratio(parity, float(values[g])), "value", count))
    return out


def error_ratio(error: float, difference: float) -> float:
    """``error / (error − difference)``: how many times larger the worse group's error is than if
    it were served as well as the other (:class:`fairaudit.uncertainty.Disparity`)."""
    served = error - difference
    if served > 0:
        return error / served
    return math.inf if error > 0 else math.nan


def _value_ratio(high: float, low: float) -> float:
    if low > 0 and high >= 0:
        return high / low
    return math.inf if low <= 0 < high else math.nan


# ============================================================================ settings
@dataclass(frozen=True)
class Settings:
    """What a verdict depends on besides the evidence: ``confidence`` (α = 1 − confidence), the
    tolerance ``flag_ratio``, ``min_judged_rows`` and the ``reference`` group (``None``: chosen by
    the data — the best-served group large enough to judge)."""

    confidence: float = 0.95
    flag_ratio: float = 1.25
    min_judged_rows: int = MIN_JUDGED_ROWS
    reference: str | None = None

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @classmethod
    def of_run(cls, run: Mapping, reference: str | None = None) -> Settings:
        """The settings of one family's run (``AuditConfig.to_dict()``); ``reference`` overrides
        the run's."""
        return cls(
            confidence=float(run.get("confidence", 0.95)),
            flag_ratio=float(run.get("flag_ratio", 1.25)),
            min_judged_rows=int(run.get("min_judged_rows") or MIN_JUDGED_ROWS),
            reference=reference if reference is not None else run.get("reference"),
        )


def judged_groups(sizes: Mapping[str, int], min_judged_rows: int) -> list[str]:
    """The groups large enough to judge, in ``sizes``' order."""
    return [group for group, rows in sizes.items() if rows >= min_judged_rows]


def resolve_reference(reference: str | None, sizes: Mapping[str, int], min_judged_rows: int) -> str | None:
    """``reference`` as one of the group labels in ``sizes``: the label itself, or the value part of
    exactly one label ``column=value`` (``"white"`` for ``"race=white"``). ``ParameterError``
    naming the groups that can be a reference when it is unknown or too small to judge."""
    if reference is None:
        return None
    name = str(reference)
    matches = [g for g in sizes if g == name] or [g for g in sizes if g.rpartition("=")[2] == name]
    usable = ", ".join(f"{g} ({rows:,} rows)" for g, rows in sizes.items() if rows >= min_judged_rows) or "none"
    small = ", ".join(f"{g} ({rows:,} {'row' if rows == 1 else 'rows'})" for g, rows in sizes.items() if rows < min_judged_rows)
    if small:
        usable += f"; too small to judge: {small}"
    if len(matches) != 1:
        why = "names more than one group" if matches else "is not one of the groups"
        raise ParameterError(f"{term('reference', name)} {why}; the groups large enough to be the reference: {usable}.")
    found = matches[0]
    if sizes[found] < min_judged_rows:
        raise ParameterError(
            f"{term('reference', name)}: group {found} has {sizes[found]:,} rows, fewer than the {min_judged_rows} needed to judge it "
            f"({term('min_judged_rows', min_judged_rows)}); the groups large enough to be the reference: {usable}."
        )
    return found


# ============================================================================ evidence objects
def json_ready(value):
    """JSON-ready: NaN and infinities → None, tuples → lists, numpy scalars → Python (nested too)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


class Evidence:
    """Dataclass evidence, JSON-ready with :meth:`to_dict`."""

    def to_dict(self) -> dict:
        return {f.name: json_ready(_as_data(getattr(self, f.name))) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _as_data(value):
    if isinstance(value, Evidence):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _as_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_data(v) for v in value]
    return value


@dataclass
class Pair(Evidence):
    """One comparison judged: ``group`` (the worse served) against ``other`` at ``rank`` (for a
    parity comparison ``other`` is empty and ``other_value`` the parity).

    ``p`` is the test's p-value (the intersection–union of the bootstrap and the permutation
    test: the larger; ``decisive_test`` names which), ``p_adjusted`` it after Holm's correction
    over ``comparisons`` tests; ``conditions`` says, per condition of a gap, whether it holds:
    ``"interval"`` (the interval excludes 0), ``"test"`` (adjusted p at most α), ``"tolerance"``
    (material); ``failed`` lists the ones that do not, in that order; ``detectable`` is the
    smallest difference the tests would see with :data:`POWER` at these group sizes."""

    rank: int
    group: str
    other: str
    rows: int
    other_rows: int
    value: float
    other_value: float
    difference: float
    ci_low: float
    ci_high: float
    se: float
    p_bootstrap: float
    p_permutation: float
    null_mean: float
    null_sd: float
    ratio: float
    ratio_of: str
    p: float = math.nan
    p_adjusted: float = math.nan
    comparisons: int = 0
    decisive_test: str = "bootstrap"
    conditions: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    detectable: float = math.nan
    tolerance_difference: float = math.nan
    """The difference at which the pair would reach the tolerance (its groups' errors, or the other
    group's value, as measured)."""
    verdict: str = "info"

    @property
    def tested(self) -> bool:
        return math.isfinite(self.p)


@dataclass
class SmallGroup(Evidence):
    """A group too small to judge, against the reference at the headline rank: its value, the
    signed difference from the reference's (with its interval) and the smallest difference its
    size lets the audit detect."""

    group: str
    rows: int
    value: float
    reference: str
    reference_value: float
    difference: float
    ci_low: float
    ci_high: float
    detectable: float


@dataclass
class DisparityVerdict(Evidence):
    """A variant's per-group metric judged over groups and ranks (PCA, NMF, CP).

    ``verdict``: ``"gap"`` (some pair differs by every condition), ``"no_evidence"`` (none does),
    ``"info"`` (no intervals, or fewer than two groups large enough to judge); ``headline`` is the
    pair the finding states (the gap with the largest difference, else the largest difference);
    ``reference`` the group compared with and ``reference_chosen`` ``"user"`` or ``"data"``;
    ``pairs`` every judged comparison at the headline's rank; ``gap_ranks`` the ranks with a gap
    of the ``ranks`` judged; ``comparisons`` the tests Holm's correction counted; ``small`` the
    groups too small to judge; ``why_not`` why there is no verdict (``info``)."""

    method: str
    variant: str
    metric: str
    verdict: str
    rank: int | None
    headline: Pair | None
    reference: str | None
    reference_chosen: str
    pairs: list[Pair]
    ranks: list[int]
    gap_ranks: list[int]
    comparisons: int
    small: list[SmallGroup]
    min_judged_rows: int
    confidence: float
    flag_ratio: float
    why_not: str = ""
    parity: float = 0.0
    """The difference at parity (the interval condition asks whether it lies outside the interval)."""
    kind: str = "disparity"
    """What is judged (``fairaudit.compare.finding_topic`` matches findings of two audits by it)."""


# ============================================================================ judging
def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted): ``max_{j ≤ i} min(1,
    (m − j + 1) p_(j))`` in ascending order; a hypothesis is rejected at level α iff its adjusted
    p-value is at most α (Holm 1979)."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    if not finite.size:
        return adjusted
    order = finite[np.argsort(p[finite], kind="stable")]
    m = order.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def z_level(alpha: float, tests: int) -> float:
    """The two-sided critical value of the first (strictest) Holm step: ``Φ⁻¹(1 − α / (2·tests))``."""
    return float(norm.isf(alpha / (2.0 * max(tests, 1))))


def detectable(se: float, null_mean: float, null_sd: float, alpha: float, tests: int) -> float:
    """The smallest difference the tests would detect with probability :data:`POWER` at the first
    Holm level: ``(z_{1−α/2m} + z_{power})·SE`` for the bootstrap test and, with a permutation
    null, ``|null mean| + (z + z_power)·null sd`` (random groups of these sizes differ by that
    much on their own) — the larger."""
    if not math.isfinite(se):
        return math.nan
    z = z_level(alpha, tests) + float(norm.isf(1.0 - POWER))
    needed = z * se
    if math.isfinite(null_sd):
        needed = max(needed, abs(null_mean if math.isfinite(null_mean) else 0.0) + z * null_sd)
    return needed


def pair_from_row(row: Mapping) -> Pair:
    return Pair(**{name: row[name] for name in (
        "rank", "group", "other", "rows", "other_rows", "value", "other_value", "difference", "ci_low", "ci_high", "se",
        "p_bootstrap", "p_permutation", "null_mean", "null_sd", "ratio", "ratio_of")})


def _degenerate(rows: Sequence[Mapping], degenerate: Mapping[int, str]) -> set[int]:
    """Ranks given as degenerate, and ranks whose every value is numerically zero."""
    scale = max((abs(r["value"]) for r in rows if math.isfinite(r["value"])), default=0.0)
    out = set(degenerate)
    for rank in {r["rank"] for r in rows}:
        here = [max(abs(r["value"]), abs(r["other_value"])) for r in rows if r["rank"] == rank]
        if here and max(here) <= NUMERICALLY_ZERO * max(scale, 1e-300):
            out.add(rank)
    return out


def settle_conditions(pair: Pair, flag_ratio: float, alpha: float) -> None:
    """Fill in ``pair``'s conditions of a gap, the failed ones and its verdict (once ``p_adjusted``
    is set): ``interval`` (its interval excludes 0), ``test`` (the intersection–union test at the
    Holm level; ``decisive_test`` names the test whose p-value is the larger, the one that decides)
    and ``tolerance`` (the ratio at least ``flag_ratio``)."""
    pair.tolerance_difference = _tolerance_difference(pair, flag_ratio)
    if not pair.tested:
        pair.verdict = "info"
        return
    permutation = math.isfinite(pair.p_permutation)
    pair.decisive_test = "permutation" if permutation and pair.p > pair.p_bootstrap else "bootstrap"
    pair.conditions = {
        "interval": math.isfinite(pair.ci_low) and (pair.ci_low > 0 or pair.ci_high < 0),
        "test": pair.p_adjusted <= alpha,
        "tolerance": pair.ratio >= flag_ratio if not math.isnan(pair.ratio) else False,
    }
    pair.failed = [name for name, held in pair.conditions.items() if not held]
    pair.verdict = "no_evidence" if pair.failed else "gap"


def pair_pvalue(pair: Pair) -> float:
    """The intersection–union p-value of a pair: the larger of the bootstrap and the permutation
    test's. The permutation test is two-sided, but only a difference beyond what random groups of
    these sizes show *in its direction* is evidence of a gap: one at or below the permuted
    differences' mean (a fair variant that serves the groups more equally than random groups
    would be served) counts as p = 1."""
    if not math.isfinite(pair.p_permutation) or not math.isfinite(pair.p_bootstrap):
        return pair.p_bootstrap
    permutation = pair.p_permutation if not pair.null_mean >= pair.difference else 1.0
    return max(pair.p_bootstrap, permutation)


def _tolerance_difference(pair: Pair, flag_ratio: float) -> float:
    """The difference that would make ``pair``'s ratio reach ``flag_ratio``: for an error ratio
    ``e / (e − d)`` (``e`` the worse group's error, recovered from the ratio and the difference)
    ``e (1 − 1/flag_ratio)``; for a ratio of values ``(flag_ratio − 1) × the other's value``."""
    if pair.ratio_of == "error":
        if not (math.isfinite(pair.ratio) and pair.ratio > 1 and pair.difference > 0):
            return math.nan
        error = pair.ratio * pair.difference / (pair.ratio - 1)
        return error * (1 - 1 / flag_ratio)
    return (flag_ratio - 1) * pair.other_value if pair.other_value > 0 else math.nan


def settle_pairs(pairs: Sequence[Pair], settings: Settings) -> int:
    """Decide a family of pairs together: each pair's intersection–union p-value
    (:func:`pair_pvalue`), Holm's adjustment over every tested pair, the difference each test could
    detect and the conditions of a gap (:func:`settle_conditions`). Returns how many were tested."""
    for p in pairs:
        p.p = pair_pvalue(p)
    tests = sum(p.tested for p in pairs)
    for p, adjusted in zip(pairs, holm([p.p for p in pairs]), strict=True):
        p.p_adjusted, p.comparisons = float(adjusted), tests
        p.detectable = detectable(p.se, p.null_mean, p.null_sd, settings.alpha, tests)
        settle_conditions(p, settings.flag_ratio, settings.alpha)
    return tests


def judge_disparity(
    rows: Sequence[Mapping],
    sizes: Mapping[str, int],
    settings: Settings,
    *,
    method: str,
    variant: str,
    metric: str,
    ranks: Sequence[int] | None = None,
    degenerate: Mapping[int, str] | None = None,
    no_intervals: str = "",
) -> DisparityVerdict | None:
    """Judge one variant's per-group metric from its comparison ``rows`` (dicts of
    :data:`COMPARISON_COLUMNS`) under ``settings``; ``ranks`` limits the judged ranks (a fair
    variant at vanilla's headline rank), ``degenerate`` names ranks that are never judged,
    ``no_intervals`` says why there are no intervals when there are none. ``None`` when there is
    nothing to judge (fewer than two groups, or only degenerate ranks)."""
    rows = [r for r in rows if r["variant"] == variant and r["metric"] == metric and r["other"]]
    if ranks is not None:
        rows = [r for r in rows if r["rank"] in set(ranks)]
    skip = _degenerate(rows, degenerate or {})
    rows = [r for r in rows if r["rank"] not in skip]
    if not rows:
        return None
    judged = set(judged_groups(sizes, settings.min_judged_rows))
    reference = resolve_reference(settings.reference, sizes, settings.min_judged_rows) if settings.reference else None
    chosen = "user" if reference else "data"
    candidates = [r for r in rows if r["group"] in judged and r["other"] in judged]
    if reference:
        candidates = [r for r in candidates if reference in (r["group"], r["other"])]
    pairs = [pair_from_row(r) for r in candidates]
    judged_ranks = sorted({p.rank for p in pairs})
    base = dict(method=method, variant=variant, metric=metric, min_judged_rows=settings.min_judged_rows,
                confidence=settings.confidence, flag_ratio=settings.flag_ratio, reference_chosen=chosen)
    if not pairs:
        rank = max({r["rank"] for r in rows}, key=lambda k: max(r["difference"] for r in rows if r["rank"] == k))
        small = _small_groups(rows, sizes, settings, rank, reference, len(rows))
        why = (f"fewer than two groups have at least {settings.min_judged_rows} rows" if len(judged) < 2 else "no pair to compare")
        return DisparityVerdict(**base, verdict="info", rank=rank, headline=None, reference=reference, pairs=[], ranks=[],
                                gap_ranks=[], comparisons=0, small=small, why_not=why)
    tests = settle_pairs(pairs, settings)
    gaps = [p for p in pairs if p.verdict == "gap"]
    headline = max(gaps or pairs, key=lambda p: (p.difference, -(p.p if p.tested else 1.0)))
    if reference is None:  # the best-served judged group at the headline's rank
        at_rank = [p for p in pairs if p.rank == headline.rank]
        best = {p.other: p.other_value for p in at_rank} | {p.group: p.value for p in at_rank}
        reference = min(best, key=best.get)
    verdict = "gap" if gaps else ("no_evidence" if tests else "info")
    return DisparityVerdict(
        **base, verdict=verdict, rank=headline.rank, headline=headline, reference=reference,
        pairs=sorted((p for p in pairs if p.rank == headline.rank), key=lambda p: -p.difference),
        ranks=judged_ranks, gap_ranks=sorted({p.rank for p in gaps}), comparisons=tests,
        small=_small_groups(rows, sizes, settings, headline.rank, reference, tests),
        why_not="" if tests else (no_intervals or "no intervals"),
    )


def _small_groups(rows, sizes: Mapping[str, int], settings: Settings, rank: int, reference: str | None, tests: int) -> list[SmallGroup]:
    """The groups too small to judge, each against ``reference`` at ``rank`` (its comparison row;
    without a reference — fewer than two groups to judge — against the largest group)."""
    if reference is None:
        reference = max(sizes, key=sizes.get)
    out = []
    for group, count in sizes.items():
        if count >= settings.min_judged_rows or group == reference:
            continue
        row = next((r for r in rows if r["rank"] == rank and {r["group"], r["other"]} == {group, reference}), None)
        if row is None:
            continue
        sign = 1.0 if row["group"] == group else -1.0  # the small group's value minus the reference's
        value, other = (row["value"], row["other_value"]) if sign > 0 else (row["other_value"], row["value"])
        low, high = (row["ci_low"], row["ci_high"]) if sign > 0 else (-row["ci_high"], -row["ci_low"])
        out.append(SmallGroup(group, int(count), float(value), reference, float(other), sign * row["difference"], low, high,
                              detectable(row["se"], row["null_mean"], row["null_sd"], settings.alpha, max(tests, 1))))
    return out


# ---------------------------------------------------------------------------- feature selection's balance
@dataclass
class BalanceVerdict(Evidence):
    """Feature selection's cluster balance judged for the selectors at one size (``rank``): each
    judged group's ``cluster_share`` (its share of its worst k-means cluster over its share of
    the data; ``parity`` 1) tested against the tolerance ``threshold = 1/flag_ratio`` — a gap when
    it lies below it by the one-sided bootstrap test at the Holm level over groups × selectors,
    its interval below parity. ``verdict`` and ``headline`` (the least-represented judged group of
    the worst selector) are about the selectors ``about``; ``selectors`` holds every selector's
    ``{"verdict", "worst": Pair, "share": {value, ci_low, ci_high}}``; ``detectable_share``: the
    headline group's share below which the test would likely see a gap at its size."""

    method: str
    rank: int
    verdict: str
    headline: Pair | None
    variant: str | None
    share: dict
    selectors: dict
    comparisons: int
    small: list[SmallGroup]
    min_judged_rows: int
    confidence: float
    flag_ratio: float
    threshold: float
    parity: float
    detectable_share: float
    why_not: str = ""
    kind: str = "cluster balance"


def _share(pair: Pair) -> dict:
    """A parity comparison's value with its interval (the rows hold the shortfall's)."""
    return {"value": pair.value, "ci_low": pair.other_value - pair.ci_high, "ci_high": pair.other_value - pair.ci_low}


def judge_balance(rows: Sequence[Mapping], sizes: Mapping[str, int], settings: Settings, *, method: str, variants: Sequence[str],
                  rank: int, about: Sequence[str] | None = None, metric: str = "cluster_share", no_intervals: str = "") -> BalanceVerdict | None:
    """Judge the selectors ``variants`` at ``rank`` from their parity rows (see :class:`BalanceVerdict`);
    the verdict and headline are about ``about`` (default: all of them), the Holm family is all of
    ``variants``.

    The test is one-sided against the tolerance, ``z = (1/flag_ratio − share) / SE``: a group's
    share of its *worst* cluster is below parity whenever clusters are not exact copies of the
    data's mix (a minimum over clusters), so testing against parity would flag every large data
    set; testing against the tolerance asks whether the shortfall is material beyond noise."""
    rows = [r for r in rows if r["rank"] == rank and r["metric"] == metric and not r["other"] and r["variant"] in set(variants)]
    if not rows:
        return None
    judged = set(judged_groups(sizes, settings.min_judged_rows))
    pairs = {v: [pair_from_row(r) for r in rows if r["variant"] == v and r["group"] in judged] for v in variants}
    threshold = 1.0 / settings.flag_ratio
    every = [p for found in pairs.values() for p in found]
    for p in every:
        if math.isfinite(p.se) and p.se > 0:
            p.p = float(norm.cdf((p.value - threshold) / p.se))
        elif math.isfinite(p.se):
            p.p = 0.0 if p.value < threshold else 1.0
    tests = sum(p.tested for p in every)
    for p, adjusted in zip(every, holm([p.p for p in every]), strict=True):
        p.p_adjusted, p.comparisons, p.decisive_test = float(adjusted), tests, "bootstrap"
        p.detectable = detectable(p.se, math.nan, math.nan, 2 * settings.alpha, tests)  # one-sided: α, not α/2
        if not p.tested:
            continue
        p.conditions = {"interval": math.isfinite(p.ci_low) and p.ci_low > 0, "test": p.p_adjusted <= settings.alpha,
                        "tolerance": p.value <= threshold}
        p.failed = [name for name, held in p.conditions.items() if not held]
        p.verdict = "no_evidence" if p.failed else "gap"
    selectors = {}
    for v, found in pairs.items():
        if not found:
            continue
        gaps = [p for p in found if p.verdict == "gap"]
        worst = min(gaps or found, key=lambda p: p.value)  # the group that decides: a gap's, else the least represented
        verdict = "gap" if gaps else ("no_evidence" if tests else "info")
        selectors[v] = {"verdict": verdict, "worst": worst, "share": _share(worst)}
    about = [v for v in (about or variants) if v in selectors]
    if not about:
        return None
    flagged = [v for v in about if selectors[v]["verdict"] == "gap"]
    variant = min(flagged or about, key=lambda v: selectors[v]["worst"].value)
    headline = selectors[variant]["worst"]
    small = []
    for group, count in sizes.items():
        row = next((r for r in rows if r["variant"] == variant and r["group"] == group), None)
        if count < settings.min_judged_rows and row is not None:
            small.append(SmallGroup(group, int(count), row["value"], "", 1.0, row["value"] - 1.0, -row["ci_high"], -row["ci_low"],
                                    detectable(row["se"], math.nan, math.nan, 2 * settings.alpha, max(tests, 1))))
    verdict = "gap" if flagged else ("no_evidence" if tests else "info")
    return BalanceVerdict(method, rank, verdict, headline, variant, _share(headline), selectors, tests, small,
                          settings.min_judged_rows, settings.confidence, settings.flag_ratio, threshold, 1.0,
                          threshold - headline.detectable, "" if tests else (no_intervals or "no intervals"))


# ---------------------------------------------------------------------------- leakage
@dataclass
class LeakageVerdict(Evidence):
    """The leakage test of one representation: the balanced accuracy of predicting the group
    (with its cross-validation interval) against chance ``1/k`` over the ``groups`` tested (the
    groups large enough to judge; ``left_out``: the others, with their rows), its permutation
    p-value, and the tolerance ``flag_ratio / k``. ``test``: ``"permutation"``, ``"interval"``
    (no permutations: the interval lies above chance or not) or ``""`` (none); ``above``: above
    chance by that test."""

    method: str
    variant: str
    rank: int
    verdict: str
    balanced_accuracy: float
    ci_low: float
    ci_high: float
    chance: float
    groups: int
    left_out: dict
    pvalue: float
    alpha: float
    tolerance: float
    flag_ratio: float
    test: str
    above: bool | None
    kind: str = "leakage"


def judge_leakage(estimate: tuple[float, float, float], pvalue: float | None, sizes: Mapping[str, int], settings: Settings, *,
                  method: str, variant: str, rank: int) -> LeakageVerdict | None:
    """Leakage at one rank: ``gap`` when the group is predicted above chance (the permutation
    p-value at most α; without permutations the interval above chance) by at least the tolerance
    ``flag_ratio × chance``; ``no_evidence`` otherwise (below chance is noise); ``info`` when fewer
    than two groups are large enough to judge, or nothing was tested. One test per
    representation judged: no correction. The test runs on the groups large enough to judge
    (``fairaudit.audit.FamilyAudit.representations``) — the permutation null keeps every group's
    size, so a small group cannot fake leakage, and one left out cannot dilute it (balanced
    accuracy weighs every group alike)."""
    value, low, high = estimate
    if not math.isfinite(value):
        return None
    tested = judged_groups(sizes, settings.min_judged_rows)
    left_out = {g: int(n) for g, n in sizes.items() if g not in tested}
    judged = len(tested) >= 2
    if not judged:
        tested, left_out = list(sizes), {}  # the test ran on every group; no verdict on groups too small to judge
    k = max(len(tested), 2)
    chance = 1.0 / k
    if not judged:
        test, above = "", None
    elif pvalue is not None and math.isfinite(pvalue):
        test, above = "permutation", pvalue <= settings.alpha
    elif math.isfinite(low) and math.isfinite(high):
        test, above = "interval", low > chance
    else:
        test, above = "", None
    tolerance = settings.flag_ratio * chance
    if above is None:
        verdict = "info"
    else:
        verdict = "gap" if above and value >= tolerance else "no_evidence"
    return LeakageVerdict(method, variant, int(rank), verdict, value, low, high, chance, k, left_out,
                          math.nan if pvalue is None else float(pvalue), settings.alpha, tolerance, settings.flag_ratio, test, above)


def leakage_rows(codes: np.ndarray, sizes: Sequence[int], min_judged_rows: int) -> np.ndarray | None:
    """Which of the rows with group ``codes`` the leakage test uses: those of the groups with at
    least ``min_judged_rows`` rows (``sizes``: every group's rows in the family's input), when at
    least two such groups exist and some group is left out; ``None``: every row."""
    sizes = np.asarray(sizes)
    keep = sizes >= min_judged_rows
    if keep.sum() < 2 or keep.all():
        return None
    return keep[np.asarray(codes)]
