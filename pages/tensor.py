"""Tensor page: CP decomposition of the entity × … tensor, vanilla vs FATR, HSIC and KHSIC."""

from __future__ import annotations

import streamlit as st

from fairaudit.cpd._kernels import NYSTROM_LANDMARKS, NYSTROM_ROWS
from fairaudit.cpd.audit import DEFAULT_OPTIONS
from fairaudit.cpd.estimator import rank_limit
from fairaudit.plots import VARIANT_TITLES
from pages.common import current_data, method_page

data = current_data()
shape = data.tensor_shape or (data.n_rows, data.n_features)
limit = rank_limit(shape)
khsic_limit = DEFAULT_OPTIONS["khsic_max_rows"]
heavy = {}
if shape[0] > NYSTROM_ROWS:
    heavy["khsic"] = (
        f"{shape[0]} entities: KHSIC approximates the {shape[0]}×{shape[0]} kernel of the entity embedding "
        f"(Nyström, {NYSTROM_LANDMARKS} landmark entities; noted in the warnings). The default audit took ~40 s at "
        f"3,000 entities and ~85 s at 5,000 on two cores; above {khsic_limit:,} KHSIC is skipped unless "
        "you tick “Run KHSIC anyway”."
    )


def options(data) -> dict:
    left, middle, right = st.columns(3)
    with left:
        sweep = st.checkbox("λ sweep (the fit–unfairness frontier)", value=True, key="cpd-sweep")
    with middle:
        points = int(st.number_input("λ values in the sweep", 2, 20, 10, key="cpd-points"))
    with right:
        sweep_rank = int(st.number_input("CP rank of the sweep", 1, limit, min(limit, 8), key="cpd-sweep-rank"))
    chosen = {"sweep": sweep, "n_lambdas": points, "sweep_rank": sweep_rank}
    if shape[0] > khsic_limit and st.checkbox(
        f"Run KHSIC anyway ({shape[0]:,} entities, above the {khsic_limit:,} limit: expect minutes)", key="cpd-khsic-anyway"
    ):
        chosen["khsic_max_rows"] = shape[0]
    return chosen


layout = (
    f"a tensor of shape {' × '.join(map(str, shape))} (modes: {', '.join(data.tensor_modes)})"
    if data.tensor_shape
    else f"the {shape[0]} × {shape[1]} data matrix as a 2-way tensor (rows are the entities)"
)
method_page(
    "cpd",
    title="Tensor (CP): does the entity embedding reveal the group?",
    intro=(
        "A CP decomposition gives every entity (a user, a patient, a row) an embedding — the rows of "
        "the factor **A** — that downstream models reuse. If it encodes the group, they inherit it. "
        "**KHSIC-BCD** (Kim & Gittens, *Learning fair canonical polyadical decompositions using a "
        "kernel independence criterion*) penalises the RBF-kernel HSIC between A and the groups; "
        "**HSIC-BCD** uses a linear kernel and **FATR** (Zhu et al. 2018) makes A orthogonal to the "
        "group indicator — which, as their Theorem 1 shows, can leave the group perfectly predictable. "
        f"Here: {layout}. The λ sweep draws residual fit against leakage."
    ),
    variants=VARIANT_TITLES["cpd"],
    default_variants=list(VARIANT_TITLES["cpd"]),
    heavy=heavy,
    rank_limit=limit,
    rank_label="CP ranks to sweep",
    options_ui=options,
    leakage_option="leakage_classifier",
)
