"""The HTML report is self-contained (no network) and user text in it is inert."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from fairaudit import prepare, read_table
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.report import render_html, report_zip

EVIL_COLUMN = "<script>alert(1)</script>"
EVIL_GROUP = '<img src=x onerror="alert(2)">'


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def evil_report():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "who": rng.choice([EVIL_GROUP, "plain"], 120),
            EVIL_COLUMN: rng.normal(size=120),
            "x": rng.normal(size=120),
            "y": rng.normal(size=120),
        }
    )
    table = read_table(frame.to_csv(index=False).encode(), name='"><script>alert(3)</script>.csv')
    data = prepare(table, sensitive="who")
    result = run_audit(data, AuditConfig(ranks=(1, 2), variants="vanilla,fair_eig"))
    return result, render_html(result)


def test_no_external_resources(evil_report):
    _, html = evil_report
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        if tag in {"script", "link", "img", "iframe", "source", "video", "audio", "embed", "object"}:
            for key in ("src", "href", "data"):
                value = attrs.get(key) or ""
                assert not value.startswith(("http:", "https:", "//")), (tag, attrs)
    assert "cdn.plot.ly" not in "".join(str(a) for _, a in parser.tags)


def test_user_text_is_inert(evil_report):
    _, html = evil_report
    assert EVIL_COLUMN not in html
    assert "alert(3)</script>" not in html
    assert EVIL_GROUP not in html
    parser = _Tags()
    parser.feed(html)
    assert not any(tag == "img" for tag, _ in parser.tags)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    figures = html.count('class="figure"')
    assert len(scripts) == 1 + figures  # plotly.js once, then one plotting call per figure


def test_zip_holds_all_three(evil_report):
    import io
    import zipfile

    result, _ = evil_report
    names = zipfile.ZipFile(io.BytesIO(report_zip(result))).namelist()
    assert names == ["report.html", "report.json", "records.csv"]


def test_a_detail_shared_by_consecutive_ranks_is_one_row():
    """JEVD's solver detail is the same at every rank: one row "ranks 1–3", not three; a detail
    that differs per rank (the selected columns) keeps one row per rank."""
    from fairaudit.report import details_rows, details_rows_by_ranks

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"g": rng.choice(["a", "b"], 200), **{f"x{j}": rng.normal(size=200) for j in range(5)}})
    data = prepare(read_table(frame.to_csv(index=False).encode(), name="d.csv"), sensitive="g")
    result = run_audit(data, AuditConfig(ranks=(1, 2, 3), methods=("pca", "fs"), variants="jevd,vanilla,fufs"))
    solver = [row for row in details_rows_by_ranks(result, "pca", titles=False) if row[2] == "solver"]
    assert [row[1] for row in solver] == ["ranks 1–3"]
    selected = [row for row in details_rows(result, "fs", titles=False) if row[2] == "selected"]
    merged = [row for row in details_rows_by_ranks(result, "fs", titles=False) if row[2] == "selected"]
    assert [row[1] for row in merged] == [f"rank {row[1]}" for row in selected] == ["rank 1", "rank 2", "rank 3"]


def test_a_table_value_outside_its_interval_is_marked_and_explained():
    """The per-rank table (dashboard and HTML report) marks a value that lies outside its own
    interval with † and explains the mark under the table; a table without one has no note."""
    from fairaudit.audit import RECORD_COLUMNS, AuditResult
    from fairaudit.formatting import OUTSIDE_MARK, OUTSIDE_NOTE
    from fairaudit.report import marked, summary_text

    def result(value):
        rows = [("fs", "mcfs", 1, "", "acc", value, 0.508, 0.782), ("fs", "mcfs", 2, "", "acc", 0.7, 0.6, 0.8)]
        return AuditResult(pd.DataFrame(rows, columns=RECORD_COLUMNS), {"methods": ["fs"]}, {"group_sizes": {"a": 50, "b": 50}})

    table = summary_text(result(0.852), "fs")
    assert list(table["acc"]) == [f"0.852 (0.508–0.782) {OUTSIDE_MARK}", "0.700 (0.600–0.800)"] and marked(table)
    assert OUTSIDE_NOTE in render_html(result(0.852))
    inside = result(0.6)
    assert not marked(summary_text(inside, "fs")) and OUTSIDE_NOTE not in render_html(inside)
