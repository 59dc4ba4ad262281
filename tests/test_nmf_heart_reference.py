"""Heart Disease (Cleveland) with the paper's settings against the Fairer-NMF authors' saved results.

The authors' arrays (``../shared/datasets/fairer_nmf_reference/hd_*``, groups × ranks 1–10 ×
10 trials) index group 0 = sex 1 (male) and group 1 = sex 0 (female), although the paper's text
calls the 201-row group female; ``errors`` are 100 × relative errors, so ``errors/100 −
losses`` is the relative ``E_ℓ`` each trial used. Our run: the paper's preprocessing (§6.3:
rows with ``?`` dropped → 297, target and sex dropped → 12 features, each scaled to unit ℓ2
norm, §6.1), the paper's settings (Algorithm 1 with T = 5, multiplicative updates and eq. (10)
everywhere, random starts), seeds 0–9 like the authors' 10 trials; "inside" means our median
over the seeds lies within the authors' [min, max], widened by 10⁻⁴ (their rank-1 trials agree
to 10⁻⁸). The median, because 1–3 of our 10 random starts land in a poorer local minimum at some
ranks (e.g. standard NMF at rank 7: relative errors 15.5 % and 16.3 % for two seeds where the
other eight give 14.03–14.10 %, as all ten of the authors' trials do, 14.02–14.13 %); the paper
does not say how its random starts are drawn.

What holds: ``E_ℓ``, and Fairer-NMF by alternating minimisation, land inside at every rank;
standard NMF at every rank but 7, where the male group's median loss is 0.002 against the
authors' largest 0.0006 (the same heavier tail of poor minima: 3 of our 10 seeds). Fairer-NMF by
multiplicative updates stopped by eq. (10) as printed does not land inside at rank 10 (nor, for
the mean, at ranks 3, 5 and 9): eq. (10) stops it on a plateau — per-iteration changes below
10⁻⁴ of the error while the objective still falls — e.g. rank 10 seed 0 at +0.027 after 420
iterations where 20,000 iterations reach −0.0047. The authors' saved runs evidently went on: at
rank 1, where nothing is random, their ten trials agree to eight digits with losses equal to
2·10⁻⁷, which our iteration reaches only after ~20,000 iterations (eq. (10) stops at 275, losses
0.00390 and 0.00399). With our ``"window"`` rule the same updates land inside at every rank.
Run with ``-s`` for the table.
"""

from __future__ import annotations

import numpy as np
import pytest

from fairaudit.nmf import NMF, FairerNMF
from fairaudit.reproduce.fairer_nmf import heart_matrix, heart_trials
from tests.conftest import shared_file

pytestmark = [pytest.mark.shared_data, pytest.mark.slow]

RANKS = range(1, 11)
SEEDS = tuple(range(10))
SLACK = 1e-4


def reference(name: str) -> np.ndarray:
    """The authors' array in our group order (sex = 0, sex = 1)."""
    return np.load(shared_file(f"fairer_nmf_reference/hd_{name}.npy"))[::-1]


@pytest.fixture(scope="module")
def runs():
    """The reproduction's own trials (:func:`fairaudit.reproduce.fairer_nmf.heart_trials`)."""
    prepared = heart_matrix(shared_file("heart/processed.cleveland.data").parents[1])
    assert prepared.X.shape == (297, 12) and prepared.labels == ("col_2=0", "col_2=1")
    methods = ("Fairer-NMF MU (eq. (10))", "Fairer-NMF MU (window rule)", "Fairer-NMF AM (eq. (10))")  # the authors' rule: below
    trials = heart_trials(prepared.X, prepared.sensitive_features, RANKS, SEEDS, methods=methods)
    losses = trials["losses"]
    return {
        "E": trials["E"],
        "vanilla": losses["standard NMF"],
        "mu": losses["Fairer-NMF MU (eq. (10))"],
        "mu_window": losses["Fairer-NMF MU (window rule)"],
        "am": losses["Fairer-NMF AM (eq. (10))"],
    }


def inside(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per rank (and group): our median over seeds within their [min, max] over trials ± SLACK."""
    median = np.median(ours, axis=1)
    return (median >= theirs.min(axis=-1) - SLACK) & (median <= theirs.max(axis=-1) + SLACK)


def test_e_matches_the_authors_estimates(runs):
    """Algorithm 1 with multiplicative updates and eq. (10): the E_ℓ the authors' trials used."""
    theirs = reference("s_errors") / 100 - reference("s_losses")  # groups × ranks × trials
    ok = inside(runs["E"], theirs.transpose(1, 0, 2))
    assert ok.all(), np.argwhere(~ok) + [1, 0]


def test_standard_nmf_losses_match_but_at_rank_7(runs):
    ok = inside(runs["vanilla"], reference("s_losses").transpose(1, 0, 2))
    outside = {(int(i) + 1, int(g)) for i, g in np.argwhere(~ok)}
    assert outside <= {(7, 1)}, outside  # rank 7, male: our heavier tail of poor minima (module docstring)


def test_fairer_nmf_am_as_printed_lands_inside_at_every_rank(runs):
    theirs = reference("f_losses_AM").max(axis=0)  # ranks × trials: the objective
    ok = inside(runs["am"].max(axis=2), theirs)
    assert ok.all(), [r for r, good in zip(RANKS, ok, strict=True) if not good]


def test_fairer_nmf_mu_lands_inside_when_run_to_convergence(runs, capsys):
    theirs = reference("f_losses_MU").max(axis=0)
    window = inside(runs["mu_window"].max(axis=2), theirs)
    printed = inside(runs["mu"].max(axis=2), theirs)
    lines = ["rank | theirs: mean [min, max] | ours, median: eq. (10) as printed | window rule (ours) | AM as printed"]
    for i, rank in enumerate(RANKS):
        lines.append(
            f"{rank:4d} | {theirs[i].mean():+.4f} [{theirs[i].min():+.4f}, {theirs[i].max():+.4f}] | "
            f"{np.median(runs['mu'][i].max(axis=1)):+.4f} {'in ' if printed[i] else 'OUT'} | "
            f"{np.median(runs['mu_window'][i].max(axis=1)):+.4f} {'in ' if window[i] else 'OUT'} | "
            f"{np.median(runs['am'][i].max(axis=1)):+.4f}"
        )
    with capsys.disabled():
        print("\nFairer-NMF on Heart, largest relative loss (seeds 0–9):\n" + "\n".join(lines))
    assert window.all(), [r for r, good in zip(RANKS, window, strict=True) if not good]
    assert not printed[-1]  # rank 10 (at ranks 5, 8 and 9 our median is within 10⁻³ of their range's edge)
    # eq. (10) as printed stops on plateaus: never better than running on, clearly worse at rank 10
    gap = runs["mu"].max(axis=2).mean(axis=1) - runs["mu_window"].max(axis=2).mean(axis=1)
    assert np.all(gap > -1e-3) and gap[-1] > 0.005


def test_the_authors_rule_reproduces_their_rank_1_trials():
    """The authors' released code stops on the change of the relative *losses* and starts the
    weights at 1/L (``stopping="authors"``): at rank 1, where nothing is random, multiplicative
    updates then reach the authors' saved 0.003944 for both groups in about 36,000 iterations,
    as their 3.25 s per fit suggests; eq. (10) as printed stops after 275 at 0.00399. The other
    ranks (2-sd band at 10 of 10 ranks): ``python -m fairaudit.reproduce fairer-nmf``, heart_band."""
    prepared = heart_matrix(shared_file("heart/processed.cleveland.data").parents[1])
    X, groups = prepared.X, prepared.sensitive_features
    E = NMF(1, random_state=0).fit(X, sensitive_features=groups).E_
    theirs = reference("f_losses_MU")[:, 0, :]  # groups × trials at rank 1
    authors = FairerNMF(1, estimates=E, random_state=0, stopping="authors").fit(X, sensitive_features=groups)
    printed = FairerNMF(1, estimates=E, random_state=0).fit(X, sensitive_features=groups)
    np.testing.assert_allclose(authors.group_losses_, theirs.mean(axis=1), atol=1e-6)
    assert 30_000 < authors.n_iter_ < 40_000 and authors.converged_
    assert printed.n_iter_ < 300 and np.max(printed.group_losses_) > theirs.max() + 4e-5
