"""Streamlit pieces shared by the pages: session state, the session's runs, result rendering.

Views only: every number comes from :mod:`fairaudit` (records, figures, findings). Everything a
user supplied (file, column and group names, values inside messages) goes through :func:`plain`
before any Markdown-rendering call, widget labels included.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILY_TITLES, AuditConfig, AuditResult, default_variants
from fairaudit.cost import duration, expected_seconds
from fairaudit.findings import findings
from fairaudit.metrics import METRIC_DEFINITIONS
from fairaudit.plots import (
    FAMILY_FIGURES,
    better_text,
    family_figures,
    group_sizes_figure,
    metric_label,
    metric_line,
    variant_title,
)
from fairaudit.report import details_rows_by_ranks, summary_table
from fairaudit.samples import DEFAULT_SAMPLE, SAMPLES, load_sample
from fairaudit.vocabulary import render
from pages.runs import ResultStore, Run, RunRegistry

log = logging.getLogger("fairaudit.app")

QUICK_WAIT_SECONDS = 2.0
"""A page waits this long for a run it just started before it draws a progress bar instead: quick
audits (and results from the cache) appear at once."""

PROGRESS_REFRESH_SECONDS = 0.7


# ---------------------------------------------------------------- messages
_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:&")


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


def registry() -> RunRegistry:
    """This session's runs."""
    if "runs" not in st.session_state:
        st.session_state["runs"] = RunRegistry(result_store())
    return st.session_state["runs"]


def start_run(label: str, configs: list[tuple[str, AuditConfig]]) -> Run:
    """Start an audit that belongs to the session; wait briefly so quick ones show at once."""
    run = registry().start(label, current_data(), data_token(), configs)
    run.wait(QUICK_WAIT_SECONDS)
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
    if len(run.jobs) > 1:
        current = next((j for j in run.jobs if j.state == "running"), None)
        finished = sum(j.state in ("done", "cached", "failed") for j in run.jobs)
        parts.append(f"family {min(finished + 1, len(run.jobs))} of {len(run.jobs)}"
                     + (f" ({FAMILY_TITLES.get(current.method, current.method)})" if current else ""))
    if event:
        job = next((j for j in run.jobs if j.method == event.get("method")), None)
        stage = event.get("stage")
        doing = f"{variant_title(event['method'], str(event.get('variant', '')))} at rank {event.get('rank')}"
        if stage and stage != "fit":
            doing += f" ({stage})"
        if job is not None and job.total:
            doing += f", {job.done}/{job.total} fits"
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
        if reg.newly_ended():
            st.rerun()
        _draw_runs(active(), where)

    panel()


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
        if job.state == "cancelled":
            title = FAMILY_TITLES.get(method, method)
            st.warning(
                f"{title}: the last run was cancelled after {job.done} of {job.total} fits; nothing from it was kept."
                if job.total else f"{title}: the last run was cancelled before this family started."
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
            f"{FAMILY_TITLES.get(j.method, j.method)} after {j.done} of {j.total} fits" if j.total
            else f"{FAMILY_TITLES.get(j.method, j.method)} before it started"
            for j in stopped
        ]
        st.warning(f"The last run was cancelled: {'; '.join(parts)}. Nothing of a cancelled family was kept.")


def results_for() -> dict[str, AuditResult]:
    """This session's latest result per family on the data in use."""
    return {method: result for method, (result, _) in registry().latest(data_token()).items()}


# ---------------------------------------------------------------- rendering results
def show_findings(result: AuditResult, method: str) -> None:
    for sentence in findings(result).get(method, []):
        st.info(words(sentence))


def show_figures(result: AuditResult, method: str, variants=None) -> None:
    """Per-group figures full width (vanilla and fair panels side by side), the rest two abreast;
    under each, its metric's one-line definition and which way is better."""
    figures = family_figures(result.records, method, variants)
    wide = {metric for kind, metric in FAMILY_FIGURES.get(method, []) if kind != "variant"}
    group_figures = [(m, f) for m, f in figures if m in wide]
    other = [(m, f) for m, f in figures if m not in wide]
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
    "pca": ["max_loss", "loss_gap", "variance_explained", "unfairness_balanced", "seconds"],
    "nmf": ["max_rel_loss", "rel_loss_gap", "total_rel_error", "unfairness_balanced", "seconds"],
    "fs": ["balance", "proportion", "acc", "nmi", "alignment_protected", "unfairness_balanced", "seconds"],
    "cpd": ["lam", "residual_fit", "nkhsic", "orthogonality", "unfairness_balanced", "seconds"],
}
"""The per-rank table's columns by default (the rest are one click away): a table that fits."""


def show_table(result: AuditResult, method: str) -> None:
    table = summary_table(result, method)
    if table.empty:
        return
    table["variant"] = [variant_title(method, v) for v in table["variant"]]
    numeric = [c for c in table.columns if c not in ("variant", "rank")]
    default = [c for c in TABLE_COLUMNS.get(method, numeric) if c in numeric] or numeric
    st.subheader("Per-rank table")
    shown = st.multiselect(
        "Columns", numeric, default=default, format_func=metric_label, key=f"{method}-table-columns",
        help="Every whole-data metric of the audit; the Report page exports all of them.",
    )
    config = {c: st.column_config.NumberColumn(metric_label(c), format="%.4g", help=metric_line(c)) for c in shown}
    config["variant"] = st.column_config.TextColumn("variant")
    st.dataframe(table[["variant", "rank", *shown]], hide_index=True, width="stretch", column_config=config)


def show_details(result: AuditResult, method: str) -> None:
    """What a family attached to its fits (e.g. the selected columns), as a table."""
    rows = details_rows_by_ranks(result, method)
    if rows:
        st.subheader("Details per fit")
        st.dataframe(
            pd.DataFrame(rows, columns=["variant", "ranks", "what", "value"]), hide_index=True, width="stretch"
        )


def show_notes(result: AuditResult, method: str | None = None) -> None:
    for skip in result.skipped:
        if method is None or skip.get("method") == method:
            st.warning(f"Skipped {plain(variant_title(skip['method'], skip['variant']))}: {words(skip['reason'])}")
    for warning in result.warnings:
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


def show_result(result: AuditResult, method: str, variants=None) -> None:
    show_findings(result, method)
    show_figures(result, method, variants)
    show_table(result, method)
    show_details(result, method)
    show_notes(result, method)
    show_explainers(result, method)
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
) -> AuditResult | None:
    """The common shape of the PCA / NMF / feature-selection / tensor pages.

    ``heavy`` maps variant names to a warning shown when they are chosen (or left out by default);
    ``skipped`` names the variants the library's default audit skips on data this size (they
    start unselected, as in the CLI); ``options_ui(data,
    saved)`` draws family options inside the form (starting from ``saved``, the last run's) and
    returns them as ``AuditConfig.options[method]``; ``ranks_ui(saved)`` replaces the rank-range
    slider (it returns the ranks, or None for the family's default sweep). ``leakage_option``
    names the family option that takes the leakage classifier (the CP family has its own)
    instead of the audit-wide setting. ``auto_run``: the page may start its default audit on
    first open (only for audits that take a few seconds at most).
    """
    data, token = current_data(), data_token()
    saved = saved_settings(method)
    st.title(title)
    text, sizes = st.columns([3, 1])
    with text:
        st.markdown(intro)
        st.caption(data_summary(data) + " — change it on the **Data** page.")
    with sizes:
        st.plotly_chart(group_sizes_figure(data.group_sizes()), key=f"{method}-group-sizes", config={"displayModeBar": False})
    with st.form(f"{method}-settings"):
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
        submitted = st.form_submit_button("Run audit", type="primary")
    if chosen:  # a stated expectation before anything slow (fairaudit.cost, the CLI's model too)
        seconds, _ = expected_seconds(data.n_rows, data.n_features, AuditConfig(methods=(method,), ranks=ranks or None))
        if seconds >= 5:
            st.caption(f"Expect roughly {duration(seconds)} for the default variants on data this size (two cores); "
                       "the run goes on if you open other pages, and its progress stays in the sidebar.")
    for variant in variants:
        if variant in heavy and (variant in chosen or variant in skipped):
            note = "" if variant in chosen else " (not selected by default on data this size)"
            st.warning(f"{variants[variant]}{note}: {plain(heavy[variant])}")
    config = None
    if not chosen:
        st.info("Choose at least one variant.")
    else:
        try:
            config = AuditConfig(
                methods=(method,),
                ranks=ranks,
                variants=tuple(chosen),
                random_state=seed,
                leakage_classifier=leakage if not leakage_option else "qda",
                options={method: {**options, leakage_option: leakage} if leakage_option else options}
                if (options or leakage_option) else {},
            )
        except FairAuditError as exc:
            show_error(exc)
    reg = registry()
    running = reg.running_for(method, token)
    first_visit = (method, token) not in st.session_state.setdefault("auto-started", set())
    if config is not None and (submitted or (auto_run and first_visit and running is None and method not in results_for())):
        st.session_state["auto-started"].add((method, token))
        st.session_state["settings"][method] = {
            "variants": list(chosen), "rank_bounds": (min(ranks), max(ranks)) if ranks else None,
            "options": options, "leakage": leakage, "ranks": ranks, "seed": seed,
        }
        start_run(FAMILY_TITLES.get(method, method), [(method, config)])
        running = reg.running_for(method, token)
    if running is not None:
        runs_panel(f"page-{method}", method)
    show_run_messages(method)
    latest = reg.latest(token).get(method)
    if latest is None:
        if running is None:
            st.info("Press **Run audit** to fit the chosen variants over the ranks.")
        return None
    result, used = latest
    if running is not None:
        st.caption("Below: the previous result, until the run above finishes.")
    shown_variants = [v for v in variants if used.names(method, v) or (used.variants == "all" and used.wants(method, v))]
    show_result(result, method, shown_variants)
    return result
