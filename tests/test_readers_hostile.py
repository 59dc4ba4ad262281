"""Hostile model, report and representation files (issue 27, items 2–5), through the command line.

Every case of ``tests/hostile_files.py`` ends in exit 0 or 2 — never 1, "a bug in fairaudit" —,
with one line on stderr when refused, within 10 seconds, leaving every file of the corpus
byte-identical. All cases run in one child process (``main`` called once per case, as the command
line does), whose peak memory (``VmHWM``) stays below 600 MB: each case's own peak is at most
that. The child runs under an address-space limit, so a reader that regressed cannot take the
machine's memory while the test finds out."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .hostile_files import build

REPO = Path(__file__).resolve().parents[1]
PEAK_MB = 600
SECONDS = 10

CHILD = r"""
import contextlib, io, json, resource, signal, sys, time
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # a regression stops here, not in the machine's swap
from fairaudit.cli import main

def peak_mb():
    # the peak of this process's own memory (VmHWM): ru_maxrss would carry over, through exec, the
    # resident size of the process that started it
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))

def timeout(*_):
    raise TimeoutError("no answer within the time limit")

signal.signal(signal.SIGALRM, timeout)
out = []
for argv in json.load(sys.stdin):
    stdout, stderr = io.StringIO(), io.StringIO()
    began = time.perf_counter()
    signal.alarm(SECONDS)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
    except BaseException as exc:  # a hang, or what main let through
        code, stderr = f"{type(exc).__name__}: {exc}", io.StringIO(stderr.getvalue())
    finally:
        signal.alarm(0)
    out.append({"code": code, "out": stdout.getvalue(), "err": stderr.getvalue(), "seconds": time.perf_counter() - began,
                "peak_mb": peak_mb()})
print(json.dumps(out))
"""


def _digests(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    cases = build(root)
    before = _digests(root)
    argvs = [[a.replace("{root}", str(root)) for a in case.argv] + (["--quiet"] if case.quiet else []) for case in cases]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD.replace("SECONDS", str(SECONDS))], input=json.dumps(argvs), capture_output=True,
                          text=True, env=env, timeout=900, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    written = {path for path in _digests(root) if path not in before}
    return root, cases, results, before, written


def test_the_corpus_is_large():
    """The issue's cases and as many again of the same kind."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        cases = build(Path(folder))
    kinds = {case.id.split(":")[0] for case in cases}
    assert len(cases) >= 90 and kinds == {"model", "zip", "output", "export", "report", "yours"}, (len(cases), kinds)


def test_every_hostile_file_ends_in_exit_0_or_2_with_one_clear_line(corpus):
    root, cases, results, _, _ = corpus
    failures = []
    for case, result in zip(cases, results, strict=True):
        code, out, err = result["code"], result["out"], result["err"]
        problems = []
        if code != case.status:
            problems.append(f"exit {code}, expected {case.status}")
        if "bug in fairaudit" in err or "Traceback" in err:
            problems.append("a bug message")
        if code == 2 and not (len(err.strip().splitlines()) == 1 and err.startswith("fairaudit: error: ")):
            problems.append("not one line on stderr")
        shown = err if case.status == 2 else out
        if case.message not in shown:
            problems.append(f"{case.message!r} not said")
        problems += [f"{text!r} printed" for text in case.absent if text in out + err]
        if result["seconds"] > SECONDS:
            problems.append(f"{result['seconds']:.1f} s")
        if problems:
            failures.append(f"{case.id}: {'; '.join(problems)} — {(err or out).strip()[:300]}")
    assert not failures, "\n".join(failures)


def test_no_hostile_file_takes_600_mb(corpus):
    _, cases, results, _, _ = corpus
    over = [(case.id, result["peak_mb"]) for case, result in zip(cases, results, strict=True) if result["peak_mb"] >= PEAK_MB]
    assert not over, f"the child's peak passed {PEAK_MB} MB at {over[0][0]} ({over[0][1]:.0f} MB)"
    assert max(r["peak_mb"] for r in results) < PEAK_MB


def test_no_input_changes_and_refusals_leave_nothing(corpus):
    root, cases, results, before, written = corpus
    assert {path: digest for path, digest in _digests(root).items() if path in before} == before
    expected = {str(root / "out.csv"), str(root / "compared.json")}  # what the cases that succeed write
    assert written <= expected, written - expected
    assert not list(root.rglob(".fairaudit-probe-*")) and not list(root.rglob(".*.tmp*"))


def test_a_closed_standard_output_ends_quietly(tmp_path):
    """``compare a b | head -1``, ``transform … --out - | head``: the reader is gone before the
    first line; the command stops without a word and with the status of a program SIGPIPE ends."""
    from .hostile_files import DATA

    (tmp_path / "data.csv").write_text(DATA, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = [sys.executable, "-m", "fairaudit"]
    subprocess.run([*base, "audit", str(tmp_path / "data.csv"), "--sensitive", "sex", "--ranks", "1:2", "--json", str(tmp_path / "a.json"),
                    "--export-model", str(tmp_path / "m"), "--quiet"], check=True, env=env, timeout=300)
    for argv in (["compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")],
                 ["transform", str(tmp_path / "m" / "pca-vanilla-rank1"), str(tmp_path / "data.csv"), "--out", "-"],
                 ["audit", str(tmp_path / "data.csv"), "--sensitive", "sex", "--ranks", "1"]):
        child = subprocess.Popen([*base, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        child.stdout.close()  # nobody reads: the first write meets a closed pipe
        err = child.stderr.read().decode()
        assert child.wait(timeout=300) == 141, (argv, child.returncode, err)
        said = [line for line in err.splitlines() if not line.startswith(("fairaudit: auditing", "fairaudit: pca done", "["))]
        assert said == [], (argv, err)  # the audit's progress, and not a word more
