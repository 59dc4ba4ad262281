"""Fair CPD on the contraceptive data (Kim & Gittens 2021, App. A.9): the frontier as a table.

    .venv/bin/python benchmarks/bench_cpd_cmc.py [--formulation fairaudit|paper] [--rank 6]
        [--points 6] [--classifier qda|mlp_paper] [--epochs 200]

The data: ``../shared/datasets/cmc/cmc.data`` (1,473 women × 10 columns, no header); the sensitive
attribute is wife_working (column 6; 0 = working, 369 women); the matrix is the other nine columns
(App. A.9: "1473 × 9", rank 6). ``--formulation fairaudit`` (default): standardised columns, the
audit's formulation and data-scaled λ grid; ``paper``: the columns min-max scaled to [0, 1] (the
paper names no preprocessing; with raw or standardised columns its step sizes diverge), Algorithm 1
with α_0 = 100, α_1 = 10, γ = 1, and Fig. 3a's λ range (``--points`` points over (0, 4.8]; each
KHSIC fit costs ~2,000 exact kernel passes over the 1,473 entities per 10 epochs, so keep
``--epochs`` small). Leakage on a 90/10 split (App. A.9); ``--classifier mlp_paper`` is the
paper's network as App. A.6 trains it (on these 25/75 groups it answers the majority for every
embedding: balanced unfairness 0). The full comparison with the paper is
``python -m fairaudit.reproduce fair-cpd``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

from fairaudit.cpd.sweep import frontier
from fairaudit.reproduce.fair_cpd import CMC_STEPS, contraceptive

try:
    from _common import SHARED
except ImportError:  # run from elsewhere
    sys.path.insert(0, os.path.dirname(__file__))
    from _common import SHARED


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--formulation", default="fairaudit", choices=("fairaudit", "paper"))
    parser.add_argument("--rank", type=int, default=6)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--classifier", default="qda")
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    if not (SHARED / "cmc" / "cmc.data").exists():
        print(f"skipped: {SHARED / 'cmc' / 'cmc.data'} is not there (the shared data sets are needed)")
        return 0
    X, working = contraceptive(SHARED)
    params = {"n_epochs": args.epochs}
    if args.formulation == "paper":
        params.update(CMC_STEPS)
        lambdas = {m: list(np.linspace(0, 4.8, args.points + 1)[1:]) for m in ("hsic", "khsic")}
        lambdas["fatr"] = [2e-5]
    else:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        lambdas = None
    print(f"contraceptive: {X.shape[0]} × {X.shape[1]}, wife_working=0 (working): {int(np.sum(working == 0))}, "
          f"=1: {int(np.sum(working == 1))}; rank {args.rank}; formulation {args.formulation}; leakage {args.classifier}, 10 % test")
    started = time.perf_counter()
    table = frontier(X, working, args.rank, formulation=args.formulation, lambdas=lambdas, n_points=args.points,
                     classifier=args.classifier, test_size=0.1, **params)
    print(f"{len(table)} fits in {time.perf_counter() - started:.1f} s")
    columns = [c for c in ["method", "lam", "diverged", "residual_fit", "unfairness", "unfairness_balanced", "nkhsic", "orthogonality", "epochs", "seconds"] if c in table]
    with pd.option_context("display.width", 200):
        print(table[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
