"""How long an audit will take, roughly, before it starts — so that the CLI can say so (or refuse
without ``--allow-slow``) and the dashboard can say so beside its Run button.

A model fitted to measured default audits (ten ranks, default variants, no intervals) on two
cores, 2026-11-22 (after issue 13's second pass; the model before it was fitted to audits 2–100×
slower): the default sample 600 × 10 took PCA 0.6 s, NMF 5.8 s, feature selection 0.5 s, CP 4.1 s;
the 4,165 × 12 credit table 1.4, 4.8, 1.9 and 9.9 s; the 30,000 × 22 credit file 2.0, 31.7, 15.1
and 7.1 s (CP skips KHSIC above ``khsic_max_rows``, 5,000 entities); 50 × 500 (busy machine) 1.0,
20.8, 40.1 and 1.1 s.
The PCA family works in the row space when rows are fewer than features, so its
eigen-decompositions grow with ``s³``, ``s = min(rows, features)``, plus JEVD's Jacobi sweeps on
at most 100 dimensions (measured before, shared cores: 300 × 2,000 20–25 s, 2,000 × 300 24 s,
1,000 × 1,000 166–206 s); its leakage tests and gap test read a sample of at most 10,000 rows, and
one pass over every row gives the moments. It is scaled by the number of ranks asked for; family
options are not modelled. The bootstrap replicates are added from
:func:`fairaudit.uncertainty.replicate_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .audit import FAMILY_TITLES, AuditConfig, rank_count
from .formatting import duration, plural
from .uncertainty import ReplicateCost, default_replicates, pca_dimension_seconds, replicate_seconds, resolve_replicates

__all__ = [
    "FAMILY_COST",
    "Expected",
    "data_parts",
    "default_count",
    "duration",
    "expected_data_seconds",
    "expected_parts",
    "expected_seconds",
    "expected_text",
    "family_replicate_cost",
    "poisson_replicate_cost",
]


def _cpd_seconds(n: int, d: int) -> float:
    """The CP family's default audit: KHSIC's fits cost most of it, and the audit runs them up to
    its ``khsic_max_rows`` entities (:data:`fairaudit.cpd.audit.DEFAULT_OPTIONS`, the one place
    of that limit), skipping them above."""
    from .cpd.audit import DEFAULT_OPTIONS  # here, not at the top: the CP package loads only when a CP audit is costed

    return 3.0 + (1.4e-4 if n <= DEFAULT_OPTIONS["khsic_max_rows"] else 6e-6) * n * d


FAMILY_COST = {
    "pca": lambda n, d: 0.5 + pca_dimension_seconds(min(n, d)) + 1.5e-4 * min(n, 10_000) + 5e-8 * n * d,
    "nmf": lambda n, d: 4.0 + 4.2e-5 * n * d + 0.03 * d,
    "fs": lambda n, d: 0.2 + 5e-4 * n + 3e-7 * d**3,
    "cpd": _cpd_seconds,
}
"""Per family, seconds of its default audit of ``n`` rows × ``d`` features (see the module docstring)."""


@dataclass(frozen=True)
class Expected:
    """One family's expected time: its fits, and its bootstrap replicates (the intervals)."""

    fits: float
    replicates: int
    bootstrap: float

    @property
    def seconds(self) -> float:
        return self.fits + self.bootstrap


def expected_parts(n_rows: int, n_features: int, config: AuditConfig, *, n_groups: int | None = None,
                   costs: dict[str, ReplicateCost] | None = None) -> dict[str, Expected]:
    """Per family of ``config``, the expected seconds of auditing ``n_rows × n_features`` data
    (``n_groups`` groups, when known): the fits (:data:`FAMILY_COST`, scaled by the number of
    ranks) and the bootstrap replicates of the intervals (as many as ``config.bootstrap`` resolves
    to, at ``costs[family]``, else :func:`fairaudit.uncertainty.replicate_seconds` each)."""
    ranks = None if config.ranks is None else len(config.ranks)
    scale = 1.0 if ranks is None else max(1, ranks) / 10
    parts = {}
    for m in config.methods:
        if m not in FAMILY_COST:
            continue
        cost = (costs or {}).get(m) or family_replicate_cost(m, config, n_rows, n_features, n_groups)
        replicates = resolve_replicates(m, config.bootstrap, cost=cost)[0]
        parts[m] = Expected(FAMILY_COST[m](n_rows, n_features) * scale, replicates, cost.seconds(replicates))
    return parts


def family_replicate_cost(method: str, config: AuditConfig, n_rows: int, n_features: int, n_groups: int | None = None) -> ReplicateCost:
    """The predicted cost of ``method``'s bootstrap replicates on ``n_rows × n_features`` data under
    ``config``: at the ranks its audit sweeps (:func:`fairaudit.audit.rank_count`) and, for the PCA
    family, its groups — what the audit itself predicts (:meth:`FamilyAudit.replicate_cost`)."""
    return ReplicateCost(replicate_seconds(method, n_rows, n_features, rank_count(method, config, n_rows, n_features), n_groups))


def default_count(method: str, config: AuditConfig, n_rows: int, n_features: int, n_groups: int | None = None) -> tuple[int, str]:
    """``(replicates, why)``: the default number of bootstrap replicates ``method``'s audit of such
    data will run under ``config`` (:func:`fairaudit.uncertainty.default_replicates` at
    :func:`family_replicate_cost`) — the dashboard's placeholder, the count the audit runs."""
    return default_replicates(method, cost=family_replicate_cost(method, config, n_rows, n_features, n_groups))


def data_parts(data, config: AuditConfig) -> dict[str, Expected]:
    """:func:`expected_parts` for ``data`` as the audit will see them: their groups counted; read
    partition by partition (the dask engine's :class:`~fairaudit.engine.PartitionedData`), the
    other families audit the stratified sample, the PCA family fits from the moments (its pass over
    the rows is behind it) and its Poisson-bootstrap replicates cost one more pass over the data
    (:meth:`PartitionedData.replicate_cost`; none when the engine gives no intervals)."""
    from .engine import _no_poisson_bootstrap, dask_instance

    groups = data.groups.n_groups
    if not dask_instance(data, "PartitionedData"):
        return expected_parts(data.n_rows, data.n_features, config, n_groups=groups)
    parts = expected_parts(min(data.n_rows, data.sample_rows), data.n_features, config, n_groups=groups)
    if "pca" in parts:
        refused = config.bootstrap != 0 and _no_poisson_bootstrap(data, config) is not None
        cost = ReplicateCost(0.0) if refused else data.replicate_cost(rank_count("pca", config, data.n_rows, data.n_features))
        replicates = 0 if refused else resolve_replicates("pca", config.bootstrap, cost=cost)[0]
        parts["pca"] = Expected(parts["pca"].fits, replicates, cost.seconds(replicates))
    return parts


def _total(parts: dict[str, Expected], n_rows: int, n_features: int) -> tuple[float, str]:
    chosen = {m: part.seconds for m, part in parts.items()}
    if not chosen:
        return 0.0, ""
    worst = max(chosen, key=chosen.get)
    return sum(chosen.values()), f"{FAMILY_TITLES.get(worst, worst)} on {n_rows:,} rows × {n_features:,} features"


def expected_seconds(n_rows: int, n_features: int, config: AuditConfig) -> tuple[float, str]:
    """``(seconds, what dominates)`` for auditing ``n_rows × n_features`` data as ``config`` says
    (the bootstrap replicates of its intervals included)."""
    return _total(expected_parts(n_rows, n_features, config), n_rows, n_features)


def expected_data_seconds(data, config: AuditConfig) -> tuple[float, str]:
    """:func:`expected_seconds` of ``data`` as the audit will see them (:func:`data_parts`): what
    the command line says, or refuses, before it starts."""
    return _total(data_parts(data, config), data.n_rows, data.n_features)


def expected_text(n_rows: int, n_features: int, config: AuditConfig, *, n_groups: int | None = None) -> tuple[float, float, str]:
    """``(seconds, of them the bootstrap's, words)``: what a run of ``config`` should take, with the
    replicates' share said ("roughly 46 seconds, most of it for the 100 bootstrap replicates of
    the intervals") — the dashboard's expectation beside its Run buttons."""
    parts = expected_parts(n_rows, n_features, config, n_groups=n_groups)
    total = sum(part.seconds for part in parts.values())
    replicates = sum(part.bootstrap for part in parts.values())
    counts = [part.replicates for part in parts.values() if part.replicates]
    text = f"roughly {duration(total)}"
    if replicates >= 1:
        many = f"the {plural(counts[0], 'bootstrap replicate')}" if len(set(counts)) == 1 else "the bootstrap replicates"
        share = "most of it" if replicates >= 0.5 * total else f"about {duration(replicates)} of it"
        text += f", {share} for {many} of the intervals"
    return total, replicates, text


# ---------------------------------------------------------------------------- the dask engine's replicate pass
POISSON_ROW_SECONDS = (6.5e-11, 2.56e-8)
"""``(a, b)``: CPU seconds per row and replicate of the dask engine's replicate pass,
``a · d(d+1)/2 + b`` at ``d`` features — the rows' pairwise products times the replicates' weights
(one BLAS product per block) and the Poisson draw, its conversion and the weighted means
(:meth:`fairaudit.engine.GroupMoments.poisson_replicates`). Fitted to
``bench_dask.py --parts poisson`` (one thread, 100,000 rows, 100 replicates, load 1.3, 2026-11-23):
27.9, 30.2, 37.3, 70.0 and 276.6 ns at 5, 10, 20, 40 and 80 features, given to −11…+17 %. At 20
replicates the rows' products (made once per block, whatever the replicates) weigh more: 34.8 ns at
10 features, 48.0 at 20, 101 at 40 — under this model by up to 30 %."""

DASK_PASS_CELL_SECONDS = {"csv": 1.4e-7, "parquet": 8e-8, "dataframe": 8e-8}
"""CPU seconds per cell (the audit's columns) of one pass of the dask engine over the data, by
format: reading, parsing, the group moments, the partition's SHA-256 (1,000,000 × 21 cells on a
local cluster of 4 workers, workers' CPU: Parquet 1.6 s, CSV 2.9 s; load 2.4, 2026-11-23). Only
when the read's own pass was not timed: its seconds are the better predictor."""


def poisson_row_seconds(n_features: int) -> float:
    """CPU seconds per row and replicate of the replicate pass (:data:`POISSON_ROW_SECONDS`)."""
    per_product, per_row = POISSON_ROW_SECONDS
    return per_product * n_features * (n_features + 1) / 2 + per_row


def poisson_replicate_cost(n_rows: int, n_features: int, n_groups: int | None, n_ranks: int | None, *, first_pass: float | None,
                           parallel: int = 1, n_columns: int | None = None, file_format: str = "csv") -> ReplicateCost:
    """The dask engine's Poisson-bootstrap replicates of the PCA family
    (:meth:`fairaudit.engine.PartitionedData.replicate_summary`) as a
    :class:`~fairaudit.uncertainty.ReplicateCost`:

    * ``once`` — one more pass over the data, which reads every partition again: as long as the
      read's own pass (``first_pass`` seconds, measured; it knows the format, the storage, the
      cluster and the machine's load), else ``n_rows × n_columns`` cells at
      :data:`DASK_PASS_CELL_SECONDS` (of ``file_format``) on ``parallel`` workers;
    * ``each`` — per replicate, its share of that pass's arithmetic (:func:`poisson_row_seconds`
      per row, on ``parallel`` workers) and its fits
      (:func:`fairaudit.uncertainty.replicate_seconds` without a pass over the rows)."""
    parallel = max(1, int(parallel))
    if first_pass is None:
        cell = DASK_PASS_CELL_SECONDS.get(file_format, DASK_PASS_CELL_SECONDS["csv"])
        first_pass = n_rows * (n_columns or n_features + 1) * cell / parallel
    fits = replicate_seconds("pca", n_rows, n_features, n_ranks, n_groups, moments_pass=False)
    return ReplicateCost(fits + n_rows * poisson_row_seconds(n_features) / parallel, first_pass)
