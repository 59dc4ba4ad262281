"""The CLI's checks apply to the action commands and flags too (issue 12's hygiene on issue 14's
commands): ``transform``, ``compare``, ``audit --export-model/--components/--embedding``. Every
refusal happens before any work, ends with exit 2 and one line on stderr, leaves the inputs
byte-identical and nothing behind; the audit's progress (your representation's fits included) goes
to stderr; ``--quiet`` silences the summaries; CSV cells a spreadsheet would run as a formula are
neutralised. (``transform`` and ``compare`` print no progress: their time is reading and checking
the input, and a refusal must stay one line.)"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from fairaudit.cli import main

from .conftest import disk_full_for

SMALL = "sex,age,income,score\n" + "".join(f"{'FM'[i % 2]},{20 + i % 17},{100 + (7 * i) % 23},{i % 5}\n" for i in range(40))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A small audit's models and JSON report (written once for the module)."""
    root = tmp_path_factory.mktemp("exported")
    data = root / "data.csv"
    data.write_text(SMALL, encoding="utf-8")
    code = main(["audit", str(data), "--sensitive", "sex", "--ranks", "1:2", "--variants", "vanilla,fair_eig",
                 "--export-model", str(root / "models"), "--json", str(root / "before.json"), "--quiet"])
    assert code == 0
    code = main(["audit", str(data), "--sensitive", "sex", "--ranks", "1:3", "--variants", "vanilla,fair_eig",
                 "--json", str(root / "after.json"), "--quiet"])
    assert code == 0
    return root


def _snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _refused(capsys, argv: list[str], folder: Path, message: str) -> None:
    before = _snapshot(folder)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (argv, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("fairaudit: error: ") and "Traceback" not in err, err
    assert message in err, err
    assert _snapshot(folder) == before, "a refusal changed or left a file"
    assert not list(folder.rglob(".fairaudit-probe-*"))


# (id, argv with {root}, text the one-line error holds)
TRANSFORM = [
    ("out is the input", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out", "{root}/data.csv"], "is the input file"),
    ("out is the model's manifest", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out",
                                     "{root}/models/pca-vanilla-rank2/manifest.json"], "is an input file"),
    ("out is a folder", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out", "{root}"], "is a folder"),
    ("out below a file", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out", "{root}/data.csv/x.csv"],
     "is a file, not a folder"),
    ("out on a read-only file system", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out", "/proc/scores.csv"],
     "cannot be written"),
    ("data is missing", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/nope.csv", "--out", "{root}/s.csv"], "no such file"),
    ("data is a folder", ["transform", "{root}/models/pca-vanilla-rank2", "{root}", "--out", "{root}/s.csv"], "is a folder"),
    ("model is not a model", ["transform", "{root}", "{root}/data.csv", "--out", "{root}/s.csv"], "model"),
    ("unknown ID column", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out", "{root}/s.csv", "--id", "who"],
     "--id"),
]
COMPARE = [
    ("html is an input", ["compare", "{root}/before.json", "{root}/after.json", "--html", "{root}/after.json"], "is an input file"),
    ("two outputs on one path", ["compare", "{root}/before.json", "{root}/after.json", "--json", "{root}/o.txt", "--csv", "{root}/o.txt"],
     "both name"),
    ("report is missing", ["compare", "{root}/before.json", "{root}/nope.json"], "no such file"),
    ("report is a folder", ["compare", "{root}/before.json", "{root}"], "is a folder"),
    ("report is a CSV", ["compare", "{root}/before.json", "{root}/data.csv"], "not valid JSON"),
    ("one name", ["compare", "{root}/before.json", "{root}/after.json", "--names", "one"], "--names before,after"),
    ("equal names", ["compare", "{root}/before.json", "{root}/after.json", "--names", "x,x"], "different names"),
    ("negative --top", ["compare", "{root}/before.json", "{root}/after.json", "--top", "-1"], "--top"),
]
AUDIT = [
    ("export folder is a file", ["--export-model", "{root}/data.csv"], "is a file; give a folder"),
    ("export folder on a read-only file system", ["--export-model", "/proc/fairaudit-models"], "cannot be written"),
    ("export would overwrite an output", ["--export-model", "{root}/ex", "--json", "{root}/ex/models.json"], "would write over"),
    ("export rank without export", ["--export-rank", "2"], "--export-model DIR"),
    ("export rank not understood", ["--export-model", "{root}/ex", "--export-rank", "two"], "--export-rank two"),
    ("components file missing", ["--components", "{root}/nope.csv"], "no such file"),
    ("embedding is a folder", ["--embedding", "{root}"], "is a folder"),
    ("csv output is the components file", ["--components", "{root}/comp.csv", "--csv", "{root}/comp.csv"], "is an input file"),
    ("components name unknown features", ["--components", "{root}/foreign.csv"], "missing 'score'"),
]


@pytest.mark.parametrize("label,argv,message", [pytest.param(*case, id=case[0]) for case in TRANSFORM + COMPARE])
def test_action_commands_refuse_before_any_work(exported, tmp_path, capsys, label, argv, message):
    _refused(capsys, [a.replace("{root}", str(exported)) for a in argv], exported, message)


@pytest.mark.parametrize("label,extra,message", [pytest.param(*case, id=case[0]) for case in AUDIT])
def test_audit_action_flags_refuse_before_any_work(monkeypatch, tmp_path, capsys, label, extra, message):
    from fairaudit import cli

    def no_audit(*args, **kwargs):  # the refusal must come before the audit starts
        raise AssertionError("the audit ran")

    monkeypatch.setattr(cli, "run_audit", no_audit)
    (tmp_path / "data.csv").write_text(SMALL, encoding="utf-8")
    (tmp_path / "comp.csv").write_text("age,income,score\n1,0,0\n0,1,0\n", encoding="utf-8")
    (tmp_path / "foreign.csv").write_text("age,income,height\n1,0,0\n0,1,0\n", encoding="utf-8")
    argv = ["audit", str(tmp_path / "data.csv"), "--sensitive", "sex", "--ranks", "1:2"]
    _refused(capsys, argv + [a.replace("{root}", str(tmp_path)) for a in extra], tmp_path, message)


def test_transform_summary_quiet_silences_it_and_formula_ids_are_neutralised(exported, tmp_path, capsys):
    rows = tmp_path / "new.csv"
    rows.write_text("who,sex,age,income,score\n=cmd(),F,20,100,1\n@x,M,21,101,2\nplain,F,22,102,3\n", encoding="utf-8")
    out = tmp_path / "scores.csv"
    model = str(exported / "models" / "pca-fair_eig-rank2")
    assert main(["transform", model, str(rows), "--out", str(out), "--id", "who"]) == 0
    stdout, err = capsys.readouterr()
    assert err == "" and "3 rows read, 3 transformed" in stdout and f"wrote {out}" in stdout
    cells = [row[0] for row in csv.reader(io.StringIO(out.read_text()))]
    assert cells == ["who", "'=cmd()", "'@x", "plain"]
    assert main(["transform", model, str(rows), "--out", str(tmp_path / "q.csv"), "--id", "who", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["transform", model, str(rows), "--out", "-", "--quiet"]) == 0  # standard output: the CSV only
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "line,pc1,pc2" and len(printed.splitlines()) == 4


def test_compare_csv_neutralises_formula_cells_and_quiet_silences_it(tmp_path, capsys):
    data = tmp_path / "data.csv"
    data.write_text("=" + SMALL, encoding="utf-8")  # group labels (=sex=F) a spreadsheet would run
    for name, ranks in (("a.json", "1"), ("b.json", "1:2")):
        assert main(["audit", str(data), "--sensitive", "=sex", "--ranks", ranks, "--variants", "vanilla", "--json",
                     str(tmp_path / name), "--quiet"]) == 0
    out = tmp_path / "diff.csv"
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--csv", str(out)]) == 0
    stdout, err = capsys.readouterr()
    assert err == "" and f"wrote {out}" in stdout
    cells = [cell for row in csv.reader(io.StringIO(out.read_text())) for cell in row]
    assert "'=sex=F" in cells and not any(c.startswith(("=", "@", "+")) for c in cells)
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_audit_progress_covers_your_representation(tmp_path, capsys):
    data = tmp_path / "data.csv"
    data.write_text(SMALL, encoding="utf-8")
    comp = tmp_path / "comp.csv"
    comp.write_text("age,income,score\n" + "\n".join(",".join(map(str, row)) for row in np.eye(3)[:2]) + "\n", encoding="utf-8")
    assert main(["audit", str(data), "--sensitive", "sex", "--ranks", "1:2", "--variants", "vanilla", "--components", str(comp)]) == 0
    out, err = capsys.readouterr()
    assert "and your components" in err.splitlines()[0]
    assert any("(yours, rank 2)" in line for line in err.splitlines())
    assert "yours (pca):" in out


def test_a_failed_export_leaves_nothing(monkeypatch, tmp_path, capsys):
    disk_full_for(monkeypatch, lambda path: path.name == "models.json")
    data = tmp_path / "data.csv"
    data.write_text(SMALL, encoding="utf-8")
    code = main(["audit", str(data), "--sensitive", "sex", "--ranks", "1", "--variants", "vanilla", "--json", str(tmp_path / "r.json"),
                 "--export-model", str(tmp_path / "models"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and len(err.splitlines()) == 1
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "data.csv"]
    assert leftovers == []


def test_exported_index_lists_the_models(exported):
    index = json.loads((exported / "models" / "models.json").read_text())
    assert sorted(m["path"] for m in index["models"]) == sorted(
        f"pca-{v}-rank{r}" for v in ("vanilla", "fair_eig") for r in (1, 2))
