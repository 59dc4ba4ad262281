"""Fairer-NMF solvers side by side: MU (Algorithm 3) vs AM (Algorithm 2), starting points, and
the standard-NMF solver behind E_ℓ. Every figure quoted in the NMF docstrings comes from here.

1. AM vs MU: time and final largest relative loss per rank on Heart Disease (ranks 1–10) and
   the Table-1 synthetic data (ranks 3–12), both from the vanilla NMF with the same E_ℓ.
2. init="nmf" vs init="random" for Fairer-NMF (MU) on Heart, seeds 0–4.
3. E_ℓ by coordinate descent vs multiplicative updates on Heart (T = 5).

    .venv/bin/python benchmarks/bench_nmf_solvers.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

from fairaudit import NMF, FairerNMF, load
from fairaudit.nmf import GroupedData, clear_estimate_cache, estimate_group_errors
from fairaudit.nmf.audit import nmf_input
from fairaudit.samples import load_sample

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
HEART = SHARED / "heart" / "processed.cleveland.data"


def datasets():
    found = []
    if HEART.exists():
        prepared = nmf_input(load(HEART, sensitive="col_2", ignore=["col_14"], missing="drop"))
        found.append(("Heart Disease (297×12)", prepared, range(1, 11)))
    else:
        print(f"(Heart Disease skipped: {HEART} is not available)")
    found.append(("Table 1 synthetic (1750×20)", nmf_input(load_sample("nmf_table1")), range(3, 13)))
    return found


def am_vs_mu(name, prepared, ranks) -> None:
    X, groups = prepared.X, prepared.sensitive_features
    print(f"\n== AM vs MU on {name}: seconds (own iterations), iterations, final max rel_loss")
    print("rank |    MU s  iters  max_rel_loss |    AM s  iters  max_rel_loss | AM − MU")
    totals = np.zeros(2)
    for rank in ranks:
        vanilla = NMF(rank, random_state=0).fit(X, sensitive_features=groups)
        fits = []
        for solver in ("mu", "am"):
            fits.append(
                FairerNMF(rank, solver=solver, estimates=vanilla.E_, init="custom").fit(
                    X, sensitive_features=groups, W=vanilla.W_, H=vanilla.components_
                )
            )
        mu, am = fits
        totals += [mu.fit_seconds_, am.fit_seconds_]
        capped = lambda f: "*" if not f.converged_ else " "  # noqa: E731
        print(
            f"{rank:4d} | {mu.fit_seconds_:7.3f} {mu.n_iter_:5d}{capped(mu)} {mu.objective_:12.5f} | "
            f"{am.fit_seconds_:7.3f} {am.n_iter_:5d}{capped(am)} {am.objective_:12.5f} | {am.objective_ - mu.objective_:+.5f}"
        )
    print(f"total: MU {totals[0]:.2f} s, AM {totals[1]:.2f} s (AM/MU = {totals[1] / totals[0]:.1f}×); * = iteration cap reached")


def init_comparison(prepared) -> None:
    X, groups = prepared.X, prepared.sensitive_features
    print("\n== Fairer-NMF (MU) on Heart: init='nmf' vs init='random', seeds 0–4 (mean max rel_loss, total seconds)")
    print("rank |  nmf: mean    worst |  random: mean    worst")
    seconds = {"nmf": 0.0, "random": 0.0}
    for rank in range(1, 11):
        results = {"nmf": [], "random": []}
        for seed in range(5):
            E = NMF(rank, random_state=seed).fit(X, sensitive_features=groups).E_
            for init in results:
                start = time.perf_counter()
                fair = FairerNMF(rank, init=init, estimates=E, random_state=seed).fit(X, sensitive_features=groups)
                seconds[init] += time.perf_counter() - start
                results[init].append(fair.objective_)
        print(
            f"{rank:4d} | {np.mean(results['nmf']):10.5f} {np.max(results['nmf']):8.5f} | "
            f"{np.mean(results['random']):13.5f} {np.max(results['random']):8.5f}"
        )
    print(f"seconds (incl. the starting NMF for 'nmf'): nmf {seconds['nmf']:.2f}, random {seconds['random']:.2f}")


def estimate_solvers(prepared) -> None:
    grouped = GroupedData.build(prepared.X, prepared.sensitive_features)
    print("\n== E_ℓ (Algorithm 1, T = 5) on Heart: coordinate descent vs multiplicative updates, 100 × E_ℓ/‖X_ℓ‖")
    print("rank | cd: " + ", ".join(grouped.labels) + " | mu: " + ", ".join(grouped.labels))
    seconds = {}
    values = {}
    for solver in ("cd", "mu"):
        clear_estimate_cache()
        start = time.perf_counter()
        values[solver] = [estimate_group_errors(grouped, r, solver=solver, random_state=0)[0] for r in range(1, 11)]
        seconds[solver] = time.perf_counter() - start
    for r in range(10):
        cd, mu = (100 * values[s][r] / grouped.norms for s in ("cd", "mu"))
        print(f"{r + 1:4d} | {np.array2string(cd, precision=3)} | {np.array2string(mu, precision=3)}")
    print(f"seconds for ranks 1–10: cd {seconds['cd']:.2f}, mu {seconds['mu']:.2f}")


def main() -> int:
    warnings.simplefilter("ignore")
    found = datasets()
    for name, prepared, ranks in found:
        am_vs_mu(name, prepared, ranks)
    if HEART.exists():
        init_comparison(found[0][1])
        estimate_solvers(found[0][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
