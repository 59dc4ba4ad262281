"""The dask engine (fairaudit.engine.dask_engine): partitions read with the data boundary's rules,
group moments merged exactly, the same records and accounting as the in-process engine, and clear
errors. Small data, several partitions each; skipped with the reason when dask is not installed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask", reason="the dask engine is an optional extra: pip install 'fairaudit[dask]'")
distributed = pytest.importorskip("distributed", reason="the dask engine is an optional extra: pip install 'fairaudit[dask]'")

from fairaudit import AuditConfig, load, prepare, read_table, run_audit  # noqa: E402
from fairaudit.cli import main  # noqa: E402
from fairaudit.engine import DaskEngine, LocalEngine, PartitionedData, read_partitioned  # noqa: E402
from fairaudit.errors import (  # noqa: E402
    FairAuditError,
    InputFileNotFound,
    MalformedCSVError,
    MissingValueError,
    NonNumericColumnError,
    ParameterError,
)
from fairaudit.metrics import stratified_quotas  # noqa: E402

KEY = ["method", "variant", "rank", "group", "metric"]
PCA_VARIANTS = ("vanilla", "fair_eig", "jevd", "cov_fair", "equal_means", "equal_means_cov")  # the default set


def table_frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Three groups of different shapes, a label, an identifier, a constant column, a text column,
    and a few missing cells (feature, group and label) spread over the file."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b", "c"], size=n, p=[0.55, 0.3, 0.15])
    X = rng.normal(size=(n, 5)) @ rng.normal(size=(5, 5)) + 3
    X[group == "b"] = X[group == "b"] * [1.5, 1, 0.5, 2, 1] + 1
    X[group == "c", 2] += 4
    frame = pd.DataFrame(X.round(6), columns=[f"x{j}" for j in range(5)])
    frame.insert(0, "id", np.arange(1, n + 1))
    frame.insert(3, "group", group)
    frame["outcome"] = rng.choice(["yes", "no"], size=n)
    frame["constant"] = 7.0
    frame["city"] = rng.choice(["Oslo", "Lima", "Pune"], size=n)
    for column, rows in (("x1", [40, 1700, 2950]), ("group", [900]), ("outcome", [2200])):
        frame[column] = frame[column].astype(object)
        frame.loc[rows, column] = None
    return frame


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask")
    frame = table_frame()
    csv = folder / "table.csv"
    frame.to_csv(csv, index=False)
    parquet = folder / "table.parquet"
    frame.astype({"x1": float}).to_parquet(parquet, row_group_size=400)
    return {"csv": csv, "parquet": parquet, "frame": frame}


OPTIONS = {"sensitive": "group", "label": "outcome", "missing": "drop"}


def local_data(path):
    return prepare(read_table(path), **OPTIONS)


def partitioned(path, **extra):
    return read_partitioned(str(path), **{"blocksize": 16_000, "partition_rows": 300, **OPTIONS, **extra})


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_moments_equal_the_in_process_engines(files, kind):
    data = partitioned(files[kind])
    assert data.engine["partitions"] > 4
    local = LocalEngine().summarise(local_data(files[kind]), sample_rows=10_000)
    mine = data.summary(10_000)
    assert mine.moments.labels == local.moments.labels
    np.testing.assert_array_equal(mine.moments.counts, local.moments.counts)
    np.testing.assert_allclose(mine.moments.means, local.moments.means, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mine.moments.scatter, local.moments.scatter, rtol=0, atol=1e-10 * np.abs(local.moments.scatter).max())
    np.testing.assert_allclose(mine.shift, local.shift, rtol=1e-12)
    np.testing.assert_allclose(mine.scale, local.scale, rtol=1e-12)
    # fewer rows than the sample: every row, in the file's order — the rows the local engine uses
    np.testing.assert_allclose(mine.sample.X, local.sample.X, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(mine.sample.codes, local.sample.codes)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_accounting_equals_the_in_process_engines(files, kind):
    local = local_data(files[kind])
    data = partitioned(files[kind])
    mine, theirs = data.accounting, local.accounting
    for key in ("unit", "rows_read", "rows_used", "groups", "features", "warnings"):
        assert mine[key] == theirs[key], key
    assert [(e["column"], e["reason"]) for e in mine["excluded"]] == [(e["column"], e["reason"]) for e in theirs["excluded"]]
    assert {e["reason"] for e in mine["excluded"]} >= {"id_like", "text", "constant", "sensitive", "label"}
    assert mine["groups"][-1]["group"] == "(no group value)"  # the row without a group, counted
    assert sum(sum(e["dropped"].values()) for e in mine["groups"]) == 5  # three missing cells, no group, no label
    assert data.group_sizes() == local.group_sizes()
    mine, theirs = data.fingerprint(), local.fingerprint()
    assert mine["engine"]["name"] == "dask" and "SHA-256s" in mine["engine"]["sha256_of"]
    differ = {key for key in theirs if mine[key] != theirs[key]}
    assert differ <= {"sha256", "preprocessing", "excluded"}, differ  # the partitions' hash; the engine's log; details judged on the head


def test_pca_family_records_equal_the_in_process_engines(files):
    local = run_audit(local_data(files["csv"]), AuditConfig(ranks=(1, 2, 3)))
    data = partitioned(files["csv"])
    mine = run_audit(data, AuditConfig(ranks=(1, 2, 3), engine="dask"))
    assert set(mine.records.variant) == set(PCA_VARIANTS)
    merged = local.records.merge(mine.records, on=KEY, suffixes=("_local", "_dask"), validate="one_to_one")
    assert len(merged) == len(local.records) == len(mine.records)
    merged = merged[merged.metric != "seconds"]
    close = np.isclose(merged.value_local, merged.value_dask, rtol=1e-8, atol=1e-8) | (merged.value_local.isna() & merged.value_dask.isna())
    assert close.all(), merged[~close]
    assert mine.data["groups"] == local.data["groups"]
    assert not any("Poisson bootstrap" in w for w in mine.warnings)  # no replicates ran: no note about them
    with pytest.raises(ParameterError, match="holdout"):
        run_audit(data, AuditConfig(ranks=(1,), engine="dask", holdout=0.2))


INTERVAL_METRICS = ("error", "loss", "max_loss", "loss_gap", "variance_explained", "mmd2")


def test_pca_intervals_from_the_poisson_bootstrap_agree_with_the_in_process_engines(files):
    """The dask engine bootstraps the PCA family by Poisson row weights drawn partition by partition
    (one more pass over the data); its percentile intervals agree with the in-process engine's
    stratified resample up to the Monte Carlo noise of 60 replicates (widths within a third,
    median), contain the point estimates, and are the same on a second run with the same seed."""
    config = AuditConfig(ranks=(1, 2, 3), bootstrap=60, variants=("vanilla", "cov_fair"))
    local = run_audit(local_data(files["csv"]), config)
    data = partitioned(files["csv"])
    mine = run_audit(data, dataclasses.replace(config, engine="dask"))
    assert mine.uncertainty["pca"]["replicates"] == 60 and "chosen" in mine.uncertainty["pca"]["why"]
    assert any(w.startswith("pca: intervals from a Poisson bootstrap over the partitions") for w in mine.warnings)
    merged = local.records.merge(mine.records, on=KEY, suffixes=("_local", "_dask"), validate="one_to_one")
    merged = merged[merged.metric.isin(INTERVAL_METRICS)]
    assert len(merged) >= 40 and merged.ci_low_dask.notna().all() and merged.ci_low_local.notna().all()
    inside = (merged.ci_low_dask <= merged.value_dask) & (merged.value_dask <= merged.ci_high_dask)
    assert inside.mean() >= 0.95
    ratio = (merged.ci_high_dask - merged.ci_low_dask) / (merged.ci_high_local - merged.ci_low_local)
    assert 0.75 <= ratio.median() <= 1.33, ratio.describe()
    again = run_audit(data, dataclasses.replace(config, engine="dask"))
    pd.testing.assert_frame_equal(again.records.drop(columns="value")[again.records.metric.isin(INTERVAL_METRICS)].reset_index(drop=True),
                                  mine.records.drop(columns="value")[mine.records.metric.isin(INTERVAL_METRICS)].reset_index(drop=True))
    other = run_audit(data, dataclasses.replace(config, engine="dask", random_state=1))
    assert not np.allclose(other.records.ci_low.fillna(0), mine.records.ci_low.fillna(0))


def test_no_poisson_bootstrap_for_small_groups_and_the_result_says_why(tmp_path):
    """Below 50 rows in a group the Poisson bootstrap is no stand-in for a resample: point
    estimates only, the reason in the result and its notes (with the option that gives intervals)."""
    path = tmp_path / "small.csv"
    frame = table_frame()
    rare = frame.index[frame.group == "c"][:30]
    frame[(frame.group != "c") | frame.index.isin(rare)].to_csv(path, index=False)
    data = partitioned(path)
    assert min(data.group_sizes().values()) < 50
    mine = run_audit(data, AuditConfig(ranks=(1,), bootstrap=20, engine="dask", variants=("vanilla",)))
    why = mine.uncertainty["pca"]["why"]
    assert "Poisson bootstrap needs at least 50 rows in every group" in why and "engine" in why
    assert mine.records[mine.records.metric.isin(INTERVAL_METRICS)].ci_low.isna().all()  # (the leakage test keeps its own)
    assert any("Poisson bootstrap needs at least 50 rows" in w for w in mine.warnings)


def test_a_dask_dataframe_and_a_distributed_cluster_give_the_same_data(files, monkeypatch):
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from fairaudit.engine import dask_engine

    monkeypatch.setattr(dask_engine, "PROGRESS_SECONDS", 0.0)
    reference = partitioned(files["csv"])
    frame = dd.from_pandas(files["frame"], npartitions=5)
    said: list[str] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
        from_frame = read_partitioned(frame, scheduler=client, **OPTIONS)
        from_cluster = partitioned(files["csv"], scheduler=client, say=said.append)
    assert any("partitions read" in line for line in said) and said[-1].startswith("read 3,000 rows in")
    for data in (from_frame, from_cluster):
        assert data.accounting["groups"] == reference.accounting["groups"]
        np.testing.assert_allclose(data.summary(10_000).moments.scatter, reference.summary(10_000).moments.scatter, atol=1e-9)
    assert from_frame.engine["partitions"] == 5 and "local dask cluster" in from_cluster.engine["scheduler"]


def test_the_sample_is_stratified_and_stated(files):
    data = partitioned(files["csv"], sample_rows=600)
    sample = data.summary(600).sample
    sizes = np.array(list(data.group_sizes().values()))
    takes, _ = stratified_quotas(sizes, 600)
    np.testing.assert_array_equal(np.bincount(sample.codes), takes)
    assert sample.total_rows == data.n_rows and not sample.is_complete
    result = run_audit(data, AuditConfig(ranks=(1,), variants=("vanilla",), engine="dask", leakage_max_rows=600))
    assert any(f"a stratified sample of {sample.size:,} of {data.n_rows:,} rows" in w for w in result.warnings)
    again = partitioned(files["csv"], sample_rows=600, blocksize=9_000)  # another partitioning: other rows, same quotas
    np.testing.assert_array_equal(np.bincount(again.summary(600).sample.codes), takes)


def test_a_larger_sample_than_drawn_reads_the_data_again(files):
    data = partitioned(files["csv"], sample_rows=600)
    assert data.summary(1200).sample.size > data.summary(600).sample.size


def test_other_families_run_on_the_sample_and_say_so(files):
    data = partitioned(files["csv"], sample_rows=500)
    result = run_audit(data, AuditConfig(methods=("pca", "fs"), ranks=(1,), variants=("vanilla", "variance"), engine="dask",
                                         options={"fs": {"kmeans_runs": 2}}))
    assert "fs" in set(result.records.method)
    assert any(w.startswith("fs: audited on a stratified sample of") for w in result.warnings)
    assert result.data["rows"] == data.n_rows  # the report describes the whole data set


def test_missing_cells_stop_with_the_lines_of_the_file(files):
    with pytest.raises(MissingValueError) as local:
        prepare(read_table(files["csv"]), sensitive="group", label="outcome")
    with pytest.raises(MissingValueError) as mine:
        partitioned(files["csv"], missing="error")
    assert str(mine.value).split(". Choose")[0] == str(local.value).split(". Choose")[0]
    assert "first at line 2202" in str(mine.value)  # in a later block, counted from the start of the file


def test_a_ragged_row_in_a_later_block_names_its_line(tmp_path, files):
    text = files["csv"].read_text().splitlines(keepends=True)
    text[2500] = text[2500].rstrip("\n") + ",extra\n"
    path = tmp_path / "ragged.csv"
    path.write_text("".join(text))
    with pytest.raises(MalformedCSVError) as local:
        read_table(path)
    with pytest.raises(MalformedCSVError) as mine:
        partitioned(path)
    assert "line 2501" in str(local.value)
    assert str(mine.value) == str(local.value)


def test_text_in_a_later_partition_of_a_numeric_column(tmp_path, files):
    frame = files["frame"].copy()
    frame["x3"] = frame["x3"].astype(object)
    frame.loc[2600, "x3"] = "n.a."  # one typo beyond the first partition: the data boundary's error, line named
    path = tmp_path / "typo.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(NonNumericColumnError, match="'x3' has text 'n.a.' at line 2602"):
        partitioned(path)
    frame.loc[1500:, "x3"] = "text"  # mostly text: left out as text after a second pass, as the local reader does
    frame.to_csv(path, index=False)
    data = partitioned(path)
    assert "x3" not in data.feature_names
    assert ("x3", "text") in [(e["column"], e["reason"]) for e in data.accounting["excluded"]]
    assert data.accounting["groups"] == local_data(path).accounting["groups"]


def test_a_column_empty_only_in_the_first_partition_is_a_feature(tmp_path, files):
    frame = files["frame"].copy()
    frame["late"] = np.where(np.arange(len(frame)) < 1500, np.nan, np.arange(len(frame)) % 7 + 0.5)
    path = tmp_path / "late.csv"
    frame.to_csv(path, index=False)
    data = partitioned(path)
    local = local_data(path)
    assert "late" in data.feature_names and data.feature_names == local.feature_names
    assert data.accounting["groups"] == local.accounting["groups"]


@pytest.mark.parametrize("scaling", ["standardize", "unit_norm"])
def test_values_near_overflow_are_prescaled_exactly(tmp_path, files, scaling):
    frame = files["frame"].copy()
    frame["x0"] = frame["x0"] * 1e300
    path = tmp_path / "huge.csv"
    frame.to_csv(path, index=False)
    local = LocalEngine().summarise(prepare(read_table(path), scaling=scaling, **OPTIONS), sample_rows=10_000)
    mine = partitioned(path, scaling=scaling).summary(10_000)
    assert np.isfinite(mine.moments.scatter).all()
    np.testing.assert_allclose(mine.moments.scatter, local.moments.scatter, atol=1e-10 * np.abs(local.moments.scatter).max())


@pytest.fixture
def quick_connect(monkeypatch):
    from fairaudit.engine import dask_engine

    monkeypatch.setattr(dask_engine, "CONNECT_SECONDS", 1.0)


def test_clear_errors(tmp_path, files, quick_connect):
    with pytest.raises(InputFileNotFound, match="no such file"):
        read_partitioned(str(tmp_path / "absent.parquet"), sensitive="group")
    with pytest.raises(ParameterError, match="s3fs"):
        read_partitioned("s3://bucket/data.parquet", sensitive="group")
    with pytest.raises(ParameterError, match="Protocol not known"):
        read_partitioned("nosuch://bucket/data.csv", sensitive="group")
    with pytest.raises(ParameterError, match="cannot reach the dask scheduler at tcp://127.0.0.1:9"):
        partitioned(files["csv"], scheduler="tcp://127.0.0.1:9")
    with pytest.raises(ParameterError, match="not available with engine='dask'"):
        partitioned(files["csv"], missing="median")
    with pytest.raises(ParameterError, match="bins"):
        partitioned(files["csv"], bins={"x0": 4})
    wide = tmp_path / "wide.parquet"
    pd.DataFrame(np.ones((20, 300)) * np.arange(20)[:, None], columns=[f"c{j}" for j in range(300)]).assign(g=list("ab") * 10).to_parquet(wide)
    with pytest.raises(ParameterError, match="300 features are more than the dask engine handles"):
        read_partitioned(str(wide), sensitive="g")
    with pytest.raises(ParameterError, match="engine='dask'"):
        run_audit(partitioned(files["csv"]), AuditConfig())  # the default engine cannot read these data
    with pytest.raises(FairAuditError, match="rows are not in memory"):
        partitioned(files["csv"]).X_raw  # noqa: B018
    fifo = tmp_path / "pipe.csv"
    import os

    os.mkfifo(fifo)
    with pytest.raises(FairAuditError, match="FIFO|pipe"):
        read_partitioned(str(fifo), sensitive="group")


def test_in_memory_data_on_the_dask_engine():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(70_000, 4))
    from fairaudit import AuditData

    data = AuditData.from_arrays(X, rng.choice(["p", "q"], size=70_000))
    local = LocalEngine().summarise(data, sample_rows=1000)
    mine = DaskEngine().summarise(data, sample_rows=1000)  # two chunks of CHUNK_ROWS, merged on dask's threads
    np.testing.assert_allclose(mine.moments.scatter, local.moments.scatter, atol=1e-9)
    np.testing.assert_array_equal(mine.sample.X, local.sample.X)


def test_the_command_line_on_a_local_cluster(files, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["audit", str(files["parquet"]), "--sensitive", "group", "--label", "outcome", "--missing", "drop", "--engine", "dask",
                 "--workers", "1", "--ranks", "1:2", "--bootstrap", "10", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "a local cluster of 1 worker process" in captured.err
    assert "pca: reading the data again for the bootstrap replicates, 0/1 partitions (intervals)" in captured.err  # one of 500,000 rows
    assert "pca: reading the data again for the bootstrap replicates, 1/1 partitions (intervals)" in captured.err
    assert captured.err.index("bootstrap replicates for the intervals follow") < captured.err.index("reading the data again")
    assert "engine: dask" in captured.out
    import json

    report = json.loads(out.read_text())
    assert report["config"]["engine"] == "dask" and report["data"]["engine"]["partitions"] >= 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"], "cannot reach the dask scheduler"),
        (["--engine", "dask", "--one-hot"], "--one-hot is not available with --engine dask"),
        (["--engine", "dask", "--missing", "mean"], "--missing mean is not available with --engine dask"),
        (["--scheduler", "tcp://127.0.0.1:9"], "--scheduler applies to the dask engine; add --engine dask"),
        (["--engine", "dask", "--workers", "0"], "--workers must be at least 1"),
        (["--engine", "dask", "--worker-memory", "lots"], "--worker-memory lots is not a size"),
    ],
)
def test_command_line_refusals_are_one_line(files, capsys, quick_connect, argv, message):
    code = main(["audit", str(files["csv"]), "--sensitive", "group", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_command_line_source_errors(capsys):
    assert main(["audit", "s3://bucket/x.parquet", "--sensitive", "g", "--engine", "dask"]) == 2
    assert "pip install s3fs" in capsys.readouterr().err
    assert main(["audit", "/nonexistent/x.parquet", "--sensitive", "g", "--engine", "dask"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_importing_fairaudit_does_not_import_dask():
    code = "import sys, fairaudit, fairaudit.cli, fairaudit.engine; print('dask' in sys.modules or 'distributed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_partitioned_data_is_not_audit_data(files):
    data = partitioned(files["csv"])
    assert isinstance(data, PartitionedData)
    sample = data.sample_data()
    assert sample.n_rows == data.n_rows == load(files["csv"], **OPTIONS).n_rows  # every row fits in the default sample


def test_poisson_bootstrap_guards(files, tmp_path, monkeypatch):
    """The replicate pass refuses what would be wrong or too large, with a reason: intervals turned
    off say so even where a group is small; a summary that would outgrow its budget gives no
    intervals and the largest count that fits; data changed since they were read stop the run."""
    path = tmp_path / "small.csv"
    frame = table_frame()
    rare = frame.index[frame.group == "c"][:30]
    frame[(frame.group != "c") | frame.index.isin(rare)].to_csv(path, index=False)
    off = run_audit(partitioned(path), AuditConfig(ranks=(1,), bootstrap=0, engine="dask", variants=("vanilla",)))
    assert "turned off" in off.uncertainty["pca"]["why"] and not any("Poisson" in w for w in off.warnings)

    from fairaudit.engine import dask_engine

    data = partitioned(files["csv"])
    monkeypatch.setattr(dask_engine, "REPLICATE_SUMMARY_BYTES", data._layout.replicate_bytes(12))
    capped = run_audit(data, AuditConfig(ranks=(1,), bootstrap=40, engine="dask", variants=("vanilla",)))
    why = capped.uncertainty["pca"]["why"]
    assert "40 replicates of the moments" in why and "bootstrap" in why and "12" in why, why
    monkeypatch.undo()

    copy = tmp_path / "copy.csv"
    copy.write_bytes(files["csv"].read_bytes())
    data = partitioned(copy)
    changed = files["frame"].copy()
    changed.loc[5, "x0"] = 123.0
    changed.to_csv(copy, index=False)
    with pytest.raises(FairAuditError, match="changed since it was read"):
        run_audit(data, AuditConfig(ranks=(1,), bootstrap=10, engine="dask", variants=("vanilla",)))


# ---------------------------------------------------------------------------- the replicate pass: progress, cancel, client
@pytest.fixture
def slow_partitions(monkeypatch):
    """Every partition's summary takes 0.1 s longer (the workers are threads of this process), and
    the partitions summarised are counted: a pass stopped early leaves some unread."""
    import time

    from fairaudit.engine import _sources

    calls = []
    summarise = _sources.summarise_table

    def slow(*args, **kwargs):
        calls.append(1)
        time.sleep(0.1)
        return summarise(*args, **kwargs)

    monkeypatch.setattr(_sources, "summarise_table", slow)
    return calls


@pytest.fixture
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as running:
        yield running


REPLICATED = AuditConfig(ranks=(1,), bootstrap=10, engine="dask", variants=("vanilla",))


def _pass_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["stage"] == "bootstrap_pass"]


@pytest.mark.parametrize("where", ["threads", "cluster"])
def test_the_replicate_pass_reports_each_partition_and_a_cancel_stops_it(files, cluster, slow_partitions, where):
    """The pass over the data that computes every replicate's moments is reported per partition
    (contract 4: ``stage="bootstrap_pass"``, ``done`` rising from 0 to ``total`` partitions, between the
    point estimates and the first replicate); a callback raising AuditCancelled during it stops
    the run there, and the partitions still queued are not read."""
    import time

    from distributed import Client

    from fairaudit.audit import AuditCancelled

    with Client(cluster, set_as_default=False) as client:
        data = partitioned(files["parquet"], scheduler=client if where == "cluster" else None)
        total = data.engine["partitions"]
        assert total >= 6
        events: list[dict] = []
        run_audit(data, REPLICATED, progress=events.append)
        passing = _pass_events(events)
        assert [e["done"] for e in passing] == list(range(total + 1))  # the pass begins, then each partition
        assert {(e["method"], e["total"], e["unit"]) for e in passing} == {("pca", total, "partitions")}
        assert all(a["seconds"] <= b["seconds"] for a, b in zip(passing, passing[1:], strict=False))
        stages = [e["stage"] for e in events]
        assert stages.index("estimates") < stages.index("bootstrap_pass") and events.index(passing[-1]) < stages.index("bootstrap")

        seen: list[dict] = []

        def cancel(event: dict) -> None:
            seen.append(event)
            if event["stage"] == "bootstrap_pass" and event["done"] == 2:
                raise AuditCancelled("cancelled by the user")

        slow_partitions.clear()
        with pytest.raises(AuditCancelled):
            run_audit(data, dataclasses.replace(REPLICATED, bootstrap=11), progress=cancel)  # another count: a new pass
        time.sleep(1.0)  # long enough for every queued partition to be read, had the pass gone on
        assert seen[-1]["stage"] == "bootstrap_pass" and "bootstrap" not in {e["stage"] for e in seen}
        assert len(slow_partitions) < total, (len(slow_partitions), total)
        if where == "cluster":
            assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0


def test_the_replicate_pass_runs_on_the_reads_client_and_says_what_to_do_when_it_is_closed(files, cluster):
    """A later pass over the data runs on the client the read used while it is open; once the caller
    has closed it, a clear error says what to do (keep it open, give an address, or no
    intervals); read through an address, each pass connects again."""
    from distributed import Client, get_task_stream

    client = Client(cluster, set_as_default=False)
    data = partitioned(files["parquet"], scheduler=client)
    with get_task_stream(client) as stream:
        result = run_audit(data, REPLICATED)
    assert result.records[result.records.metric == "error"].ci_low.notna().all()
    assert any("parquet_partition" in task["key"][0] if isinstance(task["key"], tuple) else "parquet_partition" in task["key"]
               for task in stream.data)
    client.close()
    with pytest.raises(ParameterError) as closed:
        run_audit(data, dataclasses.replace(REPLICATED, bootstrap=11))
    message = str(closed.value)
    assert "dask client that is now closed" in message and "the 11 bootstrap replicates" in message
    assert "Keep the client open" in message and "scheduler=" in message and "bootstrap=0" in message
    with pytest.raises(ParameterError, match="a sample of 1,200 rows"):
        data.summary(1200)
    by_address = partitioned(files["parquet"], scheduler=cluster.scheduler_address)
    again = run_audit(by_address, REPLICATED)
    assert again.records[again.records.metric == "error"].ci_low.notna().all()


def test_the_replicate_pass_comes_before_the_replicates_whatever_the_read_took(files, monkeypatch):
    """The Poisson bootstrap's pass over the data runs once, before the first replicate, with its
    progress (``bootstrap_pass``); the replicates then run in this process (their moments are kept
    with the data). The default count is the family's, whatever the read took: no cost model
    shortens it; the announced time comes from the replicates timed after the pass."""
    from fairaudit.uncertainty import DEFAULT_BOOTSTRAP

    monkeypatch.delenv("FAIRAUDIT_DEFAULT_BOOTSTRAP", raising=False)
    data = partitioned(files["parquet"])
    events = []
    result = run_audit(data, AuditConfig(ranks=(1,), engine="dask", variants=("vanilla",)), progress=events.append)
    summary = result.uncertainty["pca"]
    assert summary["replicates"] == DEFAULT_BOOTSTRAP["pca"] and summary["jobs"] == "in this process", summary
    stages = [e["stage"] for e in events]
    assert stages.index("bootstrap_pass") < stages.index("announce") < len(stages) - 1
    assert stages[stages.index("bootstrap_pass"):].count("bootstrap_pass") == stages.count("bootstrap_pass")
    assert "bootstrap_pass" not in stages[stages.index("bootstrap"):]
    assert result.expected_seconds > 0 and summary["expected_seconds"] > 0


def test_a_callers_dask_callbacks_still_see_every_pass(files):
    """The passes that report progress register their counter beside dask's global callbacks (a
    caller's ``ProgressBar`` or profiler), not instead of them: an explicit ``callbacks=`` list made
    dask ignore those during the read and the replicate pass (0 tasks seen)."""
    from dask.callbacks import Callback

    seen: list = []

    class Count(Callback):
        def _posttask(self, key, result, dsk, state, id):
            seen.append(key)

    with Count():
        data = read_partitioned(files["parquet"], partition_rows=300, sensitive="group", label="outcome", missing="drop")
    assert seen, "no task of the read reached the caller's callback"
    seen.clear()
    with Count():
        run_audit(data, AuditConfig(ranks=(1,), bootstrap=10, engine="dask", variants=("vanilla",), methods=("pca",)))
    assert seen, "no task of the replicate pass reached the caller's callback"
