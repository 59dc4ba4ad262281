"""The default audit of each family on the embedded default sample (600 × 10): when its numbers
are in, and when its intervals are.

    flock /tmp/fairaudit-heavy.lock env PYTHONPATH=$PWD /work/main/.venv/bin/python \
        benchmarks/bench_default_sample.py [--families fs,pca,nmf,cpd] [--repeat 1]

What a dashboard user meets first: the PCA and feature-selection pages run this audit on first
open, and issue 13 asks for the feature-selection audit of this sample in ≤ 5 s on two cores. Each
family runs ``run_audit(sample, AuditConfig(methods=(family,)))`` — the library's defaults, its
default replicates included — in this process, with a progress callback that notes when the
family's point estimates are handed over (the ``stage="estimates"`` event the dashboard shows
them on). Printed per family: seconds to the numbers, seconds to the whole audit, replicates,
the seconds per replicate, and the load average (the two cores are shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from fairaudit.audit import AuditConfig, run_audit
from fairaudit.samples import DEFAULT_SAMPLE, load_sample


def audit(data, family: str) -> tuple[float, float, dict]:
    """``(seconds to the numbers, seconds to the end, uncertainty summary)`` of one default audit."""
    numbers: list[float] = []
    started = time.perf_counter()

    def progress(event: dict) -> None:
        if event["stage"] == "estimates":
            numbers.append(time.perf_counter() - started)

    result = run_audit(data, AuditConfig(methods=(family,)), progress=progress)
    total = time.perf_counter() - started
    return (numbers[0] if numbers else total), total, result.uncertainty.get(family, {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="fs,pca,nmf,cpd")
    parser.add_argument("--repeat", type=int, default=1, help="runs per family (the fastest is reported)")
    args = parser.parse_args(argv)
    if os.environ.get("FAIRAUDIT_DEFAULT_BOOTSTRAP"):
        print("note: FAIRAUDIT_DEFAULT_BOOTSTRAP is set, so the default replicates are capped", file=sys.stderr)
    data = load_sample(DEFAULT_SAMPLE)
    print(f"default sample {DEFAULT_SAMPLE}: {data.n_rows} × {data.n_features}; {os.cpu_count()} cores", flush=True)
    for family in [f.strip() for f in args.families.split(",") if f.strip()]:
        numbers, total, summary = min((audit(data, family) for _ in range(max(1, args.repeat))), key=lambda run: run[1])
        replicates = int(summary.get("replicates") or 0)
        each = f", {summary['seconds'] / replicates:.3f} s each" if replicates and summary.get("seconds") else ""
        load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
        print(f"{family:<4} numbers after {numbers:5.2f} s; whole audit {total:6.2f} s ({replicates} replicates{each}; load {load})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
