"""Compare page: two saved JSON reports (before/after a data change, two models) side by side —
what changed per metric and group, with the intervals when the reports have them. A thin view
over :mod:`fairaudit.compare` (the same comparison as ``python -m fairaudit compare``)."""

from __future__ import annotations

import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILY_TITLES
from fairaudit.compare import compare, comparison_figure, render_html, report_with_findings
from fairaudit.errors import ParameterError
from pages.common import plain, show_error

st.title("Compare two audits")
st.markdown(
    "Upload two JSON reports (the Report page's JSON download, or the command line's `--json`). Values are matched "
    "on (method, variant, rank, group, metric); *better* and *worse* follow each metric's direction (a loss, gap, "
    "error or leakage is better lower), and a change exceeds the intervals when the two intervals do not overlap."
)
left, right = st.columns(2)
first = left.file_uploader("First report (JSON)", type=["json"], key="compare-a")
second = right.file_uploader("Second report (JSON)", type=["json"], key="compare-b")
if first is not None and second is not None:
    default = f"{first.name}, {second.name}" if first.name != second.name and "," not in first.name + second.name else "A, B"
    names_text = st.text_input("Names of the two audits", default, key="compare-names")
    try:
        names = tuple(part.strip() for part in names_text.split(",") if part.strip())
        if len(names) != 2:
            raise ParameterError("give two names separated by a comma (e.g. before, after).")
        (a, found_a), (b, found_b) = (report_with_findings(f.getvalue(), name=f.name) for f in (first, second))
        comparison = compare(a, b, names=names, findings=(found_a, found_b))
    except FairAuditError as exc:
        show_error(exc)
    else:
        for line in comparison.summary():
            st.markdown(plain(line))
        counts = comparison.counts()
        cols = st.columns(4)
        cols[0].metric("Values compared", counts["compared"])
        cols[1].metric("Changed", counts["changed"])
        cols[2].metric("Better / worse", f"{counts['better']} / {counts['worse']}")
        cols[3].metric("Beyond the intervals", counts["beyond_interval"] if counts["with_interval"] else "no intervals")
        if comparison.differences:
            st.subheader("What differs in the inputs")
            st.dataframe([{"what": d["what"], names[0]: str(d["a"]), names[1]: str(d["b"])} for d in comparison.differences], hide_index=True)
        for method in dict.fromkeys(comparison.table.method):
            st.subheader(FAMILY_TITLES.get(method, method))
            for side, sentences in zip(names, comparison.findings, strict=True):
                for sentence in sentences.get(method, []):
                    st.info(plain(f"{side}: {sentence}"))
            figure = comparison_figure(comparison, method)
            if figure is not None:
                st.plotly_chart(figure, key=f"compare-figure-{method}")
            changes = comparison.largest_changes(limit=None, method=method)
            st.caption(f"{len(changes)} changed values of judged metrics, largest relative change first")
            st.dataframe(changes.drop(columns=["method", "scale"]), hide_index=True)
        st.download_button("Download the comparison (HTML)", render_html(comparison).encode("utf-8"), file_name="comparison.html",
                           mime="text/html", key="compare-download-html")
        st.download_button("Download the matched values (CSV)", comparison.to_csv().encode("utf-8"), file_name="comparison.csv",
                           mime="text/csv", key="compare-download-csv")
