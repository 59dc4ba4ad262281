"""``python -m fairaudit.reproduce fufs --quick``: the FUFS paper's tables beside ours (needs
../shared/datasets; skipped with a reason when absent)."""

from __future__ import annotations

import math

import pytest

from fairaudit.reproduce import fufs
from fairaudit.reproduce.__main__ import main

from .conftest import shared_file


@pytest.mark.shared_data
@pytest.mark.slow
def test_quick_reproduction_prints_the_papers_table_2_beside_ours(tmp_path):
    shared_file("fufs/crime.csv")
    out = tmp_path / "fufs.json"
    assert main(["fufs", "--quick", "--json", str(out)]) == 0
    import json

    records = json.loads(out.read_text())["records"]
    table = {(r["method"], r["metric"]): r for r in records if r["experiment"] == "crime"}
    for method in ("LapScore", "NDFS", "UDFS", "MCFS", "FUFS"):
        for metric in fufs.METRICS:
            row = table[(method, metric)]
            assert row["paper_value"] == fufs.PAPER_TABLES["crime"][method][fufs.METRICS.index(metric)][0]
            assert row["value"] is not None and math.isfinite(row["value"])
            assert row["rank"] in (12, 48)  # 10 % or 40 % of 121 features
    assert table[("REFS", "acc")]["value"] is None and table[("REFS", "acc")]["paper_value"] == 0.774
    assert 0.0 <= table[("FUFS", "balance")]["value"] <= 71 / 319 + 1e-9  # at most the data's own mix
    assert "Table 2" in fufs.EXPERIMENTS["crime"]


def test_best_picks_the_smallest_size_among_ties_and_proportion_low():
    per = {10: {"balance": 0.2, "proportion": 1.5}, 20: {"balance": 0.2, "proportion": 1.4}, 30: {"balance": 0.1, "proportion": 1.6}}
    assert fufs.best(per, "balance") == (0.2, 10)
    assert fufs.best(per, "proportion") == (1.4, 20)
    assert fufs.sizes(121) == {10: 12, 15: 18, 20: 24, 25: 30, 30: 36, 35: 42, 40: 48}
