"""JEVD-PCA's schemes side by side on real data: the paper's Algorithm 1, its damped variant and
the orthogonal Jacobi scheme (the audit's), against vanilla PCA and the Fair PCA optimum.

Per data set and scheme: iterations, whether it converged or diverged, the JEVD criterion left
(C(U)/C(I), eq. 4), seconds, and the worst-group loss (Samadi's; what JEVD-PCA targets, eq. 3) at
each rank. Data: LSAC (race 1 vs 2, standardised — Pelegrina & Duarte's setup; the JEVD paper's
gender groups, unscaled, the gender column among the features; race and gender groups on the raw
features without the gender column), Default Credit (Samadi's education split, standardised).
Usage: python benchmarks/bench_pca_jevd.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import SHARED, machine

from fairaudit.groups import encode_groups
from fairaudit.pca import JEVDPCA, PCA, FairPCA, GroupProblem, rank_sweep_problem
from fairaudit.reproduce import jevd as jevd_reproduction
from fairaudit.reproduce import samadi

RANKS = list(range(1, 6))


def data_sets():
    if (SHARED / "lsac" / "lsac.csv").exists():
        yield "LSAC race (standardised)", *jevd_reproduction.lsac_race(SHARED)
        yield "LSAC gender (the JEVD paper's)", *jevd_reproduction.lsac_gender(SHARED)
        # Raw features, no 0/1 column among them (columns 1–4 and 7–11): where Algorithm 1 as printed converges.
        raw = jevd_reproduction._lsac(SHARED)
        features = raw[:, [0, 1, 2, 3, 6, 7, 8, 9, 10]]
        yield "LSAC race (raw, without the gender column)", features, np.where(raw[:, 5] == 1, "white", "black")
        yield "LSAC gender (raw, without the gender column)", features, np.where(raw[:, 4] == 1, "gender=1", "gender=2")
    if (SHARED / "credit" / "default_degree.csv").exists():
        yield "Credit education (Samadi's)", *samadi.credit(SHARED)


def worst_losses(estimator, problem):
    return [float(np.max(fitted.group_losses_)) for _, fitted, _ in rank_sweep_problem(estimator, problem, RANKS)]


def main() -> None:
    print(f"JEVD-PCA schemes, worst-group loss at d = {RANKS[0]}..{RANKS[-1]}; {machine()}")
    for name, X, groups in data_sets():
        problem = GroupProblem.from_data(X, encode_groups(groups))
        print(f"\n{name}: {X.shape[0]} × {X.shape[1]}")
        print(f"  {'scheme':<22} {'iters':>5} {'state':>10} {'C/C(I)':>9} {'s':>6}  worst loss per d")
        for label, estimator in (("vanilla PCA", PCA()), ("Fair PCA (optimum)", FairPCA())):
            print(f"  {label:<22} {'':>5} {'':>10} {'':>9} {'':>6}  " + " ".join(f"{v:7.4f}" for v in worst_losses(estimator, problem)))
        for solver in ("paper", "damped", "jacobi"):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                losses = worst_losses(JEVDPCA(solver=solver), problem)
                fitted = JEVDPCA(1, solver=solver)._fit_problem(problem)
            seconds = time.perf_counter() - start
            state = "diverged" if fitted.diverged_ else ("converged" if fitted.converged_ else "stalled")
            ratio = fitted.criterion_history_[-1] / fitted.criterion_history_[0]
            growth = max(fitted.criterion_history_[:2]) / fitted.criterion_history_[0]
            print(f"  {'JEVD ' + solver:<22} {fitted.n_iter_:5d} {state:>10} {ratio:9.2e} {seconds:6.2f}  "
                  + " ".join(f"{v:7.4f}" for v in losses)
                  + (f"   (first step: C × {growth:.3g})" if solver == "paper" else ""))


if __name__ == "__main__":
    main()
