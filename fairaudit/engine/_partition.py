"""What one partition of a data set contributes to an audit, and how two contributions merge.

The dask engine (:mod:`fairaudit.engine.dask_engine`) never holds the whole data set. Each
partition — a block of a CSV file, row groups of a Parquet file, a partition of a dask DataFrame —
is read by the data boundary's own rules into a :class:`~fairaudit.data.RawTable` and summarised
here into a :class:`PartitionSummary`, keyed by the *raw values* of the sensitive columns rather
than by group (which values form a group — values merged, small groups dropped — is known only
once every partition has been seen):

* per key, the rows read and what happens to them (complete; no label; a missing feature cell;
  keys with a missing sensitive value are rows without a group);
* per key, the :class:`~fairaudit.engine.GroupMoments` of the complete rows (count, mean,
  centred scatter), on values divided by a power of two where a column would overflow them
  (the data boundary's exact rule, :mod:`fairaudit.data._scaling`), with the exponents;
* per key and feature the smallest and largest complete value (constant columns; magnitudes);
* per column the missing cells and the first of them; per feature the text cells where numbers
  belong; per watched column (empty in the first partition) its present cells;
* when a bootstrap asks for them (``PartitionPlan.replicates``), per key and replicate the
  moments of the complete rows under Poisson(1) row weights
  (:meth:`GroupMoments.poisson_replicates`, seeded by (seed, partition, first row));
* sample candidates: per key the complete rows with the smallest hash of (seed, partition, row).
  The smallest hashes of a set of rows are a uniform sample of it without replacement, and the
  smallest of a union are the smallest of the parts' smallest (bottom-k sampling), so after the
  reduction a group's quota is drawn from its keys' candidates exactly.

:meth:`PartitionSummary.merge` is associative — counts add, moments merge by Chan, Golub &
LeVeque's update, candidates keep the smallest hashes, "first" cells keep the earliest partition —
so a tree reduction over the partitions gives one summary whatever the partitioning and whatever
order the workers finish in (the sample's rows depend on the partitioning through the hash).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..data._scaling import overflow_exponents
from ..data._sensitive import _numeric_groups, value_codes
from ..errors import FairAuditError, UnknownColumnError
from .moments import GroupMoments

FIRST_NONE = np.iinfo(np.int64).max
"""Partition index of a "first" cell that was not seen."""


@dataclass(frozen=True)
class PartitionPlan:
    """What every partition computes (sent to the workers; plain, picklable values)."""

    name: str
    features: tuple[str, ...]
    sensitive: tuple[str, ...]
    binarize: dict = field(default_factory=dict)
    label: str | None = None
    watch: tuple[str, ...] = ()
    sample_rows: int = 10_000
    random_state: int = 0
    replicates: int = 0
    """Poisson-bootstrap replicates of the moments to compute (0: none; a pass for the intervals)."""
    replicate_seed: int = 0

    @property
    def checked_columns(self) -> tuple[str, ...]:
        """The columns whose missing cells are counted, in the order messages list them."""
        return self.features + self.sensitive + ((self.label,) if self.label else ())

    @property
    def read_columns(self) -> tuple[str, ...]:
        """Every column a partition reads, each once: the checked ones and the watched ones."""
        return tuple(dict.fromkeys(self.features + self.sensitive + self.watch + ((self.label,) if self.label else ())))


@dataclass
class Candidates:
    """Sample candidates: complete rows with their key, hash, position and raw values."""

    key: np.ndarray  # (m,) index into the summary's keys
    hash: np.ndarray  # (m,) uint64
    order: np.ndarray  # (m,) int64: partition << 40 | row — the rows' order in the data set
    line: np.ndarray  # (m,) int64: the row's line (relative to its partition's block for CSV)
    X: np.ndarray  # (m, d) raw feature values
    label: np.ndarray | None  # (m,) label text

    @classmethod
    def empty(cls, d: int, with_label: bool) -> Candidates:
        return cls(np.zeros(0, np.intp), np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros((0, d)), np.zeros(0, dtype=object) if with_label else None)

    def take(self, rows: np.ndarray, key: np.ndarray | None = None) -> Candidates:
        return Candidates(self.key[rows] if key is None else key, self.hash[rows], self.order[rows], self.line[rows],
                          self.X[rows], None if self.label is None else self.label[rows])

    @staticmethod
    def concat(parts: list[Candidates]) -> Candidates:
        labels = [p.label for p in parts]
        return Candidates(
            np.concatenate([p.key for p in parts]),
            np.concatenate([p.hash for p in parts]),
            np.concatenate([p.order for p in parts]),
            np.concatenate([p.line for p in parts]),
            np.concatenate([p.X for p in parts]),
            None if labels[0] is None else np.concatenate(labels),
        )

    def smallest(self, per_key: int) -> Candidates:
        """At most ``per_key`` rows of each key: those with the smallest hashes."""
        rows = smallest_rows(self.key, self.hash, per_key)
        return self if rows.size == self.key.size else self.take(rows)


def smallest_rows(keys: np.ndarray, hashes: np.ndarray, per_key: int) -> np.ndarray:
    """Indices of at most ``per_key`` entries of each key, those with the smallest hashes (a
    selection per key, no sort; 64-bit hashes do not tie in practice)."""
    keep = []
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        if rows.size > per_key:
            rows = rows[np.argpartition(hashes[rows], per_key - 1)[:per_key]]
        keep.append(rows)
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.intp)


@dataclass
class PartitionSummary:
    """One partition's (or a merged set of partitions') contribution; see the module docstring."""

    keys: list[tuple]
    rows: np.ndarray  # (K,) rows read per key
    no_label: np.ndarray  # (K,) rows whose label is missing (group present)
    missing_cells: np.ndarray  # (K,) rows with a missing feature cell (group and label present)
    moments: GroupMoments  # (K groups) of the complete rows, values times 2^-exponents
    exponents: np.ndarray  # (d,) int
    low: np.ndarray  # (K, d) smallest complete value (+inf when none)
    high: np.ndarray  # (K, d) largest complete value (-inf when none)
    missing: np.ndarray  # (c,) missing cells per checked column
    first_missing: np.ndarray  # (c, 2) (partition, line) of the first missing cell
    rows_missing: int  # rows with any missing cell
    bad: np.ndarray  # (d,) text cells in feature columns
    present: np.ndarray  # (d,) non-missing cells in feature columns
    first_bad: list  # (d,) (partition, line, text) or None
    watch_present: np.ndarray  # (w,) present cells of the watched columns
    candidates: Candidates
    newlines: dict = field(default_factory=dict)  # partition -> line ends in its block (CSV)
    row_counts: dict = field(default_factory=dict)  # partition -> rows
    digests: dict = field(default_factory=dict)  # (partition, first row) -> sha256 of what that read covered
    error: tuple | None = None  # (partition, exception): the first partition's failure
    replicates: GroupMoments | None = None  # (B·K groups: replicate b, key g at b·K + g) Poisson-bootstrap moments

    # ------------------------------------------------------------------ construction
    @classmethod
    def failed(cls, plan: PartitionPlan, partition: int, exc: FairAuditError, newlines: int = 0) -> PartitionSummary:
        """A partition that could not be read: its error travels with the reduction, so the
        first failing partition is reported with lines counted from the start of its file."""
        empty = cls.empty(plan)
        empty.error = (partition, exc)
        empty.newlines = {partition: newlines}
        return empty

    @classmethod
    def empty(cls, plan: PartitionPlan) -> PartitionSummary:
        d, c = len(plan.features), len(plan.checked_columns)
        return cls(
            keys=[], rows=np.zeros(0, np.int64), no_label=np.zeros(0, np.int64), missing_cells=np.zeros(0, np.int64),
            moments=GroupMoments.empty(0, d), exponents=np.zeros(d, dtype=int),
            low=np.zeros((0, d)), high=np.zeros((0, d)),
            missing=np.zeros(c, np.int64), first_missing=np.full((c, 2), FIRST_NONE, np.int64), rows_missing=0,
            bad=np.zeros(d, np.int64), present=np.zeros(d, np.int64), first_bad=[None] * d,
            watch_present=np.zeros(len(plan.watch), np.int64), candidates=Candidates.empty(d, plan.label is not None),
            replicates=GroupMoments.empty(0, d) if plan.replicates else None,
        )

    # ------------------------------------------------------------------ merging
    def merge(self, other: PartitionSummary, sample_rows: int) -> PartitionSummary:
        """The summary of both row sets (associative; ``sample_rows`` candidates kept per key)."""
        keys = list(dict.fromkeys(self.keys + other.keys))
        position = {key: i for i, key in enumerate(keys)}
        mine = np.array([position[k] for k in self.keys], dtype=np.intp)
        theirs = np.array([position[k] for k in other.keys], dtype=np.intp)
        exponents = np.maximum(self.exponents, other.exponents)
        moments = _merged(self.moments, self.exponents, mine, other.moments, other.exponents, theirs, len(keys), exponents)
        firsts = np.where(_earlier(other.first_missing, self.first_missing)[:, None], other.first_missing, self.first_missing)
        candidates = Candidates.concat([self.candidates.take(slice(None), mine[self.candidates.key]),
                                        other.candidates.take(slice(None), theirs[other.candidates.key])])
        return PartitionSummary(
            keys=keys,
            rows=_added(self.rows, mine, other.rows, theirs, len(keys)),
            no_label=_added(self.no_label, mine, other.no_label, theirs, len(keys)),
            missing_cells=_added(self.missing_cells, mine, other.missing_cells, theirs, len(keys)),
            moments=moments,
            exponents=exponents,
            low=_extreme(np.minimum, np.inf, self.low, mine, other.low, theirs, len(keys)),
            high=_extreme(np.maximum, -np.inf, self.high, mine, other.high, theirs, len(keys)),
            missing=self.missing + other.missing,
            first_missing=firsts,
            rows_missing=self.rows_missing + other.rows_missing,
            bad=self.bad + other.bad,
            present=self.present + other.present,
            first_bad=[min((x for x in pair if x is not None), default=None) for pair in zip(self.first_bad, other.first_bad, strict=True)],
            watch_present=self.watch_present + other.watch_present,
            candidates=candidates.smallest(sample_rows),
            newlines=_summed(self.newlines, other.newlines),
            row_counts=_summed(self.row_counts, other.row_counts),
            digests={**self.digests, **other.digests},
            error=min((e for e in (self.error, other.error) if e is not None), default=None, key=lambda e: e[0]),
            replicates=_merged_replicates(self, mine, other, theirs, len(keys), exponents),
        )

    @property
    def n_replicates(self) -> int:
        """How many bootstrap replicates :attr:`replicates` holds (0: none)."""
        return 0 if self.replicates is None or not self.keys else self.replicates.n_groups // len(self.keys)

    def replicate_moments(self, b: int) -> GroupMoments:
        """Replicate ``b``'s moments per key (as :attr:`moments`)."""
        return self.replicates.replicate(b, len(self.keys))

    def digest(self) -> str:
        """SHA-256 of the partitions' SHA-256s, in partition order (not the file's own hash)."""
        combined = hashlib.sha256()
        for partition in sorted(self.digests):
            combined.update(bytes.fromhex(self.digests[partition]))
        return combined.hexdigest()


def merge_summaries(a: PartitionSummary, b: PartitionSummary, sample_rows: int) -> PartitionSummary:
    return a.merge(b, sample_rows)


# ---------------------------------------------------------------------- one partition
def summarise_table(table, plan: PartitionPlan, partition: int, *, newlines: int = 0, offset: int = 0) -> PartitionSummary:
    """The summary of one partition (or of rows ``offset …`` of it) read into a
    :class:`~fairaudit.data.RawTable`.

    ``newlines`` is the number of line ends in the partition's block of a CSV file (the
    lines before a later block are counted from them, after the reduction)."""
    for column in plan.read_columns:
        if column not in table.columns:
            raise UnknownColumnError(
                f"{table.name}: column {column!r} is missing from this part of the data (partition {partition}); every "
                f"file and partition must have the columns of the first ({', '.join(map(repr, table.columns[:8]))}"
                f"{' …' if len(table.columns) > 8 else ''} here)."
            )
    n, d = table.n_rows, len(plan.features)
    if n == 0:
        empty = PartitionSummary.empty(plan)
        empty.newlines, empty.row_counts = {partition: newlines}, {partition: 0}
        return empty
    X = np.empty((n, d), order="F")
    feature_missing = []
    bad = np.zeros(d, np.int64)
    present = np.zeros(d, np.int64)
    first_bad: list = [None] * d
    for j, column in enumerate(plan.features):
        parsed = table.parsed(column)
        X[:, j] = parsed.values
        feature_missing.append(parsed.missing | parsed.bad if parsed.bad.any() else parsed.missing)
        present[j] = n - int(parsed.missing.sum())
        if parsed.bad.any():
            bad[j] = int(parsed.bad.sum())
            row = int(np.argmax(parsed.bad))
            first_bad[j] = (partition, table.line_of(row), table.cell(column, row))
    parts, values = zip(*(_sensitive_codes(table, column, plan) for column in plan.sensitive), strict=True)
    group_missing = np.logical_or.reduce([codes < 0 for codes in parts])
    if plan.label:
        label_codes, label_values = value_codes(table, plan.label)
        label_missing = label_codes < 0
    else:
        label_codes, label_values, label_missing = None, [], np.zeros(n, dtype=bool)
    any_feature_missing = np.logical_or.reduce(feature_missing)

    key_index, combos = _key_index(parts)
    keys = [tuple(None if c < 0 else values[i][c] for i, c in enumerate(combo)) for combo in combos]
    K = len(keys)
    has_label = ~group_missing & label_missing
    has_missing = ~group_missing & ~label_missing & any_feature_missing
    incomplete = group_missing | label_missing | any_feature_missing

    # complete rows sorted by key: each key's rows are one slice (moments, extremes and sample per slice)
    rows = np.flatnonzero(~incomplete) if incomplete.any() else None
    kc = key_index if rows is None else key_index[rows]
    order = np.argsort(kc.astype(np.int16) if K < 2**15 else kc, kind="stable")
    rows = order if rows is None else rows[order]
    bounds = np.searchsorted(kc[order], np.arange(K + 1))
    Xs = X[rows]
    low, high = np.full((K, d), np.inf), np.full((K, d), -np.inf)
    for g in range(K):
        if bounds[g + 1] > bounds[g]:
            block = Xs[bounds[g] : bounds[g + 1]]
            low[g], high[g] = block.min(axis=0), block.max(axis=0)
    exponents = overflow_exponents(peaks(low, high)[None, :])
    exponents = np.zeros(d, dtype=int) if exponents is None else exponents
    moments = GroupMoments.from_grouped(np.ldexp(Xs, -exponents) if exponents.any() else Xs, bounds)

    masks = feature_missing + [codes < 0 for codes in parts] + ([label_missing] if plan.label else [])
    missing = np.array([int(m.sum()) for m in masks], dtype=np.int64)
    first_missing = np.array([(partition, table.line_of(int(np.argmax(m)))) if m.any() else (FIRST_NONE, FIRST_NONE) for m in masks],
                             dtype=np.int64).reshape(len(masks), 2)

    positions = rows.astype(np.int64) + offset
    slot = np.repeat(np.arange(K), np.diff(bounds))
    hashes = row_hashes(plan.random_state, partition, positions)
    picked = smallest_rows(slot, hashes, plan.sample_rows)  # indices into the sorted complete rows
    candidates = Candidates(slot[picked], hashes[picked], (np.int64(partition) << 40) | positions[picked],
                            table.lines[rows[picked]].astype(np.int64), Xs[picked],
                            None if label_codes is None else np.asarray(label_values, dtype=object)[label_codes[rows[picked]]])
    return PartitionSummary(
        keys=keys,
        rows=np.bincount(key_index, minlength=K).astype(np.int64),
        no_label=np.bincount(key_index[has_label], minlength=K).astype(np.int64),
        missing_cells=np.bincount(key_index[has_missing], minlength=K).astype(np.int64),
        moments=moments,
        exponents=exponents,
        low=low,
        high=high,
        missing=missing,
        first_missing=first_missing,
        rows_missing=int(incomplete.sum()),
        bad=bad,
        present=present,
        first_bad=first_bad,
        watch_present=np.array([n - int(table.missing(c).sum()) for c in plan.watch], dtype=np.int64),
        candidates=candidates,
        newlines={partition: newlines},
        row_counts={partition: n},
        digests={(partition, offset): table.sha256 or _content_digest(X, key_index)},
        replicates=_replicate_moments(Xs, exponents, bounds, plan, partition, offset),
    )


def _replicate_moments(Xs, exponents, bounds, plan: PartitionPlan, partition: int, offset: int) -> GroupMoments | None:
    """The Poisson-bootstrap moments of the complete rows per key (``plan.replicates`` of them),
    at the same ``exponents`` as :attr:`PartitionSummary.moments`; ``None`` when none are asked."""
    if not plan.replicates:
        return None
    rng = np.random.default_rng([plan.replicate_seed, partition, offset])
    return GroupMoments.poisson_replicates(np.ldexp(Xs, -exponents) if exponents.any() else Xs, bounds, rng, plan.replicates)


def _sensitive_codes(table, column: str, plan: PartitionPlan) -> tuple[np.ndarray, list]:
    """Per row, the index of its raw value (-1 where missing), and the values: numbers as floats
    (their order and labels are decided once every partition is seen), text as stripped strings,
    a binarised column's side (0 below the threshold, 1 at or above; the data boundary's rule)."""
    if column in plan.binarize:
        codes, _ = _numeric_groups(table, column, plan.binarize, {}, [])
        return codes, [0, 1]
    return value_codes(table, column, numbers_as_text=False)


def peaks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per feature, the largest magnitude among keys' extremes (keys without a row left out)."""
    magnitude = np.maximum(np.abs(low), np.abs(high))
    return np.where(np.isfinite(magnitude), magnitude, 0.0).max(axis=0, initial=0.0)


def _key_index(parts: tuple[np.ndarray, ...]) -> tuple[np.ndarray, list[tuple]]:
    """Per row, the index of its combination of per-column codes (-1 = missing) among the
    combinations present, and those combinations: a mixed-radix number per row, counted."""
    radices = [int(codes.max(initial=-1)) + 2 for codes in parts]
    combined = np.zeros(parts[0].size, dtype=np.int64)
    for codes, radix in zip(parts, radices, strict=True):
        combined = combined * radix + (codes + 1)
    total = int(np.prod(radices, dtype=np.float64))
    if total <= 1 << 22:
        counts = np.bincount(combined, minlength=total)
        present = np.flatnonzero(counts)
        lookup = np.full(total, -1, dtype=np.intp)
        lookup[present] = np.arange(present.size)
        index = lookup[combined]
    else:
        present, index = np.unique(combined, return_inverse=True)
    combos = []
    for value in present.tolist():
        digits = []
        for radix in reversed(radices):
            value, digit = divmod(value, radix)
            digits.append(digit - 1)
        combos.append(tuple(reversed(digits)))
    return index.astype(np.intp).ravel(), combos


def row_hashes(random_state: int, partition: int, rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row of (seed, partition, row): SplitMix64 (Steele, Lea & Flood 2014)."""
    seed = _splitmix64(np.array([int(random_state) & (2**64 - 1)], dtype=np.uint64))
    position = (np.uint64(partition) << np.uint64(40)) | rows.astype(np.uint64)
    return _splitmix64(position ^ seed)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _content_digest(X: np.ndarray, key_index: np.ndarray) -> str:
    digest = hashlib.sha256(np.asfortranarray(X).T.data)  # the columns in turn, without a copy
    digest.update(np.ascontiguousarray(key_index).data)
    return digest.hexdigest()


# ---------------------------------------------------------------------- merging helpers
def _rescaled(moments: GroupMoments, have: np.ndarray, want: np.ndarray) -> GroupMoments:
    """Moments of values times ``2^-have`` as moments of values times ``2^-want`` (``want ≥ have``):
    multiplying by a power of two is exact, so this equals computing them at ``want``."""
    if np.array_equal(have, want):
        return moments
    return moments.affine(np.zeros(moments.n_features), np.ldexp(1.0, have - want))


def _spread(moments: GroupMoments, slots: np.ndarray, k: int) -> GroupMoments:
    """``moments`` with its groups placed at ``slots`` of ``k`` (empty elsewhere)."""
    d = moments.n_features
    counts, means, scatter = np.zeros(k), np.zeros((k, d)), np.zeros((k, d, d))
    counts[slots], means[slots], scatter[slots] = moments.counts, moments.means, moments.scatter
    return GroupMoments(counts, means, scatter, tuple(str(i) for i in range(k)))


def _merged(a: GroupMoments, exponents_a, slots_a, b: GroupMoments, exponents_b, slots_b, k: int, exponents) -> GroupMoments:
    """Moments of ``k`` groups at ``exponents``: ``a``'s groups placed at ``slots_a`` merged with
    ``b``'s at ``slots_b``."""
    return _spread(_rescaled(a, exponents_a, exponents), slots_a, k).merge(_spread(_rescaled(b, exponents_b, exponents), slots_b, k))


def _merged_replicates(a: PartitionSummary, slots_a, b: PartitionSummary, slots_b, k: int, exponents) -> GroupMoments | None:
    """Both summaries' replicate moments merged as :attr:`PartitionSummary.moments` are, replicate
    ``r``'s key ``g`` placed at ``r·k + g`` (a side without keys adds nothing)."""
    if a.replicates is None or b.replicates is None:
        return None
    count = max(a.n_replicates, b.n_replicates)

    def stacked(slots):
        return (np.arange(count)[:, None] * k + slots[None, :]).ravel()

    return _merged(a.replicates, a.exponents, stacked(slots_a), b.replicates, b.exponents, stacked(slots_b), count * k, exponents)


def _added(a, slots_a, b, slots_b, k) -> np.ndarray:
    out = np.zeros(k, np.int64)
    np.add.at(out, slots_a, a)
    np.add.at(out, slots_b, b)
    return out


def _extreme(how, fill, a, slots_a, b, slots_b, k) -> np.ndarray:
    out = np.full((k, a.shape[1] if a.ndim == 2 else b.shape[1]), fill)
    out[slots_a] = how(out[slots_a], a)
    out[slots_b] = how(out[slots_b], b)
    return out


def _summed(a: dict, b: dict) -> dict:
    return {key: a.get(key, 0) + b.get(key, 0) for key in dict.fromkeys([*a, *b])}


def _earlier(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise: ``a``'s (partition, line) comes before ``b``'s."""
    return (a[:, 0] < b[:, 0]) | ((a[:, 0] == b[:, 0]) & (a[:, 1] < b[:, 1]))


