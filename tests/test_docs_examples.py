"""The end-to-end examples of ``docs/erasure.md``, ``docs/pipelines.md`` and ``docs/subgroups.md`` run as written.

Each ```python block runs in a fresh namespace; each ```bash block's ``.venv/bin/python -m
fairaudit …`` commands run in order through the CLI's ``main`` in a fresh folder (the embedded
samples' paths made absolute), and must exit with 0."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import sklearn

from fairaudit.cli import main

REPO = Path(__file__).resolve().parents[1]
PAGES = ("docs/erasure.md", "docs/pipelines.md", "docs/subgroups.md")
PREFIX = ".venv/bin/python -m fairaudit "


def _blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        found += [(page, index, block) for index, block in enumerate(re.findall(rf"```{language}\n(.*?)```", text, flags=re.S))]
    return found


@pytest.mark.parametrize(("page", "index", "code"), _blocks("python"), ids=lambda v: str(v)[:24] if isinstance(v, str) else str(v))
def test_python_example(page, index, code, capsys):
    try:
        exec(compile(code, f"{page}[{index}]", "exec"), {"__name__": "__docs__"})
    finally:
        sklearn.set_config(enable_metadata_routing=False)
    assert capsys.readouterr().out  # every example prints what it shows


@pytest.mark.parametrize(("page", "index", "script"), _blocks("bash"), ids=lambda v: str(v)[:24] if isinstance(v, str) else str(v))
def test_bash_example(page, index, script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    commands = [line.strip() for line in script.replace("\\\n", " ").splitlines() if line.strip().startswith(PREFIX)]
    assert commands
    for command in commands:
        argv = [part.replace("sample_data/", f"{REPO}/sample_data/") for part in shlex.split(command[len(PREFIX):])]
        assert main([*argv, "--quiet"] if argv[0] == "audit" else argv) == 0, (command, capsys.readouterr().err)
