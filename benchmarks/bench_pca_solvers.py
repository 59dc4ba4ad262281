"""Fair PCA: our exact eigen-solver vs Samadi's SDP in CVXPY, same instances, same process.

Prints, per number of features n: seconds for solver="eig" (the best of 5 runs: a few milliseconds,
where one run is at the mercy of a busy machine) and solver="sdp" (Algorithm 1: SDP + LP rounding,
one run), the speed ratio, and the relative difference of the optimal max group loss. Both run
under the family's BLAS setting (``pca._problem.BLAS_THREADS``), as the estimators do.
Usage: python benchmarks/bench_pca_solvers.py [n1 n2 ...]   (default 20 40 60 100)

``--groups k`` (k ≥ 3): k groups of 400 rows; the eig solver then runs Kelley's cutting planes,
whose two LPs per iteration are kept as HiGHS models across cuts (``_dual._CutLPs``). It is also
timed with those LPs built anew for every solve through ``scipy.optimize.linprog`` (the code before
2026-11-23, reproduced here as :class:`RebuiltLPs`), same instances, same process: the ratio is the
gain of keeping them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import best_of, machine

from fairaudit import FairPCA
from fairaudit.groups import encode_groups
from fairaudit.linalg import blas_threads
from fairaudit.pca import GroupProblem, _dual
from fairaudit.pca._dual import solve_dual
from fairaudit.pca._problem import BLAS_THREADS
from fairaudit.pca._sdp import solve_sdp


def instance(n: int, seed: int = 0, groups: int = 2):
    rng = np.random.default_rng(seed)
    blocks = [rng.normal(size=(400, n)) @ (rng.normal(size=(n, n)) * rng.uniform(0.2, 2, n)) for _ in range(groups)]
    return np.vstack(blocks), np.repeat(np.arange(groups), 400)


class RebuiltLPs:
    """The k-group LPs as they were solved before: each built anew by ``scipy.optimize.linprog``."""

    def __init__(self, k: int):
        self.k, self.L = k, None

    def sync(self, losses) -> None:
        self.L = np.array(losses)

    def kelley(self, center, radius):
        from scipy.optimize import linprog

        T, k = self.L.shape
        bounds = [(max(0.0, c - radius), min(1.0, c + radius)) for c in center] + [(None, None)]
        result = linprog(np.r_[np.zeros(k), -1.0], A_ub=np.hstack([-self.L, np.ones((T, 1))]), b_ub=np.zeros(T),
                         A_eq=np.r_[np.ones(k), 0.0][None], b_eq=[1.0], bounds=bounds, method="highs")
        return None if result.status != 0 or result.x is None else (result.x[:k], float(-result.fun))

    def mix(self, L):
        return _dual._min_max_mix(L)


def main(sizes: list[int], groups: int = 2) -> None:
    print(f"Fair PCA, {groups} groups × 400 rows, rank d = 5; {machine()}")
    rebuilt_head = f" {'rebuilt-LP s':>12} {'kept/rebuilt':>12}" if groups > 2 else ""
    print(f"{'n':>5} {'eig s':>9} {'sdp s':>9} {'ratio':>8} {'eig iters':>9} {'rel. diff of max loss':>22} {'sdp solver':>10}{rebuilt_head}")
    for n in sizes:
        X, codes = instance(n, groups=groups)
        problem = GroupProblem.from_data(X, encode_groups(codes))
        with blas_threads(BLAS_THREADS):
            eig_seconds, eig = best_of(lambda problem=problem: solve_dual(problem, 5), 5)
            rebuilt = ""
            if groups > 2:
                kept = _dual._CutLPs
                _dual._CutLPs = RebuiltLPs
                try:
                    old_seconds, old = best_of(lambda problem=problem: solve_dual(problem, 5), 3)
                finally:
                    _dual._CutLPs = kept
                rebuilt = f" {old_seconds:12.4f} {old_seconds / eig_seconds:11.1f}×"
            start = time.perf_counter()
            sdp, solver = solve_sdp(problem, 5)
            sdp_seconds = time.perf_counter() - start
        diff = abs(eig.objective - sdp.objective) / sdp.objective
        print(f"{n:5d} {eig_seconds:9.4f} {sdp_seconds:9.2f} {sdp_seconds / eig_seconds:8.0f}× {eig.n_iter:9d} {diff:22.2e} {solver:>10}{rebuilt}")
    # the estimator path (validation + covariances included), for reference
    X, codes = instance(sizes[-1], groups=groups)
    start = time.perf_counter()
    FairPCA(5).fit(X, sensitive_features=codes)
    print(f"FairPCA(5).fit at n={sizes[-1]} including covariances and spectra: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[20, 40, 60, 100], help="numbers of features")
    parser.add_argument("--groups", type=int, default=2, help="groups of 400 rows (≥ 3: the cutting-plane path)")
    args = parser.parse_args()
    main(args.sizes, groups=args.groups)
