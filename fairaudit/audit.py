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
import datetime as _dt
import importlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from . import metrics, uncertainty, verdicts
from ._version import __version__
from .data import AuditData, worded
from .errors import FairAuditError, ParameterError, RankError
from .vocabulary import render, term

RECORD_COLUMNS = ["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"]
"""The tidy records' columns (contract 2). ``ci_low``/``ci_high``: the interval at
``AuditConfig.confidence`` (NaN where not computed; the reason is in ``AuditResult.warnings``)."""

RECORD_KEY = ["method", "variant", "rank", "group", "metric"]
"""The columns that identify a record (unique within a result)."""

HELDOUT_PREFIX = "heldout_"
"""Metrics measured on the held-out rows (``AuditConfig(holdout=…)``) carry this prefix."""

FAMILIES: dict[str, str] = {
    "pca": "fairaudit.pca.audit:PCAAudit",
    "nmf": "fairaudit.nmf.audit:NMFAudit",
    "fs": "fairaudit.fs.audit:FSAudit",
    "cpd": "fairaudit.cpd.audit:CPDAudit",
}
"""Method family name → ``"module:Class"``, a :class:`FamilyAudit` subclass."""


FAMILY_TITLES = {"pca": "PCA", "nmf": "NMF", "fs": "Feature selection", "cpd": "Tensor (CP)"}

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
        if self.leakage_permutations is not None and (
            isinstance(self.leakage_permutations, bool) or not isinstance(self.leakage_permutations, int) or self.leakage_permutations < 0
        ):
            raise ParameterError(f"leakage_permutations must be a whole number ≥ 0; got {self.leakage_permutations!r}.")

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
        """The settings that determine the numbers (``keep_models`` does not, and is left out)."""
        return {key: (list(value) if isinstance(value, tuple) else value) for key, value in asdict(self).items() if key != "keep_models"}


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

    def to_dict(self, found: dict | None = None) -> dict:
        """The result as JSON-ready data; ``found`` — :func:`fairaudit.findings.findings` of this
        result when the caller has them already (they are worked out otherwise)."""
        from .findings import findings

        found = findings(self) if found is None else found
        return {
            "fairaudit_version": self.fairaudit_version,
            "created": self.created,
            "seconds": self.seconds,
            "config": self.config,
            "data": worded(self.data),
            "uncertainty": {method: _worded_summary(summary) for method, summary in self.uncertainty.items()},
            "findings": [{**f.to_dict(), "text": render(f.text), "rule": render(f.rule), "details": [render(d) for d in f.details]}
                         for family in found.values() for f in family],
            # notes may name options (fairaudit.vocabulary.term): the JSON carries the library's words
            "skipped": [{**skip, "reason": render(str(skip.get("reason", "")))} for skip in self.skipped],
            "warnings": [render(str(w)) for w in self.warnings],
            "details": self.details,
            "records": [_json_safe_record(r) for r in self.records.to_dict(orient="records")],
            "comparisons": [_json_safe_comparison(r) for r in self.comparisons.to_dict(orient="records")],
        }

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

    def to_json(self, indent: int | None = 1, found: dict | None = None) -> str:
        return json.dumps(self.to_dict(found), indent=indent, ensure_ascii=False, allow_nan=False)

    def to_csv(self) -> str:
        """The records as CSV, text cells a spreadsheet would run as formulas neutralised
        (:func:`fairaudit.report.records_csv`)."""
        from .report import records_csv

        return records_csv(self)

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


def _worded_summary(summary: dict) -> dict:
    """An uncertainty summary with its reasons in the library's words (nested ones too: ``yours``)."""
    return {
        key: render(str(value)) if key == "why" else _worded_summary(value) if isinstance(value, dict) and "why" in value else value
        for key, value in summary.items()
    }


def _json_number(value) -> float | None:
    """A JSON-safe number: ``None`` for NaN and ±∞ (``allow_nan=False``)."""
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _json_safe_record(record: dict) -> dict:
    record = dict(record)
    record["rank"] = int(record["rank"])
    for column in ("value", "ci_low", "ci_high"):
        record[column] = _json_number(record.get(column))
    return record


def _json_safe_comparison(row: dict) -> dict:
    return {
        key: value if key in verdicts.COMPARISON_TEXT_COLUMNS else int(value) if key in verdicts.COMPARISON_COUNT_COLUMNS
        else _json_number(value)
        for key, value in row.items()
    }


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


class _ReplicateRecorder(Recorder):
    """Records of bootstrap replicate ``b`` into :class:`fairaudit.uncertainty.Replicates`."""

    def __init__(self, replicates: uncertainty.Replicates, b: int):
        self.replicates, self.b = replicates, b

    def add(self, variant, rank, metric, value, group=""):
        if isinstance(value, tuple):
            value = value[0]
        self.replicates.add(self.b, variant, rank, metric, value, group)


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
        self.preview: Callable[[dict], AuditResult] | None = None
        """Set by :func:`run_audit` when someone follows the run: builds the result of this
        family's point estimates (its records so far) for :meth:`estimates_ready`."""

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
    adds; :attr:`not_bootstrapped` the metrics replicates leave out, with the reason.
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

    def resample(self, rng: np.random.Generator, rows: np.ndarray, index: int, count: int):
        """The rows of bootstrap replicate ``index`` of ``count``: a stratified resample of ``rows``
        (:func:`fairaudit.uncertainty.stratified_resample`). A family whose engine resamples
        otherwise returns what its :meth:`fit` takes instead (the PCA family on the dask engine:
        a Poisson-bootstrap draw)."""
        return uncertainty.stratified_resample(self.codes, rng, rows)

    @classmethod
    def rank_count(cls, config: AuditConfig, n_rows: int, n_features: int) -> int:
        """How many ranks this family's audit of ``n_rows × n_features`` data sweeps under
        ``config`` (the cost model's and the dashboard's count, the same as the audit's own
        ``ranks``): ``config``'s ranks up to the features, by default ranks 1–10."""
        return len(config.resolved_ranks(n_features))

    def replicate_cost(self) -> uncertainty.ReplicateCost:
        """The predicted cost of this family's bootstrap replicates on its data (the groups count for
        the PCA family), to which :func:`fairaudit.uncertainty.resolve_replicates` fits the default
        count; the dask engine's PCA family adds its pass over the data."""
        ranks = len(getattr(self, "ranks", ())) or None
        return uncertainty.ReplicateCost(
            uncertainty.replicate_seconds(self.method, self.data.n_rows, self.data.n_features, ranks, n_groups=len(self.labels))
        )

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


class _Collector(Recorder):
    """A dict of ``(variant, rank, group, metric) → value`` (what the disparity records read)."""

    def __init__(self, inner: Recorder):
        self.inner = inner
        self.values: dict = {}

    def add(self, variant, rank, metric, value, group=""):
        self.values[(variant, int(rank), group, metric)] = value[0] if isinstance(value, tuple) else value
        self.inner.add(variant, rank, metric, value, group)


@dataclass
class FamilyEstimates:
    """A family after its first stage (:func:`estimate_family`): fitted and measured, its point
    estimates in its sink; what its intervals (:func:`finish_family`) need."""

    family: FamilyAudit
    summary: dict
    fits: Fits | None = None
    train: np.ndarray | None = None
    test: np.ndarray | None = None
    pairs: dict = field(default_factory=dict)
    points: dict = field(default_factory=dict)
    """The point estimates by ``(variant, rank, group, metric)`` (what the comparisons read)."""

    @property
    def intervals_pending(self) -> bool:
        """Whether :func:`finish_family` has bootstrap replicates to run."""
        return bool(self.summary.get("replicates"))


def run_family(family: FamilyAudit) -> dict:
    """Fit, measure and bootstrap one family (see the module docstring); records go to the
    family's sink. Returns the family's uncertainty summary for :attr:`AuditResult.uncertainty`."""
    return finish_family(estimate_family(family))


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
    replicates, why = uncertainty.resolve_replicates(family.method, config.bootstrap, cost=family.replicate_cost())
    summary.update(replicates=replicates, why=why)
    if replicates:
        sink.estimates_ready(summary, time.perf_counter() - begun)
    return stage


def family_comparisons(stage: FamilyEstimates, replicates: uncertainty.Replicates | None = None) -> list[tuple]:
    """The family's pairwise comparisons (:func:`fairaudit.verdicts.pairwise_comparisons`) from
    its point estimates and, once they are in, its bootstrap ``replicates``."""
    family = stage.family
    return verdicts.pairwise_comparisons(
        family.method, family.labels, family.group_rows, family.comparison_metrics(), stage.points,
        None if replicates is None else replicates.values, family.config.confidence, family.pair_nulls,
        prefixes=("",) if stage.test is None else ("", HELDOUT_PREFIX),
    )


def finish_family(stage: FamilyEstimates) -> dict:
    """The second stage of :func:`run_family`: the bootstrap replicates and their intervals,
    written into the sink's records. Returns the family's uncertainty summary."""
    family, summary = stage.family, stage.summary
    if not stage.intervals_pending:
        return summary
    started = time.perf_counter()
    found = _bootstrap(family, stage.fits, stage.train, stage.test, summary["replicates"], stage.pairs)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    summary["interval"] = uncertainty.INTERVAL_METHOD
    _apply_intervals(family, found, family.config.confidence)
    family.sink.comparisons = family_comparisons(stage, found)
    summary["not_bootstrapped"] = _missing_interval_reasons(family, family.sink)
    return summary


def _bootstrap(family: FamilyAudit, fits: Fits, train, test, count: int, pairs: dict) -> uncertainty.Replicates:
    """``count`` stratified bootstrap replicates: refit on resampled training rows (warm-started
    from ``fits``), measure on them (and on resampled held-out rows). One thread per library
    meanwhile: many small refits gain nothing from threads and k-means' OpenMP threads thrash a
    busy machine."""
    replicates = uncertainty.Replicates(count)
    capped = 0
    started = time.perf_counter()
    with threadpool_limits(limits=1):
        for b, seed in enumerate(uncertainty.replicate_seeds(family.config.random_state, count)):
            capped += _replicate(family, fits, train, test, pairs, replicates, b, seed)
            family.sink.event(
                {"variant": "", "rank": None, "done": b + 1, "total": count, "seconds": time.perf_counter() - started, "stage": "bootstrap"}
            )
    if capped:
        family.sink.warn(
            f"{family.method}: in {capped} of {count} bootstrap replicates a solver stopped at its iteration cap "
            "(replicates are warm-started from the audit's own fits, so their caps are those of the audit)."
        )
    return replicates


def _replicate(family: FamilyAudit, fits: Fits, train, test, pairs: dict, replicates: uncertainty.Replicates, b: int, seed) -> bool:
    """Replicate ``b``: resample, refit, measure, add the disparities; whether a solver hit its cap."""
    rng = np.random.default_rng(seed)
    rows = family.resample(rng, train, b, replicates.count)
    collector = _Collector(_ReplicateRecorder(replicates, b))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        refits = family.fit(rows, warm=fits, replicate=True, seed=seed)
        family.measure(refits, rows, collector, replicate=True)
        erase_representations(family, refits, rows, collector, replicate=True)
        if test is not None:
            heldout = uncertainty.stratified_resample(family.codes, rng, test)
            family.measure(refits, heldout, collector.prefixed(HELDOUT_PREFIX), heldout=True, replicate=True)
            erase_representations(family, refits, heldout, collector.prefixed(HELDOUT_PREFIX), heldout=True, replicate=True)
    out = _ReplicateRecorder(replicates, b)
    _disparity_records(collector.values, family, out, pairs, "")
    if test is not None:
        _disparity_records(collector.values, family, out, pairs, HELDOUT_PREFIX)
    return any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _apply_intervals(family: FamilyAudit, replicates: uncertainty.Replicates, confidence: float) -> None:
    """Write the bootstrap intervals into the sink's rows (rows that carry their own interval,
    the leakage test's, keep it; metrics the family leaves out of replicates get none even when
    a replicate measured them, e.g. the spread over fewer k-means runs)."""
    sink = family.sink
    points = {(row[1], row[2], row[3], row[4]): row[5] for row in sink.rows}
    intervals = replicates.intervals(confidence, points)
    for index, row in enumerate(sink.rows):
        method, variant, rank, group, metric, value, low, high = row
        if not (math.isnan(low) and math.isnan(high)) or metric.removeprefix(HELDOUT_PREFIX) in family.not_bootstrapped:
            continue
        found = intervals.get((variant, rank, group, metric))
        if found is not None:
            sink.rows[index] = (method, variant, rank, group, metric, value, *found)


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


def rank_count(method: str, config: AuditConfig, n_rows: int, n_features: int) -> int:
    """How many ranks ``method``'s audit sweeps on ``n_rows × n_features`` data
    (:meth:`FamilyAudit.rank_count`; loads that family's module only). Ranks the data do not allow
    count as asked: an estimate never raises; the audit itself says what is wrong, in the
    interface's words."""
    try:
        return _family(method).rank_count(config, n_rows, n_features)
    except FairAuditError:
        return len(config.ranks) if config.ranks else 10


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

    def estimate(self) -> None:
        """Fit and measure every family (the first stage)."""
        from .engine import family_input

        for method in self.config.methods:
            given = family_input(self.data, method, self.config)  # data read by the dask engine: its moments, or its sample
            sink = RecordSink(method, self.progress, keep_models=self.config.keep_models)
            if self.progress is not None:  # the family's point estimates alone, as a result of their own
                sink.preview = lambda summary, given=given, sink=sink: self._result([(given, sink)], {sink.method: summary}, models=False)
            family = _family(method)(given.data, given.config, sink)
            self.stages.append((given, estimate_family(family)))

    @property
    def intervals_pending(self) -> bool:
        """Whether :meth:`finish` has replicates to run (else it only assembles the result)."""
        return any(stage.intervals_pending for _, stage in self.stages)

    def finish(self) -> AuditResult:
        """Every family's intervals (the second stage), then the whole result."""
        summaries: dict[str, dict] = {}
        for given, stage in self.stages:
            summaries[stage.family.method] = finish_family(stage)
            if given.no_intervals:
                summaries[stage.family.method]["why"] = given.no_intervals
        return self._result([(given, stage.family.sink) for given, stage in self.stages], summaries)

    def _result(self, parts: Sequence[tuple], summaries: dict[str, dict], models: bool = True) -> AuditResult:
        """The :class:`AuditResult` of the families' sinks in ``parts`` (``(given input, sink)``
        pairs) as they stand, with their uncertainty ``summaries``."""
        rows: list[tuple] = []
        compared: list[tuple] = []
        skipped: list[dict] = []
        notes = list(self.notes)
        details: dict[str, dict] = {}
        kept: dict[tuple[str, str, int], object] = {}
        for given, sink in parts:
            notes.extend(note for note in given.notes if note not in notes)
            if models:
                kept.update(sink.models)
            rows.extend(sink.rows)
            compared.extend(sink.comparisons)
            skipped.extend(sink.skipped)
            notes.extend(sink.warnings)
            if sink.details:
                details[sink.method] = sink.details
        return AuditResult(
            records=pd.DataFrame(rows, columns=RECORD_COLUMNS),
            config=self.config.to_dict(),
            data=self.data.fingerprint(),
            skipped=skipped,
            warnings=notes,
            details=details,
            created=self.created,
            seconds=round(time.perf_counter() - self.started, 3),
            uncertainty=summaries,
            models=kept,
            comparisons=comparisons_frame(compared),
        )
