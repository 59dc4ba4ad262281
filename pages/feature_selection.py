"""Feature-selection page: unsupervised selectors vs FUFS, judged by clustering balance."""

from __future__ import annotations

import streamlit as st

from fairaudit.fs._alignment import EXACT_MAX_ROWS
from fairaudit.fs.audit import KMEANS_RUNS, default_ranks
from fairaudit.fs.fufs import FUFS, PAPER_MAX_ROWS
from fairaudit.plots import VARIANT_TITLES
from pages.common import current_data, method_page, plain

AUTO_RUN_MAX_ROWS = 5_000
AUTO_RUN_MAX_FEATURES = 50
"""The feature-selection page runs its default audit on first open below these sizes: its numbers
took 0.45 s on the 600 × 10 default sample and 1.9 s on the 4,165 × 12 credit table, 15 s on
30,000 × 22 (two cores; its k-NN graphs and kernels grow with the rows)."""

data = current_data()
n = data.n_features
paper_sweep = default_ranks(n)


def ranks_ui(saved: dict):
    if st.checkbox(
        f"Paper's sweep: 10–40 % of the features ({', '.join(map(str, paper_sweep))} kept)",
        value=saved.get("ranks") is None,
        key="fs-paper-sweep",
    ):
        return None
    if n <= 1:
        return (1,)
    low, high = saved.get("rank_bounds") or (1, min(n, 10))
    low, high = st.slider("Number of features kept", 1, n, (low, high), key="fs-ranks")
    return tuple(range(low, high + 1))


def options(data, saved: dict) -> dict:
    left, middle, right = st.columns(3)
    with left:
        default_k = len(set(data.label)) if data.label is not None else data.groups.n_groups
        label_note = f" (label “{plain(data.label_name)}” has {default_k} classes)" if data.label is not None else ""
        clusters = int(st.number_input(
            "k-means clusters K" + label_note, 2, 50, int(saved.get("n_clusters", max(2, default_k))), key="fs-clusters",
        ))
    with middle:
        runs = int(st.number_input("k-means runs per selection (mean ± std)", 1, 100, int(saved.get("kmeans_runs", KMEANS_RUNS)),
                                   key="fs-runs", help=f"The FUFS paper uses {KMEANS_RUNS} (the default); fewer is faster."))
    with right:
        alpha = float(st.number_input("FUFS fairness weight α", 0.0, 20.0, float(saved.get("alpha", FUFS().alpha)), step=0.5, key="fs-alpha",
                                      help="Weight of the alignment with the protected attribute in FUFS's objective (eq. 6)."))
    formulations = {"paper": "as printed (Xing et al. 2021, eq. 6)", "alignment": "normalised alignment (ours)"}
    left, right = st.columns(2)
    with left:
        formulation = st.selectbox(
            "FUFS formulation", list(formulations), format_func=formulations.get, key="fs-formulation",
            index=list(formulations).index(saved.get("formulation", FUFS().formulation)),
            help="The paper's objective (unnormalised kernel traces, ℓ1 sparsity, box) or ours (normalised "
                 "alignment, fixed subset size, a proxy stage); docs/fs.md compares them.",
        )
    with right:
        beta = float(st.number_input("FUFS sparsity weight β", 0.0, 1000.0, float(saved.get("beta", FUFS().beta)), step=0.1, key="fs-beta",
                                     disabled=formulation != "paper",
                                     help="ℓ1 weight on the selection and decomposition indicators (eq. 6; the paper uses 0.1 or 10)."))
    if data.label is None:
        st.caption("No label column is set on the Data page, so clustering accuracy and NMI are not computed.")
    return {"n_clusters": clusters, "kmeans_runs": runs, "alpha": alpha, "formulation": formulation, "beta": beta}


method_page(
    "fs",
    title="Feature selection: do the kept columns carry the protected attribute?",
    intro=(
        "Unsupervised feature selection keeps a few real, interpretable columns — and can keep proxies "
        "of a protected attribute (a zip code standing in for race). **FUFS** (Xing, Liu, Chen, Li, "
        "*Fairness-Aware Unsupervised Feature Selection*) keeps the columns whose similarity structure "
        "(kernel) best matches the whole data's while being least aligned with the protected attribute. "
        "Each selection is judged as in the paper: k-means on the kept columns, repeated, and the "
        "clusters' **balance** (how evenly groups spread over clusters; higher is fairer) and "
        "**proportion**. Features are rescaled to [0, 1] first."
    ),
    variants=VARIANT_TITLES["fs"],
    heavy=(
        {"fufs": f"more than {PAPER_MAX_ROWS:,} rows: FUFS computes its kernels on a stratified sample of "
                 f"{PAPER_MAX_ROWS:,} rows (the alignment formulation: a Nyström approximation above {EXACT_MAX_ROWS:,})."}
        if data.n_rows > PAPER_MAX_ROWS
        else {}
    ),
    rank_limit=n,
    options_ui=options,
    ranks_ui=ranks_ui,
    auto_run=data.n_rows <= AUTO_RUN_MAX_ROWS and n <= AUTO_RUN_MAX_FEATURES,  # its numbers within a few seconds
)
