"""fairaudit dashboard: ``streamlit run app.py`` (or ``make app``).

The entry point is a router: it sets the page up, makes sure there is data (the embedded default
sample on first open) and hands over to the page the user chose. Pages are thin views over the
``fairaudit`` package; no mathematics happens here.
"""

from __future__ import annotations

import streamlit as st

from pages.common import current_data, data_summary

st.set_page_config(page_title="fairaudit — fairness audit for unsupervised learning", page_icon="⚖️", layout="wide")

PAGES = {
    "Audit": [
        st.Page("pages/pca.py", title="PCA", icon=":material/scatter_plot:", default=True),
        st.Page("pages/nmf.py", title="NMF", icon=":material/grid_view:"),
        st.Page("pages/feature_selection.py", title="Feature selection", icon=":material/filter_list:"),
        st.Page("pages/tensor.py", title="Tensor", icon=":material/view_in_ar:"),
    ],
    "Data and report": [
        st.Page("pages/data.py", title="Data", icon=":material/table:"),
        st.Page("pages/report.py", title="Report", icon=":material/description:"),
    ],
    "Take it further": [
        st.Page("pages/models.py", title="Models", icon=":material/deployed_code:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
}

page = st.navigation(PAGES)
with st.sidebar:
    st.markdown("### fairaudit")
    st.caption("Does your representation serve every group equally well? Vanilla vs fair, side by side.")
    st.caption("Data in use: " + data_summary(current_data()))
page.run()
