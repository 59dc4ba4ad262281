"""CP replicates on a resample's distinct entities with counts against every copy as a row (issue 23).

    flock /tmp/fairaudit-heavy.lock .venv/bin/python benchmarks/bench_cpd_rows.py [--data default,cpd_tensor,credit] [--replicates 4]

Per data set, in this process (``fairaudit.cpd.audit.REPLICATE_ROWS`` switched between runs):

* *a replicate*: the audit's fit once, then ``--replicates`` replicates with the same seeds, each run
  with ``"repeated"`` and ``"distinct"`` alternated (one BLAS thread, as on the process workers):
  CPU seconds (``time.process_time``) per replicate, and how far its values moved;
* *the audit*: the CP family's default audit with its default intervals (``n_jobs=1``, so that the
  switch reaches the replicates), once each way, alternated: wall and CPU seconds, how many values and
  interval ends moved and by how much (per variant), and whether every finding's verdict is the same.

Every line says the load average (two shared cores): the CPU ratios are what to read.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

from fairaudit import uncertainty
from fairaudit.audit import (
    FACT_METRICS,
    AuditConfig,
    FamilyEstimates,
    RecordSink,
    ReplicateJob,
    replicate_context,
    run_audit,
    run_replicate,
)
from fairaudit.cpd import audit as cpd_audit
from fairaudit.findings import findings
from fairaudit.linalg import blas_threads
from fairaudit.samples import DEFAULT_SAMPLE, load_sample

try:
    from bench_all_families import credit_table
except ImportError:  # run from elsewhere
    sys.path.insert(0, os.path.dirname(__file__))
    from bench_all_families import credit_table

MODES = ("repeated", "distinct")


def data_set(name: str):
    if name == "default":
        return load_sample(DEFAULT_SAMPLE)
    if name == "credit":
        return credit_table()
    return load_sample(name)


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def replicates(data, count: int) -> None:
    family = cpd_audit.CPDAudit(data, AuditConfig(methods=("cpd",)), RecordSink("cpd"))
    rows = np.arange(len(family.codes))
    context = replicate_context(FamilyEstimates(family, {}, family.fit(rows), rows, None, {}))
    seconds = {mode: [] for mode in MODES}
    moved = []
    with blas_threads(1, user_api=None):
        for b, seed in enumerate(uncertainty.replicate_seeds(0, count)):
            values = {}
            for mode in MODES if b % 2 == 0 else MODES[::-1]:
                cpd_audit.REPLICATE_ROWS = mode
                started = time.process_time()
                values[mode] = run_replicate(context, ReplicateJob(b, count, seed)).values
                seconds[mode].append(time.process_time() - started)
            keys = values["repeated"].keys() & values["distinct"].keys()
            moved += [(abs(values["repeated"][k] - values["distinct"][k]), k) for k in keys if np.isfinite(values["repeated"][k])]
    cpd_audit.REPLICATE_ROWS = "distinct"
    before, after = np.median(seconds["repeated"]), np.median(seconds["distinct"])
    print(f"  a replicate (median of {count}): {before:.2f} → {after:.2f} s CPU ({after / before:.2f}×); "
          f"each: {' '.join(f'{s:.2f}' for s in seconds['repeated'])} → {' '.join(f'{s:.2f}' for s in seconds['distinct'])}; load {load()}")
    print(f"  its values: {sum(d > 1e-9 for d, _ in moved)} of {len(moved)} moved by more than 1e-9; largest:")
    for metric in sorted({k[3] for _, k in moved}):
        worst = max(((d, k) for d, k in moved if k[3] == metric), key=lambda item: item[0])
        print(f"    {metric:<22} {worst[0]:.2e} ({worst[1][0]}, rank {worst[1][1]}{', ' + worst[1][2] if worst[1][2] else ''})")


def audits(data) -> None:
    results, seconds = {}, {}
    for mode in MODES:
        cpd_audit.REPLICATE_ROWS = mode
        wall, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[mode] = run_audit(data, AuditConfig(methods=("cpd",), n_jobs=1))
        seconds[mode] = (time.perf_counter() - wall, time.process_time() - cpu)
    cpd_audit.REPLICATE_ROWS = "distinct"
    (w0, c0), (w1, c1) = seconds["repeated"], seconds["distinct"]
    replicates_run = results["distinct"].uncertainty["cpd"].get("replicates")
    print(f"  the audit ({replicates_run} replicates, one process): {w0:.1f} → {w1:.1f} s wall, {c0:.1f} → {c1:.1f} s CPU "
          f"({c1 / c0:.2f}×); load {load()}")
    key = ["variant", "rank", "metric", "group"]
    before = results["repeated"].records.set_index(key)
    before = before[~before.index.get_level_values("metric").isin(FACT_METRICS)]  # seconds, epochs, λ: facts of the fits
    after = results["distinct"].records.set_index(key).reindex(before.index)
    for column in ("value", "ci_low", "ci_high"):
        a, b = before[column].to_numpy(float), after[column].to_numpy(float)
        both = np.isfinite(a) & np.isfinite(b)
        difference = np.abs(a - b)
        changed = both & (difference > 1e-9)
        print(f"  {column}: {int(changed.sum())} of {int(both.sum())} moved by more than 1e-9", end="")
        if changed.any():
            frame = before[changed].assign(moved=difference[changed]).reset_index()
            largest = frame.groupby(["variant", "metric"]).moved.max().sort_values(ascending=False).head(6)
            print("; largest: " + ", ".join(f"{v}/{m} {x:.2g}" for (v, m), x in largest.items()), end="")
        print()
    verdicts = {mode: {(f.variant, f.rank, f.text.split(":")[0]): f.verdict for f in findings(results[mode])["cpd"]} for mode in MODES}
    differ = {k for k in verdicts["repeated"].keys() | verdicts["distinct"].keys() if verdicts["repeated"].get(k) != verdicts["distinct"].get(k)}
    print(f"  verdicts: {len(verdicts['repeated'])} findings, {len(differ)} differ" + (f": {sorted(differ)}" if differ else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="default,cpd_tensor,credit")
    parser.add_argument("--replicates", type=int, default=4)
    parser.add_argument("--parts", default="replicates,audits")
    args = parser.parse_args()
    for name in args.data.split(","):
        data = data_set(name)
        print(f"{name}: {data.n_rows} entities, shape {data.tensor().shape}", flush=True)
        if "replicates" in args.parts:
            replicates(data, args.replicates)
        if "audits" in args.parts:
            audits(data)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
