"""``python -m fairaudit.reproduce fair-cpd``: the harness contract, in quick mode."""

from __future__ import annotations

import json
import math

import pytest

from fairaudit.reproduce import fair_cpd, paper_module
from fairaudit.reproduce.__main__ import main

from .conftest import SHARED, shared_file


@pytest.fixture(scope="module")
def rows():
    shared_file("cmc/cmc.data")
    return fair_cpd.run(SHARED, quick=True)


def test_module_provides_the_harness_contract(rows):
    module = paper_module("fair-cpd")
    assert module is fair_cpd and module.TITLE.startswith("Kim & Gittens 2021")
    assert {row.experiment for row in rows} == set(fair_cpd.EXPERIMENTS)
    assert set(fair_cpd.NOTES) == set(fair_cpd.EXPERIMENTS)
    for row in rows:
        record = row.to_dict()
        assert set(record) == {"paper", "experiment", "method", "rank", "group", "metric", "paper_value", "value"}
        assert record["value"] is None or math.isfinite(record["value"])
    json.dumps([row.to_dict() for row in rows], allow_nan=False)


def test_what_the_paper_states_sits_beside_ours(rows):
    by_key = {(row.experiment, row.method, row.metric): row for row in rows}
    share = by_key[("cmc_data", "data", "share of label 1 (wife_working = 1)")]
    assert share.paper_value == 0.749 and share.value == pytest.approx(1104 / 1473)
    assert by_key[("cmc_data", "data", "rows")].value == 1473
    # FATR with the printed step sizes overflows (α_0 · 2λ_ℓ2 > 2); the stable solver's row carries the stated bound
    assert by_key[("a8_fatr", "FATR α_o=0.1, as printed", "diverged")].value == 1
    assert by_key[("cmc_fig3b", "FATR α_o=2e-05, as printed", "diverged")].value == 1
    assert by_key[("a8_fatr", "FATR α_o=0.1, paper's objective, our solver", "orthogonality")].paper_value == 1e-6
    # vanilla BCD on the A.8 tensor after quick mode's two short epochs: rank 8 of a rank-10 tensor
    assert 0.0 < by_key[("a8_khsic", "BCD (unregularised)", "residual_fit")].value < 0.5


def test_the_command_reports_missing_data(tmp_path, capsys):
    assert main(["fair-cpd", "--quick", "--datasets", str(tmp_path)]) == 2
    assert "cmc/cmc.data" in capsys.readouterr().err
