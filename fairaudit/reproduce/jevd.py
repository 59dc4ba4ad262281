"""Rathore & Manwani 2025, "Achieving Fair PCA Using Joint Eigenvalue Decomposition": LSAC.

Table 4 (reconstruction error, variance explained and MMD² of each method for d = 1 … 11) and
the LSAC column of Table 1 (training seconds), for every method of the table we implement:

* ``StandardPCA`` — :class:`~fairaudit.pca.PCA`;
* ``FairPCA_SDP_LP`` — Samadi et al.'s Algorithm 1, SDP then LP rounding
  (``FairPCA(solver="sdp")``), and our exact solver of the same problem (``FairPCA``);
* ``covFairPCA`` — Pelegrina & Duarte's constrained search (:class:`~fairaudit.pca.CovFairPCA`);
* ``JevdPCA`` — Algorithm 1 as printed (``JEVDPCA(solver="paper")``) and the orthogonal Jacobi
  scheme the audit runs (``solver="jacobi"``).

Metrics as §5.3 defines them: R.E. = ``‖X − XP‖²_F / n`` over all rows (eq. 1), V.E. =
``‖XP‖²_F / ‖X‖²_F``, MMD² = ``‖μ_A − μ_B‖²`` of the projected group means.

**The data.** The paper takes LSAC from Pelegrina's collection and gender as the sensitive
attribute, without further detail. Standard PCA's column depends on the preparation alone, so we
matched it: the closest preparation we found keeps the rows of race 1 and 2 (as Pelegrina's own
LSAC experiments do), takes column 5 as the groups (two values: the paper's gender) and columns
1–5 and 7–10 *unscaled* as features — the gender column included, which is what makes MMD² jump
by ≈ 0.95 at d = 6 in the paper's StandardPCA column and ours alike (a 0/1-like column of
variance 0.24 whose group means differ by 1). Every other combination we tried (race or either
binary column as groups; standardised, min–max or raw features; with or without columns 6, 11
and 12, one-hot codes) matched worse. It is not the paper's exact data: see ``NOTES``.

``lsac-race`` repeats the comparison on Pelegrina & Duarte's own LSAC setup (race 1 vs 2,
columns 1–5 and 7–11 standardised) with the per-group losses, where covFairPCA's worst-group loss
rises above vanilla PCA's (``NOTES`` explains why).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..groups import encode_groups
from ..pca import JEVDPCA, PCA, CovFairPCA, FairPCA, GroupProblem, rank_sweep_problem
from . import DatasetsMissing, Row

PAPER = "jevd"
TITLE = "Rathore & Manwani 2025, Achieving Fair PCA Using Joint Eigenvalue Decomposition"

EXPERIMENTS = {
    "lsac-table4": "LSAC (gender groups): reconstruction error (R.E.), variance explained (V.E.) and MMD² per method over d (Table 4)",
    "lsac-table1": "LSAC: training seconds of each method, summed over d (Table 1; different machines)",
    "lsac-losses": "LSAC (gender groups): each method's loss per group over d — the criterion JEVD-PCA targets (eq. 2–3), not printed in the paper",
    "lsac-race": "LSAC as Pelegrina & Duarte prepare it (race 1 vs 2, standardised): error and loss per group over d",
}

PAPER_TABLE_4 = {  # d: {method: (R.E., V.E., MMD²)}
    1: {"covFairPCA": (18.67, 0.61, 0.87), "FairPCA_SDP_LP": (18.65, 0.61, 0.87), "JevdPCA": (18.63, 0.61, 0.84), "StandardPCA": (17.64, 0.63, 0.83)},
    2: {"covFairPCA": (3.92, 0.92, 0.88), "FairPCA_SDP_LP": (3.91, 0.92, 0.87), "JevdPCA": (4.05, 0.92, 0.84), "StandardPCA": (3.50, 0.93, 0.88)},
    3: {"covFairPCA": (2.72, 0.94, 0.91), "FairPCA_SDP_LP": (2.72, 0.94, 0.91), "JevdPCA": (2.87, 0.94, 0.86), "StandardPCA": (2.31, 0.95, 0.92)},
    4: {"covFairPCA": (1.78, 0.96, 0.96), "FairPCA_SDP_LP": (1.73, 0.96, 0.95), "JevdPCA": (1.87, 0.96, 0.89), "StandardPCA": (1.34, 0.97, 0.95)},
    5: {"covFairPCA": (0.88, 0.98, 0.97), "FairPCA_SDP_LP": (0.88, 0.98, 0.95), "JevdPCA": (1.05, 0.98, 0.89), "StandardPCA": (0.65, 0.99, 0.97)},
    6: {"covFairPCA": (0.56, 0.99, 1.05), "FairPCA_SDP_LP": (0.56, 0.99, 1.05), "JevdPCA": (0.71, 0.99, 0.92), "StandardPCA": (0.41, 0.99, 1.91)},
    7: {"covFairPCA": (0.32, 0.99, 1.89), "FairPCA_SDP_LP": (0.32, 0.99, 1.91), "JevdPCA": (0.69, 0.99, 0.92), "StandardPCA": (0.27, 0.99, 1.93)},
    8: {"covFairPCA": (0.22, 1.00, 1.91), "FairPCA_SDP_LP": (0.21, 1.00, 1.92), "JevdPCA": (0.59, 0.99, 0.92), "StandardPCA": (0.19, 1.00, 1.93)},
    9: {"covFairPCA": (0.15, 1.00, 1.91), "FairPCA_SDP_LP": (0.13, 1.00, 1.92), "JevdPCA": (0.55, 0.99, 0.92), "StandardPCA": (0.12, 1.00, 1.93)},
    10: {"covFairPCA": (0.09, 1.00, 1.93), "FairPCA_SDP_LP": (0.07, 1.00, 1.91), "JevdPCA": (0.47, 0.99, 0.92), "StandardPCA": (0.06, 1.00, 1.93)},
    11: {"covFairPCA": (0.06, 1.00, 1.93), "FairPCA_SDP_LP": (0.02, 1.00, 1.93), "JevdPCA": (0.40, 0.99, 0.92), "StandardPCA": (0.02, 1.00, 1.93)},
}
PAPER_TABLE_1_LSAC = {"covFairPCA": 0.8066, "FairPCA_SDP_LP": 13.6891, "JevdPCA": 0.4644, "StandardPCA": 0.3382}

METHODS = {  # our method name → (the paper's column, estimator)
    "StandardPCA": ("StandardPCA", PCA()),
    "FairPCA_SDP_LP (SDP + LP)": ("FairPCA_SDP_LP", FairPCA(solver="sdp")),
    "FairPCA_SDP_LP (exact eig)": ("FairPCA_SDP_LP", FairPCA()),
    "covFairPCA": ("covFairPCA", CovFairPCA()),
    "JevdPCA (Algorithm 1)": ("JevdPCA", JEVDPCA(solver="paper")),
    "JevdPCA (Jacobi)": ("JevdPCA", JEVDPCA(solver="jacobi")),
}

NOTES = {
    "lsac-table4": (
        "Does not reproduce in absolute terms. StandardPCA — which depends on the data and their preparation only — "
        "matches at d = 3–6 (R.E. 2.32/1.32/0.64/0.39 against 2.31/1.34/0.65/0.41; MMD² jumping by ≈ 0.95 at d = 6 in "
        "both) but not at d = 1–2 (R.E. 33.2 against 17.64: the paper's second direction carries half the variance of "
        "ours), and the paper has more than our 9 dimensions (R.E. 0.02 at d = 11). The exact preparation is not "
        "stated and we did not find it (module docstring). With our preparation vanilla PCA is already nearly fair "
        "(its worst loss within 0.0011 of Fair PCA's optimum at every d, lsac-losses), so every fair method stays "
        "within 0.03 of StandardPCA's R.E., where the paper's fair columns pay 0.05–1.0 more than its StandardPCA. "
        "What carries over: covFairPCA tracks the SDP (R.E. within 0.03 of it at every d; the paper's within 0.05). "
        "JEVD-PCA: Algorithm 1 as printed diverges here from its first iteration (C(U) × 6.7; with the 0/1 gender column "
        "among the raw features — without it, on columns 1–4 and 7–11, it converges slowly to the Jacobi scheme's projections, "
        "0.2 % of the off-diagonal mass left after 500 iterations, benchmarks/bench_pca_jevd.py) and returns its "
        "starting point, so it projects onto a subset of the original features; its R.E. at d = 2–5 (4.30, 2.95, "
        "2.06, 1.23) is close to the paper's JevdPCA column (4.05, 2.87, 1.87, 1.05), and like that column it leaves "
        "the gender column out (MMD² 0.93–0.94 up to d = 6; the paper's stays at 0.92 from d = 6 to 11, and its R.E. "
        "never reaches 0) — the paper's JevdPCA numbers are consistent with the same behaviour. The Jacobi scheme the "
        "audit runs tracks the SDP instead."
    ),
    "lsac-table1": (
        "Times are not comparable across machines (ours: two shared cores); the ordering is. The SDP is the slowest "
        "method in both (ours 0.88 s for d = 1–9, 18–125× the others; the paper's 13.7 s, 17–40×), and our exact "
        "solver of the same problem takes 0.05 s. The shared group moments and spectra (one pass over the rows, "
        "0.17 s) are not in the per-method times."
    ),
    "lsac-race": (
        "Why covFairPCA's worst-group loss exceeds vanilla PCA's in our LSAC runs while the paper's covFairPCA "
        "column tracks the SDP: covFairPCA (checked step by step against the authors' search) equalises "
        "reconstruction *errors*, capping each group's error at vanilla PCA's worst; it does not look at losses. "
        "On race, whose groups have very different best errors, closing the error gap costs the better-served "
        "group much more than it gains the other (d = 3: errors 5.92/4.02 → 5.90/5.41, white loss 0.02 → 1.41 "
        "against vanilla's worst 0.82; Fair PCA's equal loss is 0.16), and the golden-section search stops on "
        "α = 0 for d = 1–3 (its objective is not unimodal). On the paper's gender groups vanilla PCA is already "
        "nearly fair and every method stays close to it, so the two observations do not conflict: they measure "
        "different criteria on different groups."
    ),
}


# ============================================================================ data
def _lsac(datasets: Path) -> np.ndarray:
    path = datasets / "lsac" / "lsac.csv"
    if not path.exists():
        raise DatasetsMissing(f"the LSAC data are not at {path}.")
    data = np.loadtxt(path, delimiter=",")
    return data[data[:, 5] != 3]  # race 1 and 2 (Pelegrina's LSAC)


def lsac_gender(datasets: Path) -> tuple[np.ndarray, np.ndarray]:
    """The preparation matching the paper's StandardPCA column best (module docstring)."""
    data = _lsac(datasets)
    groups = np.where(data[:, 4] == 1, "gender=1", "gender=2")
    return data[:, [0, 1, 2, 3, 4, 6, 7, 8, 9]], groups


def lsac_race(datasets: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pelegrina & Duarte's LSAC: race 1 (white) vs 2 (black), columns 1–5 and 7–11 standardised."""
    data = _lsac(datasets)
    X = data[:, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]]
    return (X - X.mean(axis=0)) / X.std(axis=0), np.where(data[:, 5] == 1, "white", "black")


# ============================================================================ experiments
def _table(problem: GroupProblem, ranks, log) -> tuple[list[Row], dict[str, float]]:
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    weights = problem.sizes / problem.sizes.sum()
    for method, (column, estimator) in METHODS.items():
        total = 0.0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits = list(rank_sweep_problem(estimator, problem, ranks))
        for message in dict.fromkeys(str(w.message) for w in caught):
            log(f"jevd: {method}: {message}")
        for rank, fitted, fit_seconds in fits:
            total += fit_seconds
            projection = problem.reduce(fitted.map_)
            paper = PAPER_TABLE_4.get(rank, {}).get(column, (None, None, None))
            values = (float(weights @ fitted.group_errors_), problem.variance_explained(projection), problem.mean_discrepancy(projection))
            for metric, value, printed in zip(("R.E.", "V.E.", "MMD²"), values, paper, strict=True):
                rows.append(Row(PAPER, "lsac-table4", method, metric, value, printed, rank))
            for group, loss in zip(fitted.groups_, fitted.group_losses_, strict=True):
                rows.append(Row(PAPER, "lsac-losses", method, "loss", float(loss), None, rank, group))
        seconds[method] = total
        log(f"jevd: {method} d = {ranks[0]}..{ranks[-1]} in {total:.2f} s")
    return rows, seconds


def _race(problem: GroupProblem, ranks) -> list[Row]:
    rows = []
    for method in ("StandardPCA", "FairPCA_SDP_LP (exact eig)", "covFairPCA", "JevdPCA (Jacobi)"):
        for rank, fitted, _ in rank_sweep_problem(METHODS[method][1], problem, ranks):
            for group, error, loss in zip(fitted.groups_, fitted.group_errors_, fitted.group_losses_, strict=True):
                rows.append(Row(PAPER, "lsac-race", method, "error", float(error), None, rank, group))
                rows.append(Row(PAPER, "lsac-race", method, "loss", float(loss), None, rank, group))
    return rows


def run(datasets: Path, *, quick: bool = False, log: Callable[[str], None] = lambda _: None) -> list[Row]:
    """Tables 4 and 1 (LSAC) and the two loss tables (``quick``: d ∈ {1, 2, 3})."""
    started = time.perf_counter()
    X, groups = lsac_gender(datasets)
    problem = GroupProblem.from_data(X, encode_groups(groups))
    setup = time.perf_counter() - started
    ranks = [1, 2, 3] if quick else list(range(1, X.shape[1] + 1))
    rows, seconds = _table(problem, ranks, log)
    for method, total in seconds.items():
        rows.append(Row(PAPER, "lsac-table1", method, "seconds", total, PAPER_TABLE_1_LSAC[METHODS[method][0]]))
    rows.append(Row(PAPER, "lsac-table1", "(group moments and spectra, shared)", "seconds", setup))
    X, groups = lsac_race(datasets)
    rows += _race(GroupProblem.from_data(X, encode_groups(groups)), ranks)
    log(f"jevd: all done in {time.perf_counter() - started:.1f} s")
    return rows
