"""Comparing two saved audits: matching, directions, intervals, input differences, outputs."""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairaudit import AuditConfig, AuditData, run_audit
from fairaudit.audit import AuditResult
from fairaudit.cli import main
from fairaudit.compare import (
    KEY,
    NOT_JUDGED,
    SORT,
    TOLERANCE,
    compare,
    compare_files,
    direction,
    read_report,
    render_html,
)
from fairaudit.errors import ReportFileError
from fairaudit.metrics import METRIC_DEFINITIONS, better
from fairaudit.report import result_dict, result_json


def _result(rows, data=None, config=None) -> AuditResult:
    columns = ["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"]
    records = pd.DataFrame([r + (np.nan,) * (8 - len(r)) for r in rows], columns=columns)
    return AuditResult(records=records, config=config or {"methods": ["pca"]}, data=data or {"name": "d.csv", "rows": 10})


def test_every_metric_has_a_direction_or_is_declared_not_judged():
    """The direction is the library's one (metrics.better), less what a comparison does not judge."""
    for metric in METRIC_DEFINITIONS:
        assert direction(metric) in ("lower", "higher") or metric in NOT_JUDGED or better(metric) is None, metric
        if metric not in NOT_JUDGED:
            assert direction(metric) == (better(metric) or ""), metric
    assert direction("heldout_loss") == "lower" and direction("balance") == "higher" and direction("seconds") == ""


def test_changes_are_judged_by_direction_and_intervals():
    a = _result([
        ("pca", "vanilla", 2, "g=1", "loss", 1.0, 0.9, 1.1),
        ("pca", "vanilla", 2, "g=2", "loss", 1.0, 0.9, 1.1),
        ("pca", "vanilla", 2, "", "variance_explained", 0.5),
        ("pca", "vanilla", 2, "", "max_loss", 1.0, 0.95, 1.05),
        ("pca", "vanilla", 2, "", "seconds", 0.1),
        ("pca", "vanilla", 3, "", "max_loss", 2.0),
    ])
    b = _result([
        ("pca", "vanilla", 2, "g=1", "loss", 0.5, 0.45, 0.55),  # better, intervals apart
        ("pca", "vanilla", 2, "g=2", "loss", 1.05, 0.95, 1.15),  # worse, intervals overlap
        ("pca", "vanilla", 2, "", "variance_explained", 0.6),  # better, no interval
        ("pca", "vanilla", 2, "", "max_loss", 1.2),  # outside A's interval
        ("pca", "vanilla", 2, "", "seconds", 0.3),  # not judged
        ("pca", "fair_eig", 2, "", "max_loss", 0.7),
    ])
    c = compare(a, b, findings=({}, {}))
    rows = c.table.set_index(["variant", "rank", "group", "metric"])
    assert rows.loc[("vanilla", 2, "g=1", "loss")][["judged", "beyond"]].tolist() == ["better", True]
    assert rows.loc[("vanilla", 2, "g=2", "loss")][["judged", "beyond"]].tolist() == ["worse", False]
    assert rows.loc[("vanilla", 2, "", "variance_explained")][["judged", "beyond"]].tolist() == ["better", None]
    assert rows.loc[("vanilla", 2, "", "max_loss")][["judged", "beyond"]].tolist() == ["worse", True]
    assert rows.loc[("vanilla", 2, "", "seconds"), "judged"] == ""
    assert rows.loc[("vanilla", 2, "g=1", "loss"), "relative"] == pytest.approx(-0.5)
    assert rows.loc[("vanilla", 3, "", "max_loss"), "status"] == "only in A"
    assert rows.loc[("fair_eig", 2, "", "max_loss"), "status"] == "only in B"
    counts = c.counts()
    assert counts == {"compared": 5, "changed": 5, "same": 0, "with_interval": 3, "beyond_interval": 2, "better": 2,
                      "worse": 2, "only_a": 1, "only_b": 1}
    # largest change relative to each metric's scale: 0.5 of 1.05 (loss), 0.1 of 0.6 (variance), 0.2 of 2.0 (max_loss)
    assert c.largest_changes(3).metric.tolist() == ["loss", "variance_explained", "max_loss"]


def test_values_equal_to_solver_precision_are_the_same():
    a = _result([("pca", "fair_eig", 2, "", "loss_gap", 1e-13), ("pca", "fair_eig", 3, "", "loss_gap", 0.4)])
    b = _result([("pca", "fair_eig", 2, "", "loss_gap", 3e-10), ("pca", "fair_eig", 3, "", "loss_gap", 0.4 + 1e-9)])
    table = compare(a, b, findings=({}, {})).table
    assert table.status.tolist() == ["same", "same"]
    assert np.isnan(table.relative.iloc[0])  # a ratio of two rounding errors is not shown


def test_duplicate_keys_are_refused():
    a = _result([("pca", "vanilla", 2, "", "loss_gap", 1.0), ("pca", "vanilla", 2, "", "loss_gap", 2.0)])
    with pytest.raises(ReportFileError, match="two records for pca/vanilla rank 2 loss_gap"):
        compare(a, a, findings=({}, {}))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 5)) @ rng.normal(size=(5, 5))
    X[:60] *= 2.0
    groups = pd.Series(np.where(np.arange(200) < 60, "<b>x</b>", "y"), name="g")
    config = AuditConfig(methods=("pca",), ranks=(1, 2, 3), variants=("vanilla", "fair_eig"))
    before = run_audit(AuditData.from_arrays(X, groups, name="before.csv"), config)
    after = run_audit(AuditData.from_arrays(X[20:], groups[20:], name="after.csv"), config)
    folder = tmp_path_factory.mktemp("reports")
    paths = folder / "before.json", folder / "after.json"
    paths[0].write_text(result_json(before))
    paths[1].write_text(result_json(after))
    return before, after, paths


def test_same_report_twice_changes_nothing(reports):
    _, _, (path, _) = reports
    c = compare_files(path, path)
    created = read_report(path).created[:16].replace("T", " ")
    assert c.names == (f"1: before.csv ({created})", f"2: before.csv ({created})")  # by data file and date
    counts = c.counts()
    assert counts["changed"] == 0 and counts["same"] == counts["compared"] == len(read_report(path).records)
    assert c.differences == []
    assert "the same data and configuration" in " ".join(c.summary())
    assert c.data_note is None and not c.verdicts_changed and c.summary()[0].startswith("No verdict changed")


def test_a_data_change_is_named_with_the_values_that_moved(reports):
    before, after, paths = reports
    c = compare_files(*paths)
    keys = {d["key"] for d in c.differences}
    assert {"data.name", "data.rows", "data.group_sizes.<b>x</b>"} <= keys
    shown = {d["what"]: (d["a"], d["b"]) for d in c.differences}
    assert shown["rows used"] == ("200", "180") and shown["rows of group <b>x</b>"] == ("60", "40")
    assert shown["group <b>x</b>: rows used of read"] == ("60 of 60", "40 of 40")
    assert not any(text.startswith(("[", "{")) or text == "None" for pair in shown.values() for text in pair)  # words, not raw JSON
    assert c.data_note.startswith("These two audits are of different data (other files (before.csv, after.csv), rows 200 → 180")
    changed = c.changed
    assert len(changed) > 0 and set(changed.judged) <= {"better", "worse", ""}
    worst = c.largest_changes(1).iloc[0]
    assert worst.change == pytest.approx(worst.b - worst.a)
    assert c.findings[0].get("pca") and c.findings[1].get("pca")


def test_html_is_offline_and_escapes_user_text(reports, tmp_path):
    _, _, paths = reports
    page = render_html(compare_files(*paths, names=("<i>before</i>", "after")))

    class Tags(HTMLParser):
        tags: list = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(page)
    assert not any(tag == "i" for tag, _ in parser.tags) and not any(tag == "b" for tag, _ in parser.tags)
    assert not any(attrs.get("src", "").startswith("http") for _, attrs in parser.tags)
    assert "&lt;i&gt;before&lt;/i&gt;" in page and "@media print" in page
    assert 'class="js-plotly-plot"' in page or "Plotly.newPlot" in page


def test_intervals_saved_in_a_report_are_read_back(tmp_path):
    a = _result([("pca", "vanilla", 1, "", "max_loss", 1.0, 0.8, 1.2)])
    payload = result_dict(a)
    payload["records"] = [{**payload["records"][0], "ci_low": 0.8, "ci_high": 1.2}]
    payload["findings"] = [{"family": "pca", "text": "saved sentence", "verdict": "gap"}]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(payload))
    read = read_report(path)
    assert read.records[["ci_low", "ci_high"]].iloc[0].tolist() == [0.8, 1.2]
    c = compare_files(path, path)
    assert [f["text"] for f in c.findings[0]["pca"]] == ["saved sentence"]
    assert c.table.beyond.iloc[0] is False


def test_files_that_are_not_reports_are_refused(tmp_path):
    with pytest.raises(ReportFileError, match="does not exist"):
        read_report(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ReportFileError, match="not valid JSON"):
        read_report(bad)
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(ReportFileError, match="not a fairaudit JSON report"):
        read_report(bad)


def test_compare_command(reports, tmp_path, capsys):
    _, _, paths = reports
    html, out_json, out_csv = tmp_path / "diff.html", tmp_path / "diff.json", tmp_path / "diff.csv"
    code = main(["compare", str(paths[0]), str(paths[1]), "--html", str(html), "--json", str(out_json), "--csv", str(out_csv),
                 "--names", "before,after"])
    printed = capsys.readouterr().out
    assert code == 0 and "changed" in printed and "input rows used: 200 → 180" in printed and f"wrote {html}" in printed
    assert json.loads(out_json.read_text())["compared"] == ["before", "after"]
    assert len(pd.read_csv(out_csv)) == len(json.loads(out_json.read_text())["rows"])
    assert main(["compare", str(paths[0]), str(paths[1]), "--html", str(paths[0])]) == 2
    assert "which is never overwritten" in capsys.readouterr().err
    assert main(["compare", str(paths[0]), str(tmp_path / "nope.json")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    assert main(["compare", str(paths[0]), str(paths[1]), "--names", "one"]) == 2
    assert "--names before,after" in capsys.readouterr().err


def _reference(a: AuditResult, b: AuditResult) -> pd.DataFrame:
    """The comparison table as it was first written — a pandas outer merge, the rules row by row —,
    to check the integer matching and the vectorised rules against."""
    def side(records, prefix):
        out = records[KEY].copy()
        out[prefix], out[f"{prefix}_low"], out[f"{prefix}_high"] = records["value"], records["ci_low"], records["ci_high"]
        return out

    table = side(a.records, "a").merge(side(b.records, "b"), on=KEY, how="outer", indicator=True)
    table["change"] = table["b"] - table["a"]
    scale = pd.concat([table["a"].abs(), table["b"].abs()], axis=1).max(axis=1).groupby([table["method"], table["metric"]]).transform("max")
    table["scale"] = np.where(scale.fillna(0) > 0, scale.fillna(0), 1.0)
    rows = []
    for r in table.to_dict("records"):
        if r["_merge"] != "both":
            status = "only in A" if r["_merge"] == "left_only" else "only in B"
        elif np.isnan(r["a"]) and np.isnan(r["b"]):
            status = "same"
        elif np.isnan(r["a"]) or np.isnan(r["b"]):
            status = "changed"
        else:
            status = "same" if abs(r["b"] - r["a"]) <= TOLERANCE * r["scale"] else "changed"
        a_has, b_has = np.isfinite(r["a_low"]) and np.isfinite(r["a_high"]), np.isfinite(r["b_low"]) and np.isfinite(r["b_high"])
        beyond = None
        if status in ("same", "changed") and np.isfinite(r["a"]) and np.isfinite(r["b"]) and (a_has or b_has):
            if a_has and b_has:
                beyond = bool(r["a_high"] < r["b_low"] or r["b_high"] < r["a_low"])
            else:
                low, high, other = (r["a_low"], r["a_high"], r["b"]) if a_has else (r["b_low"], r["b_high"], r["a"])
                beyond = bool(other < low or other > high)
        way = direction(r["metric"])
        judged = "" if status != "changed" or not way or not np.isfinite(r["change"]) else (
            "better" if (r["change"] < 0) == (way == "lower") else "worse")
        relative = r["change"] / abs(r["a"]) if abs(r["a"]) > TOLERANCE * r["scale"] else np.nan
        rows.append({**{k: r[k] for k in KEY}, "status": status, "beyond": beyond, "judged": judged, "relative": relative,
                     **{k: r[k] for k in ("a", "b", "change", "a_low", "a_high", "b_low", "b_high", "scale")}})
    return pd.DataFrame(rows, columns=[*KEY, "status", "beyond", "judged", "relative", "a", "b", "change", "a_low", "a_high", "b_low",
                                       "b_high", "scale"]).sort_values(SORT).reset_index(drop=True)


VALUES = st.one_of(st.just(np.nan), st.floats(-5, 5), st.sampled_from([0.0, 1e-12, 1.0, 1.0 + 1e-9]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["pca", "nmf"]), st.sampled_from(["vanilla", "fair_eig"]), st.integers(1, 3),
                          st.sampled_from(["", "g=1", "g=2"]), st.sampled_from(["loss", "balance", "seconds", "heldout_loss"]),
                          VALUES, VALUES, VALUES, st.integers(0, 3)), max_size=40))
def test_the_integer_matching_finds_what_a_merge_finds(rows):
    """Random records in A, B or both (``where``: 1 A, 2 B, 3 both), values NaN or close to each
    other, intervals or none: the table equals the reference's, row for row."""
    unique = {row[:5]: row for row in rows}.values()
    a = _result([(*r[:5], r[5], r[5] - abs(r[6]), r[5] + abs(r[6])) if r[8] % 2 else (*r[:5], r[5]) for r in unique if r[8] in (1, 3)])
    b = _result([(*r[:5], r[7], r[7] - abs(r[6]), r[7] + abs(r[6])) if r[8] == 3 else (*r[:5], r[7]) for r in unique if r[8] in (2, 3)])
    got = compare(a, b, findings=({}, {})).table
    expected = _reference(a, b)
    assert len(got) == len(expected)
    if len(got):
        columns = [c for c in expected.columns if c != "beyond"]
        pd.testing.assert_frame_equal(got[columns].astype({"rank": "int64"}).astype(object), expected[columns].astype({"rank": "int64"}).astype(object),
                                      check_dtype=False)
        assert got["beyond"].tolist() == expected["beyond"].tolist()


def test_the_json_and_csv_written_in_pieces_are_the_whole(reports, monkeypatch):
    import fairaudit.compare as module

    _, _, paths = reports
    c = compare_files(*paths)
    whole = c.to_dict()
    monkeypatch.setattr(module, "SLICE_ROWS", 7)
    pieced = json.loads(c.to_json())
    assert pieced["rows"] == json.loads(json.dumps(whole["rows"])) and {k: v for k, v in pieced.items() if k != "rows"} == {
        k: v for k, v in json.loads(json.dumps(whole)).items() if k != "rows"}
    assert pd.read_csv(io.StringIO(c.to_csv())).shape == (len(c.table), len(c.table.columns))


def test_the_html_cuts_its_long_tables_and_says_where_the_rest_is(reports, monkeypatch):
    import fairaudit.compare as module

    _, _, paths = reports
    c = compare_files(*paths)
    monkeypatch.setattr(module, "HTML_ROWS", 3)
    page = render_html(c)
    assert "the comparison's CSV and JSON hold every value" in page


def _finding(variant, verdict, rank=2, topic=None, **evidence):
    return {"family": "pca", "variant": variant, "rank": rank, "verdict": verdict, "text": f"{variant} {verdict}",
            "evidence": evidence or {"worst_group": "race=black", "best_group": "race=white"}, **({"topic": topic} if topic else {})}


def test_the_verdicts_that_changed_come_first_with_their_groups():
    """Issue 25: Compare must say first that PCA went from No evidence to Gap at rank 2, race=black
    vs race=white; regressions before improvements, unchanged verdicts last, statements left out."""
    a = {"pca": [_finding("vanilla", "no_evidence", rank=3), _finding("fair_eig", "mitigated"), _finding("jevd", "gap"),
                 _finding("vanilla", "no_evidence", balanced_accuracy=[0.5, 0.4, 0.6]), _finding("vanilla", "info")]}
    b = {"pca": [_finding("vanilla", "gap"), _finding("fair_eig", "mitigated"), _finding("jevd", "no_evidence"),
                 _finding("vanilla", "gap", balanced_accuracy=[0.7, 0.6, 0.8])]}
    rows = compare(_result([("pca", "vanilla", 2, "", "max_loss", 1.0)]), _result([("pca", "vanilla", 2, "", "max_loss", 1.0)]),
                   findings=(a, b)).verdicts
    assert [(r["variant"], r["topic"], r["direction"]) for r in rows] == [
        ("vanilla", "disparity", "regression"), ("vanilla", "leakage", "regression"), ("jevd", "disparity", "improvement"),
        ("fair_eig", "disparity", ""),
    ]
    assert rows[0]["sentence"] == "PCA · PCA: No evidence → Gap at rank 2, race=black vs race=white"
    assert rows[1]["sentence"].startswith("PCA · PCA (leakage): No evidence → Gap")
    assert rows[3]["sentence"] == "PCA · Fair PCA (exact eigen-solver): Mitigated at rank 2, race=black vs race=white"


def test_a_comparison_of_two_data_sets_says_so_and_leads_with_the_verdicts(reports, tmp_path):
    before, after, paths = reports
    c = compare_files(*paths)
    summary = c.summary()
    assert summary[0].startswith(("No verdict changed", "Neither audit")) or "verdicts changed" in summary[0]
    assert any(line.startswith("These two audits are of different data") for line in summary)
    page = render_html(c)
    assert page.index("<h2>Verdicts</h2>") < page.index("<h2>What differs in the inputs</h2>")
    assert 'class="data-note"' in page and "different data" in page
