"""Fairer-NMF by alternating minimisation (Algorithm 2): where its time goes and where it stops
being practical.

1. The W-step: our batched block principal pivoting (``nnls_rows``; cold, and warm-started from
   the solution of a slightly different ``H`` as in AM's iterations) vs scipy's active-set NNLS
   row by row vs one CVXPY problem solved by OSQP (the paper's QP solver; first solve, including
   compilation, and a re-solve of the compiled problem), with the residuals.
2. Seconds per AM iteration (H-step SOCP + W-step) against data size at rank 10, and the
   projected time per rank at the default cap of 200 iterations — the basis of the audit's
   ``am_max_cells`` (AM is skipped above it under ``--variants all``).
3. BLAS threads: 5 AM iterations on the Table-1 data at rank 12 with one and with two threads.

    .venv/bin/python benchmarks/bench_nmf_am.py
"""

from __future__ import annotations

import sys
import time
import warnings

import cvxpy as cp
import numpy as np
from scipy.optimize import nnls
from threadpoolctl import threadpool_limits

from fairaudit import NMF, FairerNMF
from fairaudit.nmf import _core
from fairaudit.nmf._am import nnls_rows
from fairaudit.nmf.audit import DEFAULT_OPTIONS, nmf_input
from fairaudit.nmf.fair import DEFAULT_MAX_ITER
from fairaudit.samples import load_sample


def w_step() -> None:
    print("== W-step: seconds, and ‖X − WH‖ of each (block pivoting | scipy per row | OSQP)")
    rng = np.random.default_rng(0)
    for m, n, r in ((297, 12, 10), (1750, 20, 8), (4165, 12, 10), (5000, 50, 10)):
        X = rng.uniform(size=(m, r)) @ rng.uniform(size=(r, n)) + 0.1 * rng.uniform(size=(m, n))
        H = rng.uniform(size=(r, n))
        start = time.perf_counter()
        W = nnls_rows(X, H)
        cold = time.perf_counter() - start
        H_next = H * rng.uniform(0.95, 1.05, size=H.shape)  # the next AM iteration's H
        start = time.perf_counter()
        W_next = nnls_rows(X, H_next, start=W)
        warm = time.perf_counter() - start
        start = time.perf_counter()
        reference = np.array([nnls(H.T, x)[0] for x in X])
        scipy_seconds = time.perf_counter() - start
        V = cp.Variable((m, r), nonneg=True)
        P = cp.Parameter((r, n), value=H)
        problem = cp.Problem(cp.Minimize(cp.sum_squares(X - V @ P)))
        start = time.perf_counter()
        problem.solve(solver="OSQP")
        first = time.perf_counter() - start
        start = time.perf_counter()
        problem.solve(solver="OSQP")
        again = time.perf_counter() - start
        reference_next = np.array([nnls(H_next.T, x)[0] for x in X])
        print(
            f"{m}×{n}, rank {r}: pivoting {cold:.4f} s cold, {warm:.4f} s warm | scipy {scipy_seconds:.4f} s | "
            f"OSQP first {first:.3f} s, re-solve {again:.3f} s | residuals {np.linalg.norm(X - W @ H):.10g}, "
            f"{np.linalg.norm(X - reference @ H):.10g}, {np.linalg.norm(X - V.value @ H):.10g}; warm "
            f"{np.linalg.norm(X - W_next @ H_next):.10g} vs scipy {np.linalg.norm(X - reference_next @ H_next):.10g}"
        )


def per_iteration() -> None:
    cap = DEFAULT_MAX_ITER["am"]
    print(f"\n== AM seconds per iteration at rank 10 (mean of 5 iterations; two groups 70/30 %), projected to {cap} iterations")
    rng = np.random.default_rng(1)
    for m, n in ((2000, 20), (5000, 20), (8000, 25), (4000, 50), (15000, 20), (30000, 24)):
        X = rng.uniform(size=(m, 10)) @ rng.uniform(size=(10, n)) + 0.1 * rng.uniform(size=(m, n))
        groups = (rng.uniform(size=m) < 0.3).astype(int)
        vanilla = NMF(10, n_estimates=1, max_iter=200, random_state=0).fit(X, sensitive_features=groups)
        model = FairerNMF(10, solver="am", estimates=vanilla.E_, init="custom", tol=0.0, max_iter=5)
        start = time.perf_counter()
        model.fit(X, sensitive_features=groups, W=vanilla.W_, H=vanilla.components_)
        each = (time.perf_counter() - start) / 5
        print(f"{m:6d}×{n:<3d} ({m * n:>8,} cells): {each:.3f} s per iteration → {each * cap / 60:.1f} min at {cap} iterations")
    print(f"audit default am_max_cells = {DEFAULT_OPTIONS['am_max_cells']:,}")


def threads() -> None:
    prepared = nmf_input(load_sample("nmf_table1"))
    X, groups = prepared.X, prepared.sensitive_features
    vanilla = NMF(12, random_state=0).fit(X, sensitive_features=groups)
    print("\n== 5 AM iterations on Table 1 at rank 12: BLAS threads")
    saved = _core.BLAS_THREADS
    try:
        for limit in (1, 2):
            _core.BLAS_THREADS = None
            with threadpool_limits(limits=limit, user_api="blas"):
                model = FairerNMF(12, solver="am", estimates=vanilla.E_, init="custom", tol=0.0, max_iter=5)
                start, cpu = time.perf_counter(), time.process_time()
                model.fit(X, sensitive_features=groups, W=vanilla.W_, H=vanilla.components_)
                print(f"{limit} thread(s): {time.perf_counter() - start:.2f} s wall, {time.process_time() - cpu:.2f} s CPU")
    finally:
        _core.BLAS_THREADS = saved


def main() -> int:
    warnings.simplefilter("ignore")
    w_step()
    per_iteration()
    threads()
    return 0


if __name__ == "__main__":
    sys.exit(main())
