"""An audit card and a verdict a pipeline can act on (issue 26, item 3).

**The audit card** sits beside a model card: what was audited (the data's name, SHA-256, rows,
features, sensitive columns and group sizes), how (the configuration, fairaudit's and its
libraries' versions), what was found (every verdict with its sentence) and by which rules. It is
one JSON object (:func:`audit_card`) and the same content as Markdown (:func:`card_markdown`);
the CLI writes both (``--card card.md`` also writes ``card.json``), the dashboard's Report page
downloads them.

**The gate.** ``fairaudit audit … --fail-on gap,worse,leakage`` exits with :data:`GATE_EXIT` when a
finding of such a verdict is present (:func:`gate_failures`; ``--fail-variants`` restricts which
variants count — the representation a pipeline ships, say, not vanilla's reference); ``fairaudit
compare old.json new.json --fail-on regression`` does so when a verdict got worse for the groups
(:func:`regressions`). The exit status is neither 1 (a bug) nor 2 (bad input), so a CI job can
tell a failed gate from a failed run.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Iterable, Mapping

from ._version import __version__
from .compare import Comparison, finding_topic
from .findings import VERDICT_LABELS, Finding, verdict_rules
from .vocabulary import render

GATE_EXIT = 3
"""Exit status of ``audit --fail-on`` and ``compare --fail-on regression`` when the gate fails."""

FAIL_ON = {
    "gap": "a gap between groups (verdict gap, not leakage)",
    "worse": "a fair variant less fair than vanilla (verdict worse)",
    "leakage": "the group predicted from the representation beyond the tolerance (a leakage finding with verdict gap)",
}
"""What ``audit --fail-on`` can fail on."""

COMPARE_FAIL_ON = {"regression": "a verdict that got worse for the groups between the two audits"}

LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "pyarrow", "cvxpy", "plotly")
"""Libraries whose versions an audit card records (those that compute the numbers)."""


def gate_failures(found: Mapping[str, Iterable[Finding]], fail_on: Iterable[str], variants: Iterable[str] | None = None) -> list[Finding]:
    """The findings that fail the gate: verdict ``gap`` (other than leakage) for ``"gap"``,
    ``worse`` for ``"worse"``, a leakage finding with verdict ``gap`` for ``"leakage"`` — of the
    variants named in ``variants`` (every variant when None)."""
    wanted = set(fail_on)
    unknown = wanted - set(FAIL_ON)
    if unknown:
        raise ValueError(f"unknown --fail-on value(s): {', '.join(sorted(unknown))}")
    chosen = None if variants is None else set(variants)
    failing = []
    for items in found.values():
        for finding in items:
            if chosen is not None and finding.variant not in chosen:
                continue
            leakage = finding_topic(finding.to_dict()).startswith("leakage")
            if (finding.verdict == "worse" and "worse" in wanted) or (finding.verdict == "gap" and (
                    ("leakage" in wanted and leakage) or ("gap" in wanted and not leakage))):
                failing.append(finding)
    return failing


def regressions(comparison: Comparison) -> list[dict]:
    """The verdicts that got worse for the groups from the first audit to the second
    (:func:`fairaudit.compare.verdict_changes`, direction ``regression``)."""
    return [v for v in comparison.verdicts if v["direction"] == "regression"]


def versions() -> dict[str, str]:
    """fairaudit's, Python's and :data:`LIBRARIES`' versions."""
    found = {"fairaudit": __version__, "python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def audit_card(result, found: Mapping[str, Iterable[Finding]], *, interface: str = "library") -> dict:
    """The audit card of ``result`` (its findings ``found``) as a JSON-ready dict: ``data``,
    ``configuration``, ``versions``, ``verdicts`` (every finding with a verdict: family, variant,
    rank, what it judges, verdict, sentence) and ``rules``, worded for ``interface``."""
    data = result.data or {}
    config = result.config or {}
    verdicts = [
        {"family": f.family, "variant": f.variant, "rank": f.rank, "topic": finding_topic(f.to_dict()), "verdict": f.verdict,
         "text": render(f.text, interface)}
        for items in found.values() for f in items if f.verdict != "info"
    ]
    rules = verdict_rules(float(config.get("flag_ratio", 1.25)), float(config.get("confidence", 0.95)))
    return {
        "card": "fairaudit audit card",
        "created": result.created,
        "data": {key: data.get(key) for key in ("name", "sha256", "rows_read", "rows", "features", "sensitive", "group_sizes", "label",
                                                "scaling") if key in data},
        "configuration": config,
        "versions": versions(),
        "verdicts": verdicts,
        "rules": {name: render(rule, interface) for name, rule in rules.items()},
    }


def card_markdown(card: Mapping) -> str:
    """The audit card as Markdown: the data, the verdicts, how they were decided, the setup."""
    data = card.get("data", {})
    lines = [
        f"# Audit card: {_md(data.get('name', 'data'))}",
        "",
        f"Made by fairaudit {_md(card.get('versions', {}).get('fairaudit', ''))} on {_md(card.get('created', ''))}.",
        "",
        "## Data",
        "",
        f"- File: `{_code(data.get('name', ''))}`, SHA-256 `{_code(data.get('sha256', ''))}`",
        f"- Rows: {data.get('rows', 'n/a')} used of {data.get('rows_read', 'n/a')} read",
        f"- Sensitive: {_md(', '.join(map(str, data.get('sensitive') or [])))}; groups: "
        + _md(", ".join(f"{g} ({n:,})" for g, n in (data.get("group_sizes") or {}).items())),
        f"- Features ({len(data.get('features') or [])}): {_md(', '.join(map(str, (data.get('features') or [])[:30])))}"
        + (" …" if len(data.get("features") or []) > 30 else ""),
        "",
        "## Verdicts",
        "",
    ]
    verdicts = card.get("verdicts") or []
    if not verdicts:
        lines.append("No verdict (the intervals were off, or nothing was judged).")
    for v in verdicts:
        where = f"{v['family']} · {v['variant']}" + (f" · rank {v['rank']}" if v.get("rank") is not None else "")
        lines.append(f"- **{VERDICT_LABELS.get(v['verdict'], v['verdict'])}** ({_md(where)}, {_md(v['topic'])}): {_md(v['text'])}")
    lines += ["", "## How the verdicts were decided", ""]
    lines += [f"- {_md(rule)}" for rule in (card.get("rules") or {}).values()]
    config = card.get("configuration") or {}
    lines += ["", "## Setup", ""]
    lines += [f"- {key}: `{_code(value)}`" for key, value in config.items() if value not in (None, {}, [])]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in (card.get("versions") or {}).items()), ""]
    return "\n".join(lines)


def _code(value) -> str:
    """User text inside a Markdown code span: a backquote would end it early."""
    return str(value).replace("`", "'")


def _md(value) -> str:
    """User text in Markdown, inert: the characters Markdown would act on are escaped."""
    text = str(value)
    for ch in "\\`*_[]<>|":
        text = text.replace(ch, "\\" + ch)
    return text
