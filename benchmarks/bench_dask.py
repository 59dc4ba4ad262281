"""The dask engine on data larger than a worker's memory, and against the in-process engine.

Four parts, each in its own process (so that each peak memory is that part's alone):

* ``data`` — generates (once, in chunks of 1,000,000 rows, under ``--folder``, never in the
  repository) a ``--rows`` × 20 Parquet data set (default 20,000,000 rows, 3.2 GB of float64
  numbers plus a group column; three groups of different covariance, 60/30/10 %; row groups of
  500,000 rows) and a ``--small-rows`` one (default 1,000,000) of the same kind.
* ``large`` — the default PCA audit
  (ranks 1–10; vanilla, Fair PCA, JEVD, covFairPCA) with ``--engine dask`` on a local cluster of
  ``--workers`` worker processes with ``--worker-memory`` each. Reports the wall time of the
  cluster's start, of the pass over the data and of the audit, the peak resident memory of the
  client process (``ru_maxrss``) and of each worker process (polled with psutil every 0.2 s),
  and whether a worker was restarted (a worker over its limit is restarted by its nanny).
* ``equality`` — on a ``--small-rows`` (default 1,000,000) × 20 file of the same kind: the audit
  by the in-process engine (``load`` + ``run_audit``) and by the dask engine (4 workers), and
  the largest difference of their records: the moment-based metrics (``error``, ``loss``,
  ``max_loss``, ``loss_gap``, ``variance_explained``, ``mmd2``) must agree to 1e-8 (relative, and
  absolute below 1: ``|a − b| ≤ 1e-8 · max(|a|, 1)``, since Fair PCA's ``loss_gap`` is a
  rounding-level zero);
  the row metrics (``unfairness``, ``unfairness_balanced``, ``mmd2_rbf``) use stratified samples of
  10,000 rows drawn differently by the two engines, and their difference is reported, not judged.
* ``ratio`` — in one process, on the ``--small-rows`` file, the in-process engine and the dask
  engine (cluster already started) alternated ``--repeats`` times: read + audit wall time each,
  and the ratio of medians. Both without bootstrap intervals (``bootstrap=0``): the same work on
  both sides.
* ``intervals`` — on the ``--small-rows`` file, the PCA family with ``--interval-replicates``
  (default 20) bootstrap replicates by each engine: the in-process engine's stratified resample
  against the dask engine's Poisson bootstrap (one more pass over the partitions): the wall time
  of each audit and of its intervals, and how the intervals compare (median and spread of the
  width ratio dask/in-process over the moment metrics; share of dask intervals that contain the
  in-process point estimate).

* ``poisson`` — in this process, one thread: :meth:`GroupMoments.poisson_replicates` (the
  arithmetic of the replicate pass) on 100,000 rows in three groups at 5–80 features and 20 or
  100 replicates: CPU nanoseconds per row and replicate.

``--bootstrap N`` gives the ``large`` audit N replicates (default: the library's, 100 for PCA). The
``large`` and ``intervals`` parts report the read's pass, the replicate pass (its partitions'
progress events, wall seconds), the intervals' seconds, and the time the audit announced once its
first replicates were timed (``expected_seconds``) against the time it took.

The machine is shared (2 cores for every engineer): run it alone under the heavy lock and read the
figures as upper bounds; ratios measured side by side are the robust figures::

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_dask.py [--parts large,equality,ratio]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FEATURES = 20
GROUP_SHARES = (0.6, 0.3, 0.1)
ROW_GROUP = 500_000
MOMENT_METRICS = ("error", "loss", "max_loss", "loss_gap", "variance_explained", "mmd2")
ROW_METRICS = ("unfairness", "unfairness_balanced", "mmd2_rbf")


# ---------------------------------------------------------------------- data
def generate(path: Path, rows: int, seed: int = 0, chunk: int = 1_000_000) -> Path:
    """``rows`` × (20 features + a group column) written in chunks (never all in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    mixing = [rng.normal(size=(FEATURES, FEATURES)) * scale for scale in (1.0, 0.7, 1.4)]
    offsets = [rng.normal(size=FEATURES) * shift for shift in (0.0, 0.5, 1.0)]
    tmp = path.with_suffix(".partial")
    with pq.ParquetWriter(tmp, pa.schema([*(pa.field(f"x{j}", pa.float64()) for j in range(FEATURES)), pa.field("group", pa.int64())])) as writer:
        for start in range(0, rows, chunk):
            m = min(chunk, rows - start)
            group = rng.choice(len(GROUP_SHARES), size=m, p=GROUP_SHARES)
            X = np.empty((m, FEATURES))
            for g, (A, mu) in enumerate(zip(mixing, offsets, strict=True)):
                rows_g = group == g
                X[rows_g] = rng.normal(size=(int(rows_g.sum()), FEATURES)) @ A + mu
            table = pa.table({**{f"x{j}": X[:, j] for j in range(FEATURES)}, "group": group})
            writer.write_table(table, row_group_size=ROW_GROUP)
    tmp.rename(path)
    return path


# ---------------------------------------------------------------------- memory
class WorkerMemory:
    """Peak resident memory of every process below this one (the cluster's nannies and workers),
    polled every 0.2 s in a thread."""

    def __init__(self):
        import psutil

        self.me = psutil.Process()
        self.peaks: dict[int, tuple[str, float]] = {}
        self.total_peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _poll(self):
        import psutil

        while not self._stop.is_set():
            total = 0.0
            for child in self.me.children(recursive=True):
                try:
                    rss = child.memory_info().rss / 2**20
                    name = " ".join(child.cmdline()[-2:])[-60:]
                except psutil.Error:
                    continue
                total += rss
                if rss > self.peaks.get(child.pid, ("", 0.0))[1]:
                    self.peaks[child.pid] = (name, rss)
            self.total_peak = max(self.total_peak, total)
            time.sleep(0.2)


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------- the replicate pass
class PassClock:
    """A progress callback that times the replicate pass (``stage="bootstrap_pass"`` events: the
    first partition done to the last) and keeps every event's ``done``."""

    def __init__(self):
        self.started = time.perf_counter()
        self.first = self.last = None
        self.done: list[int] = []

    def __call__(self, event: dict) -> None:
        now = time.perf_counter()
        if event.get("stage") == "estimates":
            self.started = now  # the replicates start here
        if event.get("stage") == "bootstrap_pass":
            self.first = self.first if self.first is not None else now
            self.last = now
            self.done.append(int(event["done"]))

    def seconds(self) -> float | None:
        return None if self.last is None else round(self.last - self.started, 2)


def replicate_figures(data, result, clock: PassClock, count: int) -> dict:
    """The read's pass, the replicate pass and the intervals measured, and the time the audit
    announced once its first replicates were timed against the time it took."""
    return {
        "first_pass_s": round(data._layout.passes.seconds, 2),
        "replicate_pass_s": clock.seconds(),
        "pass_events_done": f"{clock.done[0]}..{clock.done[-1]} ({len(clock.done)} events)" if clock.done else None,
        "replicates": result.uncertainty["pca"].get("replicates"),
        "intervals_s": result.uncertainty["pca"].get("seconds"),
        "audit_announced_s": result.expected_seconds,
        "audit_taken_s": result.seconds,
    }


# ---------------------------------------------------------------------- parts
def part_large(args) -> dict:
    from fairaudit import AuditConfig, run_audit
    from fairaudit.engine import dask_session, read_partitioned

    path = Path(args.folder) / f"bench_{args.rows}.parquet"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run the data part first")
    with WorkerMemory() as memory:
        t0 = time.perf_counter()
        with dask_session(n_workers=args.workers, memory_limit=args.worker_memory) as (client, where):
            t1 = time.perf_counter()
            data = read_partitioned(str(path), sensitive="group", scheduler=client)
            t2 = time.perf_counter()
            clock = PassClock()
            result = run_audit(data, AuditConfig(engine="dask", bootstrap=args.bootstrap), progress=clock)
            t3 = time.perf_counter()
            workers_seen = len(client.scheduler_info()["workers"])
        t4 = time.perf_counter()
    worker_peaks = sorted((rss for name, rss in memory.peaks.values() if "spawn" in name or "multiprocessing" in name), reverse=True)
    return {
        "part": "large",
        "file": str(path),
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "rows": data.n_rows,
        "features": data.n_features,
        "partitions": data.engine["partitions"],
        "cluster": where,
        "cluster_start_s": round(t1 - t0, 2),
        "read_s": round(t2 - t1, 2),
        "audit_s": round(t3 - t2, 2),
        "cluster_stop_s": round(t4 - t3, 2),
        "total_s": round(t3 - t0, 2),
        "fits": int((result.records.metric == "seconds").sum()),
        "replicates": result.uncertainty["pca"].get("replicates"),
        "intervals_s": result.uncertainty["pca"].get("seconds"),
        "client_peak_mb": round(peak_rss_mb(), 1),
        "child_process_peaks_mb": sorted((round(rss, 1) for _, rss in memory.peaks.values()), reverse=True),
        "worker_process_peaks_mb": [round(r, 1) for r in worker_peaks],
        "all_children_peak_sum_mb": round(memory.total_peak, 1),
        "child_processes_seen": len(memory.peaks),
        "workers_at_end": workers_seen,
        "sample": data.engine["sample_size"],
        "group_sizes": data.group_sizes(),
        **replicate_figures(data, result, clock, int(result.uncertainty["pca"].get("replicates") or 0)),
        "load_average": round(os.getloadavg()[0], 2),
    }


def _small_file(args) -> Path:
    return generate(Path(args.folder) / f"bench_{args.small_rows}.parquet", args.small_rows, seed=1)


def part_data(args) -> dict:
    """Both files, generated in chunks (skipped when they exist)."""
    out = {"part": "data"}
    for rows, seed in ((args.small_rows, 1), (args.rows, 0)):
        started = time.perf_counter()
        path = generate(Path(args.folder) / f"bench_{rows}.parquet", rows, seed=seed)
        out[path.name] = {"seconds": round(time.perf_counter() - started, 1), "mb": round(path.stat().st_size / 2**20, 1)}
    out["generator_peak_mb"] = round(peak_rss_mb(), 1)
    return out


def part_equality(args) -> dict:
    from fairaudit import AuditConfig, load, run_audit
    from fairaudit.engine import dask_session, read_partitioned

    path = _small_file(args)
    t0 = time.perf_counter()
    local = run_audit(load(str(path), sensitive="group"), AuditConfig(bootstrap=0))
    t1 = time.perf_counter()
    with dask_session(n_workers=args.workers, memory_limit=args.worker_memory) as (client, _):
        t2 = time.perf_counter()
        data = read_partitioned(str(path), sensitive="group", scheduler=client)
        mine = run_audit(data, AuditConfig(engine="dask", bootstrap=0))
        t3 = time.perf_counter()
    keys = ["method", "variant", "rank", "group", "metric"]
    merged = local.records.merge(mine.records, on=keys, suffixes=("_local", "_dask"), validate="one_to_one")
    merged["abs"] = (merged.value_local - merged.value_dask).abs()
    # relative where the value is not a rounding-level zero (Fair PCA's loss_gap is 1e-15 by design)
    merged["rel"] = merged["abs"] / merged.value_local.abs().clip(lower=1.0)
    moment = merged[merged.metric.isin(MOMENT_METRICS)]
    rows = merged[merged.metric.isin(ROW_METRICS)]
    worst = moment.sort_values("rel").iloc[-1]
    by_variant = moment.groupby("variant")["rel"].max().to_dict()
    return {
        "part": "equality",
        "rows": data.n_rows,
        "records": len(merged),
        "moment_records": len(moment),
        "moment_max_rel": float(moment["rel"].max()),
        "moment_max_abs": float(moment["abs"].max()),
        "moment_max_rel_by_variant": {k: float(v) for k, v in by_variant.items()},
        "worst": f"{worst.variant} rank {worst['rank']} {worst.metric} {worst.group}: {worst.value_local!r} vs {worst.value_dask!r}",
        "within_1e-8": bool((moment["rel"] <= 1e-8).all()),
        "row_metric_max_abs": float(rows["abs"].max()),
        "local_read_and_audit_s": round(t1 - t0, 2),
        "dask_read_and_audit_s": round(t3 - t2, 2),
    }


def part_ratio(args) -> dict:
    from fairaudit import AuditConfig, load, run_audit
    from fairaudit.engine import dask_session, read_partitioned

    path = _small_file(args)
    local_times, dask_times = [], []
    with dask_session(n_workers=args.workers, memory_limit=args.worker_memory) as (client, where):
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run_audit(load(str(path), sensitive="group"), AuditConfig(bootstrap=0))
            t1 = time.perf_counter()
            run_audit(read_partitioned(str(path), sensitive="group", scheduler=client), AuditConfig(engine="dask", bootstrap=0))
            t2 = time.perf_counter()
            local_times.append(t1 - t0)
            dask_times.append(t2 - t1)
    return {
        "part": "ratio",
        "rows": args.small_rows,
        "cluster": where,
        "local_s": [round(t, 2) for t in local_times],
        "dask_s": [round(t, 2) for t in dask_times],
        "dask_over_local_median": round(float(np.median(dask_times) / np.median(local_times)), 2),
        "client_peak_mb": round(peak_rss_mb(), 1),
    }


def part_intervals(args) -> dict:
    from fairaudit import AuditConfig, load, run_audit
    from fairaudit.engine import dask_session, read_partitioned

    path = _small_file(args)
    config = AuditConfig(bootstrap=args.interval_replicates)
    t0 = time.perf_counter()
    local = run_audit(load(str(path), sensitive="group"), config)
    t1 = time.perf_counter()
    with dask_session(n_workers=args.workers, memory_limit=args.worker_memory) as (client, where):
        t2 = time.perf_counter()
        data = read_partitioned(str(path), sensitive="group", scheduler=client)
        clock = PassClock()
        mine = run_audit(data, AuditConfig(engine="dask", bootstrap=args.interval_replicates), progress=clock)
        t3 = time.perf_counter()
    keys = ["method", "variant", "rank", "group", "metric"]
    merged = local.records.merge(mine.records, on=keys, suffixes=("_local", "_dask"), validate="one_to_one")
    merged = merged[merged.metric.isin(MOMENT_METRICS) & merged.ci_low_local.notna() & merged.ci_low_dask.notna()]
    ratio = (merged.ci_high_dask - merged.ci_low_dask) / (merged.ci_high_local - merged.ci_low_local)
    ratio = ratio[np.isfinite(ratio)]
    covers = (merged.ci_low_dask <= merged.value_local) & (merged.value_local <= merged.ci_high_dask)
    return {
        "part": "intervals",
        "rows": args.small_rows,
        "cluster": where,
        "replicates": args.interval_replicates,
        "local_read_and_audit_s": round(t1 - t0, 2),
        "local_intervals_s": local.uncertainty["pca"].get("seconds"),
        "dask_read_and_audit_s": round(t3 - t2, 2),
        "dask_intervals_s": mine.uncertainty["pca"].get("seconds"),
        "records_compared": int(len(ratio)),
        "width_ratio_dask_over_local": {q: round(float(ratio.quantile(float(q))), 3) for q in ("0.1", "0.25", "0.5", "0.75", "0.9")},
        "dask_intervals_containing_local_point": round(float(covers.mean()), 3),
        **replicate_figures(data, mine, clock, args.interval_replicates),
        "load_average": round(os.getloadavg()[0], 2),
    }


def part_poisson(args) -> dict:
    """The replicate pass's arithmetic per row and replicate, one thread."""
    from threadpoolctl import threadpool_limits

    from fairaudit.engine.moments import GroupMoments

    rng = np.random.default_rng(0)
    rows = 100_000
    bounds = np.array([0, 60_000, 90_000, rows])
    found = {}
    with threadpool_limits(limits=1):
        for d in (5, 10, 20, 40, 80):
            X = rng.normal(size=(rows, d))
            for B in (20, 100):
                best = min(_cpu(GroupMoments.poisson_replicates, X, bounds, np.random.default_rng(1), B) for _ in range(3))
                found[f"d={d} B={B}"] = {"ns_per_row_replicate": round(best / (rows * B) * 1e9, 1)}
    return {"part": "poisson", "rows": rows, "figures": found, "load_average": round(os.getloadavg()[0], 2)}


def _cpu(work, *args) -> float:
    started = time.process_time()
    work(*args)
    return time.process_time() - started


PARTS = {"data": part_data, "large": part_large, "equality": part_equality, "ratio": part_ratio, "intervals": part_intervals,
         "poisson": part_poisson}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="data,equality,ratio,intervals,large")
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--small-rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--worker-memory", default="1GiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates of the large audit (default: the library's)")
    parser.add_argument("--interval-replicates", type=int, default=20)
    parser.add_argument("--folder", default="/tmp/fairaudit-bench-dask")
    parser.add_argument("--part", help=argparse.SUPPRESS)  # a part in its own process
    args = parser.parse_args()
    if args.part:
        print(json.dumps(PARTS[args.part](args)))
        return
    print(f"bench_dask: {os.cpu_count()} cores shared with other work; load average {os.getloadavg()[0]:.1f}", flush=True)
    for part in args.parts.split(","):
        argv = [sys.executable, __file__, "--part", part, *(a for a in sys.argv[1:] if not a.startswith("--parts"))]
        if "--parts" in sys.argv:
            i = sys.argv.index("--parts")
            argv = [sys.executable, __file__, "--part", part, *sys.argv[1:i], *sys.argv[i + 2:]]
        done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        if done.returncode:
            print(f"{part}: failed\n{done.stderr[-3000:]}", flush=True)
            continue
        print(json.dumps(json.loads(done.stdout.strip().splitlines()[-1]), indent=1), flush=True)
        print(f"load average after {part}: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
