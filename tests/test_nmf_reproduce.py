"""``python -m fairaudit.reproduce fairer-nmf``: the module's contract and a quick run."""

from __future__ import annotations

import json

import pytest

from fairaudit.reproduce import DatasetsMissing, paper_module, run
from fairaudit.reproduce.__main__ import main
from tests.conftest import SHARED, shared_file


def test_module_provides_the_harness_contract():
    module = paper_module("fairer-nmf")
    assert module.TITLE and set(module.NOTES) <= set(module.EXPERIMENTS)
    assert callable(module.run)


def test_missing_heart_file_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(DatasetsMissing, match="Heart Disease file"):
        run("fairer-nmf", tmp_path, quick=True)
    assert main(["fairer-nmf", "--quick", "--datasets", str(tmp_path)]) == 2
    assert "Heart Disease file" in capsys.readouterr().err


@pytest.mark.shared_data
def test_quick_run_puts_the_authors_numbers_beside_ours(tmp_path):
    shared_file("heart/processed.cleveland.data")
    shared_file("fairer_nmf_reference/hd_s_losses.npy")
    out = tmp_path / "fairer_nmf.json"
    assert main(["fairer-nmf", "--quick", "--datasets", str(SHARED), "--json", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    assert {r["experiment"] for r in records} == set(paper_module("fairer-nmf").EXPERIMENTS)
    heart = [r for r in records if r["experiment"] == "heart"]
    assert {r["rank"] for r in heart} == {1, 10}
    assert {r["group"] for r in heart} == {"female (sex 0)", "male (sex 1)"}
    assert all(r["paper_value"] is not None for r in heart)
    # Rank 1 has no randomness left: standard NMF and AM agree with the authors' saved losses.
    for method in ("standard NMF", "Fairer-NMF AM (eq. (10))"):
        for r in heart:
            if r["method"] == method and r["rank"] == 1 and r["metric"] == "rel_loss":
                assert r["value"] == pytest.approx(r["paper_value"], abs=1e-4), r
    band = {(r["method"], r["rank"]): r["value"] for r in records if r["experiment"] == "heart_band" and r["metric"] == "inside_2sd"}
    assert band[("Fairer-NMF MU (authors' rule)", 1)] == band[("Fairer-NMF MU (authors' rule)", 10)] == 1.0
    assert band[("Fairer-NMF MU (eq. (10))", 1)] == 0.0  # stops at 0.00399 where every trial of theirs is 0.003944
    table1 = [r for r in records if r["experiment"] == "table1"]
    assert table1 and all(r["paper_value"] is None for r in table1)
