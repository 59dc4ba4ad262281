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
from .estimator import FairCPD, check_tensor, median_gamma
from .metrics import nkhsic, orthogonality, penalty

DEFAULT_SPAN = (-2.0, 1.0)
DEFAULT_POINTS = 10
FAIR_METHODS = ("fatr", "hsic", "khsic")


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
    classifier: str = "mlp",
    random_state: int | None = 0,
    continuation: bool = True,
    **params,
) -> pd.DataFrame:
    """Fit vanilla CP and each fair method over a λ grid; one row per fit.

    Parameters
    ----------
    X : array of shape (n, d_1, …)
    sensitive_features : one group per entity
    rank : int
    methods : fair methods to sweep
    lambdas : list (used for every method), ``{method: list}``, or ``None`` for the default grid
    n_points : size of the default grid
    classifier : leakage classifier (default ``"mlp"``: [Kim21] App. A.6's 1,500-unit network)
    continuation : start each point from the previous (smaller-λ) point's solution (module
        docstring); ``False`` starts every point from the vanilla fit
    **params : passed to :class:`FairCPD` (``n_epochs``, ``tol``, ``inner_steps``, ``l2``,
        ``kernel`` …)

    Returns
    -------
    DataFrame with columns ``method, lam, residual_fit, orthogonality, nkhsic, unfairness,
    unfairness_balanced, penalty, epochs, seconds`` (the first row is vanilla, ``method="none"``,
    ``lam=0``).
    """
    X = check_tensor(X)
    groups = encode_groups(sensitive_features, n_rows=X.shape[0])
    check_groups(groups)
    with _kernels.blas_threads():  # the leakage classifiers' products are thin too
        return _frontier(X, groups.codes, rank, methods, lambdas, n_points, classifier, random_state, continuation, params)


def _frontier(X, codes, rank, methods, lambdas, n_points, classifier, random_state, continuation, params) -> pd.DataFrame:
    started = time.perf_counter()
    vanilla = FairCPD(rank=rank, method="none", lam=0.0, random_state=random_state, **_plain(params)).fit(X, sensitive_features=codes)
    rows = [_row("none", 0.0, vanilla, X, codes, time.perf_counter() - started, classifier, random_state)]
    if "khsic" in methods and params.get("gamma", "median") == "median":
        # the median heuristic once for the whole sweep (what every KHSIC fit would compute)
        params = {**params, "gamma": median_gamma(X, rank, random_state)}
    for method in methods:
        if isinstance(lambdas, dict):
            grid = np.asarray(lambdas[method], dtype=float)
        elif lambdas is not None:
            grid = np.asarray(lambdas, dtype=float)
        else:
            grid = lambda_grid(lambda_reference(X, vanilla, codes, method, params.get("gamma")), n_points)
        init = vanilla.factors_
        for lam in np.sort(grid):
            started = time.perf_counter()
            model = FairCPD(rank=rank, method=method, lam=float(lam), init=init, random_state=random_state, **params)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X, sensitive_features=codes)
            if continuation:
                init = model.factors_
            rows.append(_row(method, float(lam), model, X, codes, time.perf_counter() - started, classifier, random_state))
    return pd.DataFrame(rows)


def _plain(params: dict) -> dict:
    """Parameters that make sense for vanilla CP (no penalty-specific ones)."""
    return {k: v for k, v in params.items() if k in ("n_epochs", "tol")}


def _row(method, lam, model, X, codes, seconds, classifier, random_state) -> dict:
    A = model.embedding_
    return {
        "method": method,
        "lam": lam,
        "residual_fit": model.residual_fit_,
        "orthogonality": orthogonality(A, codes),
        "nkhsic": nkhsic(A, codes, random_state=random_state),
        **shared_metrics.leakage(A, codes, classifier=classifier, max_rows=10000, random_state=random_state),
        "penalty": model.penalty_,
        "epochs": model.n_iter_,
        "seconds": seconds,
    }
