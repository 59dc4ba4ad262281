"""Uncertainty of every audit number: the stratified bootstrap and the held-out split.

An audit number is an estimate from the rows the user gave; another sample of the same
population would give another number. This module supplies what the families need to say how
much it would move:

* :func:`stratified_resample` — a bootstrap sample that redraws each group's rows with
  replacement from that group only (group sizes stay fixed, so a small group is never lost or
  inflated by the resampling; Efron & Tibshirani 1993, §8.3 "two-sample problems");
* :func:`stratified_split` — the training / held-out split of ``AuditConfig(holdout=…)``;
* :func:`bootstrap_interval` — the basic (bias-correcting) or percentile interval of bootstrap
  replicates;
* :class:`Replicates` — the replicate values of every record key, turned into ``ci_low`` /
  ``ci_high`` at the end;
* :func:`disparity` — the worst and best group of a per-group metric and the gap and ratio
  between them, computed the same way for the point estimate, for every replicate (with the
  *point estimate's* pair of groups, so that the interval can include parity: ``max − min``
  over groups is never below 0, whatever the data) and by the findings;
* :data:`DEFAULT_BOOTSTRAP` — each family's default number of replicates, from measured cost.

The refits themselves belong to the families (:class:`fairaudit.audit.FamilyAudit`); the
driver that runs them is :func:`fairaudit.audit.run_family`.

References
----------
B. Efron, R. J. Tibshirani. *An Introduction to the Bootstrap*. Chapman & Hall, 1993.
A. C. Davison, D. V. Hinkley. *Bootstrap Methods and their Application*. Cambridge, 1997.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError
from .formatting import duration

# ---------------------------------------------------------------------------- defaults
DEFAULT_BOOTSTRAP: dict[str, int] = {"pca": 100, "nmf": 20, "fs": 50, "cpd": 20}
"""Replicates per family when ``AuditConfig(bootstrap=None)``, chosen from the measured cost of a
replicate (``benchmarks/bench_uncertainty.py``; :data:`BOOTSTRAP_REASONS` states the figures):
the default intervals of a family should cost well under a minute on the default sample (600 × 10)
on two shared cores — NMF's 20 replicates, the fewest that give a percentile interval worth the
name, take longer. 100 replicates make steady 95 % percentile intervals; 20 make rough ones (the
second-smallest and second-largest replicate set them): raise ``bootstrap`` for tighter
intervals."""

BOOTSTRAP_REASONS: dict[str, str] = {
    "pca": "a PCA replicate reweights the group moments and refits every variant warm-started (0.10 s on the "
    "default sample on two cores, most of it JEVD-PCA's column selection and Fair PCA's dual): 100 replicates, "
    "steady 95 % intervals",
    "nmf": "an NMF replicate refits every variant and re-estimates each group's own error at every rank "
    "(1.6 s on the default sample on two cores): 20 replicates, rough 95 % intervals",
    "fs": "a feature-selection replicate refits every selector and repeats 10 k-means runs (0.07 s on the default "
    "sample on two cores): 50 replicates",
    "cpd": "a CP replicate refits every method at every rank (0.7 s on the default sample on two cores; the "
    "λ sweep is not bootstrapped): 20 replicates, rough 95 % intervals",
}
"""Why each family's default is what it is (stated in every report and by the CLI)."""

DEFAULT_CAP_VARIABLE = "FAIRAUDIT_DEFAULT_BOOTSTRAP"
"""Environment variable that caps the *default* replicates (``bootstrap=None``) of every family;
an explicit ``bootstrap=N`` is never capped. The test suite sets it so that tests of other
parts stay fast; users have no reason to."""

MIN_FINITE_SHARE = 0.5
"""An interval needs at least this share of the replicates to give a finite value (a replicate
can fail to give one, e.g. a ratio whose denominator is 0); otherwise it is NaN with a reason."""


REPLICATE_MEASURED: dict[str, tuple[tuple[int, int, float], ...]] = {
    "pca": ((600, 10, 0.101), (26551, 10, 0.086), (30000, 22, 0.127), (20000, 60, 0.866), (1_000_000, 20, 0.335)),
    "nmf": ((600, 10, 1.62), (4165, 12, 2.0), (30000, 22, 13.3)),
    "fs": ((600, 10, 0.07), (4165, 12, 0.55), (30000, 22, 8.75)),
    "cpd": ((600, 10, 0.70), (4165, 12, 5.2), (30000, 22, 3.03)),
}
"""Per family, ``(rows, features, seconds)`` of one bootstrap replicate of the default audit (ten
ranks, default variants) on two cores: the default sample (600 × 10) and the credit file
(30,000 × 22) with ``benchmarks/bench_uncertainty.py``, and the 4,165 × 12 credit table of
``benchmarks/bench_all_families.py``. Re-measured 2026-11-22 after issue 13's replicate pass for
the families it changed (load average 1.1–1.6; the credit file from 3 replicates each; the
4,165-row table from two runs alternated with main's): NMF 2.15 → 1.62 / 2.4 → 2.0 / 14.3 → 13.3 s,
feature selection 0.27 → 0.10 / 0.91 → 0.70 / 10.9 → 8.75 s, CP's default sample 0.98 → 0.70 s
(one worker thread below 2,000 entities). PCA and CP's larger figures are the earlier quiet
measurement (load 0.1–0.4; their code did not change: today 0.10 / 0.13 s for PCA and 5.1–5.3 /
3.34 s for CP at load 1.1–1.6). Feature selection re-measured 2026-11-23 after its replicate pass
(branch ``fsrep``, side by side with the code before it, load 2.7–3.4): the default sample 0.10 → 0.07 s
(``bench_default_sample``: 0.076–0.084 s against 0.113–0.121 s before in the same run, the ratio
0.70 applied to the quiet figure), the 4,165-row table 0.70 → 0.55 s (CPU 0.82–0.84 against
1.05 s before), the 30,000-row file unchanged within the noise (10.8 against 10.4 s at load 2–3;
the quiet 8.75 s kept). CP's
30,000-row replicate is cheaper than its 4,165-row one: above
``khsic_max_rows`` (5,000) KHSIC is skipped, with the reason. :func:`replicate_seconds` predicts
other sizes from them. PCA's are two-group data measured 2026-11-23 with
``benchmarks/bench_pca_groups.py`` (CPU seconds under one BLAS thread, load 1.5–2.4; the default
sample, LSAC, the credit file by SEX, synthetic 20,000 × 60 and 1,000,000 × 20 tables), to which
:data:`PCA_REPLICATE_TERMS` are fitted."""

MEASURED_RANKS = {"fs": 4}
"""How many ranks (feature-selection: sizes) the audits of :data:`REPLICATE_MEASURED` swept: ten
ranks, except feature selection's four default sizes (10–40 % of the features). Scaling a
feature-selection prediction by sizes/10 made it half the measured time (1.0 s predicted, 1.93 s
measured per replicate on the 4,165 × 12 credit table), so its default ran 50 replicates (97 s)."""

def pca_dimension_seconds(s: int) -> float:
    """The PCA family's audit fits in its problem's dimension ``s = min(rows, features)``: the
    eigen-decompositions (``s³``) and JEVD's Jacobi sweeps from the identity on at most 100
    dimensions — the terms of the audit's own time model (:data:`fairaudit.cost.FAMILY_COST`,
    measured up to 1,000 × 1,000). A replicate's warm-started fits cost far less
    (:data:`PCA_REPLICATE_TERMS`)."""
    return 3e-7 * s**3 + 1.2e-5 * min(s, 100) ** 3


PCA_REPLICATE_TERMS = (8.2e-3, 3.45e-7, 5.6e-10)
"""``(a, b, c)``: a PCA bootstrap replicate of two-group data takes ``a + b·s³`` seconds per rank
— its fits, warm-started from the audit's (a fixed part, and the eigen-decompositions of the
problem's dimension ``s = min(rows, features)``) — plus ``c · rows · features · s`` for its
weighted pass over the rows (the resample's row weights and the weighted moments,
``LocalEngine.summarise(weights=…)``). Fitted (least squares of the relative error) to
:data:`REPLICATE_MEASURED`'s PCA points, which it gives to 0–18 % (the default sample 0.101 s
measured, 0.086 predicted; LSAC 0.086 / 0.087; credit 0.127 / 0.127; 20,000 × 60 0.866 / 0.867;
1,000,000 × 20 0.335 / 0.334; the 3-valued 2,996 × 5 table at its 5 ranks 0.038 / 0.041). Wide data
(fitted in the row space) cost less than it says: 50 × 5,000 measured 0.30 s, predicted 0.52 s."""

PCA_GROUP_FACTOR = (1.7, 0.32)
"""``(three, each)``: a PCA replicate's fits on ``k ≥ 3`` groups cost ``three + each · (k − 3)``
times those on two. Fair PCA's dual has one weight per group: two groups take a search along one
weight (regula falsi), three or more Kelley's cutting planes, whose LPs and number of cuts grow
with the groups (``fairaudit/pca/_dual.py``); JEVD-PCA diagonalises ``k`` covariances jointly.
Measured on the same rows split into more groups (``benchmarks/bench_pca_groups.py``, CPU seconds,
load 1.5–2.4), the fits' ratio to two groups: three groups 1.65 (LSAC), 1.83 (credit by
EDUCATION), 1.39 (synthetic 20,000 × 60), 1.71 (a 2,996 × 5 table), 1.86 (``bench_dask``'s
1,000,000 × 20); six groups 2.73, 2.85, 2.24 — about the same factor at 5, 10, 21 and 60 features,
where the time per group beyond two is not (0.026 s at 5 features, 0.36 s at 60 for the third
group). How many cuts a dual needs depends on the data, not only on ``k``: the factor is an
average, within about ±20 % of each case above."""


def pca_group_factor(n_groups: int | None) -> float:
    """How many times a PCA replicate's fits on ``n_groups`` groups cost those on two
    (:data:`PCA_GROUP_FACTOR`; 1 when the groups are not known)."""
    if not n_groups or n_groups <= 2:
        return 1.0
    three, each = PCA_GROUP_FACTOR
    return three + each * (n_groups - 3)


def _pca_replicate_seconds(n_rows: int, n_features: int, n_ranks: int | None, n_groups: int | None, moments_pass: bool) -> float:
    """:data:`PCA_REPLICATE_TERMS` × :func:`pca_group_factor` (ten ranks when not known); without
    the weighted pass over the rows when ``moments_pass`` is False (the dask engine's replicates
    get their moments from one pass for all of them, which :func:`fairaudit.cost.poisson_replicate_cost`
    adds)."""
    s = min(n_rows, n_features)
    per_rank, cubic, weighted = PCA_REPLICATE_TERMS
    fits = (10 if n_ranks is None else max(1, n_ranks)) * (per_rank + cubic * s**3) * pca_group_factor(n_groups)
    return fits + (weighted * n_rows * n_features * s if moments_pass else 0.0)


DEFAULT_BUDGET_SECONDS = 60
"""The default intervals of one family may take about this long (predicted from the data's size):
beyond it the default number of replicates shrinks, and below :data:`MIN_DEFAULT_REPLICATES` the
default is no intervals (with the reason stated); an explicit ``bootstrap=N`` always runs.
A minute, not more: measured with five minutes, the feature-selection audit of the 30,000-row
credit file took 597 s by default (fits 8.5 s) and the PCA audit of 50 × 5,000 rows 123 s
(without intervals 12.7 s) — a default that keeps a user waiting ten minutes is not one."""

MIN_DEFAULT_REPLICATES = 10

HOLDOUT_RANGE = (0.05, 0.5)
"""The held-out share ``AuditConfig(holdout=…)`` accepts (0 or None for none)."""

HOLDOUT_SUGGESTED = 0.3
"""The held-out share offered when a user turns held-out evaluation on (the dashboard's toggle)."""



def replicate_seconds(method: str, n_rows: int, n_features: int, n_ranks: int | None = None, n_groups: int | None = None, *,
                      moments_pass: bool = True) -> float:
    """Predicted seconds of one bootstrap replicate of ``method`` on ``n_rows × n_features`` data,
    from :data:`REPLICATE_MEASURED`: NMF, feature selection and CP grow with the cells (the broken
    line through the measurements, never below the smallest), scaled by the number of ranks; the
    PCA family by its ranks, its problem's dimension, its rows and its groups
    (:data:`PCA_REPLICATE_TERMS`, :data:`PCA_GROUP_FACTOR`; ``moments_pass=False``: without the
    replicate's weighted pass over the rows, which the dask engine makes once for all replicates)."""
    if method == "pca":
        return _pca_replicate_seconds(n_rows, n_features, n_ranks, n_groups, moments_pass)
    found = REPLICATE_MEASURED.get(method)
    if not found:
        return 0.0
    scale = 1.0 if n_ranks is None else max(1, n_ranks) / MEASURED_RANKS.get(method, 10)
    return _piecewise_in_cells(found, n_rows * n_features) * scale


@dataclass(frozen=True)
class ReplicateCost:
    """Predicted seconds of a family's bootstrap replicates: ``each`` per replicate and ``once``
    before the first — the dask engine's pass over the data that computes every replicate's
    moments (``0`` elsewhere)."""

    each: float
    once: float = 0.0

    def seconds(self, count: int) -> float:
        """Of ``count`` replicates (none: nothing, not even the pass)."""
        return self.once + count * self.each if count > 0 else 0.0

    def affordable(self, budget: float) -> int | None:
        """The most replicates that fit in ``budget`` seconds (``None``: no limit, nothing costs)."""
        if self.each <= 0:
            return None if self.once <= budget else 0
        return max(0, int((budget - self.once) // self.each))

    def describe(self) -> str:
        """``"a replicate about 0.4 s"``, or with a pass ``"one more pass over the data, about 18
        seconds, then about 0.4 s per replicate"``."""
        each = f"{self.each:.0f} s" if self.each >= 10 else f"{self.each:.2g} s"
        if self.once <= 0:
            return f"a replicate about {each}"
        return f"one more pass over the data, about {duration(self.once)}, then about {each} per replicate"


def _piecewise_in_cells(found, cells: int) -> float:
    """Seconds at ``cells`` along the broken line through the measurements (sorted by cells),
    never below the smallest measured time; beyond the largest measurement in proportion to the
    cells (a replicate touches every cell; extending the last segment would fall with size where
    it falls, as CP's does when KHSIC is skipped above 5,000 rows)."""
    points = sorted((n * d, t) for n, d, t in found)
    xs, ts = [x for x, _ in points], [t for _, t in points]
    value = float(np.interp(cells, xs, ts)) if cells <= xs[-1] else ts[-1] * cells / xs[-1]
    return max(min(ts), value)


def default_replicates(method: str, n_rows: int | None = None, n_features: int | None = None, n_ranks: int | None = None, *,
                       n_groups: int | None = None, cost: ReplicateCost | None = None) -> tuple[int, str]:
    """``(replicates, why)``: :data:`DEFAULT_BOOTSTRAP`'s count for ``method``, fewer when they would
    take more than :data:`DEFAULT_BUDGET_SECONDS` — predicted by ``cost``, else from the data's size
    (:func:`replicate_seconds`) — capped by :data:`DEFAULT_CAP_VARIABLE` when that is set."""
    default = DEFAULT_BOOTSTRAP.get(method, 20)
    count = default
    why = f"default for this family: {BOOTSTRAP_REASONS.get(method, 'measured cost')}"
    if cost is None and n_rows is not None and n_features is not None:
        cost = ReplicateCost(replicate_seconds(method, n_rows, n_features, n_ranks, n_groups))
    affordable = None if cost is None else cost.affordable(DEFAULT_BUDGET_SECONDS)
    if affordable is not None and affordable < count:
        if affordable < MIN_DEFAULT_REPLICATES:
            count = 0
            why = (
                f"no intervals by default on data this size: {cost.describe()} ({default} replicates about "
                f"{duration(cost.seconds(default))}); ask for them with {_term('bootstrap', MIN_DEFAULT_REPLICATES)} or more"
            )
        else:
            count = affordable
            why = (
                f"default shortened to fit about {duration(DEFAULT_BUDGET_SECONDS)} on data this size ({cost.describe()}); "
                f"ask for more with {_term('bootstrap')}"
            )
    cap = os.environ.get(DEFAULT_CAP_VARIABLE)
    if cap:
        try:
            capped = max(int(cap), 0)
        except ValueError:
            capped = count
        if capped < count:
            count, why = capped, f"default capped by {DEFAULT_CAP_VARIABLE}={cap}"
    return count, why


def _term(name: str, value=None) -> str:
    from .vocabulary import term

    return term(name, value)


def resolve_replicates(
    method: str, bootstrap: int | None, n_rows: int | None = None, n_features: int | None = None, n_ranks: int | None = None, *,
    n_groups: int | None = None, cost: ReplicateCost | None = None,
) -> tuple[int, str]:
    """``(replicates, why)`` for ``method`` under ``AuditConfig.bootstrap`` (the predicted cost —
    ``cost``, else the data's size, groups and number of ranks — shapes the default, see
    :func:`default_replicates`)."""
    if bootstrap is None:
        return default_replicates(method, n_rows, n_features, n_ranks, n_groups=n_groups, cost=cost)
    if bootstrap == 0:
        return 0, f"intervals turned off ({_term('bootstrap', 0)})"
    return int(bootstrap), f"chosen ({_term('bootstrap', int(bootstrap))})"


def check_bootstrap(bootstrap, confidence, holdout, flag_ratio) -> None:
    """Validate the uncertainty options of :class:`~fairaudit.audit.AuditConfig`."""
    from .vocabulary import term

    if bootstrap is not None and (isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0):
        raise ParameterError(f"{term('bootstrap')} must be a whole number ≥ 0 (0 turns the intervals off); got {bootstrap!r}.")
    if bootstrap is not None and 0 < bootstrap < 10:
        raise ParameterError(
            f"{term('bootstrap', bootstrap)} is too few replicates for a percentile interval; use at least 10 "
            f"(or {term('bootstrap', 0)} to turn the intervals off)."
        )
    if not isinstance(confidence, int | float) or not 0.5 <= float(confidence) < 1:
        raise ParameterError(f"{term('confidence')} must be a number from 0.5 to below 1, such as 0.95; got {confidence!r}.")
    low, high = HOLDOUT_RANGE
    if holdout is not None and (not isinstance(holdout, int | float) or not (holdout == 0 or low <= float(holdout) <= high)):
        raise ParameterError(f"{term('holdout')} must be a share of the rows from {low:g} to {high:g} (or 0 for none); got {holdout!r}.")
    if not isinstance(flag_ratio, int | float) or not float(flag_ratio) > 1:
        raise ParameterError(f"{term('flag_ratio')} must be a number above 1, such as 1.25; got {flag_ratio!r}.")


# ---------------------------------------------------------------------------- resampling
def group_members(codes: np.ndarray, rows: np.ndarray | None = None) -> list[np.ndarray]:
    """Row indices of each group (codes ``0 … k−1``), optionally only among ``rows``."""
    codes = np.asarray(codes)
    rows = np.arange(len(codes)) if rows is None else np.asarray(rows)
    sub = codes[rows]
    k = int(codes.max()) + 1 if len(codes) else 0
    order = np.argsort(sub, kind="stable")
    bounds = np.searchsorted(sub[order], np.arange(k + 1))
    return [rows[order[bounds[g] : bounds[g + 1]]] for g in range(k)]


def stratified_resample(codes: np.ndarray, rng: np.random.Generator, rows: np.ndarray | None = None) -> np.ndarray:
    """A stratified bootstrap sample: each group's rows (among ``rows``) drawn with replacement,
    as many as the group has; returned sorted (row indices, with repeats)."""
    drawn = [members[rng.integers(0, len(members), size=len(members))] for members in group_members(codes, rows) if len(members)]
    return np.sort(np.concatenate(drawn)) if drawn else np.array([], dtype=np.intp)


def stratified_split(codes: np.ndarray, holdout: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """``(train, heldout)`` row indices: ``holdout`` of each group's rows held out (at least one
    row, and at least one left for training), chosen at random."""
    rng = np.random.default_rng(random_state)
    train, test = [], []
    for members in group_members(codes):
        n = len(members)
        take = min(max(int(round(holdout * n)), 1), n - 1) if n > 1 else 0
        chosen = rng.permutation(members)
        test.append(chosen[:take])
        train.append(chosen[take:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def replicate_seeds(random_state, replicates: int) -> list[np.random.SeedSequence]:
    """Independent seeds, one per replicate, derived from the audit's seed."""
    entropy = 0 if random_state is None else int(random_state)
    return np.random.SeedSequence([entropy, 0x5EED]).spawn(replicates)


# ---------------------------------------------------------------------------- intervals
INTERVAL_METHODS = ("basic", "percentile")
INTERVAL_METHOD = "percentile"
"""How replicates become an interval (see :func:`bootstrap_interval`)."""


def bootstrap_interval(values: Iterable[float], confidence: float, point: float | None = None, method: str | None = None) -> tuple[float, float]:
    """The bootstrap interval of ``point`` from its replicates ``values`` at ``confidence``.

    ``method="percentile"`` (the default, :data:`INTERVAL_METHOD`): ``(q_{α/2}, q_{1−α/2})`` of
    the replicates (Efron & Tibshirani 1993, §13.3). ``method="basic"``: ``(2θ̂ − q_{1−α/2},
    2θ̂ − q_{α/2})`` (Davison & Hinkley 1997, §5.2), the percentile interval reflected about the
    point estimate, which removes the estimate's first-order bias.

    Measured (``benchmarks/bench_coverage.py``, per-group PCA loss, two Gaussian groups): where
    the population loss is positive the percentile interval covers it at close to the nominal
    rate and the basic one slightly below it; where it is 0 (a group whose own principal
    subspace is the pooled one) the sample loss is never below it — a group's loss is measured
    against its own best fit *on the same rows* — so no percentile interval contains 0 and
    the basic interval does. The verdicts therefore do not rest on per-group intervals alone:
    vanilla PCA's gap is also tested against random groups of the same sizes
    (``loss_gap_pvalue``).

    NaN replicates are left out; ``(nan, nan)`` when fewer than :data:`MIN_FINITE_SHARE` of them
    remain. Infinite values (a ratio over 0) are kept as the extremes they are: the quantiles are
    then order statistics (no interpolation with an infinity).
    """
    method = method or INTERVAL_METHOD
    values = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    kept = values[~np.isnan(values)]
    if values.size == 0 or kept.size < max(2, math.ceil(MIN_FINITE_SHARE * values.size)):
        return float("nan"), float("nan")
    alpha = 1.0 - confidence
    quantile_method = "linear" if np.isfinite(kept).all() else "inverted_cdf"
    low, high = (float(q) for q in np.quantile(kept, [alpha / 2, 1 - alpha / 2], method=quantile_method))
    if method == "percentile" or point is None or not math.isfinite(point):
        return low, high
    if method != "basic":
        raise ValueError(f"interval method must be one of {', '.join(INTERVAL_METHODS)}; got {method!r}")
    with np.errstate(invalid="ignore"):
        return 2.0 * point - high, 2.0 * point - low


Key = tuple[str, int, str, str]
"""A record key without the method: ``(variant, rank, group, metric)``."""


class Replicates:
    """Replicate values of every record key of one family: ``values[key][b]``."""

    def __init__(self, count: int):
        self.count = count
        self.values: dict[Key, np.ndarray] = {}

    def add(self, replicate: int, variant: str, rank: int, metric: str, value: float, group: str = "") -> None:
        key = (variant, int(rank), group, metric)
        store = self.values.get(key)
        if store is None:
            store = self.values[key] = np.full(self.count, np.nan)
        store[replicate] = float(value)

    def intervals(self, confidence: float, points: dict[Key, float] | None = None, method: str | None = None) -> dict[Key, tuple[float, float]]:
        """Every key's interval (:func:`bootstrap_interval`); ``points`` are the point estimates
        the basic interval reflects about."""
        points = points or {}
        return {key: bootstrap_interval(values, confidence, points.get(key), method) for key, values in self.values.items()}


# ---------------------------------------------------------------------------- disparities
@dataclass(frozen=True)
class Disparity:
    """How a family's per-group metric turns into whole-data disparity records.

    ``metric`` is per group and lower is better (a loss, an error). For every (variant, rank)
    the audit adds ``largest`` (the worst group's value), ``gap`` (worst − best) and ``ratio``
    (worst / best) — with intervals whose replicates follow the point estimate's worst and
    best groups. For a *loss* (an error beyond the group's own best, which can be near 0 for
    every group) ``error`` names the per-group error it is part of and ``error_ratio`` the
    record ``error_worst / (error_worst − gap)``: how many times larger the worst group's error
    is than it would be if that group were served as well as the best one (1 = parity). Unlike
    the ratio of two losses it does not explode when the best group's loss is near 0, so the
    ``gap`` verdict's tolerance is applied to it.
    """

    metric: str
    largest: str
    gap: str
    ratio: str
    error: str | None = None
    error_ratio: str | None = None

    def names(self, prefix: str = "") -> tuple[str, ...]:
        return tuple(prefix + name for name in (self.metric, self.largest, self.gap, self.ratio))


def disparity(values: np.ndarray, pair: tuple[int, int] | None = None, errors: np.ndarray | None = None) -> dict:
    """Worst and best group of a per-group, lower-is-better metric and what separates them.

    Returns ``{"worst", "best", "largest", "gap", "ratio"}`` (indices into ``values``,
    the largest value, ``values[worst] − values[best]``, ``values[worst] / values[best]``) and,
    with ``errors`` (each group's error, of which ``values`` is the excess part),
    ``"error_ratio"`` = ``errors[worst] / (errors[worst] − gap)`` (see :class:`Disparity`).
    ``pair`` fixes ``(worst, best)`` (the point estimate's, inside a bootstrap replicate); the
    ratio is ``inf`` when the best value is ≤ 0 below a positive worst, 0 when the worst is ≤ 0
    above a positive best, and NaN when both are ≤ 0 or the point estimate's best is not
    positive (no ratio to speak of: the gap carries the comparison).
    """
    values = np.asarray(values, dtype=float)
    if pair is None:
        worst, best = int(np.nanargmax(values)), int(np.nanargmin(values))
    else:
        worst, best = pair
    high, low = float(values[worst]), float(values[best])
    if low > 0 and high >= 0:
        ratio = high / low
    elif low <= 0 < high:
        ratio = math.inf if pair is not None else math.nan
    elif high <= 0 < low:
        ratio = 0.0
    else:
        ratio = math.nan
    found = {"worst": worst, "best": best, "largest": float(np.nanmax(values)), "gap": high - low, "ratio": ratio}
    if errors is not None:
        error = float(errors[worst])
        served = error - (high - low)  # the worst group's error at the best group's loss
        found["error_ratio"] = error / served if served > 0 else (math.inf if error > 0 else math.nan)
    return found
