"""Shared test helpers: the papers' real data under ../shared/datasets (skipped when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

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


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
