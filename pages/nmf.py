"""NMF page: standard NMF vs Fairer-NMF (multiplicative updates and alternating minimisation)."""

from __future__ import annotations

import streamlit as st

from fairaudit.data import NONNEGATIVE_POLICIES
from fairaudit.nmf.audit import DEFAULT_OPTIONS, ZERO_ROW_POLICIES, am_too_slow
from fairaudit.plots import VARIANT_TITLES
from fairaudit.vocabulary import OPTIONS
from pages.common import current_data, method_page

NONNEGATIVE_LABELS = {
    "error": "stop and say where the negative values are",
    "shift": "shift each feature by its minimum",
    "clip": "set negative cells to 0",
}
ZERO_ROW_LABELS = {"error": "stop and name them", "drop": "leave them out"}

data = current_data()
heavy = {}
reason = am_too_slow(data.n_rows, data.n_features, DEFAULT_OPTIONS)
if reason:
    heavy["fair_am"] = reason


def _choice(label: str, name: str, key: str, saved: dict, help: str) -> str:
    """A menu for the NMF option ``key`` with the choices' words from its vocabulary entry ``name``."""
    choices = OPTIONS[name].choices
    values = list(choices)
    return st.selectbox(label, values, index=values.index(saved.get(key, DEFAULT_OPTIONS[key])),
                        format_func=choices.get, key=f"nmf-{key}", help=help)


def options(data, saved: dict) -> dict:
    negative = bool((data.X_raw < 0).any())
    left, middle, right = st.columns(3)
    with left:
        policy = st.selectbox(
            "Negative values (NMF needs non-negative data)",
            NONNEGATIVE_POLICIES,
            index=NONNEGATIVE_POLICIES.index(saved.get("nonnegative", "shift" if negative else "error")),
            format_func=NONNEGATIVE_LABELS.get,
            key="nmf-nonnegative",
        )
        zero_rows = st.selectbox(
            "Rows that are all zero", ZERO_ROW_POLICIES, index=ZERO_ROW_POLICIES.index(saved.get("zero_rows", "error")),
            format_func=ZERO_ROW_LABELS.get, key="nmf-zero-rows",
        )
    with middle:
        max_iter = int(st.number_input(
            "Iteration cap", 0, 100_000, int(saved.get("max_iter") or 0), step=100, key="nmf-max-iter",
            help="Fairer-NMF stops here if it has not met its tolerance (the audit says when that happens); "
            "0 keeps the solver's default: 5,000 for multiplicative updates (1,000,000 under the authors' stopping "
            "rule), 200 for alternating minimisation.",
        ))
        tol = float(st.number_input(
            "Stopping tolerance", 1e-10, 1e-1, float(saved.get("tol", DEFAULT_OPTIONS["tol"])), format="%.0e",
            key="nmf-tol", help="Relative change of the objective below which a fit stops.",
        ))
    with right:
        estimates = int(st.number_input(
            "NMF runs per group for E_ℓ", 1, 50, int(saved.get("n_estimates", DEFAULT_OPTIONS["n_estimates"])),
            key="nmf-estimates", help="Each group's own best error E_ℓ is the mean of this many NMFs of that group alone (Alg. 1).",
        ))
        # The audit's two departures from the paper (docs/nmf.md); the paper's choice is one click away.
        stopping = _choice("Fairer-NMF stopping rule", "fair_nmf_stopping", "stopping", saved,
                           "Eq. (10) stops multiplicative updates on plateaus, far from the authors' own results; the "
                           "window rule compares the objective over 100 iterations (the audit's default); the authors' "
                           "code tests the change of the relative losses and reproduces their saved results, in up to "
                           "a million iterations. Standard NMF stops by the same rule (the window rule for the "
                           "authors'), so that it is compared at its own optimum.")
        init = _choice("Fairer-NMF start", "fair_nmf_init", "init", saved,
                       "Where Fairer-NMF starts: the standard NMF it is compared with (the audit's default: lower or "
                       "equal losses in less time) or a random start, as in the paper.")
    if negative:
        st.caption("This data has negative values; the paper's preprocessing needs them shifted or clipped first.")
    chosen = {"nonnegative": policy, "zero_rows": zero_rows, "tol": tol, "n_estimates": estimates, "stopping": stopping, "init": init}
    if max_iter:
        chosen["max_iter"] = max_iter
    return chosen


method_page(
    "nmf",
    title="NMF: are all groups' parts represented?",
    intro=(
        "Non-negative matrix factorisation explains each row as a mix of a few non-negative parts. "
        "Fit to everyone at once, it explains small or complex groups worse. A group's *relative loss* "
        "is its error above what an NMF of that group alone achieves (its own best error, E_ℓ, the "
        "mean of a few single-group runs), divided by the group's size in norm. **Fairer-NMF** (Kassab, "
        "George, Needell et al., *Towards a Fairer Non-negative Matrix Factorization*) makes the largest "
        "relative loss as small as possible. Features are scaled to unit ℓ2 norm first (the paper's §6.1)."
    ),
    variants=VARIANT_TITLES["nmf"],
    heavy=heavy,
    skipped=set(heavy),
    rank_limit=min(data.n_features, min(data.group_sizes().values())),
    rank_label="Ranks r to sweep (number of parts)",
    options_ui=options,
)
