"""Seed-to-seed spread of the leakage metric (balanced accuracy of predicting the group).

For each sample (the default ``two_groups`` and the 442-row ``diabetes``) and each rank of
vanilla PCA's and Fair PCA's representations, the leakage is computed with seeds 0…S−1 (the seed moves the
classifier's split(s) and, with the permutation test, the permutations) by both protocols in
:data:`PROTOCOLS` — before issue 10 and now — side by side in one process; printed: per rank the
mean, the standard deviation and the range (max − min) over seeds, and the cost per evaluation.

    python benchmarks/bench_leakage_stability.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fairaudit import metrics
from fairaudit.pca import PCA, FairPCA
from fairaudit.samples import load_sample


def representations(name: str, ranks):
    data = load_sample(name)
    X = data.X - data.X.mean(axis=0)
    for variant, estimator in (("PCA", PCA), ("Fair PCA", FairPCA)):
        for rank in ranks:
            model = estimator(rank).fit(X, sensitive_features=data.groups.codes)
            yield f"{variant} rank {rank:2d}", model.transform(X), data.groups.codes


PROTOCOLS = {
    "one 75/25 split (before)": lambda Z, codes, seed: metrics.leakage(Z, codes, test_size=0.25, random_state=seed)["unfairness_balanced"]
    + 1.0 / len(np.unique(codes)),
    "repeated stratified 5-fold × 3 (now)": lambda Z, codes, seed: metrics.leakage_test(Z, codes, random_state=seed).balanced,
}
"""How the balanced accuracy was measured before issue 10 (one stratified split, [Kim24] App. A.6)
and how the audit measures it now (:func:`fairaudit.metrics.leakage_test`, with its permutations)."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--ranks", default="1,2,3,5,8")
    args = parser.parse_args(argv)
    ranks = [int(r) for r in args.ranks.split(",")]
    for name in ("two_groups", "diabetes"):
        found = list(representations(name, ranks))
        for protocol, evaluate in PROTOCOLS.items():
            spreads = []
            for label, Z, codes in found:
                values, seconds = [], []
                for seed in range(args.seeds):
                    started = time.perf_counter()
                    values.append(evaluate(Z, codes, seed))
                    seconds.append(time.perf_counter() - started)
                values = np.asarray(values)
                spreads.append(np.ptp(values))
                print(
                    f"{name:10s} {protocol:38s} {label}: balanced accuracy mean {values.mean():.3f}, sd {values.std(ddof=1):.4f}, "
                    f"range {np.ptp(values):.4f} over {args.seeds} seeds; {1000 * np.median(seconds):.1f} ms per evaluation",
                    flush=True,
                )
            print(f"{name:10s} {protocol:38s} largest range over representations {max(spreads):.4f}, median {np.median(spreads):.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
