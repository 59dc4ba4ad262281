"""Streamlit pieces shared by the pages: session state, cached audits, result rendering.

Views only: every number comes from :mod:`fairaudit` (records, figures, findings).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILY_TITLES, AuditConfig, AuditResult, run_audit
from fairaudit.findings import findings
from fairaudit.metrics import METRIC_DEFINITIONS
from fairaudit.plots import FAMILY_FIGURES, family_figures, group_sizes_figure, metric_title, variant_title
from fairaudit.report import details_rows, summary_table
from fairaudit.samples import DEFAULT_SAMPLE, SAMPLES, load_sample

AUTO_RUN_MAX_CELLS = 20_000
"""A method page runs its default audit on open when rows × features is at most this (the
embedded samples); larger data wait for the Run button. Pages may pass their own limit."""

_CACHE_SIZE = 32


# ---------------------------------------------------------------- messages
_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:")


def plain(text) -> str:
    """``text`` with every Markdown (and HTML-in-Markdown) special character escaped, so user
    values render as the characters they are in any ``st.markdown``/``st.error``/``st.info``."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in str(text))


def show_error(exc: FairAuditError) -> None:
    """A bad-input error in the dashboard's words (widget names, not flags), escaped."""
    st.error(plain(exc.render("dashboard")))


# ---------------------------------------------------------------- session data
def init_state() -> None:
    """First visit: the default sample, prepared, so every page has data at once."""
    if "data" not in st.session_state:
        sample = SAMPLES[DEFAULT_SAMPLE]
        st.session_state["data"] = load_sample(DEFAULT_SAMPLE)
        st.session_state["source"] = {"kind": "sample", "name": DEFAULT_SAMPLE, "title": sample.title}


def current_data():
    init_state()
    return st.session_state["data"]


def data_summary(data) -> str:
    groups = ", ".join(f"{label} ({n})" for label, n in data.group_sizes().items())
    return f"**{data.source.get('name', 'data')}** — {data.n_rows} rows × {data.n_features} features; groups: {groups}"


# ---------------------------------------------------------------- cached audits
@st.cache_resource(show_spinner=False)
def _audit_store() -> OrderedDict:
    """Audit results shared by all sessions, keyed on (data fingerprint, configuration)."""
    return OrderedDict()


def audit_key(data, config: AuditConfig) -> str:
    return data.cache_key() + ":" + json.dumps(config.to_dict(), sort_keys=True, default=str)


def cached_result(data, config: AuditConfig) -> AuditResult | None:
    store = _audit_store()
    key = audit_key(data, config)
    if key in store:
        store.move_to_end(key)
        return store[key]
    return None


def run_with_progress(data, config: AuditConfig, label: str) -> AuditResult | None:
    """Run (or fetch) an audit, showing progress per fit; errors become ``st.error``."""
    cached = cached_result(data, config)
    if cached is not None:
        return cached
    bar = st.progress(0.0, text=f"{label}: starting…")
    started = time.perf_counter()

    def progress(event: dict) -> None:
        fraction = event["done"] / max(event["total"], 1)
        bar.progress(
            min(fraction, 1.0),
            text=f"{label}: {event['variant']} at rank {event['rank']} "
            f"({event['done']}/{event['total']} fits, {time.perf_counter() - started:.1f} s)",
        )

    try:
        result = run_audit(data, config, progress=progress)
    except FairAuditError as exc:
        bar.empty()
        show_error(exc)
        return None
    bar.empty()
    store = _audit_store()
    store[audit_key(data, config)] = result
    while len(store) > _CACHE_SIZE:
        store.popitem(last=False)
    return result


def remember(method: str, result: AuditResult) -> None:
    """Keep the latest result per family for the Report page."""
    st.session_state.setdefault("results", {})[method] = result


def results_for(data) -> dict[str, AuditResult]:
    """This session's latest result per family, for the current data only."""
    sha = data.fingerprint()["sha256"]
    return {m: r for m, r in st.session_state.get("results", {}).items() if r.data.get("sha256") == sha}


# ---------------------------------------------------------------- rendering results
def show_findings(result: AuditResult, method: str) -> None:
    for sentence in findings(result).get(method, []):
        st.info(sentence)


def show_figures(result: AuditResult, method: str, variants=None) -> None:
    """Per-group figures full width (vanilla and fair panels side by side), the rest two abreast."""
    figures = family_figures(result.records, method, variants)
    wide = {metric for kind, metric in FAMILY_FIGURES.get(method, []) if kind != "variant"}
    group_figures = [(m, f) for m, f in figures if m in wide]
    other = [(m, f) for m, f in figures if m not in wide]
    # Keys by position: a metric can have several figures (the CP family draws nkhsic both as a
    # frontier and over rank).
    for index, (metric, fig) in enumerate(group_figures):
        st.plotly_chart(fig, key=f"{method}-group-{index}-{metric}", width="stretch")
    for start in range(0, len(other), 2):
        columns = st.columns(2)
        for offset, (column, (metric, fig)) in enumerate(zip(columns, other[start : start + 2], strict=False)):
            with column:
                st.plotly_chart(fig, key=f"{method}-{start + offset}-{metric}", width="stretch")



def show_table(result: AuditResult, method: str) -> None:
    table = summary_table(result, method)
    if table.empty:
        return
    table["variant"] = [variant_title(method, v) for v in table["variant"]]
    numeric = [c for c in table.columns if c not in ("variant", "rank")]
    config = {c: st.column_config.NumberColumn(metric_title(c), format="%.4g") for c in numeric}
    st.subheader("Per-rank table")
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)


def show_details(result: AuditResult, method: str) -> None:
    """What a family attached to its fits (e.g. the selected columns), as a table."""
    rows = details_rows(result, method)
    if rows:
        st.subheader("Details per fit")
        st.dataframe(
            pd.DataFrame(rows, columns=["variant", "rank", "what", "value"]), hide_index=True, width="stretch"
        )


def show_notes(result: AuditResult) -> None:
    for skip in result.skipped:
        st.warning(f"Skipped {skip['variant']}: {skip['reason']}")
    for warning in result.warnings:
        st.caption(f"⚠ {warning}")


def show_explainers(result: AuditResult, method: str) -> None:
    used = [m for m in dict.fromkeys(result.records[result.records.method == method].metric) if m in METRIC_DEFINITIONS]
    with st.expander("What the metrics mean (definitions and sources)"):
        for metric in used:
            definition = METRIC_DEFINITIONS[metric]
            st.markdown(
                f"**{definition['title']}** (`{metric}`) — {definition['plain']}  \n"
                f"Definition: `{definition['formula']}` — *{definition['source']}*"
            )


def show_result(result: AuditResult, method: str, variants=None) -> None:
    show_findings(result, method)
    show_figures(result, method, variants)
    show_table(result, method)
    show_details(result, method)
    show_notes(result)
    show_explainers(result, method)
    st.caption(
        f"{FAMILY_TITLES.get(method, method)} audit of {result.data.get('name')} "
        f"(sha256 {str(result.data.get('sha256'))[:12]}…) in {result.seconds:.1f} s. "
        "The Report page exports everything shown here."
    )


def rank_range(label: str, limit: int, default_max: int = 10, key: str | None = None) -> tuple[int, ...]:
    if limit <= 1:
        st.caption("Rank: 1 (the data allow no other)")
        return (1,)
    low, high = st.slider(label, 1, limit, (1, min(default_max, limit)), key=key)
    return tuple(range(low, high + 1))


# ---------------------------------------------------------------- a method page
LEAKAGE_LABELS = {
    "qda": "QDA — fast; sees mean and covariance differences",
    "logistic": "logistic regression — linear leakage only",
    "hgb": "gradient boosting — nonlinear, slower",
    "mlp": "neural network (1,500 hidden units) — nonlinear, slowest",
}


def method_page(
    method: str,
    *,
    title: str,
    intro: str,
    variants: dict[str, str],
    default_variants: list[str],
    heavy: dict[str, str],
    rank_limit: int,
    rank_label: str = "Ranks to sweep",
    options_ui=None,
    default_leakage: str = "qda",
    ranks_ui=None,
    leakage_option: str | None = None,
    auto_run_max_cells: int = AUTO_RUN_MAX_CELLS,
) -> AuditResult | None:
    """The common shape of the PCA / NMF / feature-selection / tensor pages.

    ``heavy`` maps variant names to a warning shown when they are chosen; ``options_ui`` draws
    family options inside the form and returns them as ``AuditConfig.options[method]``;
    ``ranks_ui`` replaces the rank-range slider (it returns the ranks, or None for the family's
    default sweep). ``leakage_option`` names the family option that takes the leakage classifier
    (the CP family has its own) instead of the audit-wide setting.
    """
    data = current_data()
    st.title(title)
    text, sizes = st.columns([3, 1])
    with text:
        st.markdown(intro)
        st.caption(data_summary(data) + " — change it on the **Data** page.")
    with sizes:
        st.plotly_chart(group_sizes_figure(data.group_sizes()), key=f"{method}-group-sizes", config={"displayModeBar": False})
    with st.form(f"{method}-settings"):
        left, right = st.columns([3, 2])
        with left:
            chosen = st.multiselect(
                "Variants (vanilla and fair, shown side by side)",
                options=list(variants),
                default=default_variants,
                format_func=lambda v: variants[v],
                key=f"{method}-variants",
            )
        with right:
            ranks = ranks_ui() if ranks_ui else rank_range(rank_label, rank_limit, key=f"{method}-ranks")
        options = options_ui(data) if options_ui else {}
        leakage = st.selectbox(
            "Classifier for the leakage (unfairness) metrics",
            list(LEAKAGE_LABELS),
            index=list(LEAKAGE_LABELS).index(default_leakage),
            format_func=LEAKAGE_LABELS.get,
            key=f"{method}-leakage",
        )
        submitted = st.form_submit_button("Run audit", type="primary")
    if leakage_option:
        options = {**options, leakage_option: leakage}
    for variant in chosen:
        if variant in heavy:
            st.warning(f"{variants[variant]}: {heavy[variant]}")
    if not chosen:
        st.info("Choose at least one variant.")
        return None
    try:
        config = AuditConfig(
            methods=(method,),
            ranks=ranks,
            variants=tuple(chosen),
            leakage_classifier=leakage if not leakage_option else "qda",
            options={method: options} if options else {},
        )
    except FairAuditError as exc:
        show_error(exc)
        return None
    result = cached_result(data, config)
    small = data.n_rows * data.n_features <= auto_run_max_cells
    if result is None and (submitted or (small and not any(v in heavy for v in chosen))):
        result = run_with_progress(data, config, title)
    if result is None:
        st.info("Press **Run audit** to fit the chosen variants over the ranks.")
        return None
    remember(method, result)
    show_result(result, method, chosen)
    return result
