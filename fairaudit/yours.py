"""Audit a representation you already have: the variant ``yours``, next to vanilla and fair.

Most users already run a PCA or an NMF somewhere in a pipeline. Two ways to audit it on the data
with the same metrics as fairaudit's own variants:

* **A components matrix** (rank × features: scikit-learn's ``PCA.components_``, NMF's ``H``, any
  linear map's rows), read by :func:`read_components`, audited by :func:`audit_components`:

  - PCA family: for every audited rank ``d`` up to the matrix's row count, the first ``d`` rows
    (a PCA orders its components). Per group ``error`` and ``loss`` are those of the orthogonal
    projection onto the rows' span (the best linear reconstruction from the representation;
    Samadi et al. 2018, Def. 4.3), with ``max_loss``, ``loss_gap``, ``variance_explained`` and
    ``effective_rank`` (the span's dimension); the representation metrics (``mmd2``,
    ``mmd2_rbf``, ``unfairness``, ``unfairness_balanced``) are computed on what the pipeline
    outputs, the centred rows times the matrix's transpose. The rows must live in the data's
    scaling (``scaling``: standardize by default, as scikit-learn's ``StandardScaler``).
  - NMF family: the whole matrix as ``H`` at its own rank ``r``; ``W`` is each row's
    non-negative least-squares fit (:meth:`fairaudit.nmf.NMF.transform`), on the NMF input the
    audit uses (non-negativity policy and unit-ℓ2 features by default: fit ``H`` on that input,
    or audit with ``nmf.scaling="none"`` for an ``H`` of the raw values); ``E_ℓ`` by Algorithm 1
    with the audit's settings; the same records, held-out rows and bootstrap intervals as the
    family's variants (:class:`YoursNMFAudit`), so its findings carry verdicts.

* **Embeddings** (one row per audited data row, any number of columns), read by
  :func:`read_embedding`, audited by :func:`audit_embedding`: only the metrics that need nothing
  but the representation (``mmd2``, ``mmd2_rbf``, ``unfairness``, ``unfairness_balanced``), at
  rank = the number of columns, under each requested family.

Both return an :class:`~fairaudit.audit.AuditResult` holding only the ``yours`` records;
:func:`attach` adds them to the audit of the same data, so plots, findings and reports show
``yours`` like any variant. The result's ``config["yours"]`` says what was audited (file, sha256,
shape, ranks, how columns were matched).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .archive import read_npy
from .audit import (
    RECORD_COLUMNS,
    AuditConfig,
    AuditResult,
    Fits,
    RecordSink,
    comparisons_frame,
    emptied_note,
    erased_variant,
    representation_metrics,
    run_family,
)
from .cpd.audit import DEFAULT_OPTIONS as CPD_DEFAULTS
from .data import DEFAULT_MAX_MB, AuditData, RawTable, feature_rows, read_bytes, read_table
from .erasure import LeaceEraser, leace
from .errors import FairAuditError, InputFileError, ParameterError, RankError
from .formatting import number
from .linalg import LowRankMap, orthonormal_basis
from .nmf import NMF
from .nmf._core import GroupedData
from .nmf.audit import NMFAudit
from .pca._problem import GroupProblem
from .pca.audit import PCAAudit, measured_coordinates
from .vocabulary import term

YOURS = "yours"
"""The variant name of a representation the user brings."""

COMPONENT_METHODS = ("pca", "nmf")
"""Families that audit a components matrix; every family reports an embedding's metrics."""

_LABEL_NAMES = {"index", "component", "components", "unnamed_1", "rank", "id", "row", "rowid", "row_id"}
"""A first column with one of these names holds row labels, not values (also any ``*_id``)."""


# ============================================================================ reading
@dataclass(frozen=True)
class Representation:
    """A matrix the user brings, aligned with the data.

    ``matrix`` is ``rank × features`` (components, columns in the data's feature order) or
    ``rows × dimensions`` (embeddings, rows in the data's row order). ``source`` describes it for
    the report (name, sha256, shape, how it was matched).
    """

    kind: str  # "components" | "embedding"
    matrix: np.ndarray
    source: dict

    @property
    def rank(self) -> int:
        return int(self.matrix.shape[0] if self.kind == "components" else self.matrix.shape[1])


def _read(source, name: str | None, max_mb: float) -> tuple[RawTable | np.ndarray, str, str]:
    """A table (CSV through the data boundary) or a ``.npy`` array, its name and sha256."""
    shown = name or (Path(source).name if isinstance(source, str | Path) else getattr(source, "name", None))
    if shown is not None and str(shown).lower().endswith(".npy"):
        try:
            raw, _ = read_bytes(source, max_mb)  # the data boundary's checks and size limit, as for a CSV
        except OSError as exc:
            raise InputFileError(f"{source} cannot be read ({exc.strerror}).") from None
        array = read_npy(raw, str(shown), InputFileError)  # the header checked against the bytes; real numbers only
        if array.ndim == 0:
            raise InputFileError(f"{shown} holds a single number, not a matrix; save the matrix itself (np.save(path, matrix)).")
        if array.size == 0:
            raise InputFileError(f"{shown} holds an empty array (shape {' × '.join(map(str, array.shape))}); it defines no representation.")
        return np.array(array, dtype=float), str(shown), hashlib.sha256(raw).hexdigest()
    table = read_table(source, name=name, max_mb=max_mb)
    first = [table.cell(column, 0) for column in table.columns]
    if not table.has_header and first == [str(i) for i in range(len(first))]:
        # pandas' default column names 0, 1, … look like numbers, but they are a header
        if hasattr(source, "seek"):
            source.seek(0)
        table = read_table(source, name=name, max_mb=max_mb, header=True)
    return table, table.name, table.sha256


def _label_column(table: RawTable, column: str) -> bool:
    """Whether ``column`` holds row labels rather than values: text, or a label-like name
    (``index``, ``component``, ``id``, ``*_id``, pandas' unnamed index column …)."""
    name = column.strip().lower()
    if name in _LABEL_NAMES or name.endswith("_id"):
        return True
    return not table.is_numeric(column) or bool(table.missing(column).any())


def read_components(source, data: AuditData, *, name: str | None = None, max_mb: float = DEFAULT_MAX_MB) -> Representation:
    """A components matrix (rank × features) for ``data``, from a CSV or ``.npy`` file.

    Accepted layouts (CSV): a header naming the data's features (any order; a leading column of
    component labels or positions is allowed), e.g.
    ``pd.DataFrame(pca.components_, columns=names).to_csv(path, index=False)``; the transpose
    (a first column holding the feature names, one column per component); or no header and
    exactly one column per feature, in the data's feature order (as a ``.npy`` array must be).
    A column that is not one of the audited features is refused: the representation would use
    data the audit does not see.
    """
    read, shown, digest = _read(source, name, max_mb)
    features = list(data.feature_names)
    if isinstance(read, np.ndarray):
        matrix, layout = _array_layout(read, features, shown)
    else:
        matrix, layout = _table_layout(read, features)
    if not np.isfinite(matrix).all():
        raise InputFileError(f"{shown} has missing or infinite weights; every feature needs a finite weight in every component.")
    if not np.any(matrix):
        raise InputFileError(f"{shown} has only zero weights; it defines no representation.")
    source = {"name": shown, "sha256": digest, "shape": list(matrix.shape), "layout": layout}
    return Representation("components", np.ascontiguousarray(matrix), source)


def _array_layout(array: np.ndarray, features: list[str], shown: str) -> tuple[np.ndarray, str]:
    if array.ndim != 2 or array.shape[1] != len(features):
        raise InputFileError(
            f"{shown} has shape {' × '.join(map(str, array.shape))}; a components array needs one row per component "
            f"and one column per feature ({len(features)}, in the data's order: {', '.join(features[:6])}{' …' if len(features) > 6 else ''})."
        )
    return array, "array: columns in the data's feature order"


def _table_layout(table: RawTable, features: list[str]) -> tuple[np.ndarray, str]:
    columns = table.columns
    if table.has_header and set(features) <= set(columns):
        extra = [c for c in columns if c not in set(features)]
        labels = [c for c in extra if columns.index(c) == 0 and _label_column(table, c)]
        _refuse_extra([c for c in extra if c not in labels], table.name)
        rows = feature_rows(table, features, purpose="the audit")
        return rows.X, "header names the features" + (f"; first column {labels[0]!r} read as labels" if labels else "")
    first = columns[0]
    names = set(table.texts(first))
    if names == set(features) and table.n_rows == len(features):
        rows = feature_rows(table, columns[1:], purpose="the audit")
        order = {str(v): i for i, v in enumerate(table.texts(first)[rows.rows])}
        return rows.X[[order[f] for f in features]].T, f"one row per feature (first column {first!r}), one column per component"
    if not table.has_header and len(columns) == len(features):
        rows = feature_rows(table, columns, purpose="the audit")
        return rows.X, "no header: columns taken in the data's feature order"
    missing = [f for f in features if f not in columns]
    raise InputFileError(
        f"{table.name}'s columns do not name the data's {len(features)} features"
        f"{f' (missing {_shown(missing)})' if table.has_header and missing else ''}. Write the components with a header "
        "row naming the features, e.g. pd.DataFrame(pca.components_, columns=feature_names).to_csv(path, index=False); "
        f"the audit uses {_shown(features)}."
    )


def _refuse_extra(extra: list[str], where: str) -> None:
    if extra:
        raise InputFileError(
            f"{where} weights column(s) {_shown(extra)}, which the audit does not use as features; the representation "
            f"would use data the audit cannot see. Audit with the same features ({term('features')}) or drop those columns."
        )


def _shown(names, limit: int = 6) -> str:
    names = list(names)
    return ", ".join(map(repr, names[:limit])) + (f" … (+{len(names) - limit})" if len(names) > limit else "")


def read_embedding(source, data: AuditData, *, name: str | None = None, max_mb: float = DEFAULT_MAX_MB) -> Representation:
    """Precomputed embeddings, one row per audited row of ``data`` (in the same order), from a
    CSV (header optional; a leading column of row positions or IDs is set aside) or a ``.npy``
    file."""
    read, shown, digest = _read(source, name, max_mb)
    layout = "array" if isinstance(read, np.ndarray) else "columns " + ", ".join(read.columns[:6]) + (" …" if len(read.columns) > 6 else "")
    if isinstance(read, np.ndarray):
        matrix = read if read.ndim == 2 else read.reshape(len(read), -1)  # one column, or a row's cells flattened
    else:
        columns = read.columns
        labels = [columns[0]] if len(columns) > 1 and _label_column(read, columns[0]) else []
        if labels:
            layout += f"; first column {labels[0]!r} set aside as row labels"
        matrix = feature_rows(read, [c for c in columns if c not in labels], purpose="the embedding").X
    if matrix.shape[1] == 0:
        raise InputFileError(f"{shown} has no columns; embeddings need at least one value per row.")
    if matrix.shape[0] != data.n_rows:
        read_rows = data.source.get("rows_read", data.n_rows)
        hint = (
            f" The data file has {read_rows} rows, of which the audit uses {data.n_rows} (see the preprocessing log); "
            "give embeddings for the audited rows only, in their order."
            if read_rows == matrix.shape[0] and read_rows != data.n_rows else " Give one row per audited data row, in the data's order."
        )
        raise InputFileError(f"{shown} has {matrix.shape[0]} rows but the audit has {data.n_rows}.{hint}")
    if not np.isfinite(matrix).all():
        raise InputFileError(f"{shown} has missing or infinite values; every embedding cell must be a number.")
    source = {"name": shown, "sha256": digest, "shape": list(matrix.shape), "layout": layout}
    return Representation("embedding", np.ascontiguousarray(matrix, dtype=float), source)


# ============================================================================ auditing
def _result(
    records: list[tuple], sink_parts: list[RecordSink], data: AuditData, config: AuditConfig, describe: dict, started: float,
    uncertainty: dict | None = None,
) -> AuditResult:
    return AuditResult(
        uncertainty=uncertainty or {},
        records=pd.DataFrame(records, columns=RECORD_COLUMNS),
        comparisons=comparisons_frame([row for sink in sink_parts for row in sink.comparisons]),
        config={**config.to_dict(), YOURS: describe},
        data=data.fingerprint(),
        skipped=[s for sink in sink_parts for s in sink.skipped],
        warnings=[w for sink in sink_parts for w in sink.warnings],
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - started, 3),
    )


def audit_components(data: AuditData, components: Representation, config: AuditConfig | None = None, *, progress=None) -> AuditResult:
    """Audit a components matrix as variant ``yours`` in each of ``config.methods`` that can
    (``pca``, ``nmf``); see the module docstring for the records."""
    if components.kind != "components":
        raise ParameterError("audit_components needs a components matrix (read_components); use audit_embedding for embeddings.")
    config = config or AuditConfig()
    methods = [m for m in config.methods if m in COMPONENT_METHODS]
    if not methods:
        raise ParameterError(
            f"a components matrix is audited by the PCA or NMF family; choose {term('yours_family', 'pca')} "
            f"(or nmf) to audit {term('components')}."
        )
    started = time.perf_counter()
    sinks, summaries, describe = [], {}, {"kind": "components", **components.source}
    for method in methods:
        sink = RecordSink(method, progress)
        audit = _pca_components if method == "pca" else _nmf_components
        ranks, summaries[method] = audit(data, components.matrix, config, sink)
        describe[f"{method}_ranks"] = list(ranks)
        sinks.append(sink)
    for method in config.methods:
        if method not in COMPONENT_METHODS:
            sinks[0].skipped.append({"method": method, "variant": YOURS, "rank": None,
                                     "reason": "a components matrix is audited by the PCA and NMF families only"})
    return _result([row for sink in sinks for row in sink.rows], sinks, data, config, describe, started, summaries)


def _component_ranks(config: AuditConfig, data: AuditData, available: int) -> tuple[int, ...]:
    if config.ranks is None:
        return tuple(range(1, min(available, data.n_features) + 1))
    ranks = tuple(r for r in config.resolved_ranks(data.n_features) if r <= available)
    if not ranks:
        raise RankError(
            f"the components matrix has {available} row(s), below every audited rank; audit ranks up to {available} "
            f"({term('yours_ranks', f'1:{available}')}) to compare it."
        )
    return ranks


class _ComponentsFit:
    """The first ``d`` rows of a components matrix as a fitted model of the PCA family: the
    orthogonal projection onto their span (``map_``), measured on a problem's group moments.
    ``before``: the rows a LEACE twin's rows were erased from (:func:`erased_rows`)."""

    def __init__(self, rows: np.ndarray, problem: GroupProblem, d: int, before: np.ndarray | None = None, output_basis=None):
        self.rows = rows
        spanning = rows.T if output_basis is None else rows.T @ output_basis  # erased: without the emptied directions
        basis = orthonormal_basis(spanning) if spanning.any() else np.zeros((rows.shape[1], 0))
        self.map_ = LowRankMap(basis, np.ones(basis.shape[1]))
        self.n_components_ = basis.shape[1]
        self.group_errors_ = problem.errors(problem.reduce(self.map_))  # problem coordinates (the row space for wide data)
        self.group_losses_ = self.group_errors_ - problem.best_errors(d)
        if before is not None:  # what erasure_distortion and measured_coordinates read
            self.representation_, self.base_representation_ = rows.T, before.T
            self.output_basis_ = output_basis


def erased_rows(rows: np.ndarray, problem: GroupProblem) -> tuple[np.ndarray, np.ndarray]:
    """The components whose representation is LEACE's output on the representation of ``rows``
    (``z = (x − μ) rowsᵀ``; Belrose et al. 2023, eq. (1)), the eraser fitted on the problem's group
    moments: ``z' = z − (z W Q)(W⁺Q)ᵀ = (x − μ) rows'ᵀ`` with ``rows' = rows − (W⁺Q)(W Q)ᵀ rows``;
    and the basis of the subspace ``z'`` lies in (:meth:`fairaudit.erasure.Eraser.output_basis`)."""
    inside = rows if problem.basis is None else rows @ problem.basis  # problem coordinates
    covariance = inside @ problem.pooled @ inside.T
    eraser = leace(covariance, problem.offsets @ inside.T, np.zeros(rows.shape[0]), scale=problem.value_scale)
    return rows - eraser.write @ (eraser.read.T @ rows), eraser.output_basis()


class YoursPCAAudit(PCAAudit):
    """A components matrix audited by the PCA family's protocol as the variant ``yours``: the
    same engine, records, disparities, held-out rows and bootstrap as the family's own variants
    (a replicate re-measures the fixed projection on the reweighted moments: the interval of
    its per-group errors and losses on another sample of the population), so its findings read
    like theirs. The leakage test and the RBF MMD² read what the pipeline outputs, the centred
    rows times the matrix's transpose."""

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink, matrix: np.ndarray, ranks: tuple[int, ...]):
        super().__init__(data, replace(config, variants=("vanilla",)), sink)
        self.matrix, self.ranks = matrix, tuple(ranks)
        self.chosen = [YOURS, erased_variant(YOURS)] if config.leace else [YOURS]

    def search_subgroups(self, fits: Fits) -> list[tuple]:
        """The subgroup search judges vanilla PCA's representation, which is not audited here."""
        self.sink.warn(f"yours: the subgroup search ({term('subgroups')}) judges the PCA family's vanilla PCA, not your components; "
                       "audit the data with the PCA family for it.")
        return []

    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        fits = self._new_fits(rows, replicate)
        problem = fits.shared["problem"]
        if not replicate:
            self.sink.expect(len(self.ranks) * len(self.chosen))
        for name in self.chosen:
            for d in self.ranks:
                started = time.perf_counter()
                mine = self.matrix[:d]
                if name == YOURS:
                    fit = _ComponentsFit(mine, problem, d)
                else:
                    erased, basis = erased_rows(mine, problem)
                    fit = _ComponentsFit(erased, problem, d, before=mine, output_basis=basis)
                fits.models[(name, d)] = fit
                fits.seconds[(name, d)] = time.perf_counter() - started
                if not replicate:
                    self.sink.progress(name, d, fits.seconds[(name, d)])
        return fits

    def coordinates(self, model: _ComponentsFit, centred: np.ndarray) -> np.ndarray:
        return measured_coordinates(centred @ model.rows.T, model)


def _pca_components(data: AuditData, matrix: np.ndarray, config: AuditConfig, sink: RecordSink) -> tuple[tuple[int, ...], dict]:
    """The ``yours`` records of a components matrix (:class:`YoursPCAAudit`); the ranks and the
    uncertainty summary."""
    ranks = _component_ranks(config, data, matrix.shape[0])
    summary = run_family(YoursPCAAudit(data, config, sink, matrix, ranks))
    deficient = [d for d in ranks if orthonormal_basis(matrix[:d].T).shape[1] < d]
    if deficient:
        sink.warn(
            f"pca/{YOURS}: the first {deficient[0]} component(s) are linearly dependent (they span fewer dimensions, "
            "see effective_rank); errors and losses are those of the span they do cover."
        )
    return ranks, summary


class YoursNMFAudit(NMFAudit):
    """An NMF dictionary ``H`` audited by the NMF family's protocol as the variant ``yours``: the
    same input (non-negativity policy, unit-ℓ2 features), ``E_ℓ``, records, disparities, held-out
    rows and bootstrap as the family's own variants. The dictionary is fixed: a replicate
    re-estimates ``E_ℓ`` on the resampled rows (as the family's replicates do: the audit's runs
    continued) and each row's ``W`` by NNLS against ``H`` — the interval of its per-group errors
    and relative losses on another sample of the population, so its findings carry verdicts like
    theirs. Nothing in it starts at random, so it has no restarts."""

    restarts = 0

    def __init__(self, data: AuditData, config: AuditConfig, sink: RecordSink, H: np.ndarray):
        super().__init__(data, replace(config, variants=("vanilla",), ranks=None), sink)
        r = H.shape[0]
        if r > self.prepared.exact_rank:  # the family's rule (NMFInput.exact_rank), said of a dictionary
            raise RankError(
                f"the NMF dictionary has {r} rows, more than the data allow for per-group NMFs (features "
                f"{self.prepared.X.shape[1]}, smallest group {self.prepared.smallest_group[1]} rows); E_ℓ (Algorithm 1) "
                "would be exact and the relative losses meaningless."
            )
        if config.ranks is not None and r not in config.ranks:
            sink.warn(f"nmf/{YOURS}: audited at its own rank {r} (the number of rows of H), not at the requested ranks.")
        self.H, self.ranks, self.chosen = H, (r,), [YOURS]
        self.replicate_ranks_skipped = {}

    def fit(self, rows, *, warm=None, replicate=False, seed=None) -> Fits:
        X = self.prepared.X[rows]
        grouped = GroupedData.build(X, self._sensitive(rows))
        (r,) = self.ranks
        fits = Fits(rows=rows, shared={"estimate_seconds": {}})
        if not replicate:
            self.sink.expect(1)
        started = time.perf_counter()
        with self.sink.collect_warnings(YOURS, forward=() if replicate else Warning):
            E = self.replicate_estimates(grouped, r, warm, rows) if replicate else self.audit_estimates(fits, grouped, r)
        fits.models[(YOURS, r)] = NMF.from_dictionary(self.H, X, grouped, E)
        fits.seconds[(YOURS, r)] = time.perf_counter() - started
        if not replicate:
            self.sink.progress(YOURS, r, fits.seconds[(YOURS, r)])
        return fits


def _nmf_components(data: AuditData, H: np.ndarray, config: AuditConfig, sink: RecordSink) -> tuple[tuple[int, ...], dict]:
    """The ``yours`` records of an NMF dictionary (:class:`YoursNMFAudit`); its rank and the
    uncertainty summary."""
    if (H < 0).any():
        raise InputFileError(
            f"the components have negative weights, so they are not an NMF dictionary H; audit them with "
            f"{term('yours_family', 'pca')}."
        )
    summary = run_family(YoursNMFAudit(data, config, sink, H))
    return (H.shape[0],), summary


def audit_embedding(data: AuditData, embedding: Representation, config: AuditConfig | None = None, *, progress=None) -> AuditResult:
    """The representation metrics of precomputed embeddings as variant ``yours`` at rank = their
    number of columns, under each of ``config.methods`` (the CP family with its own leakage
    classifier, as its variants)."""
    if embedding.kind != "embedding":
        raise ParameterError("audit_embedding needs embeddings (read_embedding); use audit_components for a components matrix.")
    config = config or AuditConfig()
    started = time.perf_counter()
    sinks = []
    scores = {}
    codes = data.groups.codes
    shown = {YOURS: embedding.matrix}
    if config.leace:  # fitted on every row (an embedding's audit has no held-out rows): its means agree exactly
        eraser = LeaceEraser().fit(embedding.matrix, sensitive_features=codes)
        # measured in the subspace the erased rows lie in (Eraser.output_basis: same distances, no emptied column)
        shown[erased_variant(YOURS)] = (eraser.transform(embedding.matrix) - eraser.mean_) @ eraser.eraser_.output_basis()
    for method in config.methods:
        sink = RecordSink(method, progress)
        sink.expect(len(shown))
        classifier = config.leakage_classifier
        if method == "cpd":  # the CP family's own classifier, as its variants use
            classifier = config.options.get("cpd", {}).get("leakage_classifier") or CPD_DEFAULTS["leakage_classifier"]
        for name, matrix in shown.items():
            if (classifier, name) not in scores:
                scores[classifier, name] = representation_metrics(matrix, codes, replace(config, leakage_classifier=classifier))
            sink.add_all(name, embedding.rank, scores[classifier, name])
            if name != YOURS:
                sink.add(name, embedding.rank, "leace_distortion", eraser.relative_distortion_)
                if matrix.shape[1] == 0:
                    sink.warn(emptied_note(method, name, embedding.rank, data.groups.n_groups))
            sink.progress(name, embedding.rank, time.perf_counter() - started)
        sinks.append(sink)
    describe = {"kind": "embedding", **embedding.source}
    return _result([row for sink in sinks for row in sink.rows], sinks, data, config, describe, started)


def audit_yours(data: AuditData, representation: Representation, config: AuditConfig | None = None, *, progress=None) -> AuditResult:
    """:func:`audit_components` or :func:`audit_embedding`, by the representation's kind."""
    audit = audit_components if representation.kind == "components" else audit_embedding
    return audit(data, representation, config, progress=progress)


def attach(result: AuditResult, yours: AuditResult) -> AuditResult:
    """``result`` with the ``yours`` records of the same data added (plots, findings and reports
    then show ``yours`` next to the other variants); ``config["yours"]`` says what was audited."""
    if (result.data.get("sha256"), result.data.get("rows")) != (yours.data.get("sha256"), yours.data.get("rows")):
        raise FairAuditError("your representation was audited on other data than this audit; audit both on the same data.")
    clash = set(map(tuple, result.records[result.records.variant.isin((YOURS, erased_variant(YOURS)))][["method", "rank"]].to_numpy().tolist()))
    if clash:
        raise ParameterError("this audit already holds a 'yours' variant; audit one representation of your own at a time.")
    config = dict(result.config)
    config[YOURS] = yours.config.get(YOURS, {})
    uncertainty = {method: dict(summary) for method, summary in result.uncertainty.items()}
    for method, summary in yours.uncertainty.items():
        uncertainty.setdefault(method, {})[YOURS] = {key: summary.get(key) for key in ("replicates", "why", "seconds") if key in summary}
    return replace(
        result,
        uncertainty=uncertainty,
        records=pd.concat([result.records, yours.records], ignore_index=True),
        comparisons=pd.concat([result.comparisons, yours.comparisons], ignore_index=True),
        config=config,
        skipped=result.skipped + yours.skipped,
        warnings=list(dict.fromkeys(result.warnings + yours.warnings)),
        seconds=round(result.seconds + yours.seconds, 3),
    )


# ============================================================================ in words
_GAP_METRICS = {"pca": ("max_loss", "loss_gap", ("fair_eig", "fair_sdp", "fair_mw")), "nmf": ("max_rel_loss", "rel_loss_gap", ("fair_mu", "fair_am"))}


def sentences(result: AuditResult, method: str) -> list[str]:
    """What the audit says about ``yours`` in ``method``, next to vanilla and the fair variant at
    the same rank (the largest rank ``yours`` was audited at)."""
    from .audit import whole_metrics
    from .plots import variant_title

    records = result.records
    mine = records[(records.method == method) & (records.variant == YOURS)]
    if mine.empty:
        return []
    rank = int(mine["rank"].max())
    table = whole_metrics(records, method, rank)
    if YOURS not in table.index:
        return []
    out = []
    k = max(len(result.data.get("group_sizes", {})), 2)
    worst, gap, fair_names = _GAP_METRICS.get(method, ("", "", ()))
    if _measured(table, YOURS, worst, gap):  # a components matrix has losses; embeddings have none
        others = [v for v in ("vanilla", *fair_names) if _measured(table, v, worst, gap)][:2]
        compared = "; ".join(f"{variant_title(method, v)} {number(table.loc[v, worst])} (gap {number(table.loc[v, gap])})" for v in others)
        out.append(
            f"At rank {rank}, your representation's largest group {worst.removeprefix('max_').replace('_', ' ')} is "
            f"{number(table.loc[YOURS, worst])} (gap {number(table.loc[YOURS, gap])})" + (f"; {compared}." if compared else ".")
        )
    if _measured(table, YOURS, "unfairness_balanced"):
        line = f"From your rank-{rank} representation a classifier predicts the group with balanced accuracy {table.loc[YOURS, 'unfairness_balanced'] + 1.0 / k:.2f}"
        if _measured(table, "vanilla", "unfairness_balanced"):
            line += f" ({variant_title(method, 'vanilla')}: {table.loc['vanilla', 'unfairness_balanced'] + 1.0 / k:.2f}"
            line += f"; chance {1.0 / k:.2f})."
        else:
            line += f" (chance {1.0 / k:.2f})."
        out.append(line)
    return out


def _measured(table: pd.DataFrame, variant: str, *metrics: str) -> bool:
    """Whether ``table`` (whole-data metrics by variant) has a finite value of every one of
    ``metrics`` for ``variant``."""
    return bool(metrics) and all(m in table.columns for m in metrics) and variant in table.index and all(
        np.isfinite(table.loc[variant, m]) for m in metrics
    )
