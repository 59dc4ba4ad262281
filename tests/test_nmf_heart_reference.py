"""Heart Disease (Cleveland) against the Fairer-NMF authors' saved results.

The authors' arrays (``../shared/datasets/fairer_nmf_reference/hd_*``, groups × ranks 1–10 ×
10 trials) index group 0 = sex 1 (male) and group 1 = sex 0 (female); ``grperr`` and
``errors`` are 100 × relative errors. Our run: the paper's preprocessing (rows with ``?``
dropped → 297, target and sex dropped → 12 features, each scaled to unit ℓ2 norm), seed 0.

Our ``E_ℓ`` come from coordinate descent and are lower than the authors' (their group NMFs
stopped earlier: their own E has a trial-to-trial spread of up to 1 percentage point), so our
Fairer-NMF losses are higher than theirs by about that difference. Given *their* ``E_ℓ``, our
Fairer-NMF lands inside the spread of their 10 trials at every rank — the algorithms agree and
the difference is the yardstick. Run with ``-s`` to see the table.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from fairaudit import NMF, FairerNMF, load
from fairaudit.nmf.audit import nmf_input

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
HEART = SHARED / "heart" / "processed.cleveland.data"
REFERENCE = SHARED / "fairer_nmf_reference"

pytestmark = pytest.mark.shared_data


def reference(name: str) -> np.ndarray:
    path = REFERENCE / f"hd_{name}.npy"
    if not path.exists():
        pytest.skip(f"the authors' reference results are not available: {path} is missing")
    return np.load(path)[::-1]  # their group order is (male, female); ours is (sex=0, sex=1)


@pytest.fixture(scope="module")
def heart():
    if not HEART.exists():
        pytest.skip(f"real data not available: {HEART} (the ../shared/datasets folder is absent)")
    data = load(HEART, sensitive="col_2", ignore=["col_14"], missing="drop")
    prepared = nmf_input(data)
    assert prepared.X.shape == (297, 12) and prepared.labels == ("col_2=0", "col_2=1")
    return prepared.X, prepared.sensitive_features


def test_heart_matches_the_authors_results(heart):
    X, groups = heart
    s_losses, f_losses, own = reference("s_losses"), reference("f_losses_MU"), reference("s_grperr")
    norms = np.array([np.linalg.norm(X[(groups == g).to_numpy()]) for g in ("col_2=0", "col_2=1")])
    lines = [
        "rank | E_ℓ % female, male: ours / theirs | NMF rel_loss female, male: ours / theirs [min, max] | "
        "Fairer-NMF (MU) max rel_loss: ours, ours with their E_ℓ / theirs [min, max]"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rank in range(1, 11):
            i = rank - 1
            vanilla = NMF(rank, random_state=0).fit(X, sensitive_features=groups)
            fair = FairerNMF(rank, estimates=vanilla.E_, init="custom").fit(
                X, sensitive_features=groups, W=vanilla.W_, H=vanilla.components_
            )
            their_E = own[:, i].mean(axis=1) / 100 * norms
            fair_their_E = FairerNMF(rank, estimates=their_E, init="custom").fit(
                X, sensitive_features=groups, W=vanilla.W_, H=vanilla.components_
            )
            lo, hi = s_losses[:, i].min(axis=1), s_losses[:, i].max(axis=1)
            f_lo, f_hi = f_losses[0, i].min(), f_losses[0, i].max()
            E_text = ", ".join(f"{100 * a:.2f} / {b:.2f}" for a, b in zip(vanilla.own_rel_errors_, own[:, i].mean(axis=1), strict=True))
            loss_text = ", ".join(
                f"{a:.4f} / {m:.4f} [{low:.4f}, {high:.4f}]"
                for a, m, low, high in zip(vanilla.group_losses_, s_losses[:, i].mean(axis=1), lo, hi, strict=True)
            )
            lines.append(
                f"{rank:4d} | {E_text} | {loss_text} | {fair.objective_:.4f}, {fair_their_E.objective_:.4f} / "
                f"{f_losses[0, i].mean():.4f} [{f_lo:.4f}, {f_hi:.4f}]"
            )
            # Our group NMFs are at least as good as theirs (E_ℓ is the best rank-r error).
            assert np.all(100 * vanilla.own_rel_errors_ <= own[:, i].mean(axis=1) + 0.05), rank
            # Standard NMF: each group's relative loss lies in the spread of their 10 trials.
            assert np.all(vanilla.group_losses_ >= lo - 1e-3) and np.all(vanilla.group_losses_ <= hi + 1e-3), rank
            # Fairer-NMF equalises the losses and lowers the largest one ...
            assert np.ptp(fair.group_losses_) < 1e-3 and np.ptp(fair_their_E.group_losses_) < 1e-3, rank
            assert fair.objective_ < vanilla.objective_, rank
            # ... and, measured against their E_ℓ, to a level inside the spread of their trials.
            assert f_lo - 1e-3 <= fair_their_E.objective_ <= f_hi + 1e-3, rank
            if rank == 1:  # no randomness left at rank 1: the numbers must agree exactly
                np.testing.assert_allclose(vanilla.group_losses_, s_losses[:, 0].mean(axis=1), atol=1e-4)
                assert fair.objective_ == pytest.approx(f_losses[0, 0].mean(), abs=1e-4)
    print("\n" + "\n".join(lines))
