"""fairaudit dashboard (``streamlit run app.py``): opens on an embedded sample, already audited.

A thin view: widgets → :mod:`fairaudit` → :mod:`fairaudit.plots` figures. No mathematics here.
"""

from __future__ import annotations

import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.findings import findings
from fairaudit.plots import family_figures
from fairaudit.report import render_html, summary_table
from fairaudit.samples import DEFAULT_SAMPLE, SAMPLES, load_sample

st.set_page_config(page_title="fairaudit", layout="wide")


@st.cache_data(show_spinner=False)
def _audit_sample(name: str, ranks: tuple[int, ...]):
    data = load_sample(name)
    return run_audit(data, AuditConfig(methods=("pca",), ranks=ranks))


st.title("fairaudit — does your PCA represent every group equally well?")
names = list(SAMPLES)
choice = st.sidebar.selectbox(
    "Sample data set", names, index=names.index(DEFAULT_SAMPLE), format_func=lambda n: SAMPLES[n].title
)
st.sidebar.caption(SAMPLES[choice].description)
max_rank = st.sidebar.slider("Largest rank", 1, 10, 6)
try:
    with st.spinner("Auditing…"):
        result = _audit_sample(choice, tuple(range(1, max_rank + 1)))
except FairAuditError as exc:
    st.error(str(exc))
    st.stop()

for sentence in findings(result).get("pca", []):
    st.info(sentence)
for metric, fig in family_figures(result.records, "pca"):
    st.plotly_chart(fig, key=f"pca-{metric}")
st.subheader("Per-rank summary")
st.dataframe(summary_table(result, "pca"), hide_index=True)
st.download_button("Download the HTML report", render_html(result), file_name="fairaudit-report.html", mime="text/html")
