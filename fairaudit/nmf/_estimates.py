"""Algorithm 1 of Kassab, George, Needell et al.: each group's own rank-r NMF error ``E_ℓ``.

``E_ℓ`` is the mean of ``‖X_ℓ − W H‖_F`` over ``T`` standard NMF runs (eq. (2)) of group ``ℓ``
alone from ``T`` random starts (``T = 5`` by default, as in §6.1). Remark 4.2 defines it as the
expected error of "a specific randomized implementation of rank-r NMF", so the solver is part of
the definition: the paper's is multiplicative updates stopped by eq. (10) (``solver="mu"``,
``stopping="eq10"``, the default); coordinate descent (``solver="cd"``, ours) gives a lower,
steadier ``E_ℓ`` (``docs/nmf.md``). When ``r >= min(n_ℓ, m)`` the group has an exact rank-``r``
non-negative factorisation and ``E_ℓ = 0`` without running NMF (ours: Algorithm 1 would only
creep towards 0). ``E_ℓ`` is the yardstick of the relative loss (Def. 4.1).

Results are cached in memory (a small LRU keyed on a hash of the grouped data, the rank, ``T``,
the seed and the solver settings) so that the vanilla and fair variants of one audit, repeated
audits of the same data and estimators fitted by hand never recompute them. Runs with
``random_state=None`` are not reproducible and are never cached.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

import numpy as np

from ._core import GroupedData, blas_threads, random_factors
from ._standard import STANDARD_MAX_ITER, solve_standard_runs

CACHE_SIZE = 512
_cache: OrderedDict[tuple, tuple[np.ndarray, float]] = OrderedDict()
_lock = threading.Lock()


def data_key(data: GroupedData) -> str:
    """A hash of the grouped matrix (values, group boundaries and labels)."""
    digest = hashlib.sha256(np.ascontiguousarray(data.X).tobytes())
    digest.update(repr((data.X.shape, [(s.start, s.stop) for s in data.slices], data.labels)).encode())
    return digest.hexdigest()[:24]


def _seed_key(random_state) -> int | None:
    if isinstance(random_state, bool):
        return None
    if isinstance(random_state, int | np.integer):
        return int(random_state)
    return None


def estimate_group_errors(
    data: GroupedData,
    r: int,
    *,
    n_estimates: int = 5,
    solver: str = "mu",
    stopping: str = "eq10",
    tol: float = 1e-4,
    max_iter: int = STANDARD_MAX_ITER,
    random_state=None,
    key: str | None = None,
    starts: list | None = None,
    keep_runs: bool = False,
):
    """``(E, seconds)``: ``E[ℓ]`` = mean error of ``n_estimates`` NMF runs of group ``ℓ``.

    ``seconds`` is the time the estimate took when it was computed (also when it now comes
    from the cache). ``random_state`` seeds the ``T`` starts of every group (an int gives the
    same ``E`` every time; a Generator or ``None`` draws fresh starts and bypasses the cache).

    ``starts`` (per group, a list of ``(W, H)`` starting factors, ``W`` over the group's rows;
    ``None`` for a group whose ``E_ℓ`` is 0): the runs start there instead of at random — an
    earlier estimate's runs continued on other rows of the same groups (a bootstrap replicate
    of the audit's ``E_ℓ``); those groups run whatever their rows (a replicate's distinct rows
    with counts, :mod:`~fairaudit.nmf._rows`, can be fewer than the rank). ``keep_runs``: return
    ``(E, seconds, runs)``, ``runs`` in that form (each run's fitted factors), computed afresh
    (the cache keeps no factors).
    """
    seed = _seed_key(random_state)
    cache_key = None
    if seed is not None and starts is None:
        cache_key = (
            key or data_key(data), int(r), int(n_estimates), seed, solver, stopping if solver == "mu" else None,
            float(tol), int(max_iter),
        )
        with _lock:
            if cache_key in _cache and not keep_runs:
                _cache.move_to_end(cache_key)
                E, seconds = _cache[cache_key]
                return E.copy(), seconds
    start = time.perf_counter()
    if seed is not None:
        streams = np.random.SeedSequence(seed).spawn(data.n_groups)
        rngs = [np.random.default_rng(s) for s in streams]
    else:
        parent = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng()
        rngs = [parent] * data.n_groups
    # The starts are drawn first, group by group (the order the runs always had).
    runs = []
    for g, block in enumerate(data.groups()):
        if starts is None and r >= min(block.shape):
            # An exact non-negative factorisation exists (W = X_ℓ, H = I or W = I, H = X_ℓ), so the
            # minimum of eq. (2) is 0; iterative NMF only creeps towards it and would overstate E_ℓ
            # (and understate the relative loss).
            continue
        if starts is not None:  # an earlier estimate's runs continued (none where its E_ℓ was 0)
            runs += [(g, np.array(W, dtype=float), np.array(H, dtype=float)) for W, H in starts[g] or ()]
        else:
            runs += [(g, *random_factors(block, r, rngs[g])) for _ in range(n_estimates)]

    errors: dict[int, list[float]] = {}
    factors: list = [None] * data.n_groups
    with blas_threads():
        for g in dict.fromkeys(g for g, _, _ in runs):  # each group's T runs side by side
            block = data.X[data.slices[g]]
            fits = solve_standard_runs(
                block, [(W, H) for h, W, H in runs if h == g], solver=solver, tol=tol, max_iter=max_iter, stopping=stopping,
                what=f"NMF of group {data.labels[g]!r} (E_ℓ)",
            )
            errors[g] = [float(np.linalg.norm(block - fit.W @ fit.H)) for fit in fits]
            if keep_runs:
                factors[g] = [(fit.W, fit.H) for fit in fits]
    E = np.array([float(np.mean(errors[g])) if g in errors else 0.0 for g in range(data.n_groups)])
    seconds = time.perf_counter() - start
    if cache_key is not None:
        with _lock:
            _cache[cache_key] = (E.copy(), seconds)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return (E, seconds, factors) if keep_runs else (E, seconds)


def clear_estimate_cache() -> None:
    """Forget every cached ``E_ℓ``."""
    with _lock:
        _cache.clear()
