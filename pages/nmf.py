"""NMF page: standard NMF vs Fairer-NMF (multiplicative updates and alternating minimisation)."""

from __future__ import annotations

import streamlit as st

from fairaudit.data import NONNEGATIVE_POLICIES
from fairaudit.nmf.audit import DEFAULT_OPTIONS, am_too_slow
from fairaudit.plots import VARIANT_TITLES
from pages.common import current_data, method_page

NONNEGATIVE_LABELS = {
    "error": "stop and say where the negative values are",
    "shift": "shift each feature by its minimum",
    "clip": "set negative cells to 0",
}

data = current_data()
heavy = {}
reason = am_too_slow(data.n_rows, data.n_features, DEFAULT_OPTIONS)
if reason:
    heavy["fair_am"] = reason


def options(data) -> dict:
    left, right = st.columns(2)
    with left:
        policy = st.selectbox(
            "Negative values (NMF needs non-negative data)",
            NONNEGATIVE_POLICIES,
            index=NONNEGATIVE_POLICIES.index("shift" if (data.X_raw < 0).any() else "error"),
            format_func=NONNEGATIVE_LABELS.get,
            key="nmf-nonnegative",
        )
    with right:
        zero_rows = st.selectbox(
            "Rows that are all zero", ["error", "drop"], format_func={"error": "stop and name them", "drop": "leave them out"}.get, key="nmf-zero-rows"
        )
    if (data.X_raw < 0).any():
        st.caption("This data has negative values; the paper's preprocessing needs them shifted or clipped first.")
    return {"nonnegative": policy, "zero_rows": zero_rows}


method_page(
    "nmf",
    title="NMF: are all groups' parts represented?",
    intro=(
        "Non-negative matrix factorisation explains each row as a mix of a few non-negative parts. "
        "Fit to everyone at once, it explains small or complex groups worse. **Fairer-NMF** (Kassab, "
        "George, Needell et al., *Towards a Fairer Non-negative Matrix Factorization*) minimises the "
        "largest *relative loss*: a group's error above what an NMF of that group alone achieves "
        "(E_ℓ, the mean of 5 single-group runs), divided by the group's size in norm. Features are "
        "scaled to unit ℓ2 norm first (the paper's §6.1)."
    ),
    variants=VARIANT_TITLES["nmf"],
    default_variants=[v for v in VARIANT_TITLES["nmf"] if v not in heavy],
    heavy=heavy,
    rank_limit=min(data.n_features, min(data.group_sizes().values())),
    options_ui=options,
)
