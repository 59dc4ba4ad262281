"""The command line: success writes JSON/CSV/HTML; every bad input exits 2 with one specific line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fairaudit.cli import main, parse_ranks
from fairaudit.samples import DEFAULT_FOLDER

SAMPLE = str(DEFAULT_FOLDER / "two_groups.csv")
GOOD = "sex,age,income,score\n" + "".join(f"{'FM'[i % 2]},{20 + i},{100 + 3 * i % 17},{i % 5}\n" for i in range(30))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, text, name="data.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def test_audit_writes_json_csv_and_html(tmp_path, capsys):
    out_json, out_csv, out_html = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "r.html"
    code, out, err = run(
        capsys, "audit", SAMPLE, "--sensitive", "group", "--ranks", "1:3", "--variants", "vanilla,fair_eig",
        "--json", str(out_json), "--csv", str(out_csv), "--html", str(out_html),
    )
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["data"]["name"] == "two_groups.csv"
    assert {r["variant"] for r in payload["records"]} == {"vanilla", "fair_eig"}
    assert out_csv.read_text().startswith("method,variant,rank,group,metric,value")
    assert "<html" in out_html.read_text()[:200]
    assert "findings (verdict, family, variant, rank, groups" in out and "\nINFO        pca  vanilla " in out  # one line per finding


QUIET_RUNS = {
    "pca": ["--bootstrap", "20"],
    "fs": [],
    "nmf": ["--ranks", "1:3"],
}
"""The families of the default sample that run in seconds (the suite's default: no intervals; PCA
with a few replicates, so that its verdicts are real)."""


@pytest.mark.parametrize("method", list(QUIET_RUNS))
def test_the_default_output_is_short_and_names_every_findings_verdict(tmp_path, capsys, method):
    """The quiet default: the data accounting, one line per finding (its verdict, family, variant,
    rank), the files written and one notes line — within 40 lines; ``--verbose`` adds the rest."""
    from fairaudit.findings import VERDICT_LABELS

    report = tmp_path / "r.json"
    argv = ["audit", SAMPLE, "--sensitive", "group", "--methods", method, *QUIET_RUNS[method], "--json", str(report)]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) <= 40, out
    found = json.loads(report.read_text())["findings"]
    assert found
    for finding in found:
        verdict = VERDICT_LABELS[finding["verdict"]].split(":")[0].upper()
        head = f"{verdict:<11} {method:<4} {finding['variant'] or '':<15} " + (f"rank {finding['rank']:<3}" if finding["rank"] else "")
        assert any(line.startswith(head) for line in lines), (head, out)
    if method == "pca":
        assert {f["verdict"] for f in found} >= {"gap", "mitigated"}  # real verdicts, not only statements
        gap = next(line for line in lines if line.startswith("GAP         pca  vanilla "))
        assert "group=B vs group=A  loss " in gap and "95 % " in gap and "p<0.001" in gap
    assert lines[-2].startswith("notes: ") and "see --verbose" in lines[-2] and lines[-1] == f"wrote {report}"
    assert "warning: pca: no interval" not in out and "verdict rules (" not in out and "[pca]" not in out
    code, verbose, err = run(capsys, *argv, "-v")
    assert code == 0, err
    assert f"[{method}]" in verbose and f"finding ({method}, " in verbose and "notes: " not in verbose
    assert ("verdict rules" in verbose) == any(f["verdict"] != "info" for f in found)


def test_label_and_skip_rows_are_accepted(tmp_path, capsys):
    path = write(tmp_path, "exported by some tool\n" + GOOD.replace("score", "label"))
    code, out, err = run(capsys, "audit", path, "--skip-rows", "1", "--sensitive", "sex", "--label", "label", "--ranks", "1", "--quiet")
    assert code == 0, err
    assert out == ""


def test_columns_command(capsys):
    code, out, _ = run(capsys, "columns", SAMPLE)
    assert code == 0 and "group" in out and "numeric" in out


BAD_INPUTS = [
    ("empty file", "", [], "is empty"),
    ("header only", "sex,age,income\n", [], "header but no data rows"),
    ("one group", "sex,age,income\n" + "F,1,2\nF,2,3\nF,3,1\n", [], "single group"),
    ("one-row group", "sex,age,income\n" + "F,1,2\nF,2,3\nM,3,1\nF,5,5\n", [], "'sex=M' (1 row)"),
    ("text cell in a feature", GOOD.replace("22,", "abc,", 1), [], "text 'abc' at line"),
    ("NaN cells", GOOD.replace(",103,", ",NaN,", 1), [], "missing cells"),
    ("rank 0", GOOD, ["--ranks", "0"], "below 1"),
    ("rank above #features", GOOD, ["--ranks", "1:9"], "larger than the data allows"),
    ("duplicate column names", GOOD.replace("score", "age", 1), [], "both named 'age'"),
    ("unknown column", GOOD, ["--features", "age,wage"], "'wage' is not in"),
    ("malformed CSV", GOOD + "F,1,2,3,4\n", [], "fields but the header has 4"),
    ("non-UTF-8 file", GOOD.encode("utf-16"), [], "UTF-16"),
    ("file over the size limit", GOOD, ["--max-mb", "0.0001"], "above the"),
    ("bad rank syntax", GOOD, ["--ranks", "one:two"], "not understood"),
    ("missing --sensitive value", GOOD, ["--sensitive"], "expected one argument"),
]


@pytest.mark.parametrize("label,content,extra,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_exits_2_with_one_specific_line(tmp_path, capsys, label, content, extra, message):
    path = write(tmp_path, content)
    argv = ["audit", path, "--sensitive", "sex", "--variants", "vanilla", *extra]
    code, out, err = run(capsys, *argv)
    assert code == 2, (label, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fairaudit: error: ")
    assert message in lines[0], lines[0]
    assert "Traceback" not in err


def test_real_process_exit_status_and_no_traceback(tmp_path):
    path = write(tmp_path, "sex,age\nF,1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "fairaudit", "audit", path, "--sensitive", "sex"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_parse_ranks():
    assert parse_ranks("1:4") == [1, 2, 3, 4]
    assert parse_ranks("2,4,8") == [2, 4, 8]
    assert parse_ranks("1:9:4") == [1, 5, 9]


def test_the_verdict_rules_are_printed_once_per_setting_the_families_used():
    """A result of families audited apart with different tolerances (the dashboard's pages) prints
    each setting's rules with its families, not the first family's rules for all."""
    import io

    from fairaudit.audit import AuditConfig, combine_results, run_audit
    from fairaudit.cli import _print_findings
    from fairaudit.findings import findings
    from fairaudit.samples import load_sample

    data = load_sample("two_groups")
    pca = run_audit(data, AuditConfig(methods=("pca",), ranks=(1, 3), variants="vanilla", bootstrap=10, flag_ratio=1.25))
    fs = run_audit(data, AuditConfig(methods=("fs",), ranks=(2,), variants="lapscore", bootstrap=10, flag_ratio=1.5, confidence=0.9))
    result = combine_results([pca, fs])
    out = io.StringIO()
    _print_findings(result, findings(result), out, verbose=True)
    heads = [line for line in out.getvalue().splitlines() if line.startswith("verdict rules")]
    assert heads == ["verdict rules (pca: tolerance 1.25, confidence 95 %, groups of at least 30 rows judged):",
                     "verdict rules (fs: tolerance 1.50, confidence 90 %, groups of at least 30 rows judged):"]


# ---------------------------------------------------------------- the families' flags without their packages
FAMILY_PACKAGES = ("fairaudit.nmf", "fairaudit.fs", "fairaudit.cpd", "fairaudit.yours", "fairaudit.engine.dask_engine")


def test_a_pca_audit_imports_no_other_family(tmp_path):
    """The parser declares every family's flags without importing the families: a PCA audit (in its
    own process, as a user runs it) loads neither the other families nor the dask engine."""
    path = write(tmp_path, GOOD)
    script = (
        "import sys\nfrom fairaudit.cli import main\n"
        f"code = main(['audit', {path!r}, '--sensitive', 'sex', '--ranks', '1:2', '--bootstrap', '0', '--quiet', "
        f"'--json', {str(tmp_path / 'out.json')!r}])\n"
        f"print(code, sorted(name for name in sys.modules if name.startswith({FAMILY_PACKAGES!r})))"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["0", "[]"], proc.stdout + proc.stderr


def test_help_lists_every_familys_options_with_the_familys_own_choices_and_defaults(capsys):
    from fairaudit.cpd._kernels import NYSTROM_LANDMARKS
    from fairaudit.cpd.estimator import FORMULATIONS as CPD_FORMULATIONS
    from fairaudit.cpd.estimator import KERNELS
    from fairaudit.fs.audit import KMEANS_RUNS
    from fairaudit.fs.fufs import FORMULATIONS as FUFS_FORMULATIONS
    from fairaudit.nmf._standard import SOLVERS
    from fairaudit.nmf.audit import AUDIT_INITS, FAIR_STOPPING_RULES, MU_WEIGHTS, NMF_SCALINGS, STOPPING_RULES, ZERO_ROW_POLICIES
    from fairaudit.pca.audit import DEFAULT_OPTIONS
    from fairaudit.pca.jevd import SOLVERS as JEVD_SOLVERS

    with pytest.raises(SystemExit) as done:
        main(["audit", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag, choices in (
        ("--jevd-solver", JEVD_SOLVERS), ("--zero-rows", ZERO_ROW_POLICIES), ("--nmf-scaling", NMF_SCALINGS),
        ("--nmf-solver", SOLVERS), ("--nmf-stopping", STOPPING_RULES), ("--fair-nmf-stopping", FAIR_STOPPING_RULES),
        ("--fair-nmf-weights", MU_WEIGHTS), ("--fair-nmf-init", AUDIT_INITS), ("--fufs-formulation", FUFS_FORMULATIONS),
        ("--cpd-formulation", CPD_FORMULATIONS), ("--cpd-kernel", KERNELS),
    ):
        assert f"{flag} {{{','.join(choices)}}}" in text, flag
    assert f"(default {KMEANS_RUNS}, as the FUFS paper)" in text
    assert f"Nyström kernel (default {NYSTROM_LANDMARKS})" in text
    assert f"JEVD-PCA's scheme (default {DEFAULT_OPTIONS['jevd_solver']}:" in text
    for flag in ("--fufs-alpha", "--nmf-estimates", "--am-max-cells", "--cpd-lambda frontier|reference|paper|VALUE", "--cpd-lambdas",
                 "--cpd-jobs", "--clusters", "--kmeans-runs"):
        assert flag in text, flag
    assert "(written when shown)" not in text  # every deferred help text was written


def test_a_family_flags_bad_value_names_the_familys_choices(capsys):
    from fairaudit.nmf._standard import SOLVERS

    code, _, err = run(capsys, "audit", SAMPLE, "--sensitive", "group", "--nmf-solver", "bad")
    assert code == 2
    assert err == f"fairaudit: error: argument --nmf-solver: invalid choice: 'bad' (choose from {', '.join(map(repr, SOLVERS))}) (see --help)\n"


def test_a_reference_group_from_the_command_line(capsys):
    """``--reference`` takes a group (its label or the value part of it); an unknown or too-small
    one stops before any fit with one line naming the groups that can be the reference."""
    code, out, err = run(capsys, "audit", SAMPLE, "--sensitive", "group", "--ranks", "1:2", "--variants", "vanilla",
                         "--bootstrap", "10", "--reference", "B", "--quiet")
    assert code == 0, err
    code, out, err = run(capsys, "audit", SAMPLE, "--sensitive", "group", "--ranks", "1:2", "--variants", "vanilla",
                         "--bootstrap", "10", "--reference", "B", "--verbose")
    assert code == 0 and "group=B (reference)" in out and "  · Compared with group=B, the reference you chose (--reference)." in out
    code, out, err = run(capsys, "audit", SAMPLE, "--sensitive", "group", "--reference", "C")
    assert code == 2 and not out and err.count("\n") == 1
    assert "--reference C is not one of the groups; the groups large enough to be the reference: group=A (480 rows), group=B (120 rows)" in err
    code, out, err = run(capsys, "audit", SAMPLE, "--sensitive", "group", "--reference", "B", "--min-judged-rows", "200")
    assert code == 2 and "group group=B has 120 rows, fewer than the 200 needed to judge it (--min-judged-rows 200)" in err
