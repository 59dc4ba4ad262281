"""The PCA family's per-fit work over all rows, before and after one-pass group moments.

Each comparison runs the reference (how the audit worked before) and the current code side by
side in this process, checks that they give the same numbers, and prints the ratio:

1. group encoding (``encode_groups``: the pandas path every input took, and the NumPy path a plain
   array takes now) and its share of a plain ``PCA.fit``;
2. the per-fit metrics of the audit: before, every fit computed the coordinates of all rows twice
   (``variance_explained`` and the representation metrics) and ``‖X‖²`` again; now
   ``variance_explained`` and ``mmd2`` come from the group moments and only the stratified sample's
   coordinates are formed (for ``unfairness`` and ``mmd2_rbf``);
3. the RBF MMD² (reference: pooled ``pdist``, ``np.median``, full ``cdist`` kernel, block means)
   and its share of a whole PCA audit, measured by running the audit with each implementation;
4. building the group problem: centred copy + per-group ``A_iᵀA_i`` against the chunked moments
   (time and peak extra memory), next to the floor of one BLAS pass ``XᵀX``.

Data: Default Credit (30,000 × 22, Samadi's split) when ``../shared/datasets`` is present, and a
synthetic 1,000,000 × 20 matrix with two groups.
Usage: python benchmarks/bench_pca_moments.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from itertools import combinations

import numpy as np
import pandas as pd
from _common import SHARED, machine
from scipy.spatial.distance import cdist, pdist

from fairaudit import AuditConfig, AuditData, metrics, run_audit
from fairaudit.audit import representation_metrics
from fairaudit.engine import GroupMoments, LocalEngine
from fairaudit.groups import encode_groups
from fairaudit.pca import PCA, FairPCA, GroupProblem
from fairaudit.reproduce import samadi


def best_of(function, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


# ---------------------------------------------------------------- 1. group encoding
def encoding(X: np.ndarray, groups: np.ndarray) -> None:
    general = encode_groups(pd.Series(groups))
    fast = encode_groups(groups)
    assert fast.labels == general.labels and np.array_equal(fast.codes, general.codes)
    t_general = best_of(lambda: encode_groups(pd.Series(groups)))
    t_fast = best_of(lambda: encode_groups(groups))
    t_fit = best_of(lambda: PCA(3).fit(X, sensitive_features=groups))
    before = t_fit - t_fast + t_general
    print(f"1. encode_groups on {len(groups):,} rows: pandas path {1e3 * t_general:.1f} ms, NumPy path "
          f"{1e3 * t_fast:.1f} ms ({t_general / t_fast:.1f}×); share of PCA(3).fit "
          f"{100 * t_general / before:.0f} % before, {100 * t_fast / t_fit:.0f} % now (fit {1e3 * t_fit:.1f} ms)")


# ---------------------------------------------------------------- 2. per-fit metrics
def per_fit(data: AuditData, label: str) -> None:
    config = AuditConfig()
    X = data.X
    problem = GroupProblem.from_data(X, data.groups)
    summary = LocalEngine().summarise(data, sample_rows=config.leakage_max_rows, random_state=0)
    centred_sample = summary.sample.X - problem.mean
    fitted = FairPCA(3).fit(X, sensitive_features=data.groups.codes)
    projection = fitted.map_
    centred = X - problem.mean
    codes = data.groups.codes

    def before():
        values = {"variance_explained": metrics.variance_explained(centred, projection)}
        values.update(representation_metrics(projection.coordinates(centred), codes, config))
        return values

    def now():
        reduced = problem.reduce(projection)
        values = {"variance_explained": problem.variance_explained(reduced)}
        values.update(representation_metrics(projection.coordinates(centred_sample), summary.sample.codes, config))
        values["mmd2"] = problem.mean_discrepancy(reduced)
        return values

    old, new = before(), now()
    for key in ("variance_explained", "mmd2", "unfairness_balanced"):
        assert abs(old[key] - new[key]) <= 1e-8 * max(1.0, abs(old[key])), (key, old[key], new[key])
    t_before, t_now = best_of(before, 3), best_of(now, 3)
    moment_part = best_of(lambda: (problem.variance_explained(problem.reduce(projection)), problem.mean_discrepancy(problem.reduce(projection))))
    rows_part = best_of(lambda: (metrics.variance_explained(centred, projection), metrics.mmd2(projection.coordinates(centred), codes)))
    print(f"2. per-fit metrics, {label} ({data.n_rows:,} × {data.n_features}, rank 3): before {1e3 * t_before:.1f} ms, "
          f"now {1e3 * t_now:.1f} ms ({t_before / t_now:.1f}×); variance_explained + mmd2 alone "
          f"{1e3 * rows_part:.2f} ms from all rows vs {1e3 * moment_part:.3f} ms from the moments "
          f"({rows_part / moment_part:.0f}×); same values (mmd2_rbf differs only through its row sample above "
          f"{config.leakage_max_rows:,} rows)")


# ---------------------------------------------------------------- 3. RBF MMD²
def mmd2_rbf_reference(Z, groups, *, max_rows_per_group=1000, max_rows=4000, random_state=0):
    """The implementation before: pooled pdist + np.median, full cdist kernel, block means."""
    members = metrics.rbf_members(groups, max_rows_per_group, max_rows, random_state)
    k = len(members)
    pooled = Z[np.concatenate(members)]
    distances = pdist(pooled)
    sigma = float(np.median(distances))
    kernel = np.exp(-cdist(pooled, pooled, "sqeuclidean") / (2.0 * sigma * sigma))
    bounds = np.cumsum([0] + [len(m) for m in members])
    block = np.array([[kernel[bounds[a]:bounds[a + 1], bounds[b]:bounds[b + 1]].mean() for b in range(k)] for a in range(k)])
    return float(max(block[a, a] + block[b, b] - 2.0 * block[a, b] for a, b in combinations(range(k), 2)))


def rbf(data: AuditData, label: str) -> None:
    rng = np.random.default_rng(0)
    for k in (2, 4):
        Z = rng.normal(size=(30_000, 5))
        groups = rng.integers(0, k, 30_000)
        assert abs(mmd2_rbf_reference(Z, groups) - metrics.mmd2_rbf(Z, groups)) < 1e-10
        t_ref = best_of(lambda Z=Z, groups=groups: mmd2_rbf_reference(Z, groups))
        t_new = best_of(lambda Z=Z, groups=groups: metrics.mmd2_rbf(Z, groups))
        print(f"3. mmd2_rbf, {k} groups ({min(4000, 1000 * k):,} kernel rows): reference {1e3 * t_ref:.0f} ms, "
              f"now {1e3 * t_new:.0f} ms ({t_ref / t_new:.1f}×)")
    for name, implementation in (("reference", mmd2_rbf_reference), ("now", metrics.mmd2_rbf)):
        spent = [0.0]

        def timed(*args, _implementation=implementation, spent=spent, **kwargs):
            start = time.perf_counter()
            try:
                return _implementation(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        original = metrics.mmd2_rbf
        metrics.mmd2_rbf = timed
        try:
            start = time.perf_counter()
            run_audit(data, AuditConfig(variants=("vanilla", "fair_eig", "jevd", "cov_fair")))
            total = time.perf_counter() - start
        finally:
            metrics.mmd2_rbf = original
        print(f"   PCA audit of {label} with the {name} mmd2_rbf: {total:.2f} s, of which mmd2_rbf {spent[0]:.2f} s "
              f"({100 * spent[0] / total:.0f} %)")


# ---------------------------------------------------------------- 4. the problem
def problem_setup(rows: int) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(rows, 20)) @ rng.normal(size=(20, 20))
    groups = encode_groups((rng.random(rows) < 0.3).astype(int))

    def before():
        centred = X - X.mean(axis=0)
        return np.array([centred[mask].T @ centred[mask] / mask.sum() for mask in groups.masks()])

    def now():
        return GroupMoments.from_rows(X, groups.codes, n_groups=2).covariances()

    assert np.allclose(before(), now(), rtol=1e-9, atol=1e-9)
    floor = best_of(lambda: X.T @ X, 3)
    t_before, t_now = best_of(before, 3), best_of(now, 3)
    peaks = []
    for function in (before, now):
        tracemalloc.start()
        function()
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    print(f"4. group covariances of {rows:,} × 20 ({X.nbytes / 2**20:.0f} MiB): before {t_before:.2f} s "
          f"(peak +{peaks[0]:.0f} MiB), moments {t_now:.2f} s (peak +{peaks[1]:.0f} MiB); floor XᵀX {floor:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"PCA family: per-fit work before and after group moments; {machine()}")
    if (SHARED / "credit" / "default_degree.csv").exists():
        X, groups = samadi.credit(SHARED)
        credit = AuditData.from_arrays(X, groups, name="credit")
        encoding(X, groups)
        per_fit(credit, "credit")
    rng = np.random.default_rng(2)
    big = AuditData.from_arrays(rng.normal(size=(args.rows, 20)), np.where(rng.random(args.rows) < 0.2, "a", "b"), name="synthetic")
    per_fit(big, "synthetic")
    if (SHARED / "credit" / "default_degree.csv").exists():
        rbf(credit, "credit")
    problem_setup(args.rows)


if __name__ == "__main__":
    main()
