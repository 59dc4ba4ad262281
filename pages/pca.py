"""PCA page: vanilla PCA vs Fair PCA (and JEVD-PCA, covFairPCA) over a rank sweep."""

from __future__ import annotations

import streamlit as st

from fairaudit.audit import AuditConfig
from fairaudit.pca.audit import DEFAULT_OPTIONS
from fairaudit.pca.jevd import SOLVERS as JEVD_SOLVERS
from fairaudit.plots import VARIANT_TITLES
from fairaudit.vocabulary import OPTIONS
from pages.common import current_data, method_page

data = current_data()
titles = VARIANT_TITLES["pca"]
limits = AuditConfig()  # the audit's size limits for the SDP and multiplicative weights
heavy = {}
if data.n_features > limits.sdp_max_features:
    heavy["fair_sdp"] = (
        f"the SDP has a {data.n_features}×{data.n_features} matrix variable; expect minutes per rank "
        "(the exact eigen-solver gives the same answer in a fraction of a second)."
    )
if data.n_features > limits.mw_max_features:
    heavy["fair_mw"] = "hundreds of large eigen-decompositions per rank; expect minutes."
# The SDP and multiplicative weights solve the same problem as the exact solver (slower, and
# approximately for mw): they are offered, not run by default.
defaults = [v for v in titles if v not in ("fair_sdp", "fair_mw")]



def options(data) -> dict:
    scheme = OPTIONS["jevd_solver"]
    solver = st.selectbox(
        scheme.widget, JEVD_SOLVERS, index=JEVD_SOLVERS.index(DEFAULT_OPTIONS["jevd_solver"]),
        format_func=scheme.choices.get, key="pca-jevd-solver",
        help="The paper's Algorithm 1 diverges on most real data; the report names the scheme that ran.",
    )
    return {"jevd_solver": solver}


method_page(
    "pca",
    title="PCA: does the projection serve every group equally?",
    intro=(
        "Vanilla PCA keeps the directions with the most variance in the *pooled* data, so a large "
        "group can crowd out a small one. **Fair PCA** (Samadi et al., NeurIPS 2018) minimises the "
        "largest group *loss* — the extra reconstruction error a group suffers compared with its own "
        "best rank-d approximation — and may use one extra dimension per additional group to do it."
    ),
    variants=titles,
    default_variants=defaults,
    heavy=heavy,
    rank_limit=data.n_features,
    auto_run_max_cells=2_000_000,  # a PCA audit of 30,000 × 24 takes a few seconds
    options_ui=options,
)
