"""Very wide data: the PCA family's default audit of a 50 × 5,000 table (issue 13: ≤ 15 s on two
cores; the audit took 10 minutes and more when it formed a 5,000 × 5,000 covariance per group).

Prints the whole audit's time (every default variant, ranks 1–10, all metrics) and, side by side,
the group problem built in the row space (``n × n`` Gram matrix) against the dense one it
replaces (two 5,000 × 5,000 covariances and their eigen-decompositions; ``--dense`` to run it,
minutes), checking that both give the same Fair PCA losses.
Usage: python benchmarks/bench_pca_wide.py [--rows 50] [--features 5000] [--dense]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import machine, peak_rss_mb

from fairaudit import AuditConfig, AuditData, run_audit
from fairaudit.engine import GroupMoments
from fairaudit.pca import FairPCA, GroupProblem


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--features", type=int, default=5000)
    parser.add_argument("--dense", action="store_true", help="also build the dense d × d problem (minutes)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, d = args.rows, args.features
    X = rng.normal(size=(n, 8)) @ rng.normal(size=(8, d)) + rng.normal(size=(n, d))
    groups = np.repeat(["a", "b"], [n * 3 // 5, n - n * 3 // 5])
    data = AuditData.from_arrays(X, groups, name=f"wide {n}×{d}")
    print(f"PCA family on {n} × {d}; {machine()}")
    start = time.perf_counter()
    result = run_audit(data, AuditConfig(methods=("pca",)))
    total = time.perf_counter() - start
    fits = result.metric("seconds").groupby("variant").value.sum()
    print(f"  default PCA audit: {total:.1f} s (target ≤ 15 s); fit seconds per variant: "
          + ", ".join(f"{v} {s:.2f}" for v, s in fits.items())
          + f"; skipped: {', '.join(s['variant'] for s in result.skipped)}; peak RSS {peak_rss_mb():.0f} MB")
    start = time.perf_counter()
    wide = GroupProblem.from_data(data.X, data.groups)
    t_wide = time.perf_counter() - start
    print(f"  group problem in the row space (dimension {wide.dim}): {t_wide:.3f} s")
    if args.dense:
        start = time.perf_counter()
        dense = GroupProblem.from_moments(GroupMoments.from_rows(data.X, data.groups.codes, n_groups=2, labels=data.groups.labels))
        t_dense = time.perf_counter() - start
        for rank in (1, 5):
            a = FairPCA(rank)._fit_problem(wide).group_losses_
            b = FairPCA(rank)._fit_problem(dense).group_losses_
            assert np.allclose(a, b, rtol=1e-6, atol=1e-9), (a, b)
        print(f"  dense group problem (two {d} × {d} covariances): {t_dense:.1f} s — {t_dense / t_wide:.0f}× the row space; "
              "same Fair PCA losses at ranks 1 and 5")


if __name__ == "__main__":
    main()
