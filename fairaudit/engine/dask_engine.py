"""The dask engine: audit a data set that does not fit in memory, on one machine or a cluster.

The PCA family and its per-group ``error``, ``loss``, ``variance_explained`` and ``mmd2`` need only
each group's count, mean and scatter (Samadi et al. 2018, Lemma 4.7; Rathore & Manwani, Lemma 1
and §5.3), which partitions contribute independently. :func:`read_partitioned` therefore reads a
CSV or Parquet data set (a local path, a glob, a folder or any fsspec URL) or a dask DataFrame
partition by partition on a dask scheduler, and keeps only

* the group moments of every row used, reduced with :meth:`GroupMoments.merge` (exact: the audit's
  PCA-family records equal the in-process engine's to rounding);
* the accounting of every row and column (contract 5: rows read and used per group, dropped rows
  by reason, columns left out and why);
* a stratified sample of rows (``sample_rows``, default ``AuditConfig.leakage_max_rows``) for the
  metrics that need rows: ``unfairness``, ``unfairness_balanced`` and ``mmd2_rbf``. The other
  families (NMF, feature selection, CP) are audited on that sample, and the report says so.

Library use, in scikit-learn's spirit (the data are validated once; the audit's configuration
chooses the engine)::

    from distributed import Client
    from fairaudit import AuditConfig, run_audit
    from fairaudit.engine import read_partitioned

    client = Client("tcp://scheduler:8786")   # or Client() for a local cluster; or none: threads
    data = read_partitioned("s3://bucket/customers/*.parquet", sensitive="SEX", missing="drop")
    result = run_audit(data, AuditConfig(engine="dask"))

``read_partitioned`` takes ``prepare``'s options (except ``one_hot``, ``bins`` and imputation,
which need statistics of every partition before the first row is used: a clear error says so)
and ``scheduler=`` (a :class:`distributed.Client`, a scheduler address, or ``None`` for the
active client, else dask's threads in this process). A dask DataFrame is accepted in place of
the path. :class:`PartitionedData` is what it returns; :class:`DaskEngine` (``engine="dask"``)
hands the PCA family its moments — and, given in-memory :class:`~fairaudit.data.AuditData`,
computes the moments of its rows in dask chunks instead.

Everything here imports dask only when it runs: ``import fairaudit`` does not need it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..data import MISSING_POLICIES, SMALL_GROUP_POLICIES, AuditData
from ..data._accounting import group_entries
from ..data._cells import format_number
from ..data._memory import read_only
from ..data._prepare import (
    _check_roles,
    _drop_constant_features,
    _fixed_roles,
    check_group_options,
    drop_small_groups,
    encode_read_groups,
    group_warnings,
    missing_summary,
)
from ..data._roles import FeatureColumns, select_features
from ..data._scaling import check_peaks, check_scaling, overflow_exponents
from ..data._sensitive import _numeric_groups, grouped_values
from ..errors import (
    FairAuditError,
    MissingValueError,
    NoFeaturesError,
    NonNumericColumnError,
    ParameterError,
)
from ..groups import GroupCodes, check_groups
from ..vocabulary import term
from ._partition import PartitionPlan, PartitionSummary, merge_summaries, peaks
from ._sources import BLOCKSIZE, PARTITION_ROWS, open_source, require_dask, shifted
from .local import DataSummary, LocalEngine, RowSample, moments_scaling
from .moments import CHUNK_ROWS, GroupMoments, pairwise_tree

MAX_FEATURES = 256
"""Above this many features a partition's summary grows too large to ship between workers (per
group value, a ``d × d`` scatter and up to ``sample_rows`` candidate rows of ``d`` values: 41 MB per
group value at 256 features and 10,000 rows); such data go through ``engine="local"`` (whose
wide-data path works in the row space)."""
DEFAULT_SAMPLE_ROWS = 10_000
"""The stratified sample's size when none is given: ``AuditConfig.leakage_max_rows``'s default."""
MAX_PASSES = 3
"""Passes over the data at most: a column found empty only in the first partition, or holding
text only in a later one, changes the columns and needs one more pass."""


# ============================================================================ groups without rows
@dataclass(frozen=True)
class CountedGroups:
    """Group labels and row counts — the groups of data whose rows are not in memory
    (``sizes()``, ``n_groups`` and ``labels`` as in :class:`~fairaudit.groups.GroupCodes`).
    ``codes`` are the groups of the rows the engine does hold: its stratified sample."""

    labels: tuple[str, ...]
    counts: np.ndarray
    codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))

    @property
    def n_groups(self) -> int:
        return len(self.labels)

    def sizes(self) -> np.ndarray:
        return np.asarray(self.counts, dtype=np.int64)


# ============================================================================ the bootstrap
REPLICATE_SUMMARY_BYTES = 256 * 2**20
"""The most a partition's summary may hold for the Poisson bootstrap (``B`` replicates × the raw
key combinations × ``d² + d + 1`` numbers); above it, fewer replicates or no intervals, with the
reason (every summary is also sent between workers and merged with a few copies of itself)."""

POISSON_MIN_GROUP_ROWS = 50
"""The dask engine's Poisson bootstrap needs at least this many rows in every group: a group's
total weight is 0 with probability ``e^-n`` and its Poisson weights approach the multinomial
counts of a resample only as ``n`` grows; smaller groups get no intervals, with the reason."""


@dataclass(frozen=True)
class PoissonReplicate:
    """Replicate ``index`` of ``count`` of the dask engine's Poisson bootstrap with seed ``seed``:
    what a PCA-family bootstrap replicate resamples on :class:`PartitionedData`
    (:meth:`PartitionedData.replicate_summary`), in place of row indices."""

    index: int
    count: int
    seed: int


@dataclass(frozen=True)
class _Layout:
    """How a pass's per-key summary becomes the audit's groups and features — what
    :func:`_assemble` decided — kept to summarise another pass over the same data the same way."""

    plan: PartitionPlan
    key_group: dict  # raw key → group code (keys without a kept group are absent)
    columns: np.ndarray
    exponents: np.ndarray
    passes: _Passes  # how to read the data again
    n_keys: int = 0  # raw key combinations in the data (a replicate pass holds B of each key's moments)

    def replicate_bytes(self, count: int) -> int:
        """What ``count`` replicates' per-key moments take in one partition's summary."""
        d = len(self.plan.features)
        return int(count) * max(self.n_keys, 1) * (d * d + d + 1) * 8

    def replicates(self, data: PartitionedData, count: int, seed: int, progress=None) -> list[DataSummary]:
        """``count`` Poisson-bootstrap replicates' summaries from one more pass over the data
        (``progress(done, total)`` hears each partition done; what it raises stops the pass)."""
        plan = replace(self.plan, sample_rows=1, replicates=count, replicate_seed=seed)
        summary = self.passes.reduce(plan, f"the {count} bootstrap replicates of its intervals", progress)
        if summary.digest() != data.source["sha256"]:
            raise FairAuditError(
                f"{data.source['name']} changed since it was read (its partitions' SHA-256 differ): the bootstrap replicates "
                "would describe other data. Read it again (read_partitioned) and audit that."
            )
        key_group = np.array([self.key_group.get(key, -1) for key in summary.keys], dtype=np.intp)
        sizes = data.groups.sizes().astype(float)
        empty = RowSample(np.zeros((0, len(self.columns))), np.zeros(0, dtype=np.intp), data.n_rows)
        found = []
        for b in range(count):
            raw = _group_moments(summary.replicate_moments(b), summary.exponents, key_group, data.groups, self.columns, self.exponents)
            if (raw.counts <= 0).any():
                raise FairAuditError(f"bootstrap replicate {b + 1} drew no row of a group; this should not happen with "
                                     f"{POISSON_MIN_GROUP_ROWS} or more rows per group.")
            ratio = sizes / raw.counts
            raw = GroupMoments(sizes, raw.means, raw.scatter * ratio[:, None, None], raw.labels)
            shift, scale = moments_scaling(raw, data.scaling)
            found.append(DataSummary(raw.affine(shift, scale), empty, shift, scale))
        return found


# ============================================================================ the data
@dataclass(frozen=True, eq=False)
class PartitionedData:
    """A data set audited without being held in memory (returned by :func:`read_partitioned`).

    It has :class:`~fairaudit.data.AuditData`'s description — ``feature_names``, ``groups``
    (labels and sizes), ``sensitive``, ``scaling``, ``label_name``, ``source``, ``log``,
    ``accounting`` (contract 5), ``fingerprint()`` — and, instead of the rows, the group moments
    and a stratified sample (:meth:`summary`); :meth:`sample_data` is the sample as ``AuditData``
    (what the NMF, feature-selection and CP families audit on this engine). ``engine`` describes
    how it was read (partitions, scheduler, sample size).
    """

    feature_names: tuple[str, ...]
    groups: CountedGroups
    sensitive: tuple[str, ...]
    scaling: str
    label_name: str | None
    source: Mapping
    log: tuple[str, ...]
    accounting: Mapping
    engine: Mapping
    _summary: DataSummary = field(repr=False)
    _sample_raw: np.ndarray = field(repr=False)
    _sample_label: np.ndarray | None = field(repr=False)
    _sample_lines: np.ndarray = field(repr=False)
    _redo: object = field(repr=False, default=None)
    _layout: _Layout | None = field(repr=False, default=None)
    _cache: dict = field(default_factory=dict, repr=False)

    tensor_shape = None
    is_tensor = False

    @property
    def n_rows(self) -> int:
        return int(self.accounting["rows_used"])

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def sample_rows(self) -> int:
        return int(self.engine["sample_rows"])

    def group_sizes(self) -> dict[str, int]:
        return {label: int(n) for label, n in zip(self.groups.labels, self.groups.sizes(), strict=True)}

    @property
    def X_raw(self):
        raise ParameterError(
            "this data set was read partition by partition (the dask engine) and its rows are not in memory; "
            f"audit it with {term('engine', 'dask')}, or read it whole with the default engine."
        )

    def summary(self, sample_rows: int, random_state: int = 0) -> DataSummary:
        """The scaled group moments and a stratified sample of at most ``sample_rows`` rows (a new
        pass over the data when the sample asked for differs from the one drawn)."""
        if (int(sample_rows), int(random_state)) == (self.sample_rows, int(self.engine["random_state"])):
            return self._summary
        key = ("summary", int(sample_rows), int(random_state))
        if key not in self._cache:
            if self._redo is None:
                raise ParameterError(f"this data set's sample holds {self.sample_rows:,} rows; read it again with sample_rows={sample_rows}.")
            self._cache[key] = self._redo(int(sample_rows), int(random_state))._summary
        return self._cache[key]

    def replicate_summary(self, draw: PoissonReplicate, progress=None) -> DataSummary:
        """Replicate ``draw.index`` of the Poisson bootstrap of the group moments
        (:meth:`GroupMoments.poisson_replicates`): on its first call for ``(count, seed)`` one more
        pass over the data computes every replicate's moments at once, per key and partition,
        reduced as the moments are. Each group's weights are then scaled to sum to its row count —
        the stratified bootstrap's fixed group sizes (the local engine's multinomial counts
        within each group) — and the scaling is re-estimated on the replicate, as the data
        boundary would on a resample. No row sample (replicates measure only what the moments give).
        ``progress(done, total)`` hears each partition of that pass done; what it raises stops it."""
        key = ("replicates", int(draw.count), int(draw.seed))
        if key not in self._cache:
            if self._layout is None:
                raise ParameterError("this data set cannot be read again for bootstrap replicates; read it with read_partitioned.")
            self._cache[key] = self._layout.replicates(self, int(draw.count), int(draw.seed), progress)
        return self._cache[key][draw.index]

    def sample_data(self) -> AuditData:
        """The stratified sample as in-memory :class:`AuditData` (unscaled rows, the data's
        scaling, the groups of the sample's rows). Its source, log and accounting are this data
        set's: they describe where the rows come from."""
        if "sample" not in self._cache:
            sample = self._summary.sample
            self._cache["sample"] = AuditData(
                X_raw=read_only(self._sample_raw),
                feature_names=self.feature_names,
                groups=GroupCodes(sample.codes, self.groups.labels).without_empty(),
                sensitive=self.sensitive,
                scaling=self.scaling,
                label=self._sample_label,
                label_name=self.label_name,
                lines=self._sample_lines,
                source=self.source,
                log=self.log,
                accounting=self.accounting,
            )
        return self._cache["sample"]

    def fingerprint(self) -> dict:
        """As :meth:`AuditData.fingerprint` (of every row: the rows and groups used, the
        accounting), plus ``engine``; ``sha256`` is that of the partitions' SHA-256s
        (``engine["sha256_of"]`` says so), not of the file's bytes."""
        fingerprint = self.sample_data().fingerprint()
        fingerprint.update(rows=self.n_rows, group_sizes=self.group_sizes(), engine=dict(self.engine))
        return fingerprint

    def cache_key(self) -> str:
        return str(self.source.get("sha256", ""))[:16]

    def where(self, row: int) -> str:
        return f"row {row}"


# ============================================================================ reading
def read_partitioned(
    source,
    *,
    sensitive: str | Sequence[str],
    features: Sequence[str] | None = None,
    label: str | None = None,
    ignore: Sequence[str] = (),
    binarize: Mapping[str, float] | None = None,
    merge: Mapping[str, Mapping] | None = None,
    missing: str = "error",
    scaling: str = "standardize",
    min_group_size: int = 2,
    small_groups: str = "error",
    skip_rows: int = 0,
    header: bool | None = None,
    one_hot: bool = False,
    bins: Mapping[str, int] | None = None,
    scheduler=None,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    random_state: int = 0,
    blocksize: int = BLOCKSIZE,
    partition_rows: int = PARTITION_ROWS,
    storage_options: dict | None = None,
    say=None,
) -> PartitionedData:
    """Read a data set partition by partition on dask and return :class:`PartitionedData`.

    Parameters
    ----------
    source : str or dask DataFrame
        A CSV or Parquet file, a folder of them, a glob (``data/*.parquet``) or any fsspec URL
        (``s3://bucket/data/``; the scheme's driver, e.g. ``s3fs``, must be installed), or a dask
        DataFrame. CSV files are cut into blocks of ``blocksize`` bytes at line ends.
    sensitive, features, label, ignore, binarize, merge, missing, scaling, min_group_size, small_groups,
    skip_rows, header :
        As for :func:`fairaudit.data.prepare` / :func:`~fairaudit.data.read_table`. Column roles
        (numbers or text, identifiers) are judged on the first partition by the same rules;
        ``missing`` is ``"error"`` or ``"drop"`` (applied to every partition and counted).
    one_hot, bins :
        Not available on this engine (their levels and quantiles need every partition before the
        first row is used); giving them is an error.
    scheduler : distributed.Client, str or None
        Where the partitions are read: a client, a scheduler address (``"tcp://host:8786"``), or
        ``None`` — the active :class:`distributed.Client` if there is one, else dask's threads in
        this process.
    sample_rows : int
        Size of the stratified row sample (the audit's ``leakage_max_rows``; every row when the
        data have fewer).
    random_state : int
        Seed of the sample.
    blocksize, partition_rows : int
        Bytes per CSV block and rows per Parquet partition (row groups are not split; one is read
        in batches of 131,072 rows).
    storage_options : dict, optional
        Passed to fsspec (credentials, endpoints) for URLs.
    say : callable, optional
        Called with a line of progress text (the CLI prints it).
    """
    if missing not in MISSING_POLICIES:
        raise ParameterError(f"missing must be one of {', '.join(MISSING_POLICIES)}; got {missing!r}.")
    if missing in ("mean", "median"):
        raise ParameterError(
            f"{term('missing', missing)} is not available with {term('engine', 'dask')}: the fill value needs every "
            f"partition before the first row is used. Drop those rows ({term('missing', 'drop')}) or audit with the "
            f"default engine ({term('engine', 'local')})."
        )
    if one_hot:
        raise ParameterError(
            f"{term('one_hot', True)} is not available with {term('engine', 'dask')} (the levels of every partition are needed "
            f"first); leave text columns out, or audit with the default engine ({term('engine', 'local')})."
        )
    if bins:
        column = next(iter(bins))
        raise ParameterError(
            f"{term('bins', f'{column}=N')} is not available with {term('engine', 'dask')} (exact quantiles need every partition "
            f"first); split at a threshold ({term('binarize', f'{column}=VALUE')}), merge values ({term('merge', column)}), or "
            f"audit with the default engine ({term('engine', 'local')})."
        )
    if small_groups not in SMALL_GROUP_POLICIES:
        raise ParameterError(f"small_groups must be 'error' or 'drop'; got {small_groups!r}.")
    if isinstance(sample_rows, bool) or not isinstance(sample_rows, int | np.integer) or sample_rows < 2 * 8:
        raise ParameterError(f"sample_rows must be a whole number of at least 16; got {sample_rows!r}.")
    check_scaling(scaling)
    require_dask()
    say = say or (lambda text: None)
    with _scheduler(scheduler) as (client, where):
        src = open_source(source, skip_rows=skip_rows, header=header, blocksize=blocksize, partition_rows=partition_rows,
                          storage_options=storage_options)
        head = src.head
        sensitive, binarize, bins, merge = check_group_options(head, sensitive, binarize, bins, merge, min_group_size, small_groups)
        features = _check_roles(head, sensitive, features, label, list(ignore))
        log = [f"read by the dask engine: {src.description}; column roles (numbers or text, identifiers) judged on the first "
               f"partition ({head.n_rows:,} rows)"]
        chosen = select_features(head, features, _fixed_roles(sensitive, label, list(ignore), binarize, bins, merge), False, log)
        _judged_on_head(chosen, head.n_rows, log)
        for column in binarize:
            _numeric_groups(head, column, binarize, {}, log)
        options = dict(missing=missing, scaling=scaling, min_group_size=min_group_size, small_groups=small_groups,
                       merge=merge, binarize=binarize, named=features is not None)
        watch = tuple(e["column"] for e in chosen.excluded if e["reason"] == "empty")

        plan = PartitionPlan(name=src.name, features=tuple(chosen.names), sensitive=tuple(sensitive), binarize=dict(binarize),
                             label=label, watch=watch, sample_rows=int(sample_rows), random_state=int(random_state))
        for _ in range(MAX_PASSES):
            _check_features(plan, src)
            started = time.perf_counter()
            say(f"reading {src.description} on {where}")
            summary = _reduce(src.tasks(plan), plan, client, _every(PROGRESS_SECONDS, say, "partitions read"))
            seconds = time.perf_counter() - started
            say(f"read {int(summary.rows.sum()):,} rows in {seconds:.1f} s")
            revised = _revised_plan(summary, plan, src, chosen, options, log)
            if revised is None:
                break
            plan = revised
        else:
            raise FairAuditError(f"{src.name}: the columns kept changing between passes over the data; audit it with {term('engine', 'local')}.")
        passes = _Passes(src, scheduler, client, where, seconds)

        def redo(sample_size: int, seed: int) -> PartitionedData:
            """The same data with another sample (one more pass)."""
            again = replace(plan, sample_rows=sample_size, random_state=seed)
            return _assemble(passes.reduce(again, f"a sample of {sample_size:,} rows"), again, src, chosen, options, log, passes, redo)

        return _assemble(summary, plan, src, chosen, options, log, passes, redo)


def _judged_on_head(chosen: FeatureColumns, rows: int, log: list[str]) -> None:
    """Say, where a column was left out for what its first-partition cells look like (an
    identifier, text), that the judgement rests on that partition."""
    where = f" (judged on the first partition, {rows:,} rows)"
    for entry in chosen.excluded:
        if entry["reason"] in ("id_like", "text"):
            entry["detail"] += where
    chosen.warnings[:] = [w + where if "looks like an identifier" in w else w for w in chosen.warnings]


def _check_features(plan: PartitionPlan, src) -> None:
    if not plan.features:
        raise NoFeaturesError(
            f"no numeric feature columns are left in {src.name}; choose feature columns ({term('features')})."
        )
    if len(plan.features) > MAX_FEATURES:
        raise ParameterError(
            f"{len(plan.features):,} features are more than the dask engine handles ({MAX_FEATURES:,}: it ships a "
            f"features × features matrix per group value and partition); choose fewer ({term('features')}) or audit with "
            f"the default engine ({term('engine', 'local')}), which works in the row space for wide data."
        )


@contextlib.contextmanager
def _scheduler(scheduler):
    """``(client, where)``: the :class:`distributed.Client` to compute on (``None``: dask's threads
    in this process), and its description for messages."""
    require_dask()
    if scheduler is None:
        client = _active_client()
        if client is None:
            yield None, "dask's threads in this process"
            return
        scheduler = client
    if isinstance(scheduler, str):
        with connect(scheduler) as client:
            yield client, describe_client(client)
        return
    yield scheduler, describe_client(scheduler)


def _compute(obj, client):
    import dask

    return dask.compute(obj, scheduler="threads")[0] if client is None else client.compute(obj).result()


def _active_client():
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


PROGRESS_SECONDS = 10.0
"""At most one progress line per this many seconds while the partitions are read."""


def _every(seconds: float, say, what: str):
    """A ``progress(done, total)`` for :func:`_reduce` that says ``"12 of 40 partitions read (31 s)"``
    at most once per ``seconds`` (not for the last partition: the caller says when the pass is over)."""
    if say is None:
        return None
    started = last = time.perf_counter()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.perf_counter()
        if now - last >= seconds and done < total:
            say(f"{done:,} of {total:,} {what} ({now - started:.0f} s)")
            last = now

    return progress


def _reduce(tasks: list, plan: PartitionPlan, client, progress=None) -> PartitionSummary:
    """One summary from the partitions' summaries: a fixed pairwise tree of merges (the same
    rounding whatever order the workers finish in), each partition's summary freed once merged.

    ``progress(done, total)`` hears the pass begin (``done=0``) and each partition as it is done —
    on a cluster as its future completes, on dask's threads as its task ends — which the command line's lines and the
    audit's ``stage="bootstrap_pass"`` events count. Whatever it raises (the dashboard's
    :class:`~fairaudit.audit.AuditCancelled`) stops the pass: the work still queued on the cluster
    is cancelled and the exception propagates."""
    if not tasks:
        return PartitionSummary.empty(plan)
    total = len(tasks)
    if progress is not None:
        progress(0, total)  # the pass begins: a reader sees it before the first partition is done
    if client is None:
        import dask
        from dask import delayed

        merge = delayed(merge_summaries, pure=True)
        whole = pairwise_tree(tasks, lambda a, b: merge(a, b, plan.sample_rows))
        keys, done = {task.key for task in tasks}, 0

        def finished(key, result, dsk, state, worker) -> None:  # dask's posttask callback, on the scheduling thread
            nonlocal done
            if key in keys:
                done += 1
                progress(done, total)

        if progress is None:
            return dask.compute(whole, scheduler="threads")[0]
        # Registered beside dask's global callbacks (a ProgressBar, a profiler), not instead of them:
        # an explicit callbacks= list makes dask ignore the ones a caller has registered.
        from dask.callbacks import Callback

        with Callback(posttask=finished):
            return dask.compute(whole, scheduler="threads")[0]
    from distributed import as_completed

    parts = client.compute(tasks)
    submitted = list(parts)

    def merge(a, b):
        submitted.append(client.submit(merge_summaries, a, b, plan.sample_rows))
        return submitted[-1]

    whole = pairwise_tree(parts, merge)
    try:
        for done, _ in enumerate(as_completed(parts, loop=client.loop), 1):
            if progress is not None:
                progress(done, total)
        return whole.result()
    except BaseException:
        client.cancel(submitted)
        raise


CLOSED_CLIENT = (
    "{name} was read on a dask client that is now {status} ({where}), and {purpose} need one more pass over its "
    "partitions on that cluster. Keep the client open until the audit returns, or read the data with the scheduler's "
    "address ({scheduler}) so that each pass connects again{otherwise}."
)


@dataclass(frozen=True)
class _Passes:
    """How the data are read again after :func:`read_partitioned`'s pass — for a larger sample
    (``redo``) or the bootstrap replicates — and how long that pass took.

    A later pass runs where the read ran: on the read's own :class:`distributed.Client` while it is
    open (a client the caller passed, or the active one), else a clear error (what to do); on a new
    connection to the address the read was given (the read closed its own); on dask's threads when
    the read used them."""

    src: object
    scheduler: object  # what read_partitioned was given: a Client, an address, or None
    client: object  # the client the read computed on (None: dask's threads in this process)
    where: str
    seconds: float  # wall seconds of the read's pass over the data

    def reduce(self, plan: PartitionPlan, purpose: str, progress=None) -> PartitionSummary:
        """One more pass under ``plan`` (``purpose``: what it is for, in the closed-client error); a
        partition that fails to read raises its error, its lines counted from the start of its file."""
        if isinstance(self.scheduler, str):
            with _scheduler(self.scheduler) as (client, _):
                summary = _reduce(self.src.tasks(plan), plan, client, progress)
        else:
            summary = _reduce(self.src.tasks(plan), plan, self._open_client(purpose), progress)
        if summary.error is not None:
            partition, exc = summary.error
            raise shifted(exc, self.src.shifts(summary).get(partition, 0)) from None
        return summary

    def _open_client(self, purpose: str):
        client = self.client
        if client is None or getattr(client, "status", "running") == "running":
            return client
        otherwise = f", or turn the intervals off ({term('bootstrap', 0)})" if "bootstrap" in purpose else ""
        raise ParameterError(CLOSED_CLIENT.format(name=self.src.name, status=client.status, where=self.where, purpose=purpose,
                                                  scheduler=term("scheduler", "tcp://…"), otherwise=otherwise))


# ============================================================================ after the pass
def _revised_plan(summary: PartitionSummary, plan: PartitionPlan, src, chosen: FeatureColumns, options: dict, log: list[str]):
    """The plan for another pass when the columns must change, else None (raising the first
    partition's error, and the data boundary's errors for text cells in feature columns)."""
    shifts = src.shifts(summary)
    if summary.error is not None:
        partition, exc = summary.error
        raise shifted(exc, shifts.get(partition, 0)) from None
    line_word = "row" if src.format != "csv" else "line"
    revived = [c for c, n in zip(plan.watch, summary.watch_present, strict=True) if n > 0]
    textual = []
    for j, column in enumerate(plan.features):
        if not summary.bad[j]:
            continue
        partition, line, text = summary.first_bad[j]
        where = f"{line_word} {line + shifts.get(partition, 0)}"
        many = f" ({int(summary.bad[j]):,} such cells)" if summary.bad[j] > 1 else ""
        if options["named"] or summary.bad[j] <= 0.05 * summary.present[j]:
            raise NonNumericColumnError(
                f"feature column {column!r} has text {text!r} at {where}{many}; fix or blank those cells, or leave the column "
                f"out ({term('features')} / {term('ignore')})."
            )
        textual.append((column, f"text ({int(summary.bad[j]):,} text cells, the first at {where}, beyond the first partition)"))
    if not revived and not textual:
        return None
    for column, detail in textual:
        j = chosen.names.index(column)
        del chosen.names[j], chosen.values[j], chosen.sources[j]
        chosen.exclude(column, "text", detail)
        log.append(f"left out text column {column!r}: {detail}")
    for column in revived:
        chosen.excluded = [e for e in chosen.excluded if e["column"] != column]
        log[:] = [line for line in log if line != f"left out {column!r}: every cell is empty"]
        chosen.names.append(column)
        chosen.values.append(np.zeros(0))
        chosen.sources.append(column)
    order = {c: i for i, c in enumerate(src.head.columns)}
    ranked = sorted(range(len(chosen.names)), key=lambda j: order.get(chosen.sources[j], len(order)))
    chosen.names[:], chosen.values[:], chosen.sources[:] = ([seq[j] for j in ranked] for seq in (chosen.names, chosen.values, chosen.sources))
    return PartitionPlan(name=plan.name, features=tuple(chosen.names), sensitive=plan.sensitive, binarize=plan.binarize,
                         label=plan.label, watch=tuple(c for c in plan.watch if c not in revived), sample_rows=plan.sample_rows,
                         random_state=plan.random_state)


def _assemble(summary: PartitionSummary, plan: PartitionPlan, src, chosen: FeatureColumns, options: dict, log: list[str],
              passes: _Passes, redo) -> PartitionedData:
    """Groups, accounting, moments and the sample from the reduced summary — :func:`prepare`'s
    steps, on counts per group value instead of rows."""
    log = list(log)
    shifts = src.shifts(summary)
    line_word = "row" if src.format != "csv" else "line"
    for column in plan.watch:  # empty in every partition
        log.append(f"left out {column!r}: every cell is empty in every partition")
    names = list(plan.checked_columns)
    counts = summary.missing.tolist()
    firsts = [f"{line_word} {line + shifts.get(int(p), 0)}" if n else "" for (p, line), n in zip(summary.first_missing.tolist(), counts, strict=True)]
    if summary.rows_missing and options["missing"] == "error":
        raise MissingValueError(
            f"{summary.rows_missing:,} row(s) have missing cells: {missing_summary(names, counts, firsts)}. Choose "
            f"{term('missing', 'drop')} to drop those rows (the dask engine does not impute)."
        )

    # --- groups: each key (a combination of raw sensitive values) is a "row" weighted by its rows
    keys = summary.keys
    per_column = []
    for i, column in enumerate(plan.sensitive):
        values = [key[i] for key in keys]
        if column in plan.binarize:
            threshold = format_number(plan.binarize[column])
            per_column.append((np.array([-1 if v is None else v for v in values], dtype=np.int64),
                               [f"{column}<{threshold}", f"{column}>={threshold}"]))
            continue
        per_column.append(_column_groups(column, values, summary.rows, options, log))
    read_codes, read_groups = encode_read_groups(list(plan.sensitive), per_column)
    read_labels = read_groups.labels if read_groups is not None else ()
    entry_codes, reasons, weights = _entries(read_codes, summary, options["missing"])
    if options["missing"] == "drop" and summary.rows_missing:
        log.append(f"dropped {summary.rows_missing:,} row(s) with missing cells: {missing_summary(names, counts, firsts)}")
    if not (weights[reasons == 0] > 0).any():
        raise MissingValueError(f"no rows of {src.name} are left after dropping rows with missing cells.")
    drop_small_groups(entry_codes, read_labels, reasons, options["min_group_size"], options["small_groups"], "rows", log, weights=weights)
    kept_entries = (reasons == 0) & (weights > 0)
    kept_rows = np.bincount(entry_codes[kept_entries], weights=weights[kept_entries], minlength=len(read_labels)).astype(np.int64)
    present_groups = np.flatnonzero(kept_rows > 0)
    groups = CountedGroups(tuple(read_labels[g] for g in present_groups), kept_rows[present_groups])
    check_groups(groups, min_size=options["min_group_size"], what=f"sensitive column(s) {', '.join(map(repr, plan.sensitive))}")
    remap = np.full(len(read_labels) + 1, -1, dtype=np.intp)  # the last slot: keys without a group
    remap[present_groups] = np.arange(len(present_groups))
    key_group = remap[read_codes]  # -1 for keys without a group or whose group is dropped (small, or no row left)

    # --- constant features over the rows kept
    kept_keys = key_group >= 0
    low, high = summary.low[kept_keys].min(axis=0), summary.high[kept_keys].max(axis=0)
    final = FeatureColumns(names=list(chosen.names), values=[np.array([lo, hi]) for lo, hi in zip(low, high, strict=True)],
                           sources=list(chosen.sources), excluded=list(chosen.excluded), warnings=list(chosen.warnings))
    _drop_constant_features(final, np.ones(2, dtype=bool), log)
    columns = np.array([plan.features.index(name) for name in final.names], dtype=np.intp)
    n_used = int(groups.sizes().sum())
    log.append(f"scaling: {options['scaling']}")

    # --- moments, scaled as the data say
    peak = peaks(summary.low[kept_keys], summary.high[kept_keys])[columns]
    exponents = overflow_exponents(peak[None, :])
    if exponents is not None and options["scaling"] not in ("standardize", "unit_norm"):
        check_peaks(peak, final.names, options["scaling"], n_used * len(columns))
        exponents = None
    exponents = np.zeros(len(columns), dtype=int) if exponents is None else exponents
    raw = _group_moments(summary.moments, summary.exponents, key_group, groups, columns, exponents)
    shift, scale = moments_scaling(raw, options["scaling"])
    sample, sample_raw, sample_label, sample_lines = _sample(summary, key_group, groups, columns, exponents, shift, scale, plan, shifts)
    wide = len(columns) > n_used
    if wide and not sample.is_complete:
        raise ParameterError(
            f"{n_used:,} rows with {len(columns):,} features are more features than rows and more rows than the sample "
            f"({plan.sample_rows:,}); audit these data with the default engine ({term('engine', 'local')})."
        )
    data_summary = DataSummary(None if wide else raw.affine(shift, scale), sample, shift, scale,
                               sample.X if wide else None, GroupCodes(sample.codes, groups.labels) if wide else None)

    entries = group_entries(entry_codes, list(read_labels), reasons, weights)
    accounting = {
        "unit": "rows",
        "rows_read": int(summary.rows.sum()),
        "rows_used": n_used,
        "groups": entries,
        "features": list(final.names),
        "excluded": final.excluded,
        "warnings": final.warnings + group_warnings(entries, options["min_group_size"], "rows"),
    }
    where = passes.where
    engine = {
        "name": "dask",
        "scheduler": where,
        "partitions": len(src.partitions),
        "source": src.description,
        "sample_rows": plan.sample_rows,
        "sample_size": sample.size,
        "random_state": plan.random_state,
        "sha256_of": "the partitions' SHA-256s in order (not the file's bytes)",
        "text": (f"dask ({where}; {src.description}): group moments of all {n_used:,} rows used; unfairness, "
                 f"unfairness_balanced and mmd2_rbf {'on every row' if sample.is_complete else f'on a stratified sample of {sample.size:,} rows'}"),
    }
    source = {
        "name": src.name,
        "sha256": summary.digest(),
        "bytes": src.n_bytes,
        "format": src.format,
        "encoding": src.encoding,
        "delimiter": src.delimiter,
        "rows_read": int(summary.rows.sum()),
        "line_word": line_word,
    }
    return PartitionedData(
        feature_names=tuple(final.names),
        groups=CountedGroups(groups.labels, groups.counts, sample.codes),
        sensitive=tuple(plan.sensitive),
        scaling=options["scaling"],
        label_name=plan.label,
        source=source,
        log=tuple(log),
        accounting=accounting,
        engine=engine,
        _summary=data_summary,
        _sample_raw=sample_raw,
        _sample_label=sample_label,
        _sample_lines=sample_lines,
        _redo=redo,
        _layout=_Layout(
            plan, {key: int(g) for key, g in zip(summary.keys, key_group.tolist(), strict=True) if g >= 0}, columns, exponents, passes,
            len(summary.keys),
        ),
    )


def _column_groups(column: str, values: list, rows: np.ndarray, options: dict, log: list[str]) -> tuple[np.ndarray, list[str]]:
    """One sensitive column's labels and, per key, its label's index: the column's distinct values
    in :func:`~fairaudit.data._sensitive.value_codes`'s order (numbers in numeric order, text
    sorted; a column that is text in any partition is text), merged and checked by the data
    boundary's :func:`grouped_values`."""
    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, float) for v in present)
    if numeric:
        distinct = sorted(set(present))
        texts = [format_number(v) for v in distinct]
        index = {v: i for i, v in enumerate(distinct)}
        codes = np.array([-1 if v is None else index[v] for v in values], dtype=np.int64)
    else:
        as_text = [None if v is None else (format_number(v) if isinstance(v, float) else str(v)) for v in values]
        texts = sorted({v for v in as_text if v is not None})
        index = {v: i for i, v in enumerate(texts)}
        codes = np.array([-1 if v is None else index[v] for v in as_text], dtype=np.int64)
    sizes = np.bincount(codes[codes >= 0], weights=rows[codes >= 0], minlength=len(texts)).astype(np.int64)
    return grouped_values(column, codes, texts, sizes, numeric=numeric, merge=options["merge"], log=log)


def _entries(read_codes: np.ndarray, summary: PartitionSummary, missing: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of every key as entries ``(group code, reason, rows)``: reasons index
    ``DROP_REASONS`` plus one, as :func:`~fairaudit.data._accounting.group_entries` reads them
    (no group value 1, no label 2, missing cells 3; used 0)."""
    codes, reasons, weights = [], [], []
    for k, code in enumerate(read_codes.tolist()):
        if code < 0:
            parts = [(1, summary.rows[k])]
        else:
            complete = summary.rows[k] - summary.no_label[k] - summary.missing_cells[k]
            parts = [(0, complete), (2, summary.no_label[k]), (3 if missing == "drop" else 0, summary.missing_cells[k])]
        for reason, n in parts:
            codes.append(code)
            reasons.append(reason)
            weights.append(n)
    return np.array(codes, dtype=np.intp), np.array(reasons, dtype=np.int8), np.array(weights, dtype=float)


def _group_moments(m: GroupMoments, key_exponents: np.ndarray, key_group: np.ndarray, groups: CountedGroups, columns: np.ndarray,
                   exponents: np.ndarray) -> GroupMoments:
    """The moments of each kept group's rows, on the kept features, at ``exponents``: the keys'
    moments ``m`` (at ``key_exponents``) rescaled exactly (powers of two) and merged into their groups."""
    factor = np.ldexp(1.0, key_exponents[columns] - exponents)
    keys = GroupMoments(m.counts, m.means[:, columns], m.scatter[:, columns][:, :, columns], m.labels)
    return keys.affine(np.zeros(len(columns)), factor).regroup(key_group, groups.n_groups, groups.labels)


def _sample(summary: PartitionSummary, key_group, groups: CountedGroups, columns, exponents, shift, scale, plan, shifts):
    """The stratified sample: each group's quota (:func:`fairaudit.metrics.stratified_quotas`, the
    in-process engine's rule) of its rows with the smallest hashes, in the data's row order."""
    from ..metrics import stratified_quotas

    candidates = summary.candidates
    group = key_group[candidates.key] if candidates.key.size else np.zeros(0, dtype=np.intp)
    chosen = candidates.take(np.flatnonzero(group >= 0), group[group >= 0])
    takes, _ = stratified_quotas(groups.sizes(), plan.sample_rows)
    order = np.lexsort((chosen.order, chosen.hash, chosen.key))
    keys = chosen.key[order]
    starts = np.searchsorted(keys, np.arange(groups.n_groups))
    rank = np.arange(keys.size) - starts[keys]
    picked = order[rank < takes[keys]]
    picked = picked[np.argsort(chosen.order[picked], kind="stable")]
    raw = chosen.X[picked][:, columns]
    scaled = (np.ldexp(raw, -exponents) - shift) * scale
    partitions = (chosen.order[picked] >> 40).astype(np.int64)
    lines = chosen.line[picked] + np.array([shifts.get(int(p), 0) for p in partitions], dtype=np.int64)
    labels = None if chosen.label is None else chosen.label[picked].astype(str)
    return RowSample(scaled, chosen.key[picked].astype(np.intp), int(groups.sizes().sum())), raw, labels, lines


# ============================================================================ the engine
class DaskEngine(LocalEngine):
    """``engine="dask"``: the group moments of :class:`PartitionedData` (computed when it was
    read), or of in-memory :class:`~fairaudit.data.AuditData` in dask chunks of
    :data:`~fairaudit.engine.moments.CHUNK_ROWS` rows on the active client (else threads)."""

    name = "dask"

    def __init__(self, scheduler=None):
        self.scheduler = scheduler

    def replicate_summary(self, data, draw: PoissonReplicate, progress=None) -> DataSummary:
        """Bootstrap replicate ``draw`` of data read partition by partition
        (:meth:`PartitionedData.replicate_summary`; ``progress(done, total)`` hears the partitions
        of its pass)."""
        require_dask()
        return data.replicate_summary(draw, progress)

    def summarise(self, data, *, sample_rows: int, random_state=0, weights=None, scaling=None) -> DataSummary:
        require_dask()
        if isinstance(data, PartitionedData):
            if weights is not None or scaling is not None:
                raise ParameterError(
                    "data read partition by partition have the group moments of every row, not the rows that weights or held-out "
                    f"rows select (bootstrap replicates come from replicate_summary); audit with {term('engine', 'local')} for those."
                )
            return data.summary(sample_rows, random_state)
        return super().summarise(data, sample_rows=sample_rows, random_state=random_state, weights=weights, scaling=scaling)

    def raw_moments(self, X: np.ndarray, groups, weights=None) -> GroupMoments:
        from dask import delayed

        part = delayed(GroupMoments.from_rows, pure=True)
        tasks = [part(X[s : s + CHUNK_ROWS], groups.codes[s : s + CHUNK_ROWS], n_groups=groups.n_groups, labels=groups.labels,
                      weights=None if weights is None else weights[s : s + CHUNK_ROWS])
                 for s in range(0, X.shape[0], CHUNK_ROWS)]
        whole = pairwise_tree(tasks, delayed(GroupMoments.merge, pure=True))
        with _scheduler(self.scheduler) as (client, _):
            return _compute(whole, client)


# ============================================================================ clusters
CONNECT_SECONDS = 10.0
"""How long to try reaching a scheduler before saying it cannot be reached."""


def connect(address: str, timeout: float | None = None):
    """A :class:`distributed.Client` of the scheduler at ``address``, or a clear error."""
    require_dask()
    try:
        from distributed import Client
    except ImportError:
        raise ParameterError("connecting to a dask scheduler needs the distributed package: pip install 'fairaudit[dask]'.") from None
    try:
        return Client(address, timeout=CONNECT_SECONDS if timeout is None else timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ParameterError(
            f"cannot reach the dask scheduler at {address} ({' '.join(str(exc).split())[:200]}); check the address and "
            f"that the scheduler is running, or leave out {term('scheduler')} to start a local cluster."
        ) from None


def describe_client(client) -> str:
    """``"a local cluster of 4 workers (4 threads)"`` / ``"the dask scheduler at tcp://… (…)"``."""
    info = client.scheduler_info()
    workers = info.get("workers", {})
    threads = sum(w.get("nthreads", 0) for w in workers.values())
    size = f"{len(workers)} worker{'s' if len(workers) != 1 else ''}, {threads} thread{'s' if threads != 1 else ''}"
    if getattr(client, "cluster", None) is not None:
        return f"a local dask cluster ({size})"
    return f"the dask scheduler at {client.scheduler.address} ({size})"


@contextlib.contextmanager
def dask_session(scheduler: str | None = None, *, n_workers: int | None = None, memory_limit: str | None = None):
    """A :class:`distributed.Client` for the command line: connected to ``scheduler``, or of a
    local cluster of ``n_workers`` worker processes (one thread each; default: one per core) with
    ``memory_limit`` each (default: dask's share of this machine's memory). Closed on exit.
    Yields ``(client, description)``."""
    require_dask()
    if scheduler:
        with connect(scheduler) as client:
            yield client, describe_client(client)
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ParameterError("a local dask cluster needs the distributed package: pip install 'fairaudit[dask]'.") from None
    import os

    workers = n_workers or os.cpu_count() or 1
    limit = memory_limit or "auto"
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=limit, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster, set_as_default=False) as client:
        limits = [w.get("memory_limit") or 0 for w in client.scheduler_info().get("workers", {}).values()]
        per_worker = _bytes_text(min(limits)) if limits else "unknown"
        yield client, (f"a local cluster of {workers} worker process{'es' if workers != 1 else ''} (1 thread each, memory "
                       f"limit {per_worker} per worker)")


def _bytes_text(n) -> str:
    if not n:
        return "none"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
