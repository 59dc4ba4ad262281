"""Auditing a representation the user already has (variant 'yours')."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA as SklearnPCA

from fairaudit import AuditConfig, AuditData, run_audit
from fairaudit.cli import main
from fairaudit.errors import InputFileError, ParameterError, RankError
from fairaudit.nmf.audit import nmf_input
from fairaudit.report import render_html, result_json
from fairaudit.yours import YOURS, attach, audit_components, audit_embedding, read_components, read_embedding, sentences

PCA_METRICS = [
    "error", "loss", "max_loss", "loss_gap", "loss_ratio", "error_ratio", "variance_explained", "mmd2", "mmd2_rbf", "unfairness",
    "unfairness_balanced", "balanced_accuracy", "chance_balanced_accuracy", "leakage_pvalue", "effective_rank",
]
LEAKAGE_METRICS = {"unfairness", "unfairness_balanced", "balanced_accuracy", "chance_balanced_accuracy", "leakage_pvalue"}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    blocks = [rng.normal(size=(m, 7)) @ rng.normal(size=(7, 7)) * s + rng.normal(size=7) for m, s in ((150, 1.0), (60, 2.0), (40, 0.5))]
    groups = np.repeat(["a", "b", "c"], [150, 60, 40])
    return AuditData.from_arrays(np.vstack(blocks), pd.Series(groups, name="g"), feature_names=[f"v{j}" for j in range(7)])


def _by_key(records: pd.DataFrame) -> pd.Series:
    return records.set_index(["rank", "group", "metric"]).value


def test_sklearn_pca_components_audited_as_yours_match_vanilla_pca(data, tmp_path):
    config = AuditConfig(methods=("pca",), ranks=range(1, 6), variants=("vanilla",))
    vanilla = _by_key(run_audit(data, config).records.query("metric in @PCA_METRICS"))
    fitted = SklearnPCA(n_components=5).fit(data.X)  # the data's own (standardised) scaling
    path = tmp_path / "components.csv"
    pd.DataFrame(fitted.components_, columns=data.feature_names).to_csv(path, index=False)
    result = audit_components(data, read_components(path, data), config)
    assert set(result.records.variant) == {YOURS}
    yours = _by_key(result.records.query("metric in @PCA_METRICS"))
    assert set(yours.index) == set(vanilla.index)
    assert np.max(np.abs(yours - vanilla.reindex(yours.index))) < 1e-8
    np.save(tmp_path / "components.npy", fitted.components_)
    from_array = _by_key(audit_components(data, read_components(tmp_path / "components.npy", data), config).records)
    assert np.max(np.abs(from_array - yours.reindex(from_array.index))) < 1e-12


@pytest.mark.parametrize("layout", ["index", "transposed", "no_header", "shuffled"])
def test_component_file_layouts(data, tmp_path, layout):
    weights = np.random.default_rng(0).normal(size=(3, 7))
    frame = pd.DataFrame(weights, columns=data.feature_names)
    path = tmp_path / "c.csv"
    if layout == "index":
        frame.to_csv(path)  # pandas writes the row index as an unnamed first column
    elif layout == "transposed":
        frame.T.to_csv(path)
    elif layout == "no_header":
        frame.to_csv(path, index=False, header=False)
    else:
        frame[list(reversed(data.feature_names))].to_csv(path, index=False)
    read = read_components(path, data)
    np.testing.assert_allclose(read.matrix, weights, rtol=1e-15)


def test_component_files_that_do_not_fit_are_refused(data, tmp_path):
    path = tmp_path / "c.csv"
    frame = pd.DataFrame(np.ones((2, 7)), columns=data.feature_names)
    frame.drop(columns="v3").to_csv(path, index=False)
    with pytest.raises(InputFileError, match=r"missing 'v3'"):
        read_components(path, data)
    frame.assign(extra=1.0).to_csv(path, index=False)
    with pytest.raises(InputFileError, match=r"weights column\(s\) 'extra', which the audit does not use"):
        read_components(path, data)
    frame.assign(v1=np.nan).to_csv(path, index=False)
    with pytest.raises(Exception, match="missing cells"):
        read_components(path, data)
    np.save(tmp_path / "c.npy", np.ones((2, 5)))
    with pytest.raises(InputFileError, match="one column per feature"):
        read_components(tmp_path / "c.npy", data)
    with pytest.raises(RankError, match="below every audited rank"):
        audit_components(data, read_components(_write(tmp_path, np.ones((2, 7)), data), data), AuditConfig(ranks=(3, 4)))
    with pytest.raises(ParameterError, match="PCA or NMF family"):
        audit_components(data, read_components(_write(tmp_path, np.ones((2, 7)), data), data), AuditConfig(methods=("fs",)))


def _write(tmp_path, matrix, data) -> str:
    path = tmp_path / "w.csv"
    pd.DataFrame(matrix, columns=data.feature_names).to_csv(path, index=False)
    return str(path)


def test_dependent_components_are_audited_on_their_span(data, tmp_path):
    rows = np.random.default_rng(1).normal(size=(2, 7))
    dependent = np.vstack([rows, rows.sum(axis=0)])  # the third row adds no dimension
    result = audit_components(data, read_components(_write(tmp_path, dependent, data), data), AuditConfig(ranks=(2, 3)))
    table = result.records[result.records.group == ""].pivot(index="rank", columns="metric", values="value")
    assert table.loc[3, "effective_rank"] == 2
    errors = result.records[(result.records.metric == "error")].pivot(index="rank", columns="group", values="value")
    np.testing.assert_allclose(errors.loc[3], errors.loc[2], atol=1e-12)  # same span, same reconstruction
    assert any("linearly dependent" in w for w in result.warnings)


def test_our_nmf_dictionary_audited_as_yours(data, tmp_path):
    positive = AuditData.from_arrays(np.abs(data.X_raw), data.sensitive_features, feature_names=data.feature_names)
    config = AuditConfig(methods=("nmf",), ranks=(3,), variants=("vanilla",), keep_models=True, options={"nmf": {"n_estimates": 2}})
    audited = run_audit(positive, config)
    H = audited.models[("nmf", "vanilla", 3)].components_
    yours = audit_components(positive, read_components(_write(tmp_path, H, positive), positive), config).records
    vanilla = audited.records[audited.records.variant == "vanilla"]
    get = lambda rows, metric: rows[rows.metric == metric].set_index("group").value.sort_index()  # noqa: E731
    # the same E_ℓ (Algorithm 1, same settings and seed) and a W at least as good for this H
    np.testing.assert_array_equal(get(yours, "own_rel_error"), get(vanilla, "own_rel_error"))
    assert (get(yours, "rel_error") <= get(vanilla, "rel_error") + 1e-9).all()
    assert set(yours.metric) >= {"rel_loss", "max_rel_loss", "rel_loss_gap", "total_rel_error", "unfairness_balanced"}
    with pytest.raises(InputFileError, match="negative weights"):
        audit_components(positive, read_components(_write(tmp_path, -H, positive), positive), config)
    assert nmf_input(positive).X.shape == positive.X_raw.shape
    too_many = np.abs(np.random.default_rng(1).normal(size=(8, 7)))  # more rows than the 7 features: every E_ℓ exact
    with pytest.raises(RankError, match=r"the NMF dictionary has 8 rows, .*\(features 7, smallest group 40 rows\)"):
        audit_components(positive, read_components(_write(tmp_path, too_many, positive), positive), config)


def test_embeddings_give_the_representation_metrics(data, tmp_path):
    config = AuditConfig(methods=("pca",), ranks=(3,), variants=("vanilla",), keep_models=True)
    audited = run_audit(data, config)
    embedding = audited.models[("pca", "vanilla", 3)].transform(data.X)
    path = tmp_path / "e.csv"
    pd.DataFrame(embedding, columns=["e1", "e2", "e3"]).rename_axis("row").to_csv(path)
    read = read_embedding(path, data)
    assert read.matrix.shape == (250, 3) and "'row' set aside" in read.source["layout"]
    yours = audit_embedding(data, read, config).records
    assert set(yours.metric) == {"mmd2", "mmd2_rbf"} | LEAKAGE_METRICS and set(yours["rank"]) == {3}
    vanilla = audited.records[(audited.records.variant == "vanilla") & audited.records.metric.isin(yours.metric)]
    np.testing.assert_allclose(yours.set_index("metric").value.sort_index(), vanilla.set_index("metric").value.sort_index(), atol=1e-10)
    pd.DataFrame(embedding[:-1]).to_csv(path, index=False)
    with pytest.raises(InputFileError, match="249 rows but the audit has 250"):
        read_embedding(path, data)


def test_attach_puts_yours_next_to_the_variants(data, tmp_path):
    config = AuditConfig(methods=("pca",), ranks=(1, 2), variants=("vanilla", "fair_eig"))
    result = run_audit(data, config)
    components = read_components(_write(tmp_path, SklearnPCA(2).fit(data.X).components_, data), data)
    both = attach(result, audit_components(data, components, config))
    assert set(both.records.variant) == {"vanilla", "fair_eig", YOURS}
    assert both.config[YOURS]["name"] == "w.csv" and both.config[YOURS]["pca_ranks"] == [1, 2]
    assert "Your representation" in render_html(both)
    said = sentences(both, "pca")
    assert said[0].startswith("At rank 2, your representation's largest group loss is") and "Fair PCA" in said[0]
    assert "balanced accuracy" in said[1]
    with pytest.raises(ParameterError, match="already holds a 'yours'"):
        attach(both, audit_components(data, components, config))


def test_cli_audits_components_next_to_vanilla(tmp_path, capsys):
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.normal(size=(90, 4)), columns=list("abcd")).assign(grp=np.repeat(["x", "y"], [60, 30]))
    source = tmp_path / "d.csv"
    frame.to_csv(source, index=False)
    components = tmp_path / "mine.csv"
    pd.DataFrame(rng.normal(size=(2, 4)), columns=list("abcd")).to_csv(components, index=False)
    out = tmp_path / "r.json"
    assert main(["audit", str(source), "--sensitive", "grp", "--ranks", "1:3", "--variants", "vanilla",
                 "--components", str(components), "--json", str(out), "--quiet"]) == 0
    saved = json.loads(out.read_text())
    ranks = sorted({r["rank"] for r in saved["records"] if r["variant"] == YOURS})
    assert ranks == [1, 2] and saved["config"][YOURS]["name"] == "mine.csv"
    pd.DataFrame(rng.normal(size=(2, 3)), columns=list("abc")).to_csv(components, index=False)
    assert main(["audit", str(source), "--sensitive", "grp", "--components", str(components), "--quiet"]) == 2
    assert "missing 'd'" in capsys.readouterr().err


def test_yours_gets_intervals_and_findings_like_any_variant(tmp_path):
    """sklearn's PCA components brought as 'yours' on the default sample: bootstrapped like the
    family's variants, judged next to vanilla — the same gap (it is vanilla PCA) — in the findings,
    the JSON and the HTML report."""
    from fairaudit.findings import findings
    from fairaudit.report import render_html
    from fairaudit.samples import load_sample

    sample = load_sample("two_groups")
    config = AuditConfig(methods=("pca",), ranks=(1, 2, 3, 4), variants=("vanilla", "fair_eig"), bootstrap=10)
    path = tmp_path / "components.npy"
    np.save(path, SklearnPCA(n_components=4).fit(sample.X).components_)
    result = attach(run_audit(sample, config), audit_components(sample, read_components(path, sample), config))
    loss = result.records.query("variant == @YOURS and metric == 'loss'")
    assert loss.ci_low.notna().all() and (loss.ci_low <= loss.value).all() and (loss.value <= loss.ci_high).all()
    assert {"loss_ratio", "error_ratio"} <= set(result.records.query("variant == @YOURS").metric)
    assert result.uncertainty["pca"][YOURS]["replicates"] == 10
    mine = [f for f in findings(result)["pca"] if f.variant == YOURS]
    assert len(mine) == 1 and mine[0].verdict == "gap" and mine[0].text.startswith("Your representation leaves a gap at rank 3")
    assert html.escape(mine[0].text) in render_html(result)
    assert any(f["variant"] == YOURS and f["verdict"] == "gap" for f in json.loads(result_json(result))["findings"])


def test_an_nmf_dictionary_gets_intervals_and_verdicts_like_the_familys_variants(tmp_path):
    """Our own standard NMF's H brought back as 'yours': bootstrapped (E_ℓ and each row's NNLS W
    redone on every resample), its relative losses with intervals, and a finding with a verdict —
    not the 'no verdict' it had when only the point values were measured."""
    from fairaudit.findings import findings
    from fairaudit.samples import load_sample

    sample = load_sample("two_groups")
    positive = AuditData.from_arrays(np.abs(sample.X_raw), sample.sensitive_features, feature_names=sample.feature_names)
    config = AuditConfig(methods=("nmf",), ranks=(3,), variants=("vanilla",), bootstrap=10, keep_models=True,
                         options={"nmf": {"n_estimates": 2}})
    audited = run_audit(positive, config)
    H = audited.models[("nmf", "vanilla", 3)].components_
    yours = audit_components(positive, read_components(_write(tmp_path, H, positive), positive), config)
    assert yours.uncertainty["nmf"]["replicates"] == 10
    losses = yours.records.query("metric == 'rel_loss'")
    assert len(losses) == 2 and losses.ci_low.notna().all() and (losses.ci_low <= losses.ci_high).all()
    assert yours.records.query("metric == 'rel_loss_gap'").ci_low.notna().all()
    both = attach(audited, yours)
    mine = [f for f in findings(both)["nmf"] if f.variant == YOURS]
    assert mine and all(f.verdict in ("gap", "no_evidence", "mitigated", "worse") for f in mine), [(f.verdict, f.text) for f in mine]
    assert both.uncertainty["nmf"][YOURS]["replicates"] == 10


EXTRA_FLAGS = {
    "pca": [], "nmf": ["--nonnegative", "shift", "--nmf-estimates", "1"], "fs": ["--kmeans-runs", "1"],
    "cpd": ["--cpd-no-sweep", "--cpd-epochs", "20"],
}


@pytest.mark.parametrize("method,kind", [("pca", "embedding"), ("nmf", "embedding"), ("fs", "embedding"), ("cpd", "embedding"),
                                         ("pca", "components"), ("nmf", "components")])
def test_the_summary_says_what_your_representation_did_in_every_mode(tmp_path, capsys, method, kind):
    """Issue 27: a valid 600 × 3 embedding audited without --quiet stopped with KeyError 'max_loss'
    (NMF: 'max_rel_loss', feature selection: your embedding taken for a baseline) after writing the
    JSON. Every family, embeddings and components, with the summary printed."""
    rng = np.random.default_rng(3)
    n = 90
    frame = pd.DataFrame(np.abs(rng.normal(size=(n, 4))) + np.repeat([[0], [1]], [60, 30], axis=0), columns=list("abcd"))
    source = tmp_path / "d.csv"
    frame.assign(grp=np.repeat(["x", "y"], [60, 30])).to_csv(source, index=False)
    mine = tmp_path / "mine.npy"
    np.save(mine, rng.normal(size=(n, 3)) if kind == "embedding" else np.abs(rng.normal(size=(2, 4))))
    out = tmp_path / "r.json"
    argv = ["audit", str(source), "--sensitive", "grp", "--methods", method, "--ranks", "2", f"--{kind}", str(mine), "--json", str(out), "-v",
            *EXTRA_FLAGS[method]]
    code = main(argv)
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert f"yours ({method}): " in printed and "n/a" not in printed.split(f"yours ({method}): ", 1)[1]
    rows = [line.split() for line in printed.split(f"[{method}]", 1)[1].splitlines() if re.match(r"\s+yours\s+\d", line)]
    assert [row[1] for row in rows] == [str(3 if kind == "embedding" else 2)]  # the one fit there is: no empty rank rows
    saved = json.loads(out.read_text())
    assert {r["rank"] for r in saved["records"] if r["variant"] == YOURS} == ({3} if kind == "embedding" else {2})
