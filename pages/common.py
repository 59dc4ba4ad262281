"""Streamlit pieces shared by the pages: session state, the session's runs, result rendering.

Views only: every number comes from :mod:`fairaudit` (records, figures, findings). Everything a
user supplied (file, column and group names, values inside messages) goes through :func:`plain`
before any Markdown-rendering call, widget labels included.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import (
    HELDOUT_PREFIX,
    AuditConfig,
    AuditResult,
    default_variants,
    erased_variant,
    family_run,
    no_interval_warning,
)
from fairaudit.executors import start_workers_for, usable_cores
from fairaudit.families import FAMILIES, FAMILY_TITLES
from fairaudit.findings import VERDICT_LABELS, Finding, findings
from fairaudit.formatting import duration, level, plural
from fairaudit.metrics import METRIC_DEFINITIONS
from fairaudit.plots import (
    FAMILY_FIGURES,
    TABLE_ARROWS_NOTE,
    better_text,
    family_figures,
    group_sizes_figure,
    metric_label,
    metric_line,
    negative_loss_note,
    table_title,
    variant_title,
)
from fairaudit.report import details_rows_by_ranks, summary_table, summary_text, table_notes
from fairaudit.samples import DEFAULT_SAMPLE, SAMPLES, load_sample
from fairaudit.summary import audit_summary, key_figure, question, verdict_rows
from fairaudit.uncertainty import HOLDOUT_RANGE, HOLDOUT_SUGGESTED, default_replicates
from fairaudit.verdicts import MIN_JUDGED_ROWS
from fairaudit.vocabulary import render
from pages.runs import ResultStore, Run, RunRegistry, provisional_due

log = logging.getLogger("fairaudit.app")

QUICK_WAIT_SECONDS = 2.0
"""A page waits this long for a run it just started (or for its first point estimates) before it
draws a progress bar instead: quick audits (and results from the cache) appear at once."""

PROGRESS_REFRESH_SECONDS = 0.7


# ---------------------------------------------------------------- messages
_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:&")


def sentence(text: str) -> str:
    """A library note (lower case, for joining) as a sentence of its own."""
    return text[:1].upper() + text[1:]


def plain(text) -> str:
    """``text`` with every Markdown (and HTML-in-Markdown) special character escaped, so user
    values render as the characters they are in any ``st.markdown``/``st.error``/``st.info`` and
    in widget labels (which render Markdown, images included)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in str(text)).replace("\n", " ")


def words(text) -> str:
    """A library message or note (which may name options) worded for the dashboard and escaped."""
    return plain(render(str(text), "dashboard"))


def show_error(exc: FairAuditError) -> None:
    """A bad-input error in the dashboard's words (widget names, not flags), escaped."""
    st.error(plain(exc.render("dashboard")))


def show_bug(exc: BaseException, where: str) -> None:
    """An unexpected error: a readable line on the page, the traceback in the server's log only."""
    log.error("unexpected error on %s", where, exc_info=exc)
    st.error(
        f"Something went wrong on the {where} page (a bug in fairaudit, not your data's fault). "
        "The details are in the server's log; the other pages keep working."
    )


# ---------------------------------------------------------------- session data
def init_state() -> None:
    """First visit: the default sample, prepared, so every page has data at once."""
    if "data" not in st.session_state:
        sample = SAMPLES[DEFAULT_SAMPLE]
        set_data(load_sample(DEFAULT_SAMPLE), {"kind": "sample", "name": DEFAULT_SAMPLE, "title": sample.title})


def set_data(data, source: dict) -> None:
    """Make ``data`` the session's data in use; results of earlier data stay with their data."""
    st.session_state["data"] = data
    st.session_state["source"] = source
    st.session_state["data-token"] = st.session_state.get("data-token", 0) + 1


def current_data():
    init_state()
    return st.session_state["data"]


def data_token() -> int:
    """Identifies the data in use within this session (a new one each time data is chosen)."""
    init_state()
    return st.session_state["data-token"]


def data_summary(data) -> str:
    """One Markdown line naming the data in use (escaped)."""
    groups = ", ".join(f"{plain(label)} ({n:,})" for label, n in data.group_sizes().items())
    return (
        f"**{plain(data.source.get('name', 'data'))}** — {data.n_rows:,} rows × {data.n_features:,} features; "
        f"groups: {groups}"
    )


# ---------------------------------------------------------------- uploads that stay
def kept_upload(label: str, key: str, types: list[str], **options) -> tuple[str, bytes] | None:
    """A file uploader whose file stays with the session when the user opens another page and
    comes back (Streamlit forgets a widget's value while its page is not shown): ``(name, bytes)``
    of the latest upload, or None. Removing the file in the widget forgets it. The bytes are taken
    once per upload (not copied again on every rerun); :func:`kept_upload_id` tells uploads apart."""
    kept: dict = st.session_state.setdefault("kept-uploads", {})
    ids: dict = st.session_state.setdefault("kept-upload-ids", {})

    def changed() -> None:  # the user's own change: a new file, or the file removed
        value = st.session_state.get(key)
        if value is None:
            kept.pop(key, None)
            ids.pop(key, None)
        else:
            kept[key] = (value.name, value.getvalue())
            ids[key] = value.file_id

    upload = st.file_uploader(label, type=types, key=key, on_change=changed, **options)
    if upload is not None:
        if ids.get(key) != upload.file_id or key not in kept:
            kept[key] = (upload.name, upload.getvalue())
            ids[key] = upload.file_id
    elif key in kept:
        name, _ = kept[key]
        note, forget = st.columns([4, 1.4], vertical_alignment="center")
        note.caption(f"Using **{plain(name)}**, uploaded earlier in this session; upload another file to replace it.")
        if forget.button("Forget", key=f"{key}-forget", help="Forget this file (as removing it from the upload box would)"):
            kept.pop(key, None)
            ids.pop(key, None)
            st.rerun()
    return kept.get(key)


def kept_upload_id(key: str) -> str | None:
    """Identifies the file :func:`kept_upload` keeps under ``key`` (a new id for every upload)."""
    return st.session_state.get("kept-upload-ids", {}).get(key)


# ---------------------------------------------------------------- runs
@st.cache_resource(show_spinner=False)
def result_store() -> ResultStore:
    """The numeric results shared by all sessions (no names inside their keys; see pages.runs)."""
    return ResultStore(size=32)


def warm_workers() -> None:
    """The bootstrap replicates' worker processes — one per usable core: the server computes none
    of the replicates (:mod:`pages.runs`) —, started while the user reads a page (and kept while
    users interact; idle ones stop after :data:`fairaudit.executors.WORKER_IDLE_SECONDS`), so that
    Run audit finds them ready rather than waiting 1–3 s for their imports. None when the default
    intervals are off (``FAIRAUDIT_DEFAULT_BOOTSTRAP=0``, as in the test suite)."""
    if any(default_replicates(method)[0] for method in FAMILIES):
        start_workers_for(",".join(FAMILIES), jobs=None, bootstrap=None, here=False)


def registry() -> RunRegistry:
    """This session's runs."""
    if "runs" not in st.session_state:
        st.session_state["runs"] = RunRegistry(result_store())
    return st.session_state["runs"]


def start_run(label: str, configs: list[tuple[str, AuditConfig]]) -> Run:
    """Start an audit that belongs to the session; wait briefly so quick ones show at once."""
    run = registry().start(label, current_data(), data_token(), configs)
    run.wait(QUICK_WAIT_SECONDS, numbers=True)
    return run


def start_work(label: str, method: str, config: AuditConfig, work) -> Run:
    """Start work of the Models page (a refit, an audit of the user's own representation) as a
    session run — progress in the sidebar, cancel, survives page changes — and wait briefly."""
    run = registry().start_work(label, current_data(), data_token(), method, config, work)
    run.wait(QUICK_WAIT_SECONDS)
    return run


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def run_status(run: Run) -> tuple[float, str]:
    """(fraction done, one line of text) for a run's progress bar."""
    if run.state == "queued":
        return 0.0, f"{run.label}: waiting for another audit on this server to finish…"
    event = run.last_event
    parts = [run.label]
    if len(run.jobs) > 1:  # every family's numbers, then every family's intervals: the running one's place in the run
        current = next((i for i, j in enumerate(run.jobs) if j.state == "running"), None)
        if current is not None:
            job = run.jobs[current]
            stage = "intervals" if job.replicates_total else "numbers"
            parts.append(f"{stage} of family {current + 1} of {len(run.jobs)} ({FAMILY_TITLES.get(job.method, job.method)})")
    if event:
        job = next((j for j in run.jobs if j.method == event.get("method")), None)
        stage = event.get("stage")
        if stage == "bootstrap":  # the intervals: replicates of every fit, after the fits
            doing = f"{FAMILY_TITLES.get(event['method'], event['method'])} intervals"
        elif stage == "bootstrap_pass":  # data read partition by partition: one more pass before the replicates
            doing = (f"{FAMILY_TITLES.get(event['method'], event['method'])} intervals: reading the data again, "
                     f"{event.get('done', 0)} of {event.get('total', 0)} {event.get('unit', 'partitions')}")
        else:
            doing = f"{variant_title(event['method'], str(event.get('variant', '')))} at rank {event.get('rank')}"
            if stage and stage != "fit":
                doing += f" ({stage})"
        if job is not None and job.counted():
            doing += f", {job.counted()}"
        parts.append(doing)
    parts.append(f"{_clock(run.elapsed())} elapsed")
    left = run.seconds_left()
    if left is not None and run.state == "running":
        parts.append(f"about {_clock(left)} left")
    if run.cancel_requested:
        parts.append("cancelling after the current fit…")
    return run.fraction(), " · ".join(plain(p) for p in parts)


def _draw_runs(runs: list[Run], where: str) -> None:
    for run in runs:
        fraction, text = run_status(run)
        st.progress(min(max(fraction, 0.0), 1.0), text=text)
        if not run.cancel_requested and st.button("Cancel", key=f"cancel-{where}-{run.id}", help="Stop after the current fit"):
            run.cancel()
            st.rerun(scope="fragment")


def runs_panel(where: str, method: str | None = None, runs: Sequence[Run] | None = None) -> None:
    """Live progress of the session's active runs (of ``method`` only, or only ``runs``, if
    given), refreshed while any runs; when one ends the whole page reruns so its results appear
    wherever they belong."""
    reg = registry()

    def active() -> list[Run]:
        chosen = reg.active() if runs is None else [r for r in runs if r.active]
        return [r for r in chosen if method in r.methods] if method else chosen

    if not active():
        return

    @st.fragment(run_every=PROGRESS_REFRESH_SECONDS)
    def panel():
        # new results, a family's point estimates, or newer provisional verdicts once the page has rested
        if reg.newly_ended() or reg.newly_estimated(provisional=page_rested(active())):
            st.rerun()
        _draw_runs(active(), where)

    panel()


PAGE_RUN_KEY = "page-run-times"


@contextlib.contextmanager
def timed_page_run():
    """Time this full page run (``app.py`` runs every page in it): :func:`page_rested` paces the
    reruns that show newer provisional verdicts by it."""
    started = time.monotonic()
    try:
        yield
    finally:
        st.session_state[PAGE_RUN_KEY] = (started, time.monotonic())


def page_rested(runs: Sequence[Run] = ()) -> bool:
    """Whether the page has rested since its last full run for as long as that run took, and
    ``runs`` have longer than that still to go. Newer provisional verdicts wait for it, so that
    drawing them takes at most half of the server's time and none just before the final verdicts:
    a page showing a family's result takes about a second of Python to draw (its charts), and
    redrawn for every provisional update it held a core the replicates' workers needed (measured
    on the PCA page: four full runs back to back during a 7 s run)."""
    started, ended = st.session_state.get(PAGE_RUN_KEY, (0.0, 0.0))
    return provisional_due(started, ended, [run.seconds_left() for run in runs], time.monotonic())


def settle_runs() -> None:
    """Called at the top of every full page run: runs that ended are shown by this run."""
    reg = registry()
    reg.newly_ended()
    reg.forget_ended(data_token())


def show_run_messages(method: str) -> None:
    """Errors and cancellations of the latest run of ``method`` on this data."""
    token = data_token()
    for run in reversed(registry().runs):
        if run.data_token != token or method not in run.methods or run.active:
            continue
        for failed, message in run.errors:
            if failed == method:
                st.error(plain(message))
        job = next(j for j in run.jobs if j.method == method)
        title = FAMILY_TITLES.get(method, method)
        if job.state == "cancelled" and job.kept_estimates:
            st.warning(f"{title}: the last run's intervals were cancelled after {job.counted()}; its point "
                       "estimates are kept below, without intervals and so without verdicts.")
        elif job.state == "cancelled":
            st.warning(
                f"{title}: the last run was cancelled after {job.counted()}; nothing from it was kept."
                if job.counted() else f"{title}: the last run was cancelled before this family started."
            )
        return


def show_last_run_messages() -> None:
    """The Report page's view of the latest ended run on this data: each family's error, and one
    line for a cancellation (which families it stopped, and where)."""
    token = data_token()
    run = next((r for r in reversed(registry().runs) if r.data_token == token and not r.active), None)
    if run is None:
        return
    for method, message in run.errors:
        st.error(f"{FAMILY_TITLES.get(method, method)}: {plain(message)}")
    stopped = [j for j in run.jobs if j.state == "cancelled"]
    if stopped:
        parts = [
            f"{FAMILY_TITLES.get(j.method, j.method)} during its intervals, after {j.counted()} (its point estimates are kept, without intervals)"
            if j.kept_estimates else
            f"{FAMILY_TITLES.get(j.method, j.method)} after {j.counted()}" if j.counted()
            else f"{FAMILY_TITLES.get(j.method, j.method)} before it started"
            for j in stopped
        ]
        tail = "" if all(j.kept_estimates for j in stopped) else " Nothing else of a cancelled family was kept."
        st.warning(f"The last run was cancelled: {'; '.join(parts)}.{tail}")


def results_for() -> dict[str, AuditResult]:
    """This session's latest result per family on the data in use, each judged against the
    reference group the user chose for it (:func:`judged`)."""
    return {method: judged(result, method) for method, (result, _) in registry().latest(data_token()).items()}


def chosen_references() -> dict[str, str]:
    """The reference group the user chose per family (“Compare with” above the findings)."""
    return st.session_state.setdefault("references", {})


def judged(result: AuditResult, method: str) -> AuditResult:
    """``result`` judged against the reference group chosen for ``method`` in this session, if any
    (nothing is refitted: :meth:`fairaudit.audit.AuditResult.with_reference`)."""
    chosen = chosen_references().get(method)
    return result if chosen is None else result.with_reference(chosen, method)


BEST_SERVED = "the best-served group (default)"

REFERENCE_FAMILIES = ("pca", "nmf", "cpd")
"""The families whose verdicts compare groups with each other (feature selection compares each
group's cluster share with parity: no reference to choose)."""


def reference_selector(result: AuditResult, method: str) -> None:
    """“Compare with”: the reference group of ``method``'s verdicts — the best-served group large
    enough to judge (default, every pair compared) or one the user names; the findings are judged
    again at once, nothing is refitted. The groups too small to judge are not offered (the help
    says which and why)."""
    if method not in REFERENCE_FAMILIES:
        return
    summary = (result.uncertainty or {}).get(method, {})
    sizes = summary.get("group_rows") or result.data.get("group_sizes", {})
    least = int(family_run(result.config, method).get("min_judged_rows") or MIN_JUDGED_ROWS)
    groups = [g for g, n in sizes.items() if n >= least]
    small = [f"{g} ({n:,} rows)" for g, n in sizes.items() if n < least]
    if len(groups) < 2:
        return
    references = chosen_references()
    current = references.get(method)
    options = [BEST_SERVED, *groups]
    choice = st.selectbox(
        "Compare with", options, index=options.index(current) if current in groups else 0, key=f"{method}-reference",
        help="The group every other group is compared with. By default the best-served group large enough to judge, "
        "and every pair of groups is tested (Holm's correction counts them all); naming a group compares each group "
        "with it. The findings change at once; nothing is refitted."
        + (f" Too small to judge (fewer than {least} rows), so never the reference: {', '.join(small)}." if small else ""),
    )
    chosen = None if choice == BEST_SERVED else choice
    if chosen != current:
        references[method] = chosen
        st.rerun()


# ---------------------------------------------------------------- rendering results
VERDICT_BADGES = {
    "gap": ("orange", ":material/warning:"),
    "worse": ("red", ":material/block:"),
    "mitigated": ("blue", ":material/check_circle:"),
    "no_evidence": ("violet", ":material/do_not_disturb_on:"),
    "info": ("gray", ":material/info:"),
}
"""Per verdict, the badge's colour and icon: the label (``fairaudit.findings.VERDICT_LABELS``), the
icon's shape and the colour each tell the verdicts apart, so no reader depends on colour alone;
Streamlit's badge colours are drawn for the light and the dark theme."""


def verdict_badge(verdict: str) -> str:
    """A finding's verdict as a Markdown badge: “:orange-badge[:material/warning: Gap]”."""
    colour, icon = VERDICT_BADGES.get(verdict, VERDICT_BADGES["info"])
    label = VERDICT_LABELS.get(verdict, verdict.replace("_", " "))
    return f":{colour}-badge[{icon} {plain(sentence(label))}]"


DETAILS_LABEL = "Details"
"""Each finding's expander of its details (the reference, the tests, the other pairs of groups, the
groups too small to judge)."""


def show_findings_list(items: Sequence[Finding]) -> None:
    """Findings, one line each: the verdict badge, the sentence, and the rule on the “?” beside it;
    a finding's details one click away under it; under them all, once, the rules of the verdicts
    shown (the same verdict has the same rule within a family's run, so one expander per finding
    would only repeat it)."""
    if not items:
        return
    with st.container(border=True):
        for finding in items:
            rule = words(finding.rule) if finding.rule and finding.verdict != "info" else None
            early = "" if finding.provisional is None else f"*Provisional, from {plural(finding.provisional, 'replicate')}:* "
            st.markdown(f"{verdict_badge(finding.verdict)} {early}{words(finding)}", help=rule)
            if finding.details:
                with st.expander(DETAILS_LABEL):
                    st.markdown("\n".join(f"- {words(line)}" for line in finding.details))
        rules = {f.verdict: f.rule for f in items if f.rule and f.verdict != "info"}
        if rules:
            names = ", ".join(VERDICT_LABELS.get(v, v) for v in rules)
            with st.expander(f"Why these verdicts: the rules ({names})"):
                for verdict, rule in rules.items():
                    st.markdown(f"{verdict_badge(verdict)} {words(rule)}")


def judged_findings(result: AuditResult, method: str) -> list[Finding]:
    """``method``'s findings judged against the reference chosen for it (“Compare with”); a reference
    chosen for an earlier result that this one cannot judge is forgotten, with the error shown."""
    try:
        return findings(judged(result, method)).get(method, [])
    except FairAuditError as exc:
        chosen_references().pop(method, None)
        show_error(exc)
        return findings(result).get(method, [])


def show_verdict_table(found: Sequence[Finding]) -> None:
    """A family's verdict per variant at the rank that matters, one row each: variant, verdict badge,
    what is judged, rank, groups and the number that decided it (``fairaudit.summary.verdict_rows``:
    read from the findings' evidence, never recomputed)."""
    rows = verdict_rows(found)
    if not rows:
        st.caption("No verdict to show: the findings below state facts only.")
        return
    costs = any(row.cost for row in rows)
    lines = [f"| Variant | Verdict | Judged | Rank | Groups | Deciding number ({level(rows[0].confidence)} interval) |"
             + (" Cost |" if costs else ""), "|:--|:--|:--|--:|:--|:--|" + (":--|" if costs else "")]
    for row in rows:
        early = "" if row.provisional is None else f" *provisional ({plural(row.provisional, 'replicate')})*"
        lines.append(f"| {plain(row.short)} | {verdict_badge(row.verdict)}{early} | {plain(row.what)} | "
                     f"{'' if row.rank is None else row.rank} | {_unbroken(plain(row.groups))} | {_phrases(plain(row.number))} |"
                     + (f" {_unbroken(plain(row.cost)) or '—'} |" if costs else ""))
    st.markdown("\n".join(lines))


def _unbroken(text: str) -> str:
    """``text`` kept on one line (its spaces non-breaking): the verdict table's short cells, so that only
    the deciding number wraps."""
    return text.replace(" ", "\u00a0")


def _phrases(text: str) -> str:
    """``text`` wrapping only between its phrases (after “·”, “;” or “,”, before “vs”): a narrow
    column reads “2.12 vs 0.281 ·” / “diff 1.84 (1.34–2.10),” / “p<0.001”, never a number cut from
    its interval (a table too wide for the window scrolls sideways instead)."""
    return " ".join(_unbroken(part) for part in re.split(r"(?<=[·;,]) | (?=vs )", text))


def show_audit_summary(found: dict[str, list[Finding]]) -> None:
    """Above the families (the Report page): which families show a gap, which fair variants close it
    and at what cost, which are less fair (``fairaudit.summary.audit_summary``)."""
    families = audit_summary(found)
    if not families:
        return
    lines = ["| Family | Vanilla | Where | Closed by (cost) | Not closed · less fair |", "|:--|:--|:--|:--|:--|"]
    for family in families:
        closed = "; ".join(f"{plain(t)} ({plain(c)})" if c else plain(t) for t, c in family.closed) or "—"
        left = "; ".join([*(plain(t) for t in family.open), *(f"{plain(t)} (less fair)" for t in family.worse)]) or "—"
        lines.append(f"| {plain(family.title)} | {verdict_badge(family.verdict)} | {plain(family.where()) or '—'} | {closed} | {left} |")
    st.markdown("\n".join(lines))


def show_findings(result: AuditResult, method: str, found: Sequence[Finding] | None = None) -> None:
    """``method``'s findings in full (sentences, details, rules), judged against the chosen reference."""
    show_findings_list(judged_findings(result, method) if found is None else found)


def show_uncertainty(result: AuditResult, method: str, *, state: bool = True, how: bool = True) -> None:
    """How this result's intervals were made (or why there are none), and its held-out rows.
    ``state``: the boxes that change how the answer reads (intervals pending or provisional, or none
    at all: no verdicts) — shown above the answer; ``how``: the caption of how they were made and the
    held-out rows — under “How this was decided”."""
    summary = (result.uncertainty or {}).get(method)
    if not summary:
        return
    replicates = int(summary.get("replicates") or 0)
    chosen = family_run(result.config, method)
    if state:
        if pending_intervals(result, method):
            st.info(
                f"Point estimates, {result.seconds:.1f} s in: every number below is measured; their intervals "
                f"({plural(replicates, 'stratified bootstrap replicate')}) are being computed — progress above. Until they "
                "are in, no finding carries a verdict and the charts have no bands; the page fills them in when they "
                "are. Cancelling keeps these numbers.",
                icon=":material/hourglass_top:",
            )
        elif summary.get("provisional"):
            done = int(summary["replicates_done"])
            st.info(
                f"Provisional, {result.seconds:.1f} s in: the intervals and verdicts below come from the first "
                f"{plural(done, 'bootstrap replicate')} of {replicates}; the rest are running (progress above) and the page "
                "refines them as they come in. A verdict may still change until they are all in.",
                icon=":material/hourglass_top:",
            )
        elif not replicates:
            why = "“Bootstrap replicates” was 0" if chosen.get("bootstrap") == 0 else words(summary.get("why", ""))
            st.info(
                f"No intervals: {why}. Without them no finding carries a verdict (gap, mitigated, …): each is a plain "
                "statement, untested against sampling noise. Set “Bootstrap replicates” in the settings to compute them.",
                icon=":material/info:",
            )
    if not how:
        return
    if replicates and not pending_intervals(result, method) and not summary.get("provisional"):
        why = "as chosen" if chosen.get("bootstrap") is not None else words(summary.get("why", ""))
        seconds, announced = summary.get("seconds"), summary.get("expected_seconds")
        spread = summary.get("start_spread") or {}
        st.caption(
            f"Intervals: {level(summary.get('confidence', AuditConfig.confidence))} percentile intervals from "
            f"{plural(replicates, 'stratified bootstrap replicate')} ({why})"
            + (f", {seconds:.1f} s" if seconds is not None else "")
            + (f" (announced {announced:.1f} s once the first replicates were timed)" if announced is not None else "")
            + " — shaded bands and error bars on the charts, “value (low–high)” in the table."
            + (f" Fits from {plural(spread['restarts'], 'other random start')} moved {spread['larger_count']} of "
               f"{spread['checked']} numbers by more than their interval is wide (‡ in the table)."
               if spread.get("larger_count") else "")
        )
    split = summary.get("rows")
    if split:
        st.caption(
            f"Held-out rows: {level(summary.get('holdout', 0))} of each group ({split['heldout']:,} rows) kept out of "
            f"every fit (trained on {split['train']:,}); metrics measured on them are labelled “held-out rows”."
        )


def show_figures(result: AuditResult, method: str, variants=None, figures=None) -> None:
    """Per-group figures full width (vanilla and fair panels side by side), the rest two abreast;
    under each, its metric's one-line definition and which way is better (``figures``: these of
    ``family_figures``' list, e.g. all but the one above the page's answer)."""
    figures = family_figures(result.records, method, variants) if figures is None else figures
    wide = {metric for kind, metric in FAMILY_FIGURES.get(method, []) if kind != "variant"}
    group_figures = [(m, f) for m, f in figures if m.removeprefix(HELDOUT_PREFIX) in wide]  # held-out twins too
    other = [(m, f) for m, f in figures if m.removeprefix(HELDOUT_PREFIX) not in wide]
    # Keys by position: a metric can have several figures (the CP family draws nkhsic both as a
    # frontier and over rank).
    for index, (metric, fig) in enumerate(group_figures):
        st.plotly_chart(fig, key=f"{method}-group-{index}-{metric}", width="stretch")
        _definition(metric)
    for start in range(0, len(other), 2):
        columns = st.columns(2)
        for offset, (column, (metric, fig)) in enumerate(zip(columns, other[start : start + 2], strict=False)):
            with column:
                st.plotly_chart(fig, key=f"{method}-{start + offset}-{metric}", width="stretch")
                _definition(metric)


def _definition(metric: str) -> None:
    arrow = better_text(metric)
    line = metric_line(metric)
    if line or arrow:
        st.caption(plain(" ".join(part for part in (arrow + "." if arrow else "", line) if part)))


TABLE_COLUMNS = {
    "pca": ["max_loss", "loss_gap", "variance_explained", "balanced_accuracy"],
    "nmf": ["max_rel_loss", "rel_loss_gap", "total_rel_error", "balanced_accuracy"],
    "fs": ["relative_balance", "balance", "proportion", "acc", "nmi", "alignment_protected", "balanced_accuracy"],
    "cpd": ["lam", "residual_fit", "nkhsic", "orthogonality", "balanced_accuracy"],
}
"""The per-rank table's columns by default (the rest, fit times included, are one click away): a
table that fits, now that every cell carries its interval. The leakage column is the balanced
accuracy, the quantity of the leakage chart and its finding."""

MEASURED_ON = {"": "training", HELDOUT_PREFIX: "held-out"}
"""With held-out rows, the table's “rows” column: which rows a line of the table was measured on."""


CHARACTER_PIXELS = 6.3
"""Width of a character of the dashboard's tables (Source Sans at 14 px: “0.706 (0.611–0.808)”
measures 113 px in chromium at 1,400 px, 5.9 px a character; rounded up for wider glyphs), for
:func:`column_width`."""


def column_width(title: str, cells: pd.Series, widest: int = 220, share: float = 0.8) -> int:
    """Pixels for a table column: room for its title and for ``share`` of its cells, at most
    ``widest`` (a longer cell is cut, its whole text on hovering). Streamlit sizes a column by its
    title alone, which cut “0.0763 (0.0370–0.159)” under a short title; sizing by the longest
    cell made a column of “0 (0–0)” as wide as its one long value."""
    lengths = [len(str(cell)) for cell in cells] or [0]
    longest = max(len(title) + 2, float(np.quantile(lengths, share, method="higher")))
    return int(min(widest, 16 + CHARACTER_PIXELS * longest))


def heldout_lines(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (``summary_text``: a column per metric, ``heldout_…`` twins included) with the
    held-out measurements as lines of their own: each variant and rank measured on the training
    rows, then right under it on the held-out rows, in the same columns (a “rows” column says
    which) — the table keeps its width, and every held-out value sits next to its training one."""
    metrics = [c for c in table.columns if c not in ("variant", "rank") and not c.startswith(HELDOUT_PREFIX)]
    lines = []
    for prefix, rows in MEASURED_ON.items():
        part = table[["variant", "rank"]].copy()
        part.insert(2, "rows", rows)
        for metric in metrics:
            part[metric] = table[prefix + metric] if prefix + metric in table else "—"
        lines.append(part.set_axis(2 * table.index + len(lines)))
    return pd.concat(lines).sort_index().reset_index(drop=True)


def show_table(result: AuditResult, method: str) -> None:
    table = summary_text(result, method)
    if table.empty:
        return
    table["variant"] = [variant_title(method, v) for v in table["variant"]]
    heldout = any(c.startswith(HELDOUT_PREFIX) for c in table.columns)
    if heldout:
        table = heldout_lines(table)
    keys = ["variant", "rank", "rows"] if heldout else ["variant", "rank"]
    numeric = [c for c in table.columns if c not in keys]
    st.subheader("Per-rank table")
    shown = st.multiselect(
        "Columns", numeric, default=[c for c in TABLE_COLUMNS.get(method, numeric) if c in numeric] or numeric,
        format_func=lambda metric: table_title(metric, choice=True), key=f"{method}-table-columns",
        help="Every whole-data metric of the audit; the Report page exports all of them.",
    )
    summary = (result.uncertainty or {}).get(method, {})
    confidence = level(summary.get("confidence", AuditConfig.confidence))
    spans = f"In brackets: the {confidence} interval. " if summary.get("replicates") and not pending_intervals(result, method) else ""
    config = {
        c: st.column_config.TextColumn(table_title(c), width=column_width(table_title(c), table[c]), help=f"{metric_label(c)}. {spans}{metric_line(c)}")
        for c in shown
    }
    config["variant"] = st.column_config.TextColumn("variant", width=column_width("variant", table["variant"], widest=170, share=1.0), pinned=True)
    config["rank"] = st.column_config.NumberColumn("rank", format="%d", width=56, pinned=True)
    config["rows"] = st.column_config.TextColumn("rows", width=column_width("rows", table.get("rows", [])), pinned=True, help="Measured on the training rows, or on the "
                                                 "held-out rows with the model fitted on the training rows.")
    st.dataframe(table[[*keys, *shown]], hide_index=True, width="stretch", column_config=config)
    notes = [f"{TABLE_ARROWS_NOTE} Hover a title for the metric in full."]
    if spans:
        notes.append(f"Each value with its {confidence} interval: “value (low–high)”; a value without brackets has no "
                     "interval (below: which, and why).")
    if heldout:
        notes.append("Each variant and rank has two lines: measured on the training rows, then on the held-out rows.")
    notes += table_notes(table[shown])
    values = summary_table(result, method)
    negative = negative_loss_note(values[[c for c in values.columns if c.removeprefix(HELDOUT_PREFIX) in shown]])
    if negative:
        notes.append(negative)
    st.caption(" ".join(notes))
    show_missing_intervals(result, method)


def missing_interval_notes(result: AuditResult, method: str) -> set[str]:
    """The warnings that say why some numbers of ``method`` have no interval
    (``AuditResult.uncertainty[method]["not_bootstrapped"]``, also in the warnings)."""
    missing = (result.uncertainty or {}).get(method, {}).get("not_bootstrapped", {})
    return {no_interval_warning(method, what, reason) for what, reason in missing.items()}


def show_missing_intervals(result: AuditResult, method: str) -> None:
    """The numbers left without an interval and why, folded away (one line each would bury the page)."""
    missing = (result.uncertainty or {}).get(method, {}).get("not_bootstrapped", {})
    if not missing:
        return
    with st.expander(f"Numbers without an interval, and why ({len(missing)})"):
        st.dataframe(
            pd.DataFrame({"what": [metric_label(what) for what in missing], "why": [render(r, "dashboard") for r in missing.values()]}),
            hide_index=True, width="stretch",
        )


TABLE_ROWS = 40
"""Up to this many rows, a table shows its whole text (wrapped: columns left out with their detail,
the details per fit); more are a scrolling grid."""


def show_details(result: AuditResult, method: str) -> None:
    """What a family attached to its fits (e.g. the selected columns), as a table."""
    rows = details_rows_by_ranks(result, method)
    if rows:
        st.subheader("Details per fit")
        table = pd.DataFrame(rows, columns=["variant", "ranks", "what", "value"])
        if len(table) <= TABLE_ROWS:  # st.table wraps a long value (a list of selected columns); its cells render Markdown
            st.table(table.astype(str).map(plain).set_index("variant"), border="horizontal")
        else:
            st.dataframe(table, hide_index=True, width="stretch", column_config={"value": st.column_config.TextColumn(width="large")})


def show_notes(result: AuditResult, method: str | None = None) -> None:
    for skip in result.skipped:
        if method is None or skip.get("method") == method:
            st.warning(f"Skipped {plain(variant_title(skip['method'], skip['variant']))}: {words(skip['reason'])}")
    folded = missing_interval_notes(result, method) if method else set()  # shown with the table
    for warning in result.warnings:
        if warning not in folded:
            st.caption(f"⚠ {words(warning)}")


def show_explainers(result: AuditResult, method: str) -> None:
    used = [m for m in dict.fromkeys(result.records[result.records.method == method].metric) if m in METRIC_DEFINITIONS]
    with st.expander("Every metric in full (definitions and sources)"):
        for metric in used:
            definition = METRIC_DEFINITIONS[metric]
            st.markdown(
                f"**{plain(metric_label(metric))}** (`{metric}`) — {plain(definition['plain'])}  \n"
                f"Definition: `{definition['formula']}` — *{plain(definition['source'])}*"
            )


def pending_intervals(result: AuditResult, method: str) -> bool:
    """Whether ``result`` holds only ``method``'s point estimates, its intervals still being
    computed (``stage="estimates"`` progress; :attr:`pages.runs.Run.estimates`)."""
    return bool((result.uncertainty or {}).get(method, {}).get("intervals_pending"))


KEY_FIGURE_HEIGHT = 340
"""Pixels of the chart under the verdict table: with the question and the table it fits a screen of
900 pixels (the charts under “All charts” keep their own height)."""

ANSWER_TABS = ("All charts", "Per-rank table", "How this was decided")
"""Under a family page's answer: everything else, one click away."""


def show_answer(result: AuditResult, method: str, variants=None) -> tuple[list[Finding], list]:
    """The one-screen answer under the page's question: the verdict per variant at the rank that
    matters (``fairaudit.summary.verdict_rows``), then the one chart that carries it
    (``fairaudit.summary.key_figure``), then “Compare with”. Returns the findings shown and the
    other charts (for “All charts”)."""
    pending = pending_intervals(result, method)
    show_uncertainty(result, method, how=False)
    found = [] if pending else judged_findings(result, method)
    if pending:
        st.caption("Verdicts: with the intervals.")
    else:
        show_verdict_table(found)
    key, rest = key_figure(family_figures(result.records, method, variants), method)
    if key is not None:
        metric, fig = key
        fig.update_layout(height=KEY_FIGURE_HEIGHT)
        st.plotly_chart(fig, key=f"{method}-key-{metric}", width="stretch")
        _definition(metric)
    if not pending:
        reference_selector(result, method)
    return found, rest


def show_result(result: AuditResult, method: str, variants=None, intro: str = "", below=None) -> None:
    """A family's result: the answer (:func:`show_answer`), then — in ``below``, a container further
    down the page, if given — every other chart, the per-rank table and how the verdicts were decided
    in tabs (:data:`ANSWER_TABS`; ``intro``, the page's explanation of the method, in the last), the
    skipped variants and warnings, and where the result came from."""
    found, rest = show_answer(result, method, variants)
    with below if below is not None else st.container():
        _show_more(result, method, variants, found, rest, intro)


def _show_more(result: AuditResult, method: str, variants, found: list[Finding], rest: list, intro: str) -> None:
    pending = pending_intervals(result, method)
    charts, table, decided = st.tabs(list(ANSWER_TABS))
    with charts:
        st.plotly_chart(group_sizes_figure(result.data.get("group_sizes", {})), key=f"{method}-group-sizes",
                        config={"displayModeBar": False})
        show_figures(result, method, variants, figures=rest)
    with table:
        show_table(result, method)
        show_details(result, method)
    with decided:
        show_uncertainty(result, method, state=False)
        if pending:
            st.caption("Findings and their verdicts: with the intervals.")
        else:
            show_findings(result, method, found)
        if intro:
            st.markdown(intro)
        show_explainers(result, method)
    show_notes(result, method)
    if pending:
        return
    st.caption(
        f"{FAMILY_TITLES.get(method, method)} audit of {plain(result.data.get('name'))} "
        f"(sha256 {plain(str(result.data.get('sha256'))[:12])}…) in {result.seconds:.1f} s. "
        "The Report page exports everything shown here."
    )


def rank_range(label: str, limit: int, default: tuple[int, int] | None = None, key: str | None = None) -> tuple[int, ...]:
    if limit <= 1:
        st.caption("Rank: 1 (the data allow no other)")
        return (1,)
    low, high = default or (1, min(10, limit))
    low, high = max(1, min(low, limit)), max(1, min(high, limit))
    low, high = st.slider(label, 1, limit, (low, high), key=key)
    return tuple(range(low, high + 1))


# ---------------------------------------------------------------- a method page
LEAKAGE_LABELS = {
    "qda": "QDA — fast; sees mean and covariance differences",
    "logistic": "logistic regression — linear leakage only",
    "hgb": "gradient boosting — nonlinear, slower",
    "mlp": "neural network (1,500 hidden units) — nonlinear, slowest",
}


UNCERTAINTY_SETTINGS = ("bootstrap", "confidence", "holdout", "flag_ratio", "min_judged_rows", "n_jobs", "time_budget")
"""``AuditConfig``'s settings of a run's intervals, held-out rows, verdicts and how the replicates
run (the controls of :func:`uncertainty_controls`)."""


def replicates_text(counts: dict[str, int]) -> str:
    """The default replicates as the bootstrap box's placeholder: “100 (default)”, or one count
    per family for a run of several."""
    if len(counts) == 1:
        count = next(iter(counts.values()))
        return f"{count} (default)" if count else "0 (default here: no intervals)"
    return "default: " + ", ".join(f"{FAMILY_TITLES.get(m, m)} {n}" for m, n in counts.items())


def leace_control(key: str, saved: dict) -> bool:
    """The checkbox of ``AuditConfig(leace=…)`` (a method page's form, and the Models page's audit
    of your representation)."""
    return st.checkbox(
        "Also audit each representation after LEACE", value=bool(saved.get("leace", False)), key=key,
        help="Runs every chosen variant's representation through LEACE (Belrose et al. 2023), the least change after "
        "which no linear classifier predicts the group, and audits it beside it as “… + LEACE”: how much leakage is "
        "left (a quadratic or nonlinear classifier may still find some) and what the erasure cost. It doubles the "
        "leakage tests.",
    )


def subgroups_control(key: str, saved: dict) -> bool:
    """The checkbox of ``AuditConfig(subgroups=…)`` (the PCA page's form)."""
    return st.checkbox(
        "Search for the worst-served subgroup", value=bool(saved.get("subgroups", False)), key=key,
        help="Compares every subgroup of the sensitive columns — one value of a column, or values of several (“sex=f”, "
        "“sex=f & race=black”), each with at least the smallest group judged — with the rest of the rows under vanilla "
        "PCA, and names the one served worst; Holm's correction counts every subgroup at every rank. It draws bootstrap "
        "replicates of its own.",
    )


def uncertainty_controls(key: str, saved: dict, defaults: dict[str, tuple[int, str]]) -> dict:
    """The controls of a run's intervals, held-out rows and verdicts (the same on every method
    page and beside the Report page's run of every family); returns ``AuditConfig`` keyword
    arguments. ``defaults``: per family, the library's default replicates and why
    (``fairaudit.uncertainty.default_replicates``); an empty box means those defaults."""
    st.markdown("**Intervals and verdicts**")
    replicates, confidence_column, tolerance, smallest, heldout_column = st.columns(5)
    reasons = " ".join(f"{FAMILY_TITLES.get(m, m)}: {count or 'none'} — {words(why)}." for m, (count, why) in defaults.items())
    bootstrap = replicates.number_input(
        "Bootstrap replicates", min_value=0, max_value=100_000, value=saved.get("bootstrap"), step=10,
        placeholder=replicates_text({m: count for m, (count, _) in defaults.items()}), key=f"{key}-bootstrap",
        help="Each replicate redraws every group's rows with replacement (group sizes fixed), refits every variant "
        "starting from the audit's own fit, and measures it again; the spread of the replicates gives every number its "
        "interval, and the intervals decide the verdicts. 0 turns the intervals off (faster; the findings then carry no "
        f"verdict). Leave the box empty for each family's default. {reasons}",
    )
    percent = confidence_column.number_input(
        "Confidence level (%)", min_value=50.0, max_value=99.9, step=0.5, format="%.1f", key=f"{key}-confidence",
        value=float(round(100 * float(saved.get("confidence", AuditConfig.confidence)), 6)),
        help="Level of every interval; 100 % minus it is the significance level of the tests behind the verdicts "
        "(the leakage permutation test, the PCA gap test).",
    )
    flag_ratio = tolerance.number_input(
        "Gap tolerance (×)", min_value=1.0, max_value=100.0, step=0.05, format="%.2f", key=f"{key}-flag-ratio",
        value=float(saved.get("flag_ratio", AuditConfig.flag_ratio)),
        help="A gap verdict needs the worse-served of two groups to fare at least this many times worse than the other, "
        "beyond the interval and the corrected test; smaller differences are “no evidence” at this tolerance.",
    )
    least = smallest.number_input(
        "Smallest group to judge (rows)", min_value=2, max_value=1_000_000, step=5, key=f"{key}-min-judged-rows",
        value=int(saved.get("min_judged_rows", AuditConfig.min_judged_rows)),
        help="Groups with fewer rows are reported as too small to judge: they take part in no test (not in the "
        "leakage test either) and are never the reference, and each finding says how large a difference their size "
        f"could have shown. Default {AuditConfig.min_judged_rows}: below it a group's bootstrap intervals cover the truth "
        "markedly less often than they claim.",
    )
    with heldout_column:
        heldout = st.checkbox(
            "Evaluate on held-out rows", value=bool(saved.get("holdout")), key=f"{key}-heldout",
            help="Fit on the rest of the rows and measure every metric on the held-out ones too (labelled “held-out "
            "rows”): a fair method that only fits its training rows shows it there.",
        )
        low, high = (round(100 * bound) for bound in HOLDOUT_RANGE)
        share = st.number_input(
            "Held-out rows (% of each group)", min_value=low, max_value=high, step=5, key=f"{key}-holdout",
            value=round(100 * float(saved.get("holdout") or HOLDOUT_SUGGESTED)),
            help="Drawn at random within each group (with the run's seed); used only with “Evaluate on held-out rows”.",
        )
    processes, budget, _, _ = st.columns(4)
    jobs = processes.number_input(
        "Processes", min_value=1, max_value=256, value=saved.get("n_jobs"), step=1, key=f"{key}-jobs",
        placeholder=f"{usable_cores()} (every core)",
        help="Processes computing the bootstrap replicates side by side. The numbers are the same whatever the count; "
        "fewer leave cores to other work. Empty: one per core of this server.",
    )
    seconds = budget.number_input(
        "Time budget (s)", min_value=1.0, max_value=7 * 86400.0, value=saved.get("time_budget"), step=10.0, format="%.0f",
        key=f"{key}-time-budget", placeholder="no limit",
        help="Stop starting bootstrap replicates once the audit has run this long (from Run audit). The intervals then "
        "come from the replicates done, and say how many; below ten there are none. Empty: every replicate runs.",
    )
    return {
        "bootstrap": None if bootstrap is None else int(bootstrap),
        "confidence": round(float(percent) / 100, 6),
        "holdout": round(float(share) / 100, 6) if heldout else None,
        "min_judged_rows": int(least),
        "flag_ratio": float(flag_ratio),
        "n_jobs": None if jobs is None else int(jobs),
        "time_budget": None if seconds is None else float(seconds),
    }


def last_time_caption(method: str, token: int) -> None:
    """How long this family's last audit of these data took here (measured, its intervals' share
    said), beside *Run audit*: the time of a new run is measured once it starts."""
    found = registry().latest(token).get(method)
    if found is None or not found[0].seconds:
        return
    result = found[0]
    summary = result.uncertainty.get(method, {})
    text = f"The last audit of {FAMILY_TITLES.get(method, method)} on these data took {duration(result.seconds)} here"
    if summary.get("replicates"):
        text += (f", {duration(summary.get('seconds') or 0.0)} of it for the "
                 f"{plural(int(summary['replicates']), 'bootstrap replicate')}")
    st.caption(text + ". A new run measures its own time as it goes: the numbers first, then the intervals.")


def saved_settings(method: str) -> dict:
    """The settings of the last audit the user ran on ``method``'s page (widgets start there when
    the user comes back: Streamlit forgets a widget's value when its page is not shown)."""
    return st.session_state.setdefault("settings", {}).get(method, {})


def method_page(
    method: str,
    *,
    title: str,
    intro: str,
    variants: dict[str, str],
    heavy: dict[str, str],
    rank_limit: int,
    skipped: frozenset[str] | set[str] = frozenset(),
    rank_label: str = "Ranks to sweep",
    options_ui=None,
    default_leakage: str = "qda",
    ranks_ui=None,
    leakage_option: str | None = None,
    auto_run: bool = False,
    subgroups: bool = False,
) -> AuditResult | None:
    """The common shape of the PCA / NMF / feature-selection / tensor pages.

    ``heavy`` maps variant names to a warning shown when they are chosen (or left out by default);
    ``skipped`` names the variants the library's default audit skips on data this size (they
    start unselected, as in the CLI); ``options_ui(data,
    saved)`` draws family options inside the form (starting from ``saved``, the last run's) and
    returns them as ``AuditConfig.options[method]``; ``ranks_ui(saved)`` replaces the rank-range
    slider (it returns the ranks, or None for the family's default sweep). ``leakage_option``
    names the family option that takes the leakage classifier (the CP family has its own)
    instead of the audit-wide setting. ``auto_run``: the page starts its default audit on first
    open (the page's own size rule says when: its numbers in a few seconds; the intervals fill in
    after). ``subgroups``: the page offers the worst-served subgroup's search (:func:`subgroups_control`).
    """
    data, token = current_data(), data_token()
    saved = saved_settings(method)
    reg = registry()
    had_result = reg.estimates_for(method, token) is not None or method in reg.latest(token)
    st.title(plain(question(method, data.sensitive)))
    st.caption(f"{FAMILY_TITLES.get(method, method)} · {data_summary(data)} — change it on the **Data** page.")
    answer = st.container()  # filled below, once the settings are read and any run started
    if not had_result:
        text, sizes = st.columns([3, 1])
        with text:
            st.markdown(intro)
        with sizes:
            st.plotly_chart(group_sizes_figure(data.group_sizes()), key=f"{method}-group-sizes-intro", config={"displayModeBar": False})
    settings = st.expander("Settings of the run", expanded=not had_result, icon=":material/tune:")
    below = st.container()  # under the settings: every other chart, the per-rank table, how it was decided
    with settings, st.form(f"{method}-settings"):
        chosen = st.pills(
            "Variants (vanilla and fair, shown side by side)",
            options=list(variants),
            selection_mode="multi",
            # the library's default set, less what is too slow for this data (the library would skip it)
            default=[v for v in saved.get("variants", [v for v in default_variants(method) if v not in skipped]) if v in variants],
            format_func=lambda v: variants[v],
            key=f"{method}-variants",
        )
        ranks = ranks_ui(saved) if ranks_ui else rank_range(rank_label, rank_limit, saved.get("rank_bounds"), key=f"{method}-ranks")
        options = options_ui(data, saved.get("options", {})) if options_ui else {}
        leakage_default = saved.get("leakage", default_leakage)
        classifier, seed_column = st.columns([3, 1])
        leakage = classifier.selectbox(
            "Classifier for the leakage (unfairness) metrics",
            list(LEAKAGE_LABELS),
            index=list(LEAKAGE_LABELS).index(leakage_default),
            format_func=LEAKAGE_LABELS.get,
            key=f"{method}-leakage",
        )
        seed = int(seed_column.number_input(
            "Random seed", 0, 2**32 - 1, int(saved.get("seed", AuditConfig.random_state)), key=f"{method}-seed",
            help="Everything random in the audit (starts, splits, subsamples) follows it: the same seed gives the same numbers.",
        ))
        leace = leace_control(f"{method}-leace", saved)
        search = subgroups_control(f"{method}-subgroups", saved) if subgroups else False
        trust = uncertainty_controls(method, saved, {method: default_replicates(method)})
        submitted = st.form_submit_button("Run audit", type="primary")
    with settings:
        for variant in variants:
            if variant in heavy and (variant in chosen or variant in skipped):
                note = "" if variant in chosen else " (not selected by default on data this size)"
                st.warning(f"{variants[variant]}{note}: {plain(heavy[variant])}")
    config = None
    if not chosen:
        settings.info("Choose at least one variant.")
    else:
        try:
            config = AuditConfig(
                methods=(method,),
                ranks=ranks,
                variants=tuple(chosen),
                random_state=seed,
                leakage_classifier=leakage if not leakage_option else "qda",
                leace=leace,
                subgroups=search,
                options={method: {**options, leakage_option: leakage} if leakage_option else options}
                if (options or leakage_option) else {},
                **trust,
            )
        except FairAuditError as exc:
            with settings:
                show_error(exc)
    if config is not None:
        with settings:
            last_time_caption(method, token)
    running = reg.running_for(method, token)
    first_visit = (method, token) not in st.session_state.setdefault("auto-started", set())
    # nothing starts unasked whose numbers take more than a few seconds to show (the page's own size rule);
    # the intervals follow on the page
    if config is not None and (submitted or (auto_run and first_visit and running is None and method not in results_for())):
        st.session_state["auto-started"].add((method, token))
        st.session_state["settings"][method] = {
            "variants": list(chosen), "rank_bounds": (min(ranks), max(ranks)) if ranks else None,
            "options": options, "leakage": leakage, "ranks": ranks, "seed": seed, "leace": leace, "subgroups": search, **trust,
        }
        start_run(FAMILY_TITLES.get(method, method), [(method, config)])
        running = reg.running_for(method, token)
    with answer:
        if running is not None:
            runs_panel(f"page-{method}", method)
        show_run_messages(method)
    estimates = reg.estimates_for(method, token)
    latest = estimates or reg.latest(token).get(method)
    if latest is None:
        if running is None:
            answer.info("Press **Run audit** (in the settings below) to fit the chosen variants over the ranks.")
        return None
    result, used = latest
    if running is not None and estimates is None:
        answer.caption("Below: the previous result, until the run above finishes.")
    shown_variants = [v for v in variants if used.names(method, v) or (used.variants == "all" and used.wants(method, v))]
    present = set(result.records.variant)  # each variant's representation after LEACE (AuditConfig.leace) beside it
    shown_variants = [name for v in shown_variants for name in (v, erased_variant(v)) if name == v or name in present]
    with answer:
        show_result(result, method, shown_variants, intro=f"**{title}** {intro}", below=below)
    return result
