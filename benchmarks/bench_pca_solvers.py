"""Fair PCA: our exact eigen-solver vs Samadi's SDP in CVXPY, same instances, same process.

Prints, per number of features n: seconds for solver="eig" (the best of 5 runs: a few milliseconds,
where one run is at the mercy of a busy machine) and solver="sdp" (Algorithm 1: SDP + LP rounding,
one run), the speed ratio, and the relative difference of the optimal max group loss. Both run
under the family's BLAS setting (``pca._problem.BLAS_THREADS``), as the estimators do.
Usage: python benchmarks/bench_pca_solvers.py [n1 n2 ...]   (default 20 40 60 100)
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import machine

from fairaudit import FairPCA
from fairaudit.groups import encode_groups
from fairaudit.linalg import blas_threads
from fairaudit.pca import GroupProblem
from fairaudit.pca._dual import solve_dual
from fairaudit.pca._problem import BLAS_THREADS
from fairaudit.pca._sdp import solve_sdp


def instance(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    blocks = [rng.normal(size=(400, n)) @ (rng.normal(size=(n, n)) * rng.uniform(0.2, 2, n)) for _ in range(2)]
    return np.vstack(blocks), np.repeat([0, 1], 400)


def main(sizes: list[int]) -> None:
    print(f"Fair PCA, 2 groups × 400 rows, rank d = 5; {machine()}")
    print(f"{'n':>5} {'eig s':>9} {'sdp s':>9} {'ratio':>8} {'eig iters':>9} {'rel. diff of max loss':>22} {'sdp solver':>10}")
    for n in sizes:
        X, groups = instance(n)
        problem = GroupProblem.from_data(X, encode_groups(groups))
        with blas_threads(BLAS_THREADS):
            eig_seconds = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                eig = solve_dual(problem, 5)
                eig_seconds = min(eig_seconds, time.perf_counter() - start)
            start = time.perf_counter()
            sdp, solver = solve_sdp(problem, 5)
            sdp_seconds = time.perf_counter() - start
        diff = abs(eig.objective - sdp.objective) / sdp.objective
        print(f"{n:5d} {eig_seconds:9.4f} {sdp_seconds:9.2f} {sdp_seconds / eig_seconds:8.0f}× {eig.n_iter:9d} {diff:22.2e} {solver:>10}")
    # the estimator path (validation + covariances included), for reference
    X, groups = instance(sizes[-1])
    start = time.perf_counter()
    FairPCA(5).fit(X, sensitive_features=groups)
    print(f"FairPCA(5).fit at n={sizes[-1]} including covariances and spectra: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [20, 40, 60, 100])
