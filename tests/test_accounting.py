"""Every row and column accounted for; groups from sets of values; hostile values in prepare."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fairaudit import AuditData, prepare, prepare_tensor, read_table
from fairaudit.cli import main
from fairaudit.data import DROP_GAP_POINTS, DROP_RATIO, NO_GROUP, accounting_lines, value_counts
from fairaudit.data._accounting import unequal_drop_warning
from fairaudit.errors import DuplicateCellError, FairAuditError, ParameterError, SensitiveColumnError
from fairaudit.vocabulary import render

from .conftest import shared_file


def survey(seed: int = 0) -> bytes:
    """A schooling survey: 200 boys, 100 girls; 58 girls' rows and 48 boys' rows miss a cell."""
    rng = np.random.default_rng(seed)
    sex = np.array(["boy"] * 200 + ["girl"] * 100)
    frame = pd.DataFrame({
        "respondent": np.arange(1, 301),
        "sex": sex,
        "school_id": rng.integers(1, 121, 300),
        "score": rng.normal(50, 10, 300).round(1),
        "hours": rng.integers(0, 40, 300),
        "income": rng.normal(3000, 500, 300).round(0),
        "comment": [f"free text {i}" for i in range(300)],
        "wave": 1,
        "unused": "",
    })
    frame["hours"] = frame["hours"].astype(object)
    girls, boys = np.flatnonzero(sex == "girl"), np.flatnonzero(sex == "boy")
    for row in rng.choice(girls, 58, replace=False):
        frame.loc[row, "hours"] = "NA"
    for row in rng.choice(boys, 48, replace=False):
        frame.loc[row, rng.choice(["hours", "income"])] = None
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return frame.to_csv(index=False).encode()


def test_survey_drop_counts_rows_per_group_exactly_and_warns():
    data = prepare(read_table(survey(), name="survey.csv"), sensitive="sex", missing="drop")
    accounting = data.accounting
    assert accounting["groups"] == [
        {"group": "sex=boy", "rows_read": 200, "rows_used": 152, "dropped": {"missing cells": 48}},
        {"group": "sex=girl", "rows_read": 100, "rows_used": 42, "dropped": {"missing cells": 58}},
    ]
    assert data.group_sizes() == {"sex=boy": 152, "sex=girl": 42}
    assert accounting["features"] == ["score", "hours", "income"]
    reasons = {e["column"]: e["reason"] for e in accounting["excluded"]}
    assert reasons == {"sex": "sensitive", "respondent": "id_like", "school_id": "id_like", "comment": "text",
                       "wave": "constant", "unused": "empty"}
    [warning] = [w for w in accounting["warnings"] if "dropping rows" in w]
    text = render(warning, "library")
    assert "58.0 % of sex=girl (58 of 100" in text and "24.0 % of sex=boy (48 of 200)" in text
    assert f"at least {DROP_GAP_POINTS:g} points and a factor of {DROP_RATIO:g}" in text
    assert "missing='median'" in text and "--missing median" in render(warning, "cli")
    fingerprint = data.fingerprint()
    assert fingerprint["groups"] == accounting["groups"] and fingerprint["features"] == ["score", "hours", "income"]
    assert fingerprint["excluded"] == accounting["excluded"] and fingerprint["warnings"] == accounting["warnings"]


def test_survey_drop_in_the_cli(tmp_path, capsys):
    path = tmp_path / "survey.csv"
    path.write_bytes(survey())
    report = tmp_path / "r.json"
    code = main(["audit", str(path), "--sensitive", "sex", "--missing", "drop", "--ranks", "1", "--variants", "vanilla",
                 "--json", str(report)])
    assert code == 0
    out = capsys.readouterr().out
    assert "rows: 194 used of 300 read" in out
    assert "  sex=boy: 152 of 200 used (dropped: 48 missing cells)" in out
    assert "  sex=girl: 42 of 100 used (dropped: 58 missing cells)" in out
    assert "left out 'comment': text" in out and "--one-hot" in out
    assert "data warning: dropping rows removed 58.0 % of sex=girl" in out and "--missing median" in out
    payload = json.loads(report.read_text())
    assert [(g["group"], g["rows_read"], g["rows_used"]) for g in payload["data"]["groups"]] == [
        ("sex=boy", 200, 152), ("sex=girl", 100, 42)]
    assert payload["data"]["features"] == ["score", "hours", "income"]
    assert {e["column"] for e in payload["data"]["excluded"]} == {"sex", "respondent", "school_id", "comment", "wave", "unused"}
    assert any("dropping rows removed" in w for w in payload["data"]["warnings"])


def test_the_unequal_drop_rule_and_its_thresholds():
    def entries(*shares):
        return [{"group": f"g{i}", "rows_read": 1000, "rows_used": 1000 - lost, "dropped": {"missing cells": lost} if lost else {}}
                for i, lost in enumerate(shares)]

    assert unequal_drop_warning(entries(240, 580)) is not None  # the survey of the issue: 24 % vs 58 %
    assert unequal_drop_warning(entries(0, 100)) is not None  # 0 % vs 10 %: 10 points, any factor
    assert unequal_drop_warning(entries(0, 99)) is None  # 9.9 points
    assert unequal_drop_warning(entries(450, 550)) is None  # 10 points but a factor of 1.2
    assert unequal_drop_warning(entries(10, 30)) is None  # a factor of 3 but 2 points
    assert unequal_drop_warning(entries(200, 300, 350)) is not None  # 20 % vs 35 %: 15 points, 1.75×


def test_rows_without_a_group_small_groups_and_labels_are_accounted_for():
    text = "g,x,y,l\n" + "".join(f"{g},{i},{i * 7 % 5},{lab}\n" for i, (g, lab) in enumerate(
        [("a", "p"), ("a", "q"), ("a", ""), ("b", "p"), ("b", "q"), ("", "p"), ("c", "q"), ("b", "p"), ("a", "q")]))
    data = prepare(read_table(text.encode()), sensitive="g", label="l", missing="drop", min_group_size=2, small_groups="drop")
    groups = {e["group"]: e for e in data.accounting["groups"]}
    assert groups["g=a"] == {"group": "g=a", "rows_read": 4, "rows_used": 3, "dropped": {"no label": 1}}
    assert groups["g=c"] == {"group": "g=c", "rows_read": 1, "rows_used": 0, "dropped": {"small group": 1}}
    assert groups[NO_GROUP] == {"group": NO_GROUP, "rows_read": 1, "rows_used": 0, "dropped": {"no group value": 1}}
    assert sum(e["rows_read"] for e in groups.values()) == 9 == data.accounting["rows_read"]
    assert data.accounting["rows_used"] == data.n_rows == 6
    warnings = " ".join(data.accounting["warnings"])
    assert "group g=c is not in the audit: its 1 row is fewer than the minimum group size, 2" in warnings and "1 rows have no value in a sensitive column" in warnings
    lines = accounting_lines(data.fingerprint())
    assert lines[0] == "rows: 6 used of 9 read" and "  g=c: 0 of 1 used (dropped: 1 small group)" in lines


def test_explicit_features_list_the_others_as_not_selected():
    table = read_table(b"g,a,b,c\nx,1,2,3\ny,2,3,4\nx,3,4,6\ny,5,1,2\n")
    data = prepare(table, sensitive="g", features=["b"], ignore=["c"])
    excluded = data.accounting["excluded"]
    assert [(e["column"], e["reason"]) for e in excluded] == [("g", "sensitive"), ("c", "ignored"), ("a", "not_selected")]
    assert excluded[0]["detail"] == "defines the groups (its values are the groups); never a feature"
    assert render(excluded[1]["detail"], "cli") == "left out on request (--ignore)"
    assert render(excluded[2]["detail"], "cli") == "not among the chosen features (--features)"


# ---------------------------------------------------------------- identifiers beyond the name
def _with(column: str, values, n: int = 300) -> bytes:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"g": ["a", "b"] * (n // 2), column: values, "x": rng.normal(size=n)})
    return frame.to_csv(index=False).encode()


@pytest.mark.parametrize(
    "column,values,why",
    [
        ("ID", np.random.default_rng(0).permutation(300) * 1.5, "its name"),
        ("seqnum", np.random.default_rng(0).permutation(300) + 1, "with few gaps"),
        ("serial", np.arange(300) * 17 + 4, "in increasing order"),
        ("school", np.random.default_rng(0).integers(1, 121, 300), "its name suggests codes"),
        ("c7", np.repeat(np.random.default_rng(0).permutation(100) + 1000, 3), "stored together"),
        ("schoolID", np.random.default_rng(1).integers(1, 101, 300), "its name suggests codes"),
        ("schidkn", np.random.default_rng(2).choice(np.arange(1000, 9999, 37)[:25], 300), "a name that marks an identifier"),
        ("hhid", np.random.default_rng(2).integers(1, 31, 300) * 1009, "a name that marks an identifier"),
    ],
)
def test_identifiers_are_left_out_with_the_reason(column, values, why):
    data = prepare(read_table(_with(column, values)), sensitive="g")
    assert data.feature_names == ("x",)
    [entry] = [e for e in data.accounting["excluded"] if e["column"] == column]
    assert entry["reason"] == "id_like" and why in entry["detail"]
    assert "--features" in render(entry["detail"], "cli")
    included = prepare(read_table(_with(column, values)), sensitive="g", features=[column, "x"])
    assert included.feature_names == (column, "x")
    assert any(column in w and "looks like an identifier" in w for w in included.accounting["warnings"])  # said, not silent


def test_an_identifier_flagged_column_can_be_kept_with_the_default_features():
    """``use_id_like`` (the Data page's “Use ID-like columns as features”): the column comes back as a
    feature, the other columns keep their reasons, and the accounting and the log say so."""
    table = read_table(survey(), name="survey.csv")
    kept = prepare(table, sensitive="sex", missing="drop", use_id_like=["school_id"])
    assert kept.feature_names == ("school_id", "score", "hours", "income")
    reasons = {e["column"]: e["reason"] for e in kept.accounting["excluded"]}
    assert reasons == {"sex": "sensitive", "respondent": "id_like", "comment": "text", "wave": "constant", "unused": "empty"}
    [warning] = [w for w in kept.accounting["warnings"] if "school_id" in w]
    assert "is used as a feature, as asked" in warning
    assert render(warning, "dashboard").endswith(
        "(“Use ID-like columns as features” → “school_id” (Data page)); an identifier is a label, not a measurement, "
        "so the audit would treat its numbering as a quantity."
    )
    assert "--features with school_id among the other features" in render(warning, "cli")
    assert any("used 'school_id' as a feature although it looks like an identifier" in line for line in kept.log)
    [detail] = [e["detail"] for e in prepare(table, sensitive="sex", missing="drop").accounting["excluded"] if e["column"] == "school_id"]
    assert render(detail, "library").endswith("use it (use_id_like=['school_id'])")


@pytest.mark.parametrize(
    "options,message",
    [
        ({"use_id_like": ["comment"]}, "'comment' is left out as text"),
        ({"use_id_like": ["school_id"], "features": ["score"]}, "list 'school_id' among them instead"),
        ({"use_id_like": ["school_id"], "ignore": ["school_id"]}, "both kept as a feature"),
        ({"use_id_like": ["nope"]}, "ID-like column 'nope' is not in"),
    ],
)
def test_use_id_like_refuses_what_it_cannot_keep(options, message):
    with pytest.raises(FairAuditError, match=message):
        prepare(read_table(survey(), name="survey.csv"), sensitive="sex", missing="drop", **options)


def test_value_counts_are_the_values_merge_names():
    values, counts = value_counts(read_table(survey(), name="survey.csv"), "sex")
    assert values == ["boy", "girl"] and counts.tolist() == [200, 100]
    numbers = read_table(b"g,x\n2,1\n1.0,2\n2,3\n,4\n")
    values, counts = value_counts(numbers, "g")
    assert values == ["1", "2"] and counts.tolist() == [1, 2]


@pytest.mark.parametrize(
    "column,values",
    [
        ("income", np.random.default_rng(0).integers(10_000, 900_000, 300)),  # distinct, but a measure
        ("age", np.random.default_rng(0).integers(18, 90, 300)),  # few levels
        ("amount", np.where(np.arange(300) % 3 == 0, 0, np.random.default_rng(0).integers(1, 200, 300))),  # a dominant 0
        ("cholesterol", np.random.default_rng(0).integers(126, 400, 300)),  # many levels, no hint, not sorted
        ("paid", np.random.default_rng(0).integers(100, 200, 300)),  # words that hold "id" are not identifiers
        ("width", np.random.default_rng(0).integers(10, 90, 300)),
        ("valid", np.random.default_rng(0).integers(0, 60, 300)),
    ],
)
def test_measurements_are_not_taken_for_identifiers(column, values):
    assert prepare(read_table(_with(column, values)), sensitive="g").feature_names == (column, "x")


def test_a_coded_school_identifier_is_left_out_and_one_choice_keeps_it():
    """Issue 25: a survey's school identifier (``schidkn``: 79 integer codes of about 73 pupils each,
    rows not sorted by school) was kept as a feature, and feature selection then named it the
    feature most aligned with race."""
    rng = np.random.default_rng(7)
    n = 5_748
    schools = rng.choice(np.sort(rng.choice(np.arange(1_000, 99_999), 79, replace=False)), n)
    frame = pd.DataFrame({"race": rng.choice(["white", "black", "other"], n, p=[0.67, 0.32, 0.01]), "schidkn": schools,
                          "math": rng.normal(50, 10, n).round(2), "read": rng.normal(50, 10, n).round(2)})
    table = read_table(frame.to_csv(index=False).encode(), name="nels.csv")
    data = prepare(table, sensitive="race")
    assert data.feature_names == ("math", "read")
    [entry] = [e for e in data.accounting["excluded"] if e["column"] == "schidkn"]
    assert entry["reason"] == "id_like" and "79 whole-number codes, about 73 rows each" in entry["detail"]
    assert render(entry["detail"], "cli").endswith("use it (--features with schidkn among the other features)")
    kept = prepare(table, sensitive="race", use_id_like=["schidkn"])
    assert kept.feature_names == ("schidkn", "math", "read")


@pytest.mark.shared_data
def test_no_feature_of_the_papers_data_is_taken_for_an_identifier():
    credit = prepare(read_table(shared_file("credit/default_degree.csv"), skip_rows=1), sensitive="SEX")
    assert [e["column"] for e in credit.accounting["excluded"] if e["reason"] == "id_like"] == ["ID"]
    heart = prepare(read_table(shared_file("heart/processed.cleveland.data")), sensitive="col_2", missing="drop")
    assert not [e for e in heart.accounting["excluded"] if e["reason"] == "id_like"]


# ---------------------------------------------------------------- merging values into groups
@pytest.mark.shared_data
def test_samadi_credit_split_by_merging_education_values():
    table = read_table(shared_file("credit/default_degree.csv"), skip_rows=1)
    data = prepare(table, sensitive="EDUCATION", merge={"EDUCATION": {"high": [1, 2], "low": "*"}})
    assert data.group_sizes() == {"EDUCATION=high": 24615, "EDUCATION=low": 5385}
    assert data.n_features == 22 and "EDUCATION" not in data.feature_names
    assert any(line.startswith("merged values of 'EDUCATION' into groups: high = 1, 2 (24,615 rows); low = 0, 3, 4, 5, 6")
               for line in data.log)


@pytest.mark.shared_data
def test_samadi_credit_split_from_the_cli(tmp_path, capsys):
    path = shared_file("credit/default_degree.csv")
    report = tmp_path / "r.json"
    code = main(["audit", str(path), "--skip-rows", "1", "--sensitive", "EDUCATION", "--merge", "EDUCATION=1,2:high",
                 "--merge", "EDUCATION=*:low", "--ranks", "1", "--variants", "vanilla", "--json", str(report), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(report.read_text())["data"]["group_sizes"] == {"EDUCATION=high": 24615, "EDUCATION=low": 5385}


RACE = "race,x,y\n" + "".join(f"{r},{i},{i * 3 % 7}\n" for i, r in enumerate(["white"] * 20 + ["black"] * 12 + ["asian"] * 3 + ["pacific"] * 2))


def test_merging_small_categories_keeps_the_others():
    data = prepare(read_table(RACE.encode()), sensitive="race", merge={"race": {"other": ["asian", "pacific"]}}, min_group_size=5)
    assert data.group_sizes() == {"race=other": 5, "race=black": 12, "race=white": 20}


@pytest.mark.parametrize(
    "merge,message",
    [
        ({"race": {"other": ["asian", "latino"]}}, "value 'latino' does not occur in the column"),
        ({"race": {"a": ["asian"], "b": ["asian", "pacific"]}}, "value 'asian' is in two groups"),
        ({"race": {"a": "*", "b": "*"}}, "only one group can take the rest"),
        ({"race": {"all": ["asian", "black", "pacific", "white"], "rest": "*"}}, "covers no value"),
        ({"race": {"white": ["asian"]}}, "'white' is also a value of the column"),
        ({"race": {"": ["asian"]}}, "a group label is empty"),
        ({"race": ["asian"]}, "must map group labels to values"),
        ({"x": {"low": [1]}}, "not a sensitive column"),
    ],
)
def test_merge_mistakes_are_named(merge, message):
    with pytest.raises(ParameterError, match=message):
        prepare(read_table(RACE.encode()), sensitive="race", merge=merge)


def test_merge_on_numbers_matches_their_value_and_works_with_intersections():
    text = "edu,sex,x\n" + "".join(f"{e},{s},{i}\n" for i, (e, s) in enumerate([(1, "F"), (2, "M"), (3, "F"), (4, "M")] * 5))
    data = prepare(read_table(text.encode()), sensitive=["edu", "sex"], merge={"edu": {"hi": ["1.0", 2], "lo": "*"}})
    assert data.group_sizes() == {"edu=hi & sex=F": 5, "edu=hi & sex=M": 5, "edu=lo & sex=F": 5, "edu=lo & sex=M": 5}


def test_merge_brings_a_many_valued_column_under_the_limit():
    rng = np.random.default_rng(0)
    text = "age,x\n" + "".join(f"{20 + i % 30},{rng.normal():.4f}\n" for i in range(60))
    with pytest.raises(SensitiveColumnError, match="merge") as caught:
        prepare(read_table(text.encode()), sensitive="age")
    assert "--merge age=VALUES:GROUP" in caught.value.render("cli")
    young = [str(a) for a in range(20, 35)]
    data = prepare(read_table(text.encode()), sensitive="age", merge={"age": {"young": young, "old": "*"}})
    assert data.group_sizes() == {"age=young": 30, "age=old": 30}


def test_cli_merge_syntax_errors(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text(RACE)
    assert main(["audit", str(path), "--sensitive", "race", "--merge", "race=asian"]) == 2
    assert "COLUMN=VALUE1,VALUE2:GROUP" in capsys.readouterr().err
    assert main(["audit", str(path), "--sensitive", "race", "--merge", "race=asian:x", "--merge", "race=black:x"]) == 2
    assert "twice" in capsys.readouterr().err


# ---------------------------------------------------------------- hostile values
def test_values_near_overflow_are_standardised_exactly():
    huge = np.array([1e308, -1e308, 5e307, -3e307, 1e307, 0.0])
    text = "g,big,x\n" + "".join(f"{'ab'[i % 2]},{v!r},{i}\n" for i, v in enumerate(huge.tolist()))
    data = prepare(read_table(text.encode()), sensitive="g")
    X = data.X
    assert np.isfinite(X).all()
    expected = (huge / 1e300 - np.mean(huge / 1e300)) / np.std(huge / 1e300)
    np.testing.assert_allclose(X[:, 0], expected, rtol=1e-12)
    np.testing.assert_allclose(data.matrix("unit_norm")[:, 0], huge / np.linalg.norm(huge / 1e300) / 1e300, rtol=1e-12)
    with pytest.raises(ParameterError, match="overflow") as caught:
        data.matrix("none")
    assert "--scaling standardize" in caught.value.render("cli")
    with pytest.raises(ParameterError, match="overflow"):
        data.matrix("center")


def test_mean_imputation_near_overflow_is_exact():
    text = "g,big,x\na,1.7e308,1\nb,1e308,2\na,,3\nb,1.6e308,4\n"
    data = prepare(read_table(text.encode()), sensitive="g", missing="mean", scaling="none")
    assert data.feature_names == ("big", "x")
    assert data.X_raw[2, 0] == pytest.approx((1.7 + 1.0 + 1.6) / 3 * 1e308, rel=1e-15)


def test_quantile_bin_labels_never_collide():
    values = 1 + np.arange(40) * 1e-9
    text = "v,x\n" + "".join(f"{v!r},{i}\n" for i, v in enumerate(values.tolist()))
    data = prepare(read_table(text.encode()), sensitive="v", bins={"v": 4})
    labels = list(data.group_sizes())
    assert len(set(labels)) == 4 and all(n == 10 for n in data.group_sizes().values())


@pytest.mark.parametrize(
    "options,message",
    [
        ({"binarize": {"v": float("nan")}}, "finite number"),
        ({"binarize": {"v": "high"}}, "finite number"),
        ({"bins": {"v": 10**9}}, "at most 12"),
        ({"bins": {"v": 2.5}}, "whole number"),
        ({"bins": {"v": 3}, "merge": {"v": {"a": [1]}}}, "more than one way to make groups"),
        ({"min_group_size": 2.5}, "min_group_size"),
    ],
)
def test_absurd_group_options_are_specific_errors(options, message):
    text = "v,x\n" + "".join(f"{i % 20},{i}\n" for i in range(40))
    with pytest.raises(ParameterError, match=message):
        prepare(read_table(text.encode()), sensitive="v", **options)


def test_cli_absurd_values_exit_2(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("v,x,y\n" + "".join(f"{i % 20},{i},{i % 3}\n" for i in range(40)))
    for args in (["--bins", "v=100000"], ["--binarize", "v=nan"], ["--bins", "v=1e9"], ["--skip-rows", "-2"], ["--min-group-size", "0"]):
        assert main(["audit", str(path), "--sensitive", "v", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("fairaudit: error: ") and "unexpected" not in err


# ---------------------------------------------------------------- tensors
LONG = "user,item,v,sex,wave\n" + "".join(
    f"u{u},i{i},{u * 10 + i},{'F' if u % 2 else 'M'},1\n" for u in (1, 2, 3, 4) for i in (1, 2)
)


def test_tensor_accounting_counts_entities():
    table = read_table((LONG + "u5,i1,1,X,1\nu5,i2,2,X,1\n").encode())
    data = prepare_tensor(table, index=["user", "item"], value="v", sensitive="sex", small_groups="drop")
    assert data.accounting["unit"] == "entities" and data.accounting["features"] == ["v"]
    assert data.accounting["groups"] == [
        {"group": "sex=F", "rows_read": 2, "rows_used": 2, "dropped": {}},
        {"group": "sex=M", "rows_read": 2, "rows_used": 2, "dropped": {}},
        {"group": "sex=X", "rows_read": 1, "rows_used": 0, "dropped": {"small group": 1}},
    ]
    reasons = {e["column"]: e["reason"] for e in data.accounting["excluded"]}
    assert reasons == {"user": "index", "item": "index", "sex": "sensitive", "wave": "unused"}
    assert accounting_lines(data.fingerprint())[0] == "entities: 4 used of 5 read"


def test_tensor_entity_column_not_first_is_diagnosed():
    table = read_table(LONG.encode())
    with pytest.raises(SensitiveColumnError, match="constant for each 'user'") as caught:
        prepare_tensor(table, index=["item", "user"], value="v", sensitive="sex")
    assert "--tensor-index user,item" in caught.value.render("cli")
    assert "“Index columns, entity first” → “user,item”" in caught.value.render("dashboard")


def test_tensor_duplicates_name_a_column_left_out_of_the_index():
    text = LONG.replace(",1\n", ",1\n").rstrip("\n") + "\n" + "".join(
        f"u{u},i{i},{u * 10 + i + 1},{'F' if u % 2 else 'M'},2\n" for u in (1, 2, 3, 4) for i in (1, 2))
    with pytest.raises(DuplicateCellError, match="differ in 'wave'") as caught:
        prepare_tensor(read_table(text.encode()), index=["user", "item"], value="v", sensitive="sex")
    assert "--tensor-index user,item,wave" in caught.value.render("cli")
    data = prepare_tensor(read_table(text.encode()), index=["user", "item", "wave"], value="v", sensitive="sex")
    assert data.tensor_shape == (4, 2, 2)


def test_tensor_too_large_to_build_is_refused():
    text = "a,b,c,v,s\n" + "".join(f"{i},{i},{i},1,{i % 2}\n" for i in range(600))
    with pytest.raises(ParameterError, match="cell limit"):
        prepare_tensor(read_table(text.encode()), index=["a", "b", "c"], value="v", sensitive="s")


def test_arrays_are_accounted_for_whole():
    data = AuditData.from_arrays(np.arange(12.0).reshape(6, 2), ["a", "b"] * 3, min_group_size=1)
    assert data.accounting["groups"] == [
        {"group": "a", "rows_read": 3, "rows_used": 3, "dropped": {}},
        {"group": "b", "rows_read": 3, "rows_used": 3, "dropped": {}},
    ]
    assert data.fingerprint()["features"] == ["x0", "x1"]


def test_the_json_carries_the_librarys_words(tmp_path, capsys):
    path = tmp_path / "survey.csv"
    path.write_bytes(survey())
    report = tmp_path / "r.json"
    assert main(["audit", str(path), "--sensitive", "sex", "--missing", "drop", "--ranks", "1", "--variants", "vanilla",
                 "--json", str(report), "--quiet"]) == 0
    text = report.read_text()
    assert "\u27e6" not in text and "missing='median'" in text and "one_hot=True" in text


def test_a_large_drop_is_cautioned_even_when_every_group_loses_alike():
    """Issue 25: 46 % of the rows dropped, about equally from both groups, raised no word."""
    rng = np.random.default_rng(4)
    n = 1_000
    x = rng.normal(size=n)
    x[rng.random(n) < 0.46] = np.nan
    frame = pd.DataFrame({"sex": ["F", "M"] * (n // 2), "x": x, "y": rng.normal(size=n)})
    data = prepare(read_table(frame.to_csv(index=False).encode()), sensitive="sex", missing="drop")
    [warning] = [w for w in data.accounting["warnings"] if "removed" in w]
    lost = n - data.n_rows
    assert f"removed {100 * lost / n:.1f} % of them ({lost:,} of {n:,}; sex=F" in warning
    assert "the audit describes the rows kept" in warning and "--missing median" in render(warning, "cli")
    few = frame.assign(x=np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)))
    assert not prepare(read_table(few.to_csv(index=False).encode()), sensitive="sex", missing="drop").accounting["warnings"]
