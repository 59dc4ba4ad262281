"""Reproduce Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix Factorization".

The paper shows its results as figures only; the numbers beside ours are the authors' saved
results (``fairer_nmf_reference/hd_*.npy`` from their repository: groups × ranks 1–10 × 10
trials, group 0 = sex 1 although the paper's text calls the 201-row group female). Our runs use
the paper's settings throughout — §6.3's preprocessing, unit-ℓ2 features (§6.1), Algorithm 1
with T = 5, multiplicative updates and eq. (10) for standard NMF and the group NMFs, Algorithms 2
and 3 from random starts stopped by eq. (10) — with ``E_ℓ`` recomputed in every trial as the
authors' arrays show they did (their implied ``E_ℓ`` varies from trial to trial). One extra row
per rank runs Algorithm 3 with our ``"window"`` stopping rule, the audit's default, because eq.
(10) stops multiplicative updates on plateaus (:data:`NOTES`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..data import load
from ..nmf import NMF, FairerNMF
from ..nmf.audit import nmf_input
from ..samples import nmf_table1
from . import DatasetsMissing, Row

PAPER = "fairer-nmf"
TITLE = 'Kassab, George, Needell et al., "Towards a Fairer Non-negative Matrix Factorization"'

EXPERIMENTS = {
    "heart": (
        "Heart Disease (§6.3, Figures 7 and 9): relative loss per group, ranks 1–10, mean and standard "
        "deviation over 10 trials; “paper” = the authors' saved results (the paper prints figures only)"
    ),
    "heart_estimates": "Heart Disease: each group's own rank-r NMF error E_ℓ/‖X_ℓ‖ (Algorithm 1, T = 5), mean over 10 trials",
    "heart_band": (
        "Heart Disease: Fairer-NMF's objective, the largest relative loss (eq. (5)), mean over 10 trials per rank, "
        "against the authors' mean and 2-standard-deviation band (“paper” = their mean; `inside_2sd` 1 = our mean "
        "inside their mean ± 2 sd; `iterations` = our median), for each stopping rule of multiplicative updates"
    ),
    "heart_seconds": "Heart Disease: seconds per Fairer-NMF fit (ours: 2 shared cores; the authors': a 12-core i9-9920X)",
    "table1": (
        "Synthetic groups of Table 1 (§6.2, Figures 3 and 5): relative loss per group, ranks 1–12, one trial "
        "(the paper prints no numbers)"
    ),
}

NOTES = {
    "heart": (
        "Full run: seeds 0–9, 150 s on two shared cores (Heart 28 s, Table 1 122 s) before the authors' rule was "
        "added; with it 2,985 s at load 8–25 (Heart 1,369 s, Table 1 1,616 s: the load, not the rule, which Table 1 does "
        "not run). Against the authors' ten "
        "trials (our median over seeds inside their [min, max] ± 10⁻⁴, tests/test_nmf_heart_reference.py): "
        "Fairer-NMF by alternating minimisation lands inside at every rank, and so do the E_ℓ (heart_estimates); "
        "standard NMF at every rank but 7, where the male group's median loss is 0.002 against their largest "
        "0.0006 — three of our ten random starts end in a poorer minimum there (relative errors 15.5 %, 16.3 % "
        "where the others and all of theirs give 14.0–14.1 %), and the paper does not say how its starts are "
        "drawn; means are more sensitive to such starts than medians (e.g. rank 7: 0.0182 against 0.0153). "
        "Fairer-NMF by multiplicative updates stopped by eq. (10) as printed does not land inside at rank 10 "
        "(+0.0045 against −0.0040 on average; the median is out at rank 10, the mean also at ranks 3, 5 and 9): "
        "eq. (10) stops it on plateaus, where the error changes by less than 10⁻⁴ of itself per iteration while "
        "the objective still falls — rank 10, seed 0 stops at +0.027 after 420 iterations where 20,000 "
        "iterations reach −0.0047. The authors' saved runs went on: their released code applies the 10⁻⁴ test to "
        "the change of each group's relative *loss*, not of its error, and starts the weights at 1/L — the "
        "“authors' rule” rows (stopping='authors'): at rank 1, where nothing is random, it stops after 36,044 "
        "iterations at their 0.003944 for both groups (eq. (10) stops at 275, with losses 0.00390 and 0.00399), "
        "and its mean lands inside their 2-sd band at every rank (heart_band). Stopped by our window rule instead (the audit's "
        "default), the same updates land inside the authors' range at every rank too (and inside the 2-sd band at all "
        "but rank 1), in 200–3,650 iterations instead of 2,590–36,044. "
        "What the paper "
        "says: standard NMF favours one group — holds, the 96-row group (sex 0, female; the paper's text calls it "
        "male, its code's labels are swapped) has the larger loss at every rank; Fairer-NMF gives both groups "
        "the same loss — holds (AM: equal to 10⁻⁴); the rank-10 losses are below 0 — holds with AM (−0.0042) "
        "and the window rule (−0.0037), not with eq. (10) as printed (+0.0045), and it reflects E_ℓ being the "
        "mean of early-stopped group NMFs, not a model that beats each group's own best."
    ),
    "heart_band": (
        "Our mean of the largest loss over seeds 0–9 against the authors' mean ± 2 standard deviations over their ten "
        "trials (at rank 1 their trials agree to eight digits, so the band is a point; “inside” allows 10⁻⁹): the "
        "authors' rule lands inside at all 10 ranks, our window rule at 9 (not rank 1: 0.00395 against 0.003944), eq. "
        "(10) as printed at 5 (not ranks 1, 3, 5, 9, 10: it stops on plateaus, e.g. rank 10 at +0.0046 where the "
        "authors saved −0.0040). The authors' rule needs 2,590–36,044 iterations (medians over seeds; up to 191,221 in "
        "one fit at rank 4, seconds where eq. (10) takes milliseconds), so it is a named option "
        "(--fair-nmf-stopping authors), not the audit's default. Its other part, the weights starting at 1/L instead of "
        "0, changes the largest loss by less than 5·10⁻⁶ in 28 of 30 fits (ranks 1–10, seeds 0–2; docs/nmf.md)."
    ),
    "heart_estimates": (
        "Algorithm 1 with multiplicative updates and eq. (10) reproduces the E_ℓ the authors' trials used "
        "(their errors/100 − losses): our median is inside their range at every rank. Coordinate descent (our "
        "option nmf_solver='cd') converges further and gives lower E_ℓ, e.g. 5.09 % against about 6.3 % for "
        "sex 1 at rank 10, which shifts every relative loss up by that difference."
    ),
    "heart_seconds": (
        "Different machines, so only the order of magnitude compares: a sweep of ranks 1–10 (mean over trials) "
        "took the authors 164.7 s with multiplicative updates and 141.3 s with AM; ours 0.27 s as printed, 0.54 s "
        "with the window rule and 1.05 s with AM. benchmarks/bench_nmf_heart.py times the whole audit sweep."
    ),
    "table1": (
        "Seed 0, ranks 1–12. What the paper says and what we find: standard NMF gives the small rank-6 group "
        "the largest relative loss at ranks 6–11 — holds (6–12; the medium group has it at ranks 2–5); with "
        "Fairer-NMF the rank-6 group has the largest relative error at ranks 3, 4 and 5 — holds (AM 18 %, 14 %, "
        "10 % against 12 %, 10 %, 8 %); Fairer-NMF gives the groups comparable losses — holds (largest gap "
        "0.0016); AM finds lower losses than multiplicative updates — holds at ranks 4–12 (e.g. rank 12: 0.0013 "
        "against 0.0048), not at ranks 2 and 3 (0.1135 against 0.1097; 0.1207 against 0.1200). The authors' "
        "saved synthetic arrays (ortho1/ortho2) come from a different generator (groups with disjoint supports) "
        "that this version of the paper does not describe, so they are not compared."
    ),
}

GROUP_NAMES = {"col_2=0": "female (sex 0)", "col_2=1": "male (sex 1)"}
REFERENCE_ORDER = ("col_2=1", "col_2=0")  # the authors' group index 0 is sex = 1
METHODS = {
    "standard NMF": None,
    "Fairer-NMF MU (eq. (10))": {"solver": "mu"},
    "Fairer-NMF MU (window rule)": {"solver": "mu", "stopping": "window"},
    "Fairer-NMF MU (authors' rule)": {"solver": "mu", "stopping": "authors"},
    "Fairer-NMF AM (eq. (10))": {"solver": "am"},
}
PAPER_ARRAYS = {  # our method → the authors' array of relative losses and of seconds per fit
    "standard NMF": ("s_losses", None),
    "Fairer-NMF MU (eq. (10))": ("f_losses_MU", "f_times_MU"),
    "Fairer-NMF MU (window rule)": ("f_losses_MU", "f_times_MU"),
    "Fairer-NMF MU (authors' rule)": ("f_losses_MU", "f_times_MU"),
    "Fairer-NMF AM (eq. (10))": ("f_losses_AM", "f_times_AM"),
}
BAND_METHODS = ("Fairer-NMF MU (eq. (10))", "Fairer-NMF MU (window rule)", "Fairer-NMF MU (authors' rule)")
"""The stopping rules of multiplicative updates held against the authors' 2-sd band (``heart_band``)."""
BAND_SD = 2.0


def run(datasets: Path, *, quick: bool = False, log: Callable[[str], None] = lambda _: None) -> list[Row]:
    """Heart Disease against the authors' saved results, then the Table-1 synthetic experiment."""
    rows = heart(datasets, quick=quick, log=log)
    rows += table1(quick=quick, log=log)
    return rows


# ============================================================================ Heart Disease
def heart_matrix(datasets: Path):
    """§6.3: 297 rows without ``?``, target and sex dropped, 12 features at unit ℓ2 norm (§6.1)."""
    path = Path(datasets) / "heart" / "processed.cleveland.data"
    if not path.exists():
        raise DatasetsMissing(f"the Heart Disease file is not there: {path}; the Fairer-NMF reproduction needs it.")
    data = load(path, sensitive="col_2", ignore=["col_14"], missing="drop")
    return nmf_input(data)


def reference_arrays(datasets: Path) -> dict[str, np.ndarray]:
    """The authors' Heart arrays that exist, keyed without the ``hd_`` prefix."""
    folder = Path(datasets) / "fairer_nmf_reference"
    found = {}
    for path in sorted(folder.glob("hd_*.npy")):
        found[path.stem[3:]] = np.load(path)
    return found


def heart_trials(X, groups, ranks, seeds, log: Callable[[str], None] = lambda _: None, methods=tuple(METHODS)) -> dict:
    """Every method of :data:`METHODS` (those named in ``methods``; standard NMF always) at every
    rank and seed, ``E_ℓ`` recomputed per seed.

    Returns ``{"E": (ranks, seeds, groups) relative E_ℓ, "losses": {method: (ranks, seeds,
    groups)}, "seconds": {method: (ranks, seeds)}, "iterations": {method: (ranks, seeds)}}``.
    """
    shape = (len(ranks), len(seeds))
    n_groups = len(np.unique(np.asarray(groups)))
    names = ["standard NMF", *(name for name in methods if METHODS.get(name) is not None)]
    out = {
        "E": np.zeros((*shape, n_groups)),
        "losses": {name: np.zeros((*shape, n_groups)) for name in names},
        "seconds": {name: np.zeros(shape) for name in names},
        "iterations": {name: np.zeros(shape, dtype=int) for name in names},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # iteration caps: the fits record whether they converged
        for i, rank in enumerate(ranks):
            started = time.perf_counter()
            for j, seed in enumerate(seeds):
                vanilla = NMF(rank, random_state=seed).fit(X, sensitive_features=groups)
                out["E"][i, j] = vanilla.own_rel_errors_
                fits = {"standard NMF": vanilla}
                for name in names[1:]:
                    fits[name] = FairerNMF(rank, estimates=vanilla.E_, random_state=seed, **METHODS[name]).fit(X, sensitive_features=groups)
                for name, fit in fits.items():
                    out["losses"][name][i, j] = fit.group_losses_
                    out["seconds"][name][i, j] = fit.fit_seconds_
                    out["iterations"][name][i, j] = fit.n_iter_
            log(f"fairer-nmf: Heart rank {rank}: {len(seeds)} trials in {time.perf_counter() - started:.1f} s")
    return out


def heart(datasets: Path, *, quick: bool, log: Callable[[str], None]) -> list[Row]:
    prepared = heart_matrix(datasets)
    labels = prepared.labels
    theirs = reference_arrays(datasets)
    ranks = (1, 10) if quick else tuple(range(1, 11))  # quick: the authors' rule takes 190,000 iterations at rank 4
    trials = heart_trials(prepared.X, prepared.sensitive_features, ranks, range(2 if quick else 10), log)
    losses, seconds, estimates = trials["losses"], trials["seconds"], trials["E"]
    order = [REFERENCE_ORDER.index(label) for label in labels]  # our group g ↔ their index order[g]
    implied = None
    if "s_errors" in theirs and "s_losses" in theirs:
        implied = theirs["s_errors"] / 100 - theirs["s_losses"]  # the relative E_ℓ of each of their trials
    rows = []
    for i, rank in enumerate(ranks):
        for name in METHODS:
            loss_array, time_array = PAPER_ARRAYS[name]
            for g, label in enumerate(labels):
                group = GROUP_NAMES.get(label, label)
                paper = theirs[loss_array][order[g], rank - 1] if loss_array in theirs else None
                ours = losses[name][i, :, g]
                for metric, how in (("rel_loss", np.mean), ("rel_loss_sd", np.std), ("rel_loss_median", np.median)):
                    rows.append(_row("heart", name, metric, how(ours), _stat(paper, how), rank, group))
            paper_time = theirs[time_array][rank - 1] if time_array in theirs else None
            rows.append(_row("heart_seconds", name, "seconds", seconds[name][i].mean(), _stat(paper_time, np.mean), rank))
        for g, label in enumerate(labels):
            paper_E = implied[order[g], rank - 1] if implied is not None else None
            rows.append(
                _row("heart_estimates", "Algorithm 1", "own_rel_error", estimates[i, :, g].mean(),
                     _stat(paper_E, np.mean), rank, GROUP_NAMES.get(label, label))
            )
    return rows + band_rows(trials, theirs.get("f_losses_MU"), ranks)


def band_rows(trials: dict, theirs: np.ndarray | None, ranks) -> list[Row]:
    """``heart_band``: per stopping rule and rank, our mean largest loss over the seeds beside the
    authors' mean, whether it lies in their mean ± :data:`BAND_SD` standard deviations, our median
    iterations; and per rule the number of ranks inside."""
    if theirs is None:
        return []
    objective = theirs.max(axis=0)  # ranks 1–10 × trials: the largest group loss of each trial
    rows = []
    for name in BAND_METHODS:
        inside = 0
        for i, rank in enumerate(ranks):
            ours = float(trials["losses"][name][i].max(axis=1).mean())
            mean, sd = float(objective[rank - 1].mean()), float(objective[rank - 1].std())
            within = abs(ours - mean) <= BAND_SD * sd + 1e-9  # rank 1: every trial of theirs the same
            inside += within
            rows.append(_row("heart_band", name, "max_rel_loss", ours, mean, rank))
            rows.append(_row("heart_band", name, "inside_2sd", float(within), 1.0, rank))
            rows.append(_row("heart_band", name, "iterations", float(np.median(trials["iterations"][name][i])), None, rank))
        rows.append(_row("heart_band", name, "ranks_inside_2sd", float(inside), float(len(ranks))))
    return rows


def _stat(values, how) -> float | None:
    return None if values is None else float(how(values))


def _row(experiment, method, metric, value, paper_value=None, rank=None, group=None) -> Row:
    return Row(paper=PAPER, experiment=experiment, method=method, metric=metric, value=float(value),
               paper_value=paper_value, rank=rank, group=group)


# ============================================================================ Table 1
def table1(*, quick: bool, log: Callable[[str], None]) -> list[Row]:
    """§6.2: three groups X_ℓ = W_ℓH_ℓ with uniform [0, 1) factors (1000 × 20 rank 3, 500 × 20
    rank 3, 250 × 20 rank 6), features at unit ℓ2 norm; one trial (seed 0) per rank."""
    frame = nmf_table1()
    groups = frame.pop("group").to_numpy()
    X = frame.to_numpy()
    X = X / np.linalg.norm(X, axis=0)
    ranks = (2,) if quick else tuple(range(1, 13))
    names = {"g1": "large, rank 3", "g2": "medium, rank 3", "g3": "small, rank 6"}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rank in ranks:
            started = time.perf_counter()
            vanilla = NMF(rank, random_state=0).fit(X, sensitive_features=groups)
            fits = {"standard NMF": vanilla}
            for name, options in METHODS.items():
                if options is not None and options.get("stopping") != "authors":  # Heart's comparison; minutes here
                    fits[name] = FairerNMF(rank, estimates=vanilla.E_, random_state=0, **options).fit(
                        X, sensitive_features=groups
                    )
            for name, fit in fits.items():
                for label, loss, error in zip(fit.groups_, fit.group_losses_, fit.group_errors_, strict=True):
                    rows.append(_row("table1", name, "rel_loss", loss, None, rank, names[label]))
                    rows.append(_row("table1", name, "rel_error", error, None, rank, names[label]))
            log(f"fairer-nmf: Table 1 rank {rank} in {time.perf_counter() - started:.1f} s")
    return rows
