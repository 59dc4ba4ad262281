"""The NMF audit's share of "the default audit of every family on a 4,165 × 12 table ≤ 30 s".

Data: the 4,165 × 12 credit table of ``benchmarks/bench_all_families.py`` (the rows of
``credit/UCI_Credit_Card.csv`` whose BILL_AMT1–5 are all ≥ 0, a seeded sample stratified by SEX;
LIMIT_BAL, AGE, BILL_AMT1–5, PAY_AMT1–5), and the Heart Disease sweep (297 × 12).

Each configuration runs the whole NMF audit (ranks 1–10, every default variant, E_ℓ cache
cleared first) in this process, one after another, and prints its wall time, the fits' own
seconds per variant, Algorithm 1's seconds, and the rest (leakage and MMD metrics, input
preparation), and its CPU seconds (the machine is shared: CPU time moves less with the load).
Configurations: the audit's defaults; each of the paper's settings the audit departs from
(random starts, eq. (10) for Fairer-NMF) and both; coordinate descent for standard NMF and
E_ℓ (ours); the defaults with Algorithm 1's runs on one thread instead of two; and the defaults
with a warm E_ℓ cache.

    flock /tmp/fairaudit-heavy.lock .venv/bin/python benchmarks/bench_nmf_sweep.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fairaudit import AuditData, load
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.nmf import clear_estimate_cache

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
CREDIT = SHARED / "credit" / "UCI_Credit_Card.csv"
HEART = SHARED / "heart" / "processed.cleveland.data"
CREDIT_FEATURES = ["LIMIT_BAL", "AGE", *(f"BILL_AMT{i}" for i in range(1, 6)), *(f"PAY_AMT{i}" for i in range(1, 6))]
CONFIGURATIONS = {
    "defaults (window rule, from the standard NMF)": {},
    "Fairer-NMF from a random start (paper)": {"init": "random"},
    "Fairer-NMF stopped by eq. (10) (paper)": {"stopping": "eq10"},
    "every setting the paper's": {"init": "random", "stopping": "eq10"},
    "standard NMF and E_ℓ by coordinate descent (ours)": {"nmf_solver": "cd"},
}


def credit_sample(rows: int = 4165, seed: int = 0) -> AuditData:
    """The table of ``bench_all_families.py``: of the rows without negative bill amounts, per SEX
    value ``round(rows · share)`` drawn by ``default_rng(seed)``, kept in file order."""
    frame = pd.read_csv(CREDIT)
    frame = frame[(frame[[f"BILL_AMT{i}" for i in range(1, 6)]] >= 0).all(axis=1)]
    rng = np.random.default_rng(seed)
    shares = frame["SEX"].value_counts(normalize=True).sort_index()
    counts = {value: int(round(rows * share)) for value, share in shares.items()}
    counts[shares.index[-1]] = rows - sum(v for k, v in counts.items() if k != shares.index[-1])
    chosen = [rng.choice(np.flatnonzero(frame["SEX"].to_numpy() == value), size=count, replace=False)
              for value, count in counts.items()]
    frame = frame.iloc[np.sort(np.concatenate(chosen))]
    return AuditData.from_arrays(frame[CREDIT_FEATURES].to_numpy(float), frame["SEX"].astype(str).to_numpy(),
                                 feature_names=CREDIT_FEATURES)


def audit(data: AuditData, options: dict, *, cold: bool = True):
    if cold:
        clear_estimate_cache()
    started, cpu = time.perf_counter(), time.process_time()
    result = run_audit(data, AuditConfig(methods=("nmf",), ranks=range(1, 11), options={"nmf": options}))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    records = result.records
    fits = records[records.metric == "seconds"].groupby("variant").value.sum()
    estimates = records[(records.metric == "estimate_seconds") & (records.variant == records.variant.iloc[0])].value.sum()
    worst = records[records.metric == "max_rel_loss"].pivot_table(index="rank", columns="variant", values="value")
    return wall, cpu, fits, estimates, worst


def report(name: str, data: AuditData, base: dict) -> None:
    print(f"\n== {name}: {data.n_rows} × {data.n_features}, groups {data.group_sizes()}")
    print("configuration | wall s (ratio) | CPU s | fits s per variant | E_ℓ s | rest s | mean max_rel_loss per variant")
    reference = None
    for label, options in CONFIGURATIONS.items():
        wall, cpu, fits, estimates, worst = audit(data, {**base, **options})
        reference = reference or wall
        rest = wall - fits.sum() - estimates
        fits_text = ", ".join(f"{v} {s:.2f}" for v, s in fits.items())
        worst_text = ", ".join(f"{v} {worst[v].mean():.4f}" for v in worst.columns)
        print(f"{label} | {wall:.2f} ({wall / reference:.2f}×) | {cpu:.2f} | {fits_text} | {estimates:.2f} | {rest:.2f} | {worst_text}")
    wall, cpu, fits, estimates, _ = audit(data, base, cold=False)
    print(f"defaults, warm E_ℓ cache | {wall:.2f} ({wall / reference:.2f}×) | {cpu:.2f} | "
          f"{', '.join(f'{v} {s:.2f}' for v, s in fits.items())} | (cached) | {wall - fits.sum():.2f} |")


def main() -> int:
    warnings.simplefilter("ignore")
    if HEART.exists():
        data = load(HEART, sensitive="col_2", ignore=["col_14"], missing="drop")
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(1,), variants="vanilla"))  # imports, first calls
        report("Heart Disease", data, {})
    else:
        print(f"(Heart Disease skipped: {HEART} is not available)")
    if CREDIT.exists():
        report("credit, 4,165-row sample", credit_sample(), {})
    else:
        print(f"(credit skipped: {CREDIT} is not available)")
    print(f"\nload average while running: {np.round(__import__('os').getloadavg(), 2).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
