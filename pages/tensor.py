"""Tensor page: CP decomposition of the entity × … tensor, vanilla vs FATR, HSIC and KHSIC."""

from __future__ import annotations

import streamlit as st

from fairaudit.cpd._kernels import NYSTROM_LANDMARKS, NYSTROM_ROWS
from fairaudit.cpd.audit import DEFAULT_OPTIONS
from fairaudit.cpd.estimator import FORMULATIONS, KERNELS, rank_limit
from fairaudit.plots import VARIANT_TITLES
from fairaudit.vocabulary import OPTIONS
from pages.common import current_data, method_page

KERNEL_LABELS = {
    "auto": "automatic",
    "exact": "exact",
    "nystrom": "Nyström",
}
"""Short, so the menu in its third of the page is read whole; the help says what each does."""
KERNEL_HELP = (
    f"**automatic**: exact up to {NYSTROM_ROWS:,} entities, Nyström above. **exact**: the whole n × n kernel, "
    f"O(n²) per step. **Nyström**: an approximation from {NYSTROM_LANDMARKS} landmark entities, faster on many entities."
)

data = current_data()
shape = data.tensor_shape or (data.n_rows, data.n_features)
limit = rank_limit(shape)
khsic_limit = DEFAULT_OPTIONS["khsic_max_rows"]
heavy = {}
if shape[0] > NYSTROM_ROWS:
    heavy["khsic"] = (
        f"{shape[0]:,} entities: KHSIC approximates the {shape[0]:,}×{shape[0]:,} kernel of the entity embedding "
        f"(Nyström, {NYSTROM_LANDMARKS} landmark entities; noted in the warnings). The default audit took ~48 s at "
        f"3,000 entities and ~65 s at 5,000 on two shared cores; above {khsic_limit:,} KHSIC is skipped unless "
        "you tick “Run KHSIC anyway”."
    )


def options(data, saved: dict) -> dict:
    left, middle, right = st.columns(3)
    with left:
        sweep = st.checkbox("λ sweep (the fit–leakage frontier)", value=saved.get("sweep", True), key="cpd-sweep")
        points = int(st.number_input("λ values in the sweep", 2, 20, int(saved.get("n_lambdas", DEFAULT_OPTIONS["n_lambdas"])),
                                     key="cpd-points"))
    with middle:
        sweep_rank = int(st.number_input("CP rank of the sweep", 1, limit, min(limit, int(saved.get("sweep_rank", 8))),
                                         key="cpd-sweep-rank"))
        epochs = int(st.number_input("Largest number of epochs per fit", 1, 10_000, int(saved.get("n_epochs", DEFAULT_OPTIONS["n_epochs"])),
                                     key="cpd-epochs", help="A fit stops earlier when its objective settles."))
    with right:
        kernel = st.selectbox(
            "KHSIC kernel", KERNELS, index=KERNELS.index(saved.get("khsic_kernel", DEFAULT_OPTIONS["khsic_kernel"])),
            format_func=KERNEL_LABELS.get, key="cpd-kernel", help=KERNEL_HELP,
        )
    formulation_labels = OPTIONS["cpd_formulation"].choices
    formulation = st.selectbox(
        "Formulation", list(FORMULATIONS),
        index=list(FORMULATIONS).index(saved.get("formulation", DEFAULT_OPTIONS["formulation"])),
        format_func=lambda v: formulation_labels.get(v, v), key="cpd-formulation",
        help="fairaudit (default): penalties on the normalised embedding, median-heuristic γ, a line-search solver and "
        "λ scaled to the data. paper: Kim & Gittens' Algorithm 1 as printed — fixed gradient steps, penalties on the "
        "factor A, γ = 1 and the paper's λ values; slow, and its step sizes diverge on most data (the skipped fits say so).",
    )
    chosen = {"sweep": sweep, "n_lambdas": points, "sweep_rank": sweep_rank, "n_epochs": epochs, "khsic_kernel": kernel,
              "formulation": formulation}
    if shape[0] > khsic_limit and st.checkbox(
        f"Run KHSIC anyway ({shape[0]:,} entities, above the {khsic_limit:,} limit: expect minutes)",
        value="khsic_max_rows" in saved, key="cpd-khsic-anyway",
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
        "The fair methods add a penalty on how much A depends on the group, weighted by λ: "
        "**KHSIC-BCD** (Kim & Gittens, *Learning fair canonical polyadical decompositions using a "
        "kernel independence criterion*) measures that dependence with the kernel (RBF) Hilbert–Schmidt "
        "independence criterion, KHSIC; **HSIC-BCD** uses a linear kernel; **FATR** (Zhu et al. 2018) "
        "makes A orthogonal to the group indicator — which, as Kim & Gittens' Theorem 1 shows, can leave "
        f"the group perfectly predictable. Here: {layout}. The λ sweep draws residual fit against leakage."
    ),
    variants=VARIANT_TITLES["cpd"],
    heavy=heavy,
    skipped={"khsic"} if shape[0] > khsic_limit else set(),
    rank_limit=limit,
    rank_label="CP ranks R to sweep",
    options_ui=options,
    leakage_option="leakage_classifier",
)
