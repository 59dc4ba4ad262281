"""The Data page shows what the roles keep before “Use this data”: rows read, used and dropped per
group, features, columns left out with the reason, warnings — the unequal-drop warning with its
remedies at hand —; merges values into groups; lets the user keep an ID-like column; prepares
once per choice; keeps the user's choices while they visit other pages; escapes hostile names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.app.test_app import (
    app,
    choose,
    finding_texts,
    markdown_images_and_html,
    rendered_strings,
    unescaped,
    upload,
    wait_for_runs,
)
from tests.test_accounting import survey


def widget(elements, label_start: str):
    """The widget among ``elements`` (e.g. ``at.selectbox``) whose label starts with ``label_start``."""
    found = [w for w in elements if unescaped(w.label).startswith(label_start)]
    assert found, f"no widget labelled {label_start!r}: {[w.label for w in elements]}"
    return found[0]


def frame_with(at, column: str) -> pd.DataFrame:
    """The page's table (a dataframe, or a table with its Markdown escapes read) that has ``column``."""
    frames = [df.value for df in at.dataframe] + [t.value.reset_index().map(unescaped) for t in at.table]
    frames = [f for f in frames if column in f.columns]
    assert frames, f"no table with a {column!r} column"
    return frames[0]


def warnings_text(at) -> str:
    return " ".join(unescaped(w.value) for w in at.warning)


def upload_survey(at):
    upload(at, "survey.csv", survey())
    choose(at, "Sensitive", ["sex"])
    widget(at.selectbox, "Missing cells").set_value("drop").run()
    assert not at.exception


# ---------------------------------------------------------------- the accounting, before confirming
def test_the_accounting_and_the_unequal_drop_warning_show_before_use():
    at = app().run()
    upload_survey(at)
    assert any("What these roles keep" in h.value for h in at.subheader)
    groups = frame_with(at, "rows read").set_index("group")
    assert groups.loc["sex=boy", ["rows read", "rows used", "dropped: missing cells"]].tolist() == [200, 152, 48]
    assert groups.loc["sex=girl", ["rows read", "rows used", "dropped: missing cells"]].tolist() == [100, 42, 58]
    assert groups.loc["sex=girl", "% dropped"] == 58.0
    warning = next(unescaped(w.value) for w in at.warning if "Rows are lost unequally between the groups" in w.value)
    assert "58.0 % of sex=girl (58 of 100" in warning and "24.0 % of sex=boy (48 of 200)" in warning
    assert "“Missing cells” → “fill feature cells with the column median” (Data page)" in warning  # its own widget's words
    left_out = frame_with(at, "reason").set_index("column")["reason"].to_dict()
    assert left_out == {"sex": "sensitive", "respondent": "ID-like", "school_id": "ID-like", "comment": "text",
                        "wave": "constant", "unused": "empty"}
    shown = unescaped(" ".join(m.value for m in at.markdown))
    assert "Features used (3):** score, hours, income" in shown
    assert at.session_state["data"].source.get("name") != "survey.csv"  # nothing is used until confirmed
    at.button(key="roles-apply").click().run()
    assert at.session_state["data"].source.get("name") == "survey.csv"
    assert at.session_state["data"].group_sizes() == {"sex=boy": 152, "sex=girl": 42}
    assert any("Data ready" in s.value for s in at.success)


def test_missing_cells_stop_with_the_other_choices_at_hand():
    at = app().run()
    upload(at, "survey.csv", survey())
    assert any("106 row(s) have missing cells" in unescaped(e.value) for e in at.error)
    at.button(key="roles-missing-to-drop").click().run()
    assert widget(at.selectbox, "Missing cells").value == "drop"
    assert not at.error and any("Rows are lost unequally between the groups" in w.value for w in at.warning)


def test_the_unequal_drop_warning_offers_its_remedies_right_there():
    at = app().run()
    upload_survey(at)
    at.button(key="roles-fix-median").click().run()
    assert not at.exception
    assert widget(at.selectbox, "Missing cells").value == "median"  # the widget the warning names, changed
    assert "Rows are lost unequally between the groups" not in warnings_text(at)
    groups = frame_with(at, "rows read").set_index("group")
    assert groups["rows used"].tolist() == [200, 100]

    at = app().run()
    upload_survey(at)
    leave_out = at.button(key="roles-fix-leave-out")
    assert "hours" in unescaped(leave_out.label)  # the feature with the most missing cells
    leave_out.click().run()
    assert "hours" in widget(at.multiselect, "Ignore").value
    assert "hours" not in frame_with(at, "rows read").columns
    assert frame_with(at, "rows read").set_index("group").loc["sex=girl", "rows used"] == 100  # its rows are back


# ---------------------------------------------------------------- merging values into groups
def credit_like(seed: int = 0) -> bytes:
    """EDUCATION coded 0–6 like the credit data (1 graduate school, 2 university, 3 high school, …)."""
    rng = np.random.default_rng(seed)
    education = rng.choice([0, 1, 2, 3, 4, 5, 6], size=400, p=[0.01, 0.35, 0.46, 0.15, 0.01, 0.015, 0.005])
    frame = pd.DataFrame({"EDUCATION": education, "LIMIT": rng.normal(5, 1, 400).round(2),
                          "AGE": rng.integers(21, 70, 400), "BILL": rng.normal(3, 2, 400).round(2)})
    return frame.to_csv(index=False).encode()


def test_merging_values_makes_the_groups_and_the_audit_uses_them():
    """Samadi et al.'s credit split: EDUCATION 1 and 2 against every other value."""
    content = credit_like()
    education = pd.read_csv(__import__("io").BytesIO(content))["EDUCATION"]
    at = app().run()
    upload(at, "credit.csv", content)
    choose(at, "Sensitive", ["EDUCATION"])
    assert any(unescaped(e.label).startswith("Merge values into groups — “EDUCATION” (7 values)") for e in at.expander)
    widget(at.multiselect, "Group 1: values").set_value(["1", "2"]).run()
    widget(at.text_input, "Group 1: name").set_value("high").run()
    widget(at.checkbox, "Gather the other 5 values into one group").check().run()
    widget(at.text_input, "Its name").set_value("low").run()
    assert not at.exception
    groups = frame_with(at, "rows read").set_index("group")["rows used"].to_dict()
    high = int(education.isin([1, 2]).sum())
    assert groups == {"EDUCATION=high": high, "EDUCATION=low": 400 - high}
    at.button(key="roles-apply").click().run()
    assert at.session_state["data"].group_sizes() == {"EDUCATION=high": high, "EDUCATION=low": 400 - high}
    at.switch_page("pages/pca.py").run()  # the PCA page audits the data in use on first open
    wait_for_runs(at)
    at.run()
    assert not at.exception
    result = at.session_state["runs"].latest(at.session_state["data-token"])["pca"][0]
    assert set(result.records.group.dropna()) - {""} == {"EDUCATION=high", "EDUCATION=low"}
    assert any("EDUCATION=high" in unescaped(text) for text in finding_texts(at))  # the findings name the merged group


def test_the_small_group_warning_and_error_point_to_the_merge_control():
    content = credit_like()
    at = app().run()
    upload(at, "credit.csv", content)
    choose(at, "Sensitive", ["EDUCATION"])
    text = warnings_text(at)
    assert "Group EDUCATION=0 has only" in text and "“Merge values into groups” for “EDUCATION” (Data page)" in text
    widget(at.number_input, "Minimum group size").set_value(10).run()
    error = " ".join(unescaped(e.value) for e in at.error)
    assert "smaller than the minimum group size of 10" in error and "“Merge values into groups” (Data page)" in error
    widget(at.multiselect, "Group 1: values").set_value(["0", "4", "5", "6"]).run()
    widget(at.text_input, "Group 1: name").set_value("others").run()
    assert not at.error
    groups = frame_with(at, "rows read")["group"].tolist()
    assert groups == ["EDUCATION=others", "EDUCATION=1", "EDUCATION=2", "EDUCATION=3"]
    assert "Group EDUCATION=0 has only" not in warnings_text(at)


def test_a_small_group_of_a_two_valued_column_is_not_told_to_merge():
    rows = "".join(f"{'M' if i < 10 else 'F'},{i % 7},{(i * 3) % 11}\n" for i in range(100))
    at = app().run()
    upload(at, "two.csv", ("sex,a,b\n" + rows).encode())
    choose(at, "Sensitive", ["sex"])
    text = warnings_text(at)
    assert "Group sex=M has only 10 rows" in text and "Merge" not in text  # merging two values leaves one group
    assert "“Minimum group size” (Data page)" in text
    assert not [e for e in at.expander if "Merge values" in e.label]


# ---------------------------------------------------------------- identifiers
def test_an_id_like_column_is_listed_and_can_be_used_as_a_feature():
    at = app().run()
    upload_survey(at)
    keep = widget(at.multiselect, "Use ID-like columns as features")
    assert set(keep.options) == {"respondent", "school_id"} and keep.value == []
    keep.set_value(["school_id"]).run()
    assert not at.exception
    assert "Features used (4):** school_id, score, hours, income" in unescaped(" ".join(m.value for m in at.markdown))
    assert "school_id" not in frame_with(at, "reason")["column"].tolist()
    assert "school_id looks like an identifier and is used as a feature, as you chose" in warnings_text(at)
    at.button(key="roles-apply").click().run()
    data = at.session_state["data"]
    assert data.feature_names == ("school_id", "score", "hours", "income")
    assert any("'school_id' looks like an identifier" in w for w in data.fingerprint()["warnings"])  # the report's
    widget(at.multiselect, "Use ID-like columns as features").set_value([]).run()  # and back
    assert "school_id" in frame_with(at, "reason")["column"].tolist()


# ---------------------------------------------------------------- one preparation per choice
def test_roles_are_prepared_once_per_choice(monkeypatch):
    import fairaudit

    calls = []
    real = fairaudit.prepare
    monkeypatch.setattr(fairaudit, "prepare", lambda *a, **k: calls.append(1) or real(*a, **k))
    at = app().run()
    upload_survey(at)
    before = len(calls)
    at.run()  # a rerun that changes nothing
    assert len(calls) == before
    at.button(key="roles-apply").click().run()  # “Use this data” takes what was prepared
    assert len(calls) == before
    widget(at.selectbox, "Missing cells").set_value("mean").run()
    assert len(calls) == before + 1
    widget(at.selectbox, "Missing cells").set_value("drop").run()  # back to the previous choice: kept
    assert len(calls) == before + 1


# ---------------------------------------------------------------- the user's choices stay
def test_the_choices_stay_when_the_user_visits_another_page():
    at = app().run()
    upload(at, "credit.csv", credit_like())
    choose(at, "Sensitive", ["EDUCATION"])
    widget(at.multiselect, "Group 1: values").set_value(["1", "2"]).run()
    widget(at.selectbox, "Scaling").set_value("center").run()
    at.button(key="roles-apply").click().run()
    at.switch_page("pages/report.py").run()
    at.switch_page("pages/data.py").run()
    assert not at.exception
    assert at.radio(key="data-source").value == "Upload a file (CSV or Parquet)"
    assert any("Preview of credit" in h.value for h in at.subheader)  # the upload, not the sample
    assert widget(at.multiselect, "Group 1: values").value == ["1", "2"]
    assert widget(at.selectbox, "Scaling").value == "center"
    assert any("Data ready" in s.value for s in at.success)  # the roles shown are the data in use


def test_reading_options_read_the_upload_again():
    at = app().run()
    upload(at, "titled.csv", b"Survey of 2024, exported by hand\n" + survey())
    widget(at.number_input, "Lines to skip before the header").set_value(1).run()
    assert not at.exception
    assert "respondent" in widget(at.multiselect, "Ignore").options  # the header is the second line now


# ---------------------------------------------------------------- hostile names
@pytest.mark.parametrize("evil", ["![x](http://host/p.png)", "<img src=x onerror=alert(1)>"])
def test_hostile_column_names_and_values_render_as_text(evil):
    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame({
        evil: np.array([evil, "plain", "other"])[np.arange(n) % 3],
        f"{evil} id": np.arange(n) + 1,
        f"{evil} x": rng.normal(size=n),
        "y": np.where(np.arange(n) % 4 == 0, np.nan, rng.normal(size=n)),
    })
    at = app().run()
    upload(at, "hostile.csv", frame.to_csv(index=False).encode())
    choose(at, "Sensitive", [evil])
    widget(at.multiselect, "Group 1: values").set_value([evil]).run()
    widget(at.selectbox, "Missing cells").set_value("drop").run()
    assert not at.exception
    strings = rendered_strings(at)
    assert any(evil in unescaped(s) for s in strings)  # the name is shown...
    for s in strings:
        assert not markdown_images_and_html(s), s  # ...as text, never as an image or HTML
    assert at.table, "the columns left out are a Markdown table"
    for table in at.table:  # its cells render Markdown too
        for cell in [*table.value.index, *table.value.to_numpy().ravel()]:
            assert not markdown_images_and_html(str(cell)), cell
    assert f"{evil} id" in frame_with(at, "reason")["column"].tolist()
