"""Vanilla at its own optimum (issue 24): in what vanilla minimises — NMF's total error
‖X − WH‖, CP's residual fit — no fair variant of the same audit does better, on 20 small data
sets each, and the audit says where vanilla had to be restarted from a fair fit to get there."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fairaudit import AuditData
from fairaudit.audit import AuditConfig, RecordSink, run_audit
from fairaudit.nmf import NMF, FairerNMF
from fairaudit.nmf.audit import NMFAudit, at_own_optimum

DATA_SETS = 20
TOLERANCE = 1e-9
"""Relative: multiplicative updates never raise the error (Lee & Seung 2001, Theorem 1), so vanilla
restarted from a fair fit's factors ends at or below that fit's error, up to rounding."""


def nmf_data(seed: int) -> AuditData:
    """Two or three groups of non-negative rows, each a mix of its own parts plus noise, of
    different sizes and ranks (small: a few dozen rows, 5–8 features)."""
    rng = np.random.default_rng(seed)
    n_features = int(rng.integers(5, 9))
    blocks, labels = [], []
    for g in range(int(rng.integers(2, 4))):
        rows, parts = int(rng.integers(12, 45)), int(rng.integers(1, 4))
        blocks.append(rng.gamma(1.0, size=(rows, parts)) @ rng.uniform(size=(parts, n_features)) + 0.05 * rng.uniform(size=(rows, n_features)))
        labels += [f"g{g}"] * rows
    return AuditData.from_arrays(np.vstack(blocks), labels)


@pytest.mark.parametrize("seed", range(DATA_SETS))
def test_vanilla_nmf_is_at_its_own_optimum(seed):
    """Every rank of the audit's fit: vanilla's ‖X − WH‖ ≤ each Fairer-NMF fit's (both
    algorithms, the audit's defaults)."""
    data = nmf_data(seed)
    family = NMFAudit(data, AuditConfig(methods=("nmf",), ranks=(1, 2, 3), variants=("vanilla", "fair_mu", "fair_am"), random_state=seed), RecordSink("nmf"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = family.fit(np.arange(data.n_rows))
    for rank in family.ranks:
        vanilla = fits.models[("vanilla", rank)].reconstruction_err_
        for name in ("fair_mu", "fair_am"):
            assert vanilla <= fits.models[(name, rank)].reconstruction_err_ * (1 + TOLERANCE), (seed, rank, name)


def test_a_restart_from_a_better_fair_fit_is_kept_and_said():
    """Vanilla stopped early by eq. (10) on a plateau (the paper's rule), Fairer-NMF run on from it:
    ``at_own_optimum`` restarts vanilla from the fair factors and ends at or below them; the
    audit's detail names the fit it came from."""
    data = nmf_data(3)
    X = data.X_raw / np.linalg.norm(data.X_raw, axis=0)
    groups = np.asarray(data.groups.labels)[data.groups.codes]
    early = NMF(3, random_state=0, tol=1e-2).fit(X, sensitive_features=groups)
    fair = FairerNMF(3, init="custom", estimates=early.E_, stopping="window", random_state=0).fit(
        X, sensitive_features=groups, W=early.W_, H=early.components_
    )
    assert fair.reconstruction_err_ < early.reconstruction_err_  # the situation: a fair fit below vanilla
    best, source = at_own_optimum(early, {"fair_mu": fair}, X, groups, early.E_, {"solver": "mu", "stopping": "window", "tol": 1e-4})
    assert source == "fair_mu"
    assert best.reconstruction_err_ <= fair.reconstruction_err_ * (1 + TOLERANCE)
    kept, none = at_own_optimum(best, {"fair_mu": fair}, X, groups, early.E_, {"solver": "mu", "stopping": "window", "tol": 1e-4})
    assert kept is best and none is None  # nothing lower to restart from


def test_the_audit_names_a_restart_in_the_details():
    """Data set 8 is the one of the 20 where vanilla, stopped by the window rule from its own start,
    ends above Fairer-NMF (MU) at rank 3 (total relative error 0.10058 against 0.10039): the audit
    restarts it there and its details say so."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_audit(nmf_data(8), AuditConfig(methods=("nmf",), ranks=(3,), variants=("vanilla", "fair_mu"), random_state=8, leakage_permutations=0))
    text = result.details["nmf"]["vanilla"]["3"]["restart"]
    assert text.startswith("restarted from the fair_mu fit's factors: from its own start it stopped at total relative error 0.10058")
    totals = result.records[result.records.metric == "total_rel_error"].set_index("variant")["value"]
    assert totals["vanilla"] <= totals["fair_mu"]


# ============================================================================ CP
def cp_data(seed: int) -> AuditData:
    """A small 3-way tensor of two entity populations (tests/conftest.py's instance), sizes,
    true rank, shift and noise drawn per data set."""
    from .conftest import two_population_tensor

    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(24, 41)), int(rng.integers(4, 7)), int(rng.integers(3, 6)))
    X, groups = two_population_tensor(shape=shape, true_rank=int(rng.integers(2, 5)), shift=float(rng.uniform(0.5, 2.0)),
                                      spread=float(rng.uniform(1.0, 3.0)), noise=float(rng.uniform(0.02, 0.3)), random_state=seed)
    return AuditData.from_tensor(X, groups)


CP_OPTIONS = {"n_lambdas": 3, "n_epochs": 40, "n_jobs": 1}


@pytest.mark.parametrize("seed", range(DATA_SETS))
def test_vanilla_cp_is_at_its_own_optimum(seed):
    """Every rank: vanilla CP's residual fit ≤ every fair fit's of the same rank (the per-rank fits
    and the sweep's points), the audit's formulation, its tolerance and epochs for all."""
    from fairaudit.cpd.audit import EXACT, CPDAudit

    data = cp_data(seed)
    family = CPDAudit(data, AuditConfig(methods=("cpd",), ranks=(2, 3), random_state=seed, options={"cpd": CP_OPTIONS}), RecordSink("cpd"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = family.fit(np.arange(data.n_rows))
    for (variant, rank), model in fits.models.items():
        vanilla = fits.models[("vanilla", rank)].residual_fit_
        assert vanilla <= model.residual_fit_ * (1 + TOLERANCE) + EXACT, (seed, variant, rank)
