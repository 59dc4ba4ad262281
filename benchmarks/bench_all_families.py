"""The default audit of every family on one named real 4,165 × 12 table: seconds per family.

    flock /tmp/fairaudit-heavy.lock env PYTHONPATH=$PWD /work/main/.venv/bin/python \
        benchmarks/bench_all_families.py [--families pca,nmf,fs,cpd] [--repeat 1] [--profile cpd]

The table (issue 13's target: "the default audit of every family on a 4,165 × 12 table ≤ 30 s on
two cores"). From ``../shared/datasets/credit/UCI_Credit_Card.csv`` (30,000 credit-card clients,
Taiwan 2005; see the datasets README):

* rows: a seeded stratified sample of 4,165 of the 28,294 clients whose ``BILL_AMT1–5`` are all
  ≥ 0 (a negative bill is a credit balance; NMF, one of the families, needs non-negative data,
  and its default stops on negative cells), stratified by ``SEX`` (1 male, 2 female): for each
  SEX value, ``round(4165 · share)`` rows drawn without replacement by
  ``numpy.random.default_rng(0)``, kept in file order — 1,641 men and 2,524 women;
* columns: the 12 numeric ones ``LIMIT_BAL, AGE, BILL_AMT1–5, PAY_AMT1–5`` (amounts in NT$,
  age in years), and the sensitive column ``SEX``;
* read as a user's upload would be: the sample is written as CSV bytes, read by
  :func:`fairaudit.read_table` and prepared by :func:`fairaudit.prepare` (``sensitive="SEX"``,
  the default standardisation).

Each family runs the library's default audit (``run_audit(data, AuditConfig(methods=(family,)))``,
default ranks, variants and options) in this process, one after another; the script prints each
family's wall time (the audit including its metrics) and the process's CPU time over it (every
thread; steadier than wall time when others share the cores), the sum, and the machine's load
average (the two cores are shared, so say how loaded they were). ``--profile FAMILY`` prints cProfile's
top entries for that family. ``--together`` then runs every family in one audit and says when
every family's numbers were in (before any family's intervals start) and when the whole audit was.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

import numpy as np
import pandas as pd

from fairaudit import prepare, read_table
from fairaudit.audit import FAMILIES, AuditConfig, run_audit
from fairaudit.vocabulary import render

try:
    from _common import shared
except ImportError:  # run from elsewhere
    sys.path.insert(0, os.path.dirname(__file__))
    from _common import shared

CREDIT = "credit/UCI_Credit_Card.csv"
COLUMNS = ["LIMIT_BAL", "AGE", *(f"BILL_AMT{i}" for i in range(1, 6)), *(f"PAY_AMT{i}" for i in range(1, 6))]
SENSITIVE = "SEX"
ROWS = 4165
SEED = 0
NAME = f"credit_sex_{ROWS}x{len(COLUMNS)}.csv"


def credit_sample(path, rows: int = ROWS, seed: int = SEED) -> pd.DataFrame:
    """The benchmark table: ``rows`` clients stratified by SEX (module docstring), 12 numeric
    columns and SEX, in file order."""
    frame = pd.read_csv(path)
    frame = frame[(frame[[f"BILL_AMT{i}" for i in range(1, 6)]] >= 0).all(axis=1)]
    rng = np.random.default_rng(seed)
    shares = frame[SENSITIVE].value_counts(normalize=True).sort_index()
    counts = {value: int(round(rows * share)) for value, share in shares.items()}
    counts[shares.index[-1]] = rows - sum(v for k, v in counts.items() if k != shares.index[-1])
    chosen = [rng.choice(np.flatnonzero(frame[SENSITIVE].to_numpy() == value), size=count, replace=False) for value, count in counts.items()]
    return frame.iloc[np.sort(np.concatenate(chosen))][[*COLUMNS, SENSITIVE]].reset_index(drop=True)


def credit_table(path=None):
    """The benchmark table as :class:`~fairaudit.AuditData`, read through the upload path."""
    path = path or shared(CREDIT)
    if path is None:
        return None
    buffer = io.StringIO()
    credit_sample(path).to_csv(buffer, index=False, lineterminator="\n")
    return prepare(read_table(buffer.getvalue().encode("utf-8"), name=NAME), sensitive=SENSITIVE)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def audit_seconds(data, family: str, profile: bool = False, bootstrap: int | None = None) -> tuple[float, float, object]:
    """``(wall seconds, CPU seconds of every thread, result)`` of the family's audit."""
    config = AuditConfig(methods=(family,), bootstrap=bootstrap)
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        started, cpu = time.perf_counter(), time.process_time()
        result = profiler.runcall(run_audit, data, config)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return seconds, cpu, result
    started, cpu = time.perf_counter(), time.process_time()
    result = run_audit(data, config)
    return time.perf_counter() - started, time.process_time() - cpu, result


def fit_breakdown(result, family: str) -> str:
    records = result.records
    seconds = records[(records.method == family) & (records.metric == "seconds")]
    if seconds.empty:
        return ""
    parts = seconds.groupby(seconds.variant.str.split("@").str[0]).value.sum().sort_values(ascending=False)
    return "fits: " + ", ".join(f"{name} {value:.1f} s" for name, value in parts.items())


def replicates(result, family: str) -> str:
    """How the family's intervals were computed (the library decides the replicates per family
    and data size unless ``--bootstrap`` says) and what they cost."""
    info = result.uncertainty.get(family, {})
    count = info.get("replicates", 0)
    if not count:
        return f"no intervals ({render(info.get('why', 'not asked'), 'cli')})"
    return f"{count} bootstrap replicates, {info.get('seconds', float('nan')):.1f} s of it"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated (default: {','.join(FAMILIES)})")
    parser.add_argument("--repeat", type=int, default=1, help="runs per family (the minimum is reported)")
    parser.add_argument("--profile", default="", help="print a cProfile summary of this family's audit")
    parser.add_argument("--bootstrap", type=int, default=None,
                        help="replicates for the intervals (default: the library's per-family default; 0: fits and metrics alone)")
    parser.add_argument("--together", action="store_true",
                        help="also run every family in one audit and say when every family's numbers were in, and when its intervals")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = credit_table()
    if data is None:
        print(f"skipped: ../shared/datasets/{CREDIT} is not there")
        return 0
    sizes = ", ".join(f"{g}: {n}" for g, n in data.group_sizes().items())
    print(f"{NAME}: {data.n_rows} × {data.n_features} ({sizes}); read + prepare {time.perf_counter() - started:.2f} s; "
          f"{os.cpu_count()} cores; fairaudit from {os.path.dirname(sys.modules['fairaudit'].__file__)}", flush=True)
    total = 0.0
    for family in [f.strip() for f in args.families.split(",") if f.strip()]:
        runs = [audit_seconds(data, family, profile=family == args.profile and i == 0, bootstrap=args.bootstrap)
                for i in range(max(1, args.repeat))]
        seconds, cpu, result = min(runs, key=lambda run: run[0])
        total += seconds
        print(f"{family:<4} {seconds:7.1f} s   (CPU {cpu:.1f} s; {fit_breakdown(result, family)}; {replicates(result, family)}; {load()})", flush=True)
    print(f"all  {total:7.1f} s   (target ≤ 30 s on two cores; {load()})")
    if args.together:
        together(data, [f.strip() for f in args.families.split(",") if f.strip()], args.bootstrap)
    return 0


def together(data, families: list[str], bootstrap: int | None) -> None:
    """Every family in one audit, as the Report page's *Run every family* and the CLI's
    ``--methods all`` run it: every family's numbers first, then every family's intervals — when
    the numbers of each family were in (its ``stage="estimates"`` progress event, or its last fit
    when it computes no intervals) and when the whole audit was."""
    config = AuditConfig(methods=tuple(families), bootstrap=bootstrap)
    ready: dict[str, float] = {}
    started = time.perf_counter()

    def progress(event: dict) -> None:
        if event["stage"] in ("fit", "estimates"):
            ready[event["method"]] = time.perf_counter() - started

    result = run_audit(data, config, progress=progress)
    seconds = time.perf_counter() - started
    numbers = ", ".join(f"{family} {at:.1f} s" for family, at in ready.items())
    counts = ", ".join(f"{family} {result.uncertainty[family].get('replicates', 0)}" for family in families)
    print(f"one run of every family: numbers of every family in after {max(ready.values()):.1f} s ({numbers}); "
          f"intervals too after {seconds:.1f} s (replicates: {counts}; {load()})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
