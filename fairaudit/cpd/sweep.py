"""The λ sweep: residual fit against unfairness for each fair method (Kim & Gittens 2021,
Figs. 2a and 3a), with a default λ grid derived from the data's scale.

Why a data-derived grid. The fit term ``‖X − ⟦·⟧‖²/N_X`` is in the squared units of the data,
and each penalty has its own units (KHSIC is dimensionless, ``‖AᵀS‖²`` grows with ``n`` and the
data's scale), so a fixed grid would be all-too-small on one data set and all-saturated on the
next. The reference weight (our choice) is

    λ_ref = E / P(A_vanilla),   E = ‖⟦vanilla fit⟧‖²_F / N_X,

the weight at which the vanilla embedding's penalty costs as much as all the signal energy the
vanilla model explains. Below ``λ_ref/100`` a method barely moves from vanilla CP; around
``λ_ref`` it trades a visible share of fit for independence; at ``10 λ_ref`` the penalty
dominates. The default grid is ``λ_ref · logspace(−2, 1, 10)``, computed per method (each from
its own penalty) and per rank. The sweep is a continuation: the first point starts from the
vanilla fit (so λ → 0 gives back vanilla CP), each further point from the previous point's
solution, following one path of local minima as λ grows (fewer epochs than restarting every point
from vanilla; measured on the 1000 × 10 sample, the KHSIC sweep's fits took 11 s instead of 17 s
and the frontier moved by at most 0.003 in residual fit).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import metrics as shared_metrics
from ..groups import check_groups, encode_groups
from . import _kernels, _tensor
from .estimator import FORMULATIONS, PAPER_GAMMA, DivergenceError, FairCPD, check_tensor, median_gamma
from .metrics import nkhsic, orthogonality, penalty

DEFAULT_SPAN = (-2.0, 1.0)
DEFAULT_POINTS = 10
FAIR_METHODS = ("fatr", "hsic", "khsic")

PAPER_LAMBDA_RANGE = {"fatr": 0.1, "hsic": 0.01, "khsic": 0.4}
"""The upper ends of [Kim21]'s linear λ sweeps on the synthetic data (App. A.8): FATR's α_o over
[0, 0.1] (Fig. 1a), HSIC-BCD's λ over [0, 0.01] and KHSIC-BCD's over [0, 0.4] (Fig. 2a)."""


EXACT_FIT = 1e-4
"""A rank-``r`` approximation that leaves less than this share of the data's norm reproduces it
(to four digits): :func:`unfolding_rank`."""


def unfolding_rank(X: np.ndarray, tol: float = EXACT_FIT) -> int:
    """The largest, over the modes, of the numerical rank of ``X``'s unfoldings: per mode the
    smallest ``r`` whose best rank-``r`` approximation of the unfolding leaves at most ``tol`` of
    ``‖X‖`` (Eckart–Young, from the unfolding's singular values).

    A CP model of rank ``R`` has ``X_(m) = F_m (⊙ other factors)ᵀ`` of rank at most ``R`` for every
    mode, so below this rank no CP model reproduces ``X``; from it on one may (for a matrix, the
    truncated SVD does). There the entity embedding has directions the data do not determine — a
    whitened or normalised one blows them up to unit size, and a fairness penalty can put anything
    in them (the 397 × 8 salaries table of issue 24, one-hot columns making its rank 6: at rank 7
    every fair method let the group be predicted perfectly)."""
    total = float(np.sum(X * X))
    if total == 0:
        return 0
    largest = 0
    for mode in range(X.ndim):
        unfolded = _tensor.unfold(X, mode)
        small = unfolded @ unfolded.T if unfolded.shape[0] <= unfolded.shape[1] else unfolded.T @ unfolded
        energies = np.sort(np.clip(np.linalg.eigvalsh(small), 0.0, None))[::-1]
        left = total - np.cumsum(energies)  # left[r]: the energy outside the best rank-(r + 1) approximation
        enough = np.flatnonzero(left <= tol**2 * total)
        largest = max(largest, int(enough[0]) + 1 if enough.size else len(energies))
    return largest


def paper_grid(method: str, n_points: int = DEFAULT_POINTS) -> np.ndarray:
    """``n_points`` λ values evenly spaced over ``(0, PAPER_LAMBDA_RANGE[method]]`` (the paper's
    sweeps include 0, which is vanilla CP; the audit records that separately)."""
    top = PAPER_LAMBDA_RANGE[method]
    return np.linspace(top / n_points, top, n_points)


def lambda_reference(
    X: np.ndarray, vanilla: FairCPD, groups: np.ndarray, method: str, gamma: float | None = None, landmarks=None
) -> float:
    """``λ_ref = E / P(A_vanilla)`` (module docstring) for ``method`` given a fitted vanilla model.

    For ``"khsic"`` the penalty uses ``gamma``, by default the γ a KHSIC fit at the same rank
    would use (the median heuristic of :class:`FairCPD`), and ``landmarks`` if the fits use the
    Nyström approximation.
    """
    A = vanilla.factors_[0]
    energy = float(np.sum(_tensor.reconstruct(vanilla.factors_) ** 2)) / X.size
    if energy <= 0:
        return 1.0
    with _kernels.blas_threads():  # thin products, like the fits' (measured 3–4× slower with two threads when loaded)
        if method == "khsic" and gamma is None:
            gamma = median_gamma(X, A.shape[1], vanilla.random_state)
        value = penalty(A, groups, method, gamma, whiten=len(vanilla.factors_) == 2, landmarks=landmarks)
    return energy / max(value, 1e-12 * energy)


def lambda_grid(reference: float, n_points: int = DEFAULT_POINTS, span: tuple[float, float] = DEFAULT_SPAN) -> np.ndarray:
    """``reference · logspace(span[0], span[1], n_points)``, ascending."""
    return reference * np.logspace(span[0], span[1], n_points)


def default_index(n_points: int = DEFAULT_POINTS, span: tuple[float, float] = DEFAULT_SPAN) -> int:
    """Index of the grid point nearest ``λ_ref`` (the audit's default λ per rank)."""
    return int(np.argmin(np.abs(np.linspace(span[0], span[1], n_points))))


def frontier(
    X,
    sensitive_features,
    rank: int,
    *,
    methods: Sequence[str] = FAIR_METHODS,
    lambdas: Sequence[float] | dict | None = None,
    n_points: int = DEFAULT_POINTS,
    formulation: str = "fairaudit",
    classifier: str = "mlp",
    test_size: float = 0.25,
    random_state: int | None = 0,
    continuation: bool | None = None,
    **params,
) -> pd.DataFrame:
    """Fit vanilla CP and each fair method over a λ grid; one row per fit.

    Parameters
    ----------
    X : array of shape (n, d_1, …)
    sensitive_features : one group per entity
    rank : int
    methods : fair methods to sweep
    lambdas : list (used for every method), ``{method: list}``, or ``None`` for the default grid:
        the data-scaled one (``formulation="fairaudit"``) or the paper's linear range
        (:func:`paper_grid`, ``"paper"``)
    n_points : size of the default grid
    formulation : ``"fairaudit"`` or ``"paper"`` (:data:`fairaudit.cpd.estimator.FORMULATIONS`);
        ``params`` override single parameters
    classifier : leakage classifier (default ``"mlp"``; ``"mlp_paper"`` is [Kim21] App. A.6's
        network trained as the paper says)
    test_size : held-out share for the leakage classifier (App. A.6: 0.25 synthetic, 0.1 contraceptive)
    continuation : start each point from the previous (smaller-λ) point's solution (module
        docstring); ``False`` starts every point from the vanilla fit. Default: ``True`` for ours;
        the paper's fits each start from the U(0, 1) draw (the value is ignored there)
    **params : passed to :class:`FairCPD` (``n_epochs``, ``tol``, ``inner_steps``, ``l2``,
        ``kernel`` …)

    Returns
    -------
    DataFrame with columns ``method, lam, residual_fit, orthogonality, nkhsic, unfairness,
    unfairness_balanced, penalty, epochs, seconds`` (the first row is vanilla, ``method="none"``,
    ``lam=0``; a paper fit whose fixed steps diverged has NaN metrics). ``orthogonality`` and
    ``nkhsic`` are on the embedding the penalty saw (``A`` with γ = 1 for the paper, ``Â`` with
    the median heuristic for ours).
    """
    X = check_tensor(X)
    groups = encode_groups(sensitive_features, n_rows=X.shape[0])
    check_groups(groups)
    settings = {**FORMULATIONS[formulation], "random_state": random_state, **params}
    paper = formulation == "paper"
    leak = {"classifier": classifier, "test_size": test_size, "random_state": random_state}
    with _kernels.blas_threads():  # the leakage classifiers' products are thin too
        return _frontier(X, groups.codes, rank, methods, lambdas, n_points, paper, leak, continuation, settings)


def _frontier(X, codes, rank, methods, lambdas, n_points, paper, leak, continuation, settings) -> pd.DataFrame:
    continuation = not paper and continuation is not False
    metric_gamma = PAPER_GAMMA if paper else None
    vanilla_settings = {k: v for k, v in settings.items() if k not in ("gamma", "kernel", "n_landmarks", "learning_rate", "l2")}
    started = time.perf_counter()
    vanilla = FairCPD(rank=rank, method="none", lam=0.0, **vanilla_settings).fit(X, sensitive_features=codes)
    rows = [_row("none", 0.0, vanilla, codes, time.perf_counter() - started, leak, metric_gamma)]
    if "khsic" in methods and settings.get("gamma") == "median":
        # the median heuristic once for the whole sweep (what every KHSIC fit would compute)
        settings = {**settings, "gamma": median_gamma(X, rank, settings["random_state"])}
    for method in methods:
        if isinstance(lambdas, dict):
            grid = np.asarray(lambdas[method], dtype=float)
        elif lambdas is not None:
            grid = np.asarray(lambdas, dtype=float)
        elif paper:
            grid = paper_grid(method, n_points)
        else:
            grid = lambda_grid(lambda_reference(X, vanilla, codes, method, settings.get("gamma")), n_points)
        init = settings.get("init") if paper else vanilla.factors_
        for lam in np.sort(grid):
            started = time.perf_counter()
            model = FairCPD(rank=rank, method=method, lam=float(lam), **{**settings, "init": init})
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(X, sensitive_features=codes)
            except DivergenceError:
                rows.append({"method": method, "lam": float(lam), "seconds": time.perf_counter() - started, "diverged": True})
                continue
            if continuation:
                init = model.factors_
            rows.append(_row(method, float(lam), model, codes, time.perf_counter() - started, leak, metric_gamma))
    return pd.DataFrame(rows)


def _row(method, lam, model, codes, seconds, leak, gamma) -> dict:
    A = model.embedding_
    return {
        "method": method,
        "lam": lam,
        "residual_fit": model.residual_fit_,
        "orthogonality": orthogonality(A, codes),
        "nkhsic": nkhsic(A, codes, gamma=gamma, random_state=leak["random_state"]),
        **shared_metrics.leakage(A, codes, max_rows=10000, **leak),
        "penalty": model.penalty_,
        "epochs": model.n_iter_,
        "seconds": seconds,
        "diverged": False,
    }
