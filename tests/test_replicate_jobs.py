"""Bootstrap replicates as jobs (issue 23): a replicate is a pure function of the family's context,
its index and its seed, so the values do not depend on where or in which order the replicates run;
a time budget stops them with the count said; provisional intervals are those of the replicates in
so far; the audit driver imports nothing that renders."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairaudit import uncertainty
from fairaudit.audit import (
    FACT_METRICS,
    FAMILIES,
    AuditConfig,
    FamilyIntervals,
    RecordSink,
    ReplicateJob,
    _family,
    estimate_family,
    replicate_context,
    run_audit,
    run_replicate,
    start_spread,
)
from fairaudit.executors import SerialExecutor
from fairaudit.findings import findings
from fairaudit.samples import load_sample

PACKAGE = Path(__file__).resolve().parent.parent / "fairaudit"

CONFIGS = {
    "pca": AuditConfig(methods=("pca",), ranks=(1, 2), variants=("vanilla", "fair_eig", "jevd"), bootstrap=10, holdout=0.3),
    "fs": AuditConfig(methods=("fs",), ranks=(2, 3), variants=("variance", "ndfs", "fufs"), bootstrap=10, options={"fs": {"kmeans_runs": 4}}),
    "nmf": AuditConfig(methods=("nmf",), ranks=(1, 2), variants=("vanilla", "fair_mu"), bootstrap=10),
    "cpd": AuditConfig(methods=("cpd",), ranks=(2,), variants=("vanilla", "fatr", "khsic"), bootstrap=10,
                       options={"cpd": {"sweep": False, "n_epochs": 20}}),
}


@pytest.fixture(scope="module")
def sample():
    return load_sample("two_groups")


def measured(result):
    """The records a replicate can change (the facts of the fits — their seconds — aside)."""
    return result.records[~result.records.metric.isin(FACT_METRICS)].reset_index(drop=True)


@pytest.mark.parametrize("method", list(CONFIGS))
def test_replicates_on_two_processes_give_the_serial_values(sample, method):
    """Serial and on local processes (this one and a worker), the same seed gives the same records,
    bit for bit, intervals and the spread between starts included."""
    serial = run_audit(sample, CONFIGS[method].__class__(**{**vars(CONFIGS[method]), "n_jobs": 1}))
    parallel = run_audit(sample, CONFIGS[method].__class__(**{**vars(CONFIGS[method]), "n_jobs": 2}))
    assert serial.uncertainty[method]["jobs"] == "in this process" and parallel.uncertainty[method]["jobs"] == "on 2 processes"
    left, right = measured(serial), measured(parallel)
    assert left.ci_low.notna().any()
    assert left.equals(right), (left.compare(right) if left.shape == right.shape else (left.shape, right.shape))
    assert serial.uncertainty[method].get("start_spread") == parallel.uncertainty[method].get("start_spread")


def test_replicates_on_worker_processes_only_give_the_serial_values(sample):
    """Inside ``jobs_on_workers()`` (the dashboard's runs: the server draws pages meanwhile)
    ``n_jobs`` workers compute every replicate and this process none; the records are the serial
    ones."""
    import operator

    from fairaudit.executors import ProcessExecutor, jobs_here, jobs_on_workers

    assert ProcessExecutor(2).workers == 1
    with jobs_on_workers():
        assert ProcessExecutor(2).workers == 2 and ProcessExecutor(1).workers == 1
    done = list(ProcessExecutor(2, here=False).run(operator.mul, 3, range(7)))
    assert sorted(d.value for d in done) == [3 * j for j in range(7)] and {d.where for d in done} == {"worker"}
    config = CONFIGS["pca"]
    serial = run_audit(sample, config.__class__(**{**vars(config), "n_jobs": 1}))
    with jobs_on_workers():
        workers = run_audit(sample, config.__class__(**{**vars(config), "n_jobs": 2}))
    assert jobs_here()
    assert workers.uncertainty["pca"]["jobs"] == "on 2 worker processes"
    assert measured(serial).equals(measured(workers))


class _ShippingExecutor(SerialExecutor):
    """Serial, but every context goes through pickle first (as a worker's does), and the jobs are noted."""

    streams = 2

    def __init__(self):
        self.jobs: list = []

    def run(self, function, context, jobs, *, token=None, launch=None):
        import pickle

        jobs = list(jobs)
        self.jobs += jobs
        yield from super().run(function, pickle.loads(pickle.dumps(context)), jobs)


def test_nmf_ranks_fitted_as_jobs_give_the_one_after_the_other_audit():
    """The NMF family's own fit runs its ranks as jobs when the driver gives it an executor (the
    replicates' workers, started anyway): the most costly ranks first, and the records, details,
    warnings and progress are those of the ranks fitted one after the other, here, in order."""
    from fairaudit.nmf.audit import NMFAudit

    data = load_sample("two_groups")
    config = AuditConfig(methods=("nmf",), ranks=(1, 2, 3), variants=("vanilla", "fair_mu"), bootstrap=10)
    found = {}
    for name, executor in (("here", None), ("jobs", _ShippingExecutor())):
        events = []
        family = NMFAudit(data, config, RecordSink("nmf", progress=events.append))
        family.executor = executor
        stage = estimate_family(family)
        found[name] = (stage, events, family.sink)
    (here, here_events, here_sink), (jobs, job_events, job_sink) = found["here"], found["jobs"]

    def records(sink):
        return pd.DataFrame([row for row in sink.rows if row[4] not in FACT_METRICS])

    assert records(here_sink).equals(records(job_sink)) and len(records(here_sink)) > 20
    assert here_sink.details == job_sink.details and here_sink.warnings == job_sink.warnings
    assert list(job_sink.details["vanilla"]) == ["1", "2", "3"]  # written in rank order whatever order the jobs ran in
    assert here.fits.shared["E"].keys() == jobs.fits.shared["E"].keys() == {1, 2, 3}
    for rank in (1, 2, 3):
        np.testing.assert_array_equal(here.fits.shared["E"][rank], jobs.fits.shared["E"][rank])
    assert [e for e in here_events if e["stage"] == "fit"][0]["rank"] == 1  # one after the other: in rank order
    fitted = [(e["variant"], e["rank"], e["done"]) for e in job_events if e["stage"] == "fit"]
    assert [done for *_, done in fitted] == list(range(1, 7)) and {(v, r) for v, r, _ in fitted} == {
        (v, r) for v in ("vanilla", "fair_mu") for r in (1, 2, 3)}
    assert [rank for _, rank, _ in fitted][:2] == [3, 3]  # the highest rank (the longest) first
    assert jobs.family.executor.jobs == [3, 2, 1]


def test_nmf_ranks_fitted_on_worker_processes_give_the_serial_audit(sample):
    """The same through :func:`run_audit` with every job on worker processes (the dashboard's way)."""
    from fairaudit.executors import jobs_on_workers

    config = AuditConfig(methods=("nmf",), ranks=(1, 2, 3), variants=("vanilla", "fair_mu"), bootstrap=10)
    serial = run_audit(sample, config.__class__(**{**vars(config), "n_jobs": 1}))
    with jobs_on_workers():
        workers = run_audit(sample, config.__class__(**{**vars(config), "n_jobs": 2}))
    assert measured(serial).equals(measured(workers))
    assert serial.details == workers.details and serial.warnings == workers.warnings


def test_a_server_starts_one_worker_per_core_a_command_one_fewer(monkeypatch):
    """The dashboard's server computes no replicate (``here=False``): it starts a worker per usable
    core; a command computes replicates itself too, so it starts one fewer."""
    from fairaudit import executors

    calls = []
    monkeypatch.setattr(executors, "usable_cores", lambda: 2)
    monkeypatch.setattr(executors, "start_workers", lambda workers, modules: calls.append(workers))
    executors.start_workers_for("pca,nmf", jobs=None, bootstrap=None, here=False)
    executors.start_workers_for("pca,nmf", jobs=None, bootstrap=None)
    executors.start_workers_for("pca", jobs=1, bootstrap=None, here=False)
    assert calls == [2, 1, 1]


def test_a_replicates_values_do_not_depend_on_the_replicates_before_it(sample):
    """Job 5 alone, and job 5 after jobs 0–4 in the same context (the worker's case), give the same
    values: nothing a replicate changes reaches the next."""
    family = _family("nmf")(sample, CONFIGS["nmf"], RecordSink("nmf"))
    stage = estimate_family(family)
    seeds = uncertainty.replicate_seeds(0, 10)
    alone = run_replicate(replicate_context(stage), ReplicateJob(5, 10, seeds[5])).values
    context = replicate_context(stage)
    for b in range(5):
        run_replicate(context, ReplicateJob(b, 10, seeds[b]))
    after = run_replicate(context, ReplicateJob(5, 10, seeds[5])).values
    assert alone.keys() == after.keys()
    assert all(alone[key] == after[key] or (math.isnan(alone[key]) and math.isnan(after[key])) for key in alone)


def test_a_time_budget_stop_says_how_many_replicates_the_intervals_come_from(sample):
    """Stopped after 12 of 40: the intervals are those of replicates 0–11 — exactly what
    ``bootstrap=12`` gives, so a stopped audit can be reproduced — and the summary says so."""
    config = AuditConfig(ranks=(1, 2), variants=("vanilla", "fair_eig"), bootstrap=40, n_jobs=1)
    family = _family("pca")(sample, config, RecordSink("pca"))
    stage = estimate_family(family)
    intervals = FamilyIntervals(stage, SerialExecutor())
    intervals.run(12)
    intervals.run(deadline=0.0)  # the deadline has passed: nothing more starts
    summary = intervals.finish()
    assert summary["replicates"] == 12 and summary["replicates_planned"] == 40 and summary["stopped"] == "time budget"
    assert "12 of the 40 bootstrap replicates" in summary["why"] and "time budget" in summary["why"]
    stopped = family.sink.rows
    twelve = run_audit(sample, AuditConfig(ranks=(1, 2), variants=("vanilla", "fair_eig"), bootstrap=12, n_jobs=1))
    mine = [row for row in stopped if row[4] not in FACT_METRICS]
    theirs = [tuple(row) for row in twelve.records.itertuples(index=False) if row.metric not in FACT_METRICS]
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        assert a[:5] == b[:5]
        np.testing.assert_array_equal(np.array(a[5:], dtype=float), np.array(b[5:], dtype=float))


def test_a_budget_too_short_for_ten_replicates_leaves_no_intervals_and_says_why(sample):
    config = AuditConfig(ranks=(1,), variants=("vanilla",), bootstrap=30, time_budget=1e-3, n_jobs=1)
    result = run_audit(sample, config)
    summary = result.uncertainty["pca"]
    assert summary["replicates"] == 0 and summary["replicates_planned"] == 30
    assert "time budget" in summary["why"] and "at least 10" in summary["why"] and "of 30" in summary["why"]
    assert result.records[result.records.metric == "loss"].ci_low.isna().all()
    assert result.config["time_budget"] == 1e-3 and "n_jobs" not in result.config  # where it ran changes no number


def test_provisional_intervals_are_those_of_the_replicates_in_and_say_so(sample):
    """While the replicates run, progress events carry the result with the intervals of the first
    k replicates — the final intervals of ``bootstrap=k`` — and every finding drawn from it says it
    is provisional and on how many replicates it rests."""
    events = []
    config = AuditConfig(ranks=(1, 2, 3), variants=("vanilla", "fair_eig"), bootstrap=40, n_jobs=1)
    final = run_audit(sample, config, progress=events.append)
    early = [e for e in events if e["stage"] == "bootstrap" and "result" in e]
    assert early and early[0]["result"].uncertainty["pca"]["replicates_done"] == uncertainty.MIN_REPLICATES
    result = early[0]["result"]
    k = result.uncertainty["pca"]["replicates_done"]
    assert result.uncertainty["pca"]["provisional"] and k < 40
    again = run_audit(sample, AuditConfig(ranks=(1, 2, 3), variants=("vanilla", "fair_eig"), bootstrap=k, n_jobs=1))
    np.testing.assert_array_equal(measured(result)[["ci_low", "ci_high"]], measured(again)[["ci_low", "ci_high"]])
    found = [f for items in findings(result).values() for f in items]
    assert found and all(f.provisional == k for f in found) and all(f.to_dict()["provisional"] == k for f in found)
    assert all(f.provisional is None for items in findings(final).values() for f in items)
    assert "provisional" not in final.uncertainty["pca"]


def test_the_time_is_announced_from_the_first_replicates_and_recorded(sample):
    events = []
    result = run_audit(sample, AuditConfig(ranks=(1, 2), variants=("vanilla",), bootstrap=20, n_jobs=1), progress=events.append)
    announce = [e for e in events if e["stage"] == "announce"]
    assert len(announce) == 1 and announce[0]["families"]["pca"]["replicates"] == 20
    stages = [e["stage"] for e in events]
    # after the first tenth of the replicates, timed (the first batch pays for starting the workers)
    assert stages[:stages.index("announce")].count("bootstrap") == 2
    assert result.expected_seconds == pytest.approx(announce[0]["expected_seconds"], abs=1e-3)
    summary = result.uncertainty["pca"]
    assert summary["expected_seconds"] > 0 and summary["seconds"] > 0
    assert all(e["seconds_left"] >= 0 for e in events if e["stage"] == "bootstrap")


def test_the_spread_between_starts_is_set_beside_the_intervals():
    rows = [("pca", "vanilla", 1, "a", "loss", 1.0, 0.9, 1.1), ("pca", "vanilla", 1, "b", "loss", 2.0, 1.9, 2.1),
            ("pca", "vanilla", 1, "", "seconds", 0.1, math.nan, math.nan)]
    restarts = [{("vanilla", 1, "a", "loss"): 1.05, ("vanilla", 1, "b", "loss"): 2.5}, {("vanilla", 1, "a", "loss"): 0.98}]

    class Family:
        restart_reason = "why"

    found = start_spread(rows, restarts, Family())
    assert found["restarts"] == 2 and found["checked"] == 2 and found["larger_count"] == 1
    (larger,) = found["larger"]
    assert (larger["group"], larger["spread"], larger["width"]) == ("b", pytest.approx(0.5), pytest.approx(0.2))


def test_families_with_random_starts_measure_their_spread(sample):
    nmf = run_audit(sample, CONFIGS["nmf"])
    spread = nmf.uncertainty["nmf"]["start_spread"]
    assert spread["restarts"] == 2 and spread["checked"] > 0 and "random factors" in spread["why"]
    pca = run_audit(sample, CONFIGS["pca"])
    assert "start_spread" not in pca.uncertainty["pca"]  # exact solvers: no random start


def test_a_dask_cluster_gives_the_in_process_values(sample):
    distributed = pytest.importorskip("distributed")
    config = CONFIGS["fs"]
    here = run_audit(sample, config.__class__(**{**vars(config), "n_jobs": 1}))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        there = run_audit(sample, config.__class__(**{**vars(config), "scheduler": client}))
    assert there.uncertainty["fs"]["jobs"].startswith("on the Dask cluster")
    assert measured(here).equals(measured(there))


# ---------------------------------------------------------------------------- nothing that renders
RENDERING = {"fairaudit.findings", "fairaudit.plots", "fairaudit.report", "fairaudit.cli", "fairaudit.compare", "fairaudit.cost"}
RENDERING_PACKAGES = ("streamlit", "plotly", "pages")


def _module_file(name: str) -> Path | None:
    path = PACKAGE.parent / Path(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(name: str) -> set[str]:
    """Every module ``name``'s source imports, at the top or inside a function (resolved names)."""
    path = _module_file(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if _module_file(f"{base}.{alias.name}"))
    return found


def test_the_audit_driver_imports_nothing_that_renders():
    """The closure of every import statement — lazy ones inside functions too — reachable from the
    driver, the executors, the engines and the families holds no rendering module (findings,
    plots, report, the command line, comparison) and no cost model; and importing the driver and a
    family loads none of them."""
    roots = ["fairaudit.audit", "fairaudit.executors", "fairaudit.engine", "fairaudit.engine.dask_engine",
             *(spec.split(":")[0] for spec in FAMILIES.values())]
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or not name.startswith("fairaudit") or _module_file(name) is None:
            continue
        seen.add(name)
        imported = _imports(name)
        bad = {m for m in imported if m in RENDERING or m.split(".")[0] in RENDERING_PACKAGES}
        assert not bad, f"{name} imports {sorted(bad)}"
        todo.extend(imported)
    assert {"fairaudit.audit", "fairaudit.uncertainty", "fairaudit.pca.audit", "fairaudit.executors"} <= seen
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, fairaudit.audit, fairaudit.pca.audit, fairaudit.nmf.audit; "
         "print(' '.join(m for m in sys.modules if m.startswith(('fairaudit', 'streamlit', 'plotly'))))"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()
    assert not [m for m in loaded if m in RENDERING or m.split(".")[0] in ("streamlit", "plotly")], loaded


def test_the_pace_shares_this_process_s_jobs_among_the_streams_until_the_workers_join():
    """While the workers start, every job runs here: the pace to come is the mean job time over the
    streams, not this process's throughput alone; once they join, the throughput since then."""
    from types import SimpleNamespace

    from fairaudit.audit import FamilyIntervals

    plan = FamilyIntervals.__new__(FamilyIntervals)
    plan.executor = SimpleNamespace(streams=2)
    plan.done = np.array([True] * 10 + [False] * 90)
    plan.job_seconds = [0.1] * 10
    plan.spent, plan._begun, plan.joined = 1.0, None, None
    assert plan.pace() == pytest.approx(0.05)
    plan.joined = (1.0, 10)  # a worker's first job came back after 1 s and 10 replicates
    plan.done[:30] = True
    plan.spent = 2.0  # 20 more replicates in 1 s
    assert plan.pace() == pytest.approx(0.05)
    plan.executor = SimpleNamespace(streams=1)
    assert plan.pace() == pytest.approx(2.0 / 30)


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["audit", "x.csv", "--sensitive", "g"], [(1, ["fairaudit.pca.audit"])]),
        (["audit", "x.csv", "--methods", "nmf, fs", "--jobs=3"], [(2, ["fairaudit.nmf.audit", "fairaudit.fs.audit"])]),
        (["audit", "x.csv", "--bootstrap", "0"], []),
        (["audit", "x.csv", "--jobs", "1"], []),
        (["audit", "x.csv", "--jobs", "many"], []),  # the command's own parser says what is wrong
        (["audit", "x.csv", "--scheduler", "tcp://h:8786"], []),
        (["audit", "--help"], []),
        (["compare", "a.json", "b.json"], []),
    ],
)
def test_a_command_starts_its_workers_before_its_imports_only_when_replicates_run_here(monkeypatch, argv, started):
    """``python -m fairaudit audit`` starts the worker processes first (they import the families
    while the command does); never for a run without local replicates."""
    import runpy

    from fairaudit import executors

    calls = []
    monkeypatch.setattr(executors, "usable_cores", lambda: 2)
    monkeypatch.setattr(executors, "start_workers", lambda workers, modules: calls.append((workers, list(modules))))
    monkeypatch.setattr("fairaudit.cli.main", lambda argv=None: 0)
    monkeypatch.setattr(sys, "argv", ["fairaudit", *argv])
    with pytest.raises(SystemExit) as stopped:
        runpy.run_module("fairaudit.__main__", run_name="__main__")
    assert stopped.value.code == 0
    assert calls == started


def test_a_command_that_fails_before_its_audit_still_says_why_with_its_workers_started(tmp_path):
    """The workers started early are stopped at the command's end (killed, not waited for: their imports
    would hold the exit); the command still exits 2 with its message."""
    missing = tmp_path / "missing.csv"
    done = subprocess.run([sys.executable, "-m", "fairaudit", "audit", str(missing), "--sensitive", "g", "--jobs", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such file" in done.stderr
