"""Embedded samples: the files in sample_data/ are exactly what the generators write."""

from __future__ import annotations

import pytest

from fairaudit import PCA
from fairaudit.samples import DEFAULT_FOLDER, SAMPLES, load_sample, sample_bytes


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_files_are_up_to_date(name):
    path = DEFAULT_FOLDER / SAMPLES[name].file_name
    assert path.read_bytes() == sample_bytes(name), f"run `python -m fairaudit.samples` to refresh {path}"
    data = load_sample(name)
    assert data.n_rows > 100 and len(data.group_sizes()) >= 2


def test_default_sample_shows_vanilla_pca_favouring_the_majority():
    data = load_sample("two_groups")
    assert data.group_sizes() == {"group=A": 480, "group=B": 120}
    assert data.label_name == "outcome" and (data.X_raw >= 0).all()
    for rank in range(1, 7):
        vanilla = PCA(rank).fit(data.X, sensitive_features=data.sensitive_features)
        majority, minority = vanilla.group_losses_
        assert minority > majority
        if rank >= 3:
            assert minority > 5 * majority


def test_table1_groups():
    data = load_sample("nmf_table1")
    assert data.group_sizes() == {"group=g1": 1000, "group=g2": 500, "group=g3": 250}
    assert data.n_features == 20 and (data.X_raw >= 0).all()
