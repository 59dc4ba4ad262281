"""Regenerate tests/reading_corpus_expected.json: the messages of the pre-Arrow reader.

Run against the old reader (fairaudit/data.py at commit 9821a12), for example::

    mkdir -p /tmp/old-reader && git archive 9821a12 fairaudit | tar -x -C /tmp/old-reader
    PYTHONPATH=/tmp/old-reader python tests/tools/make_reading_corpus.py

The file records what that reader said for every case in tests/reading_corpus.py; the new
reader is tested against it (tests/test_reading.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(HERE))

from reading_corpus import CASES, outcome  # noqa: E402  (the tests folder is put on the path first)

if __name__ == "__main__":
    expected = {case.id: outcome(case) for case in CASES}
    path = HERE / "reading_corpus_expected.json"
    path.write_text(json.dumps(expected, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(expected)} cases to {path}")
