"""PCA page: vanilla PCA vs Fair PCA (and JEVD-PCA, covFairPCA) over a rank sweep."""

from __future__ import annotations

import streamlit as st

from fairaudit.audit import AuditConfig
from fairaudit.pca.audit import DEFAULT_OPTIONS
from fairaudit.pca.jevd import SOLVERS as JEVD_SOLVERS
from fairaudit.plots import VARIANT_TITLES
from fairaudit.vocabulary import OPTIONS
from pages.common import current_data, method_page

AUTO_RUN_MAX_CELLS = 2_000_000
AUTO_RUN_MAX_FEATURES = 100
"""The PCA page runs its default audit on first open below these sizes: measured 0.8 s on the
600 × 10 default sample and a few seconds at 30,000 × 24 (the default variants' cost grows with
rows × features and with the cube of the features)."""

data = current_data()
titles = VARIANT_TITLES["pca"]
limits = AuditConfig()  # the audit's size limits for the SDP and multiplicative weights
heavy = {
    "fair_sdp": "solves the same problem as the exact eigen-solver, with an SDP (CVXPY): seconds per rank at 10 "
    "features, minutes at 30 and above; it is here to check the exact solver.",
    "fair_mw": "solves the same problem approximately with hundreds of eigen-decompositions per rank; slower than "
    "the exact eigen-solver and here to check it.",
}
if data.n_features > limits.sdp_max_features:
    heavy["fair_sdp"] = (
        f"the SDP has a {data.n_features}×{data.n_features} matrix variable; expect minutes per rank "
        "(the exact eigen-solver gives the same answer in a fraction of a second)."
    )
if data.n_features > limits.mw_max_features:
    heavy["fair_mw"] = "hundreds of large eigen-decompositions per rank; expect minutes."


def options(data, saved: dict) -> dict:
    solver = st.selectbox(
        "JEVD-PCA scheme", JEVD_SOLVERS, index=JEVD_SOLVERS.index(saved.get("jevd_solver", DEFAULT_OPTIONS["jevd_solver"])),
        format_func=OPTIONS["jevd_solver"].choices.get, key="pca-jevd-solver",
        help="The paper's Algorithm 1 diverges on standardised data (the default scaling) and converges slowly on raw "
        "features of unequal scales; the report names the scheme that ran.",
    )
    return {"jevd_solver": solver}


method_page(
    "pca",
    title="PCA: does the projection serve every group equally?",
    intro=(
        "Vanilla PCA keeps the directions with the most variance in the *pooled* data, so a large "
        "group can crowd out a small one. A group's *loss* is the extra reconstruction error it "
        "suffers compared with its own best rank-d approximation. **Fair PCA** (Samadi et al., "
        "NeurIPS 2018) makes the largest group loss as small as possible and may use one extra "
        "dimension per additional group to do it."
    ),
    variants=titles,
    heavy=heavy,
    rank_limit=data.n_features,
    rank_label="Ranks d to sweep (number of components)",
    auto_run=data.n_rows * data.n_features <= AUTO_RUN_MAX_CELLS and data.n_features <= AUTO_RUN_MAX_FEATURES,
    options_ui=options,
    subgroups=True,
)
