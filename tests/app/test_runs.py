"""The session's run registry (pages/runs.py) without Streamlit: overall progress and time left,
cancel, the shared numeric cache bound to each session's names."""

from __future__ import annotations

import time

import numpy as np

from fairaudit.audit import AuditConfig
from fairaudit.data import AuditData
from pages.runs import Job, ResultStore, Run, RunRegistry


def tiny(name: str = "t.csv") -> AuditData:
    rng = np.random.default_rng(0)
    data = AuditData.from_arrays(rng.normal(size=(60, 4)), np.repeat(["a", "b"], 30))  # groups large enough to judge
    data.source["name"] = name
    return data


def test_time_left_is_the_audits_own_measurement_once_every_family_has_one():
    """No model of the machine: the time left is what the running audits measure of themselves (a
    family's fits by their pace, its intervals from its first replicates, timed), and the run says
    none until every family still to come has one."""
    run = Run(label="all", data=None, data_token=1, store=ResultStore(),
              jobs=[Job("pca", AuditConfig()), Job("nmf", AuditConfig()), Job("fs", AuditConfig())])
    assert run.fraction(now=0.0) == 0 and run.seconds_left(now=0.0) is None  # nothing to estimate from yet
    pca, nmf, fs = run.jobs
    pca.state, pca.seconds = "done", 2.0
    run._job, nmf.state, nmf.started = nmf, "running", 10.0
    run._progress({"method": "nmf", "variant": "vanilla", "rank": 2, "done": 5, "total": 10, "stage": "fit", "seconds_left": 8.0})
    assert run.seconds_left() is None  # FS has not measured anything yet
    assert nmf.left_now(nmf.left_at + 9.0) is None  # slower than measured: no time said until the next event
    assert abs(nmf.share(now=nmf.left_at) - nmf.elapsed(nmf.left_at) / (nmf.elapsed(nmf.left_at) + 8.0)) < 1e-12
    fs.state, fs.seconds, fs.left, fs.left_at = "estimated", 1.0, 30.0, 0.0  # its intervals announced: 30 s
    now = nmf.left_at + 3.0
    assert abs(run.seconds_left(now=now) - (8.0 - 3.0 + 30.0)) < 1e-9  # a waiting family's time does not run down
    spent = 2.0 + nmf.elapsed(now) + 1.0
    assert abs(run.fraction(now=now) - spent / (spent + 35.0)) < 1e-12


def test_a_familys_intervals_count_in_its_progress_after_its_fits():
    """The replicates' own measurement moves the bar: the announcement (the first replicates
    timed) gives the intervals' time, each replicate's event its time left; the family's end comes
    with the last replicate, and a cancel stops at the next event."""
    job = Job("pca", AuditConfig(bootstrap=100))
    run = Run(label="PCA", data=None, data_token=1, store=ResultStore(), jobs=[job])
    job.state, job.started = "running", time.monotonic()
    run._job = job
    run._progress({"method": "pca", "variant": "vanilla", "rank": 1, "done": 40, "total": 40, "stage": "fit", "seconds_left": 0.0})
    run._progress({"method": "pca", "variant": "", "rank": None, "done": 0, "total": 100, "stage": "estimates"})
    assert job.left is None and run.seconds_left() is None  # the intervals' time: not measured yet
    run._progress({"method": None, "stage": "announce", "expected_seconds": 12.0, "seconds": 1.0,
                   "families": {"pca": {"replicates": 100, "each": 0.1, "expected_seconds": 10.5, "spent": 0.5}}})
    assert abs(job.left - 10.0) < 1e-12 and run.seconds_left() <= 10.0
    run._progress({"method": "pca", "variant": "", "rank": None, "done": 1, "total": 100, "stage": "bootstrap", "seconds_left": 9.9})
    assert job.counted() == "1 of 100 bootstrap replicates" and 0 < run.fraction() < 1
    run._progress({"method": "pca", "variant": "", "rank": None, "done": 100, "total": 100, "stage": "bootstrap", "seconds_left": 0.0})
    assert abs(run.fraction() - 1.0) < 1e-12
    run.cancel()
    try:
        run._progress({"method": "pca", "variant": "", "rank": None, "done": 100, "total": 100, "stage": "bootstrap"})
    except Exception as exc:  # noqa: BLE001 - AuditCancelled, with where it stopped
        assert "100 of 100 bootstrap replicates" in str(exc)
    else:
        raise AssertionError("a cancelled run must stop at its next progress report")


def test_cached_results_are_bound_to_each_sessions_names():
    store = ResultStore()
    first, second = RunRegistry(store), RunRegistry(store)
    config = AuditConfig(ranks=(1,), variants="vanilla")
    a = first.start("PCA", tiny("alpha.csv"), 1, [("pca", config)])
    assert a.wait(120) and a.state == "done"
    b = second.start("PCA", tiny("beta.csv"), 1, [("pca", config)])
    assert b.wait(120) and b.jobs[0].state == "cached"
    assert first.latest(1)["pca"][0].data["name"] == "alpha.csv"
    assert second.latest(1)["pca"][0].data["name"] == "beta.csv"
    assert second.latest(2) == {}  # other data in the same session: nothing stale


def test_a_failed_family_reports_in_the_dashboards_words_and_the_others_still_land():
    registry = RunRegistry(ResultStore())
    run = registry.start("two", tiny(), 1, [("pca", AuditConfig(ranks=(9,))), ("cpd", AuditConfig(ranks=(1,), variants="vanilla",
                                                                                                   options={"cpd": {"sweep": False}}))])
    assert run.wait(120)
    assert [m for m, _ in run.errors] == ["pca"] and "rank" in run.errors[0][1]
    assert "cpd" in run.results and run.state == "done"


def test_forget_keeps_what_a_page_can_still_show():
    registry = RunRegistry(ResultStore())
    config = AuditConfig(ranks=(1,), variants="vanilla")
    old = registry.start("PCA", tiny(), 1, [("pca", config)])
    new = registry.start("PCA", tiny(), 1, [("pca", AuditConfig(ranks=(2,), variants="vanilla"))])
    other = registry.start("PCA", tiny(), 2, [("pca", config)])
    for run in (old, new, other):
        assert run.wait(120)
    registry.forget_ended(data_token=2)
    assert registry.runs == [other]


def test_notes_that_name_lines_are_never_another_sessions():
    """Same numbers, lines shifted by a preamble: the NMF note on the all-zero row names each
    file's own line (the shared cache keys on the rows' line numbers too)."""
    from fairaudit import prepare, read_table

    body = "g,a,b,c\n" + "".join(f"{'xy'[i % 2]},{0 if i == 5 else 1 + i % 3},{0 if i == 5 else 2 + i % 5},{0 if i == 5 else 1}\n"
                                 for i in range(40))
    store = ResultStore()
    config = AuditConfig(methods=("nmf",), ranks=(1,), variants="vanilla", options={"nmf": {"zero_rows": "drop"}})
    notes = {}
    for name, text, skip in (("plain.csv", body, 0), ("preamble.csv", "exported by a tool\n" + body, 1)):
        data = prepare(read_table(text.encode(), name=name, skip_rows=skip), sensitive="g")
        run = RunRegistry(store).start("NMF", data, 1, [("nmf", config)])
        assert run.wait(120) and run.state == "done", run.errors
        notes[name] = " ".join(run.results["nmf"].warnings)
    assert "line 7" in notes["plain.csv"] and "line 8" in notes["preamble.csv"]


# ---------------------------------------------------------------- point estimates before intervals
class GatedAudit:
    """:class:`fairaudit.audit.AuditRun` as the dashboard sees it, under the test's control: its
    first stage hands over the real point-estimate result of a PCA audit (``stage="estimates"``),
    its second reports a replicate every 50 ms until the test opens the gate, so a cancel stops it
    there. Called as ``AuditRun(data, config, progress=…)`` is."""

    def __init__(self, gate_before_estimates: bool = False):
        import threading

        from fairaudit.audit import run_audit

        events = []
        config = AuditConfig(ranks=(1, 2), variants="vanilla", bootstrap=10)
        self.final = run_audit(tiny(), config, progress=events.append)
        self.estimates = next(e for e in events if e["stage"] == "estimates")
        self.gate = threading.Event()
        self.handed_over = threading.Event()
        self.fitted = threading.Event()
        self.gate_before_estimates = gate_before_estimates

    def __call__(self, data, config, progress=None):
        return _GatedRun(self, progress)


class _GatedRun:
    intervals_pending = True

    def __init__(self, fake: GatedAudit, progress):
        self.fake, self.progress = fake, progress

    def estimate(self) -> None:
        fake = self.fake
        self.progress({"method": "pca", "variant": "vanilla", "rank": 2, "done": 2, "total": 2, "seconds": 0.01, "stage": "fit"})
        fake.fitted.set()
        if fake.gate_before_estimates:
            assert fake.gate.wait(60)
        self.progress(fake.estimates)
        fake.handed_over.set()

    def calibrate(self) -> None:
        """The first replicates, timed: nothing to do for the fake."""

    def finish(self):
        done = 0
        while not self.fake.gate.wait(0.05):
            done = min(done + 1, 9)
            self.progress({"method": "pca", "variant": "", "rank": None, "done": done, "total": 10, "seconds": 0.1, "stage": "bootstrap"})
        return self.fake.final


def gated_run(monkeypatch, gate_before_estimates: bool = False):
    import pages.runs

    fake = GatedAudit(gate_before_estimates)
    monkeypatch.setattr(pages.runs, "AuditRun", fake)
    registry = RunRegistry(ResultStore())
    run = registry.start("PCA", tiny(), 1, [("pca", AuditConfig(ranks=(1, 2), variants="vanilla", bootstrap=10))])
    assert (fake.fitted if gate_before_estimates else fake.handed_over).wait(60)
    return fake, registry, run


def test_the_point_estimates_show_while_the_intervals_run_then_the_full_result(monkeypatch):
    fake, registry, run = gated_run(monkeypatch)
    early, config = registry.estimates_for("pca", 1)
    assert early.uncertainty["pca"]["intervals_pending"] and config.bootstrap == 10
    assert early.data["name"] == "t.csv"  # bound to this session's data
    assert registry.newly_estimated() and not registry.newly_estimated()  # the page reruns once for them
    assert registry.latest(1) == {} and registry.estimates_for("pca", 2) is None  # not a result yet; other data: nothing
    fake.gate.set()
    assert run.wait(60) and run.state == "done"
    assert registry.estimates_for("pca", 1) is None and not run.estimates
    assert registry.latest(1)["pca"][0].records.equals(fake.final.records)


def test_provisional_verdicts_are_drawn_after_a_rest_as_long_as_the_page_run_and_not_just_before_the_end():
    from pages.runs import provisional_due

    assert provisional_due(10.0, 11.0, [30.0], now=12.0)  # rested 1 s after a 1 s run; 30 s to go
    assert not provisional_due(10.0, 11.0, [30.0], now=11.5)  # not rested yet
    assert not provisional_due(10.0, 11.0, [2.5], now=12.0)  # the final verdicts come within three page runs
    assert provisional_due(10.0, 11.0, [None, 0.5], now=12.0)  # one run's time is not measured yet
    assert provisional_due(0.0, 0.0, [], now=5.0)  # no page run yet


def test_a_page_waits_for_the_point_estimates_not_for_the_intervals(monkeypatch):
    fake, registry, run = gated_run(monkeypatch)  # the point estimates are in; the intervals wait for the gate
    started = time.monotonic()
    assert not run.wait(30, numbers=True) and time.monotonic() - started < 5
    fake.gate.set()
    assert run.wait(60)


def test_newer_provisional_verdicts_can_wait_for_the_page_to_rest_but_point_estimates_never(monkeypatch):
    fake, registry, run = gated_run(monkeypatch)
    assert registry.newly_estimated(provisional=False)  # the point estimates: shown at once
    run.shown["pca"] += 1  # newer provisional intervals arrived
    assert not registry.newly_estimated(provisional=False)  # the page has not rested: they wait …
    assert registry.newly_estimated() and not registry.newly_estimated()  # … and are shown once it has
    fake.gate.set()
    assert run.wait(60)


def test_cancelling_the_intervals_keeps_the_point_estimates_and_says_why(monkeypatch):
    fake, registry, run = gated_run(monkeypatch)
    run.cancel()
    assert run.wait(60) and run.state == "cancelled"
    job = run.jobs[0]
    assert job.state == "cancelled" and job.kept_estimates
    kept = registry.latest(1)["pca"][0]
    summary = kept.uncertainty["pca"]
    assert summary["replicates"] == 0 and "intervals_pending" not in summary
    assert summary["why"].startswith("the intervals were cancelled by the user after") and "bootstrap replicates" in summary["why"]
    assert kept.records.equals(fake.estimates["result"].records)
    assert run.store.get(run.data, job.config) is None  # not what the configuration asks for: never cached


def test_a_cancel_before_the_estimates_keeps_nothing(monkeypatch):
    fake, registry, run = gated_run(monkeypatch, gate_before_estimates=True)
    run.cancel()  # during the fits: the estimates that arrive after it are not kept
    fake.gate.set()
    assert run.wait(60) and run.state == "cancelled"
    assert not run.jobs[0].kept_estimates and registry.latest(1) == {} and not run.estimates


def test_a_run_of_several_families_shows_every_familys_numbers_before_any_intervals(monkeypatch):
    import pages.runs
    from fairaudit.audit import AuditRun

    calls = []

    class Spy(AuditRun):
        def estimate(self):
            calls.append(("numbers", self.config.methods[0]))
            super().estimate()

        def finish(self):
            calls.append(("intervals", self.config.methods[0]))
            return super().finish()

    monkeypatch.setattr(pages.runs, "AuditRun", Spy)
    registry = RunRegistry(ResultStore())
    config = {"ranks": (1, 2), "bootstrap": 10}
    run = registry.start("two", tiny(), 1, [("pca", AuditConfig(methods=("pca",), variants="vanilla", **config)),
                                            ("fs", AuditConfig(methods=("fs",), variants="lapscore", **config))])
    assert run.wait(120) and run.state == "done", run.errors
    assert calls == [("numbers", "pca"), ("numbers", "fs"), ("intervals", "pca"), ("intervals", "fs")]
    assert all(job.state == "done" and job.seconds > 0 for job in run.jobs)
    assert set(run.results) == {"pca", "fs"} and not run.estimates


def test_the_progress_line_names_the_stage_and_the_running_familys_place():
    from pages.common import run_status

    run = Run(label="Default audit of every family", data=None, data_token=1, store=ResultStore(),
              jobs=[Job("pca", AuditConfig(bootstrap=10)), Job("nmf", AuditConfig(bootstrap=10))])
    pca, nmf = run.jobs
    run.state, run.started = "running", 0.0
    pca.state, pca.replicates_total = "estimated", 10  # its numbers are in; NMF's fits run
    nmf.state = "running"
    assert "numbers of family 2 of 2 \\(NMF\\)" in run_status(run)[1]  # Markdown-escaped
    nmf.state, nmf.replicates_total = "estimated", 10
    pca.state = "running"  # the intervals, in the same order
    assert "intervals of family 1 of 2 \\(PCA\\)" in run_status(run)[1]


def test_a_pass_over_the_data_before_the_replicates_is_not_counted_as_fits():
    """The dask engine reports its pass over the partitions before its replicates
    (``stage="bootstrap_pass"``): the progress bar says so, and the job's fit and replicate counts
    stay as they were."""
    from pages.common import run_status
    from pages.runs import Job, Run

    run = Run(label="PCA", data=None, data_token=0, store=ResultStore(), jobs=[Job("pca", AuditConfig(methods=("pca",)))])
    job = run.jobs[0]
    run._job, run.state, job.state = job, "running", "running"
    run._progress({"method": "pca", "variant": "vanilla", "rank": 10, "done": 40, "total": 40, "seconds": 1.0, "stage": "fit"})
    run._progress({"method": "pca", "variant": "", "rank": None, "done": 12, "total": 40, "seconds": 2.0,
                   "stage": "bootstrap_pass", "unit": "partitions"})
    assert (job.done, job.total, job.replicates_done) == (40, 40, 0)
    text = run_status(run)[1]
    assert "PCA intervals" in text and "reading the data again, 12 of 40 partitions" in text
