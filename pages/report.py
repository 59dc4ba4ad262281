"""Report page: everything audited on the current data, as one self-contained HTML file, JSON,
CSV, or a ZIP of all three (the same report as the command line's --html/--json/--csv).

It reads the session's latest result per family each time it is drawn (a run that ends while
the user is here reruns the page), so it never shows a stale state; it can also start the
default audit of the families not audited yet, with one overall progress bar."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILIES, AuditConfig, combine_results
from fairaudit.card import audit_card, card_markdown
from fairaudit.families import FAMILY_TITLES
from fairaudit.findings import findings, verdict_rules
from fairaudit.formatting import level, number, plural
from fairaudit.report import UNCERTAINTY_HEADER, report_files, uncertainty_rows, verdict_settings, zip_files
from fairaudit.uncertainty import default_replicates
from pages.common import (
    chosen_references,
    current_data,
    data_summary,
    data_token,
    plain,
    registry,
    results_for,
    runs_panel,
    saved_settings,
    show_audit_summary,
    show_error,
    show_findings_list,
    show_last_run_messages,
    start_run,
    uncertainty_controls,
    words,
)

st.title("Report")
data = current_data()
st.caption(data_summary(data))
answer = st.container()  # the audit summary, once there are results (drawn below)

st.markdown(
    "The report holds the data fingerprint (file name, sha256, rows, group sizes), the "
    "configuration, library versions, every figure with its intervals, the tidy records (each value with "
    "its interval, ci_low–ci_high), the findings with their verdicts and the rules behind them, and the "
    "metric definitions with their sources. It is one HTML file with plotly.js inside: it opens "
    "offline, in any browser, and can be handed to someone else as it is."
)
reg = registry()
token = data_token()
running = [run for run in reg.active() if run.data_token == token]
results = results_for()
missing = [m for m in FAMILIES if m not in results]
pending = {m for run in running for m in run.methods}
if missing:
    names = ", ".join(FAMILY_TITLES.get(m, m) for m in missing)
    st.info(f"Not audited yet on this data: {names}. Run them on their pages, or all at once with the defaults here.")
    to_run = [m for m in missing if m not in pending]
    if to_run:
        saved = saved_settings("report")
        with st.form("report-run-all-settings"):
            trust = uncertainty_controls("report", saved, {m: default_replicates(m) for m in to_run})
            submitted = st.form_submit_button(
                "Run the default audit of " + ", ".join(FAMILY_TITLES.get(m, m) for m in to_run),
                key="report-run-all", type="primary",
                help="In the background: every family's numbers first (each shows on its page as soon as it is in), then every "
                     "family's intervals. You can look at other pages meanwhile and cancel it; cancelling keeps the numbers.",
            )
        try:
            configs = [(method, AuditConfig(methods=(method,), **trust)) for method in to_run]
        except FairAuditError as exc:
            show_error(exc)
        else:
            st.caption("Every family's numbers come first, then their intervals; the time each takes is measured as the "
                       "run goes (beside its progress bar).")
            if submitted:
                settings = st.session_state.setdefault("settings", {})
                settings["report"] = dict(trust)
                for method in to_run:  # each family page then shows the settings that produced its result
                    settings[method] = {**settings.get(method, {}), **trust}
                start_run("Default audit of every family", configs)
                st.rerun()
runs_panel("report")
show_last_run_messages()
ready = [m for m in FAMILIES if m not in results and registry().estimates_for(m, data_token()) is not None]
if ready:  # a run's numbers are in on their pages; the report waits for their intervals and verdicts
    st.info(
        f"Numbers ready, intervals running: {', '.join(FAMILY_TITLES.get(m, m) for m in ready)} — each family's page "
        "shows its point estimates now; the report includes a family when its intervals and verdicts are in.",
        icon=":material/hourglass_top:",
    )

if not results:
    st.stop()

identity = tuple((m, id(results[m].records), chosen_references().get(m)) for m in FAMILIES if m in results)  # the reference: judged anew
built = st.session_state.get("report-built")
if built is None or built[0] != identity:  # build once per set of results, not on every rerun
    try:
        combined = combine_results([results[m] for m in FAMILIES if m in results])
    except FairAuditError as exc:
        show_error(exc)
        st.stop()
    with st.spinner("Building the report: every figure, the records, the findings…"):
        found = findings(combined)
        files = report_files(combined, found, interface="dashboard")
        built = (identity, combined, found, files, zip_files(files))
    st.session_state["report-built"] = built
_, combined, found, files, zipped = built
with answer:
    st.subheader("Audit summary")
    show_audit_summary(found)
    st.caption("Per family: whether vanilla shows a gap (where, between whom), which fair variants close it and at what "
               "cost, which do not. The findings in full are below, each family's charts on its page and in the HTML report.")
stem = str(combined.data.get("name", "data")).rsplit(".", 1)[0] or "data"
stem += "-" + "".join(ch for ch in str(combined.created or "")[:16] if ch.isdigit() or ch == "T").replace("T", "-")  # two downloads: two names
html = files["report.html"]
columns = st.columns(4)
columns[0].download_button("HTML report", html, file_name=f"fairaudit-{stem}.html", mime="text/html", on_click="ignore", type="primary")
columns[1].download_button("JSON", files["report.json"], file_name=f"fairaudit-{stem}.json", mime="application/json", on_click="ignore")
columns[2].download_button("CSV records", files["records.csv"], file_name=f"fairaudit-{stem}-records.csv", mime="text/csv", on_click="ignore")
columns[3].download_button("ZIP of all three", zipped, file_name=f"fairaudit-{stem}.zip", mime="application/zip", on_click="ignore")
card = audit_card(combined, found, interface="dashboard")
cards = st.columns(4)
cards[0].download_button("Audit card (Markdown)", card_markdown(card), file_name=f"fairaudit-{stem}-card.md", mime="text/markdown",
                         on_click="ignore", help="Data hash, configuration, versions, every verdict and the rules: to sit beside a model card.")
cards[1].download_button("Audit card (JSON)", json.dumps(card, indent=1, ensure_ascii=False, default=str), file_name=f"fairaudit-{stem}-card.json",
                         mime="application/json", on_click="ignore")
st.caption(
    f"{len(combined.records):,} records from {', '.join(FAMILY_TITLES.get(m, m) for m in results)} on "
    f"{plain(combined.data.get('name'))}; HTML {len(html) / 1e6:.1f} MB. Every download carries the same "
    "intervals (ci_low, ci_high) and verdicts as below."
)

st.subheader("Findings")
for method, items in found.items():
    if items:
        st.markdown(f"#### {FAMILY_TITLES.get(method, method)}")
        show_findings_list(items)

rows = uncertainty_rows(combined, "dashboard")
if rows:
    st.subheader("Intervals")
    frame = pd.DataFrame(rows, columns=UNCERTAINTY_HEADER)
    why = UNCERTAINTY_HEADER[2]
    st.dataframe(  # the reasons last: they are sentences, the rest fits beside them
        frame[[c for c in UNCERTAINTY_HEADER if c != why] + [why]], hide_index=True, width="stretch",
        column_config={why: st.column_config.TextColumn(why, width="large")},
    )
with st.expander("Verdicts and their rules"):
    settings = verdict_settings(combined)
    for families, flag, confidence, least in settings:
        st.markdown(
            (f"**{', '.join(FAMILY_TITLES.get(m, m) for m in families)}** — " if len(settings) > 1 else "")
            + f"gap tolerance {plain(number(flag))}×, confidence {plain(level(confidence))}, groups of at least "
            f"{plain(plural(least, 'row'))} judged:"
        )
        for rule in verdict_rules(flag, confidence, least).values():
            st.markdown("- " + words(rule))
