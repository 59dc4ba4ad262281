"""Shared test helpers: the papers' real data under ../shared/datasets (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# Property tests and fuzzers draw the same examples on every run, so that a green suite stays green
# on a clean clone (CI): a new example found by a random run would make CI fail at random. To explore
# beyond them (and keep what fails in .hypothesis/), run with FAIRAUDIT_HYPOTHESIS_RANDOM=1.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("random", derandomize=False)
settings.load_profile("random" if os.environ.get("FAIRAUDIT_HYPOTHESIS_RANDOM") else "fixed")

# The suite runs audits without bootstrap intervals unless a test asks for them (bootstrap=N):
# the per-family defaults (fairaudit.uncertainty.DEFAULT_BOOTSTRAP) are for users, and would make
# every audit in every test 20–200 times longer. Set here, so subprocesses (CLI, app) inherit it.
os.environ.setdefault("FAIRAUDIT_DEFAULT_BOOTSTRAP", "0")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"


def shared_file(relative: str) -> Path:
    """Path of a shared data file, or skip the test with the reason."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the ../shared/datasets folder is absent)")
    return path


def random_groups_data(rng: np.random.Generator, k: int, n: int, rows_per_group: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Groups with different covariance structure and means: a generic fair-PCA instance."""
    blocks = []
    for _ in range(k):
        mixing = rng.normal(size=(n, n)) * rng.uniform(0.2, 2.0, size=n)
        blocks.append(rng.normal(size=(rows_per_group, n)) @ mixing + rng.normal(scale=0.5, size=n))
    groups = np.repeat(np.arange(k), rows_per_group)
    return np.vstack(blocks), groups


def disk_full_for(monkeypatch, failing) -> None:
    """Make the report writer fail as a full disk does (``OSError`` ENOSPC, "No space left on
    device") for every path ``failing(path)`` accepts; other files are written as usual."""
    from fairaudit import report

    real = report._write_atomic

    def write(path, content):
        if failing(path):
            raise OSError(28, "No space left on device", str(path))
        real(path, content)

    monkeypatch.setattr(report, "_write_atomic", write)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def two_population_tensor(shape=(40, 6, 5), true_rank=3, shift=1.5, spread=3.0, noise=0.1, random_state=2):
    """A small CP test instance with two entity populations, labelled ``"A"`` / ``"B"``: Gaussian
    entity factors, B's shifted by ``shift`` on components 1–3 (a mean difference, which FATR's
    and HSIC's linear penalties see) and scaled by ``spread`` on components 4–6 (a difference in
    spread at equal means, which only a kernel penalty sees — Kim & Gittens' Theorem 1
    situation); Gaussian other factors and ``noise`` times the signal's RMS of noise."""
    from fairaudit.cpd._tensor import reconstruct

    rng = np.random.default_rng(random_state)
    n = shape[0]
    half = n // 2
    A = rng.normal(size=(n, true_rank))
    A[half:, : min(3, true_rank)] += shift
    A[half:, 3 : min(6, true_rank)] *= spread
    X = reconstruct([A] + [rng.normal(size=(d, true_rank)) for d in shape[1:]])
    X += noise * np.sqrt(np.mean(X * X)) * rng.normal(size=X.shape)
    return X, np.array(["A"] * half + ["B"] * (n - half))
