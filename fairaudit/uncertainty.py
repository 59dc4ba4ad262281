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
* :data:`DEFAULT_BOOTSTRAP` — each family's default number of replicates, fixed per family.

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

# ---------------------------------------------------------------------------- defaults
DEFAULT_BOOTSTRAP: dict[str, int] = {"pca": 100, "nmf": 20, "fs": 50, "cpd": 20}
"""Replicates per family when ``AuditConfig(bootstrap=None)``: a fixed number per family, so that
the numbers never depend on how fast the machine is (a time budget, ``AuditConfig.time_budget``,
may stop them early, and the result then says from how many replicates its intervals come).
100 replicates make steady 95 % percentile intervals; 20 make rough ones (the second-smallest and
second-largest replicate set them): raise ``bootstrap`` for tighter intervals."""

BOOTSTRAP_REASONS: dict[str, str] = {
    "pca": "a PCA replicate reweights the group moments and refits every variant, warm-started from the audit's fit: "
    "100 replicates, steady 95 % intervals",
    "nmf": "an NMF replicate refits every variant from the audit's factors and re-estimates each group's own error at "
    "every rank: 20 replicates, rough 95 % intervals",
    "fs": "a feature-selection replicate refits every selector and repeats 10 k-means runs: 50 replicates",
    "cpd": "a CP replicate refits every method at every rank (the λ sweep is not bootstrapped): 20 replicates, rough 95 % "
    "intervals",
}
"""Why each family's default is what it is (stated in every report and by the CLI)."""

DEFAULT_CAP_VARIABLE = "FAIRAUDIT_DEFAULT_BOOTSTRAP"
"""Environment variable that caps the *default* replicates (``bootstrap=None``) of every family;
an explicit ``bootstrap=N`` is never capped. The test suite sets it so that tests of other
parts stay fast; users have no reason to."""

MIN_FINITE_SHARE = 0.5
"""An interval needs at least this share of the replicates to give a finite value (a replicate
can fail to give one, e.g. a ratio whose denominator is 0); otherwise it is NaN with a reason."""

MIN_REPLICATES = 10
"""The fewest replicates behind a percentile interval: ``bootstrap`` may not ask for fewer, and a
time budget that stops the replicates before this many leaves no intervals (with the reason)."""

HOLDOUT_RANGE = (0.05, 0.5)
"""The held-out share ``AuditConfig(holdout=…)`` accepts (0 or None for none)."""

HOLDOUT_SUGGESTED = 0.3
"""The held-out share offered when a user turns held-out evaluation on (the dashboard's toggle)."""


def default_replicates(method: str) -> tuple[int, str]:
    """``(replicates, why)``: :data:`DEFAULT_BOOTSTRAP`'s count for ``method``, capped by
    :data:`DEFAULT_CAP_VARIABLE` when that is set."""
    count = DEFAULT_BOOTSTRAP.get(method, 20)
    why = f"default for this family: {BOOTSTRAP_REASONS.get(method, 'a fixed count')}"
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


def resolve_replicates(method: str, bootstrap: int | None) -> tuple[int, str]:
    """``(replicates, why)`` for ``method`` under ``AuditConfig.bootstrap`` (``None``: the family's
    default, :func:`default_replicates`)."""
    if bootstrap is None:
        return default_replicates(method)
    if bootstrap == 0:
        return 0, f"intervals turned off ({_term('bootstrap', 0)})"
    return int(bootstrap), f"chosen ({_term('bootstrap', int(bootstrap))})"


def check_bootstrap(bootstrap, confidence, holdout, flag_ratio) -> None:
    """Validate the uncertainty options of :class:`~fairaudit.audit.AuditConfig`."""
    from .vocabulary import term

    if bootstrap is not None and (isinstance(bootstrap, bool) or not isinstance(bootstrap, int | np.integer) or bootstrap < 0):
        raise ParameterError(f"{term('bootstrap')} must be a whole number ≥ 0 (0 turns the intervals off); got {bootstrap!r}.")
    if bootstrap is not None and 0 < bootstrap < MIN_REPLICATES:
        raise ParameterError(
            f"{term('bootstrap', bootstrap)} is too few replicates for a percentile interval; use at least {MIN_REPLICATES} "
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

    def first(self, count: int) -> Replicates:
        """Replicates ``0 … count−1`` alone (what ``bootstrap=count`` gives: the seeds are the same)."""
        if count == self.count:
            return self
        found = Replicates(count)
        found.values = {key: values[:count].copy() for key, values in self.values.items()}
        return found

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
