"""FUFS time and memory on crime (319 rows), google (701 × 1,695) and credit (30,000 rows), and the
effect of the Nyström approximation on the selection where the exact kernel also fits.

    python benchmarks/bench_fs_scale.py [--threads N]

Each fit runs in a fresh subprocess so its peak resident memory (``ru_maxrss``) is its own;
``tracemalloc`` gives the peak of numpy/Python allocations during the fit alone. Features are
rescaled to [0, 1] as the audit does. The BLAS thread count is printed: on a shared, loaded
machine multithreaded BLAS on these matrix sizes was measured 10–50× slower than one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fs_data  # noqa: E402

from fairaudit import FUFS  # noqa: E402
from fairaudit.fs._alignment import ExactRBF  # noqa: E402
from fairaudit.fs.audit import minmax  # noqa: E402
from fairaudit.fs.fufs import _resolve_gamma  # noqa: E402


def _load(name):
    if name == "crime":
        X, group, _, _ = _fs_data.crime()
    elif name == "google":
        X, group, _ = _fs_data.google()
    else:
        X, group, _ = _fs_data.credit()
        if name.startswith("credit3000"):
            rows = np.random.default_rng(0).choice(len(X), 3000, replace=False)
            X, group = X[rows], group[rows]
    return minmax(X), group


def child(name: str, fraction: float, params: dict) -> None:
    X, group = _load(name)
    m = max(1, round(fraction * X.shape[1]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = FUFS(m, random_state=0, **params).fit(X, sensitive_features=group)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({
        "rows": X.shape[0], "features": X.shape[1], "m": m, "seconds": seconds, "n_iter": fitted.n_iter_,
        "proxy_iter": max(len(getattr(fitted, "sensitive_objective_history_", [0])) - 1, 0), "converged": bool(fitted.converged_),
        "kernel": fitted.approximation_, "traced_peak_mb": peak / 2**20,
        "rss_before_mb": before / 1024, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "support": np.flatnonzero(fitted.support_).tolist(), "scores": fitted.scores_.tolist(),
        "swaps": getattr(fitted, "n_swaps_", 0),
        "rounded": getattr(fitted, "rounded_objective_", float("nan")), "binary": getattr(fitted, "binary_objective_", float("nan")),
    }))


def run(name: str, fraction: float, threads: int, **params) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, str(fraction), json.dumps(params)],
        capture_output=True, text=True, env=env, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        with threadpool_limits(args.threads):
            child(args.child[0], float(args.child[1]), json.loads(args.child[2]))
        return
    print(f"BLAS threads per fit: {args.threads}; load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("\n== FUFS fit time and memory (one fit at 20 % of the features; defaults otherwise) ==")
    header = f"{'data':<8}{'rows × features':>18}{'m':>5}{'kernel':>56}{'seconds':>10}{'iters (sel+proxy)':>19}{'traced peak MB':>16}{'RSS peak MB':>13}"
    print(header)
    for name in ("crime", "google", "credit"):
        r = run(name, 0.2, args.threads)
        print(f"{name:<8}{r['rows']:>9,} × {r['features']:<6,}{r['m']:>5}{r['kernel']:>56}{r['seconds']:>10.1f}"
              f"{r['n_iter']:>11} + {r['proxy_iter']:<5}{r['traced_peak_mb']:>16.0f}{r['rss_peak_mb']:>13.0f}"
              f"   J: rounded {r['rounded']:.3f} → refined {r['binary']:.3f} ({r['swaps']} swaps)")

    print("\n== FUFS(formulation='alignment'): Nyström vs exact kernel, selection compared (20 % of the features) ==")
    print(f"{'data':<12}{'landmarks':>10}{'seconds':>9}{'× exact':>9}{'same picks':>12}{'Spearman(scores)':>18}{'A(data)':>9}{'A(protected)':>14}")
    for name in ("crime", "google", "credit3000"):
        X, group = _load(name)
        active = np.flatnonzero(np.ptp(X, axis=0) > 0)
        judge = ExactRBF(X[:, active], _resolve_gamma("scale", X[:, active]))
        targets = [judge.target_weights(np.ones(active.size), active.size),
                   judge.target_factor((group[:, None] == np.unique(group)[None, :]).astype(float))]

        def exact_alignments(support, active=active, judge=judge, targets=targets):
            mask = np.isin(active, support).astype(float)
            return judge.value_grad(mask, mask.sum(), np.zeros(2), targets, gradient=False)[2]

        exact = run(name, 0.2, args.threads, formulation="alignment", approximation="exact")
        rows = [("exact", exact)]
        for landmarks in (100, 300):
            rows.append((landmarks, run(name, 0.2, args.threads, formulation="alignment", approximation="nystroem", n_landmarks=landmarks)))
        for label, r in rows:
            same = len(set(r["support"]) & set(exact["support"]))
            rho = spearmanr(r["scores"], exact["scores"]).statistic
            a_data, a_protected = exact_alignments(r["support"])
            print(f"{name:<12}{label!s:>10}{r['seconds']:>9.1f}{r['seconds'] / exact['seconds']:>9.2f}"
                  f"{same:>6} / {exact['m']:<4}{rho:>18.3f}{a_data:>9.3f}{a_protected:>14.4f}")
    print("(A(·): centred alignment of each selection's kernel with all features / with the groups, both computed")
    print(" with the exact kernel, so the rows compare the selections themselves.)")


if __name__ == "__main__":
    main()
