"""Compare page: two saved JSON reports (before/after a data change, two models) and the story
between them — first the verdicts that changed, then whether the data differ, then the values that
moved beyond their intervals; the inputs' differences, every changed value and the charts one
click away. A thin view over :mod:`fairaudit.compare` (the same comparison as ``python -m
fairaudit compare``); reading and matching two reports takes well under a second, so nothing here
is a background run."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.compare import (
    Comparison,
    beyond_intervals,
    change_cells,
    compare,
    comparison_figure,
    default_names,
    render_html,
    report_with_findings,
)
from fairaudit.errors import ParameterError
from fairaudit.families import FAMILY_TITLES
from fairaudit.findings import VERDICT_LABELS
from fairaudit.vocabulary import term
from pages.common import TABLE_ROWS, kept_upload, plain, show_error, words

st.title("Compare two audits")
st.caption(
    "Upload two JSON reports (the Report page's JSON download, or the command line's `--json`): before and after a "
    "data change, two models, two releases."
)

DIRECTIONS = {"regression": ("error", ":material/trending_down:"), "improvement": ("success", ":material/trending_up:"),
              "changed": ("info", ":material/swap_horiz:")}
"""How a changed verdict is shown: a regression (worse for the groups) red, an improvement green."""


def changes_table(comparison: Comparison, rows: pd.DataFrame) -> None:
    """Changed values in five short columns (:func:`fairaudit.compare.change_cells`): a table that
    wraps (nothing cut) up to :data:`TABLE_ROWS` rows, a grid beyond."""
    view = pd.DataFrame([change_cells(row, comparison.names) for _, row in rows.iterrows()])
    if len(view) <= TABLE_ROWS:
        st.table(view.map(plain).set_index("where"), border="horizontal")
    else:
        st.dataframe(view, hide_index=True, width="stretch", column_config={"change": st.column_config.TextColumn(width="large")})


def file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:60] or "audit"


left, right = st.columns(2)
with left:
    first = kept_upload("First report (JSON)", "compare-a", ["json"])
with right:
    second = kept_upload("Second report (JSON)", "compare-b", ["json"])
if first is None or second is None:
    st.info("Upload both reports to compare them.")
    st.stop()

try:
    (a, found_a), (b, found_b) = (report_with_findings(raw, name=name) for name, raw in (first, second))
except FairAuditError as exc:
    show_error(exc)
    st.stop()
default = ", ".join(default_names(a, b, (first[0], second[0])))
if st.session_state.get("compare-names-default") != default:  # new files: names from them, not the last pair's
    st.session_state["compare-names-default"] = default
    st.session_state["compare-names-kept"] = default if default.count(",") == 1 else "first, second"
    st.session_state["compare-names"] = st.session_state["compare-names-kept"]
elif "compare-names" not in st.session_state:  # Streamlit forgets a widget's value while its page is not shown
    st.session_state["compare-names"] = st.session_state.get("compare-names-kept", default)
names_text = st.text_input("Names of the two audits", key="compare-names",
                           help="Two names separated by a comma, e.g. before, after; they label the values everywhere below.")
st.session_state["compare-names-kept"] = names_text
try:
    names = tuple(part.strip() for part in names_text.split(",") if part.strip())
    if len(names) != 2:
        raise ParameterError(f"give two names separated by a comma, e.g. {term('compare_names', 'before,after')}.")
    comparison = compare(a, b, names=names, findings=(found_a, found_b))
except FairAuditError as exc:
    show_error(exc)
    st.stop()

# ---------------------------------------------------------------- the story: verdicts first
if comparison.data_note:
    st.warning(plain(comparison.data_note), icon=":material/difference:")
verdicts = comparison.verdicts
changed = [v for v in verdicts if v["changed"]]
st.subheader("Verdicts")
if not verdicts:
    st.info("Neither audit has verdicts to compare: their intervals were off, or they hold no finding.")
elif not changed:
    st.success(f"No verdict changed ({len(verdicts)} compared).", icon=":material/check:")
else:
    st.markdown(f"**{len(changed)} of {len(verdicts)} verdicts changed**, regressions first:")
    for verdict in changed:
        kind, icon = DIRECTIONS[verdict["direction"]]
        getattr(st, kind)(plain(verdict["sentence"]), icon=icon)
unchanged = [v for v in verdicts if not v["changed"]]
if unchanged:
    with st.expander(f"Unchanged verdicts ({len(unchanged)})"):
        for verdict in unchanged:
            st.markdown("- " + plain(verdict["sentence"]))

st.subheader("Values that moved beyond their intervals")
moved = beyond_intervals(comparison, limit=None)
counts = comparison.counts()
if len(moved):
    changes_table(comparison, moved.head(TABLE_ROWS))
    st.caption(f"{len(moved):,} of {counts['changed']:,} changed values exceed their intervals; largest relative change first.")
elif counts["with_interval"]:
    st.markdown(f"None: of {counts['changed']:,} changed values, no change exceeds the intervals.")
else:
    st.markdown("Neither report has intervals (bootstrap), so no change can be told apart from noise here.")
st.caption(plain(
    f"{counts['compared']:,} values in both audits: {counts['changed']:,} changed ({counts['better']:,} better, "
    f"{counts['worse']:,} worse by their metric's direction — ↓ better for a loss, gap, error or leakage; ↑ for variance "
    f"explained, balance, accuracy); {counts['only_a']:,} only in {names[0]}, {counts['only_b']:,} only in {names[1]}."
))

stem = f"comparison-{file_stem(names[0])}-vs-{file_stem(names[1])}"
downloads = st.columns(2)
downloads[0].download_button("Download the comparison (HTML)", render_html(comparison).encode("utf-8"), file_name=f"{stem}.html",
                             mime="text/html", key="compare-download-html", type="primary", on_click="ignore")
downloads[1].download_button("Download the matched values (CSV)", comparison.to_csv().encode("utf-8"), file_name=f"{stem}.csv",
                             mime="text/csv", key="compare-download-csv", on_click="ignore",
                             help="One row per record key; text cells a spreadsheet would run as a formula get a leading '.")

# ---------------------------------------------------------------- one click away
with st.expander(f"What differs in the inputs ({len(comparison.differences)})" if comparison.differences
                 else "What differs in the inputs: nothing (the same data and configuration)"):
    if comparison.differences:
        table = pd.DataFrame([{"setting": d["what"], names[0]: d["a"], names[1]: d["b"]} for d in comparison.differences])
        if len(table) <= TABLE_ROWS:
            st.table(table.map(plain).set_index("setting"), border="horizontal")
        else:
            st.dataframe(table, hide_index=True, width="stretch")
for method in dict.fromkeys(comparison.table.method):
    changes = comparison.largest_changes(limit=None, method=method)
    with st.expander(f"{FAMILY_TITLES.get(method, method)}: the charts, every finding and {len(changes):,} changed values"):
        figure = comparison_figure(comparison, method)
        if figure is not None:
            st.plotly_chart(figure, key=f"compare-figure-{method}", width="stretch")
            st.caption("Each headline metric over rank: the first audit dashed with open markers, the second solid; "
                       "bars are the intervals where the reports have them.")
        for side, found in zip(names, comparison.findings, strict=True):
            for item in found.get(method, []):
                label = VERDICT_LABELS.get(item.get("verdict"), "")
                st.markdown(f"**{plain(side)}** · *{plain(label)}* — {words(str(item.get('text', '')))}")
        if len(changes):
            changes_table(comparison, changes)
