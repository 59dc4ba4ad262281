"""Running an audit: configuration, the tidy result, and the family registry.

``run_audit(data, config)`` fits every requested variant of every requested method family at
every rank and returns an :class:`AuditResult` whose ``records`` table has one row per
measurement::

    method   variant   rank  group     metric      value
    pca      vanilla   3     SEX=2     loss        0.412
    pca      fair_eig  3                max_loss    0.301      (group empty: whole-data metric)
    pca      fair_eig  3                seconds     0.004

Plots, the app, the HTML report, JSON and CSV all read this table; nothing recomputes metrics
on the side. Families register a function ``audit(data, config, sink)`` in :data:`FAMILIES`;
a variant that would be too slow for the input is *skipped with a recorded reason*, never
silently.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from . import metrics
from ._version import __version__
from .data import AuditData, worded
from .errors import ParameterError, RankError
from .vocabulary import render, term

RECORD_COLUMNS = ["method", "variant", "rank", "group", "metric", "value"]

FAMILIES: dict[str, str] = {
    "pca": "fairaudit.pca.audit:audit_pca",
    "nmf": "fairaudit.nmf.audit:audit_nmf",
    "fs": "fairaudit.fs.audit:audit_fs",
    "cpd": "fairaudit.cpd.audit:audit_cpd",
}
"""Method family name → ``"module:function"`` implementing ``audit(data, config, sink)``."""

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
    keep_models : bool
        Keep every fitted estimator in :attr:`AuditResult.models` (for
        :func:`fairaudit.models.export_models`); off by default, since NMF and CP estimators hold
        a row per data row.
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
    keep_models: bool = False
    engine: str = "local"

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
    models: dict = field(default_factory=dict, repr=False, compare=False)
    """With ``AuditConfig(keep_models=True)``: the fitted estimator of every fit, keyed
    ``(method, variant, rank)``. Never written to JSON; :mod:`fairaudit.models` saves them."""

    def metric(self, metric: str, method: str | None = None) -> pd.DataFrame:
        """Rows of one metric (optionally one method)."""
        rows = self.records[self.records.metric == metric]
        return rows if method is None else rows[rows.method == method]

    def to_dict(self) -> dict:
        return {
            "fairaudit_version": self.fairaudit_version,
            "created": self.created,
            "seconds": self.seconds,
            "config": self.config,
            "data": worded(self.data),
            # notes may name options (fairaudit.vocabulary.term): the JSON carries the library's words
            "skipped": [{**skip, "reason": render(str(skip.get("reason", "")))} for skip in self.skipped],
            "warnings": [render(str(w)) for w in self.warnings],
            "details": self.details,
            "records": [_json_safe_record(r) for r in self.records.to_dict(orient="records")],
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def to_csv(self) -> str:
        """The records as CSV, text cells a spreadsheet would run as formulas neutralised
        (:func:`fairaudit.report.records_csv`)."""
        from .report import records_csv

        return records_csv(self)

    @classmethod
    def from_dict(cls, payload: dict) -> AuditResult:
        records = pd.DataFrame(payload["records"], columns=RECORD_COLUMNS)
        records["value"] = pd.to_numeric(records["value"])
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
        )


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
        models={key: model for r in results for key, model in r.models.items()},
    )


SWEEP_SEPARATOR = "@"
"""A variant ``"name@i"`` is point ``i`` of a parameter sweep of ``name`` (the CP family's λ
frontier); its parameter value is the record metric ``lam``."""


def split_variant(variant: str) -> tuple[str, int | None]:
    """``"khsic@3"`` → ``("khsic", 3)``; ``"khsic"`` → ``("khsic", None)``."""
    base, _, index = variant.partition(SWEEP_SEPARATOR)
    return base, (int(index) if index else None)


def is_sweep_variant(variant: str) -> bool:
    return SWEEP_SEPARATOR in variant


def whole_metrics(records: pd.DataFrame, method: str, rank: int | None = None) -> pd.DataFrame:
    """``method``'s whole-data metrics (no per-group rows) as a table: one row per variant and
    rank (index ``(variant, rank)``), or per variant at ``rank``; one column per metric."""
    rows = records[(records.method == method) & (records.group == "")]
    if rank is None:
        return rows.pivot_table(index=["variant", "rank"], columns="metric", values="value", sort=False)
    rows = rows[rows["rank"] == rank]
    return rows.pivot_table(index="variant", columns="metric", values="value", sort=False)


def merged_options(config: AuditConfig, method: str, defaults: dict, what: str) -> dict:
    """``config.options[method]`` over ``defaults``: an unknown key is refused (naming ``what``'s
    known options), a ``None`` value means the default."""
    given = dict(config.options.get(method, {}) or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown {what} option(s) {', '.join(map(repr, unknown))}; known: {', '.join(defaults)}.")
    return {**defaults, **{key: value for key, value in given.items() if value is not None}}


def family_options(config: dict, method: str) -> dict:
    """The options ``config`` gave ``method``: a single run's ``AuditConfig.to_dict()`` or the
    ``runs`` of a :func:`combine_results` config (the run that audited ``method``)."""
    for run in config.get("runs", [config]):
        if method in run.get("methods", ()):
            return run.get("options", {}).get(method, {})
    return config.get("options", {}).get(method, {})


def _json_safe_record(record: dict) -> dict:
    value = record["value"]
    record = dict(record)
    record["rank"] = int(record["rank"])
    record["value"] = None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)
    return record


# ============================================================================ collecting records
ProgressCallback = Callable[[dict], None]


class RecordSink:
    """Where a family writes its measurements, skips, warnings and progress."""

    def __init__(self, method: str, progress: ProgressCallback | None = None, keep_models: bool = False):
        self.method = method
        self.keep_models = keep_models
        self.models: dict[tuple[str, str, int], object] = {}
        self.rows: list[tuple] = []
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self.details: dict[str, dict[str, dict]] = {}
        self._progress = progress
        self._expected = 0
        self._done = 0

    def add(self, variant: str, rank: int, metric: str, value: float, group: str = "") -> None:
        self.rows.append((self.method, variant, int(rank), group, metric, float(value)))

    def add_all(self, variant: str, rank: int, values: dict[str, float]) -> None:
        """Several whole-data metrics of one fit (``{metric: value}``)."""
        for metric, value in values.items():
            self.add(variant, rank, metric, value)

    def add_groups(self, variant: str, rank: int, metric: str, labels: Iterable[str], values: Iterable[float]) -> None:
        for label, value in zip(labels, values, strict=True):
            self.add(variant, rank, metric, value, group=label)

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
        if self._progress is not None:
            total = max(self._expected, self._done)
            self._progress(
                {"method": self.method, "variant": variant, "rank": rank, "done": self._done, "total": total, "seconds": seconds}
            )

    def capture_warnings(self, variant: str, caught: list[warnings.WarningMessage]) -> None:
        for item in caught:
            self.warn(f"{self.method}/{variant}: {item.message}")


def representation_metrics(Z: np.ndarray, groups: np.ndarray, config: AuditConfig) -> dict[str, float]:
    """Whole-data metrics of a representation ``Z`` shared by every family.

    ``mmd2`` (group means), ``mmd2_rbf`` (median-heuristic RBF kernel) and the held-out group
    classifier's ``unfairness`` / ``unfairness_balanced`` (see :mod:`fairaudit.metrics`).
    """
    return {
        "mmd2": metrics.mmd2(Z, groups),
        "mmd2_rbf": metrics.mmd2_rbf(
            Z, groups, max_rows_per_group=config.mmd_max_rows_per_group, random_state=config.random_state
        ),
        **metrics.leakage(
            Z,
            groups,
            classifier=config.leakage_classifier,
            max_rows=config.leakage_max_rows,
            random_state=config.random_state,
        ),
    }


def _family(method: str) -> Callable:
    module_name, function = FAMILIES[method].split(":")
    return getattr(importlib.import_module(module_name), function)


def run_audit(data: AuditData, config: AuditConfig | None = None, progress: ProgressCallback | None = None) -> AuditResult:
    """Run every requested family on ``data``; see the module docstring.

    Parameters
    ----------
    data : AuditData or PartitionedData
        Validated input (:func:`fairaudit.load`, :func:`fairaudit.prepare` or
        :meth:`AuditData.from_arrays`), or data read partition by partition by the dask engine
        (:func:`fairaudit.engine.read_partitioned`, with ``config.engine="dask"``).
    config : AuditConfig, optional
    progress : callable, optional
        Called after every fit with ``{"method", "variant", "rank", "done", "total", "seconds"}``.
    """
    from .engine import family_input

    config = config or AuditConfig()
    config.check_variants()
    started = time.perf_counter()
    created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    rows: list[tuple] = []
    skipped: list[dict] = []
    notes: list[str] = []
    details: dict[str, dict] = {}
    models: dict[tuple[str, str, int], object] = {}
    smallest = min(data.group_sizes().items(), key=lambda item: item[1])
    if smallest[1] < metrics.LEAKAGE_MIN_GROUP_ROWS:
        notes.append(
            f"leakage metrics (unfairness, unfairness_balanced) not computed: group {smallest[0]!r} has "
            f"{smallest[1]} rows and a held-out classifier needs at least {metrics.LEAKAGE_MIN_GROUP_ROWS} "
            f"per group; use fewer sensitive columns (fewer intersections), or leave the group out with "
            f"{term('min_group_size', metrics.LEAKAGE_MIN_GROUP_ROWS)} and {term('small_groups', 'drop')}."
        )
    for method in config.methods:
        family_data, engine_notes = family_input(data, method, config.engine)  # data read by the dask engine: moments or its sample
        notes.extend(note for note in engine_notes if note not in notes)
        sink = RecordSink(method, progress, keep_models=config.keep_models)
        _family(method)(family_data, config, sink)
        models.update(sink.models)
        rows.extend(sink.rows)
        skipped.extend(sink.skipped)
        notes.extend(sink.warnings)
        if sink.details:
            details[method] = sink.details
    records = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    return AuditResult(
        records=records,
        config=config.to_dict(),
        data=data.fingerprint(),
        skipped=skipped,
        warnings=notes,
        details=details,
        created=created,
        seconds=round(time.perf_counter() - started, 3),
        models=models,
    )
