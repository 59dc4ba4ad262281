"""CP fits on a resample's distinct entities with their counts (issue 23): the same problem and the
same iteration as on the repeated entities — penalties, gradients, fits and replicates — up to
rounding (the tolerances below are measured, with a margin: see each test)."""

from __future__ import annotations

import numpy as np
import pytest

from fairaudit import FairCPD
from fairaudit.audit import AuditConfig, FamilyEstimates, RecordSink, ReplicateJob, replicate_context, run_replicate
from fairaudit.cpd import _kernels
from fairaudit.cpd import audit as cpd_audit
from fairaudit.cpd.estimator import FORMULATIONS
from fairaudit.errors import ParameterError
from fairaudit.samples import load_sample


def resample(n, seed):
    """A sorted resample of ``n`` entities (as the audit draws them) and its distinct entities:
    ``(rows, first, inverse, counts)``."""
    rows = np.sort(np.random.default_rng(seed).choice(n, n))
    _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True, return_counts=True)
    return rows, first, inverse, counts.astype(float)


def low_rank(shape, n, seed, rank=3):
    rng = np.random.default_rng(seed)
    factors = [rng.normal(size=(d, rank)) for d in (n, *shape)]
    X = np.einsum("ir,jr->ij", *factors) if len(shape) == 1 else np.einsum("ir,jr,kr->ijk", *factors)
    return X + 0.1 * rng.normal(size=X.shape), rng.integers(0, 2, n)


def shell(method, codes, weights=None, whiten=False, landmarks=None):
    model = FairCPD(method=method, lam=1.0, **FORMULATIONS["fairaudit"])
    return model._bind_groups(codes, 2, gamma=0.3, whiten=whiten, landmarks=landmarks, weights=weights)


@pytest.mark.parametrize("whiten", [False, True])
@pytest.mark.parametrize("method", ["khsic", "hsic", "fatr"])
def test_weighted_penalty_is_the_repeated_rows_penalty(method, whiten):
    """Value, and the gradient at every copy, of each penalty on the normalised embedding: on the
    distinct rows with counts as on the repeated rows (measured within 1e-14 relative)."""
    rng = np.random.default_rng(0)
    rows, first, inverse, counts = resample(40, 1)
    A = rng.normal(size=(40, 3))[rows]
    codes = (np.arange(40) % 3 == 0).astype(int)[rows]
    value, grad = shell(method, codes, whiten=whiten)._penalty(A, gradient=True)
    weighted_value, weighted_grad = shell(method, codes[first], counts, whiten)._penalty(A[first], gradient=True)
    assert weighted_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(weighted_grad[inverse], grad, rtol=0, atol=1e-12 * np.abs(grad).max())


def test_weighted_nystrom_moves_every_copy_of_a_landmark_alike():
    """The Nyström KHSIC with counts: the repeated rows' value on the same landmarks, and the repeated
    rows' gradient averaged over each entity's copies — the landmark term shared by all copies, the one
    step that on the repeated rows would not treat copies alike (measured within 1e-6: float32 blocks)."""
    rng = np.random.default_rng(2)
    rows, first, inverse, counts = resample(60, 3)
    A = rng.normal(size=(60, 3))[rows]
    codes = (np.arange(60) % 2).astype(int)[rows]
    positions = _kernels.landmarks(codes, 12, 4)
    value, grad = shell("khsic", codes, landmarks=positions)._penalty(A, gradient=True)
    weighted = shell("khsic", codes[first], counts, landmarks=inverse[positions])
    weighted_value, weighted_grad = weighted._penalty(A[first], gradient=True)
    assert weighted_value == pytest.approx(value, rel=1e-6)
    averaged = np.zeros_like(weighted_grad)
    np.add.at(averaged, inverse, grad)
    np.testing.assert_allclose(weighted_grad, averaged / counts[:, None], rtol=0, atol=1e-6 * np.abs(averaged).max())
    assert not np.allclose(grad, weighted_grad[inverse], atol=1e-6 * np.abs(grad).max())  # the copies drawn as landmarks differ


CASES = [
    # (modes after the entities, formulation, method, λ): the measured largest relative difference of
    # the entity factor, against the same fit on the input times 1 + 2⁻⁵² (rounding's own reach)
    ((8,), "fairaudit", "none", 0.0),  # 1e-15
    ((8,), "fairaudit", "fatr", 0.5),  # 3.5e-8 (one ulp of input: 4.1e-8)
    ((8,), "fairaudit", "hsic", 0.5),  # 4.3e-9
    ((8,), "fairaudit", "khsic", 1.0),  # 1.1e-8 (one ulp: 7.2e-10)
    ((6, 5), "fairaudit", "hsic", 0.5),  # 4.4e-9 (one ulp: 4.5e-9)
    ((6, 5), "fairaudit", "khsic", 1.0),  # 6.0e-9 (one ulp: 9.3e-9)
    ((8,), "paper", "none", 0.0),  # 9e-16
    ((6, 5), "paper", "fatr", 0.01),  # 4e-16
    ((6, 5), "paper", "hsic", 0.01),  # 9e-16
    ((6, 5), "paper", "khsic", 0.02),  # 9e-16
]


@pytest.mark.parametrize(("shape", "formulation", "method", "lam"), CASES)
def test_weighted_fit_is_the_fit_on_the_repeated_entities(shape, formulation, method, lam):
    """Every variant on the exact kernel: the fit with ``sample_weight`` expanded to the repeated rows
    (:meth:`FairCPD.repeated`) is the fit on them — the same epochs, objective, residual fits and
    factors up to rounding (objective within 1e-10, residual fits and factors within 1e-6 — measured
    at most 3.5e-8 for the factors: fits of near-flat objectives carry
    rounding to their factors' √ε, as the same fit on the input times 1 + 2⁻⁵² does)."""
    X, codes = low_rank(shape, 80, 1)
    rows, first, inverse, counts = resample(80, 2)
    params = {**FORMULATIONS[formulation], "init": "svd", "rank": 3, "method": method, "lam": lam, "n_epochs": 30, "tol": 1e-8, "random_state": 3}
    if formulation == "paper":
        params.update(learning_rate=0.05, learning_rate_others=0.02, inner_steps=20)
    if method == "khsic":
        params["gamma"] = 0.3
    repeated = FairCPD(**params).fit(X[rows], sensitive_features=codes[rows])
    weighted = FairCPD(**params).fit(X[rows][first], sensitive_features=codes[rows][first], sample_weight=counts)
    expanded = weighted.repeated(inverse)
    assert weighted.factors_[0].shape[0] == len(first) < 0.8 * len(rows)
    assert expanded.n_iter_ == repeated.n_iter_
    assert expanded.objective_ == pytest.approx(repeated.objective_, rel=1e-10)
    assert expanded.residual_fit_ == pytest.approx(repeated.residual_fit_, rel=1e-6)
    np.testing.assert_allclose(expanded.group_residual_fit_, repeated.group_residual_fit_, rtol=1e-6)
    for ours, theirs in zip(expanded.factors_, repeated.factors_, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6 * np.abs(theirs).max())
    np.testing.assert_allclose(expanded.embedding_, repeated.embedding_, rtol=0, atol=1e-6 * np.abs(repeated.embedding_).max())
    np.testing.assert_allclose(weighted.embedding_, repeated.embedding_[first], rtol=0, atol=1e-6 * np.abs(repeated.embedding_).max())


def test_sample_weight_must_be_counts():
    X, codes = low_rank((5,), 10, 0)
    for bad in (np.ones(9), np.full(10, 0.5), np.r_[np.ones(9), np.nan]):
        with pytest.raises(ParameterError, match="sample_weight must hold one whole number >= 1 per entity"):
            FairCPD(rank=2, method="none").fit(X, sensitive_features=codes, sample_weight=bad)


def test_replicates_on_distinct_entities_give_the_repeated_rows_values(monkeypatch):
    """A CP audit's replicates (vanilla, FATR and KHSIC on the exact kernel, every measurement) with
    each distinct entity once and its count, against every copy as a row: the same values (measured
    within 2e-6 on this sample; leakage is a classifier's score on the same embedding)."""
    data = load_sample("two_groups")
    config = AuditConfig(methods=("cpd",), ranks=(2,), variants=("vanilla", "fatr", "khsic"), options={"cpd": {"sweep": False, "n_epochs": 20}})
    family = cpd_audit.CPDAudit(data, config, RecordSink("cpd"))
    rows = np.arange(len(family.codes))
    context = replicate_context(FamilyEstimates(family, {}, family.fit(rows), rows, None, {}))
    values = {}
    for mode in ("repeated", "distinct"):
        monkeypatch.setattr(cpd_audit, "REPLICATE_ROWS", mode)
        values[mode] = run_replicate(context, ReplicateJob(0, 1, np.random.SeedSequence(5))).values
    assert values["repeated"].keys() == values["distinct"].keys()
    for key, value in values["repeated"].items():
        assert values["distinct"][key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key
