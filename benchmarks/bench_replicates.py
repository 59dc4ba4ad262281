"""Verdicts in seconds (issue 23): whole commands, the replicates on one and two processes, the
announced time against the time taken, and a Dask cluster against this process.

    flock /tmp/fairaudit-heavy.lock .venv/bin/python benchmarks/bench_replicates.py \
        [--parts commands,parallel,announce,dask,dashboard] [--busy] [--repeat 1]

* ``commands`` — whole commands as a user types them (``python -m fairaudit audit … --json``,
  every family's default audit with its default intervals), wall seconds from start to exit: the
  default sample (600 × 10) per family (targets: PCA ≤ 3 s, feature selection ≤ 5 s, NMF ≤ 10 s,
  CP ≤ 10 s), every family on the 4,165 × 12 credit table (``bench_all_families``'s table; ≤ 60 s)
  and the PCA family of a 50 × 5,000 table (``bench_pca_wide``'s; ≤ 15 s). Each line also gives
  the time the audit announced (the JSON's ``expected_seconds``) against the time it took in its
  process (the JSON's ``seconds``; the command's imports come before the audit starts).
* ``parallel`` — each family's replicates on the default sample (and the credit table's NMF and
  CP), serially (``n_jobs=1``) and on two processes (``n_jobs=2``), alternated in this process
  after a warm-up (the workers started): the intervals' seconds and their ratio (target ≥ 1.7×),
  and whether the records are the same.
* ``announce`` — ``run_audit`` of every family on the default sample and on the credit table: the
  time announced (``AuditResult.expected_seconds``) against the time taken (target within ±35 %);
  ``--busy`` runs it with another process keeping one core busy, ``--workers-only`` with every
  replicate on a worker process as the dashboard's runs compute them.
* ``dashboard`` — each family's default audit of the default sample from its page in the
  dashboard (chromium): the seconds from the click on *Run audit* to the verdicts.
* ``dask`` — the default sample's feature-selection and NMF audits with their replicates on a
  ``distributed.LocalCluster`` (two worker processes, one thread each) against this process: the
  same records.

Every line says the load average (the cores are shared; timings move with it). Nothing here is
a timed test: the figures go in ``docs/architecture.md`` with their load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fairaudit.audit import FACT_METRICS, AuditConfig, run_audit
from fairaudit.samples import DEFAULT_SAMPLE, load_sample

try:
    from _common import REPO, shared
    from bench_all_families import CREDIT, credit_sample
except ImportError:  # run from elsewhere
    sys.path.insert(0, os.path.dirname(__file__))
    from _common import REPO, shared
    from bench_all_families import CREDIT, credit_sample

FAMILIES = ("pca", "fs", "nmf", "cpd")
TARGETS = {"pca": 3.0, "fs": 5.0, "nmf": 10.0, "cpd": 10.0}


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _spin(stop) -> None:  # pragma: no cover - the busy process
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def busy_core(on: bool):
    """Another process keeping one core busy while the block runs (``on``)."""
    if not on:
        yield
        return
    stop = multiprocessing.Event()
    process = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    process.start()
    try:
        yield
    finally:
        stop.set()
        process.join(5)


# ---------------------------------------------------------------------------- whole commands
def command(csv: Path, sensitive: str, extra: list[str]) -> tuple[float, dict]:
    """Wall seconds of one ``python -m fairaudit audit`` and its JSON report."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "r.json"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fairaudit", "audit", str(csv), "--sensitive", sensitive, "--quiet", "--json", str(out),
                        "--allow-slow", *extra], check=True, cwd=REPO)
        return time.perf_counter() - started, json.loads(out.read_text())


def _said(payload: dict, seconds: float) -> str:
    expected = payload.get("expected_seconds")
    if not expected:
        return "no time announced"
    taken = payload["seconds"]
    return (f"announced {expected:.1f} s for the {taken:.1f} s the audit took in its process, announced/taken "
            f"{expected / taken:.2f}{_within(expected, taken)}")


def _within(announced: float, taken: float) -> str:
    """Whether the announced time is within ±35 % of the time taken (issue 23's target)."""
    return " (within ±35 %)" if abs(announced - taken) <= 0.35 * taken else " (outside ±35 %)"


def part_commands(args) -> None:
    sample = REPO / "sample_data" / f"{DEFAULT_SAMPLE}.csv"
    for family in args.families:
        runs = [command(sample, "group", ["--label", "outcome", "--methods", family]) for _ in range(args.repeat)]
        seconds, payload = min(runs, key=lambda run: run[0])
        replicates = payload["uncertainty"][family].get("replicates")
        print(f"default sample, {family:<4} {seconds:6.2f} s (target ≤ {TARGETS[family]:g} s; {replicates} replicates; "
              f"{_said(payload, seconds)}; {load()})", flush=True)
    path = shared(CREDIT)
    if args.quick:
        pass
    elif path is None:
        print(f"skipped the credit table: ../shared/datasets/{CREDIT} is not there")
    else:
        with tempfile.TemporaryDirectory() as folder:
            table = Path(folder) / "credit_sex_4165x12.csv"
            credit_sample(path).to_csv(table, index=False)
            seconds, payload = command(table, "SEX", ["--methods", ",".join(FAMILIES)])
        counts = ", ".join(f"{m} {s.get('replicates')}" for m, s in payload["uncertainty"].items())
        print(f"credit 4,165 × 12, every family {seconds:6.1f} s (target ≤ 60 s; replicates {counts}; {_said(payload, seconds)}; "
              f"{load()})", flush=True)
    rng = np.random.default_rng(0)
    n, d = 50, 5000
    X = rng.normal(size=(n, 8)) @ rng.normal(size=(8, d)) + rng.normal(size=(n, d))
    with tempfile.TemporaryDirectory() as folder:
        wide = Path(folder) / "wide.csv"
        header = "g," + ",".join(f"x{j}" for j in range(d))
        wide.write_text(header + "\n" + "".join(("a" if i < 30 else "b") + "," + ",".join(f"{v:.6g}" for v in row) + "\n"
                                                 for i, row in enumerate(X)))
        seconds, payload = command(wide, "g", ["--methods", "pca"])
    print(f"wide 50 × 5,000, pca  {seconds:6.1f} s (target ≤ 15 s; {payload['uncertainty']['pca'].get('replicates')} replicates; "
          f"{_said(payload, seconds)}; {load()})", flush=True)


# ---------------------------------------------------------------------------- one and two processes
def _measured(result):
    records = result.records
    return records[~records.metric.isin(FACT_METRICS)].reset_index(drop=True)


def _cases(args, credit_families) -> list[tuple]:
    """``(name, data, families)``: the default sample per family, and the credit table (unless
    ``--quick`` or absent) with each of ``credit_families``."""
    cases = [("default sample", load_sample(DEFAULT_SAMPLE), family) for family in args.families]
    path = shared(CREDIT)
    if path is not None and not args.quick:
        from fairaudit import prepare, read_table

        text = credit_sample(path).to_csv(index=False, lineterminator="\n").encode()
        credit = prepare(read_table(text, name="credit_sex_4165x12.csv"), sensitive="SEX")
        cases += [("credit 4,165 × 12", credit, families) for families in credit_families]
    return cases


def part_parallel(args) -> None:
    cases = _cases(args, ("nmf", "cpd"))
    run_audit(load_sample(DEFAULT_SAMPLE), AuditConfig(ranks=(1,), variants="vanilla", bootstrap=10, n_jobs=2))  # the workers started
    for name, data, family in cases:
        config = AuditConfig(methods=(family,), bootstrap=args.bootstrap)
        seconds = {1: [], 2: []}
        found = {}
        for _ in range(args.repeat):
            for jobs in (1, 2):
                result = run_audit(data, AuditConfig(**{**vars(config), "n_jobs": jobs}))
                seconds[jobs].append(result.uncertainty[family]["seconds"])
                found[jobs] = _measured(result)
        one, two = min(seconds[1]), min(seconds[2])
        replicates = result.uncertainty[family]["replicates"]
        print(f"{name}, {family:<4} {replicates} replicates: one process {one:6.2f} s, two {two:6.2f} s — {one / two:.2f}× "
              f"(target ≥ 1.7×); records the same: {found[1].equals(found[2])}; {load()}", flush=True)


# ---------------------------------------------------------------------------- announced against taken
def part_announce(args) -> None:
    cases = _cases(args, (",".join(FAMILIES),))
    where = contextlib.nullcontext()
    if args.workers_only:  # as the dashboard's runs: every replicate on a worker (started first, as the dashboard does)
        from fairaudit.executors import jobs_on_workers, start_workers_for

        start_workers_for(",".join(FAMILIES), jobs=None, bootstrap=None, here=False)
        time.sleep(5)
        where = jobs_on_workers()
    with busy_core(args.busy), where:
        for name, data, families in cases:
            result = run_audit(data, AuditConfig(methods=tuple(families.split(","))))
            if result.expected_seconds is None:
                print(f"{name}, {families}: no replicates ran")
                continue
            print(f"{name}, {families}: announced {result.expected_seconds:.1f} s, taken {result.seconds:.1f} s — announced/taken "
                  f"{result.expected_seconds / result.seconds:.2f}{_within(result.expected_seconds, result.seconds)}"
                  f"{'; one core kept busy' if args.busy else ''}{'; replicates on workers only' if args.workers_only else ''}; "
                  f"{load()}", flush=True)


# ---------------------------------------------------------------------------- a Dask cluster
def part_dask(args) -> None:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("skipped dask: distributed is not installed")
        return
    data = load_sample(DEFAULT_SAMPLE)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        for family in ("fs", "nmf"):
            config = AuditConfig(methods=(family,), bootstrap=20)
            here = run_audit(data, AuditConfig(**{**vars(config), "n_jobs": 1}))
            there = run_audit(data, AuditConfig(**{**vars(config), "scheduler": client}))
            print(f"dask LocalCluster (2 workers × 1 thread), {family}: records the same as in this process: "
                  f"{_measured(here).equals(_measured(there))}; intervals {there.uncertainty[family]['seconds']:.1f} s there, "
                  f"{here.uncertainty[family]['seconds']:.1f} s here; {load()}", flush=True)


# ---------------------------------------------------------------------------- from the click
DASHBOARD_PAGES = {"pca": "PCA", "nmf": "NMF", "fs": "Feature selection", "cpd": "Tensor"}


_PAGE_STATE = """() => {
    const text = document.body.textContent.toLowerCase();
    const running = !!document.querySelector('[data-testid="stStatusWidget"]')
        || [...document.querySelectorAll('button')].some(b => b.textContent.trim() === 'Cancel');
    const shown = text.includes('deciding number') || text.includes('no verdict to show');
    return {running, final: shown && !text.includes('provisional') && !running};
}"""
"""The page's state, read inside the page in one call: a run in progress (its Cancel button, or
Streamlit still running the script) and the final verdicts shown (the verdict table or its “no
verdict” line, none provisional, no run in progress — not merely a moment between two page runs).
One pass over the page's text: Playwright's text locators, five per poll every 0.1 s, each walked the
page's 12,500 nodes in the browser and took more of the renderer's CPU than the page did (1.1 s of
DevTools commands and about 1 s of selector matching in a 9 s PCA run)."""


def _running(page) -> bool:
    """Whether a run is in progress on the page (:data:`_PAGE_STATE`)."""
    return page.evaluate(_PAGE_STATE)["running"]


def _wait_for_verdicts(page, timeout: float) -> None:
    """Until the page shows its final verdicts (:data:`_PAGE_STATE`), checked in the page every 0.1 s."""
    page.wait_for_function(f"() => ({_PAGE_STATE})().final", polling=100, timeout=timeout * 1000)


def _cpu_by_process() -> dict[str, float]:
    """CPU seconds so far of the dashboard's processes, by kind (the browser's by Chromium process
    type, the server, the replicates' workers); psutil comes with the dask extra of the dev install."""
    import psutil

    found: dict[str, float] = {}
    for process in psutil.process_iter(["cmdline", "cpu_times"]):
        command, times = " ".join(process.info["cmdline"] or ()), process.info["cpu_times"]
        if times is None:  # gone, or not ours to read
            continue
        if "chromium" in command:
            kind = "browser " + (command.split("--type=")[1].split()[0] if "--type=" in command else "main")
        elif "loky" in command:
            kind = "workers"
        elif "streamlit" in command:
            kind = "server"
        else:
            continue
        found[kind] = found.get(kind, 0.0) + times.user + times.system
    return found


def part_dashboard(args) -> None:
    """Each family's default audit of the default sample from its page, the way a user gets it: the
    dashboard started as ``make app`` starts it, Debian's chromium, one session. A family page opened
    on data it has not audited starts the default audit itself (else its *Run audit* button is
    clicked); printed: the seconds from the click that started the run until the page shows its
    verdict table (no run in progress, no verdict provisional). The user reads the Data page for 5 s first
    (the dashboard starts the replicates' workers meanwhile: ``pages.common.warm_workers``)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("skipped the dashboard: playwright is not installed (make install-dev)")
        return
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from screenshots import _free_port, _goto  # the dashboard opened as the screenshots open it
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(900_000)
            _goto(page, port)
            time.sleep(5)  # a user reads the Data page
            for family in args.families:
                page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=DASHBOARD_PAGES[family], exact=True).click()
                started, before = time.perf_counter(), _cpu_by_process()
                page.get_by_role("button", name="Run audit").wait_for(state="attached")
                time.sleep(1.0)
                if not _running(page):  # the page did not start the default audit: the user clicks
                    page.get_by_role("button", name="Run audit").click()
                    started, before = time.perf_counter(), _cpu_by_process()
                    time.sleep(1.0)
                _wait_for_verdicts(page, 900)
                seconds = time.perf_counter() - started
                after = _cpu_by_process()
                used = ", ".join(f"{kind} {after[kind] - before.get(kind, 0.0):.1f}" for kind in sorted(after)
                                 if after[kind] - before.get(kind, 0.0) >= 0.05)
                print(f"dashboard, {family:<4} {seconds:6.2f} s from the click to the verdicts (target ≤ {TARGETS[family]:g} s; "
                      f"CPU seconds meanwhile: {used or 'not measured'}; {load()})", flush=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


PARTS = {"commands": part_commands, "parallel": part_parallel, "announce": part_announce, "dask": part_dask,
         "dashboard": part_dashboard}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement (the fastest is reported)")
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates for the parallel part (default: each family's)")
    parser.add_argument("--busy", action="store_true", help="announce: another process keeps one core busy")
    parser.add_argument("--workers-only", action="store_true",
                        help="announce: every replicate on a worker process, none here (as the dashboard's runs)")
    parser.add_argument("--quick", action="store_true", help="not the credit table (the default sample, and the wide table's command)")
    args = parser.parse_args(argv)
    args.families = [f for f in args.families.split(",") if f]
    if os.environ.get("FAIRAUDIT_DEFAULT_BOOTSTRAP"):
        print("note: FAIRAUDIT_DEFAULT_BOOTSTRAP is set, so the default replicates are capped", file=sys.stderr)
    print(f"{os.cpu_count()} cores; {load()}", flush=True)
    for part in args.parts.split(","):
        PARTS[part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
