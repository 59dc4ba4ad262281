"""The audit core: tidy records, skips with reasons, progress, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fairaudit import AuditData
from fairaudit.audit import RECORD_COLUMNS, AuditConfig, AuditResult, default_variants, run_audit
from fairaudit.errors import ParameterError, RankError
from fairaudit.pca.audit import VARIANTS
from fairaudit.report import records_csv, result_json
from fairaudit.samples import load_sample

from .conftest import random_groups_data


@pytest.fixture(scope="module")
def sample_result():
    events = []
    result = run_audit(load_sample("two_groups"), AuditConfig(ranks=(1, 2, 3)), progress=events.append)
    return result, events


def test_records_are_tidy_and_complete(sample_result):
    result, events = sample_result
    records = result.records
    assert list(records.columns) == RECORD_COLUMNS
    assert set(records.variant) == set(default_variants("pca")) == set(VARIANTS) - {"fair_sdp", "fair_mw"}
    per_group = records[records.group != ""]
    assert set(per_group.metric) == {"error", "loss"}
    assert set(per_group.group) == {"group=A", "group=B"}
    whole = set(records[records.group == ""].metric)
    assert {"max_loss", "loss_gap", "mmd2", "mmd2_rbf", "variance_explained", "unfairness", "unfairness_balanced", "seconds", "effective_rank"} <= whole
    assert records.groupby(["variant", "rank", "group", "metric"]).size().max() == 1
    assert len(events) == len(default_variants("pca")) * 3 and events[-1]["done"] == events[-1]["total"]
    fair = records[(records.variant == "fair_eig") & (records.metric == "loss")].pivot(index="rank", columns="group", values="value")
    np.testing.assert_allclose(fair["group=A"], fair["group=B"], rtol=1e-7)


def test_json_round_trip_and_csv(sample_result):
    result, _ = sample_result
    payload = json.loads(result_json(result))
    assert {"fairaudit_version", "created", "config", "data", "records"} <= set(payload)
    assert payload["data"]["group_sizes"] == {"group=A": 480, "group=B": 120}
    assert len(payload["data"]["sha256"]) == 64
    again = AuditResult.from_dict(payload)
    assert again.records.equals(result.records) or np.allclose(again.records.value, result.records.value)
    assert records_csv(result).splitlines()[0] == ",".join(RECORD_COLUMNS)


def test_the_sdp_and_mw_run_only_when_named(rng):
    """They solve fair_eig's problem, slower: outside the default set of the CLI and the dashboard."""
    X, groups = random_groups_data(rng, 2, 12)
    data = AuditData.from_arrays(X, groups)
    result = run_audit(data, AuditConfig(ranks=(1, 2), sdp_max_features=10, mw_max_features=5))
    assert not {"fair_sdp", "fair_mw"} & set(result.records.variant) and not result.skipped
    # naming a variant explicitly runs it regardless of the size limit
    explicit = run_audit(data, AuditConfig(ranks=(1,), variants="fair_sdp", sdp_max_features=10))
    assert set(explicit.records.variant) == {"fair_sdp"} and not explicit.skipped


def test_an_iteration_cap_is_reported_as_an_audit_warning(rng, monkeypatch):
    """A solver that stops at its cap (converged_ False, a NumPy bool included) is never silent."""
    from fairaudit import FairPCA
    from fairaudit.pca import audit as pca_audit

    monkeypatch.setitem(pca_audit.VARIANTS, "fair_mw", FairPCA(solver="mw", max_iter=3, tol=1e-12))
    X, groups = random_groups_data(rng, 2, 6)
    result = run_audit(AuditData.from_arrays(X, groups), AuditConfig(ranks=(1, 2), variants="fair_mw"))
    assert any("pca/fair_mw: stopped at its iteration cap" in w and "1, 2" in w for w in result.warnings)


def test_variant_selection_and_rank_validation(rng):
    X, groups = random_groups_data(rng, 3, 6)
    data = AuditData.from_arrays(X, groups)
    result = run_audit(data, AuditConfig(variants="vanilla,pca:fair_eig"))
    assert set(result.records.variant) == {"vanilla", "fair_eig"}
    assert sorted(set(result.records["rank"])) == [1, 2, 3, 4, 5, 6]  # default: 1 … min(10, features)
    with pytest.raises(RankError, match="larger than the data allows"):
        run_audit(data, AuditConfig(ranks=(7,)))
    with pytest.raises(RankError, match="below 1"):
        run_audit(data, AuditConfig(ranks=(0, 1)))
    with pytest.raises(ParameterError, match="unknown method"):
        AuditConfig(methods=("lda",))


def test_combined_results_keep_details_options_and_findings():
    """The Report page combines one run per family: FS's selected columns, its options and its
    findings survive, and a note repeated by two runs appears once."""
    from fairaudit.audit import combine_results, family_options
    from fairaudit.findings import findings

    data = load_sample()
    pca = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 2), variants="vanilla"))
    fs = run_audit(data, AuditConfig(methods=("fs",), ranks=(2,), options={"fs": {"scaling": "data", "kmeans_runs": 2}}))
    pca.warnings.append("a shared note")
    fs.warnings.append("a shared note")
    combined = combine_results([pca, fs])
    assert combined.details == fs.details and combined.details["fs"]
    assert family_options(combined.config, "fs") == family_options(fs.config, "fs") == {"scaling": "data", "kmeans_runs": 2}
    assert findings(combined)["fs"] == findings(fs)["fs"]
    assert combined.warnings.count("a shared note") == 1


def test_collect_warnings_forwards_notes_and_keeps_iteration_caps():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from fairaudit.audit import RecordSink

    sink = RecordSink("nmf")
    with sink.collect_warnings("fair_mu", forward=Warning) as caps:
        warnings.warn("a note", UserWarning)
        warnings.warn("rounding", RuntimeWarning)
        warnings.warn("cap reached", ConvergenceWarning)
    assert [str(w.message) for w in caps] == ["cap reached"]
    assert sink.warnings == ["nmf/fair_mu: a note", "nmf/fair_mu: rounding"]
    with sink.collect_warnings("vanilla", forward=()) as caps:
        warnings.warn("ignored", UserWarning)
    assert caps == [] and len(sink.warnings) == 2
