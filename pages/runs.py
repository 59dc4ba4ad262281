"""Runs belong to the session, not to the page.

A :class:`Run` is one audit the user asked for (one family, or several one after the other). It
executes in a background thread, so it goes on while the user looks at another page; every page
shows its progress (the sidebar panel in ``app.py``), its results land in the session's
:class:`RunRegistry` under the family they belong to (the family page and the Report page read
them from there), and the user can cancel it. Cancelling raises
:class:`fairaudit.audit.AuditCancelled` from the progress callback at the next fit (contract 4).

No streamlit here: the registry is plain Python, kept in ``st.session_state`` by the pages, and
tested on its own. The numeric cache (:class:`ResultStore`) is shared by every session; what
identifies a user's data (file name, hash, preprocessing notes) is bound to a result only when it
is handed to a session (:func:`bind`), so no session ever sees another's names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fairaudit import FairAuditError
from fairaudit.audit import AuditCancelled, AuditConfig, AuditResult, AuditRun, without_intervals
from fairaudit.executors import jobs_on_workers

log = logging.getLogger("fairaudit.app")

EXECUTION_LOCK = threading.Lock()
"""One audit at a time in the server process: the machine's cores are better spent on one audit
than shared by two, and Python 3.11's warning filters (which the audits use to collect their
notes) are process-wide, not per thread."""

# ---------------------------------------------------------------- the shared numeric cache
class ResultStore:
    """Audit results by (numeric data key, configuration), least recently used first out.

    Shared by all sessions: the key holds no file name or hash, only what determines the numbers
    (:meth:`fairaudit.data.AuditData.cache_key` and the configuration)."""

    def __init__(self, size: int = 32):
        self.size = size
        self._items: OrderedDict[str, AuditResult] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(data, config: AuditConfig) -> str:
        """The numbers' identity, plus the rows' line numbers in their file: a family's notes may
        name lines (e.g. NMF's all-zero rows), which must be this file's, not another session's."""
        lines = getattr(data, "lines", None)
        where = "" if lines is None else hashlib.sha256(np.ascontiguousarray(lines).tobytes()).hexdigest()[:16]
        return f"{data.cache_key()}:{where}:" + json.dumps(config.to_dict(), sort_keys=True, default=str)

    def get(self, data, config: AuditConfig) -> AuditResult | None:
        key = self.key(data, config)
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, data, config: AuditConfig, result: AuditResult) -> None:
        with self._lock:
            self._items[self.key(data, config)] = result
            while len(self._items) > self.size:
                self._items.popitem(last=False)


def bind(result: AuditResult, data) -> AuditResult:
    """``result`` as this session's: its data fingerprint (name, sha256, notes) is ``data``'s."""
    return dataclasses.replace(result, data=data.fingerprint())


# ---------------------------------------------------------------- runs
@dataclass
class Job:
    """One family's audit inside a run."""

    method: str
    config: AuditConfig
    done: int = 0
    total: int = 0
    started: float | None = None
    seconds: float | None = None
    """Seconds the job has run, over its finished stages (None before the first; a run does every
    family's fits before any family's intervals, so a job's stages are apart)."""
    state: str = "waiting"  # waiting, running, estimated (numbers in, intervals to come), done, failed, cancelled, cached
    replicates_done: int = 0
    replicates_total: int = 0
    """The bootstrap replicates of the family's intervals (``stage="bootstrap"`` progress), after its fits."""
    kept_estimates: bool = False
    """The job stopped during its intervals (cancelled, or an error) and kept its point estimates
    as the family's result (:meth:`Run._keep_estimates`)."""
    left: float | None = None
    """Seconds the job had left when :attr:`left_at` (``time.monotonic``), as the audit measures its
    own pace (its fits by the fits done so far, its intervals by the replicates timed on this
    machine); ``None`` until it is measured."""
    left_at: float = 0.0
    work: Callable[[Callable[[dict], None]], object] | None = field(default=None, repr=False)
    """Work other than the family's audit (refitting one model for download, auditing the user's
    own representation — the Models page): called with the run's progress callback; what it
    returns goes to ``Run.outputs[method]``, never to the family's results nor the shared cache."""

    @property
    def audits(self) -> bool:
        """Whether this job is the family's audit (its result is the family's latest)."""
        return self.work is None

    def share(self, now: float | None = None) -> float:
        """How much of the job is done, by time: what it has run against what it has run and has
        left (fits and replicates alike, as the audit measures them); by counts while the time
        left is not measured yet."""
        if self.state in ("done", "cached", "failed"):
            return 1.0
        if self.state not in ("running", "estimated"):
            return 0.0
        now = now or time.monotonic()
        spent, left = self.elapsed(now), self.left_now(now)
        if left is not None and spent + left > 0:
            return spent / (spent + left)
        if self.replicates_total:
            return self.replicates_done / self.replicates_total
        return self.done / self.total if self.total else 0.0

    def left_now(self, now: float) -> float | None:
        """:attr:`left` less the time the job has run since it was measured; ``None`` again once
        that has run out while the job goes on (the machine got slower than when it was measured:
        the next progress event measures it anew)."""
        if self.left is None:
            return None
        if self.state != "running":
            return self.left
        left = self.left - (now - self.left_at)
        if left > 0 or self.left == 0:
            return max(left, 0.0)
        return None

    def elapsed(self, now: float) -> float:
        """Seconds the job has run by ``now``: its finished stages and the current one."""
        return (self.seconds or 0.0) + (now - self.started if self.state == "running" and self.started is not None else 0.0)

    def counted(self) -> str:
        """Where the job is: “12 of 40 fits” or “7 of 100 bootstrap replicates” (empty before its first fit)."""
        if self.replicates_total:
            return f"{self.replicates_done} of {self.replicates_total} bootstrap replicates"
        return f"{self.done} of {self.total} fits" if self.total else ""


_ids = itertools.count(1)


@dataclass
class Run:
    """An audit the user started: one or more families, executed one after the other."""

    label: str
    data: object
    data_token: int
    jobs: list[Job]
    store: ResultStore
    id: int = field(default_factory=lambda: next(_ids))
    state: str = "queued"  # queued, running, done, cancelled, failed
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    finished: float | None = None
    last_event: dict = field(default_factory=dict)
    results: dict[str, AuditResult] = field(default_factory=dict)
    outputs: dict[str, object] = field(default_factory=dict)
    """What each job with its own ``work`` returned, by method."""
    errors: list[tuple[str, str]] = field(default_factory=list)
    """``(method, message in the dashboard's words)`` for each family that failed."""
    estimates: dict[str, AuditResult] = field(default_factory=dict)
    """Per family whose intervals are being computed, the result of its point estimates
    (``stage="estimates"`` progress), then of its provisional intervals (``stage="bootstrap"``
    progress with a result): the family page shows it until the full result lands in
    :attr:`results`."""
    shown: dict[str, int] = field(default_factory=dict)
    """How many results per family :attr:`estimates` has held (the pages rerun for each new one)."""
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    # -- state --------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")

    @property
    def methods(self) -> tuple[str, ...]:
        """The families whose audit this run produces (not those it only does other work for)."""
        return tuple(job.method for job in self.jobs if job.audits)

    def cancel(self) -> None:
        """Ask the run to stop: it does at its next progress report (after the current fit)."""
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or now or time.monotonic()) - self.started

    def fraction(self, now: float | None = None) -> float:
        """Overall share done: by time once every unfinished job's time left is measured, else the
        jobs' own shares, each family counting alike."""
        now = now or time.monotonic()
        left = self.seconds_left(now)
        if left is not None:
            spent = sum(job.elapsed(now) for job in self.jobs)
            return spent / (spent + left) if spent + left > 0 else 1.0
        return sum(job.share(now) for job in self.jobs) / len(self.jobs)

    def seconds_left(self, now: float | None = None) -> float | None:
        """The time left, once every unfinished job's is measured (the audit's own measurements:
        the fits by their pace, the intervals from their first replicates); ``None`` before."""
        now = now or time.monotonic()
        left = 0.0
        for job in self.jobs:
            if job.state in ("done", "cached", "failed", "cancelled"):
                continue
            found = job.left_now(now)
            if found is None:
                return None
            left += found
        return left

    # -- execution ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._execute, name=f"fairaudit-run-{self.id}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None, *, numbers: bool = False) -> bool:
        """Wait up to ``timeout`` seconds for the run to end (``numbers``: or for a family's point
        estimates, which the page can show while the intervals run); True if it has ended."""
        if self._thread is None:
            return not self.active
        if not numbers or timeout is None:
            self._thread.join(timeout)
            return not self.active
        deadline = time.monotonic() + timeout
        while self._thread.is_alive() and not self.estimates and time.monotonic() < deadline:
            self._thread.join(min(0.05, max(deadline - time.monotonic(), 0.0)))
        return not self.active

    def _progress(self, event: dict) -> None:
        job = self._job
        stage = event.get("stage")
        if stage in ("estimates", "bootstrap") and event.get("result") is not None:  # the numbers; then provisional intervals
            if job.audits and not self._cancel.is_set():
                self.estimates[job.method] = bind(event["result"], self.data)
                self.shown[job.method] = self.shown.get(job.method, 0) + 1
        if stage == "estimates":  # the numbers are in; the intervals' replicates follow, their time not measured yet
            job.replicates_done, job.replicates_total = 0, int(event.get("total", 0))
            job.left = None
        elif stage == "announce":  # the replicates' pace is measured: this family's intervals' time
            found = (event.get("families") or {}).get(job.method)
            if found is not None:
                self._measured(job, float(found["expected_seconds"]) - float(found.get("spent", 0.0)))
        elif stage == "bootstrap":
            job.replicates_done, job.replicates_total = int(event.get("done", 0)), int(event.get("total", 0))
            self._measured(job, event.get("seconds_left"))
        elif stage == "bootstrap_pass":  # the dask engine's pass before its replicates: not a fit
            pass
        else:
            job.done, job.total = int(event.get("done", job.done)), int(event.get("total", job.total))
            self._measured(job, event.get("seconds_left"))
        if stage not in ("estimates", "announce"):
            self.last_event = {key: value for key, value in event.items() if key != "result"}
        if self._cancel.is_set():
            raise AuditCancelled(f"cancelled by the user after {job.counted()}")

    @staticmethod
    def _measured(job: Job, left) -> None:
        if left is not None:
            job.left, job.left_at = max(float(left), 0.0), time.monotonic()

    def _execute(self) -> None:
        """Every family's numbers first, then every family's intervals (:class:`AuditRun`'s two
        stages): the pages show each family's point estimates as soon as they are measured, not
        after the families before it have computed their intervals."""
        with EXECUTION_LOCK, jobs_on_workers():  # the server draws pages meanwhile: it computes no replicate
            self.state = "running"
            self.started = time.monotonic()
            try:
                staged: list[tuple[Job, AuditRun]] = []
                for job in self.jobs:
                    if self._cancel.is_set():
                        job.state = "cancelled"
                        continue
                    audit = self._stage(job, self._estimate, job)
                    if audit is not None and audit.intervals_pending:
                        job.state = "estimated"
                        staged.append((job, audit))
                    elif audit is not None:
                        self._stage(job, self._finish, job, audit)
                for job, audit in staged:  # each family's first replicates timed: every family's time left is then known
                    if not self._cancel.is_set():
                        self._stage(job, self._calibrate, job, audit)
                for job, audit in staged:
                    if job.state != "estimated":  # failed or cancelled while its first replicates were timed
                        continue
                    if self._cancel.is_set():
                        job.state = "cancelled"
                        self._keep_estimates(job, "the intervals were cancelled by the user before they started")
                        continue
                    self._stage(job, self._finish, job, audit)
            finally:
                self.finished = time.monotonic()
                if self._cancel.is_set():
                    self.state = "cancelled"
                elif self.errors and not self.results:
                    self.state = "failed"
                else:
                    self.state = "done"

    def _stage(self, job: Job, work, *args):
        """Run one stage of ``job`` (its fits, or its intervals), its time added to the job's: a
        failure or a cancel ends the job, in the dashboard's words, keeping any point estimates."""
        self._job = job
        job.state, job.started = "running", time.monotonic()
        try:
            return work(*args)
        except AuditCancelled:
            job.state = "cancelled"
            self._keep_estimates(job, f"the intervals were cancelled by the user after {job.counted()}")
        except FairAuditError as exc:
            job.state = "failed"
            self.errors.append((job.method, exc.render("dashboard")))
            self._keep_estimates(job, "the intervals stopped on an error (above)")
        except Exception:  # a bug: the page gets a readable line, the server log the traceback
            log.exception("audit %s of run %s failed", job.method, self.id)
            job.state = "failed"
            self.errors.append((job.method, "the audit stopped on an unexpected error (a bug in fairaudit); "
                                "the server's log has the details."))
            self._keep_estimates(job, "the intervals stopped on an unexpected error (above)")
        finally:
            job.seconds = (job.seconds or 0.0) + time.monotonic() - job.started
        return None

    def _estimate(self, job: Job) -> AuditRun | None:
        """A job's first stage: its result from the shared cache, its own work (``Job.work``), or
        the family's fits and point estimates (an :class:`AuditRun` to finish)."""
        cached = self.store.get(self.data, job.config) if job.audits else None
        if cached is not None:
            job.state = "cached"
            self.results[job.method] = bind(cached, self.data)
            return None
        if job.work is not None:
            self.outputs[job.method] = job.work(self._progress)
            job.state = "done"
            return None
        audit = AuditRun(self.data, job.config, progress=self._progress)
        audit.estimate()
        return audit

    def _calibrate(self, job: Job, audit: AuditRun) -> None:
        """The first of a job's replicates, timed (:meth:`AuditRun.calibrate`): its time left is then
        measured; the rest runs in :meth:`_finish`."""
        audit.calibrate()
        job.state = "estimated"

    def _finish(self, job: Job, audit: AuditRun) -> None:
        """A job's second stage: the family's intervals, then its result (cached for everyone)."""
        result = audit.finish()
        self.store.put(self.data, job.config, result)
        self.results[job.method] = bind(result, self.data)
        self.estimates.pop(job.method, None)
        job.state = "done"

    def _keep_estimates(self, job: Job, why: str) -> None:
        """A family stopped during its intervals keeps its point estimates as its result (the
        user's run is never thrown away), saying why it has no intervals; never cached, since
        they are not what its configuration asks for."""
        found = self.estimates.pop(job.method, None)
        if found is None:
            return
        self.results[job.method] = without_intervals(found, job.method, why)
        job.kept_estimates = True


PROVISIONAL_HORIZON = 3
"""Newer provisional verdicts are redrawn only while the final ones are more than this many page
runs away: the PCA page's run took 1.8 s with the replicates going, and redrawn at 45 of 100
replicates it showed verdicts that were final 3 s later, while its drawing held one of the two
cores the replicates' workers needed."""


def provisional_due(started: float, ended: float, left: Sequence[float | None], now: float) -> bool:
    """Whether newer provisional verdicts are worth a full page run now: the page's last full run
    went from ``started`` to ``ended``, the active runs have ``left`` seconds to go (``None``: not
    measured yet). Yes once the page has rested as long as that run took, unless every run ends
    within :data:`PROVISIONAL_HORIZON` page runs (then the final verdicts come first)."""
    took = ended - started
    soon = bool(left) and all(seconds is not None and seconds <= PROVISIONAL_HORIZON * took for seconds in left)
    return now - ended >= took and not soon


# ---------------------------------------------------------------- the session's registry
class RunRegistry:
    """A session's runs and the latest result per family on the data in use."""

    def __init__(self, store: ResultStore):
        self.store = store
        self.runs: list[Run] = []
        self._seen: set[int] = set()
        self._estimated: set[tuple[int, str]] = set()

    def start(self, label: str, data, data_token: int, configs: Sequence[tuple[str, AuditConfig]]) -> Run:
        return self._start(Run(label=label, data=data, data_token=data_token, jobs=[Job(m, c) for m, c in configs], store=self.store))

    def start_work(self, label: str, data, data_token: int, method: str, config: AuditConfig, work) -> Run:
        """A run of one job that is not the family's audit (:attr:`Job.work`): progress, cancel and
        errors as any run; its output lands in ``Run.outputs[method]``."""
        job = Job(method, config, work=work)
        return self._start(Run(label=label, data=data, data_token=data_token, jobs=[job], store=self.store))

    def _start(self, run: Run) -> Run:
        self.runs.append(run)
        run.start()
        return run

    def active(self) -> list[Run]:
        return [run for run in self.runs if run.active]

    def running_for(self, method: str, data_token: int) -> Run | None:
        """The active run that will produce ``method``'s result on this data, if any."""
        for run in reversed(self.runs):
            if run.active and run.data_token == data_token and method in run.methods:
                return run
        return None

    def latest(self, data_token: int) -> dict[str, tuple[AuditResult, AuditConfig]]:
        """Per family, the newest result on the data ``data_token`` (with its configuration)."""
        found: dict[str, tuple[AuditResult, AuditConfig]] = {}
        for run in self.runs:  # oldest first: newer runs overwrite
            if run.data_token != data_token:
                continue
            for job in run.jobs:
                if job.method in run.results:
                    found[job.method] = (run.results[job.method], job.config)
        return found

    def estimates_for(self, method: str, data_token: int) -> tuple[AuditResult, AuditConfig] | None:
        """The point estimates of ``method`` (with their configuration) from the active run on
        this data whose intervals are being computed, if any (:attr:`Run.estimates`)."""
        run = self.running_for(method, data_token)
        found = None if run is None else run.estimates.get(method)
        if found is None:
            return None
        return found, next(job.config for job in run.jobs if job.method == method)

    def newly_estimated(self, *, provisional: bool = True) -> bool:
        """Whether any active run's point estimates (or newer provisional intervals) arrived since
        the last call (the pages rerun to show them). ``provisional=False``: only point estimates
        count; newer provisional intervals wait for a later call."""
        found = {(run.id, method, run.shown.get(method, 0)) for run in self.active() for method in run.estimates
                 if provisional or run.shown.get(method, 0) == 1}
        new = bool(found - self._estimated)
        self._estimated |= found
        return new

    def newly_ended(self) -> list[Run]:
        """Runs that ended since the last call (each reported once): the pages rerun to show them."""
        ended = [run for run in self.runs if not run.active and run.id not in self._seen]
        self._seen.update(run.id for run in ended)
        return ended

    def forget_ended(self, data_token: int) -> None:
        """Drop ended runs nobody can see any more: those on earlier data (the session moved on)
        and those on this data whose every family has a newer run."""
        keep: list[Run] = []
        newer: set[str] = set()
        for run in reversed(self.runs):
            if run.active:
                keep.append(run)
            elif run.data_token == data_token and not set(run.methods) <= newer:
                keep.append(run)
            if run.data_token == data_token:
                newer.update(run.methods)
        self.runs = keep[::-1]
