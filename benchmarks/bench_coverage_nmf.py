"""Coverage of the NMF family's bootstrap intervals, replicates warm-started or not (issue 23, item 1).

NMF has no closed-form population value, so the population is a large finite one: ``--population``
rows of a planted non-negative model (two groups; each row ``w·H_g`` plus uniform noise, where
group A's dictionary ``H_A`` and group B's ``H_B`` share some parts). Its *population value* is the
audit's own statistic computed on all of it (the plug-in principle: the same procedure — Algorithm
1's ``E_ℓ``, standard NMF, Fairer-NMF from it — on the whole population). Each repetition draws a
sample of ``--sizes`` rows per group from the population without replacement, fits the audit's NMF
family on it (:class:`fairaudit.nmf.audit.NMFAudit`, the variants of ``--variants``) and draws
``--replicates`` stratified bootstrap replicates of two kinds:

* ``warm`` — the audit's replicates (:meth:`NMFAudit.fit` with ``replicate=True``): every fit
  continued from the audit's own fit, ``E_ℓ`` from Algorithm 1's runs continued;
* ``cold`` — what replicates were before issue 23: the audit's whole procedure refitted on the
  resampled rows from other random starts (an :class:`NMFAudit` with the replicate's own seed).

Printed per variant, rank and kind: how often the 95 % percentile interval (the audit's) contains
the population value — each group's relative loss and relative error, and the loss gap ``A − B``
(what the verdicts compare) —, how often the basic interval does, the bias of the point estimate
(its mean minus the population value) and the mean width of the percentile interval, both in
units of the point estimates' spread over the samples (a normal 95 % interval is 3.92 wide), and
the seconds the replicates took.

    python benchmarks/bench_coverage_nmf.py [--repetitions 100] [--replicates 20] [--sizes 420,180]
        [--ranks 1,3] [--variants vanilla,fair_mu] [--starts warm,cold] [--population 30000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed

from fairaudit import AuditData, uncertainty
from fairaudit.audit import AuditConfig, RecordSink, _Values  # _Values: what a replicate records, by key
from fairaudit.nmf.audit import NMFAudit

FEATURES = 8
METRICS = ("rel_loss", "rel_error")
GROUPS = ("g=A", "g=B")


def population(size: int, shares=(0.7, 0.3), seed: int = 2026) -> tuple[np.ndarray, np.ndarray]:
    """The planted population: group A from three parts, group B from two of A's and one of its
    own, coefficients uniform, uniform noise of a tenth of a row's mean."""
    rng = np.random.default_rng(seed)
    parts = rng.uniform(size=(5, FEATURES)) ** 2
    dictionaries = {"A": parts[[0, 1, 2]], "B": parts[[0, 3, 4]] * np.array([[1.0], [1.5], [0.7]])}
    rows, labels = [], []
    for (name, H), share in zip(dictionaries.items(), shares, strict=True):
        m = int(round(size * share))
        X = rng.uniform(size=(m, 3)) @ H
        X += rng.uniform(0.0, 0.1 * X.mean(), size=X.shape)
        rows.append(X)
        labels += [name] * m
    return np.vstack(rows), np.array(labels)


def _family(X, labels, ranks, variants, seed: int) -> NMFAudit:
    data = AuditData.from_arrays(X, [f"g={v}" for v in labels], scaling="none")
    # bootstrap > 0: the family keeps what its replicates continue (they are drawn here, not by the family)
    config = AuditConfig(methods=("nmf",), ranks=tuple(ranks), variants=tuple(variants), random_state=seed,
                         bootstrap=uncertainty.DEFAULT_BOOTSTRAP["nmf"])
    return NMFAudit(data, config, RecordSink("nmf"))


def statistic(family: NMFAudit, fits, rows) -> dict:
    """The fits' records (``(variant, rank, group, metric) → value``): losses and errors, no leakage test."""
    found = _Values()
    family.measure(fits, rows, found, replicate=True)
    return found.values


def one_repetition(X, labels, sizes, ranks, variants, replicates: int, starts, repetition: int) -> dict:
    """``{kind: (point values, replicate values (list of dicts), seconds)}`` of one sample."""
    rng = np.random.default_rng([repetition, 7])
    chosen = np.concatenate([rng.choice(np.flatnonzero(labels == name), size=m, replace=False) for name, m in zip("AB", sizes, strict=True)])
    X_s, labels_s = X[chosen], labels[chosen]
    warnings.simplefilter("ignore")
    family = _family(X_s, labels_s, ranks, variants, seed=repetition)
    rows = np.arange(len(chosen))
    fits = family.fit(rows)
    point = statistic(family, fits, rows)
    out = {}
    for kind in starts:
        started = time.perf_counter()
        values = []
        for b, seed in enumerate(uncertainty.replicate_seeds(repetition, replicates)):
            resampled = family.resample(np.random.default_rng(seed), rows, b, replicates)
            if kind == "warm":
                refits = family.fit(resampled, warm=fits, replicate=True, seed=seed)
                values.append(statistic(family, refits, resampled))
            else:  # the audit's procedure from its own random start on the resampled rows
                cold = _family(X_s[resampled], labels_s[resampled], ranks, variants, seed=int(seed.generate_state(1)[0]))
                every = np.arange(len(resampled))
                values.append(statistic(cold, cold.fit(every), every))
        out[kind] = (point, values, time.perf_counter() - started)
    return out


@dataclass(frozen=True)
class Coverage:
    """One quantity's figures over the samples: how often the percentile and the basic interval
    held the population value, the point estimate's bias and the percentile interval's mean width,
    both in units of the point estimates' spread."""

    percentile: float
    basic: float
    bias: float
    width: float


def coverage(truth: dict, runs: list[dict], kind: str, variant: str, rank: int, confidence: float = 0.95) -> dict[str, Coverage]:
    """:class:`Coverage` of each group's ``rel_loss`` and ``rel_error`` and of the loss gap A − B."""
    keys = [(variant, rank, g, m) for m in METRICS for g in GROUPS]

    def gap(values: dict) -> float:
        return values[(variant, rank, GROUPS[0], "rel_loss")] - values[(variant, rank, GROUPS[1], "rel_loss")]

    quantities = {f"{key[3]} {key[2]}": (lambda v, key=key: v[key]) for key in keys}
    quantities["loss gap A−B"] = gap
    found = {}
    for name, value_of in quantities.items():
        true = value_of(truth)
        points = np.array([value_of(run[kind][0]) for run in runs])
        hits = {method: 0 for method in uncertainty.INTERVAL_METHODS}
        widths = []
        for run, point in zip(runs, points, strict=True):
            draws = [value_of(v) for v in run[kind][1]]
            for method in uncertainty.INTERVAL_METHODS:
                low, high = uncertainty.bootstrap_interval(draws, confidence, point, method)
                hits[method] += low <= true <= high
            low, high = uncertainty.bootstrap_interval(draws, confidence)
            widths.append(high - low)
        spread = float(np.std(points)) or float("nan")
        found[name] = Coverage(hits["percentile"] / len(runs), hits["basic"] / len(runs), (float(np.mean(points)) - true) / spread,
                               float(np.mean(widths)) / spread)
    return found


def summarise(truth: dict, runs: list[dict], kind: str, variant: str, rank: int) -> str:
    """One line of :func:`coverage`'s figures and the replicates' seconds."""
    parts = [
        f"{name} {c.percentile:.2f} (basic {c.basic:.2f}; bias {c.bias:+.1f} sd; width {c.width:.1f} sd)"
        for name, c in coverage(truth, runs, kind, variant, rank).items()
    ]
    seconds = float(np.mean([run[kind][2] for run in runs]))
    return f"{variant} rank {rank} {kind}: " + "; ".join(parts) + f"; replicates {seconds:.1f} s per sample"


def population_values(X, labels, ranks, variants) -> dict:
    """The audit's statistics on the whole population (its fits from seed 0)."""
    whole = _family(X, labels, ranks, variants, seed=0)
    every = np.arange(len(labels))
    return statistic(whole, whole.fit(every), every)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=uncertainty.DEFAULT_BOOTSTRAP["nmf"])
    parser.add_argument("--sizes", default="420,180")
    parser.add_argument("--ranks", default="1,3")
    parser.add_argument("--variants", default="vanilla,fair_mu")
    parser.add_argument("--starts", default="warm,cold")
    parser.add_argument("--population", type=int, default=30_000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    ranks = [int(r) for r in args.ranks.split(",")]
    variants = args.variants.split(",")
    starts = args.starts.split(",")
    started = time.perf_counter()
    X, labels = population(args.population)
    warnings.simplefilter("ignore")
    truth = population_values(X, labels, ranks, variants)
    print(f"population {len(labels)} rows × {FEATURES} ({np.mean(labels == 'A'):.0%} A), its values found in "
          f"{time.perf_counter() - started:.0f} s; samples of {sizes} rows; {args.repetitions} repetitions × "
          f"{args.replicates} replicates; nominal 0.95", flush=True)
    for variant in variants:
        for rank in ranks:
            print(f"  population {variant} rank {rank}: rel_loss A {truth[(variant, rank, 'g=A', 'rel_loss')]:.4f}, "
                  f"B {truth[(variant, rank, 'g=B', 'rel_loss')]:.4f}", flush=True)
    runs = Parallel(n_jobs=args.jobs)(
        delayed(one_repetition)(X, labels, sizes, ranks, variants, args.replicates, starts, r) for r in range(args.repetitions)
    )
    for variant in variants:
        for rank in ranks:
            for kind in starts:
                print(summarise(truth, runs, kind, variant, rank), flush=True)
    print(f"{time.perf_counter() - started:.0f} s in all (load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
