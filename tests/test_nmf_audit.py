"""The NMF family inside an audit and on the command line: records, shared E_ℓ, skips, the
data boundary's NMF checks (negative values, all-zero rows, ranks) and their messages."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditData
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.cli import main
from fairaudit.errors import FairAuditError, NegativeValueError, ParameterError, RankError
from fairaudit.findings import findings
from fairaudit.nmf import _estimates as estimates_module
from fairaudit.nmf import clear_estimate_cache
from fairaudit.nmf.audit import nmf_input
from fairaudit.plots import family_figures
from fairaudit.report import result_json


def two_group_frame(seed=0, sizes=(70, 25)):
    rng = np.random.default_rng(seed)
    big = rng.uniform(size=(sizes[0], 2)) @ rng.uniform(size=(2, 8))
    small = rng.uniform(size=(sizes[1], 5)) @ rng.uniform(size=(5, 8))
    frame = pd.DataFrame(np.round(np.vstack([big, small]) + 0.01, 6), columns=[f"f{i}" for i in range(8)])
    frame.insert(0, "group", ["big"] * sizes[0] + ["small"] * sizes[1])
    return frame


def audit_data(frame):
    return AuditData.from_arrays(frame.drop(columns="group").to_numpy(), frame["group"], feature_names=list(frame.columns[1:]))


def test_audit_records_every_metric_and_shares_E(monkeypatch):
    clear_estimate_cache()
    calls = []
    real = estimates_module.solve_standard_runs
    monkeypatch.setattr(estimates_module, "solve_standard_runs", lambda X, starts, **k: calls.extend(starts) or real(X, starts, **k))
    data = audit_data(two_group_frame())
    result = run_audit(data, AuditConfig(methods=("nmf",), ranks=(1, 2, 3)))
    records = result.records
    assert set(records.variant) == {"vanilla", "fair_mu", "fair_am"}
    per_group = {"rel_error", "rel_loss", "own_rel_error"}
    whole = {"max_rel_loss", "rel_loss_gap", "rel_loss_ratio", "rel_error_ratio", "total_rel_error", "mmd2", "mmd2_rbf",
             "unfairness", "unfairness_balanced", "balanced_accuracy", "chance_balanced_accuracy", "leakage_pvalue",
             "n_iter", "seconds", "estimate_seconds"}
    assert set(records[records.group != ""].metric) == per_group
    assert set(records[records.group == ""].metric) == whole
    assert set(records[records.group != ""].group) == {"big", "small"}
    assert len(calls) == 3 * 2 * 5  # ranks × groups × T: once per rank for all three variants
    own = records[records.metric == "own_rel_error"].pivot_table(index="rank", columns="variant", values="value", aggfunc="max")
    assert (own.nunique(axis=1) == 1).all()
    pivot = records[records.group == ""].pivot_table(index="rank", columns=["metric", "variant"], values="value")
    assert (pivot["max_rel_loss", "fair_mu"] <= pivot["max_rel_loss", "vanilla"] + 1e-9).all()
    assert (pivot["rel_loss_gap", "fair_am"] < 1e-3).all()
    run_audit(data, AuditConfig(methods=("nmf",), ranks=(1, 2, 3)))  # a repeated audit: all cached
    assert len(calls) == 30
    top = findings(result)["nmf"][0]  # the 25-row group is too small to judge (AuditConfig.min_judged_rows)
    assert top.verdict == "info" and top.text.startswith("No verdict: fewer than two groups have at least 30 rows")
    assert "small (25 rows)" in top.text and top.evidence["small"][0]["group"] == "small"
    assert [metric for metric, _ in family_figures(records, "nmf")][:2] == ["rel_loss", "rel_error"]
    json.loads(result_json(result))


def test_am_is_skipped_above_its_size_limit_with_a_reason():
    data = audit_data(two_group_frame())
    config = AuditConfig(methods=("nmf",), ranks=(2,), options={"nmf": {"am_max_cells": 100}})
    result = run_audit(data, config)
    assert "fair_am" not in set(result.records.variant)
    (skip,) = result.skipped
    assert skip["variant"] == "fair_am" and "am_max_cells=100" in skip["reason"]
    asked = run_audit(data, AuditConfig(methods=("nmf",), ranks=(2,), variants="fair_am", options=config.options))
    assert set(asked.records.variant) == {"fair_am"}  # named explicitly: run regardless


def test_nmf_input_order_nonnegative_then_zero_rows_then_unit_norm():
    X = np.array([[1.0, -2.0], [3.0, 4.0], [2.0, -1.0], [5.0, 0.5]])
    data = AuditData.from_arrays(X, ["a", "a", "b", "b"], feature_names=["x", "y"])
    with pytest.raises(NegativeValueError, match="'y' = -2 at row 0.*nonnegative='shift'") as caught:
        nmf_input(data)
    assert "--nonnegative shift" in caught.value.render("cli")
    shifted = nmf_input(data, nonnegative="shift", zero_rows="drop")
    assert shifted.X.shape == (4, 2)  # row 0 becomes (1, 0): not all-zero, kept
    np.testing.assert_allclose(np.linalg.norm(shifted.X, axis=0), 1.0)
    raw = X - np.array([0.0, -2.0])
    np.testing.assert_allclose(shifted.X, raw / np.linalg.norm(raw, axis=0))
    assert "each shifted by its own minimum" in shifted.notes[0]
    clipped = nmf_input(data, nonnegative="clip")
    assert clipped.X.min() == 0.0


def test_all_zero_rows_stop_or_are_dropped():
    X = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 1.0], [2.0, 2.0], [1.0, 1.0]])
    data = AuditData.from_arrays(X, ["a", "a", "a", "b", "b"])
    with pytest.raises(FairAuditError, match=r"only zeros.*row 1.*zero_rows='drop'") as caught:
        nmf_input(data)
    assert "--zero-rows drop" in caught.value.render("cli")
    assert "“Rows that are all zero” → “leave them out” (NMF page)" in caught.value.render("dashboard")
    dropped = nmf_input(data, zero_rows="drop")
    assert dropped.X.shape == (4, 2) and list(dropped.codes) == [0, 0, 1, 1]
    assert "dropped 1 all-zero row(s): row 1" in dropped.notes[0]


def test_ranks_are_checked_against_features_rows_and_the_smallest_group():
    data = audit_data(two_group_frame(sizes=(70, 6)))
    with pytest.raises(RankError, match="larger than the data allows"):
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(9,)))
    with pytest.raises(RankError, match=r"group 'small' \(6 rows\)"):
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(7,)))
    default = run_audit(data, AuditConfig(methods=("nmf",), variants="vanilla"))
    assert sorted(set(default.records["rank"])) == [1, 2, 3, 4, 5, 6]


def test_unknown_or_bad_nmf_options():
    data = audit_data(two_group_frame())
    with pytest.raises(ParameterError, match="unknown NMF option"):
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(1,), options={"nmf": {"iterations": 3}}))
    with pytest.raises(ParameterError, match="nonnegative must be one of"):
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(1,), options={"nmf": {"nonnegative": "abs"}}))


# ============================================================================ command line
def write(tmp_path, frame, name="data.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return str(path)


def test_cli_runs_nmf_and_writes_json(tmp_path, capsys):
    path = write(tmp_path, two_group_frame())
    out = tmp_path / "r.json"
    code = main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "1:3", "--json", str(out), "--verbose"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "[nmf]" in printed and "max_rel_loss" in printed and "finding (nmf, " in printed
    payload = json.loads(out.read_text())
    assert {r["variant"] for r in payload["records"]} == {"vanilla", "fair_mu", "fair_am"}


def test_cli_negative_values(tmp_path, capsys):
    frame = two_group_frame()
    frame.loc[3, "f2"] = -1.5
    path = write(tmp_path, frame)
    assert main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "2"]) == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1
    assert "'f2' = -1.5 at line 5" in message and "--nonnegative shift" in message
    assert main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "2", "--nonnegative", "clip", "--quiet"]) == 0


def test_cli_all_zero_row(tmp_path, capsys):
    frame = two_group_frame()
    frame.iloc[10, 1:] = 0.0
    path = write(tmp_path, frame)
    assert main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "2"]) == 2
    message = capsys.readouterr().err
    assert "only zeros in the feature columns: line 12" in message and "--zero-rows drop" in message
    assert main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "2", "--zero-rows", "drop"]) == 0
    assert "dropped 1 all-zero row(s): line 12" in capsys.readouterr().out


def test_cli_rank_too_large(tmp_path, capsys):
    path = write(tmp_path, two_group_frame())
    assert main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "1:9"]) == 2
    message = capsys.readouterr().err
    assert "rank 9 is larger than the data allows (8" in message


# ============================================================================ options: words, flags, versions
def test_every_nmf_option_has_a_vocabulary_entry_and_a_cli_flag():
    from fairaudit.cli import build_parser
    from fairaudit.nmf.audit import DEFAULT_OPTIONS, OPTION_TERMS
    from fairaudit.vocabulary import OPTIONS

    assert set(OPTION_TERMS) == set(DEFAULT_OPTIONS)
    audit_parser = next(
        action for action in build_parser()._subparsers._group_actions[0].choices.values() if action.prog.endswith("audit")
    )
    flags = {flag for action in audit_parser._actions for flag in action.option_strings}
    for key, name in OPTION_TERMS.items():
        option = OPTIONS[name]
        assert option.param == f"nmf.{key}", key
        assert option.flag in flags, option.flag
        assert option.page.startswith("NMF") and option.widget


def test_bad_option_messages_name_the_option_in_each_interface():
    data = audit_data(two_group_frame())
    with pytest.raises(ParameterError, match="stopping must be one of eq10, window") as caught:
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(1,), options={"nmf": {"stopping": "never"}}))
    assert "--fair-nmf-stopping" in caught.value.render("cli")
    assert "“Fairer-NMF stopping rule” (NMF page)" in caught.value.render("dashboard")
    with pytest.raises(FairAuditError, match="tol must be a non-negative number") as caught:
        run_audit(data, AuditConfig(methods=("nmf",), ranks=(1,), options={"nmf": {"tol": -1.0}}))
    assert "--nmf-tol must be" in caught.value.render("cli")


def test_each_fit_names_the_version_that_ran():
    data = audit_data(two_group_frame())
    result = run_audit(data, AuditConfig(methods=("nmf",), ranks=(2,)))
    details = result.details["nmf"]
    assert "multiplicative updates stopped by eq. (10)" in details["vanilla"]["2"]["method"]
    assert "E_ℓ: Algorithm 1, mean of T = 5 NMFs" in details["vanilla"]["2"]["method"]
    mu = details["fair_mu"]["2"]["method"]
    assert "Algorithm 3" in mu and "c_ℓ²/‖X_ℓ‖²" in mu and "from the standard NMF (ours)" in mu and "window rule (ours)" in mu
    assert "Algorithm 2" in details["fair_am"]["2"]["method"]
    ours = run_audit(data, AuditConfig(methods=("nmf",), ranks=(2,), variants=("fair_mu",), options={"nmf": {
        "stopping": "eq10", "mu_weights": "gradient", "init": "random", "keep_best": True, "nmf_solver": "cd"}}))
    text = ours.details["nmf"]["fair_mu"]["2"]["method"]
    for words in ("eq. (10) (the paper's)", "c⁽⁰⁾ = 1 (ours)", "from a random start (the paper's)", "best iterate kept (ours)",
                  "coordinate descent (ours)"):
        assert words in text, words
    assert set(ours.records.variant) == {"fair_mu"}


def test_cli_takes_the_nmf_options(tmp_path):
    path = write(tmp_path, two_group_frame())
    out = tmp_path / "r.json"
    code = main(["audit", path, "--sensitive", "group", "--methods", "nmf", "--ranks", "2", "--variants", "fair_mu",
                 "--fair-nmf-stopping", "eq10", "--fair-nmf-weights", "gradient", "--fair-nmf-init", "nmf",
                 "--fair-nmf-keep-best", "--nmf-solver", "cd", "--nmf-stopping", "window", "--quiet", "--json", str(out)])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["config"]["options"]["nmf"] == {
        "stopping": "eq10", "mu_weights": "gradient", "init": "nmf", "keep_best": True, "nmf_solver": "cd", "nmf_stopping": "window"}
