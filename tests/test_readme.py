"""Every command the README shows runs as written on a fresh clone (the embedded samples only;
examples that need ../shared are marked optional in the README and skipped here)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from fairaudit.cli import main

REPO = Path(__file__).resolve().parents[1]
PREFIX = ".venv/bin/python -m fairaudit "


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.strip()
            if command.startswith(PREFIX):
                commands.append(command[len(PREFIX):])
    return commands


def test_the_readme_shows_commands():
    commands = readme_commands()
    assert len(commands) >= 4 and any("audit sample_data/two_groups.csv" in c for c in commands)
    assert all("../shared" not in c for c in commands if "sample_data" in c)


@pytest.mark.parametrize("command", [c for c in readme_commands() if "../shared" not in c])
def test_a_readme_command_runs_as_written(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample_data").symlink_to(REPO / "sample_data")
    code = main(shlex.split(command))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    if "two_groups.csv" in command:  # the sample's label is its label, not a feature (as in the dashboard)
        data = json.loads((tmp_path / "report.json").read_text())["data"]
        assert "outcome" not in data["feature_names"] and data["label"] == "outcome"
