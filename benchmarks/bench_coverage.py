"""Coverage of the bootstrap intervals of the per-group PCA loss (issue 10's simulation).

Two Gaussian groups with known covariances (zero means), so the *population* loss of every
group under the population's vanilla PCA is exact: ``loss_i = tr C_i − tr(UᵀC_iU) − Σ_{j>d}
λ_j(C_i)``, ``U`` the top-``d`` eigenvectors of the pooled covariance ``Σ_i (m_i/m) C_i``. For
each repetition a sample is drawn, the audit's PCA family fits it and its stratified bootstrap
(the audit's own code: reweighted group moments, ``B`` replicates) gives an interval per group;
printed: how often the interval contains the population value, for the percentile interval (the
audit's) and the basic one, with the mean interval width against the spread of the estimates; and
for the difference between the first two groups (the verdicts' pairwise comparison,
:func:`fairaudit.verdicts.pairwise_comparisons`: the percentile interval of the replicates'
differences) how often its interval contains the population difference and how often the
bootstrap Wald test ``|d| / SE > z`` rejects a true difference of 0 (designs where the groups'
population losses are equal).

    python benchmarks/bench_coverage.py [--repetitions 400] [--replicates 200] [--sizes 500,300] [--designs rotated,axis]

Designs: ``rotated`` (both groups' population losses positive at rank 1; at rank 2 one is 0,
the boundary) and ``axis`` (one group's subspace is the pooled one at each rank: a loss of 0).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fairaudit import AuditData, uncertainty
from fairaudit.audit import AuditConfig, Recorder, RecordSink
from fairaudit.pca.audit import PCAAudit
from fairaudit.verdicts import wald_pvalue


def population_losses(covariances, weights, d: int) -> np.ndarray:
    pooled = sum(w * C for w, C in zip(weights, covariances, strict=True))
    U = np.linalg.eigh(pooled)[1][:, ::-1][:, :d]
    losses = []
    for C in covariances:
        tail = np.sort(np.linalg.eigvalsh(C))[::-1][d:].sum()
        losses.append(np.trace(C) - np.trace(U.T @ C @ U) - tail)
    return np.array(losses)


class _Values(Recorder):
    def __init__(self):
        self.values = {}

    def add(self, variant, rank, metric, value, group=""):
        self.values[(group, metric)] = value


def group_losses(seed: int, sizes, covariances, rank: int, replicates: int) -> tuple[np.ndarray, np.ndarray]:
    """``(point losses (k,), replicate losses (B, k))`` of one sample."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.multivariate_normal(np.zeros(len(C)), C, size=m) for C, m in zip(covariances, sizes, strict=True)])
    labels = np.repeat([f"g{i}" for i in range(len(sizes))], sizes)
    data = AuditData.from_arrays(X, labels, scaling="none")
    family = PCAAudit(data, AuditConfig(ranks=(rank,), variants="vanilla"), RecordSink("pca"))
    rows = np.arange(len(labels))
    fits = family.fit(rows)
    point = _Values()
    family.measure(fits, rows, point, replicate=True)  # replicate=True: the losses only, no leakage test
    names = [f"g{i}" for i in range(len(sizes))]
    replicated = np.empty((replicates, len(sizes)))
    for b, seed_b in enumerate(uncertainty.replicate_seeds(seed, replicates)):
        resampled = uncertainty.stratified_resample(family.codes, np.random.default_rng(seed_b))
        refits = family.fit(resampled, warm=fits, replicate=True)
        found = _Values()
        family.measure(refits, resampled, found, replicate=True)
        replicated[b] = [found.values[(g, "loss")] for g in names]
    return np.array([point.values[(g, "loss")] for g in names]), replicated


def coverage(sizes, covariances, rank: int, repetitions: int, replicates: int, confidence: float = 0.95) -> dict:
    weights = np.asarray(sizes) / sum(sizes)
    truth = population_losses(covariances, weights, rank)
    hits = {method: np.zeros(len(sizes)) for method in uncertainty.INTERVAL_METHODS}
    widths, estimates = [], []
    difference_hits, rejections = 0, 0
    for repetition in range(repetitions):
        point, replicated = group_losses(repetition, sizes, covariances, rank, replicates)
        estimates.append(point)
        draws = replicated[:, 0] - replicated[:, 1]
        low, high = uncertainty.bootstrap_interval(draws, confidence)
        difference_hits += low <= truth[0] - truth[1] <= high
        rejections += wald_pvalue(point[0] - point[1], float(np.std(draws, ddof=1))) <= 1 - confidence
        for method in uncertainty.INTERVAL_METHODS:
            bounds = np.array([uncertainty.bootstrap_interval(replicated[:, i], confidence, point[i], method) for i in range(len(sizes))])
            hits[method] += (bounds[:, 0] <= truth) & (truth <= bounds[:, 1])
            if method == uncertainty.INTERVAL_METHOD:
                widths.append(bounds[:, 1] - bounds[:, 0])
    return {
        "truth": truth,
        "difference": difference_hits / repetitions,
        "rejections": rejections / repetitions,
        "coverage": {method: found / repetitions for method, found in hits.items()},
        "width": np.mean(widths, axis=0),
        "spread": np.std(estimates, axis=0),
    }


def designs():
    angle = 0.6
    rotation = np.eye(4)
    rotation[:2, :2] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
    rotated = [np.diag([4.0, 2.0, 1.0, 0.5]), rotation @ np.diag([3.0, 0.5, 1.5, 0.5]) @ rotation.T]
    axis = [np.diag([4.0, 2.0, 1.0, 0.5]), np.diag([1.0, 1.0, 3.0, 0.5])]
    same = [np.diag([4.0, 2.0, 1.0, 0.5]), np.diag([4.0, 2.0, 1.0, 0.5])]  # equal population losses: a difference of 0
    return {"rotated": rotated, "axis": axis, "same": same}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--sizes", default="500,300")
    parser.add_argument("--designs", default="rotated,axis")
    parser.add_argument("--ranks", default="1,2")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = args.designs.split(",")
    for name, covariances in ((n, c) for n, c in designs().items() if n in chosen):
        for rank in (int(r) for r in args.ranks.split(",")):
            started = time.perf_counter()
            found = coverage(sizes, covariances, rank, args.repetitions, args.replicates)
            cover = ", ".join(f"{method} {np.array2string(value, precision=3)}" for method, value in found["coverage"].items())
            print(
                f"{name:8s} rank {rank} sizes {sizes}: population loss {np.array2string(found['truth'], precision=4)}; "
                f"coverage (nominal 0.95, {args.repetitions} repetitions × {args.replicates} replicates): {cover}; "
                f"mean width / sd of the estimate {np.array2string(found['width'] / found['spread'], precision=2)} "
                f"(3.92 for a normal 95 % interval); difference g0 − g1: population {found['truth'][0] - found['truth'][1]:.4f}, "
                f"interval coverage {found['difference']:.3f}, Wald test rejects at 0.05 in {found['rejections']:.3f}; "
                f"{time.perf_counter() - started:.0f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
