"""Running an audit: configuration, the tidy result, the family protocol and its driver.

``run_audit(data, config)`` fits every requested variant of every requested method family at
every rank and returns an :class:`AuditResult` whose ``records`` table has one row per
measurement, with its confidence interval::

    method   variant   rank  group     metric      value   ci_low  ci_high
    pca      vanilla   3     SEX=2     loss        0.412   0.371   0.455
    pca      fair_eig  3                max_loss    0.301   0.270   0.333   (group empty: whole data)
    pca      fair_eig  3                seconds     0.004     NaN     NaN   (a fact of the fit)

Plots, the app, the HTML report, JSON and CSV all read this table; nothing recomputes metrics
on the side. A method family is a :class:`FamilyAudit` subclass registered in
:data:`FAMILIES`: it *prepares* its input, *fits* its variants on a set of rows and *measures*
fitted models on a set of rows. :func:`run_family` drives it: the fit on all rows (or on the
training part of ``AuditConfig(holdout=…)``, measured on the held-out rows as ``heldout_…``
records too), then the stratified bootstrap (:mod:`fairaudit.uncertainty`) — the same fit and
measurement on resampled rows, warm-started from the first fit — whose percentile intervals
become ``ci_low`` / ``ci_high``. A variant that would be too slow for the input is *skipped
with a recorded reason*, never silently; an interval that is not computed is NaN with the
reason in ``warnings``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import functools
import importlib
import math
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from . import metrics, uncertainty, verdicts
from ._version import __version__
from .data import AuditData
from .errors import ParameterError, RankError
from .families import FAMILIES
from .vocabulary import term

RECORD_COLUMNS = ["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"]
"""The tidy records' columns (contract 2). ``ci_low``/``ci_high``: the interval at
``AuditConfig.confidence`` (NaN where not computed; the reason is in ``AuditResult.warnings``)."""

RECORD_KEY = ["method", "variant", "rank", "group", "metric"]
"""The columns that identify a record (unique within a result)."""

HELDOUT_PREFIX = "heldout_"
"""Metrics measured on the held-out rows (``AuditConfig(holdout=…)``) carry this prefix."""

ON_REQUEST: dict[str, tuple[str, ...]] = {"pca": ("fair_sdp", "fair_mw")}
"""Variants outside a family's default set (``variants="all"``): they run only when named. The SDP
and multiplicative weights solve fair_eig's problem (exactly, resp. approximately) in seconds to
minutes per rank where fair_eig takes milliseconds; they are there to check it. The CLI and the
dashboard both start from this default set."""


class AuditCancelled(Exception):
    """Raised by a progress callback to stop a run (the dashboard's Cancel button).

    :func:`run_audit` and the families let it propagate; nothing may swallow it."""


def family_variants(method: str) -> tuple[str, ...]:
    """Every variant name ``method`` knows, in its order (``"all"`` runs :func:`default_variants`)."""
    module_name = FAMILIES[method].split(":")[0]
    return tuple(importlib.import_module(module_name).VARIANTS)


def default_variants(method: str) -> tuple[str, ...]:
    """The variants a family runs by default: all of them but the :data:`ON_REQUEST` ones (and,
    at run time, those too slow for the data, each skipped with its reason)."""
    return tuple(v for v in family_variants(method) if v not in ON_REQUEST.get(method, ()))


# ============================================================================ configuration
HOW_IT_RUNS = ("keep_models", "n_jobs", "scheduler")
"""Settings of :class:`AuditConfig` that change no number (left out of its JSON and cache keys)."""


@dataclass
class AuditConfig:
    """What to run.

    Parameters
    ----------
    methods : sequence of str
        Method families (``"pca"``; more as they are added to :data:`FAMILIES`).
    ranks : sequence of int, optional
        Ranks to sweep. Default: 1 … min(10, number of features).
    variants : sequence of str or "all"
        Variant names to run (``"vanilla"``, ``"fair_eig"`` …), optionally qualified by family
        (``"pca:fair_sdp"``). ``"all"`` runs each family's default set.
    random_state : int
        Seed for everything random (classifier splits, subsampling, initialisations).
    leakage_classifier : {"qda", "logistic", "hgb", "mlp"}
        Classifier behind ``unfairness`` / ``unfairness_balanced`` (default QDA: fast, and it
        sees mean and covariance differences; "hgb"/"mlp" for nonlinear leakage).
    leakage_max_rows : int
        Rows (stratified sample) used for the leakage classifier.
    mmd_max_rows_per_group : int
        Rows per group for the O(m²) RBF MMD².
    sdp_max_features, mw_max_features : int
        Above these feature counts the SDP / multiplicative-weights variants are skipped
        (with the reason recorded): their cost grows steeply with the dimension.
    options : dict
        Family-specific options, e.g. ``{"nmf": {"max_iter": 500}}``.
    bootstrap : int or None
        Replicates of the stratified bootstrap behind every interval: ``None`` (default) takes
        each family's default (:data:`fairaudit.uncertainty.DEFAULT_BOOTSTRAP`, chosen from
        measured cost and stated in the report), ``0`` turns the intervals off.
    confidence : float
        Level of every interval (default 0.95); ``1 − confidence`` is also the significance level
        of the leakage test.
    holdout : float or None
        Share of each group's rows held out (e.g. 0.3): the models are fitted on the rest and
        every metric is also measured on the held-out rows (records ``heldout_…``). ``None`` or 0:
        fit and measure on all rows.
    flag_ratio : float
        Tolerance of the ``gap`` verdict (default 1.25): the worse-served group of a pair must
        fare at least this many times worse than the other (see
        :data:`fairaudit.findings.VERDICT_RULES`).
    reference : str or None
        The group every other group is compared with (a group label, or the value part of one:
        ``"white"`` for ``"race=white"``). ``None`` (default): the best-served group large enough to
        judge, chosen by the data — every pair of groups is then tested (:mod:`fairaudit.verdicts`).
        The findings can be judged again with another: ``findings(result, reference=…)``.
    min_judged_rows : int
        The fewest rows a group needs to be judged (default 30,
        :data:`fairaudit.verdicts.MIN_JUDGED_ROWS`): smaller groups are reported as too small to
        judge, with the smallest difference their size lets the audit detect, take part in no
        test (the leakage test among them) and are never the reference.
    keep_models : bool
        Keep every fitted estimator in :attr:`AuditResult.models` (for
        :func:`fairaudit.models.export_models`); off by default, since NMF and CP estimators hold
        a row per data row.
    leakage_permutations : int or None
        Permutations behind the leakage test's chance distribution (``None``: the classifier's
        default, :data:`fairaudit.metrics.LEAKAGE_PERMUTATIONS`; 0: none, the test then uses the
        cross-validation interval).
    leace : bool
        Also audit every variant's representation after LEACE (Belrose et al. 2023,
        :mod:`fairaudit.erasure`: the least change after which no linear classifier predicts the
        group), as the variant ``<name>+leace`` next to it, with the records of its leakage and of
        what the erasure cost. The PCA family fits it exactly from its group moments
        (:class:`~fairaudit.pca.LeacePCA`: reconstruction error and loss included); for the other
        families the eraser is fitted on each fit's representation of the training rows and applied
        to the rows measured (:func:`erase_representations`). Off by default: it doubles the leakage
        tests.
    engine : str
        How the data reach the PCA family (:data:`fairaudit.engine.ENGINES`): ``"local"`` (the
        default, in-process) computes the group moments in one pass over the in-memory rows;
        ``"dask"`` audits data read partition by partition
        (:func:`fairaudit.engine.read_partitioned`), or computes the moments of in-memory data in
        dask chunks (the optional extra ``fairaudit[dask]``).
    n_jobs : int or None
        Processes computing the bootstrap replicates side by side (this one and ``n_jobs − 1``
        workers, :mod:`fairaudit.executors`); ``None`` (default): one per usable core; 1: this
        process alone. The values are the same whatever the number.
    scheduler : str or distributed.Client, optional
        Compute the bootstrap replicates on this Dask cluster (a client, or its scheduler's
        address) instead of local processes; the same values.
    subgroups : bool
        Also search the subgroups of the sensitive columns — every subgroup fixing the values of
        one or more of them (``sex=f``, ``race=black``, ``sex=f & race=black``) with at least
        ``min_judged_rows`` rows — for the one vanilla PCA serves worst against the rest of the
        rows, the multiple comparisons of the search corrected (:mod:`fairaudit.subgroups`,
        ``docs/subgroups.md``). PCA family; off by default (its own bootstrap replicates).
    time_budget : float or None
        Seconds the whole audit may take: the bootstrap replicates stop being started once it is
        spent (each family's get an equal share of what is left when they start), and their
        intervals then say from how many replicates they come (none below
        :data:`fairaudit.uncertainty.MIN_REPLICATES`). ``None`` (default): no limit, every
        replicate runs.
    """

    methods: Sequence[str] = ("pca",)
    ranks: Sequence[int] | None = None
    variants: Sequence[str] | str = "all"
    random_state: int = 0
    leakage_classifier: str = "qda"
    leakage_max_rows: int = 10000
    mmd_max_rows_per_group: int = 1000
    sdp_max_features: int = 30
    mw_max_features: int = 300
    options: dict = field(default_factory=dict)
    bootstrap: int | None = None
    confidence: float = 0.95
    holdout: float | None = None
    flag_ratio: float = 1.25
    keep_models: bool = False
    leakage_permutations: int | None = None
    leace: bool = False
    engine: str = "local"
    reference: str | None = None
    min_judged_rows: int = verdicts.MIN_JUDGED_ROWS
    n_jobs: int | None = None
    scheduler: object = None
    time_budget: float | None = None
    subgroups: bool = False

    def __post_init__(self):
        self.methods = tuple(self.methods)
        if isinstance(self.variants, str) and self.variants != "all":
            self.variants = tuple(v.strip() for v in self.variants.split(",") if v.strip())
        elif not isinstance(self.variants, str):
            self.variants = tuple(self.variants)
        if self.ranks is not None:
            self.ranks = tuple(int(r) for r in self.ranks)
        for method in self.methods:
            if method not in FAMILIES:
                raise ParameterError(f"unknown method {method!r} in {term('methods')}; available: {', '.join(FAMILIES)}.")
        from .engine import ENGINES

        if self.engine not in ENGINES:
            raise ParameterError(f"engine must be one of {', '.join(ENGINES)}; got {self.engine!r}.")
        if self.leakage_classifier not in metrics.LEAKAGE_CLASSIFIERS:
            raise ParameterError(
                f"leakage_classifier must be one of {', '.join(metrics.LEAKAGE_CLASSIFIERS)}; "
                f"got {self.leakage_classifier!r}."
            )
        uncertainty.check_bootstrap(self.bootstrap, self.confidence, self.holdout, self.flag_ratio)
        if self.reference is not None and (not isinstance(self.reference, str) or not self.reference.strip()):
            raise ParameterError(f"{term('reference')} must be a group's name (or None for the best-served group); got {self.reference!r}.")
        if isinstance(self.min_judged_rows, bool) or not isinstance(self.min_judged_rows, int | np.integer) or self.min_judged_rows < 2:
            raise ParameterError(f"{term('min_judged_rows')} must be a whole number ≥ 2; got {self.min_judged_rows!r}.")
        self.min_judged_rows = int(self.min_judged_rows)
        if not isinstance(self.leace, bool | np.bool_):
            raise ParameterError(f"{term('leace')} must be True or False; got {self.leace!r}.")
        self.leace = bool(self.leace)
        if not isinstance(self.subgroups, bool | np.bool_):
            raise ParameterError(f"{term('subgroups')} must be True or False; got {self.subgroups!r}.")
        self.subgroups = bool(self.subgroups)
        if self.leakage_permutations is not None and (
            isinstance(self.leakage_permutations, bool) or not isinstance(self.leakage_permutations, int) or self.leakage_permutations < 0
        ):
            raise ParameterError(f"leakage_permutations must be a whole number ≥ 0; got {self.leakage_permutations!r}.")
        if self.n_jobs is not None and (isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, int | np.integer) or self.n_jobs < 1):
            raise ParameterError(f"{term('n_jobs')} must be a whole number ≥ 1 (1: this process alone); got {self.n_jobs!r}.")
        if self.time_budget is not None and (
            isinstance(self.time_budget, bool) or not isinstance(self.time_budget, int | float) or not 0 < float(self.time_budget) < math.inf
        ):
            raise ParameterError(f"{term('time_budget')} must be a number of seconds above 0 (or none for no limit); got {self.time_budget!r}.")

    @property
    def alpha(self) -> float:
        """Significance level of the tests (``1 − confidence``)."""
        return 1.0 - float(self.confidence)

    def resolved_ranks(self, n_features: int, limit: int | None = None) -> tuple[int, ...]:
        """The ranks to sweep for data with ``n_features`` columns (``limit`` caps them further)."""
        cap = n_features if limit is None else min(n_features, limit)
        if self.ranks is None:
            return tuple(range(1, min(10, cap) + 1))
        if not self.ranks:
            raise RankError("the rank list is empty; give ranks such as 1:10 or 2,4,8.")
        for rank in self.ranks:
            if rank < 1:
                raise RankError(f"rank {rank} is below 1; ranks start at 1.")
            if rank > cap:
                raise RankError(
                    f"rank {rank} is larger than the data allows ({cap}: the number of features"
                    f"{'' if limit is None else ' or rows'}); choose ranks up to {cap}."
                )
        return tuple(sorted(set(self.ranks)))

    def wants(self, method: str, variant: str) -> bool:
        """Whether ``variant`` of ``method`` should run (the family's default set for ``"all"``)."""
        if self.variants == "all":
            return variant not in ON_REQUEST.get(method, ())
        return self.names(method, variant)

    def names(self, method: str, variant: str) -> bool:
        """Whether ``variants`` names ``variant`` of ``method`` (plain or ``method:variant``)."""
        return self.variants != "all" and (variant in self.variants or f"{method}:{variant}" in self.variants)

    def check_variants(self) -> None:
        """Refuse variant names no requested family knows, and a family left with no variant.

        Called by :func:`run_audit` before any fit (and by the CLI before reading the data)."""
        if self.variants == "all":
            return
        known = {method: family_variants(method) for method in self.methods}
        for name in self.variants:
            method, _, variant = name.rpartition(":")
            if erased_base(variant) is not None:
                raise ParameterError(
                    f"{name!r} is a variant's representation after LEACE: name {erased_base(variant)!r} in "
                    f"{term('variants')} and set {term('leace', True)}."
                )
            if method:
                if method not in known:
                    raise ParameterError(
                        f"variant {name!r} names the family {method!r}, which this audit does not run; "
                        f"add it with {term('methods')} or drop the prefix."
                    )
                families = [method]
            else:
                families = list(known)
            if not any(variant in known[m] for m in families):
                listing = "; ".join(f"{m}: {', '.join(known[m])}" for m in families)
                raise ParameterError(f"unknown variant {variant!r} in {term('variants')}; known variants — {listing}.")
        for method, names in known.items():
            if not any(self.names(method, v) for v in names):
                raise ParameterError(
                    f"{term('variants')} names no variant of {method} ({', '.join(names)}); add one of them "
                    f"or remove {method} from {term('methods')}."
                )

    def to_dict(self) -> dict:
        """The settings that determine the numbers (``keep_models``, ``n_jobs`` and ``scheduler``
        do not — where the replicates run changes no value — and are left out)."""
        found = {field_.name: getattr(self, field_.name) for field_ in fields(self) if field_.name not in HOW_IT_RUNS}
        return {key: list(value) if isinstance(value, tuple) else copy.deepcopy(value) for key, value in found.items()}


# ============================================================================ results
@dataclass
class AuditResult:
    """The outcome of :func:`run_audit`: tidy records plus everything a report needs."""

    records: pd.DataFrame
    config: dict
    data: dict
    skipped: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    """Non-numeric facts about fits that records cannot hold, as
    ``{method: {variant: {rank (str): {key: JSON value}}}}`` — e.g. the feature-selection
    family's ``selected`` column names. Written by :meth:`RecordSink.detail`."""
    created: str = ""
    seconds: float = 0.0
    expected_seconds: float | None = None
    """The time the audit announced, once its bootstrap replicates' pace had been measured on the
    first of each family's (before the rest ran; :class:`AuditRun`), beside :attr:`seconds`, the
    time it took. ``None`` when no replicates ran."""
    fairaudit_version: str = __version__
    uncertainty: dict = field(default_factory=dict)
    """Per family, how its intervals were computed: ``{method: {"replicates", "why",
    "confidence", "holdout", "seconds", "not_bootstrapped": {metric: reason}}}`` (in the JSON
    and the report)."""
    models: dict = field(default_factory=dict, repr=False, compare=False)
    """With ``AuditConfig(keep_models=True)``: the fitted estimator of every fit, keyed
    ``(method, variant, rank)``. Never written to JSON; :mod:`fairaudit.models` saves them."""
    comparisons: pd.DataFrame = field(default_factory=lambda: empty_comparisons(), compare=False)
    """Every pair of groups compared, per family, variant, rank and per-group metric: the
    difference, its bootstrap interval, standard error and p-values
    (:data:`fairaudit.verdicts.COMPARISON_COLUMNS`; :func:`fairaudit.verdicts.pairwise_comparisons`).
    The verdicts are decided from it (:mod:`fairaudit.verdicts`); in the JSON too."""

    def metric(self, metric: str, method: str | None = None) -> pd.DataFrame:
        """Rows of one metric (optionally one method)."""
        rows = self.records[self.records.metric == metric]
        return rows if method is None else rows[rows.method == method]

    def with_reference(self, reference: str | None, method: str | None = None) -> AuditResult:
        """This result judged against another reference group (a group's label or the value part of
        one; ``None``: the best-served group large enough to judge) — for every family, or for
        ``method`` only. Nothing is refitted: :attr:`comparisons` holds every pair, and the
        findings, the reports and the JSON's configuration all read the new reference. A group
        that is unknown or too small to judge is refused by the findings (``ParameterError``)."""

        def judged(run: dict) -> dict:
            return {**run, "reference": reference} if method is None or method in run.get("methods", ()) else run

        config = {**self.config, "runs": [judged(run) for run in self.config["runs"]]} if "runs" in self.config else judged(self.config)
        return replace(self, config=config)

    @classmethod
    def from_dict(cls, payload: dict) -> AuditResult:
        records = pd.DataFrame(payload["records"], columns=RECORD_COLUMNS)
        for column in ("value", "ci_low", "ci_high"):
            records[column] = pd.to_numeric(records[column]).astype(float)
        return cls(
            records=records,
            config=payload.get("config", {}),
            data=payload.get("data", {}),
            skipped=payload.get("skipped", []),
            warnings=payload.get("warnings", []),
            details=payload.get("details", {}),
            created=payload.get("created", ""),
            seconds=payload.get("seconds", 0.0),
            expected_seconds=payload.get("expected_seconds"),
            fairaudit_version=payload.get("fairaudit_version", ""),
            uncertainty=payload.get("uncertainty", {}),
            comparisons=comparisons_frame(payload.get("comparisons") or []),
        )


def empty_comparisons() -> pd.DataFrame:
    """A comparisons table without rows (:attr:`AuditResult.comparisons`)."""
    return comparisons_frame([])


def comparisons_frame(rows) -> pd.DataFrame:
    """:data:`fairaudit.verdicts.COMPARISON_COLUMNS` rows (tuples or dicts, e.g. from JSON, where
    ``None`` stands for NaN) as the comparisons table."""
    frame = pd.DataFrame(list(rows), columns=verdicts.COMPARISON_COLUMNS)
    for column in frame.columns:
        if column not in verdicts.COMPARISON_TEXT_COLUMNS:
            frame[column] = pd.to_numeric(frame[column]).astype(int if column in verdicts.COMPARISON_COUNT_COLUMNS else float)
    return frame


def combine_results(results: Sequence[AuditResult]) -> AuditResult:
    """One result from several audits of the same data (e.g. one per family, run separately).

    Records, skips and per-fit details are concatenated, warnings without repeats; ``config``
    lists each run's configuration under ``runs``. All results must describe the same data
    (same sha256 and rows).
    """
    results = list(results)
    if not results:
        raise ParameterError("nothing to combine: run at least one method first.")
    first = results[0]
    for other in results[1:]:
        if (other.data.get("sha256"), other.data.get("rows")) != (first.data.get("sha256"), first.data.get("rows")):
            raise ParameterError("these audits describe different data and cannot go into one report.")
    if len(results) == 1:
        return first
    return AuditResult(
        records=pd.concat([r.records for r in results], ignore_index=True),
        config={"runs": [r.config for r in results]},
        data=first.data,
        skipped=[s for r in results for s in r.skipped],
        warnings=list(dict.fromkeys(w for r in results for w in r.warnings)),
        details={method: found for r in results for method, found in r.details.items()},
        created=max(r.created for r in results),
        seconds=round(sum(r.seconds for r in results), 3),
        expected_seconds=(None if any(r.expected_seconds is None for r in results)
                          else round(sum(r.expected_seconds for r in results), 3)),
        fairaudit_version=first.fairaudit_version,
        uncertainty={method: found for r in results for method, found in r.uncertainty.items()},
        models={key: model for r in results for key, model in r.models.items()},
        comparisons=pd.concat([r.comparisons for r in results], ignore_index=True),
    )


SWEEP_SEPARATOR = "@"
"""A variant ``"name@i"`` is point ``i`` of a parameter sweep of ``name`` (the CP family's λ
frontier); its parameter value is the record metric ``lam``."""


ERASED_SUFFIX = "+leace"
"""``"vanilla+leace"`` is the variant ``vanilla``'s representation after LEACE
(``AuditConfig(leace=True)``)."""


def erased_variant(variant: str) -> str:
    """The name of ``variant``'s representation after LEACE."""
    return variant + ERASED_SUFFIX


def erased_base(variant: str) -> str | None:
    """``"vanilla+leace"`` → ``"vanilla"``; ``None`` for a variant that is not an erasure."""
    return variant.removesuffix(ERASED_SUFFIX) if variant.endswith(ERASED_SUFFIX) else None


def split_variant(variant: str) -> tuple[str, int | None]:
    """``"khsic@3"`` → ``("khsic", 3)``; ``"khsic"`` → ``("khsic", None)``."""
    base, _, index = variant.partition(SWEEP_SEPARATOR)
    return base, (int(index) if index else None)


def is_sweep_variant(variant: str) -> bool:
    return SWEEP_SEPARATOR in variant


def whole_metrics(records: pd.DataFrame, method: str, rank: int | None = None, values: str = "value") -> pd.DataFrame:
    """``method``'s whole-data metrics (no per-group rows) as a table: one row per variant and
    rank (index ``(variant, rank)``), or per variant at ``rank``; one column per metric.
    ``values`` picks the column shown (``"value"``, ``"ci_low"`` or ``"ci_high"``)."""
    rows = records[(records.method == method) & (records.group == "")]
    if rank is None:
        return rows.pivot_table(index=["variant", "rank"], columns="metric", values=values, sort=False, dropna=False)
    rows = rows[rows["rank"] == rank]
    return rows.pivot_table(index="variant", columns="metric", values=values, sort=False, dropna=False)


def merged_options(config: AuditConfig, method: str, defaults: dict, what: str) -> dict:
    """``config.options[method]`` over ``defaults``: an unknown key is refused (naming ``what``'s
    known options), a ``None`` value means the default."""
    given = dict(config.options.get(method, {}) or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown {what} option(s) {', '.join(map(repr, unknown))}; known: {', '.join(defaults)}.")
    return {**defaults, **{key: value for key, value in given.items() if value is not None}}


def family_run(config: dict, method: str) -> dict:
    """The configuration that audited ``method``: ``config`` itself (a single run's
    ``AuditConfig.to_dict()``), or the run of a :func:`combine_results` config's ``runs`` that
    named ``method`` (``config`` when none did)."""
    return next((run for run in config.get("runs", [config]) if method in run.get("methods", ())), config)


def family_options(config: dict, method: str) -> dict:
    """The options ``config`` gave ``method`` (:func:`family_run`'s)."""
    return family_run(config, method).get("options", {}).get(method, {})


# ============================================================================ collecting records
ProgressCallback = Callable[[dict], None]

Value = float | tuple[float, float, float]
"""A measurement: a number, or ``(value, ci_low, ci_high)`` when it comes with its own interval
(the leakage test's cross-validation interval)."""


class Recorder:
    """Where measurements go: :meth:`add` one value (whole-data when ``group`` is empty)."""

    def add(self, variant: str, rank: int, metric: str, value: Value, group: str = "") -> None:  # pragma: no cover
        raise NotImplementedError

    def add_all(self, variant: str, rank: int, values: dict[str, Value]) -> None:
        """Several whole-data metrics of one fit (``{metric: value}``)."""
        for metric, value in values.items():
            self.add(variant, rank, metric, value)

    def add_groups(self, variant: str, rank: int, metric: str, labels: Iterable[str], values: Iterable[float]) -> None:
        for label, value in zip(labels, values, strict=True):
            self.add(variant, rank, metric, value, group=label)

    def prefixed(self, prefix: str) -> Recorder:
        """This recorder with ``prefix`` put before every metric name (``heldout_``)."""
        return _Prefixed(self, prefix) if prefix else self


class _Prefixed(Recorder):
    def __init__(self, inner: Recorder, prefix: str):
        self.inner, self.prefix = inner, prefix

    def add(self, variant, rank, metric, value, group=""):
        self.inner.add(variant, rank, self.prefix + metric, value, group)


class _Values(Recorder):
    """A dict of ``(variant, rank, group, metric) → value`` (a value with its own interval counts
    by its value): what a bootstrap replicate returns and what the disparity records read."""

    def __init__(self):
        self.values: dict = {}

    def add(self, variant, rank, metric, value, group=""):
        self.values[(variant, int(rank), group, metric)] = value[0] if isinstance(value, tuple) else value


class RecordSink(Recorder):
    """Where a family writes its measurements, skips, warnings and progress."""

    def __init__(self, method: str, progress: ProgressCallback | None = None, keep_models: bool = False):
        self.method = method
        self.keep_models = keep_models
        self.models: dict[tuple[str, str, int], object] = {}
        self.rows: list[tuple] = []
        self.comparisons: list[tuple] = []
        """The family's pairwise comparisons (:func:`fairaudit.verdicts.pairwise_comparisons`),
        written by the driver: without intervals after the fits, with them after the replicates."""
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self.details: dict[str, dict[str, dict]] = {}
        self._progress = progress
        self._expected = 0
        self._done = 0
        self.preview: Callable[..., AuditResult] | None = None
        """Set by :func:`run_audit` when someone follows the run: ``preview(summary, rows=None,
        compared=None)`` builds the result of this family's records so far (or of ``rows`` and
        ``compared``: the same records and comparisons with provisional intervals) for :meth:`estimates_ready` and the replicates' progress."""

    def add(self, variant: str, rank: int, metric: str, value: Value, group: str = "") -> None:
        low = high = float("nan")
        if isinstance(value, tuple):
            value, low, high = value
        self.rows.append((self.method, variant, int(rank), group, metric, float(value), float(low), float(high)))

    def keep(self, variant: str, rank: int, estimator) -> None:
        """Keep a fitted estimator under ``(method, variant, rank)`` when the audit keeps models."""
        if self.keep_models:
            self.models[(self.method, variant, int(rank))] = estimator

    def skip(self, variant: str, reason: str, rank: int | None = None) -> None:
        self.skipped.append({"method": self.method, "variant": variant, "rank": rank, "reason": reason})

    def detail(self, variant: str, rank: int, key: str, value) -> None:
        """Attach a non-numeric fact (a string, or a list of strings/numbers) to one fit.

        Stored as ``details[variant][str(rank)][key]`` and carried into
        :attr:`AuditResult.details`, the JSON and the HTML report.
        """
        self.details.setdefault(variant, {}).setdefault(str(int(rank)), {})[key] = value

    @contextlib.contextmanager
    def collect_warnings(self, variant: str, forward: type[Warning] | tuple = UserWarning):
        """Record the warnings raised in the block; on leaving it pass those of category
        ``forward`` to the audit (as ``method/variant: message``), except iteration caps
        (``ConvergenceWarning``), which land in the yielded list for the family to summarise.
        ``forward=()`` passes nothing on."""
        caps: list[warnings.WarningMessage] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caps
        caps.extend(w for w in caught if issubclass(w.category, ConvergenceWarning))
        others = [w for w in caught if not issubclass(w.category, ConvergenceWarning)]
        self.capture_warnings(variant, [w for w in others if issubclass(w.category, forward)])

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def expect(self, total: int) -> None:
        """How many fits the family will report through :meth:`progress`."""
        self._expected = total

    def progress(self, variant: str, rank: int, seconds: float) -> None:
        """One more fit done: tell the progress callback (done so far out of the expected total)."""
        self._done += 1
        total = max(self._expected, self._done)
        self.event({"variant": variant, "rank": rank, "done": self._done, "total": total, "seconds": seconds, "stage": "fit"})

    def event(self, event: dict) -> None:
        """Pass a progress event (contract 4: ``method, variant, rank, done, total, seconds,
        stage``) to the callback. Whatever the callback raises (:class:`AuditCancelled`)
        propagates."""
        if self._progress is not None:
            self._progress({"method": self.method, **event})

    def estimates_ready(self, summary: dict, seconds: float) -> None:
        """The family's point estimates are all measured and its ``summary["replicates"]``
        bootstrap replicates come next: pass a ``stage="estimates"`` event whose ``result`` is the
        :class:`AuditResult` of the point estimates (no intervals yet; its summary says
        ``intervals_pending``), so that a viewer can show the numbers while the intervals are
        computed. Nothing is built when nobody follows the run."""
        if self._progress is None or self.preview is None:
            return
        result = self.preview({**summary, "intervals_pending": True})
        self.event({"variant": "", "rank": None, "done": 0, "total": summary["replicates"], "seconds": seconds, "stage": "estimates",
                    "result": result})

    def capture_warnings(self, variant: str, caught: list[warnings.WarningMessage]) -> None:
        for item in caught:
            self.warn(f"{self.method}/{variant}: {item.message}")


# ============================================================================ the family protocol
NOT_BOOTSTRAPPED = {
    "mmd2_rbf": "the RBF MMD² needs all rows of every group (an O(m²) kernel) and is not recomputed in "
    "bootstrap replicates",
    "unfairness": "leakage comes with the cross-validation interval of the leakage test (repeated "
    "stratified k-fold), not from bootstrap replicates",
}
"""Metrics a family does not recompute in bootstrap replicates, with the reason (stated in the
warnings). Leakage metrics keep their own cross-validation interval."""

FACT_METRICS = ("seconds", "n_iter", "epochs", "estimate_seconds", "effective_rank", "dual_gap", "lam")
"""Facts of a fit, not estimates of a population quantity: no interval."""

LEAKAGE_METRICS = ("unfairness", "unfairness_balanced", "balanced_accuracy", "chance_balanced_accuracy", "leakage_pvalue")


@dataclass
class Fits:
    """What :meth:`FamilyAudit.fit` returns: the fitted models of every ``(variant, rank)``, their
    fit times, the rows they were fitted on (indices into the family's rows, repeats allowed),
    and whatever the family computed once for all of them (``shared``: e.g. the PCA group
    moments or the NMF yardsticks ``E_ℓ``)."""

    rows: np.ndarray
    models: dict[tuple[str, int], object] = field(default_factory=dict)
    seconds: dict[tuple[str, int], float] = field(default_factory=dict)
    shared: dict = field(default_factory=dict)


class FamilyAudit:
    """One method family in an audit. A subclass (in the family's ``audit.py``) implements:

    * ``__init__(data, config, sink)`` — check options, prepare the family's input, choose ranks
      and variants (skips and notes to ``sink``); set :attr:`codes` (the group of every row of
      the family's input: data rows, NMF rows after dropped zero rows, or CP entities) and
      :attr:`labels`;
    * :meth:`fit` — fit every chosen variant at every rank on ``rows`` (indices into the
      family's rows; a bootstrap sample repeats rows), warm-started from an earlier fit when
      given one;
    * :meth:`measure` — the family's statistics of fitted models on ``rows``: the fit's own rows
      (``heldout=False``) or new rows (``heldout=True``: PCA projects them with the fitted map,
      NMF finds their ``W`` by NNLS against the fitted ``H``, feature selection reads the selected
      columns, CP solves their entity factors by least squares);
    * :meth:`facts` — what a fit did rather than measured (seconds, iterations, λ);
    * :meth:`models_of` — the fitted estimators to keep (``AuditConfig(keep_models=True)``).

    :attr:`disparities` name the per-group metrics whose worst-to-best gap and ratio the driver
    adds; :attr:`not_bootstrapped` the metrics replicates leave out, with the reason. A family
    whose fits start at random also implements :meth:`restart` (and sets :attr:`restarts`).

    A family is shipped to worker processes for its bootstrap replicates
    (:func:`run_replicate`): it must pickle, and its :meth:`fit` / :meth:`measure` of a replicate
    must depend on their arguments alone (no state carried from one replicate to the next).
    ``inner_threads`` (``None``: the family's own choice) caps the threads a replicate's work may
    use: 1 when the replicates themselves run side by side.
    """

    method: str = ""
    disparities: tuple[uncertainty.Disparity, ...] = ()
    not_bootstrapped: Mapping[str, str] = NOT_BOOTSTRAPPED
    replicate_variants_skipped: Mapping[str, str] = MappingProxyType({})
    """Variants whose refits are too slow for replicates → the reason (their records get no
    interval)."""
    replicate_ranks_skipped: Mapping[int, str] = MappingProxyType({})
    """Ranks left out of replicates → the reason (e.g. NMF at full rank, where every group's own
    NMF is exact and the fits only crawl towards it)."""
    parities: tuple[verdicts.DisparityMetric, ...] = ()
    """Per-group, higher-is-better metrics the verdicts compare with a parity value (feature
    selection's ``cluster_share``), beside :attr:`disparities`' pairs of groups."""
    pair_nulls: dict
    """Permutation nulls of pairs of groups (:class:`fairaudit.verdicts.PermutationNull` by
    ``(variant, rank, metric)`` and label-index pair), set by a family's :meth:`measure` where it
    tests differences against random regroupings (PCA); read by the driver's comparisons."""

    codes: np.ndarray
    labels: tuple[str, ...]
    inner_threads: int | None = None
    executor = None
    """Where independent parts of the family's own fit may run side by side (an executor of
    :mod:`fairaudit.executors`), set by the driver when the replicates will run there (its workers
    are started anyway); ``None``: here, one after the other. The NMF family fits its ranks so."""

    erases_itself: bool = False
    """Whether the family fits the ``+leace`` twins of ``AuditConfig(leace=True)`` as variants of
    its own (the PCA family, exactly from its group moments); otherwise the driver erases the
    representations :meth:`representations_of` hands it (:func:`erase_representations`)."""
    leak_config: AuditConfig | None = None
    """The configuration of the family's leakage test when it is not :attr:`config` (the CP family
    uses a classifier of its own)."""

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink):
        self.data, self.config, self.sink = data, config, sink
        self.pair_nulls = {}

    @property
    def active(self) -> bool:
        """Whether anything is left to fit (every variant may have been skipped)."""
        return True

    @property
    def group_rows(self) -> np.ndarray:
        """Each group's rows in the family's input (in :attr:`labels`' order)."""
        return np.bincount(np.asarray(self.codes), minlength=len(self.labels))

    def comparison_metrics(self) -> list[verdicts.DisparityMetric]:
        """What the verdicts compare: each :attr:`disparities` metric between groups, each
        :attr:`parities` metric with its parity."""
        return [verdicts.DisparityMetric(d.metric, d.error) for d in self.disparities] + list(self.parities)

    def for_jobs(self) -> FamilyAudit:
        """A copy of the family to ship to jobs (:mod:`fairaudit.executors`): a sink of its own that
        no one follows (a job's warnings come back with its values), no executor, and no cluster
        client (a cluster's client does not travel to its own workers)."""
        family = copy.copy(self)
        family.sink = RecordSink(self.method)
        family.executor = None
        family.config = replace(self.config, scheduler=None)
        return family

    def chosen_variants(self, names, too_slow=None) -> list[str]:
        """The variants among ``names`` the configuration wants, in that order. One that
        ``too_slow(name)`` gives a reason for is skipped with the reason (in the sink) when it
        comes with the default choice (``variants="all"``); asked for by name, it runs."""
        chosen = []
        for name in names:
            if not self.config.wants(self.method, name):
                continue
            reason = too_slow(name) if too_slow else None
            if reason and self.config.variants == "all":
                self.sink.skip(name, reason)
                continue
            chosen.append(name)
        return chosen

    def degenerate_ranks(self) -> dict[int, str]:
        """Ranks at which the family's disparities mean nothing (a full-rank or exact fit), with
        the reason: the findings never pick them as "the largest gap"."""
        return dict(self.replicate_ranks_skipped)

    def fit(self, rows: np.ndarray, *, warm: Fits | None = None, replicate: bool = False, seed=None) -> Fits:  # pragma: no cover
        raise NotImplementedError

    def measure(self, fits: Fits, rows: np.ndarray, out: Recorder, *, heldout: bool = False, replicate: bool = False) -> None:  # pragma: no cover
        raise NotImplementedError

    def search_subgroups(self, fits: Fits) -> list[tuple]:
        """The subgroup search of ``AuditConfig(subgroups=True)`` on the fits of the training rows:
        comparison rows (:mod:`fairaudit.subgroups`). A family without one says so."""
        self.sink.warn(f"{self.method}: the subgroup search ({term('subgroups')}) covers the PCA family only.")
        return []

    def resample(self, rng: np.random.Generator, rows: np.ndarray, index: int, count: int):
        """The rows of bootstrap replicate ``index`` of ``count``: a stratified resample of ``rows``
        (:func:`fairaudit.uncertainty.stratified_resample`). A family whose engine resamples
        otherwise returns what its :meth:`fit` takes instead (the PCA family on the dask engine:
        a Poisson-bootstrap draw)."""
        return uncertainty.stratified_resample(self.codes, rng, rows)

    replicates_here: bool = False
    """The replicates must run in this process (the dask engine's PCA family: one pass over the
    partitions gives every replicate's moments, kept with the data)."""

    def prepare_replicates(self, count: int) -> None:
        """Whatever ``count`` replicates need once before the first (the dask engine's pass over
        the data), with its progress through the sink; nothing by default."""

    restarts: int = 0
    """Refits of the audit's own rows from other random starts (:meth:`restart`), run after the
    replicates, whose spread is set beside every interval (:func:`start_spread`); 0 for a family
    whose fits do not depend on a random start."""
    restart_reason: str = ""
    """What a restart varies (said in the uncertainty summary)."""

    def restart(self, fits: Fits, rows: np.ndarray, seed: np.random.SeedSequence) -> Fits | None:
        """The audit's procedure on ``rows`` from the random start ``seed`` gives (not from
        ``fits``), for :func:`start_spread`; ``None`` when nothing in it is random."""
        return None

    def restart_seconds(self, fits: Fits) -> float:
        """The seconds one :meth:`restart` should take: the audit's own fits took as long, measured
        now (a family that restarts less than its whole fit says so)."""
        return float(sum(fits.seconds.values()))

    def facts(self, fits: Fits, out: Recorder) -> None:
        for (variant, rank), seconds in fits.seconds.items():
            out.add(variant, rank, "seconds", seconds)

    def models_of(self, fits: Fits) -> dict[tuple[str, int], object]:
        return dict(fits.models)

    def representations_of(self, fits: Fits, rows: np.ndarray, *, heldout: bool) -> dict[tuple[str, int], np.ndarray] | None:
        """Each fit's representation of ``rows`` (what its leakage test reads: one row per row of
        ``rows``), for the LEACE post-step (:func:`erase_representations`); ``None`` when the family
        erases itself or has no representation to erase. Fits that share a representation may share
        the array (it is then erased and tested once)."""
        return None

    def representation(self, Z: np.ndarray, codes: np.ndarray, *, replicate: bool, config: AuditConfig | None = None) -> dict[str, Value]:
        """The shared representation metrics of ``Z`` (see :func:`representation_metrics`); in a
        replicate only the cheap group-mean MMD²."""
        return self.representations([Z], codes, replicate=replicate, config=config, threads=1)[0]

    def representations(
        self, Zs: Sequence[np.ndarray], codes: np.ndarray, *, replicate: bool, lineages: Sequence | None = None,
        config: AuditConfig | None = None, threads: int | None = None, alongside: Sequence[Callable[[], None]] = (),
    ) -> list[dict[str, Value]]:
        """:meth:`representation` of many fits at once (:func:`representations_metrics`: nested
        ones of a lineage in one leakage pass, on worker threads, with ``alongside``'s work)."""
        if replicate:
            for call in alongside:
                call()
            return [{"mmd2": metrics.mmd2(Z, codes)} for Z in Zs]
        threads = REPRESENTATION_THREADS if threads is None else threads
        judged = verdicts.leakage_rows(codes, self.group_rows, self.config.min_judged_rows)
        return representations_metrics(Zs, codes, config or self.config, lineages=lineages, threads=threads, alongside=alongside,
                                       leakage_rows=judged)


def erase_representations(family: FamilyAudit, fits: Fits, rows: np.ndarray, out: Recorder, *, heldout: bool = False,
                          replicate: bool = False) -> None:
    """The LEACE post-step of ``AuditConfig(leace=True)`` for a family that does not erase itself:
    each fit's representation of ``rows`` (:meth:`FamilyAudit.representations_of`) after LEACE
    (:class:`fairaudit.erasure.LeaceEraser`), recorded as the variant ``<name>+leace``: the shared
    representation metrics (leakage, MMD², RBF MMD²) and ``leace_distortion``, the share of the
    representation's variance the erasure changed (``E‖r(Z) − Z‖² / E‖Z − E Z‖²``: the quantity
    LEACE minimises, Belrose et al. 2023, Theorem 4.2).

    The metrics read the erased rows in an orthonormal basis of the subspace they lie in
    (:meth:`fairaudit.erasure.Eraser.output_basis`: the same distances, without the ``k − 1``
    directions LEACE emptied, in which QDA's covariance would be singular and its answer rounding
    noise). On the fit's own rows the eraser is fitted on them (kept in ``fits.shared["erasers"]``): their
    group means agree exactly afterwards, as a fair variant's own training rows are the rows it
    was fitted to. On held-out rows the training rows' eraser is applied, which is where erasure is
    really tested. The points of a λ sweep get no twin."""
    if not family.config.leace or family.erases_itself:
        return
    found = family.representations_of(fits, rows, heldout=heldout)
    if not found:
        return
    from .erasure import LeaceEraser

    erasers = fits.shared.setdefault("erasers", {})
    codes = family.codes[rows]
    erased: dict[int, tuple[np.ndarray, float]] = {}  # by the representation's identity: shared ones once
    fitted: dict[int, LeaceEraser] = {}
    keys = [key for key in found if not is_sweep_variant(key[0])]
    for key in keys:
        Z = found[key]
        if not heldout:
            if id(Z) not in fitted:
                fitted[id(Z)] = LeaceEraser().fit(Z, sensitive_features=codes)
            erasers[key] = fitted[id(Z)]
        if id(Z) in erased:
            continue
        eraser = erasers[key].eraser_
        after = eraser.apply(Z)
        spread = float(np.sum((Z - Z.mean(axis=0)) ** 2))
        measured = (after - eraser.mean) @ eraser.output_basis()  # the erased rows, without the emptied directions
        erased[id(Z)] = (measured, float(np.sum((after - Z) ** 2)) / spread if spread > 0 else 0.0)
    order = list(erased)
    metrics_of = family.representations(
        [erased[i][0] for i in order], codes, replicate=replicate, config=family.leak_config or family.config,
        lineages=[next(key[0] for key in keys if id(found[key]) == i) for i in order],
    )
    values = dict(zip(order, metrics_of, strict=True))
    for variant, rank in keys:
        identity = id(found[(variant, rank)])
        if erased[identity][0].shape[1] == 0:
            family.sink.warn(emptied_note(family.method, erased_variant(variant), rank, len(family.labels)))
        out.add_all(erased_variant(variant), rank, {**values[identity], "leace_distortion": erased[identity][1]})


def emptied_note(method: str, variant: str, rank: int, groups: int) -> str:
    """The note for a representation LEACE left without a column (rank ≤ ``groups − 1``)."""
    return (
        f"{method}/{variant}: at rank {rank} LEACE erases every direction ({groups} groups: up to {groups - 1} of them), so "
        "nothing is left to predict the group from; its leakage and RBF MMD² are not measured there."
    )


def _disparity_records(records: dict, family: FamilyAudit, out: Recorder, pairs: dict, prefix: str) -> None:
    """Add the worst group's value, the gap, the ratio (and the error ratio) of each declared
    per-group metric.

    ``records`` maps ``(variant, rank, group, metric)`` to a value; ``pairs`` holds the point
    estimate's ``(worst, best)`` per ``(variant, rank, metric)`` (filled when empty: the point
    estimate; read in replicates)."""

    def per_group(metric: str) -> dict[tuple[str, int], np.ndarray]:
        found: dict[tuple[str, int], np.ndarray] = {}
        for (variant, rank, group, name), value in records.items():
            if name == metric and group:
                found.setdefault((variant, rank), np.full(len(family.labels), np.nan))[family.labels.index(group)] = value
        return found

    for disparity in family.disparities:
        metric = prefix + disparity.metric
        errors = per_group(prefix + disparity.error) if disparity.error else {}
        for (variant, rank), values in per_group(metric).items():
            if np.isnan(values).all():
                continue
            key = (variant, rank, metric)
            pairs.setdefault(key, add_disparity(out, variant, rank, disparity, values, errors.get((variant, rank)), prefix, pairs.get(key)))


def add_disparity(
    out: Recorder, variant: str, rank: int, disparity: uncertainty.Disparity, values, errors=None, prefix: str = "", pair=None
) -> tuple[int, int]:
    """Record the worst group's value, the gap, the ratio (and the error ratio, given the groups'
    ``errors``) of one fit's per-group ``values`` of ``disparity.metric``; ``pair`` fixes the
    ``(worst, best)`` groups (a replicate follows the point estimate's). Returns the pair.

    The driver adds these for every family; a representation audited outside it (``yours``)
    calls it directly, so that its records and findings read like any variant's."""
    found = uncertainty.disparity(values, pair, errors)
    _, largest, gap, ratio = disparity.names(prefix)
    out.add(variant, rank, largest, found["largest"])
    out.add(variant, rank, gap, found["gap"])
    out.add(variant, rank, ratio, found["ratio"])
    if "error_ratio" in found:
        out.add(variant, rank, prefix + disparity.error_ratio, found["error_ratio"])
    return found["worst"], found["best"]


class _Collector(_Values):
    """:class:`_Values` that also passes every value on to ``inner`` (the family's sink)."""

    def __init__(self, inner: Recorder):
        super().__init__()
        self.inner = inner

    def add(self, variant, rank, metric, value, group=""):
        super().add(variant, rank, metric, value, group)
        self.inner.add(variant, rank, metric, value, group)


@dataclass
class FamilyEstimates:
    """A family after its first stage (:func:`estimate_family`): fitted and measured, its point
    estimates in its sink; what its intervals (:func:`finish_family`) need. After them,
    ``replicates`` holds every replicate's value of every record key (the ones the intervals came
    from), for whatever is computed from them afterwards."""

    family: FamilyAudit
    summary: dict
    fits: Fits | None = None
    train: np.ndarray | None = None
    test: np.ndarray | None = None
    pairs: dict = field(default_factory=dict)
    points: dict = field(default_factory=dict)
    """The point estimates by ``(variant, rank, group, metric)`` (what the comparisons read)."""
    replicates: uncertainty.Replicates | None = None
    subgroups: list = field(default_factory=list)
    """The subgroup search's comparison rows (``AuditConfig(subgroups=True)``), computed once."""

    @property
    def intervals_pending(self) -> bool:
        """Whether :func:`finish_family` has bootstrap replicates to run."""
        return bool(self.summary.get("replicates")) and self.replicates is None


def run_family(family: FamilyAudit, executor=None) -> dict:
    """Fit, measure and bootstrap one family (see the module docstring); records go to the
    family's sink. Returns the family's uncertainty summary for :attr:`AuditResult.uncertainty`."""
    return finish_family(estimate_family(family), executor)


def estimate_family(family: FamilyAudit) -> FamilyEstimates:
    """The first stage of :func:`run_family`: fit (on the training rows with a held-out split),
    measure, record the disparities and the facts of the fits, and decide the replicates; then
    hand the point estimates over (:meth:`RecordSink.estimates_ready`) when intervals follow."""
    begun = time.perf_counter()
    config, sink = family.config, family.sink
    summary: dict = {"confidence": config.confidence, "holdout": config.holdout or 0}
    summary["degenerate_ranks"] = {str(rank): reason for rank, reason in family.degenerate_ranks().items()}
    summary["group_rows"] = dict(zip(family.labels, map(int, family.group_rows), strict=True)) if family.active else {}
    if not family.active:
        summary.update(replicates=0, why="nothing was fitted")
        return FamilyEstimates(family, summary)
    everything = np.arange(len(family.codes))
    train, test = everything, None
    if config.holdout:
        train, test = uncertainty.stratified_split(family.codes, float(config.holdout), config.random_state)
        summary["rows"] = {"train": len(train), "heldout": len(test)}
    fits = family.fit(train)
    pairs: dict = {}
    collector = _Collector(sink)
    family.measure(fits, train, collector)
    erase_representations(family, fits, train, collector)
    if test is not None:
        family.measure(fits, test, collector.prefixed(HELDOUT_PREFIX), heldout=True)
        erase_representations(family, fits, test, collector.prefixed(HELDOUT_PREFIX), heldout=True)
    _disparity_records(collector.values, family, sink, pairs, "")
    if test is not None:
        _disparity_records(collector.values, family, sink, pairs, HELDOUT_PREFIX)
    family.facts(fits, sink)
    for (variant, rank), model in family.models_of(fits).items() if config.keep_models else ():
        sink.keep(variant, rank, model)
    stage = FamilyEstimates(family, summary, fits, train, test, pairs, collector.values)
    sink.comparisons = family_comparisons(stage)
    replicates, why = uncertainty.resolve_replicates(family.method, config.bootstrap)
    summary.update(replicates=replicates, why=why, estimate_seconds=round(time.perf_counter() - begun, 3))
    if replicates:
        sink.estimates_ready(summary, time.perf_counter() - begun)
    if config.subgroups:  # after the point estimates are handed over: the search draws replicates of its own
        started = time.perf_counter()
        stage.subgroups = family.search_subgroups(fits)
        summary["subgroup_seconds"] = round(time.perf_counter() - started, 3)
        sink.comparisons = family_comparisons(stage)
    return stage


def family_comparisons(stage: FamilyEstimates, replicates: uncertainty.Replicates | None = None) -> list[tuple]:
    """The family's pairwise comparisons (:func:`fairaudit.verdicts.pairwise_comparisons`) from
    its point estimates and, once they are in, its bootstrap ``replicates``."""
    family = stage.family
    return verdicts.pairwise_comparisons(
        family.method, family.labels, family.group_rows, family.comparison_metrics(), stage.points,
        None if replicates is None else replicates.values, family.config.confidence, family.pair_nulls,
        prefixes=("",) if stage.test is None else ("", HELDOUT_PREFIX),
    ) + stage.subgroups


def finish_family(stage: FamilyEstimates, executor=None, *, deadline: float | None = None) -> dict:
    """The second stage of :func:`run_family`: the bootstrap replicates (on ``executor``, else the
    configuration's: :func:`replicate_executor`) and their intervals, written into the sink's
    records. ``deadline`` (a :func:`time.perf_counter` value; else the configuration's
    ``time_budget`` from now) stops the replicates early. Returns the family's uncertainty
    summary."""
    if not stage.intervals_pending:
        return stage.summary
    from .executors import SerialExecutor

    family = stage.family
    budget = family.config.time_budget
    if deadline is None and budget is not None:
        deadline = time.perf_counter() + float(budget)
    own = executor is None and not family.replicates_here
    executor = SerialExecutor() if family.replicates_here else executor or replicate_executor(family.config)
    try:
        intervals = FamilyIntervals(stage, executor)
        family.prepare_replicates(intervals.count)
        intervals.run(intervals.calibration_count())  # the pace, measured on the first few
        intervals.expected_seconds = intervals.spent + (intervals.seconds_left() or 0.0)
        intervals.run(deadline=deadline)
        return intervals.finish()
    finally:
        if own:
            executor.close()


# ============================================================================ replicates as jobs
START_SEED = 0x57A27
"""Mixed into the audit's seed for the restarts' seeds (:meth:`FamilyAudit.restart`), apart from the
replicates' (:func:`fairaudit.uncertainty.replicate_seeds`)."""


@dataclass(frozen=True)
class ReplicateJob:
    """One job of a family's intervals: bootstrap replicate ``index`` of ``count``, or with
    ``restart`` the family's fit of the audit's own rows from another random start (the spread
    between starts, :meth:`FamilyAudit.restart`); ``seed`` is its own (a child of the audit's seed),
    so that the job's values do not depend on which jobs ran before it, or where."""

    index: int
    count: int
    seed: np.random.SeedSequence
    restart: bool = False


@dataclass(frozen=True)
class ReplicateValues:
    """What a job returns: ``values`` by record key ``(variant, rank, group, metric)``, whether a
    solver stopped at its iteration cap, and the warnings the family gave."""

    values: dict
    capped: bool
    warnings: tuple[str, ...] = ()


@dataclass
class ReplicateContext:
    """What every job of one family reads (shipped once to each worker): the family (with a sink
    of its own that no one follows), the audit's fits (the warm starts), the training and held-out
    rows and the point estimate's worst and best groups (:func:`_disparity_records`)."""

    family: FamilyAudit
    fits: Fits
    train: np.ndarray
    test: np.ndarray | None
    pairs: dict


def replicate_context(stage: FamilyEstimates) -> ReplicateContext:
    """The context of ``stage``'s jobs: a copy of the family whose sink nobody follows (a job's
    warnings come back with its values)."""
    return ReplicateContext(stage.family.for_jobs(), stage.fits, stage.train, stage.test, dict(stage.pairs))


def run_replicate(context: ReplicateContext, job: ReplicateJob) -> ReplicateValues:
    """One job (:class:`ReplicateJob`): a function of ``context`` and ``job`` alone — the same values
    in any process, in any order (``tests/test_replicate_jobs.py``).

    A replicate resamples the training rows within each group (:meth:`FamilyAudit.resample`, from
    the job's own seed), refits every variant warm-started from the audit's fits, measures the refits
    (and a resample of the held-out rows) and adds the disparities with the point estimate's worst and
    best groups. A restart refits the audit's own rows from another start and measures them alike."""
    family, sink = context.family, context.family.sink
    measured = _Values()
    rng = np.random.default_rng(job.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if job.restart:
            rows = context.train
            refits = family.restart(context.fits, rows, job.seed)
        else:
            rows = family.resample(rng, context.train, job.index, job.count)
            refits = family.fit(rows, warm=context.fits, replicate=True, seed=job.seed)
        if refits is not None:
            family.measure(refits, rows, measured, replicate=True)
            erase_representations(family, refits, rows, measured, replicate=True)
            if context.test is not None and not job.restart:
                heldout = uncertainty.stratified_resample(family.codes, rng, context.test)
                family.measure(refits, heldout, measured.prefixed(HELDOUT_PREFIX), heldout=True, replicate=True)
                erase_representations(family, refits, heldout, measured.prefixed(HELDOUT_PREFIX), heldout=True, replicate=True)
    values = dict(measured.values)
    out = _Values()
    out.values = values
    pairs = dict(context.pairs)  # a pair the point estimate lacks stays this replicate's own
    _disparity_records(measured.values, family, out, pairs, "")
    if context.test is not None and not job.restart:
        _disparity_records(measured.values, family, out, pairs, HELDOUT_PREFIX)
    said = tuple(sink.warnings)
    sink.warnings.clear()
    return ReplicateValues(values, any(issubclass(w.category, ConvergenceWarning) for w in caught), said)


def replicate_executor(config: AuditConfig):
    """Where a configuration's replicates run (:mod:`fairaudit.executors`): the Dask cluster of
    ``config.scheduler``, else ``config.n_jobs`` local processes (``None``: every usable core; 1:
    this process alone) — inside :func:`~fairaudit.executors.jobs_on_workers`, that many
    worker processes and none of the replicates in this process (a server drawing pages meanwhile)."""
    from .executors import ProcessExecutor, SerialExecutor, dask_executor, jobs_here, usable_cores

    if config.scheduler is not None:
        return dask_executor(config.scheduler)
    jobs = usable_cores() if config.n_jobs is None else int(config.n_jobs)
    return ProcessExecutor(jobs) if jobs > 1 or not jobs_here() else SerialExecutor()


PROVISIONAL_GROWTH = 1.5
"""Provisional intervals are handed over (:class:`FamilyIntervals`) from the first
:data:`fairaudit.uncertainty.MIN_REPLICATES` replicates on, then whenever the replicates behind them
have grown by this factor (and at least :data:`PROVISIONAL_SECONDS` have passed)."""

PROVISIONAL_SECONDS = 1.0

CALIBRATION_SHARE = 10
"""At least one replicate in this many is timed before the announcement (:meth:`FamilyIntervals.calibration_count`)."""


class FamilyIntervals:
    """One family's bootstrap replicates as jobs (:func:`run_replicate`) on an executor, and what
    came back: the replicates' values (by index: the order they finish in does not matter), their
    pace, the time budget's stop, the provisional intervals handed to the progress callback while
    they run, and the restarts (:meth:`FamilyAudit.restart`).

    :meth:`run` starts jobs in order (the first ``n`` with ``count=n``: the pace is measured on
    them before the rest is announced, :class:`AuditRun`); a deadline stops starting them. The
    intervals come from the longest run of replicates ``0 … k−1`` that came back — exactly those
    ``bootstrap=k`` runs, so a stopped audit is reproducible — and :meth:`finish` writes them."""

    def __init__(self, stage: FamilyEstimates, executor):
        self.stage, self.executor = stage, executor
        self.family, self.summary = stage.family, stage.summary
        config = self.family.config
        self.count = int(self.summary["replicates"])
        self.replicates = uncertainty.Replicates(self.count)
        self.done = np.zeros(self.count, dtype=bool)
        seeds = uncertainty.replicate_seeds(config.random_state, self.count)
        self.jobs: list[ReplicateJob] = [ReplicateJob(b, self.count, seed) for b, seed in enumerate(seeds)]
        restarts = self.family.restarts if stage.fits is not None else 0
        entropy = 0 if config.random_state is None else int(config.random_state)
        self.restart_jobs = [
            ReplicateJob(i, restarts, seed, restart=True)
            for i, seed in enumerate(np.random.SeedSequence([entropy, START_SEED]).spawn(restarts))
        ]
        self.restart_values: list[dict] = []
        self.job_seconds: list[float] = []
        self.joined: tuple[float, int] | None = None  # (elapsed, finished) when a worker's first job came back
        self.capped = 0
        self.spent = 0.0
        self.expected_seconds: float | None = None
        self.stopped: str | None = None
        self.context = replicate_context(stage)
        if executor.streams > 1:  # the replicates are the parallelism: one thread each (the same values on any number)
            self.context.family.inner_threads = 1
        self.token = uuid.uuid4().hex
        self._shown = 0
        self._shown_at = -math.inf
        self._begun: float | None = None

    # ------------------------------------------------------------------ the pace
    @property
    def finished(self) -> int:
        """Replicates back so far."""
        return int(self.done.sum())

    @property
    def prefix(self) -> int:
        """The longest run of replicates ``0 … k−1`` back so far."""
        missing = np.flatnonzero(~self.done)
        return int(missing[0]) if missing.size else self.count

    def calibration_count(self) -> int:
        """How many replicates are timed before the time is announced: a batch for every process,
        and at least a tenth of the replicates — the first batch also pays for starting the
        workers and shipping them the family, which a batch per process alone would spread over
        every replicate (the default sample's PCA audit announced 13 s for 8.5 s)."""
        return min(self.count, max(self.executor.streams, -(-self.count // CALIBRATION_SHARE)))

    def job_mean(self) -> float | None:
        """Mean wall seconds of a replicate where it ran (``None`` before the first)."""
        return float(np.mean(self.job_seconds)) if self.job_seconds else None

    def restart_estimate(self) -> float:
        """Seconds the restarts should take: each refits the family's variants from a cold start as
        the audit did, so the audit's own fit times (measured now) predict it."""
        if not self.restart_jobs:
            return 0.0
        fits = self.stage.fits
        return len(self.restart_jobs) * self.family.restart_seconds(fits) / self.executor.streams

    def elapsed(self) -> float:
        """Wall seconds the replicates have run so far (the batch running now included)."""
        return self.spent + (time.perf_counter() - self._begun if self._begun is not None else 0.0)

    def pace(self) -> float | None:
        """Wall seconds per replicate at the throughput measured so far — every process's share of
        the machine as it is now, its contention and its load included (``None`` before a replicate
        came back). With worker processes, the throughput since they joined; before, the mean job
        time shared among the streams."""
        if not self.finished:
            return None
        if self.executor.streams > 1:
            # Until the workers have started (they import NumPy, SciPy and the families: 1–3 s) every
            # job runs here: its mean job time, shared among the streams, is the pace to come; once
            # they have joined, the throughput since then.
            since = None if self.joined is None else (self.elapsed() - self.joined[0], self.finished - self.joined[1])
            if since is None or since[1] < 2 * self.executor.streams:
                return self.job_mean() / self.executor.streams
            return since[0] / since[1]
        return self.elapsed() / self.finished

    def seconds_left(self) -> float | None:
        """The replicates (and restarts) still to run at :meth:`pace` (``None`` before a replicate
        came back)."""
        pace = self.pace()
        if pace is None:
            return None
        if self.stopped is not None:  # nothing more starts
            return 0.0
        return (self.count - self.finished) * pace + self.restart_estimate() * (not self.restart_values)

    # ------------------------------------------------------------------ running
    def run(self, count: int | None = None, *, deadline: float | None = None) -> None:
        """Start the next ``count`` replicates (every one left when ``None``; then the restarts),
        handing each back to :meth:`_accept`; none is started after ``deadline`` (when it would end
        after it, at the measured pace)."""
        begun = time.perf_counter()
        todo = [job for job in self.jobs if not self.done[job.index]]
        todo = todo if count is None else todo[:count]

        def launch() -> bool:
            if deadline is None or time.perf_counter() + (self.pace() or 0.0) <= deadline:
                return True
            self.stopped = self.stopped or "budget"
            return False

        finished = False
        self._begun = begun
        try:
            # One thread per pool: many small refits gain nothing from threads (k-means' OpenMP thrashed a
            # busy machine), and the workers run so — a fresh look at the loaded libraries, so that one
            # loaded after the cached controller was made is held too (the same rounding as a worker's).
            with threadpool_limits(limits=1):
                for done in self.executor.run(run_replicate, self.context, todo, token=self.token, launch=launch):
                    self._accept(done)
                if count is None and self.stopped is None and self.restart_jobs and not self.restart_values:
                    for done in self.executor.run(run_replicate, self.context, self.restart_jobs, token=self.token, launch=launch):
                        self.restart_values.append(done.value.values)
                        self._forward(done.value)
            finished = count is not None and self.stopped is None
        finally:
            self.spent += time.perf_counter() - begun
            self._begun = None
            if not finished:  # the last batch, a stop or an exception: the shipped context is not needed again
                self.executor.release(self.token)

    def _forward(self, found: ReplicateValues) -> None:
        for message in found.warnings:
            self.family.sink.warn(message)

    def _accept(self, done) -> None:
        job, found = done.job, done.value
        for (variant, rank, group, metric), value in found.values.items():
            self.replicates.add(job.index, variant, rank, metric, value, group)
        self.done[job.index] = True
        self.job_seconds.append(done.seconds)
        if self.joined is None and done.where != "here":  # the throughput counts the jobs back after this one
            self.joined = (self.elapsed(), self.finished)
        self.capped += bool(found.capped)
        self._forward(found)
        event = {
            "variant": "", "rank": None, "done": self.finished, "total": self.count, "stage": "bootstrap",
            "seconds": self.elapsed(), "seconds_left": self.seconds_left(), "expected_seconds": self.expected_seconds,
        }
        provisional = self._provisional()
        if provisional is not None:
            event["result"] = provisional
        self.family.sink.event(event)

    def _provisional(self):
        """The family's result with the intervals of the replicates back so far, when someone
        follows the run and they have grown enough since the last (:data:`PROVISIONAL_GROWTH`)."""
        sink, k = self.family.sink, self.prefix
        if sink.preview is None or k >= self.count or k < uncertainty.MIN_REPLICATES:
            return None
        now = time.perf_counter()
        if self._shown and (k < PROVISIONAL_GROWTH * self._shown or now - self._shown_at < PROVISIONAL_SECONDS):
            return None
        self._shown, self._shown_at = k, now
        found = self.replicates.first(k)
        rows = _rows_with_intervals(self.family, found, self.family.config.confidence)
        summary = {**self.summary, "replicates_done": k, "provisional": True}
        return sink.preview(summary, rows, family_comparisons(self.stage, found))

    # ------------------------------------------------------------------ the result
    def finish(self) -> dict:
        """Write the intervals of replicates ``0 … k−1`` into the sink's records and complete the
        family's uncertainty summary (how many replicates, why fewer than asked, their time, the time
        announced, the spread between starts). Returns the summary."""
        family, summary, sink = self.family, self.summary, self.family.sink
        k = self.prefix
        summary["seconds"] = round(self.spent, 3)
        if self.expected_seconds is not None:
            summary["expected_seconds"] = round(self.expected_seconds, 3)
        summary["jobs"] = self.executor.description
        if self.capped:
            sink.warn(
                f"{family.method}: in {self.capped} of {self.finished} bootstrap replicates a solver stopped at its iteration cap "
                "(replicates are warm-started from the audit's own fits, so their caps are those of the audit)."
            )
        found = self.replicates.first(k)
        if k < self.count:
            budget = family.config.time_budget
            stop = f"the time budget ({_term('time_budget', budget)}) stopped them"
            summary.update(replicates_planned=self.count, stopped="time budget")
            if k < uncertainty.MIN_REPLICATES:
                summary.update(replicates=0, why=(
                    f"no intervals: {stop} after {k} of {self.count} bootstrap replicates, and an interval needs at least "
                    f"{uncertainty.MIN_REPLICATES}; allow more time or ask for fewer replicates ({_term('bootstrap')})"
                ))
                self.stage.replicates = found
                return summary  # no record has an interval, and the reason above says why
            summary.update(replicates=k, why=f"{k} of the {self.count} bootstrap replicates asked for: {stop}")
        self.stage.replicates = found
        summary["interval"] = uncertainty.INTERVAL_METHOD
        sink.rows = _rows_with_intervals(family, found, family.config.confidence)
        sink.comparisons = family_comparisons(self.stage, found)
        if self.restart_values:
            summary["start_spread"] = start_spread(sink.rows, self.restart_values, family)
        elif self.restart_jobs:
            summary["start_spread"] = {"restarts": 0, "why": "the time budget left no time for them"}
        summary["not_bootstrapped"] = _missing_interval_reasons(family, sink)
        return summary


def _term(name: str, value=None) -> str:
    return term(name, value)


def _rows_with_intervals(family: FamilyAudit, replicates: uncertainty.Replicates, confidence: float) -> list[tuple]:
    """The sink's rows with the bootstrap intervals of ``replicates`` (rows that carry their own
    interval, the leakage test's, keep it; metrics the family leaves out of replicates get none
    even when a replicate measured them, e.g. the spread over fewer k-means runs). The sink's own
    rows are not changed."""
    sink = family.sink
    points = {(row[1], row[2], row[3], row[4]): row[5] for row in sink.rows}
    intervals = replicates.intervals(confidence, points)
    rows = list(sink.rows)
    for index, row in enumerate(rows):
        method, variant, rank, group, metric, value, low, high = row
        if not (math.isnan(low) and math.isnan(high)) or metric.removeprefix(HELDOUT_PREFIX) in family.not_bootstrapped:
            continue
        found = intervals.get((variant, rank, group, metric))
        if found is not None:
            rows[index] = (method, variant, rank, group, metric, value, *found)
    return rows


def start_spread(rows: Sequence[tuple], restarts: Sequence[dict], family: FamilyAudit) -> dict:
    """How far a record moves between random starts of the fit, against its interval.

    ``restarts`` are the values of the audit's fit refitted from other random starts on the same
    rows (:meth:`FamilyAudit.restart`); a record's *spread* is the range of its value over the
    audit's fit and the restarts. The bootstrap interval measures how the audit's solution moves
    with the sample (replicates start from it); the spread, how far another start lands. Where the
    spread is wider than the interval, the interval understates how much the number depends on the
    start: those records are listed (``larger``: ``variant, rank, group, metric, spread, width``)."""
    larger = []
    checked = 0
    for _, variant, rank, group, metric, value, low, high in rows:
        key = (variant, rank, group, metric)
        others = [found[key] for found in restarts if key in found and math.isfinite(found[key])]
        if not others or not (math.isfinite(low) and math.isfinite(high) and math.isfinite(value)):
            continue
        checked += 1
        spread = max(others + [value]) - min(others + [value])
        width = high - low
        if spread > width and spread > 1e-12 * max(1.0, abs(value)):
            larger.append({"variant": variant, "rank": int(rank), "group": group, "metric": metric,
                           "spread": float(spread), "width": float(width)})
    larger.sort(key=lambda item: -item["spread"] / max(item["width"], 1e-300))
    return {"restarts": len(restarts), "checked": checked, "larger_count": len(larger), "larger": larger, "why": family.restart_reason}


def _missing_interval_reasons(family: FamilyAudit, sink: RecordSink) -> dict[str, str]:
    """Why some records have no interval, by what they are (also written to the warnings)."""
    reasons: dict[str, str] = {}
    for _, variant, rank, _, metric, value, low, _ in sink.rows:
        if not (math.isnan(low) and not math.isnan(value)):
            continue
        base = metric.removeprefix(HELDOUT_PREFIX)
        if variant in family.replicate_variants_skipped:
            base, index = split_variant(variant)
            label = f"the {base} λ sweep (every metric)" if index is not None else f"{variant} (every metric)"
            reasons[label] = family.replicate_variants_skipped[variant]
        elif base in FACT_METRICS:
            reasons[base] = "a fact of the fit (time, iterations, rank used, penalty weight), not an estimate"
        elif base.endswith("_pvalue"):
            reasons[base] = "a p-value: a test's own outcome"
        elif base in family.not_bootstrapped or base in LEAKAGE_METRICS:
            reasons[base] = family.not_bootstrapped.get(base, NOT_BOOTSTRAPPED["unfairness"])
        elif rank in family.replicate_ranks_skipped:
            reasons[f"rank {rank} (every metric)"] = family.replicate_ranks_skipped[rank]
        elif base.endswith("_ratio"):
            reasons[base] = (
                "a ratio whose denominator is 0 or below in some fits (a best-served group at 0, an exact fit), "
                "so no interval there; the gap's interval carries the comparison"
            )
        else:
            reasons.setdefault(base, "fewer than half of the bootstrap replicates gave a finite value")
    for what, reason in reasons.items():
        sink.warn(no_interval_warning(family.method, what, reason))
    return reasons


def no_interval_warning(method: str, what: str, reason: str) -> str:
    """The warning that says why ``what`` of ``method`` has no interval (one wording, so that the
    dashboard can fold these warnings into its table of them)."""
    return f"{method}: no interval for {what}: {reason}."


def representation_metrics(Z: np.ndarray, groups: np.ndarray, config: AuditConfig) -> dict[str, Value]:
    """Whole-data metrics of a representation ``Z`` shared by every family.

    ``mmd2`` (group means), ``mmd2_rbf`` (median-heuristic RBF kernel) and the leakage test
    (:func:`fairaudit.metrics.leakage_test`): ``unfairness`` / ``unfairness_balanced``
    ((balanced) accuracy − 1/k, with the cross-validation interval), ``balanced_accuracy``,
    ``chance_balanced_accuracy`` (the permutation distribution's mean and central interval) and
    ``leakage_pvalue`` — the test among the groups large enough to judge
    (:func:`fairaudit.verdicts.leakage_rows`). Many representations at once:
    :func:`representations_metrics`.
    """
    codes = np.asarray(groups)
    judged = verdicts.leakage_rows(codes, np.bincount(codes), config.min_judged_rows)
    return representations_metrics([Z], groups, config, threads=1, leakage_rows=judged)[0]


REPRESENTATION_THREADS = 2
"""Worker threads for the representation metrics of many fits (:func:`representations_metrics`):
NumPy and BLAS release the GIL, and each test runs one BLAS thread. Measured with 20 leakage tests
of 10,000 rows (widths 1–10) on the two cores, with another process using about one and a half
of them: 1.00 s one after another, 0.70 s on two threads (12 % more CPU time), the same values."""

NESTED_TOLERANCE = 1e-9
"""Relative tolerance under which a representation counts as the leading columns of a wider one
(column signs aside) in :func:`representations_metrics`."""


def representations_metrics(
    representations: Sequence[np.ndarray],
    groups: np.ndarray,
    config: AuditConfig,
    *,
    lineages: Sequence | None = None,
    threads: int = REPRESENTATION_THREADS,
    alongside: Sequence[Callable[[], None]] = (),
    leakage_rows: np.ndarray | None = None,
) -> list[dict[str, Value]]:
    """:func:`representation_metrics` of each representation, computed together.

    Representations of one lineage (``lineages[i]``, e.g. the variant that made them; one lineage
    when None) that are the leading columns of the lineage's widest, up to column signs (vanilla
    PCA's ranks), are tested for leakage in one pass over the widest
    (:func:`fairaudit.metrics.leakage_tests`, with QDA, whose fits do not change when a column
    flips sign: the same rows, folds and permutations as one test per representation, so the same
    values up to rounding). The tests and the RBF MMD² run on ``threads`` worker threads, with the
    calls in ``alongside`` (a family's other work on the same rows, which keeps its own results) first.
    ``leakage_rows`` (a mask) limits the leakage tests to those rows — the groups large enough to
    judge (:func:`fairaudit.verdicts.leakage_rows`); the MMD² use every row."""
    from .parallel import map_threads

    shaped = [np.asarray(Z, dtype=float).reshape(len(groups), -1) for Z in representations]
    tested, tested_groups = shaped, groups
    if leakage_rows is not None:
        tested = [Z[leakage_rows] for Z in shaped]
        tested_groups = np.unique(np.asarray(groups)[leakage_rows], return_inverse=True)[1]
    lineages = [None] * len(shaped) if lineages is None else list(lineages)
    settings = dict(
        classifier=config.leakage_classifier,
        permutations=config.leakage_permutations,
        confidence=config.confidence,
        max_rows=config.leakage_max_rows,
        random_state=config.random_state,
    )
    leakage: list = [None] * len(shaped)
    tasks = []  # (indices, callable giving their leakage estimates), the slowest first
    empty = {i for i, Z in enumerate(shaped) if Z.shape[1] == 0}  # nothing to predict from (LEACE erased every column)
    for i in empty:
        leakage[i] = metrics.LeakageEstimate.missing(len(np.unique(groups)))
    single = set(range(len(shaped))) - empty
    for lineage in dict.fromkeys(lineages):
        members = [i for i, name in enumerate(lineages) if name == lineage and i not in empty]
        if not members:
            continue
        widest = max(members, key=lambda i: tested[i].shape[1])
        nested = [i for i in members if _leading_columns(tested[i], tested[widest])]
        if len(nested) > 1 and config.leakage_classifier == "qda":
            widths = [tested[i].shape[1] for i in nested]
            tasks.append((nested, lambda Z=tested[widest], widths=widths: metrics.leakage_tests(Z, tested_groups, widths, **settings)))
            single -= set(nested)
    for i in sorted(single, key=lambda i: -tested[i].shape[1]):
        tasks.append(([i], lambda Z=tested[i]: [metrics.leakage_test(Z, tested_groups, **settings)]))
    rbf = dict(max_rows_per_group=config.mmd_max_rows_per_group, random_state=config.random_state)
    tasks += [(None, (lambda: float("nan")) if Z.shape[1] == 0 else (lambda Z=Z: metrics.mmd2_rbf(Z, groups, **rbf)))
              for Z in shaped]  # one value per representation, in order
    with metrics.shared_draws():  # every test of these groups draws the same folds and permutations: once
        results = map_threads(lambda task: task[1](), [(None, call) for call in alongside] + tasks, threads)[len(alongside):]
    tests = len(tasks) - len(shaped)
    kernel = results[tests:]
    for (indices, _), estimates in zip(tasks[:tests], results[:tests], strict=True):
        for i, estimate in zip(indices, estimates, strict=True):
            leakage[i] = estimate
    return [
        {"mmd2": metrics.mmd2(Z, groups), "mmd2_rbf": kernel[i], **leakage[i].records()} for i, Z in enumerate(shaped)
    ]


def _leading_columns(Z: np.ndarray, wide: np.ndarray) -> bool:
    """``Z`` is the first columns of ``wide`` up to each column's sign (to :data:`NESTED_TOLERANCE`)."""
    lead = wide[:, : Z.shape[1]]
    if Z.shape[1] == 0 or not np.all(np.isfinite(Z)):
        return False
    signs = np.where(np.sum(Z * lead, axis=0) < 0, -1.0, 1.0)
    scale = max(float(np.abs(lead).max()), np.finfo(float).tiny)
    return bool(np.abs(Z - lead * signs).max() <= NESTED_TOLERANCE * scale)


def _family(method: str) -> type[FamilyAudit]:
    module_name, name = FAMILIES[method].split(":")
    return getattr(importlib.import_module(module_name), name)


def erases_itself(method: str) -> bool:
    """Whether ``method`` fits its ``+leace`` twins as estimators of its own
    (:attr:`FamilyAudit.erases_itself`), which can then be exported as models."""
    return _family(method).erases_itself


def run_audit(data: AuditData, config: AuditConfig | None = None, progress: ProgressCallback | None = None) -> AuditResult:
    """Run every requested family on ``data``; see the module docstring. Every family's point
    estimates come first, then every family's intervals (:class:`AuditRun`).

    Parameters
    ----------
    data : AuditData or PartitionedData
        Validated input (:func:`fairaudit.load`, :func:`fairaudit.prepare` or
        :meth:`AuditData.from_arrays`), or data read partition by partition by the dask engine
        (:func:`fairaudit.engine.read_partitioned`, with ``config.engine="dask"``).
    config : AuditConfig, optional
    progress : callable, optional
        Called after every fit with ``{"method", "variant", "rank", "done", "total", "seconds",
        "stage": "fit"}`` and after every bootstrap replicate with ``stage="bootstrap"``
        (``done``/``total`` counting replicates). Once per family that computes intervals, after
        its fits and before any replicate, with ``stage="estimates"`` and ``result``: the
        :class:`AuditResult` of that family's point estimates (every record, no bootstrap
        interval yet; its ``uncertainty`` summary has ``intervals_pending``), for a viewer to show
        while the replicates run (the dashboard does). On data read partition by partition (the
        dask engine), the PCA family's replicates start with one more pass over the partitions,
        reported as it begins and per partition with ``stage="bootstrap_pass"`` (``done`` from 0
        to ``total`` partitions, ``unit="partitions"``). Raising from it (e.g.
        :class:`AuditCancelled`) stops the run; the exception propagates.
    """
    run = AuditRun(data, config, progress)
    run.estimate()
    return run.finish()


def without_intervals(result: AuditResult, method: str, why: str) -> AuditResult:
    """``result`` (point estimates handed over before ``method``'s intervals, the
    ``stage="estimates"`` event's) as the family's result without intervals: its uncertainty
    summary says no replicates ran, and ``why``."""
    summary = {**result.uncertainty.get(method, {}), "replicates": 0, "why": why}
    summary.pop("intervals_pending", None)
    return replace(result, uncertainty={**result.uncertainty, method: summary})


class AuditRun:
    """:func:`run_audit` in its two stages, for a caller that interleaves several audits (the
    dashboard shows every family's numbers before any family's intervals):

    * :meth:`estimate` — every family's fits and point estimates (``stage="estimates"`` progress
      per family, which carries them);
    * :meth:`finish` — every family's bootstrap replicates, then the :class:`AuditResult`.

    The replicates run on :attr:`executor` (:func:`replicate_executor`), whose worker processes
    start when the run is created, while the families fit. :meth:`finish` first runs as many of
    each family's replicates as the executor computes at once, timing them; from that pace it
    announces the time the whole audit will take (``stage="announce"`` progress, and
    :attr:`AuditResult.expected_seconds`), then runs the rest family by family, each family's
    replicates getting an equal share of what is left of ``config.time_budget``.
    """

    def __init__(self, data: AuditData, config: AuditConfig | None = None, progress: ProgressCallback | None = None):
        self.data = data
        self.config = config or AuditConfig()
        self.config.check_variants()
        self.progress = progress
        self.started = time.perf_counter()
        self.created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.notes: list[str] = []
        sizes = data.group_sizes()
        verdicts.resolve_reference(self.config.reference, sizes, self.config.min_judged_rows)  # a clear error before any fit
        judged = verdicts.judged_groups(sizes, self.config.min_judged_rows)
        small = {group: rows for group, rows in sizes.items() if group not in judged}
        if small:
            listed = ", ".join(f"{group} ({rows:,} {'row' if rows == 1 else 'rows'})" for group, rows in small.items())
            self.notes.append(
                f"too small to judge (fewer than {self.config.min_judged_rows} rows, {term('min_judged_rows')}): {listed}. "
                + ("They take part in no verdict and in no leakage test; the findings say how large a difference their "
                   "size could have shown." if len(judged) >= 2 else
                   "Fewer than two groups are large enough to judge, so no finding carries a verdict.")
            )
        tested = {group: sizes[group] for group in judged} if len(judged) >= 2 else sizes
        smallest = min(tested.items(), key=lambda item: item[1])
        if smallest[1] < metrics.LEAKAGE_MIN_GROUP_ROWS:
            self.notes.append(
                f"leakage metrics (unfairness, unfairness_balanced) not computed: group {smallest[0]!r} has "
                f"{smallest[1]} rows and the cross-validated leakage test needs at least {metrics.LEAKAGE_MIN_GROUP_ROWS} "
                f"per group; use fewer sensitive columns (fewer intersections), or leave the group out with "
                f"{term('min_group_size', metrics.LEAKAGE_MIN_GROUP_ROWS)} and {term('small_groups', 'drop')}."
            )
        self.stages: list[tuple[object, FamilyEstimates]] = []
        self.expected_seconds: float | None = None
        self._plans: dict[int, FamilyIntervals] | None = None
        self.executor = replicate_executor(self.config)
        if any(uncertainty.resolve_replicates(method, self.config.bootstrap)[0] for method in self.config.methods):
            self.executor.warm([FAMILIES[method].split(":")[0] for method in self.config.methods])

    def estimate(self) -> None:
        """Fit and measure every family (the first stage)."""
        from .engine import family_input

        for method in self.config.methods:
            given = family_input(self.data, method, self.config)  # data read by the dask engine: its moments, or its sample
            sink = RecordSink(method, self.progress, keep_models=self.config.keep_models)
            if self.progress is not None:  # the family's records so far, as a result of their own
                sink.preview = lambda summary, rows=None, compared=None, given=given, sink=sink: self._result(
                    [(given, sink)], {sink.method: summary}, models=False, rows=rows, compared=compared)
            family = _family(method)(given.data, given.config, sink)
            if uncertainty.resolve_replicates(method, given.config.bootstrap)[0] and not family.replicates_here:
                family.executor = self.executor  # its workers are started for the replicates anyway
            try:
                self.stages.append((given, estimate_family(family)))
            finally:
                family.executor = None

    @property
    def intervals_pending(self) -> bool:
        """Whether :meth:`finish` has replicates to run (else it only assembles the result)."""
        return any(stage.intervals_pending for _, stage in self.stages)

    def calibrate(self) -> None:
        """The start of the second stage: each family's replicates prepared (the dask engine's pass)
        and the first few run — as many as the executor computes at once — timed, then the
        announcement of the time the audit will take (:meth:`_announce`). :meth:`finish` calls it
        when no one has."""
        from .executors import SerialExecutor

        if self._plans is not None:
            return
        self._plans = {
            id(stage): FamilyIntervals(stage, SerialExecutor() if stage.family.replicates_here else self.executor)
            for _, stage in self.stages if stage.intervals_pending
        }
        for plan in self._plans.values():
            plan.family.prepare_replicates(plan.count)
            plan.run(plan.calibration_count())
        if self._plans:
            self._announce(list(self._plans.values()))

    def finish(self) -> AuditResult:
        """Every family's intervals (the second stage), then the whole result."""
        try:
            self.calibrate()
            self._replicates()
        finally:
            self.executor.close()
        plans = self._plans
        summaries: dict[str, dict] = {}
        for given, stage in self.stages:
            plan = plans.get(id(stage))
            summaries[stage.family.method] = plan.finish() if plan is not None else stage.summary
            if given.no_intervals:
                summaries[stage.family.method]["why"] = given.no_intervals
        result = self._result([(given, stage.family.sink) for given, stage in self.stages], summaries)
        return replace(result, expected_seconds=None if self.expected_seconds is None else round(self.expected_seconds, 3))

    @functools.cached_property
    def fingerprint(self) -> dict:
        """The data's fingerprint, once (every provisional result carries it; data given as arrays
        are hashed to make it)."""
        return self.data.fingerprint()

    def _replicates(self) -> None:
        """Every family's remaining replicates (and restarts), family by family, each given an
        equal share of what is left of ``config.time_budget`` when it starts."""
        budget = self.config.time_budget
        for left, plan in zip(range(len(self._plans), 0, -1), self._plans.values(), strict=True):
            deadline = None
            if budget is not None:
                now = time.perf_counter()
                deadline = now + max(self.started + float(budget) - now, 0.0) / left
            plan.run(deadline=deadline)

    def _announce(self, plans: Sequence[FamilyIntervals]) -> None:
        """The time the audit will take, from the pace of the replicates timed so far: what is
        behind us, and each family's replicates (and restarts) still to run at its pace
        (``stage="announce"`` progress: ``expected_seconds``, ``seconds`` so far, per family its
        replicates, their seconds each where they ran, and its own expectation)."""
        now = time.perf_counter()
        families = {}
        for plan in plans:
            plan.expected_seconds = plan.spent + (plan.seconds_left() or 0.0)
            families[plan.family.method] = {
                "replicates": plan.count, "each": plan.job_mean(), "expected_seconds": plan.expected_seconds, "spent": plan.spent,
            }
        self.expected_seconds = now - self.started + sum(plan.seconds_left() or 0.0 for plan in plans)
        if self.progress is not None:
            self.progress({
                "method": None, "variant": "", "rank": None, "done": 0, "total": 0, "stage": "announce",
                "seconds": now - self.started, "expected_seconds": self.expected_seconds, "families": families,
                "jobs": self.executor.description,
            })

    def _result(self, parts: Sequence[tuple], summaries: dict[str, dict], models: bool = True, rows=None,
                compared=None) -> AuditResult:
        """The :class:`AuditResult` of the families' sinks in ``parts`` (``(given input, sink)``
        pairs) as they stand (``rows``: other rows for them, provisional intervals; ``compared``: other
        comparisons, provisional ones), with their uncertainty ``summaries``."""
        records: list[tuple] = []
        comparisons: list[tuple] = []
        skipped: list[dict] = []
        notes = list(self.notes)
        details: dict[str, dict] = {}
        kept: dict[tuple[str, str, int], object] = {}
        for given, sink in parts:
            notes.extend(note for note in given.notes if note not in notes)
            if models:
                kept.update(sink.models)
            records.extend(sink.rows if rows is None else rows)
            comparisons.extend(sink.comparisons if compared is None else compared)
            skipped.extend(sink.skipped)
            notes.extend(sink.warnings)
            if sink.details:
                details[sink.method] = sink.details
        return AuditResult(
            records=pd.DataFrame(records, columns=RECORD_COLUMNS),
            config=self.config.to_dict(),
            data=copy.deepcopy(self.fingerprint),
            skipped=skipped,
            warnings=notes,
            details=details,
            created=self.created,
            seconds=round(time.perf_counter() - self.started, 3),
            uncertainty=summaries,
            models=kept,
            comparisons=comparisons_frame(comparisons),
        )
