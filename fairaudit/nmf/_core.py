"""What the NMF family shares: input checks, grouped data, initialisation, Lee–Seung updates,
relative errors and losses, and the stopping rule.

Notation (Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix
Factorization", arXiv:2411.09847): ``X`` (m × n, non-negative) has its rows split into groups
``X_ℓ`` (m_ℓ × n); ``W`` (m × r) stacks the groups' ``W_ℓ``; ``H`` (r × n) is shared. A group's
reconstruction error is ``‖X_ℓ − W_ℓ H‖_F`` and its own rank-r NMF error ``E_ℓ`` (Algorithm 1).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .. import linalg
from ..errors import FairAuditError, NegativeValueError, ParameterError
from ..groups import check_groups, encode_groups
from ..validation import check_rank
from ..vocabulary import term

TINY = np.finfo(float).tiny
"""The smallest positive normal float (a floor where a mean or a norm must not be 0)."""


QUIET_DIVISION = {"divide": "ignore", "over": "ignore", "invalid": "ignore"}
"""The floating-point warnings a multiplicative step silences (:func:`multiplicative_step` says why its
divisions may meet 0); the iteration loops hold ``np.errstate(**QUIET_DIVISION)`` once for the whole
loop instead of entering it in every step (2–4 µs each, on iterations of 30–60 µs)."""


def multiplicative_step(factor: np.ndarray, numerator: np.ndarray, denominator: np.ndarray, positive: np.ndarray | None = None) -> None:
    """``factor ← factor ⊙ numerator / denominator`` in place (a Lee–Seung step), entries at 0 left
    at 0 — as the step itself leaves them. Their denominator can be 0 while their numerator is not:
    a feature that every part of ``H`` leaves out (a zero column of ``H``; a rare one-hot category
    drives it there) or a row that ``W`` leaves out, and ``0 · (x / 0)`` is NaN — flooring the
    denominator at :data:`TINY` made ``x / TINY`` overflow to inf and ``0 · inf`` NaN just the
    same, which turned every later iterate NaN (Fairer-NMF on a 2,000-row extract of the one-hot
    Adult data, every rank). Where ``factor > 0`` the denominator is positive and the step is the
    same arithmetic as before. Entries the step leaves below the smallest normal float become 0
    (:func:`flush_subnormal`). ``denominator`` is overwritten (with the ratio).

    ``positive``: a boolean array shaped like ``factor`` that the caller keeps across iterations
    (no allocation per step); the division's warnings are then the caller's to silence
    (``np.errstate(**QUIET_DIVISION)`` around its loop)."""
    if positive is None:
        with np.errstate(**QUIET_DIVISION):
            multiplicative_step(factor, numerator, denominator, np.empty(factor.shape, dtype=bool))
        return
    np.divide(numerator, denominator, out=denominator)
    np.greater(factor, 0.0, out=positive)
    np.multiply(factor, denominator, out=factor, where=positive)
    flush_subnormal(factor, positive)


BLAS_THREADS: int | None = 1
"""BLAS threads while the NMF family fits (``None``: leave BLAS alone). Its products are thin
(rank ≤ a few dozen), where threads buy little and cost a lot on a busy machine: measured with
two cores shared with other work, 5 AM iterations on the Table-1 data at rank 12 took 1.13 s
with two OpenBLAS threads and 0.27 s with one (benchmarks/bench_nmf_am.py), and in a one-off
run 300 Fairer-NMF (MU) iterations on random 13,000×1,764 data at rank 10 95.7 s against
30.7 s."""


def blas_threads():
    """Context manager applying :data:`BLAS_THREADS` (see :func:`fairaudit.linalg.blas_threads`)."""
    return linalg.blas_threads(BLAS_THREADS)


STOPPING_RULES = ("eq10", "window")
"""Rules for any NMF iteration: ``"eq10"``, the paper's (eq. (10)); ``"window"``, ours (see
:class:`StoppingRule`)."""

FAIR_STOPPING_RULES = (*STOPPING_RULES, "authors")
"""Rules for Fairer-NMF's iterations: :data:`STOPPING_RULES` and ``"authors"``, the rule of the
authors' released code, which tests the groups' relative *losses* (see :class:`StoppingRule`)."""

AUTHORS_MAX_ITER = 1_000_000
"""Fairer-NMF's iteration cap under ``stopping="authors"`` (their code has none): on Heart
Disease the rule stopped multiplicative updates after 334 to 191,206 iterations over ranks 1–10
and seeds 0–9, once after 300,000 or more (``docs/nmf.md``)."""

EXACT_FIT = 1e-12
"""A relative error at most this is an exact fit (:class:`StoppingRule` stops there)."""

CHECK_EVERY = 100
"""The ``"window"`` rule compares the objective with its value ``CHECK_EVERY`` iterations
earlier: multiplicative updates progress little per iteration and, for Fairer-NMF's c-weights,
unevenly, so a one-step comparison stops them while they are still moving (measured on Heart:
see ``docs/nmf.md``)."""


# ============================================================================ input
def check_nonnegative(X: np.ndarray, what: str = "X") -> None:
    """Raise :class:`NegativeValueError` naming the first negative cell of ``X``."""
    negative = X < 0
    if negative.any():
        row, col = np.argwhere(negative)[0]
        raise NegativeValueError(
            f"Negative values in data: NMF needs non-negative input, but {what} has {int(negative.sum())} "
            f"negative value(s) (first: {X[row, col]:g} at row {row}, column {col}). Shift each feature by its minimum "
            f"or clip negatives to 0 first ({term('nonnegative', 'shift')} or {term('nonnegative', 'clip')})."
        )


def check_nmf_rank(n_components, n_rows: int, n_features: int) -> int:
    """``n_components`` as an int in ``1 … min(rows, features)``, or a :class:`RankError`."""
    return check_rank(
        n_components,
        min(n_rows, n_features),
        limit_name=f"min(rows, features) = min({n_rows}, {n_features})",
    )


@dataclass(frozen=True)
class GroupedData:
    """``X`` with its rows sorted by group, so that every ``X_ℓ`` is a contiguous slice.

    ``order`` maps sorted rows to the caller's rows (``X_sorted = X[order]``); ``inverse``
    maps back (``W = W_sorted[inverse]``).
    """

    X: np.ndarray
    slices: tuple[slice, ...]
    labels: tuple[str, ...]
    order: np.ndarray
    inverse: np.ndarray
    norms: np.ndarray  # ‖X_ℓ‖_F
    squared_norms: np.ndarray  # ‖X_ℓ‖²_F

    @property
    def n_groups(self) -> int:
        return len(self.slices)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([s.stop - s.start for s in self.slices])

    def groups(self):
        """The group blocks ``X_ℓ`` (views)."""
        return [self.X[s] for s in self.slices]

    @classmethod
    def build(cls, X: np.ndarray, sensitive_features) -> GroupedData:
        groups = encode_groups(sensitive_features, n_rows=X.shape[0])
        check_groups(groups, min_size=1)
        order = np.argsort(groups.codes, kind="stable")
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        X_sorted = np.ascontiguousarray(X[order])
        bounds = np.concatenate([[0], np.cumsum(groups.sizes())])
        slices = tuple(slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True))
        squared = np.array([float(np.sum(X_sorted[s] ** 2)) for s in slices])
        empty = [groups.labels[g] for g in range(len(slices)) if squared[g] == 0]
        if empty:
            raise FairAuditError(
                f"every value of group {empty[0]!r} is 0, so its relative error ‖X_ℓ − W_ℓH‖/‖X_ℓ‖ "
                "is undefined; check the feature columns or leave that group out."
            )
        return cls(
            X=X_sorted,
            slices=slices,
            labels=groups.labels,
            order=order,
            inverse=inverse,
            norms=np.sqrt(squared),
            squared_norms=squared,
        )


# ============================================================================ factors
def random_factors(X: np.ndarray, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Uniform random ``W``, ``H`` scaled so that ``mean(WH) = mean(X)``.

    With entries ``a·U[0, 1)``, ``E[(WH)_ij] = r a² / 4``, hence ``a = 2 sqrt(mean(X) / r)``.
    """
    scale = 2.0 * np.sqrt(max(float(X.mean()), TINY) / r)
    W = scale * rng.uniform(size=(X.shape[0], r))
    H = scale * rng.uniform(size=(r, X.shape[1]))
    return W, H


def exact_factors(X: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """An exact non-negative factorisation ``X = WH`` of rank ``r ≥ min(rows, features)``: ``W = X``,
    ``H = I`` (or ``W = I``, ``H = X`` for fewer rows than features), zero-padded to ``r`` parts —
    the optimum of eq. (2) there, which multiplicative updates keep (``X ⊙ X / X``)."""
    n, m = X.shape
    W, H = np.zeros((n, r)), np.zeros((r, m))
    if m <= n:
        W[:, :m], H[:m, :] = X, np.eye(m)
    else:
        W[:, :n], H[:n, :] = np.eye(n), X
    return W, H


def check_custom_factors(W, H, n_rows: int, n_features: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate user-supplied starting factors (``init="custom"``)."""
    if W is None or H is None:
        raise FairAuditError("init='custom' needs both W and H passed to fit(X, W=..., H=...).")
    W = np.array(W, dtype=float)
    H = np.array(H, dtype=float)
    if W.shape != (n_rows, r) or H.shape != (r, n_features):
        raise FairAuditError(
            f"init='custom' expects W of shape {(n_rows, r)} and H of shape {(r, n_features)}, "
            f"got {W.shape} and {H.shape}."
        )
    if not (np.isfinite(W).all() and np.isfinite(H).all()):
        raise FairAuditError("the starting factors W and H contain NaN or infinite values.")
    check_nonnegative(W, "the starting W")
    check_nonnegative(H, "the starting H")
    return W, H


def mu_update_W(
    X: np.ndarray, W: np.ndarray, H: np.ndarray, work: np.ndarray | None = None, *, HHt: np.ndarray | None = None,
    positive: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One Lee–Seung step ``W ← W ⊙ XHᵀ / (W HHᵀ)`` in place; returns ``(XHᵀ, HHᵀ)`` for reuse.

    ``work`` — an array shaped like ``(2, *W.shape)`` kept by the caller across iterations —
    holds the two ``W``-sized intermediates instead of fresh allocations: the same arithmetic,
    in half the time on a 4,165 × 10 ``W`` (allocating and touching new pages cost as much as
    the products). ``HHt``: ``H @ H.T`` when the caller has it already; ``positive``: the step's
    mask buffer (:func:`multiplicative_step`)."""
    if work is None:
        work = np.empty((2, *W.shape))
    XHt, ratio = work[0], work[1]
    Ht = np.swapaxes(H, -1, -2)  # Hᵀ (of every run in a stack of them: :func:`~fairaudit.nmf._standard.solve_standard_runs`)
    if HHt is None:
        HHt = H @ Ht
    np.matmul(X, Ht, out=XHt)
    np.matmul(W, HHt, out=ratio)
    multiplicative_step(W, XHt, ratio, positive)
    return XHt, HHt


def flush_subnormal(A: np.ndarray, below: np.ndarray | None = None) -> None:
    """Set the entries of ``A`` (non-negative) below the smallest normal double, ``TINY``, to 0 in
    place.

    Multiplicative updates shrink entries that should vanish by a factor per iteration, and near
    an exact fit they reach the subnormal range (down to 5·10⁻³²⁴, measured in the rank-9 fits of
    the default sample), where every product that touches them runs on the processor's slow path:
    a Fairer-NMF iteration took 142 µs instead of 50–70. Such an entry adds less than 10⁻³⁰⁷ to
    any sum it enters, so setting it to 0 changes no other number (what a processor's
    flush-to-zero mode does); it only stays 0 instead of shrinking further."""
    if below is None:
        below = np.empty(A.shape, dtype=bool)
    np.less(A, TINY, out=below)  # ``below``: a boolean buffer shaped like ``A`` (overwritten)
    np.putmask(A, below, 0.0)


NEAR_EXACT = 1e-6
"""Below ``‖X − WH‖² < NEAR_EXACT · ‖X‖²`` the expanded error loses too many digits for eq. (10)
(rounding of about ``ε‖X‖²`` against ``e²``), so the error is computed directly."""


def squared_error(squared_norm: float, W: np.ndarray, XHt: np.ndarray, HHt: np.ndarray) -> float:
    """``‖X − WH‖²_F = ‖X‖² − 2⟨W, XHᵀ⟩ + ⟨WᵀW, HHᵀ⟩`` from products the updates already have.

    Costs ``O(m r²)`` instead of ``O(m n r)``; accurate to about ``ε ‖X‖²`` (cancellation), so
    callers recompute near-exact fits directly (:data:`NEAR_EXACT`).
    """
    value = squared_norm - 2.0 * float(np.vdot(W, XHt)) + float(np.vdot(W.T @ W, HHt))
    return max(value, 0.0)


def group_errors(data: GroupedData, W_sorted: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``‖X_ℓ − W_ℓ H‖_F`` per group, computed directly."""
    return np.array([np.linalg.norm(data.X[s] - W_sorted[s] @ H) for s in data.slices])


# ============================================================================ stopping
def _errors(errors):
    """The errors eq. (10) compares: one group's as a float, several as an array (a copy)."""
    if np.ndim(errors) == 0:
        return float(errors)
    values = np.array(errors, dtype=float)
    return float(values[0]) if values.size == 1 else values


def relative_change(errors, previous) -> float:
    """``max_ℓ |e_ℓ^(k) − e_ℓ^(k−1)| / |e_ℓ^(k)|``, the left side of the paper's eq. (10) (and of
    the authors' rule, with relative losses, which can be negative, for errors).

    A value that is 0 at both iterates (``0/0``) has not changed. One group's errors (standard
    NMF, Algorithm 1's runs) come as floats and are compared as floats — the same IEEE arithmetic
    in 0.3 µs instead of NumPy's 11 µs, on every iteration of every standard NMF.
    """
    if isinstance(errors, float):
        change = abs(errors - previous)
        if change == 0:
            return 0.0
        return change / abs(errors) if errors else math.inf
    change = np.abs(errors - previous)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(change == 0, 0.0, change / np.abs(errors))
    return float(np.max(ratio))


class StoppingRule:
    """When an NMF-family iteration stops.

    ``"eq10"`` — the paper's rule, eq. (10) of §6.1: after iteration ``k`` stop when every
    group's reconstruction error changed by less than ``tol`` (10⁻⁴ in the paper) of its
    current value,

        max_ℓ |‖X_ℓ − W_ℓ^(k) H^(k)‖ − ‖X_ℓ − W_ℓ^(k−1) H^(k−1)‖| / ‖X_ℓ − W_ℓ^(k) H^(k)‖ < tol.

    The paper states it for both Fairer-NMF schemes; standard NMF (eq. (2)) and Algorithm 1's
    single-group NMFs use it with one "group", the matrix being factorised.

    ``"authors"`` — the rule of the authors' released code (named after them; Fairer-NMF only):
    eq. (10)'s test applied to every group's relative *loss* (Def. 4.1) instead of its error,

        max_ℓ |ℓ_ℓ^(k) − ℓ_ℓ^(k−1)| / |ℓ_ℓ^(k)| < tol,   ℓ_ℓ = (‖X_ℓ − W_ℓH‖ − E_ℓ)/‖X_ℓ‖.

    A loss is the error minus ``E_ℓ`` over ``‖X_ℓ‖``, far smaller than the error near the optimum,
    so the same ``tol`` asks for a much smaller change: on Heart Disease at rank 1 it stops
    Algorithm 3 after 36,044 iterations at the authors' saved 0.003944, where eq. (10) stops after
    275 at 0.00399 (``docs/nmf.md``).

    ``"window"`` — ours, a named option: every :data:`CHECK_EVERY` iterations (multiplicative
    updates; every iteration, ``every=1``, for alternating minimisation) the objective ``F_k``
    is compared with ``F_{k−every}`` and the iteration stops when
    ``|F_{k−every} − F_k| ≤ tol · scale_k``, ``scale_k`` being the size of what the objective is
    measured in (the relative error for NMF, the worst group's relative error for Fairer-NMF,
    whose objective can be 0 or negative). Multiplicative updates can improve by less than 10⁻⁴
    per iteration for hundreds of iterations and still have far to go; eq. (10) stops them there
    (``docs/nmf.md`` has the measured effect).

    Every rule also stops at an exact fit — the (worst group's) relative error at most
    :data:`EXACT_FIT` at a window's check — where what is left of the error is rounding, whose
    changes never settle (ours: at ``r ≥ min(rows, features)``, where the audit starts standard
    NMF from an exact factorisation, eq. (10) and the window rule ran to the iteration cap).

    Any rule: reaching ``max_iter`` first emits a
    :class:`~sklearn.exceptions.ConvergenceWarning`.
    """

    def __init__(
        self, tol: float, max_iter: int, *, rule: str = "eq10", every: int = CHECK_EVERY, what: str = "NMF"
    ):
        if rule not in FAIR_STOPPING_RULES:  # pragma: no cover - checked by the estimators
            raise ValueError(rule)
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.rule = rule
        self.every = int(every)
        self.what = what
        self._reference: float | None = None
        self._previous: np.ndarray | None = None
        self.converged = False

    def done(self, iteration: int, *, errors, objective: float, scale: float, losses=None) -> bool:
        """Whether to stop after ``iteration`` (1-based).

        ``errors``: the groups' reconstruction errors ``‖X_ℓ − W_ℓH‖_F`` at this iterate (eq.
        (10)); ``losses``: their relative losses (``"authors"``); ``objective`` and ``scale``: the
        objective and its size (``"window"``; ``scale`` may be a function, called only at the
        window's checks).
        """
        if self.rule in ("eq10", "authors"):
            errors = _errors(losses if self.rule == "authors" else errors)
            if self._previous is not None and relative_change(errors, self._previous) < self.tol:
                self.converged = True
                return True
            self._previous = errors
            if iteration % self.every == 0 and (scale() if callable(scale) else scale) <= EXACT_FIT:
                self.converged = True  # an exact fit: what is left is rounding, whose changes never settle
                return True
        elif iteration % self.every == 0:
            scale = scale() if callable(scale) else scale
            if scale <= EXACT_FIT or (self._reference is not None and abs(self._reference - objective) <= self.tol * abs(scale)):
                self.converged = True
                return True
            self._reference = objective
        return iteration >= self.max_iter

    def start(self, errors, losses=None) -> None:
        """Record the starting point's errors (eq. (10)) or losses (``"authors"``), so that the
        rule can stop after iteration 1."""
        if self.rule in ("eq10", "authors"):
            self._previous = _errors(losses if self.rule == "authors" else errors)

    def warn_if_capped(self, n_iter: int, objective: float) -> None:
        if not self.converged:
            warnings.warn(
                f"{self.what} stopped at max_iter={self.max_iter} before its stopping rule was met "
                f"(objective {objective:.6g}); raise max_iter or loosen tol.",
                ConvergenceWarning,
                stacklevel=3,
            )


def check_solver_parameters(tol, max_iter, n_estimates=None, names: dict | None = None) -> None:
    """Shared parameter checks with messages that say what to do; ``names`` words the options
    for a message (the audit passes :func:`~fairaudit.vocabulary.term` mentions)."""
    names = {"tol": "tol", "max_iter": "max_iter", "n_estimates": "n_estimates", **(names or {})}
    if not np.isscalar(tol) or not np.isfinite(tol) or tol < 0:
        raise FairAuditError(f"{names['tol']} must be a non-negative number, got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise FairAuditError(f"{names['max_iter']} must be a positive whole number, got {max_iter!r}.")
    if n_estimates is not None and (
        isinstance(n_estimates, bool) or not isinstance(n_estimates, int | np.integer) or n_estimates < 1
    ):
        raise FairAuditError(
            f"{names['n_estimates']} must be a positive whole number (T of Algorithm 1), got {n_estimates!r}."
        )


def check_estimates(estimates, data: GroupedData, r: int) -> np.ndarray:
    """User-supplied ``E_ℓ`` (one non-negative number per group, in group order)."""
    values = np.asarray(estimates, dtype=float).ravel()
    if values.shape != (data.n_groups,):
        raise FairAuditError(
            f"estimates must hold one E_ℓ per group ({data.n_groups}: {', '.join(map(repr, data.labels))}), "
            f"got {values.size}."
        )
    if not np.isfinite(values).all() or (values < 0).any():
        raise FairAuditError(f"estimates must be non-negative numbers (errors ‖X_ℓ − W_ℓH_ℓ‖_F), got {values}.")
    if (values > data.norms * (1 + 1e-9)).any():
        raise ParameterError(
            f"an estimate E_ℓ exceeds its group's norm ‖X_ℓ‖_F (E = {values}, norms = {data.norms}): "
            f"E_ℓ must be the absolute error of a rank-{r} NMF of group ℓ alone, not a relative error."
        )
    return values
