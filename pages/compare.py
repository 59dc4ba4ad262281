"""Compare page: two saved JSON reports (before/after a data change, two models) side by side —
what changed per metric and group, with the intervals when the reports have them. A thin view
over :mod:`fairaudit.compare` (the same comparison as ``python -m fairaudit compare``); reading
and matching two reports takes well under a second, so nothing here is a background run."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILY_TITLES
from fairaudit.compare import Comparison, compare, comparison_figure, render_html, report_with_findings
from fairaudit.errors import ParameterError
from fairaudit.plots import metric_label, variant_title
from fairaudit.vocabulary import term
from pages.common import kept_upload, plain, show_error, words

st.title("Compare two audits")
st.markdown(
    "Upload two JSON reports (the Report page's JSON download, or the command line's `--json`). Values are matched "
    "on (method, variant, rank, group, metric); *better* and *worse* follow each metric's direction (↓ better for a "
    "loss, gap, error or leakage; ↑ better for variance explained, balance, accuracy), and a change exceeds the "
    "intervals when the two intervals do not overlap."
)


def changes_view(comparison: Comparison, method: str, limit: int | None = None) -> pd.DataFrame:
    """The family's changed values of judged metrics as the page shows them: titles for variants,
    metrics with their better direction, the two audits' values under their names."""
    changes = comparison.largest_changes(limit=limit, method=method)
    a, b = comparison.names
    return pd.DataFrame({
        "variant": [variant_title(method, v) for v in changes.variant],
        "rank": changes["rank"].astype("Int64"),
        "group": changes.group.replace("", "all"),
        "metric": [metric_label(m) for m in changes.metric],
        a: changes.a,
        b: changes.b,
        "change": changes.change,
        "relative change": changes.relative,
        "judged": changes.judged,
        "beyond the intervals": changes.beyond.map({True: "yes", False: "no"}).fillna("no interval"),
    })


left, right = st.columns(2)
with left:
    first = kept_upload("First report (JSON)", "compare-a", ["json"])
with right:
    second = kept_upload("Second report (JSON)", "compare-b", ["json"])
if first is None or second is None:
    st.info("Upload both reports to compare them.")
    st.stop()

first_name, second_name = first[0], second[0]
default = f"{first_name}, {second_name}" if first_name != second_name and "," not in first_name + second_name else "A, B"
names_text = st.text_input("Names of the two audits", default, key="compare-names",
                           help="Two names separated by a comma, e.g. before, after; they label the values everywhere below.")
try:
    names = tuple(part.strip() for part in names_text.split(",") if part.strip())
    if len(names) != 2:
        raise ParameterError(f"give two names separated by a comma, e.g. {term('compare_names', 'before,after')}.")
    (a, found_a), (b, found_b) = (report_with_findings(raw, name=name) for name, raw in (first, second))
    comparison = compare(a, b, names=names, findings=(found_a, found_b))
except FairAuditError as exc:
    show_error(exc)
    st.stop()

for line in comparison.summary():
    st.markdown(plain(line))
counts = comparison.counts()
cols = st.columns(4)
cols[0].metric("Values compared", f"{counts['compared']:,}")
cols[1].metric("Changed", f"{counts['changed']:,}")
cols[2].metric("Better / worse", f"{counts['better']:,} / {counts['worse']:,}")
cols[3].metric("Beyond the intervals", f"{counts['beyond_interval']:,}" if counts["with_interval"] else "no intervals")
downloads = st.columns(2)
downloads[0].download_button("Download the comparison (HTML)", render_html(comparison).encode("utf-8"), file_name="comparison.html",
                             mime="text/html", key="compare-download-html", type="primary", on_click="ignore")
downloads[1].download_button("Download the matched values (CSV)", comparison.to_csv().encode("utf-8"), file_name="comparison.csv",
                             mime="text/csv", key="compare-download-csv", on_click="ignore",
                             help="One row per record key; text cells a spreadsheet would run as a formula get a leading '.")
if comparison.differences:
    st.subheader("What differs in the inputs")
    st.dataframe(
        pd.DataFrame([{"what": d["what"], names[0]: str(d["a"]), names[1]: str(d["b"])} for d in comparison.differences]),
        hide_index=True, width="stretch",
    )
for method in dict.fromkeys(comparison.table.method):
    st.subheader(FAMILY_TITLES.get(method, method))
    for side, sentences in zip(names, comparison.findings, strict=True):
        for sentence in sentences.get(method, []):
            st.info(f"**{plain(side)}** — {words(sentence)}")
    figure = comparison_figure(comparison, method)
    if figure is not None:
        st.plotly_chart(figure, key=f"compare-figure-{method}", width="stretch")
        st.caption("Each headline metric over rank: the first audit dashed with open markers, the second solid; "
                   "bars are the intervals where the reports have them.")
    view = changes_view(comparison, method)
    st.caption(f"{len(view):,} changed values of judged metrics, largest relative change first.")
    if len(view):
        st.dataframe(
            view, hide_index=True, width="stretch",
            column_config={
                names[0]: st.column_config.NumberColumn(names[0], format="%.4g"),
                names[1]: st.column_config.NumberColumn(names[1], format="%.4g"),
                "change": st.column_config.NumberColumn("change", format="%+.3g"),
                "relative change": st.column_config.NumberColumn("relative change", format="percent"),
            },
        )
