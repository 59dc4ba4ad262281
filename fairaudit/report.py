"""Audit reports: one self-contained HTML file, JSON, CSV (and a ZIP of all three).

The HTML embeds plotly.js once, inline, and references nothing outside itself: it opens
offline in any browser. Everything user-supplied (file, column and group names, messages) is
HTML-escaped.
"""

from __future__ import annotations

import html
import io
import json
import math
import os
import platform
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from . import verdicts
from .audit import AuditResult, family_run, whole_metrics
from .data import worded
from .families import FAMILY_TITLES
from .findings import VERDICT_LABELS, Finding, findings, verdict_rules
from .formatting import OUTSIDE_MARK, OUTSIDE_NOTE, START_MARK, START_NOTE, cell, level, number, plural
from .metrics import metric_definition
from .plots import TABLE_ARROWS_NOTE, better_text, family_figures, metric_line, negative_loss_note, table_title, variant_title
from .summary import audit_summary, key_figure, question, verdict_rows
from .verdicts import MIN_JUDGED_ROWS, Settings
from .vocabulary import render, term

LIBRARIES = ("fairaudit", "numpy", "scipy", "scikit-learn", "pandas", "cvxpy", "clarabel", "scs", "highspy", "plotly")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
main{max-width:1200px;margin:auto;padding:24px 32px 64px}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{margin-top:2.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}
h3{margin-top:1.6rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.finding{background:#f6f8fa;border-left:5px solid #8c959f;padding:.5rem .9rem;margin:.4rem 0}
.finding.gap{background:#fff4de;border-left-color:#b07800}.finding.worse{background:#fde8dc;border-left-color:#d55e00;border-left-style:double;border-left-width:7px}
.finding.mitigated{background:#e3f0f8;border-left-color:#0072b2}.finding.no_evidence{background:#eef1f4;border-left-color:#5b7083;border-left-style:dashed}
.verdict{display:inline-block;font-weight:700;font-size:.78rem;text-transform:uppercase;letter-spacing:.03em;margin-right:.5rem;
padding:0 .45rem;border-radius:3px;border:1px solid currentColor}
.gap .verdict{color:#8a5d00}.worse .verdict{color:#a64800}.mitigated .verdict{color:#005a8c}.no_evidence .verdict{color:#44515e}.info .verdict{color:#57606a}
.finding details.rule{margin-top:.25rem;font-size:.85rem;color:#57606a}.finding details.rule summary{cursor:pointer}
.finding ul.details{margin:.3rem 0 .1rem 1.1rem;padding:0;font-size:.88rem;color:#3d444d}.finding ul.details li{margin:.1rem 0}
.note{color:#57606a;font-size:.9rem}.figure{background:#fff;border:1px solid #d0d7de;margin:.8rem 0;padding:4px}
code{background:#f0f3f6;padding:1px 4px;border-radius:3px}details{margin:.6rem 0}
.figure .note{margin:2px 8px 6px}
div.table{max-width:100%;overflow-x:auto}/* a wide per-rank table scrolls inside the page, not the page */
p.question{font-size:1.25rem;font-weight:600;margin:.4rem 0 .2rem}table.verdicts td.verdict-cell{white-space:nowrap}
@media screen and (prefers-color-scheme: dark){/* print keeps the light theme */
body{color:#e6edf3;background:#0d1117}h2{border-color:#30363d}td,th{border-color:#30363d}th{background:#161b22}
.finding{background:#161b22}.finding.gap{background:#2b2206}.finding.worse{background:#33190b}.finding.mitigated{background:#0b2233}
.finding.no_evidence{background:#1a2028}.gap .verdict{color:#f0b400}.worse .verdict{color:#ff8a50}.mitigated .verdict{color:#56b4e9}
.no_evidence .verdict,.info .verdict,.finding details.rule,.finding ul.details{color:#9da7b3}.note{color:#9da7b3}code{background:#161b22}
.figure{border-color:#30363d}.figure .note{color:#57606a}
}
"""
# Figures keep their white card in the dark theme: plotly draws on white, and every colour of
# the palette (fairaudit.plots: Okabe–Ito, vanilla in mid grey) is chosen to read on it.


def words(text, interface: str = "library") -> str:
    """A note or finding with its option mentions worded for ``interface`` (see fairaudit.vocabulary)."""
    return render(str(text), interface)


PRINT_WIDTH_PX = 680
"""Width (CSS px) charts are drawn at for printing: A4 (210 mm) and US Letter (8.5 in) pages with
the 14 mm margins of :data:`PRINT_CSS` leave at least 182 mm ≈ 688 px."""

PRINT_CSS = """
@page{size:auto;margin:14mm}
@media print{
:root{color-scheme:light}
html,body{background:#fff!important;color:#000!important;font-size:10pt}
main{max-width:none;margin:0;padding:0}
h2{break-before:page;page-break-before:always}
main>h2:first-of-type{break-before:auto;page-break-before:auto}
h2,h3,summary{break-after:avoid;page-break-after:avoid}
.figure{break-inside:avoid;page-break-inside:avoid;border:none;padding:0;margin:3mm 0;overflow:hidden}
html:not(.print-sized) .figure .js-plotly-plot{zoom:var(--print-zoom,1)}
.modebar-container{display:none!important}
table{font-size:7.5pt;max-width:100%}thead{display:table-header-group}tr,.finding{break-inside:avoid;page-break-inside:avoid}
th,.finding,.changed-better,.changed-worse{-webkit-print-color-adjust:exact;print-color-adjust:exact}
td,th{overflow-wrap:break-word;padding:2px 4px}td.num{white-space:nowrap}th{hyphens:auto}
a{color:#000}
}
"""
"""The print stylesheet: light theme, each section (``h2``) on a new page, charts kept whole and
sized to the page (:data:`PRINT_SCRIPT`), table headers repeated on every page."""

PRINT_SCRIPT = """
(function(){
var WIDTH=__WIDTH__;
function plots(){return Array.prototype.slice.call(document.querySelectorAll('.js-plotly-plot'));}
function drawn(p){var svg=p.querySelector('.main-svg');return (svg||p).getBoundingClientRect().width;}
function zoom(){var widest=Math.max.apply(null,[1].concat(plots().map(drawn)));
document.documentElement.style.setProperty('--print-zoom',Math.min(1,WIDTH/widest).toFixed(4));}
window.addEventListener('load',zoom);window.addEventListener('resize',zoom);
window.addEventListener('beforeprint',function(){if(!window.Plotly)return;document.documentElement.classList.add('print-sized');
plots().forEach(function(p){Plotly.relayout(p,{width:WIDTH,autosize:false});});});
window.addEventListener('afterprint',function(){if(!window.Plotly)return;document.documentElement.classList.remove('print-sized');
plots().forEach(function(p){Plotly.relayout(p,{width:null,autosize:true});});});
})();
""".replace("__WIDTH__", str(PRINT_WIDTH_PX))
"""Charts for print: when the browser prints (``beforeprint``) every chart is redrawn at
:data:`PRINT_WIDTH_PX` and restored afterwards; where no such event comes (a headless PDF
export), the print stylesheet scales the charts drawn for the screen by the same ratio."""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _table(rows: list[tuple], header: tuple | None = None) -> str:
    out = ['<div class="table"><table>']
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>")
    for row in rows:
        cells = []
        for value in row:
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            cells.append(f'<td class="num">{_e(_fmt(value))}</td>' if numeric else f"<td>{_e(value)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


def _fmt(value) -> str:
    if isinstance(value, float):
        return number(value)
    return str(value)


def summary_table(result: AuditResult, method: str) -> pd.DataFrame:
    """Per variant and rank: the family's whole-data metrics side by side."""
    rows = result.records[(result.records.method == method) & (result.records.group == "")]
    if rows.empty:
        return pd.DataFrame()
    table = whole_metrics(rows, method)
    fitted = pd.MultiIndex.from_frame(rows[["variant", "rank"]].drop_duplicates())
    return table[table.index.isin(fitted)].reset_index()  # only the fits there are (yours may have one rank)


def summary_text(result: AuditResult, method: str) -> pd.DataFrame:
    """The per-rank summary with every value written with its interval, ``"0.412 (0.371–0.455)"``
    (just the value where no interval was computed): columns ``variant``, ``rank`` and one per
    whole-data metric (the report's and the dashboard's tables)."""
    values = summary_table(result, method)
    if values.empty:
        return values
    records = result.records
    rows = records[(records.method == method) & (records.group == "")]
    lows = whole_metrics(rows, method, values="ci_low") if "ci_low" in rows else None
    highs = whole_metrics(rows, method, values="ci_high") if "ci_high" in rows else None
    spread = start_spread_keys(result, method)
    # {(variant, rank): {metric: end}}: a dictionary lookup per cell, not a MultiIndex ``.loc`` (1,900
    # of them took 0.3 s of every dashboard page run showing a PCA result)
    low_of = {} if lows is None else lows.to_dict("index")
    high_of = {} if highs is None else highs.to_dict("index")
    text = values.copy().astype(object)
    for metric in (c for c in values.columns if c not in ("variant", "rank")):
        cells = []
        for variant, rank, value in zip(values["variant"], values["rank"], values[metric], strict=True):
            key = (variant, rank)
            if key in low_of and metric in low_of[key]:
                written = cell(value, low_of[key][metric], high_of[key][metric])
                cells.append(written + f" {START_MARK}" if (variant, int(rank), metric) in spread else written)
            else:
                cells.append(number(value))
        text[metric] = cells
    text["rank"] = values["rank"].astype(int)
    return text


def start_spread_keys(result: AuditResult, method: str) -> set[tuple[str, int, str]]:
    """``(variant, rank, metric)`` of the whole-data records whose spread between random starts
    exceeds their interval (``uncertainty[method]["start_spread"]["larger"]``)."""
    found = (result.uncertainty or {}).get(method, {}).get("start_spread") or {}
    return {(item["variant"], int(item["rank"]), item["metric"]) for item in found.get("larger", []) if not item["group"]}


def marked(cells, mark: str = OUTSIDE_MARK) -> bool:
    """Whether any cell of a table (:func:`summary_text`'s frame or :func:`summary_rows`' rows)
    carries ``mark``: :data:`OUTSIDE_MARK` (a value outside its own interval) or
    :data:`START_MARK` (a value that moves between random starts by more than its interval)."""
    rows = cells.itertuples(index=False) if isinstance(cells, pd.DataFrame) else cells
    return any(isinstance(text, str) and mark in text.split() for row in rows for text in row)


def table_notes(cells) -> list[str]:
    """The notes a table's marks need, in order (:data:`OUTSIDE_NOTE`, :data:`START_NOTE`)."""
    return [note for mark, note in ((OUTSIDE_MARK, OUTSIDE_NOTE), (START_MARK, START_NOTE)) if marked(cells, mark)]


def summary_rows(result: AuditResult, method: str) -> tuple[tuple, list[tuple]]:
    """The per-rank summary as text cells, each value with its interval: ``(header, rows)``."""
    text = summary_text(result, method)
    if text.empty:
        return (), []
    metrics = [c for c in text.columns if c not in ("variant", "rank")]
    out = [(variant_title(method, row[0]), int(row[1]), *row[2:]) for row in text[["variant", "rank", *metrics]].itertuples(index=False)]
    header = ("variant", "rank", *(table_title(m) if metric_definition(m) else m for m in metrics))
    return header, out


def _finding_html(finding, interface: str = "library", details: bool = True) -> str:
    """A finding as a block marked by its verdict — a labelled badge (colour, border style and
    words: never colour alone) — with its text, its details under it (``details``: the other
    pairs of groups, the groups too small to judge, the tests) and, for a verdict, the rule that
    produced it."""
    verdict = getattr(finding, "verdict", "info")
    rule = getattr(finding, "rule", "")
    label = VERDICT_LABELS.get(verdict, verdict.replace("_", " "))
    lines = getattr(finding, "details", []) if details else []
    more = ('<ul class="details">' + "".join(f"<li>{_e(words(line, interface))}</li>" for line in lines) + "</ul>") if lines else ""
    why = (f'<details class="rule"><summary>Why “{_e(label)}”: the rule</summary>{_e(words(rule, interface))}</details>'
           if rule and verdict != "info" else "")
    return (f'<div class="finding {_e(verdict)}"><span class="verdict">{_e(label)}</span>'
            f"{_e(words(finding, interface))}{more}{why}</div>")


def verdict_settings(result: AuditResult) -> list[tuple[list[str], float, float, int]]:
    """``[(families, flag_ratio, confidence, min_judged_rows)]``: the tolerance, confidence and
    smallest group judged each family's verdicts used, families with the same settings together
    (families audited separately, e.g. from the dashboard's pages, may differ)."""
    runs = result.config.get("runs", [result.config])
    methods = list(dict.fromkeys(result.records.method)) or [m for run in runs for m in run.get("methods", ())]
    grouped: dict[tuple[float, float, int], list[str]] = {}
    for method in methods:
        settings = Settings.of_run(family_run(result.config, method))
        grouped.setdefault((settings.flag_ratio, settings.confidence, settings.min_judged_rows), []).append(method)
    return [(families, *key) for key, families in grouped.items()]


def _verdicts_section(result: AuditResult, interface: str = "library") -> str:
    """The verdict rules this run used (tolerance and confidence filled in), once per setting."""
    settings = verdict_settings(result) or [([], 1.25, 0.95, MIN_JUDGED_ROWS)]
    parts = ["<h2>Verdicts and their rules</h2><p class=\"note\">Every finding above carries one verdict.</p>"]
    for families, flag, confidence, min_rows in settings:
        names = ", ".join(FAMILY_TITLES.get(m, m) for m in families)
        if len(settings) > 1:
            parts.append(f"<h3>{_e(names)}</h3>")
        rules = verdict_rules(flag, confidence, min_rows)
        items = "".join(f"<li>{_e(words(text, interface))}</li>" for text in rules.values())
        parts.append(
            f'<p class="note">Tolerance ({_e(words(term("flag_ratio"), interface))}) {_e(number(flag))}, '
            f"confidence {_e(level(confidence))}, groups of at least {_e(plural(min_rows, 'row'))} judged "
            f"({_e(words(term('min_judged_rows'), interface))}).</p><ul>{items}</ul>"
        )
    return "".join(parts)


UNCERTAINTY_HEADER = ("family", "bootstrap", "why this number", "confidence", "held-out rows", "time of the intervals",
                      "between random starts")


def uncertainty_rows(result: AuditResult, interface: str = "library") -> list[tuple]:
    """How every family's intervals were computed, one row per family (:data:`UNCERTAINTY_HEADER`):
    replicates and why, confidence, held-out rows, the intervals' time (beside the time announced
    once the first replicates were timed), and how far other random starts of the fit land."""
    rows = []
    for method, summary in result.uncertainty.items():
        parts = [(FAMILY_TITLES.get(method, method), summary)] if "replicates" in summary else []
        if isinstance(summary.get("yours"), dict):  # a representation of the user's (fairaudit.yours.attach)
            parts.append((f"{FAMILY_TITLES.get(method, method)}: your representation", {**summary, **summary["yours"]}))
        for title, part in parts:
            replicates = int(part.get("replicates") or 0)
            split = part.get("rows")
            rows.append(
                (
                    title,
                    plural(replicates, "replicate") if replicates else "none",
                    words(part.get("why", ""), interface),
                    level(part.get("confidence", 0.95)),
                    f"{number(100 * float(part['holdout']))} % held out ({split['train']} / {split['heldout']} rows)" if split else "no",
                    _intervals_time(part),
                    start_spread_text(part),
                )
            )
    return rows


def _intervals_time(summary: dict) -> str:
    if summary.get("seconds") is None:
        return "—"
    announced = summary.get("expected_seconds")
    return f"{number(summary['seconds'])} s" + (f" (announced {number(announced)} s)" if announced is not None else "")


def start_spread_text(summary: dict, marks: bool = True) -> str:
    """How far other random starts of the fit moved the records, against their intervals (``marks``:
    say that the tables mark them)."""
    found = summary.get("start_spread")
    if not found:
        return "—"
    if not found.get("restarts"):
        return words(found.get("why", "not measured"))
    larger = int(found.get("larger_count", 0))
    return (f"{plural(found['restarts'], 'restart')}: {larger} of {found.get('checked', 0)} numbers moved by more than their "
            f"interval is wide{f' ({START_MARK} in the tables)' if larger and marks else ''}")


def _uncertainty_section(result: AuditResult, interface: str = "library") -> str:
    """How every interval was computed, per family: replicates and why, held-out rows, gaps."""
    if not result.uncertainty:
        return ""
    table = _table(uncertainty_rows(result, interface), UNCERTAINTY_HEADER)
    notes = "".join(
        f"<li>{_e(FAMILY_TITLES.get(method, method))}: no interval for {_e(what)} — {_e(words(reason, interface))}</li>"
        for method, summary in result.uncertainty.items()
        for what, reason in summary.get("not_bootstrapped", {}).items()
    )
    return (
        "<h2>Uncertainty</h2><p class=\"note\">Intervals (ci_low–ci_high in the tables and records, bands and "
        "error bars in the charts) are percentile intervals of a stratified bootstrap: each group's rows are "
        "redrawn with replacement from that group, every variant is refitted (warm-started from the audit's own "
        "fit) and measured again. Gaps and ratios follow the groups worst and best served in the full data. "
        "Leakage carries its own interval, from repeated stratified cross-validation. Measured in simulations, "
        "the 95 % interval of a group's PCA loss contains the population value 92–96 % of the time where that "
        "loss is positive; not where it is exactly 0, nor where two principal directions nearly tie at the rank "
        "(the fitted subspace then flips between samples).</p>"
        + table
        + (f"<ul>{notes}</ul>" if notes else "")
    )


def _data_section(result: AuditResult) -> str:
    data = result.data
    n_features = data.get("n_features", len(data.get("feature_names", [])))
    rows = [
        ("file", data.get("name")),
        ("sha256", data.get("sha256")),
        ("rows read", data.get("rows_read")),
        ("rows used", data.get("rows")),
        ("features", f"{n_features}: {', '.join(map(str, data.get('feature_names', [])))}"),
        ("sensitive", ", ".join(map(str, data.get("sensitive", [])))),
        ("scaling", data.get("scaling")),
        ("encoding / delimiter", f"{data.get('encoding')} / {data.get('delimiter')!r}"),
    ]
    if data.get("label"):
        rows.append(("label", data.get("label")))
    if data.get("engine"):  # read partition by partition (fairaudit.engine.dask_engine)
        rows.append(("engine", data["engine"].get("text", data["engine"].get("name"))))
    return "<h2>Data</h2>" + _table(rows) + _accounting_html(data)


def _accounting_html(data: dict) -> str:
    """Rows read and used per group (and why rows were dropped), columns left out, warnings."""
    unit = "entities" if data.get("tensor") else "rows"
    entries = data.get("groups") or [{"group": g, "rows_read": n, "rows_used": n, "dropped": {}} for g, n in data.get("group_sizes", {}).items()]
    groups = _table(
        [(e["group"], e["rows_read"], e["rows_used"], ", ".join(f"{n} {why}" for why, n in e["dropped"].items()) or "—") for e in entries],
        ("group", f"{unit} read", f"{unit} used", "dropped"),
    )
    excluded = _table([(e["column"], e["reason"], words(e["detail"])) for e in data.get("excluded", [])], ("column", "left out as", "why"))
    warnings = "".join(f'<div class="finding">{_e(words(w))}</div>' for w in data.get("warnings", []))
    log = "".join(f"<li>{_e(words(line))}</li>" for line in data.get("preprocessing", []))
    return (
        "<h3>Groups</h3>"
        + groups
        + warnings
        + (f"<h3>Columns left out</h3>{excluded}" if data.get("excluded") else "")
        + (f"<h3>Preprocessing</h3><ul>{log}</ul>" if log else "")
    )


def _config_rows(config: dict) -> list[tuple]:
    rows = []
    for key, value in config.items():
        if isinstance(value, dict):
            value = "; ".join(f"{k}: {v}" for k, v in value.items()) or "—"
        elif isinstance(value, list | tuple):
            value = ", ".join(map(str, value))
        rows.append((key, value))
    return rows


def _config_section(result: AuditResult) -> str:
    runs = result.config.get("runs") if set(result.config) == {"runs"} else [result.config]
    tables = "".join(
        (f"<h3>Run {i + 1}: {_e(', '.join(run.get('methods', [])))}</h3>" if len(runs) > 1 else "") + _table(_config_rows(run))
        for i, run in enumerate(runs)
    )
    versions = _table(list(library_versions().items()), ("library", "version"))
    return "<h2>Configuration</h2>" + tables + "<h3>Software</h3>" + versions


def _figure_html(fig, metric: str | None = None) -> str:
    """A figure in its card, with its metric's one-line definition and better direction under it."""
    caption = ""
    if metric is not None:
        line = " ".join(part for part in (better_text(metric) + "." if better_text(metric) else "", metric_line(metric)) if part)
        caption = f'<p class="note">{_e(line)}</p>' if line else ""
    return '<div class="figure">' + pio.to_html(
        fig, include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True}
    ) + caption + "</div>"


def _badge(verdict: str, provisional: int | None = None) -> str:
    """A verdict as the findings' labelled badge (colour, border and words), in a table cell."""
    early = f" (provisional, {plural(provisional, 'replicate')})" if provisional is not None else ""
    return (f'<td class="verdict-cell {_e(verdict)}"><span class="verdict">{_e(VERDICT_LABELS.get(verdict, verdict))}</span>'
            f"{_e(early)}</td>")


def verdict_table_html(found: list[Finding], interface: str = "library") -> str:
    """A family's verdict per variant at the rank that matters (:func:`fairaudit.summary.verdict_rows`)."""
    rows = verdict_rows(found)
    if not rows:
        return '<p class="note">No verdict: the findings state facts only (see “How this was decided”).</p>'
    costs = any(r.cost for r in rows)
    head = "".join(f"<th>{_e(h)}</th>" for h in ("variant", "verdict", "judged", "rank", "groups",
                                                  f"deciding number ({level(rows[0].confidence)} interval)",
                                                  *(("cost",) if costs else ())))
    body = "".join(
        f"<tr><td>{_e(r.title)}</td>{_badge(r.verdict, r.provisional)}<td>{_e(r.what)}</td>"
        f'<td class="num">{_e("" if r.rank is None else r.rank)}</td><td>{_e(r.groups)}</td><td>{_e(words(r.number, interface))}</td>'
        + (f"<td>{_e(r.cost or '—')}</td>" if costs else "") + "</tr>"
        for r in rows
    )
    return f'<div class="table"><table class="verdicts"><thead><tr>{head}</tr></thead>{body}</table></div>'


def audit_summary_html(found: dict[str, list[Finding]], interface: str = "library") -> str:
    """Above the families: which show a gap, which fair variants close it and at what cost
    (:func:`fairaudit.summary.audit_summary`)."""
    families = audit_summary(found)
    if not families:
        return ""
    head = "".join(f"<th>{h}</th>" for h in ("family", "vanilla", "where", "closed by (cost)", "not closed · less fair"))
    body = "".join(
        f"<tr><td>{_e(f.title)}</td>{_badge(f.verdict)}<td>{_e(f.where() or '—')}</td>"
        f"<td>{_e('; '.join(f'{t} ({c})' if c else t for t, c in f.closed) or '—')}</td>"
        f"<td>{_e('; '.join([*f.open, *(t + ' (less fair)' for t in f.worse)]) or '—')}</td></tr>"
        for f in families
    )
    return f'<div class="table"><table class="verdicts"><thead><tr>{head}</tr></thead>{body}</table></div>'


def _family_section(result: AuditResult, method: str, found: list[Finding], interface: str = "library") -> str:
    """A family: its one-screen answer first (the question, the verdict table, the one chart), then
    every other chart, the per-rank table and how the verdicts were decided (every finding in full,
    with its details and rule), each under its heading."""
    parts = [f"<h2>{_e(FAMILY_TITLES.get(method, method))}</h2>",
             f'<p class="question">{_e(question(method, result.data.get("sensitive")))}</p>',
             verdict_table_html(found, interface)]
    key, rest = key_figure(family_figures(result.records, method), method)
    if key is not None:
        parts.append(_figure_html(key[1], key[0]))
    if rest:
        parts.append("<h3>All charts</h3>")
        parts += [_figure_html(fig, metric) for metric, fig in rest]
    header, rows = summary_rows(result, method)
    if rows:
        parts.append(
            f"<h3>Per-rank table</h3><p class=\"note\">Each value with its interval in brackets (where computed). {_e(TABLE_ARROWS_NOTE)}</p>"
            + _table(rows, header)
            + "".join(f'<p class="note">{_e(note)}</p>' for note in table_notes(rows))
            + (f'<p class="note">{_e(negative)}</p>' if (negative := negative_loss_note(summary_table(result, method))) else "")
        )
    parts.append(_details_html(result, method))
    if found:
        parts.append("<h3>How this was decided</h3>" + "".join(_finding_html(finding, interface) for finding in found))
    return "".join(parts)


def details_rows(result: AuditResult, method: str, *, titles: bool = True, limit: int | None = None) -> list[tuple]:
    """``(variant, rank, key, text)`` for every detail a family attached to its fits.

    ``titles`` gives variants their display titles; ``limit`` shortens lists to that many items
    (with a "… (+n)" tail).
    """
    rows = []
    for variant, by_rank in result.details.get(method, {}).items():
        for rank, facts in sorted(by_rank.items(), key=lambda item: int(item[0])):
            for key, value in facts.items():
                if isinstance(value, list | tuple):
                    shown = value if limit is None else value[:limit]
                    text = ", ".join(map(str, shown)) + (f" … (+{len(value) - len(shown)})" if len(shown) < len(value) else "")
                else:
                    text = str(value)
                rows.append((variant_title(method, variant) if titles else variant, int(rank), key, text))
    return rows


def details_rows_by_ranks(result: AuditResult, method: str, *, titles: bool = True,
                          limit: int | None = None) -> list[tuple]:
    """:func:`details_rows` with consecutive ranks that state the same fact merged:
    ``(variant, ranks, key, text)`` where ``ranks`` reads ``"rank 3"`` or ``"ranks 1–10"`` (a
    detail that holds for every rank — e.g. which solver ran — is one line, not ten)."""
    merged: list[list] = []
    for variant, rank, key, text in details_rows(result, method, titles=titles, limit=limit):
        last = next((row for row in reversed(merged) if row[0] == variant and row[2] == key), None)
        if last is not None and last[3] == text and last[1][1] == rank - 1:
            last[1] = (last[1][0], rank)
        else:
            merged.append([variant, (rank, rank), key, text])
    return [(variant, _ranks_label(*span), key, text) for variant, span, key, text in merged]


def _ranks_label(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}–{last}"


def _details_html(result: AuditResult, method: str) -> str:
    rows = details_rows_by_ranks(result, method)
    if not rows:
        return ""
    return (
        f"<h3>Details per fit</h3><details open><summary>{len(rows)} entries (e.g. the selected columns, "
        "in selection order)</summary>" + _table(rows, ("variant", "ranks", "what", "value")) + "</details>"
    )


def _definitions_section(result: AuditResult) -> str:
    used = [m for m in dict.fromkeys(result.records.metric) if metric_definition(m)]
    rows = [
        (metric_definition(m)["title"] + f" ({m})", better_text(m) or "—", metric_definition(m)["formula"],
         metric_definition(m)["plain"], metric_definition(m)["source"])
        for m in used
    ]
    return "<h2>Metric definitions</h2>" + _table(rows, ("metric", "better", "definition", "in plain words", "source"))


def _notes_section(result: AuditResult, interface: str = "library") -> str:
    parts = []
    if result.skipped:
        rows = [(s["method"], s["variant"], "all" if s.get("rank") is None else s["rank"], words(s["reason"], interface))
                for s in result.skipped]
        parts.append("<h2>Skipped variants</h2>" + _table(rows, ("method", "variant", "rank", "reason")))
    if result.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(words(w, interface))}</li>" for w in result.warnings) + "</ul>")
    return "".join(parts)


def _records_section(result: AuditResult) -> str:
    rows = list(result.records.itertuples(index=False, name=None))
    return (
        f"<h2>All records</h2><details><summary>{len(rows)} rows (method, variant, rank, group, metric, value, ci_low, ci_high) "
        "— the same table as the CSV export</summary>"
        + _table(rows, tuple(result.records.columns))
        + "</details>"
    )


def render_html(result: AuditResult, found: dict[str, list[Finding]] | None = None, interface: str = "library") -> str:
    """The whole report as one self-contained HTML string (``found``: the result's findings, if
    the caller has them already; ``interface``: whose words the notes use for options — the CLI's
    flags, the dashboard's controls or the library's parameters)."""
    found = findings(result) if found is None else found
    name = result.data.get("name", "data")
    families = "".join(_family_section(result, m, found.get(m, []), interface) for m in dict.fromkeys(result.records.method))
    summary = audit_summary_html(found, interface)
    body = (
        f"<h1>Fairness audit: {_e(name)}</h1>"
        f'<p class="note">Created {_e(result.created)} by fairaudit {_e(result.fairaudit_version)} in '
        f"{result.seconds:.1f} s. Rows are centred and scaled as listed under Data; every number below "
        "comes from the records table at the end.</p>"
        + ("<h2>Summary</h2><p class=\"note\">Per family: whether vanilla shows a gap (where, between whom), which fair "
           "variants close it and at what cost, which do not. Each family's section starts with its verdicts and the chart "
           "that carries them; every finding in full is under its “How this was decided”.</p>" + summary if summary else "")
        + _data_section(result)
        + families
        + _verdicts_section(result, interface)
        + _uncertainty_section(result, interface)
        + _notes_section(result, interface)
        + _definitions_section(result)
        + _config_section(result)
        + _records_section(result)
    )
    return page_html(f"fairaudit report: {name}", body)


def page_html(title: str, body: str, css: str = "") -> str:
    """A self-contained HTML document: ``body`` (HTML) with the report's screen and print
    stylesheets (plus ``css``), plotly.js inline and the print script; ``title`` is escaped."""
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
        f"<style>{_CSS}{css}{PRINT_CSS}</style>"
        f"<script type=\"text/javascript\">{get_plotlyjs()}\n{PRINT_SCRIPT}</script></head>"
        f"<body><main>{body}</main></body></html>"
    )


escape = _e
table_html = _table
figure_html = _figure_html
"""The report's building blocks, for other HTML documents of fairaudit (the comparison report)."""


FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\0")
"""A text cell starting with one of these is a formula to a spreadsheet (OWASP, CSV Injection;
ASVS 5.0 requirement 1.2.10): such cells get a leading single quote, which spreadsheets read as
“this is text”. Numbers are left alone (−0.5 stays a number)."""


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell (and column name) that a spreadsheet would run as a formula
    prefixed with ``'`` — group labels come from the user's column names and values."""

    def formula(value) -> bool:
        return isinstance(value, str) and value.startswith(FORMULA_TRIGGERS)

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            codes, values = pd.factorize(out[column])  # each distinct value is looked at once
            risky = np.array([formula(v) for v in values], dtype=bool)
            if risky.any():
                cells = out[column].to_numpy(dtype=object, copy=True)
                hits = np.flatnonzero((codes >= 0) & risky[np.maximum(codes, 0)])
                cells[hits] = ["'" + cells[i] for i in hits]
                out[column] = cells
    out.columns = ["'" + str(c) if formula(str(c)) else str(c) for c in out.columns]
    return out


def result_dict(result: AuditResult, found: dict[str, list[Finding]] | None = None) -> dict:
    """The result as JSON-ready data (the JSON report; :meth:`AuditResult.from_dict` reads it
    back); ``found`` — :func:`fairaudit.findings.findings` of this result when the caller has them
    already (they are worked out otherwise). Notes and reasons are in the library's words; the time
    the audit announced (``expected_seconds``) stands beside the time it took (``seconds``)."""
    found = findings(result) if found is None else found
    return {
        "fairaudit_version": result.fairaudit_version,
        "created": result.created,
        "seconds": result.seconds,
        "expected_seconds": result.expected_seconds,
        "config": result.config,
        "data": worded(result.data),
        "uncertainty": {method: _worded_summary(summary) for method, summary in result.uncertainty.items()},
        "findings": [{**f.to_dict(), "text": render(f.text), "rule": render(f.rule), "details": [render(d) for d in f.details]}
                     for family in found.values() for f in family],
        # notes may name options (fairaudit.vocabulary.term): the JSON carries the library's words
        "skipped": [{**skip, "reason": render(str(skip.get("reason", "")))} for skip in result.skipped],
        "warnings": [render(str(w)) for w in result.warnings],
        "details": result.details,
        "records": [_json_safe_record(r) for r in result.records.to_dict(orient="records")],
        "comparisons": [_json_safe_comparison(r) for r in result.comparisons.to_dict(orient="records")],
    }


def result_json(result: AuditResult, found: dict[str, list[Finding]] | None = None, indent: int | None = 1) -> str:
    """:func:`result_dict` as JSON text (no NaN: missing numbers are ``null``)."""
    return json.dumps(result_dict(result, found), indent=indent, ensure_ascii=False, allow_nan=False)


def _worded_summary(summary: dict) -> dict:
    """An uncertainty summary with its reasons in the library's words (nested ones too: ``yours``)."""
    return {
        key: render(str(value)) if key == "why" else _worded_summary(value) if isinstance(value, dict) and "why" in value else value
        for key, value in summary.items()
    }


def _json_number(value) -> float | None:
    """A JSON-safe number: ``None`` for NaN and ±∞ (``allow_nan=False``)."""
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _json_safe_record(record: dict) -> dict:
    record = dict(record)
    record["rank"] = int(record["rank"])
    for column in ("value", "ci_low", "ci_high"):
        record[column] = _json_number(record.get(column))
    return record


def _json_safe_comparison(row: dict) -> dict:
    return {
        key: value if key in verdicts.COMPARISON_TEXT_COLUMNS else int(value) if key in verdicts.COMPARISON_COUNT_COLUMNS
        else _json_number(value)
        for key, value in row.items()
    }


def records_csv(result: AuditResult) -> str:
    """The tidy records as CSV, safe to open in a spreadsheet (:func:`spreadsheet_safe`)."""
    return spreadsheet_safe(result.records).to_csv(index=False)


def report_files(result: AuditResult, found: dict[str, list[Finding]] | None = None, interface: str = "library") -> dict[str, str]:
    """The three outputs by file name: ``report.html``, ``report.json``, ``records.csv``
    (the findings worked out once for both reports)."""
    found = findings(result) if found is None else found
    return {
        "report.html": render_html(result, found, interface),
        "report.json": result_json(result, found),
        "records.csv": records_csv(result),
    }


def zip_files(files: dict[str, str]) -> bytes:
    """``files`` (name → text) in one ZIP archive."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def report_zip(result: AuditResult) -> bytes:
    """HTML, JSON and CSV in one ZIP archive."""
    return zip_files(report_files(result))


def write_reports(
    result: AuditResult, *, html_path=None, json_path=None, csv_path=None, interface: str = "library", found: dict | None = None
) -> list[Path]:
    """Write whichever of the three outputs were asked for; returns the paths written (all or
    nothing, :func:`write_outputs`); the findings (``found``, or worked out here) once for both
    reports."""
    if found is None and (html_path or json_path):
        found = findings(result)
    return write_outputs(
        result,
        ((html_path, lambda r: render_html(r, found, interface)), (json_path, lambda r: result_json(r, found)), (csv_path, records_csv)),
    )


def write_outputs(item, outputs) -> list[Path]:
    """For each ``(path, render)`` with a path, write ``render(item)`` there (text as UTF-8 — whole,
    or in pieces an iterable yields —, or bytes; folders created); returns the paths written.

    Each file is written to a temporary file beside it and renamed into place, so a reader never
    sees half a file; if one cannot be written, those already written by this call are removed
    again and the error propagates (all or nothing)."""
    written: list[Path] = []
    try:
        for path, write in outputs:
            if path:
                path = Path(path)
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, write(item))
                written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


def _write_atomic(path: Path, content) -> None:
    """``content`` — text, bytes, or text in pieces (an iterable of strings) — into ``path``."""
    if isinstance(content, bytes):
        handle = tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False)
    else:
        handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False)
    try:
        with handle:
            for piece in (content,) if isinstance(content, str | bytes) else content:
                handle.write(piece)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
