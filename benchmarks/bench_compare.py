"""Comparing two large saved reports: peak memory and time, against the size of the reports.

Writes two synthetic PCA reports (three variants × ten ranks × ``--groups`` groups, two per-group
metrics with intervals and three whole-data metrics per fit; 8,000 groups make 480,090 records
and 98 MB of JSON each) to a temporary folder, the second with a third of its per-group values
moved. Then measures, in this one process, each step's time and its peak memory above the
resident size before it (Linux ``/proc/self/clear_refs`` resets the peak between steps):

* ``json.loads`` of both files (the floor any reader of the whole text pays);
* ``read``: :func:`fairaudit.compare.report_with_findings` of both (read in pieces, each record
  checked against the schema, kept as columns), then ``compare`` and the HTML, JSON and CSV files;
* ``--old``: the same with the comparison as it was before issue 27 (``git show
  6a98338:fairaudit/compare.py``: ``json.loads``, a pandas merge, the rules row by row, every
  file written whole) — slow and large: run it on small reports.

The process's own peak (``ru_maxrss``, imports included) is printed at the end, against five
times the larger report (the issue's bound). Run it alone on the machine:

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_compare.py [--groups 8000] [--old]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import machine, module_at, peak_rss_mb, status_mb

METRICS = ("error", "loss")


def write_report(path: Path, groups: int, shift: float) -> int:
    """A report of ``groups`` groups whose per-group values are moved by ``shift`` for every
    third group; its size in bytes."""
    rng = np.random.default_rng(0)
    records = []
    for variant in ("vanilla", "fair_eig", "jevd"):
        for rank in range(1, 11):
            for g in range(groups):
                for metric in METRICS:
                    value = float(rng.random()) + shift * (g % 3 == 0)
                    records.append({"method": "pca", "variant": variant, "rank": rank, "group": f"group=g{g}", "metric": metric,
                                    "value": value, "ci_low": value - 0.1, "ci_high": value + 0.1})
            for metric in ("max_loss", "loss_gap", "variance_explained"):
                records.append({"method": "pca", "variant": variant, "rank": rank, "group": "", "metric": metric, "value": 0.5,
                                "ci_low": None, "ci_high": None})
    report = {"fairaudit_version": "0.1.0", "created": "2026-11-27T20:00:00+00:00", "seconds": 1.0,
              "config": {"methods": ["pca"], "ranks": list(range(1, 11))}, "data": {"name": "big.csv", "rows": 100_000},
              "uncertainty": {}, "findings": [], "skipped": [], "warnings": [], "details": {}, "records": records}
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False, allow_nan=False))
    return path.stat().st_size


def _release() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(step):
    """(seconds, peak MB above the resident size before the step, result) of ``step()``."""
    _release()
    before = status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    start = time.perf_counter()
    result = step()
    return time.perf_counter() - start, status_mb("VmHWM") - before, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8000)
    parser.add_argument("--old", action="store_true", help="also the comparison as it was before issue 27")
    args = parser.parse_args()

    from fairaudit import compare as new

    folder = Path(tempfile.mkdtemp())
    a, b = folder / "a.json", folder / "b.json"
    size = max(write_report(a, args.groups, 0.0), write_report(b, args.groups, 0.05)) / 2**20
    print(f"{machine()}; two reports of {size:.1f} MB ({args.groups:,} groups); peak = above the resident size before the step")

    def run(module, label):
        seconds, peak, found = measure(lambda: (module.report_with_findings(a), module.report_with_findings(b)))
        print(f"  {label:<6} read both      {seconds:7.1f} s  {peak:7.0f} MB ({peak / size:.1f}× a report)")
        (ra, fa), (rb, fb) = found
        seconds, peak, comparison = measure(lambda: module.compare(ra, rb, names=("a", "b"), findings=(fa, fb)))
        print(f"  {label:<6} compare        {seconds:7.1f} s  {peak:7.0f} MB")
        for kind in ("html", "json", "csv"):
            seconds, peak, _ = measure(lambda k=kind: module.write_comparison(comparison, **{f"{k}_path": folder / f"{label}.{k}"}))
            print(f"  {label:<6} write {kind:<8} {seconds:7.1f} s  {peak:7.0f} MB  ({(folder / f'{label}.{kind}').stat().st_size / 2**20:.0f} MB)")

    seconds, peak, _ = measure(lambda: (json.loads(a.read_bytes()), json.loads(b.read_bytes())))
    print(f"  json.loads both       {seconds:7.1f} s  {peak:7.0f} MB ({peak / size:.1f}× a report)")
    run(new, "now")
    if args.old:
        old = module_at("6a98338", "fairaudit/compare.py", "fairaudit._compare_before_27",
                        edit=lambda text: text.replace("from .", "from fairaudit."))
        run(old, "before")
    print(f"peak of this process: {peak_rss_mb():.0f} MB; five times a report: {5 * size:.0f} MB")


if __name__ == "__main__":
    main()
