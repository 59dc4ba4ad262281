"""The dashboard server's settings (``.streamlit/config.toml``, read by ``make app``): every key one
Streamlit knows (a misspelt or retired key is ignored without a word), and the settings that keep
it local, quiet and fast while an audit runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import streamlit.config

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


def _settings() -> dict[str, object]:
    table = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    return {f"{section}.{key}": value for section, keys in table.items() for key, value in keys.items()}


def test_every_key_is_one_streamlit_knows():
    known = set(streamlit.config.get_config_options())
    unknown = sorted(set(_settings()) - known)
    assert not unknown, f"Streamlit ignores these keys of {CONFIG.name}: {unknown}"


def test_local_quiet_and_no_collection_after_every_script_run():
    settings = _settings()
    assert settings["server.address"] == "localhost"
    assert settings["browser.gatherUsageStats"] is False
    assert settings["client.showErrorDetails"] == "none"
    assert settings["runner.magicEnabled"] is False
    # a full collection after every fragment rerun took a third of a core from the replicates (docs/architecture.md)
    assert settings["runner.postScriptGC"] is False
