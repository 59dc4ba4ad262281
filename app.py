"""fairaudit dashboard: ``streamlit run app.py`` (or ``make app``).

The entry point is a router: it sets the page up, makes sure there is data (the embedded default
sample on first open), shows the session's running audits in the sidebar (from every page) and
hands over to the page the user chose. Pages are thin views over the ``fairaudit`` package; no
mathematics happens here. An unexpected error on a page becomes one readable line on the page and
a traceback in the server's log, never a traceback in the browser.
"""

from __future__ import annotations

import logging

import streamlit as st

from fairaudit import FairAuditError
from pages.common import current_data, data_summary, runs_panel, settle_runs, show_bug, show_error, timed_page_run, warm_workers

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

st.set_page_config(page_title="fairaudit — fairness audit for unsupervised learning", page_icon="⚖️", layout="wide")

PAGES = {
    "Start here": [
        st.Page("pages/data.py", title="Data", icon=":material/table:", default=True),
    ],
    "Audit": [
        st.Page("pages/pca.py", title="PCA", icon=":material/scatter_plot:"),
        st.Page("pages/nmf.py", title="NMF", icon=":material/grid_view:"),
        st.Page("pages/feature_selection.py", title="Feature selection", icon=":material/filter_list:"),
        st.Page("pages/tensor.py", title="Tensor", icon=":material/view_in_ar:"),
    ],
    "Export": [
        st.Page("pages/report.py", title="Report", icon=":material/description:"),
    ],
    "Take it further": [
        st.Page("pages/models.py", title="Models", icon=":material/deployed_code:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
}

page = st.navigation(PAGES)
settle_runs()
warm_workers()
with st.sidebar:
    # The answer first: less empty space above a page's question, a title that fits one line, compact
    # tables (a table wider than a narrow window scrolls sideways inside it, its first columns in view).
    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.5rem}"
            "[data-testid='stMainBlockContainer'] h1{font-size:1.9rem}"
            "[data-testid='stMainBlockContainer'] [data-testid='stMarkdownContainer'] table{font-size:.875rem;display:block;overflow-x:auto}"
            "[data-testid='stMainBlockContainer'] [data-testid='stMarkdownContainer'] :is(td,th){padding:.2rem .5rem;line-height:1.35}</style>")
    st.markdown("### fairaudit")
    st.caption("Does your representation serve every group equally well? Vanilla vs fair, side by side.")
    st.caption("Data in use: " + data_summary(current_data()))
    runs_panel("sidebar")
try:
    with timed_page_run():
        page.run()
except FairAuditError as exc:  # a page let a bad-input error through: still the user's words
    show_error(exc)
except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback reaches the page
    show_bug(exc, page.title)
