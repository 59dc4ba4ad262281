"""The PCA family's subgroup search (:mod:`fairaudit.subgroups`), from group moments.

A subgroup ``S`` unites audit groups (cells) ``i ∈ S``; with each cell's second moments
``C_i = A_iᵀA_i / m_i`` of the globally centred rows (:class:`~fairaudit.pca.GroupProblem`) the
union's are ``C_S = Σ_{i∈S} m_i C_i / Σ_{i∈S} m_i`` — a sum of the cells' scatters, no pass over
the rows. Its loss is Samadi et al.'s (2018, Def. 4.3, averaged as in Def. 4.4) relative to its
*own* best rank-``d`` fit: ``loss_S(P) = error_S(P) − Σ_{j>d} σ_j(C_S)``, the same formula the
family applies to every group (:meth:`GroupProblem.losses`), so a subgroup that is a single cell
has exactly that group's loss. The statistic is ``loss_S − loss_rest`` (the rest: every row
outside ``S``, from the total scatter minus ``S``'s) under vanilla PCA's map at each rank.

* **Permutation null** (random subgroups of the same sizes): the rows of the gap test's sample
  (every row up to ``leakage_max_rows``) regrouped at random keeping every cell's size
  (:meth:`GroupProblem.regroupings`), each candidate's statistic recomputed under the same map
  (vanilla's does not depend on the groups) — :data:`~fairaudit.pca.audit.GAP_PERMUTATIONS`
  regroupings, the p-value by :func:`fairaudit.verdicts.permutation_pvalue`.
* **Bootstrap**: replicates resample the rows within each cell
  (:func:`fairaudit.uncertainty.stratified_resample`, as the audit's replicates), the engine
  summarises the weighted rows (the scaling re-estimated), vanilla PCA is refitted (its closed
  form: no warm start needed) and every candidate's statistic recomputed from the replicate's
  moments: the percentile interval, standard error and Wald p-value of the difference. The
  search draws its own replicates (as many as the family's, ``AuditConfig.bootstrap``) in this
  process: the family's replicate jobs return records, not moments.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import clone

from ..errors import ParameterError
from ..groups import GroupCodes
from ..linalg import blas_threads
from ..subgroups import REST, SEARCHED_VARIANT, SUBGROUP_METRIC, Subgroup, candidate_subgroups
from ..uncertainty import resolve_replicates, stratified_resample
from ..verdicts import error_ratio, interval_and_se, permutation_pvalue, wald_pvalue
from ..vocabulary import term
from ._problem import BLAS_THREADS, GroupProblem

SEED_OFFSET = 0x5B6
"""Mixed into ``AuditConfig.random_state`` for the search's regroupings and replicates."""

BATCH_BYTES = 64 * 2**20
"""Memory for one batch of regroupings' candidate moments (``batch × candidates × s²`` numbers)."""


def union_losses(covariances: np.ndarray, sizes: np.ndarray, cells: np.ndarray, maps: list, ranks) -> tuple[np.ndarray, ...]:
    """``(loss_S, error_S, loss_rest)`` of every candidate (rows of the 0/1 matrix ``cells``,
    ``q × k``) at every rank, shape ``(…, q, len(ranks))``: ``covariances`` are the cells'
    ``C_i`` (``(…, k, s, s)``, a leading axis for stacked regroupings), ``sizes`` their rows
    ``m_i``, ``maps`` each rank's fitted map in problem coordinates
    (:class:`~fairaudit.linalg.LowRankMap`)."""
    scatter = covariances * sizes[:, None, None]
    *lead, k, s, _ = scatter.shape
    inside = (cells @ scatter.reshape(*lead, k, s * s)).reshape(*lead, cells.shape[0], s, s)
    outside = scatter.sum(axis=-3)[..., None, :, :] - inside
    rows = cells @ sizes
    found = []
    for part, count in ((inside, rows), (outside, sizes.sum() - rows)):
        C = part / count[:, None, None]
        with blas_threads(BLAS_THREADS):
            spectra = np.clip(np.linalg.eigvalsh(C)[..., ::-1], 0.0, None)
        traces = np.trace(C, axis1=-2, axis2=-1)
        errors = np.empty((*C.shape[:-2], len(ranks)))
        losses = np.empty_like(errors)
        for j, (rank, projection) in enumerate(zip(ranks, maps, strict=True)):
            B, w = projection.basis, projection.weights
            captured = np.sum((C @ B) * B, axis=-2) @ (2 * w - w * w)
            errors[..., j] = traces - captured
            losses[..., j] = errors[..., j] - np.clip(traces - spectra[..., :rank].sum(axis=-1), 0.0, None)
        found.append((losses, errors))
    (loss_in, error_in), (loss_out, _) = found
    return loss_in, error_in, loss_out


def _vanilla_maps(problem: GroupProblem, ranks, fitted: dict | None = None) -> list:
    """Vanilla PCA's map at every rank in ``problem``'s coordinates (``fitted``: the audit's own
    vanilla models by rank, used where present)."""
    from .audit import VARIANTS

    maps = []
    for rank in ranks:
        model = (fitted or {}).get(rank)
        if model is None:
            model = clone(VARIANTS["vanilla"]).set_params(n_components=rank)._fit_problem(problem)
        maps.append(problem.reduce(model.map_))
    return maps


def search(family, fits) -> list[tuple]:
    """The subgroup search of a fitted PCA audit (``family``: the
    :class:`~fairaudit.pca.audit.PCAAudit`, ``fits``: its fits of the training rows): a row of
    :data:`fairaudit.verdicts.COMPARISON_COLUMNS` per candidate and rank (module docstring).
    Notes (a skipped test, no candidate) go to the family's sink."""
    from .audit import GAP_PERMUTATIONS, GAP_TEST_BUDGET, gap_test_cost

    config, sink = family.config, family.sink
    problem: GroupProblem = fits.shared["problem"]
    sizes = np.asarray(problem.sizes, dtype=float)
    columns = tuple(getattr(family.data, "sensitive", None) or ("group",))
    try:
        candidates = candidate_subgroups(family.labels, sizes.astype(int), columns, config.min_judged_rows)
    except ParameterError as exc:  # a value holding the separator: the audit goes on without the search
        sink.warn(f"pca: {exc.args[0]}")
        return []
    if not candidates:
        sink.warn(f"pca: subgroup search: no subgroup of {', '.join(columns)} has at least "
                  f"{config.min_judged_rows} rows with as many outside it ({term('min_judged_rows')}).")
        return []
    ranks = list(family.ranks)
    cells = np.array([c.cells for c in candidates], dtype=float)
    fitted = {rank: model for (name, rank), model in fits.models.items() if name == SEARCHED_VARIANT}
    loss_in, error_in, loss_out = union_losses(problem.covariances, sizes, cells, _vanilla_maps(problem, ranks, fitted), ranks)
    rng = np.random.default_rng([int(config.random_state or 0), SEED_OFFSET])
    sample = fits.shared["summary"].sample
    nulls = None
    if gap_test_cost(sample, len(family.labels)) <= GAP_TEST_BUDGET:
        nulls = _permutation_nulls(sample, family.labels, problem, fitted, ranks, cells, rng, GAP_PERMUTATIONS)
    else:
        sink.warn(f"pca: subgroup search: the test against random subgroups was not run ({sample.size:,} rows × "
                  f"{sample.X.shape[1]:,} features would take minutes); the search rests on the bootstrap alone.")
    draws = None
    replicates = resolve_replicates("pca", config.bootstrap)[0]
    if replicates and family.replicates_here:
        sink.warn("pca: subgroup search: no intervals on data read partition by partition (the dask engine).")
    elif replicates:
        draws = _bootstrap(family, fits.rows, ranks, cells, rng, replicates)
    return _rows(candidates, int(sizes.sum()), ranks, loss_in, error_in, loss_out, nulls, draws, config.confidence)


def _permutation_nulls(sample, labels, problem: GroupProblem, fitted: dict, ranks, cells, rng, permutations: int):
    """``(observed, permuted)`` differences ``loss_S − loss_rest`` on the sample's rows: observed
    ``(q, R)``, under ``permutations`` random regroupings that keep every cell's size ``(P, q, R)``."""
    present = np.bincount(sample.codes, minlength=len(labels))
    if (present == 0).any():  # a cell missing from the sample: random subgroups of its size cannot be drawn
        return None
    observed_problem = GroupProblem.from_data(sample.X, GroupCodes(sample.codes, labels), centre=problem.mean)
    maps = [observed_problem.reduce(fitted[rank].map_) if rank in fitted else m
            for rank, m in zip(ranks, _vanilla_maps(observed_problem, ranks), strict=True)]
    sizes = np.asarray(observed_problem.sizes, dtype=float)
    loss_in, _, loss_out = union_losses(observed_problem.covariances, sizes, cells, maps, ranks)
    s = observed_problem.dim
    batch = max(1, min(25, BATCH_BYTES // max(1, 16 * cells.shape[0] * s * s)))
    permuted = []
    with blas_threads(BLAS_THREADS):
        rows = observed_problem.regrouping_rows(sample.X)
        for start in range(0, permutations, batch):
            count = min(batch, permutations - start)
            regrouped = observed_problem.regroupings(rows, [rng.permutation(sample.codes) for _ in range(count)])
            inside, _, outside = union_losses(regrouped.covariances, sizes, cells, maps, ranks)
            permuted.append(inside - outside)
    return loss_in - loss_out, np.concatenate(permuted)


def _bootstrap(family, rows: np.ndarray, ranks, cells, rng, replicates: int) -> np.ndarray:
    """``(B, q, R)``: every candidate's difference in each of ``replicates`` stratified bootstrap
    replicates of ``rows``, vanilla refitted on each."""
    draws = np.empty((replicates, cells.shape[0], len(ranks)))
    for b in range(replicates):
        resampled = stratified_resample(family.codes, rng, rows)
        summary, weights = family._summary(resampled, sample=False)
        problem = family._problem(summary, weights)
        inside, _, outside = union_losses(problem.covariances, np.asarray(problem.sizes, dtype=float), cells,
                                          _vanilla_maps(problem, ranks), ranks)
        draws[b] = inside - outside
    return draws


def _rows(candidates: list[Subgroup], total: int, ranks, loss_in, error_in, loss_out, nulls, draws, confidence: float) -> list[tuple]:
    """The comparison rows: a candidate against the rest at each rank (module docstring)."""
    out = []
    for i, candidate in enumerate(candidates):
        for j, rank in enumerate(ranks):
            difference = float(loss_in[i, j] - loss_out[i, j])
            replicate = None if draws is None else draws[:, i, j]
            low, high, se, count = interval_and_se(replicate, confidence)
            p_boot = wald_pvalue(difference, se, None if replicate is None else replicate[np.isfinite(replicate)])
            if nulls is None:
                p_perm = null_mean = null_sd = math.nan
            else:
                observed, permuted = nulls
                null = permuted[:, i, j]
                null_mean, null_sd = float(np.mean(null)), float(np.std(null, ddof=1))
                p_perm = permutation_pvalue(float(observed[i, j]), null)
            out.append(("pca", SEARCHED_VARIANT, int(rank), SUBGROUP_METRIC, candidate.label, REST, candidate.rows, total - candidate.rows,
                        float(loss_in[i, j]), float(loss_out[i, j]), difference, low, high, se, p_boot, p_perm, null_mean,
                        null_sd, error_ratio(float(error_in[i, j]), difference), "error", count))
    return out
