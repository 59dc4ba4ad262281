"""Every command the README and the user guide (docs/guide.md) show runs as written on a fresh clone
(the embedded samples only; examples that need ../shared are marked optional and skipped here).

A ```bash block is a script: its commands run in order in one fresh folder (a later command may
read what an earlier one wrote, e.g. ``transform`` the model an ``audit --export-model`` wrote).
``.venv/bin/python -m fairaudit …`` runs through the CLI's ``main``; ``.venv/bin/python -c …``
(e.g. making a components file with scikit-learn) runs with this interpreter."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fairaudit.cli import main

REPO = Path(__file__).resolve().parents[1]
PYTHON = ".venv/bin/python "
PREFIX = PYTHON + "-m fairaudit "


DOCUMENTS = ("README.md", "docs/guide.md")


def readme_blocks() -> list[list[str]]:
    """The commands of each ```bash block of :data:`DOCUMENTS` that call the checkout's Python, in order."""
    text = "\n".join((REPO / name).read_text(encoding="utf-8") for name in DOCUMENTS)
    blocks = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        commands = [line.strip() for line in block.replace("\\\n", " ").splitlines()]
        commands = [c for c in commands if c.startswith(PYTHON)]
        if commands:
            blocks.append(commands)
    return blocks


def readme_commands() -> list[str]:
    return [c[len(PREFIX):] for block in readme_blocks() for c in block if c.startswith(PREFIX)]


def test_the_readme_shows_commands():
    commands = readme_commands()
    assert len(commands) >= 4 and any("audit sample_data/two_groups.csv" in c for c in commands)
    assert all("../shared" not in c for c in commands if "sample_data" in c)
    for name in ("transform", "compare"):
        assert any(c.startswith(name + " ") for c in commands), name


def _json_output(argv: list[str]) -> str | None:
    return argv[argv.index("--json") + 1] if "--json" in argv else None


@pytest.mark.parametrize(
    "block", [b for b in readme_blocks() if not any("../shared" in c for c in b)], ids=lambda b: b[0][len(PYTHON):][:60]
)
def test_a_readme_block_runs_as_written(block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample_data").symlink_to(REPO / "sample_data")
    for command in block:
        if not command.startswith(PREFIX):
            argv = shlex.split(command)[1:]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, (command, proc.stderr)
            continue
        argv = shlex.split(command[len(PREFIX):])
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, (command, err)
        assert "Traceback" not in err
        if argv[0] == "audit" and "two_groups.csv" in argv[1] and _json_output(argv):
            # the sample's label is its label, not a feature (as in the dashboard)
            data = json.loads((tmp_path / _json_output(argv)).read_text())["data"]
            assert "outcome" not in data["feature_names"] and data["label"] == "outcome", command
