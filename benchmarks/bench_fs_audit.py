"""Feature-selection audit time, before and after, side by side in one run (issue 13 item 4).

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_fs_audit.py [--reference REV] [--cases default,credit,sweep,kmeans]

Each case runs twice in fresh subprocesses — once with the package as of ``--reference`` (a git
revision, default ``9821a12``: main before this work, extracted with ``git archive`` to a
temporary folder) and once with this checkout — and prints both times and their ratio:

* ``default``: ``run_audit`` of the FS family on the default sample (``two_groups``, 600 × 10);
* ``credit``: the same on ``../shared/datasets/credit/UCI_Credit_Card.csv`` (30,000 rows,
  sensitive ``SEX``, every other column a feature as ``fairaudit.load`` prepares it);
* ``sweep``: FUFS over the paper's 7-point sweep (10–40 %) on GOOGLE+ and TOXICITY with the
  estimator's defaults (before: the normalised-alignment FUFS, one fit per size with its proxy
  stage reused, as the audit did; after: FUFS as printed, one fit for the sweep);
* ``kmeans``: the 50-run k-means evaluation of one selection (crime, 24 columns; credit,
  9 columns) against one scikit-learn ``KMeans(n_init=50)`` (which keeps only the best run).

Timings on the shared two-core machine are noisy (the load average is printed); the ratios are
measured in one run. The process CPU time is printed too: the "after" audit runs on one thread,
so its CPU time is close to what the wall clock shows on an idle machine.
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


def child(case: str) -> dict:
    import warnings

    import numpy as np

    warnings.simplefilter("ignore")
    from fairaudit.audit import AuditConfig, run_audit

    if case in ("default", "credit"):
        if case == "default":
            from fairaudit.samples import load_sample

            data = load_sample()
        else:
            import _fs_data

            from fairaudit import load

            data = load(str(_fs_data.require("credit/UCI_Credit_Card.csv")), sensitive=["SEX"])
        started, cpu = time.perf_counter(), time.process_time()
        result = run_audit(data, AuditConfig(methods=("fs",)))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        fits = result.records[result.records.metric == "seconds"]
        per_variant = fits.groupby("variant").value.apply(lambda v: float(v.iloc[0]) if v.nunique() == 1 else float(v.sum()))
        return {"seconds": seconds, "cpu": cpu, "rows": data.n_rows, "features": data.n_features, "fits": per_variant.round(2).to_dict()}
    if case.startswith("sweep:"):
        import _fs_data

        from fairaudit import FUFS
        from fairaudit.fs.audit import minmax

        name = case.split(":")[1]
        table = np.loadtxt(_fs_data.require(f"fufs/{name}.csv"), delimiter=",")
        column = {"google": 1, "toxicity": 6}[name]
        X, group = minmax(np.delete(table[:, :-1], column, axis=1)), table[:, column].astype(int)
        sizes = [max(1, round(p * X.shape[1] / 100)) for p in (10, 15, 20, 25, 30, 35, 40)]
        started, cpu = time.perf_counter(), time.process_time()
        if "formulation" in FUFS().get_params():  # after: as printed, one fit ranks every size
            FUFS(max(sizes), random_state=0).fit(X, sensitive_features=group)
        else:  # before: one fit per size, the proxy stage once (as its audit did)
            proxies = None
            for m in sizes:
                fitted = FUFS(m, random_state=0, proxies=proxies).fit(X, sensitive_features=group)
                proxies = fitted.sensitive_support_
        return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "shape": list(X.shape)}
    raise SystemExit(f"unknown case {case}")


def kmeans_case() -> None:
    import _fs_data
    from sklearn.cluster import KMeans

    from fairaudit.fs.audit import minmax
    from fairaudit.fs.evaluation import cluster_scores

    print("\n== k-means evaluation: 50 runs (ours, batched) vs one scikit-learn KMeans(n_init=50) ==")
    crime = _fs_data.crime()
    credit = _fs_data.credit()
    for name, X, group, label in (("crime, 24 cols", minmax(crime[0])[:, :24], crime[1], crime[2]),
                                  ("credit, 9 cols", minmax(credit[0])[:, :9], credit[1], credit[2])):
        started = time.perf_counter()
        cluster_scores(X, group, n_clusters=2, labels=label, runs=50, random_state=0)
        ours = time.perf_counter() - started
        started = time.perf_counter()
        KMeans(2, n_init=50, random_state=0).fit(X)
        single = time.perf_counter() - started
        print(f"  {name:<16} ours (50 runs + metrics) {ours:7.2f} s   KMeans(n_init=50) {single:7.2f} s   ratio {ours / single:5.2f}")


def run(case: str, package: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(package))
    out = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", default="9821a12", help="git revision to compare against (default: main before this work)")
    parser.add_argument("--cases", default="default,credit,sweep,kmeans")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    cases = args.cases.split(",")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; reference {args.reference}")
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.reference, "fairaudit"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        expanded = [c for c in cases if c != "sweep" and c != "kmeans"] + (["sweep:google", "sweep:toxicity"] if "sweep" in cases else [])
        for case in expanded:
            before = run(case, Path(folder))
            after = run(case, REPO)
            if "error" in before or "error" in after:
                print(f"{case:<16} before {before}  after {after}")
                continue
            print(f"{case:<16} before {before['seconds']:8.1f} s   after {after['seconds']:8.1f} s   "
                  f"× {before['seconds'] / after['seconds']:6.1f}   CPU {before['cpu']:8.1f} s → {after['cpu']:8.1f} s "
                  f"(× {before['cpu'] / after['cpu']:.1f})   (load {os.getloadavg()[0]:.1f})")
            for label, result in (("before", before), ("after", after)):
                if "fits" in result:
                    print(f"    {label} fit seconds per variant: {result['fits']}")
    if "kmeans" in cases:
        sys.path.insert(0, str(REPO))
        kmeans_case()


if __name__ == "__main__":
    main()
