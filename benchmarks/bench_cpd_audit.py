"""Wall time of the default CP audit (``run_audit(data, AuditConfig(methods=("cpd",)))``).

    .venv/bin/python benchmarks/bench_cpd_audit.py [--csv FILE --sensitive COL] [--sizes 300,1000]
        [--skip-sample] [--all-families] [--nystrom 3000,5000]

Cases: the dashboard's default sample (``load_sample("two_groups")``) and synthetic matrices of
``--sizes`` entities × 10 features (a majority and a 20 % minority whose variance lies along
other features, plus one feature shifted for the minority; standardised), each with the
audit's defaults: ranks 1–10, variants vanilla/fatr/hsic/khsic, the 10-point λ sweep at rank
10. ``--csv`` adds any table (e.g. an older sample); ``--all-families`` also times the audit of
every registered family on the default sample; ``--nystrom`` times the KHSIC part (vanilla and
KHSIC, the sweep at rank 8) exact against the Nyström approximation on larger matrices and
prints both frontiers. Prints the machine's load average next to every figure: the cores are
often shared.

The script only uses the public audit API, so the same file runs against an older checkout
(``PYTHONPATH=<checkout> python benchmarks/bench_cpd_audit.py``) for before/after figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

from fairaudit import AuditData
from fairaudit.audit import FAMILIES, AuditConfig, run_audit
from fairaudit.samples import load_sample


def synthetic_matrix(n: int, n_features: int = 10, random_state: int = 0) -> AuditData:
    """``n`` entities, 20 % in group B; A varies along x1–x3, B along x4–x6, x10 shifted for B."""
    rng = np.random.default_rng(random_state)
    n_b = n // 5
    X = rng.normal(size=(n, n_features))
    X[: n - n_b, :3] *= 3.0
    X[n - n_b :, 3:6] *= 3.0
    X[n - n_b :, -1] += 1.0
    groups = np.array(["A"] * (n - n_b) + ["B"] * n_b)
    return AuditData.from_arrays((X - X.mean(axis=0)) / X.std(axis=0), groups)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def timed_audit(data: AuditData, config: AuditConfig):
    started = time.perf_counter()
    result = run_audit(data, config)
    return result, time.perf_counter() - started


def fit_seconds(result) -> str:
    records = result.records
    seconds = records[(records.method == "cpd") & (records.metric == "seconds")]
    base = seconds.variant.str.split("@").str[0]
    parts = seconds.groupby(base).value.sum()
    return ", ".join(f"{name} {parts[name]:.1f} s" for name in ("vanilla", "fatr", "hsic", "khsic") if name in parts)


def cp_audit(name: str, data: AuditData) -> None:
    result, seconds = timed_audit(data, AuditConfig(methods=("cpd",)))
    print(f"{name:<34} {data.X.shape[0]:>5} × {data.X.shape[1]:<3} {seconds:8.1f} s   (fits: {fit_seconds(result)}; {load()})", flush=True)


def nystrom_comparison(n: int) -> None:
    data = synthetic_matrix(n)
    tables = {}
    for kernel in ("exact", "nystrom"):
        options = {"cpd": {"khsic_kernel": kernel, "sweep_rank": 8}}
        config = AuditConfig(methods=("cpd",), ranks=(8,), variants="vanilla,khsic", options=options)
        try:
            result, seconds = timed_audit(data, config)
        except Exception as exc:  # an older checkout without the option
            print(f"  {kernel}: not available ({exc})")
            return
        print(f"{n} entities, KHSIC with the {kernel} kernel (vanilla + default λ + 10-point sweep, rank 8): {seconds:.1f} s ({load()})", flush=True)
        whole = result.records[(result.records.group == "") & result.records.variant.str.startswith("khsic@")]
        tables[kernel] = whole.pivot_table(index="variant", columns="metric", values="value")
    columns = ["lam", "residual_fit", "nkhsic", "unfairness_balanced", "epochs", "seconds"]
    table = pd.concat({kernel: frame[columns] for kernel, frame in tables.items()}, axis=1)
    table = table.loc[sorted(table.index, key=lambda v: int(v.partition("@")[2]))]
    with pd.option_context("display.width", 200):
        print(table.to_string(float_format=lambda v: f"{v:.4g}"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="300,1000", help="entities of the synthetic matrices")
    parser.add_argument("--csv", default=None, help="also audit this table")
    parser.add_argument("--sensitive", default="group")
    parser.add_argument("--skip-sample", action="store_true")
    parser.add_argument("--all-families", action="store_true")
    parser.add_argument("--nystrom", default="", help="entity counts for the exact/Nyström comparison, e.g. 3000,5000")
    args = parser.parse_args()
    print(f"default CP audit ({os.cpu_count()} cores; fairaudit from {sys.modules['fairaudit'].__file__})")
    if not args.skip_sample:
        cp_audit('load_sample("two_groups")', load_sample("two_groups"))
    for n in [int(v) for v in args.sizes.split(",") if v]:
        cp_audit("synthetic matrix", synthetic_matrix(n))
    if args.csv:
        from fairaudit import prepare, read_table

        cp_audit(os.path.basename(args.csv), prepare(read_table(args.csv), sensitive=args.sensitive))
    if args.all_families:
        families = tuple(FAMILIES)
        result, seconds = timed_audit(load_sample("two_groups"), AuditConfig(methods=families))
        per = {method: result.records[(result.records.method == method) & (result.records.metric == "seconds")].value.sum() for method in families}
        print(f"all families {families} on the default sample: {seconds:.1f} s (fit seconds: "
              + ", ".join(f"{m} {v:.1f}" for m, v in per.items()) + f"; {load()})")
    for n in [int(v) for v in args.nystrom.split(",") if v]:
        nystrom_comparison(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
