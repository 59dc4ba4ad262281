"""Engines: how the data reach the PCA family — group moments and a stratified row sample.

``GroupMoments`` (per-group count, mean and centred scatter, merged exactly chunk by chunk) is the
PCA family's currency: every estimator of the family can be fitted from it
(:meth:`fairaudit.pca.GroupProblem.from_moments`, ``estimator.fit_moments``) and its per-group
error, loss, variance explained and linear MMD² are computed from it. An engine
(:data:`ENGINES`, chosen by ``AuditConfig.engine``) produces the moments and a stratified sample
of rows for the metrics that need rows:

* ``"local"`` (:class:`LocalEngine`, the default): in-memory :class:`~fairaudit.data.AuditData`,
  one pass in blocks, in process;
* ``"dask"`` (:class:`DaskEngine`, the optional extra ``fairaudit[dask]``): data read partition by
  partition on a dask scheduler (:func:`read_partitioned` → :class:`PartitionedData`), never
  held in memory; see :mod:`fairaudit.engine.dask_engine`.

Importing this package does not import dask, nor the dask engine's own module (its names below
load on first use, PEP 562: ~10–25 ms that an in-process audit does not spend).
"""

import importlib
import sys
from dataclasses import dataclass, replace

from ..errors import ParameterError
from ..vocabulary import term
from .local import (
    DataSummary,
    LocalEngine,
    RowSample,
    scaling_transform,
)
from .moments import CHUNK_ROWS, GroupMoments, RowBlocks

_DASK_ENGINE = __name__ + ".dask_engine"
_DASK_NAMES = ("POISSON_MIN_GROUP_ROWS", "DaskEngine", "PartitionedData", "PoissonReplicate", "dask_session", "read_partitioned")
"""Names of :mod:`fairaudit.engine.dask_engine` this package gives, imported on first use."""


def __getattr__(name: str):
    if name in _DASK_NAMES:
        return getattr(importlib.import_module(_DASK_ENGINE), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ENGINES: dict[str, str] = {"local": "LocalEngine", "dask": "DaskEngine"}
"""Engine name (``AuditConfig.engine``) → the name of its class in this package."""


def get_engine(name: str):
    try:
        return getattr(sys.modules[__name__], ENGINES[name])()
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; available: {', '.join(ENGINES)}") from None


@dataclass(frozen=True)
class FamilyInput:
    """What one family audits (:func:`family_input`): the data, the configuration, notes for the
    result, and — when the engine cannot give intervals — why (the family's uncertainty summary
    says it instead of "turned off")."""

    data: object
    config: object
    notes: tuple[str, ...] = ()
    no_intervals: str | None = None


NO_INTERVALS_WIDE = (
    "no bootstrap intervals on the dask engine for data with more features than rows: a replicate "
    "reweights the group moments, which these data do not have; audit them with the default engine ({local})"
)
NO_INTERVALS_SMALL = (
    "no bootstrap intervals on the dask engine: its Poisson bootstrap needs at least {rows} rows in every group "
    "({group!r} has {size:,}); audit with the default engine ({local}), whose bootstrap redraws each group's rows"
)
NO_INTERVALS_LARGE = (
    "no bootstrap intervals on the dask engine: {count} replicates of the moments of {keys:,} combinations of sensitive "
    "values × {features:,} features would take {size:.1f} GiB in every partition's summary; {ask}"
)
POISSON_NOTE = (
    "pca: intervals from a Poisson bootstrap over the partitions (every row weighted by an independent Poisson(1) "
    "draw in each replicate, each group's weights scaled to its row count; one more pass over the data computes every "
    "replicate's moments), not the default engine's resample of each group's rows: the two agree as groups grow."
)


def dask_instance(value, name: str) -> bool:
    """``value`` is an instance of the dask engine's class ``name`` (``"PartitionedData"``,
    ``"PoissonReplicate"``) — never while that engine's module is not loaded, so asking does not
    load it."""
    module = sys.modules.get(_DASK_ENGINE)
    return module is not None and isinstance(value, getattr(module, name))


def family_input(data, method: str, config) -> FamilyInput:
    """What family ``method`` audits under ``config``.

    In-memory data: the data and the configuration as given. Data read partition by partition
    (:class:`PartitionedData`, ``engine="dask"``): the PCA family audits them from the group moments
    of every row — with bootstrap intervals from a Poisson bootstrap over the partitions
    (:class:`PoissonReplicate`; none for wide data or groups under :data:`POISSON_MIN_GROUP_ROWS`
    rows, with the reason) — and no held-out rows; the other families audit the stratified sample (:meth:`PartitionedData.sample_data`)
    with their usual intervals, and a note says so."""
    if not dask_instance(data, "PartitionedData"):
        return FamilyInput(data, config)
    if config.engine != "dask":
        raise ParameterError(
            f"these data were read partition by partition (read_partitioned); audit them with {term('engine', 'dask')}."
        )
    if method == "pca":  # moments of every row; the family notes its own row sample (fairaudit.pca.audit)
        if config.holdout:
            raise ParameterError(
                f"{term('holdout', config.holdout)} is not available for the PCA family with {term('engine', 'dask')}: the engine "
                f"holds the group moments of every row, not the rows to hold out. Leave it out, or audit with {term('engine', 'local')}."
            )
        reason = None if config.bootstrap == 0 else _no_poisson_bootstrap(data, config)
        if reason is not None:
            return FamilyInput(data, replace(config, bootstrap=0), (f"pca: {reason}.",), reason)
        return FamilyInput(data, config)  # the family notes its Poisson bootstrap when replicates run (POISSON_NOTE)
    sample = data.sample_data()
    if sample.n_rows == data.n_rows:
        return FamilyInput(sample, config, (f"{method}: audited on every one of the {data.n_rows:,} rows (the dask engine's sample holds them all).",))
    return FamilyInput(sample, config, (
        f"{method}: audited on a stratified sample of {sample.n_rows:,} of {data.n_rows:,} rows drawn by the dask engine "
        f"({', '.join(f'{g}: {n:,}' for g, n in sample.group_sizes().items())}); its records describe that sample. Audit every "
        f"row with the default engine ({term('engine', 'local')}) where the data fit in memory.",
    ))


def _no_poisson_bootstrap(data, config) -> str | None:
    """Why the dask engine's Poisson bootstrap cannot give ``data`` (:class:`PartitionedData`)
    intervals under ``config`` (``None``: it can)."""
    from ..uncertainty import MIN_REPLICATES, resolve_replicates
    from .dask_engine import POISSON_MIN_GROUP_ROWS, REPLICATE_SUMMARY_BYTES

    local = term("engine", "local")
    if data.n_features > data.n_rows:
        return NO_INTERVALS_WIDE.format(local=local)
    sizes = data.group_sizes()
    smallest = min(sizes, key=sizes.get)
    if sizes[smallest] < POISSON_MIN_GROUP_ROWS:
        return NO_INTERVALS_SMALL.format(rows=POISSON_MIN_GROUP_ROWS, group=smallest, size=sizes[smallest], local=local)
    layout = data._layout
    count, _ = resolve_replicates("pca", config.bootstrap)
    if layout is not None and count and layout.replicate_bytes(count) > REPLICATE_SUMMARY_BYTES:
        fits = REPLICATE_SUMMARY_BYTES // layout.replicate_bytes(1)
        ask = (f"ask for {term('bootstrap', int(fits))} or fewer" if fits >= MIN_REPLICATES
               else f"audit with the default engine ({local})")
        return NO_INTERVALS_LARGE.format(count=count, keys=layout.n_keys, features=data.n_features,
                                         size=layout.replicate_bytes(count) / 2**30, ask=ask)
    return None


__all__ = [
    "CHUNK_ROWS",
    "ENGINES",
    "DaskEngine",
    "DataSummary",
    "FamilyInput",
    "GroupMoments",
    "LocalEngine",
    "POISSON_NOTE",
    "PartitionedData",
    "PoissonReplicate",
    "RowBlocks",
    "RowSample",
    "dask_session",
    "family_input",
    "get_engine",
    "dask_instance",
    "read_partitioned",
    "scaling_transform",
]
