"""Exported models: .npz + manifest, loaded in a fresh process, refusing data that do not fit."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditConfig, AuditData, load, run_audit
from fairaudit.cli import main
from fairaudit.errors import (
    FeatureMismatchError,
    MissingValueError,
    ModelFileError,
    NegativeValueError,
    ParameterError,
    UnknownColumnError,
)
from fairaudit.fs.audit import minmax
from fairaudit.models import (
    ARRAYS_FILE,
    INDEX_FILE,
    MANIFEST_FILE,
    export_models,
    load_model,
    model_from_result,
    preprocessing_for,
)
from fairaudit.nmf.audit import nmf_input

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "two_groups.csv"


def _data(rng, n=120, d=6, shift=0.0) -> AuditData:
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + shift
    X[: n // 3] *= 2.5
    groups = np.where(np.arange(n) < n // 3, "a", "b")
    return AuditData.from_arrays(X, pd.Series(groups, name="grp"), feature_names=[f"f{j}" for j in range(d)])


def _records(result, method, variant, rank, metric) -> pd.Series:
    r = result.records
    rows = r[(r.method == method) & (r.variant == variant) & (r["rank"] == rank) & (r.metric == metric) & (r.group != "")]
    return rows.set_index("group").value


@pytest.fixture(scope="module")
def pca_export(tmp_path_factory):
    data = load(SAMPLE, sensitive="group")
    variants = ("vanilla", "fair_eig", "fair_sdp", "fair_mw", "jevd", "cov_fair")  # fair_sdp/fair_mw only when named
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=(2, 3), variants=variants, keep_models=True))
    directory = tmp_path_factory.mktemp("models")
    return data, result, export_models(result, data, directory), directory


def test_round_trip_in_a_fresh_process_reproduces_the_audits_group_errors(pca_export):
    data, result, paths, directory = pca_export
    assert len(paths) == 12  # six PCA variants × two ranks, affine (SDP) maps included
    rows = data.X_raw.tolist()
    script = (
        "import json, sys\n"
        "from fairaudit.models import load_model\n"
        "payload = json.load(sys.stdin)\n"
        "out = {}\n"
        "for path in payload['paths']:\n"
        "    model = load_model(path)\n"
        "    errors = model.group_errors(payload['X'], payload['groups'])\n"
        "    out[path] = [model.method, model.variant, model.rank, errors.to_dict()]\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    payload = json.dumps({"paths": [str(p) for p in paths], "X": rows, "groups": list(data.sensitive_features.astype(str))})
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, text=True, env=env, check=True)
    worst = 0.0
    for method, variant, rank, errors in json.loads(done.stdout).values():
        audited = _records(result, method, variant, rank, "error")
        assert set(errors) == set(audited.index)
        worst = max(worst, max(abs(errors[g] - audited[g]) for g in errors))
    assert worst < 1e-10


def test_manifest_says_what_the_model_is_and_how_to_feed_it(pca_export):
    data, result, paths, directory = pca_export
    index = json.loads((directory / INDEX_FILE).read_text())
    assert {entry["path"] for entry in index["models"]} == {p.name for p in paths}
    manifest = json.loads((paths[0] / MANIFEST_FILE).read_text())
    assert manifest["method"] == "pca" and manifest["rank"] in (2, 3) and manifest["kind"] == "linear_map"
    assert manifest["features"] == list(data.feature_names)
    assert manifest["sensitive"] == ["group"] and manifest["groups"] == data.group_sizes()
    assert manifest["data"]["sha256"] == data.fingerprint()["sha256"]
    assert manifest["fairaudit_version"]
    center, scale = np.array(manifest["preprocessing"]["center"]), np.array(manifest["preprocessing"]["scale"])
    np.testing.assert_array_equal((data.X_raw - center) / scale, data.X)  # the audit's standardisation, bit for bit
    assert {row["metric"] for row in manifest["audit"]} >= {"error", "loss", "max_loss", "unfairness_balanced"}
    with np.load(paths[0] / ARRAYS_FILE, allow_pickle=False) as arrays:  # no object arrays: nothing to unpickle
        assert all(arrays[name].dtype.kind in "fiu" for name in arrays.files)


def test_loaded_model_refuses_columns_that_do_not_match_its_manifest(pca_export):
    data, _, paths, _ = pca_export
    model = load_model(paths[0])
    frame = pd.DataFrame(data.X_raw, columns=data.feature_names)
    reordered = frame[list(reversed(data.feature_names))]
    np.testing.assert_array_equal(model.transform(reordered), model.transform(data.X_raw))
    with pytest.raises(FeatureMismatchError, match=r"missing 1 of the model's features \('x3'\)"):
        model.transform(frame.drop(columns="x3"))
    with pytest.raises(FeatureMismatchError, match=r"1 column\(s\) the model was not fitted on \('age'\)"):
        model.transform(frame.assign(age=1.0))
    with pytest.raises(FeatureMismatchError, match="shape 600 × 10, but the model was fitted on 11 features"):
        model.transform(data.X_raw[:, :10])
    with pytest.raises(MissingValueError, match="feature 'x2'"):
        model.transform(np.where(np.arange(11) == 1, np.nan, data.X_raw))


def test_inverse_transform_returns_original_units(pca_export):
    data, result, _, directory = pca_export
    model = load_model(directory / "pca-vanilla-rank3")
    Z = model.transform(data.X_raw)
    fitted = result.models[("pca", "vanilla", 3)]
    np.testing.assert_allclose(Z, fitted.transform(data.X), atol=1e-12)
    reconstruction = model.inverse_transform(Z)
    scaled = fitted.inverse_transform(fitted.transform(data.X))
    np.testing.assert_allclose((reconstruction - model.preprocessing.center) / model.preprocessing.scale, scaled, atol=1e-12)
    assert model.get_feature_names_out().tolist() == ["pc1", "pc2", "pc3"]
    model.set_output(transform="pandas")
    assert list(model.transform(pd.DataFrame(data.X_raw, columns=data.feature_names)).columns) == ["pc1", "pc2", "pc3"]


def test_damaged_or_foreign_files_are_refused(pca_export, tmp_path):
    _, _, paths, directory = pca_export
    with pytest.raises(ModelFileError, match="holds 12 models; name one of them"):
        load_model(directory)
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / MANIFEST_FILE).write_bytes((paths[0] / MANIFEST_FILE).read_bytes())
    (copy / ARRAYS_FILE).write_bytes((paths[1] / ARRAYS_FILE).read_bytes())
    with pytest.raises(ModelFileError, match="does not match its manifest"):
        load_model(copy)
    manifest = json.loads((paths[0] / MANIFEST_FILE).read_text())
    (copy / ARRAYS_FILE).write_bytes((paths[0] / ARRAYS_FILE).read_bytes())
    (copy / MANIFEST_FILE).write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ModelFileError, match="format version 99"):
        load_model(copy)
    (copy / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load_model(copy)
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    pickled = io.BytesIO()
    with zipfile.ZipFile(pickled, "w") as archive:
        archive.writestr("components.npy", buffer.getvalue())
    blob = pickled.getvalue()
    (copy / ARRAYS_FILE).write_bytes(blob)
    (copy / MANIFEST_FILE).write_text(json.dumps({**manifest, "arrays_sha256": hashlib.sha256(blob).hexdigest()}))
    with pytest.raises(ModelFileError, match="could only be read with pickle"):
        load_model(copy)


def test_zip_round_trip(pca_export):
    data, _, paths, _ = pca_export
    model = load_model(paths[3])
    again = load_model(model.to_zip())
    np.testing.assert_array_equal(again.transform(data.X_raw), model.transform(data.X_raw))


def test_export_needs_kept_models_and_the_audits_data(rng, tmp_path):
    data = _data(rng)
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2), variants=("vanilla",)))
    with pytest.raises(ParameterError, match="keep_models=True"):
        export_models(result, data, tmp_path)
    kept = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2), variants=("vanilla",), keep_models=True))
    with pytest.raises(ParameterError, match="not the data the audit ran on"):
        export_models(kept, _data(np.random.default_rng(1)), tmp_path)
    with pytest.raises(ParameterError, match="the audit fitted ranks 1, 2"):
        export_models(kept, data, tmp_path, ranks=[5])
    assert [p.name for p in export_models(kept, data, tmp_path, ranks=[2])] == ["pca-vanilla-rank2"]


# ---------------------------------------------------------------------------- other families
def test_nmf_export_applies_the_papers_preprocessing_and_nnls(rng, tmp_path):
    data = _data(rng, shift=-1.0)  # negative values: shifted as the audit was told
    options = {"nmf": {"nonnegative": "shift", "n_estimates": 2}}
    result = run_audit(data, AuditConfig(methods=("nmf",), ranks=(2,), variants=("vanilla", "fair_am"), options=options, keep_models=True))
    pre = preprocessing_for("nmf", data, options["nmf"])
    np.testing.assert_array_equal(pre.apply(data.X_raw), nmf_input(data, "shift").X)
    for variant in ("vanilla", "fair_am"):
        model = load_model(model_from_result(result, data, "nmf", variant, 2).save(tmp_path / variant))
        errors = model.group_errors(data.X_raw, data.sensitive_features)
        audited = _records(result, "nmf", variant, 2, "rel_error")
        # NNLS's W is optimal for H: never worse than where the fit stopped; AM's W step is that NNLS
        assert (errors <= audited.reindex(errors.index) + 1e-9).all()
        if variant == "fair_am":
            np.testing.assert_allclose(errors, audited.reindex(errors.index), atol=1e-9)
    below = data.X_raw.copy()
    below[0, 0] = data.X_raw[:, 0].min() - 1.0
    with pytest.raises(NegativeValueError, match="row 0, feature 'f0'"):
        model.transform(below)


def test_selection_export_keeps_the_audits_columns(rng, tmp_path):
    """At every size of the sweep — where one fit serves every size (the baselines, MCFS's LARS
    paths), the model is that size's selection, not the fit's largest."""
    data = _data(rng)
    variants = ("variance", "mcfs", "fufs")
    result = run_audit(data, AuditConfig(methods=("fs",), ranks=(2, 4), variants=variants, keep_models=True,
                                         options={"fs": {"kmeans_runs": 2}}))
    for variant in variants:
        for rank in (2, 4):
            model = load_model(model_from_result(result, data, "fs", variant, rank).save(tmp_path / f"{variant}{rank}"))
            selected = result.details["fs"][variant][str(rank)]["selected"]
            assert model.get_feature_names_out().tolist() == selected and len(selected) == rank, (variant, rank)
            index = [data.feature_names.index(name) for name in selected]
            np.testing.assert_array_equal(model.transform(data.X_raw), minmax(data.X_raw)[:, index])
            assert not hasattr(model, "inverse_transform")


def test_cp_export_embeds_entities_like_the_fit(rng, tmp_path):
    data = _data(rng)
    result = run_audit(data, AuditConfig(methods=("cpd",), ranks=(3,), variants=("vanilla",), keep_models=True,
                                         options={"cpd": {"sweep": False, "tol": 1e-10, "n_epochs": 2000}}))
    model = load_model(model_from_result(result, data, "cpd", "vanilla", 3).save(tmp_path / "cp"))
    fitted = result.models[("cpd", "vanilla", 3)]
    np.testing.assert_allclose(model.transform(data.X_raw), fitted.embedding_, atol=1e-6)
    errors = model.group_errors(data.X_raw, data.sensitive_features)
    np.testing.assert_allclose(errors, _records(result, "cpd", "vanilla", 3, "residual_fit").reindex(errors.index), atol=1e-6)
    assert "not made fair" in " ".join(model.manifest["notes"])


# ---------------------------------------------------------------------------- the transform command
def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_transform_command_reads_only_and_never_overwrites_its_input(pca_export, tmp_path, capsys):
    _, _, _, directory = pca_export
    source = tmp_path / "new.csv"
    source.write_bytes(SAMPLE.read_bytes())
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    out = tmp_path / "scores.csv"
    code, printed, _ = _run(["transform", directory / "pca-fair_eig-rank3", source, "--out", out, "--with-error"], capsys)
    assert code == 0 and "600 transformed; ignored columns: group" in printed
    scores = pd.read_csv(out)
    assert list(scores.columns) == ["line", "pc1", "pc2", "pc3", "reconstruction_error"] and len(scores) == 600
    assert scores.line.iloc[0] == 2
    code, _, err = _run(["transform", directory / "pca-fair_eig-rank3", source, "--out", source], capsys)
    assert code == 2 and "--out" in err and "which is never overwritten" in err
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before
    code, _, err = _run(["transform", directory / "pca-fair_eig-rank3", source, "--out", out, "--id", "nope"], capsys)
    assert code == 2 and "--id" in err


def test_transform_command_rebuilds_one_hot_columns_and_names_missing_rows(tmp_path, capsys):
    rng = np.random.default_rng(3)
    n = 80
    frame = pd.DataFrame({"person": [f"p{i}" for i in range(n)], "sex": np.repeat(["F", "M"], n // 2),
                          "city": rng.choice(["north", "south", "east"], n), "x": rng.normal(size=n), "y": rng.normal(size=n)})
    train = tmp_path / "train.csv"
    frame.to_csv(train, index=False)
    assert main([
        "audit", str(train), "--sensitive", "sex", "--ignore", "person", "--one-hot", "--ranks", "2",
        "--variants", "vanilla", "--export-model", str(tmp_path / "m"), "--quiet",
    ]) == 0
    fresh = frame.iloc[:5].drop(columns="sex").copy()
    fresh.loc[1, "x"] = np.nan
    fresh.loc[2, "city"] = "west"  # a level the model has no indicator for
    new = tmp_path / "new.csv"
    fresh.to_csv(new, index=False)
    code, _, err = _run(["transform", tmp_path / "m" / "pca-vanilla-rank2", new, "--out", tmp_path / "o.csv"], capsys)
    assert code == 2 and "1 row(s) have missing cells" in err and "line 3" in err and "--missing drop" in err
    code, printed, _ = _run(["transform", tmp_path / "m" / "pca-vanilla-rank2", new, "--out", tmp_path / "o.csv",
                             "--missing", "drop", "--id", "person"], capsys)
    assert code == 0
    assert "one-hot indicators rebuilt: city=east, city=north, city=south" in printed
    assert "'west'" in printed and "left out 1 row(s)" in printed
    scores = pd.read_csv(tmp_path / "o.csv")
    assert scores.person.tolist() == ["p0", "p2", "p3", "p4"]
    model = load_model(tmp_path / "m" / "pca-vanilla-rank2")
    expected = pd.DataFrame({"city=east": 0.0, "city=north": 0.0, "city=south": 0.0, "x": fresh.x, "y": fresh.y}, index=fresh.index)
    for level in ("east", "north", "south"):
        expected[f"city={level}"] = (fresh.city == level).astype(float)
    expected = expected.drop(index=1)
    np.testing.assert_allclose(scores[["pc1", "pc2"]].to_numpy(), model.transform(expected), atol=1e-12)


def test_transform_command_names_what_the_file_lacks(pca_export, tmp_path, capsys):
    _, _, _, directory = pca_export
    partial = tmp_path / "partial.csv"
    pd.read_csv(SAMPLE).drop(columns=["x4"]).rename(columns={"x5": "X5"}).to_csv(partial, index=False)
    code, _, err = _run(["transform", directory / "pca-vanilla-rank2", partial, "--out", tmp_path / "o.csv"], capsys)
    assert code == 2 and "lacks 2 of the 11 feature column(s)" in err and "Did you mean 'X5'" in err


def test_feature_rows_refuses_text_in_a_numeric_feature(tmp_path):
    from fairaudit.data import feature_rows, read_table

    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3,x\n")
    with pytest.raises(Exception, match="'b' has text 'x' at line 3"):
        feature_rows(read_table(path), ["a", "b"])
    with pytest.raises(UnknownColumnError):
        feature_rows(read_table(path), ["c"])


def test_the_suggested_export_is_the_fair_fit_where_vanillas_gap_is_largest(pca_export):
    from fairaudit.audit import whole_metrics
    from fairaudit.models import exportable, suggested_export

    _, result, _, _ = pca_export
    assert set(exportable(result, "pca")) == {"vanilla", "fair_eig", "fair_sdp", "fair_mw", "jevd", "cov_fair"}
    variant, rank = suggested_export(result, "pca")
    gaps = whole_metrics(result.records, "pca").loc["vanilla", "loss_gap"]
    assert variant == "fair_eig" and rank == int(gaps.idxmax())


def test_a_refit_is_the_audited_fit_at_every_rank():
    """Fair PCA's sweep warm-starts each rank from the previous one and its optimum is not unique
    (equal losses leave directions free): a refit replays the audited ranks up to the one asked
    for, so its records are the audit's (rank 4 alone was 6.8e-6 off in variance explained)."""
    from fairaudit.models import refit_model

    data = load(SAMPLE, sensitive="group", label="outcome")
    result = run_audit(data, AuditConfig(methods=("pca",), ranks=range(1, 7), variants=("vanilla", "fair_eig")))
    for rank in range(1, 7):
        model = refit_model(result, data, "pca", "fair_eig", rank)
        assert model.manifest["refit"]["max_abs_difference"] <= 1e-12, (rank, model.manifest["refit"])
