"""The CP family in the audit, the CLI, the frontier figure and the findings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fairaudit import AuditData, prepare, read_table
from fairaudit.audit import AuditConfig, run_audit, split_variant
from fairaudit.cli import main
from fairaudit.errors import ParameterError
from fairaudit.findings import findings
from fairaudit.plots import family_figures, frontier
from fairaudit.samples import load_sample
from fairaudit.vocabulary import render

from .conftest import two_population_tensor

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "cpd_tensor.csv"
FAST = {"leakage_classifier": "qda", "n_lambdas": 4, "n_epochs": 60}


@pytest.fixture(scope="module")
def small_result():
    X, groups = two_population_tensor(shape=(40, 6, 5), true_rank=3, random_state=2)
    data = AuditData.from_tensor(X, groups)
    return run_audit(data, AuditConfig(methods=("cpd",), ranks=(1, 2), options={"cpd": dict(FAST)}))


def test_records_are_tidy_and_unique(small_result):
    records = small_result.records
    assert list(records.columns) == ["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"]
    assert not records.duplicated(["method", "variant", "rank", "group", "metric"]).any()
    variants = set(records.variant)
    assert {"vanilla", "fatr", "hsic", "khsic"} <= variants
    assert {f"{m}@{i}" for m in ("fatr", "hsic", "khsic") for i in range(4)} <= variants
    sweep = records[records.variant.str.contains("@")]
    assert set(sweep["rank"]) == {2}  # the sweep runs at the largest audited rank (below the exact-fit rank)
    lam = sweep[sweep.metric == "lam"].assign(base=lambda f: f.variant.map(lambda v: split_variant(v)[0]))
    for _, points in lam.groupby("base"):
        values = points.sort_values("variant").value.to_numpy()
        assert np.all(np.diff(values) > 0)  # ascending λ along the index
    vanilla = records[(records.variant == "vanilla") & (records.metric == "lam")]
    assert (vanilla.value == 0).all()
    per_group = records[(records.metric == "residual_fit") & (records.group != "")]
    assert set(per_group.group) == {"A", "B"}
    metrics_present = set(records.metric)
    assert {"residual_fit", "orthogonality", "nkhsic", "unfairness", "unfairness_balanced", "mmd2", "mmd2_rbf", "lam", "epochs", "seconds"} <= metrics_present


def test_default_lambda_point_is_reused_in_the_sweep(small_result):
    records = small_result.records
    whole = records[(records.group == "") & (records["rank"] == 2)].pivot_table(index="variant", columns="metric", values="value")
    for name in ("khsic", "hsic", "fatr"):
        matches = whole[(whole.index.str.startswith(f"{name}@")) & np.isclose(whole["lam"], whole.loc[name, "lam"])]
        assert len(matches) == 1
        assert matches["residual_fit"].iloc[0] == whole.loc[name, "residual_fit"]


def test_fair_variants_cost_fit_and_reduce_dependence(small_result):
    whole = small_result.records[(small_result.records.group == "") & (small_result.records["rank"] == 2)]
    table = whole.pivot_table(index="variant", columns="metric", values="value")
    largest = table.loc["khsic@3"]
    assert largest["nkhsic"] < 0.2 * table.loc["vanilla", "nkhsic"]
    assert largest["residual_fit"] > table.loc["vanilla", "residual_fit"]


def test_frontier_figure_and_family_figures(small_result):
    fig = frontier(small_result.records, "cpd", "unfairness_balanced")
    names = [trace.name for trace in fig.data]
    assert names[-1] == "CP (ALS)" and len(fig.data) == 7  # a line and the default λ's ring per method, vanilla's star
    khsic = next(t for t in fig.data if t.name.startswith("KHSIC"))
    assert len(khsic.x) == 4 and np.all(np.diff(khsic.customdata) > 0)
    ring = next(t for t in fig.data if t.name == "KHSIC-BCD (RBF kernel): default λ")
    default = small_result.records.query("variant == 'khsic' and metric == 'lam' and rank == 2").value.item()
    assert ring.marker.symbol == "circle-open" and list(ring.customdata) == [default] and default in list(khsic.customdata)
    figures = family_figures(small_result.records, "cpd")
    kinds = [metric for metric, _ in figures]
    assert kinds[:3] == ["balanced_accuracy", "nkhsic", "unfairness"]  # the leakage findings' quantity first
    rank_curve = dict(figures)["residual_fit"]
    assert all("@" not in (trace.name or "") and "λ point" not in (trace.name or "") for trace in rank_curve.data)


def test_findings_mention_vanilla_and_default_lambda(small_result):
    sentences = findings(small_result)["cpd"]
    assert sentences[0].text.startswith("From vanilla CP (ALS)'s rank-2 representation")
    assert any(s.text.startswith("From KHSIC-BCD (RBF kernel)'s") and "default λ" in s.text for s in sentences)


def test_matrix_data_is_a_two_way_tensor_and_khsic_skip():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5)) + np.repeat([[0.0], [1.0]], 30, axis=0)
    data = AuditData.from_arrays(X, np.repeat(["a", "b"], 30))
    options = dict(FAST, khsic_max_rows=50, sweep=False)
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), options={"cpd": options}))
    assert set(result.records.variant) == {"vanilla", "fatr", "hsic"}
    reason = render(result.skipped[0]["reason"])
    assert result.skipped[0]["variant"] == "khsic" and "limit of 50" in reason and "khsic_max_rows=60" in reason
    assert "60×60 kernel matrix" in reason and "--cpd-khsic-max-rows 60" in render(result.skipped[0]["reason"], "cli")  # the exact kernel: memory
    assert "Run KHSIC anyway" in render(result.skipped[0]["reason"], "dashboard")
    nystrom = dict(options, khsic_kernel="nystrom", khsic_landmarks=20)
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="khsic", options={"cpd": nystrom}))
    assert "Nyström kernel (20 landmarks)" in result.skipped[0]["reason"]  # Nyström: time, not an n×n matrix


def test_the_default_sweep_rank_avoids_an_exact_fit():
    """On a 40 × 3 matrix rank 3 reproduces the data (residual fit 0): the sweep goes to rank 2."""
    from fairaudit.cpd.audit import default_sweep_rank

    assert default_sweep_rank((1, 2, 3), 3) == 2
    assert default_sweep_rank((3,), 3) == 3  # nothing below the limit: the only rank there is
    rng = np.random.default_rng(1)
    data = AuditData.from_arrays(rng.normal(size=(40, 3)), np.repeat(["a", "b"], 20))
    options = dict(FAST, n_lambdas=2)
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(1, 2, 3), variants="vanilla,hsic", options={"cpd": options}))
    sweep = result.records[result.records.variant.str.contains("@")]
    assert set(sweep["rank"]) == {2}


def test_bad_options():
    data = AuditData.from_arrays(np.random.default_rng(0).normal(size=(20, 3)), [0, 1] * 10)
    for options, message in (
        ({"colour": 1}, "unknown cpd option"),
        ({"leakage_classifier": "svm"}, "leakage_classifier must be one of"),
        ({"lambdas": [-1.0]}, "lambdas must be finite numbers >= 0"),
        ({"sweep_rank": 99}, "sweep_rank 99"),
    ):
        with pytest.raises(ParameterError, match=message):
            run_audit(data, AuditConfig(methods=("cpd",), ranks=(1,), options={"cpd": options}))


def test_cli_on_the_long_format_sample(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main([
        "audit", str(SAMPLE), "--sensitive", "population", "--tensor-index", "user,item,context",
        "--tensor-value", "score", "--methods", "cpd", "--ranks", "3", "--cpd-classifier", "qda",
        "--cpd-points", "3", "--cpd-epochs", "40", "--json", str(out), "--quiet",
    ])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["data"]["tensor"]["shape"] == [120, 10, 6]
    assert payload["config"]["options"]["cpd"] == {"leakage_classifier": "qda", "n_lambdas": 3, "n_epochs": 40}
    variants = {r["variant"] for r in payload["records"]}
    assert {"vanilla", "khsic", "khsic@2"} <= variants


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tensor-index", "user,item,context"], "needs both --tensor-index"),
        (["--tensor-index", "user,item,context", "--tensor-value", "score", "--missing", "drop"], "--missing does not apply"),
        (["--tensor-index", "user,item,context", "--tensor-value", "score", "--label", "x"], "--label does not apply"),
        (["--tensor-index", "user,item", "--tensor-value", "score"], "appears on lines"),
        (["--tensor-index", "user,item,context", "--tensor-value", "score", "--cpd-lambdas", "a,b"], "--cpd-lambdas"),
        (["--tensor-index", "user,item,context", "--tensor-value", "score", "--cpd-points", "0"], "at least 1"),
    ],
)
def test_cli_errors_exit_2_with_one_line(extra, message, capsys):
    code = main(["audit", str(SAMPLE), "--sensitive", "population", "--methods", "cpd", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.shared_data
@pytest.mark.skipif(not (SHARED / "cmc" / "cmc.data").exists(), reason="needs ../shared/datasets/cmc/cmc.data")
def test_contraceptive_matrix():
    """Kim & Gittens App. A.9: the contraceptive data as a 1473 × 9 matrix (every column but the
    sensitive wife_working, col_6), standardised, audited as a 2-way CP."""
    table = read_table(SHARED / "cmc" / "cmc.data", header=False)
    assert len(table.frame) == 1473
    data = prepare(table, sensitive="col_6")
    assert data.X.shape == (1473, 9) and data.group_sizes() == {"col_6=0": 369, "col_6=1": 1104}
    options = {"leakage_classifier": "qda", "n_epochs": 20, "sweep": False}
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla,khsic", options={"cpd": options}))
    table = result.records[result.records.group == ""].pivot_table(index="variant", columns="metric", values="value")
    assert table.loc["khsic", "nkhsic"] < 0.5 * table.loc["vanilla", "nkhsic"]
    assert table.loc["khsic", "residual_fit"] > table.loc["vanilla", "residual_fit"]


# ---------------------------------------------------------------- speed defaults and options
def test_default_options_are_the_fast_ones_and_mlp_stays_available():
    from fairaudit.cpd.audit import _options

    defaults = _options(AuditConfig(methods=("cpd",)))
    assert defaults["leakage_classifier"] == "qda" and defaults["tol"] == 1e-4 and defaults["khsic_kernel"] == "auto"
    assert _options(AuditConfig(methods=("cpd",), options={"cpd": {"leakage_classifier": "mlp"}}))["leakage_classifier"] == "mlp"
    with pytest.raises(ParameterError, match="khsic_kernel must be one of"):
        _options(AuditConfig(methods=("cpd",), options={"cpd": {"khsic_kernel": "rff"}}))


def test_sweep_is_a_continuation_along_lambda(small_result):
    """Each sweep point starts from the previous one: KHSIC's dependence falls along the grid."""
    whole = small_result.records[(small_result.records.group == "") & (small_result.records.metric == "nkhsic")]
    values = whole.set_index("variant").value
    sweep = [values[f"khsic@{i}"] for i in range(4)]
    assert all(b < a for a, b in zip(sweep, sweep[1:], strict=False))


def test_nystrom_kernel_is_recorded_as_a_warning():
    X, groups = two_population_tensor(shape=(60, 5, 4), true_rank=2, random_state=3)
    data = AuditData.from_tensor(X, groups)
    options = dict(FAST, sweep=False, khsic_kernel="nystrom", khsic_landmarks=20)
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla,khsic", options={"cpd": options}))
    assert any("Nyström" in w and "20 landmark entities" in w for w in result.warnings)
    plain = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla,khsic", options={"cpd": dict(FAST, sweep=False)}))
    assert not any("Nyström" in w for w in plain.warnings)  # 60 entities: exact by default


def test_cli_speed_options(tmp_path):
    out = tmp_path / "r.json"
    code = main([
        "audit", str(SAMPLE), "--sensitive", "population", "--tensor-index", "user,item,context",
        "--tensor-value", "score", "--methods", "cpd", "--ranks", "2", "--cpd-no-sweep", "--cpd-tol", "1e-3",
        "--cpd-kernel", "nystrom", "--cpd-landmarks", "30", "--variants", "vanilla,khsic", "--json", str(out), "--quiet",
    ])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["config"]["options"]["cpd"] == {"sweep": False, "tol": 1e-3, "khsic_kernel": "nystrom", "khsic_landmarks": 30}
    assert any("Nyström" in w for w in payload["warnings"])


@pytest.mark.parametrize("extra, message", [(["--cpd-landmarks", "1"], "--cpd-landmarks must be at least 2"), (["--cpd-tol", "-1"], "--cpd-tol")])
def test_cli_speed_option_errors(extra, message, capsys):
    code = main(["audit", str(SAMPLE), "--sensitive", "population", "--tensor-index", "user,item,context", "--tensor-value", "score", "--methods", "cpd", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err


# ---------------------------------------------------------------- formulation: the paper's or ours
def test_the_papers_formulation_in_the_audit_and_which_one_ran():
    rng = np.random.default_rng(4)
    X = rng.uniform(0.0, 1.0, size=(40, 3))
    data = AuditData.from_arrays(X, np.repeat(["a", "b"], 20), scaling="none")
    options = {"formulation": "paper", "n_epochs": 2, "inner_steps": 5, "n_lambdas": 2, "leakage_classifier": "qda"}
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla,hsic,khsic", options={"cpd": options}))
    table = result.records[result.records.group == ""].pivot_table(index="variant", columns="metric", values="value")
    np.testing.assert_allclose(table.loc[["hsic@0", "hsic@1"], "lam"], [0.005, 0.01])  # Fig. 2a's range (0, 0.01]
    np.testing.assert_allclose(table.loc[["khsic@0", "khsic@1"], "lam"], [0.2, 0.4])  # (0, 0.4]
    assert table.loc["hsic", "lam"] == 0.01 and table.loc["khsic", "lam"] == 0.04  # Fig. 2b's weights
    details = result.details["cpd"]
    assert details["vanilla"]["2"]["formulation"].startswith("paper: Kim & Gittens' Algorithm 1 as printed")
    ours = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla", options={"cpd": dict(FAST)}))
    assert ours.details["cpd"]["vanilla"]["2"]["formulation"].startswith("fairaudit:")


def test_the_papers_steps_diverging_is_a_skip_that_names_the_way_out():
    data = load_sample("cpd_tensor")  # 120 × 10 × 6: App. A.8's step sizes overflow on it
    options = {"formulation": "paper", "n_epochs": 3, "sweep": False}
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), variants="vanilla,fatr", options={"cpd": options}))
    assert {s["variant"] for s in result.skipped} == {"vanilla", "fatr"}
    reason = next(s["reason"] for s in result.skipped if s["variant"] == "fatr")
    assert "A update with step 3 overflowed at epoch 1" in reason
    assert "--cpd-formulation fairaudit" in render(reason, "cli") and "formulation='fairaudit'" in render(reason, "library")
    assert "“Formulation”" in render(reason, "dashboard")
    with pytest.raises(ParameterError, match="formulation must be one of"):
        run_audit(data, AuditConfig(methods=("cpd",), ranks=(2,), options={"cpd": {"formulation": "theirs"}}))


def test_cli_formulation_flag(tmp_path):
    out = tmp_path / "r.json"
    code = main([
        "audit", str(SAMPLE), "--sensitive", "population", "--tensor-index", "user,item,context", "--tensor-value", "score",
        "--methods", "cpd", "--ranks", "2", "--variants", "vanilla", "--cpd-formulation", "paper", "--cpd-epochs", "2",
        "--json", str(out), "--quiet",
    ])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["config"]["options"]["cpd"] == {"formulation": "paper", "n_epochs": 2}
    assert payload["skipped"][0]["variant"] == "vanilla"


# ---------------------------------------------------------------- fits on two worker threads
def test_two_workers_give_the_same_records_as_one(small_result):
    X, groups = two_population_tensor(shape=(40, 6, 5), true_rank=3, random_state=2)
    data = AuditData.from_tensor(X, groups)
    one = run_audit(data, AuditConfig(methods=("cpd",), ranks=(1, 2), options={"cpd": dict(FAST, n_jobs=1)}))
    key = ["method", "variant", "rank", "group", "metric"]
    # small_result is the default: two workers. Every number but the seconds is the same.
    values = lambda r: r.records[r.records.metric != "seconds"].sort_values(key, ignore_index=True)  # noqa: E731
    np.testing.assert_array_equal(values(one)[key].to_numpy(), values(small_result)[key].to_numpy())
    np.testing.assert_array_equal(values(one).value.to_numpy(), values(small_result).value.to_numpy())


def test_cancel_from_the_progress_callback_stops_the_workers():
    from fairaudit.audit import AuditCancelled

    X, groups = two_population_tensor(shape=(40, 6, 5), true_rank=3, random_state=2)
    data = AuditData.from_tensor(X, groups)
    seen = []

    def progress(event):
        seen.append(event)
        if len(seen) == 5:
            raise AuditCancelled("stop")

    with pytest.raises(AuditCancelled):
        run_audit(data, AuditConfig(methods=("cpd",), ranks=(1, 2), options={"cpd": dict(FAST)}), progress=progress)
    assert len(seen) == 5
    with pytest.raises(ParameterError, match="n_jobs"):
        run_audit(data, AuditConfig(methods=("cpd",), ranks=(1,), options={"cpd": {"n_jobs": 0}}))


def test_replicates_repeat_the_audit_procedure_on_the_resampled_entities():
    """Under our formulation a bootstrap replicate fits vanilla CP from its SVD start and each fair
    method from that vanilla fit, as the audit's own per-rank fits do (REPLICATE_STARTS): on a matrix
    the SVD start is the optimum, reached in the audit's 2 epochs, where a start from the audit's own
    (resampled) fit crawled for up to 37."""
    from fairaudit.audit import RecordSink
    from fairaudit.cpd.audit import CPDAudit

    rng = np.random.default_rng(8)
    X = rng.normal(size=(120, 6)) @ rng.normal(size=(6, 6))
    groups = np.where(np.arange(120) % 3 == 0, "b", "a")
    family = CPDAudit(AuditData.from_arrays(X, groups), AuditConfig(methods=("cpd",), ranks=(2, 3), options={"cpd": dict(FAST)}), RecordSink("cpd"))
    fits = family.fit(np.arange(120))
    rows = np.sort(rng.choice(120, 120))
    refits = family.fit(rows, warm=fits, replicate=True, seed=np.random.SeedSequence(3))
    first = np.unique(rows, return_index=True)[1]  # KHSIC holds each distinct entity once (REPLICATE_ROWS)

    def started_from(model, factors) -> bool:
        entities = factors[0] if len(model.init[0]) == len(rows) else factors[0][first]
        return all(np.array_equal(a, b) for a, b in zip(model.init, [entities, *factors[1:]], strict=True))

    for rank in (2, 3):
        vanilla = refits.models[("vanilla", rank)]
        assert vanilla.init == "svd" and vanilla.n_iter_ == fits.models[("vanilla", rank)].n_iter_ == 2
        for name in ("fatr", "hsic", "khsic"):
            if rank == family.sweep_rank:  # the sweep's point: from the audit's own fit, in its basin
                assert not started_from(refits.models[(name, rank)], vanilla.factors_)
            else:
                assert started_from(refits.models[(name, rank)], vanilla.factors_)
