"""One feature-selection bootstrap replicate, before and after, side by side in one run (issue 13:
the default sample's audit with its 50 default replicates).

    flock /tmp/fairaudit-heavy.lock env PYTHONPATH=$PWD /work/main/.venv/bin/python \
        benchmarks/bench_fs_replicate.py [--reference REV] [--replicates 30] [--rounds 2] [--credit-table]

A replicate is what the audit's driver runs ``bootstrap`` times (``fairaudit.audit.run_replicate``;
``_replicate`` in revisions before issue 23):
a stratified resample of the rows, every selector refitted at every size, every selection
measured (k-means runs, alignments, MMD²). The same replicates (the audit's own seeds) run in
fresh subprocesses, alternately with the package as of ``--reference`` (a git revision, default
``c4c37f6``: main before the fourth pass, extracted with ``git archive``) and with this checkout,
``--rounds`` times each; printed: wall and CPU seconds per replicate, their ratio, and the load
average (two shared cores: the CPU time is the steadier figure). This checkout's replicate is then
broken down by part (each selector's fit, the k-means and scoring, the alignments), CPU seconds.
``--credit-table``: the 4,165 × 12 credit table of ``bench_all_families.py`` instead of the
default sample (needs ``../shared``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))


def _family(credit_table: bool):
    from fairaudit.audit import AuditConfig, RecordSink, _family

    if credit_table:
        from bench_all_families import credit_table as table

        data = table()
    else:
        from fairaudit.samples import load_sample

        data = load_sample()
    return _family("fs")(data, AuditConfig(methods=("fs",), bootstrap=0), RecordSink("fs"))


def child(count: int, credit_table: bool, parts: bool) -> dict:
    """Seconds per replicate of this process's ``fairaudit`` (and, with ``parts``, by part)."""
    import warnings

    import numpy as np

    import fairaudit.audit as driver

    warnings.simplefilter("ignore")
    family = _family(credit_table)
    rows = np.arange(len(family.codes))
    spent: dict[str, float] = {}
    if parts:
        _wrap_parts(spent)

    fits = family.fit(rows)
    if hasattr(driver, "run_replicate"):  # replicates as jobs (issue 23 on)
        from _common import run_replicates

        def replicates(n: int, random_state) -> None:
            run_replicates(family, n, random_state, rows, fits)
    else:  # the driver's own loop before it
        from threadpoolctl import threadpool_limits

        from fairaudit import uncertainty

        def replicates(n: int, random_state) -> None:
            found, pairs = uncertainty.Replicates(n), {}
            with threadpool_limits(limits=1):
                for b, seed in enumerate(uncertainty.replicate_seeds(random_state, n)):
                    driver._replicate(family, fits, rows, None, pairs, found, b, seed)

    replicates(2, 10**6)  # imports and first calls, on other rows (the k-NN graphs are remembered by content)
    spent.clear()
    started, cpu = time.perf_counter(), time.process_time()
    replicates(count, family.config.random_state)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"wall": wall / count, "cpu": cpu / count, "parts": {name: seconds / count for name, seconds in spent.items()}}


def _wrap_parts(spent: dict[str, float]) -> None:
    """Accumulate the CPU seconds of the replicate's parts (this checkout's names)."""
    from fairaudit.fs import _alignment, audit, baselines, fufs

    def wrap(owner, attribute: str, label: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - started

        setattr(owner, attribute, timed)

    for name in ("VarianceSelector", "LaplacianScore", "SPEC", "MCFS", "UDFS", "NDFS"):
        wrap(getattr(baselines, name), "_scores", f"fit {name}")
    wrap(fufs.FUFS, "fit", "fit FUFS")
    wrap(audit, "cluster_scores_many", "measure: k-means and its scores")
    wrap(_alignment.ExactRBF, "alignments", "measure: alignments (exact)")
    wrap(_alignment.NystroemRBF, "alignments", "measure: alignments (Nyström)")
    wrap(audit.FSAudit, "fit", "fit (all)")
    wrap(audit.FSAudit, "measure", "measure (all)")


def run(package: Path, count: int, credit_table: bool, parts: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(package))
    command = [sys.executable, __file__, "--child", str(count)] + (["--credit-table"] if credit_table else []) + (["--parts"] if parts else [])
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", default="c4c37f6", help="git revision to compare with")
    parser.add_argument("--replicates", type=int, default=30, help="replicates timed per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each package, alternated")
    parser.add_argument("--credit-table", action="store_true", help="the 4,165 × 12 credit table instead of the default sample")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.credit_table, args.parts)))
        return
    where = "4,165 × 12 credit table" if args.credit_table else "default sample (600 × 10)"
    print(f"FS bootstrap replicate, {where}; {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.reference, "fairaudit"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        found = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, package in (("before", Path(folder)), ("after", REPO)):
                result = run(package, args.replicates, args.credit_table)
                found[label].append(result)
                load = f"{os.getloadavg()[0]:.2f}"
                print(f"  {label:<6} wall {result['wall']:.4f} s  CPU {result['cpu']:.4f} s per replicate (load {load})", flush=True)
    best = {label: min(results, key=lambda r: r["cpu"]) for label, results in found.items()}
    print(f"after / before (fastest of each, CPU): {best['after']['cpu'] / best['before']['cpu']:.2f}; "
          f"wall {best['after']['wall'] / best['before']['wall']:.2f}")
    parts = run(REPO, args.replicates, args.credit_table, parts=True)["parts"]
    print("this checkout, CPU per replicate by part:")
    for name, seconds in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {name:<36} {seconds * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
