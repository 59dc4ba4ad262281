"""The answer first: an audit's findings in short form, for the CLI, the dashboard and the HTML report.

Nothing here is recomputed: every number is read from a finding's ``evidence`` (:mod:`fairaudit.findings`),
so the short forms say what the sentences say, in fewer words.

- :func:`question` — a family's question in one line (“Does PCA reconstruct every group of `race` as well?”);
- :func:`deciding_number` — the number that decided a finding, with its interval and test
  (``loss 2.08 vs 0.272 (diff 1.81, 95 % 1.36–2.00, p < 0.001)``);
- :func:`finding_line` — one finding on one line (the quiet CLI);
- :func:`verdict_rows` — a family's verdict table (variant, verdict, rank, groups, the deciding number);
- :func:`audit_summary` — per family: whether vanilla shows a gap, which fair variants close it
  (mitigated) and at what cost, which are worse;
- :func:`key_figure` — the one chart that carries a family's answer, and the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .audit import HELDOUT_PREFIX
from .families import FAMILY_TITLES
from .findings import VERDICT_LABELS, Finding
from .formatting import interval, level, number, percent, pvalue
from .plots import variant_title

QUESTIONS = {
    "pca": "Does PCA reconstruct every group of {column} as well?",
    "nmf": "Does NMF represent every group of {column} as well?",
    "fs": "Do the selected features keep every group of {column} evenly spread over the clusters?",
    "cpd": "Does the CP embedding reveal {column}, and does it fit every group as well?",
}
"""Each family's question, in one line; ``{column}`` is the sensitive column(s)."""

METRIC_WORDS = {"loss": "loss", "rel_loss": "relative loss", "residual_fit": "residual fit"}
"""The disparity metric of a finding's evidence, in the short form's words."""

COST_WORDS = {"pca": "total reconstruction error", "nmf": "total relative error"}
"""What a fair variant's ``evidence["cost"]`` measures, per family (``fairaudit.findings._price``)."""

KEY_METRICS = {"pca": ("loss",), "nmf": ("rel_loss",), "fs": ("balance",), "cpd": ("balanced_accuracy", "residual_fit")}
"""The metric of the one chart that carries a family's answer (each group's loss over rank, vanilla beside
fair; for feature selection the clusters' balance; for CP the fit–leakage frontier, or the leakage over
rank without a λ sweep), first match in :func:`fairaudit.plots.family_figures`' order."""


def question(method: str, sensitive: Sequence[str] | str | None) -> str:
    """``method``'s question about the sensitive column(s), in one line."""
    columns = [sensitive] if isinstance(sensitive, str) else list(sensitive or [])
    column = " × ".join(f"“{c}”" for c in columns) or "the sensitive column"
    return QUESTIONS.get(method, "Does {column} change what " + FAMILY_TITLES.get(method, method) + " finds?").format(column=column)


def _span(low, high, confidence, scale: float = 0.0) -> str:
    """``95 % 1.36–2.00`` (``confidence`` None: ``1.36–2.00``); ends a million times smaller than
    ``scale`` (the values compared) are rounding noise, written ``≈0``."""
    text = interval(*(_noise(v, scale) for v in (low, high)))
    return "" if text == "n/a" else f"{level(confidence)} {text}" if confidence else text


def _noise(value, scale: float):
    """``value``, or 0 when it is a million times smaller than ``scale`` (written ``≈0``/``0``)."""
    if value is None or not scale or not math.isfinite(float(value)):
        return value
    return 0.0 if abs(float(value)) < 1e-6 * abs(scale) else value


def _estimate(est: Mapping | None, confidence) -> str:
    """``0.794 (95 % 0.648–0.880)`` from ``{"value", "ci_low", "ci_high"}``."""
    if not est:
        return "n/a"
    span = _span(est.get("ci_low"), est.get("ci_high"), confidence)
    return number(est.get("value")) + (f" ({span})" if span else "")


def _pair_text(pair: Mapping, what: str, confidence) -> str:
    """``loss 2.08 vs 0.272 (diff 1.81, 95 % 1.36–2.00, p<0.001)``; ``confidence`` None: the
    compact form without the level and the metric, ``2.08 vs 0.272 · diff 1.81 (1.36–2.00), p<0.001``."""
    scale = max(abs(pair.get("value") or 0.0), abs(pair.get("other_value") or 0.0))
    span = _span(pair.get("ci_low"), pair.get("ci_high"), confidence, scale)
    difference = number(_noise(pair.get("difference"), scale))
    p = _adjusted_p(pair)
    values = f"{number(pair.get('value'))} vs {number(pair.get('other_value'))}"
    if confidence is None:
        return f"{values} · diff {difference}" + (f" ({span})" if span else "") + (f", {p}" if p else "")
    tests = ", ".join(part for part in (span, p) if part)
    return f"{what} {values} (diff {difference}" + (f", {tests})" if tests else ")")


def _p(p) -> str:
    return "" if p is None or (isinstance(p, float) and math.isnan(p)) else pvalue(p).replace(" ", "")


def _adjusted_p(pair: Mapping) -> str:
    """The p-value that decides ``pair`` (after Holm's correction), ``adj. p=…`` when the correction
    counted more than one comparison: a vanilla sweep's p at ten ranks read ``p=1.0`` where the test's
    own was 0.18, and nothing said why."""
    p = _p(pair.get("p_adjusted"))
    return f"adj. {p}" if p and (pair.get("comparisons") or 1) > 1 else p


def finding_kind(finding: Finding) -> str:
    """What a finding judges: ``"leakage"``, ``"balance"`` (feature selection's clusters),
    ``"selection"`` (FUFS against the baselines), ``"subgroup"`` (the worst-served subgroup against
    everyone else, ``AuditConfig(subgroups=True)``), a disparity metric (``"loss"``, ``"rel_loss"``,
    ``"residual_fit"``, ``"heldout_loss"``…), or ``""`` (a statement of fact)."""
    e = finding.evidence or {}
    if e.get("kind") == "leakage":
        return "leakage"
    if e.get("kind") == "worst subgroup" and isinstance(e.get("headline"), Mapping):
        return "subgroup"
    if "selectors" in e:
        return "balance"
    if "cluster_share" in e:
        return "selection"
    if isinstance(e.get("headline"), Mapping) and e.get("metric"):
        return str(e["metric"])
    return ""


def groups_text(finding: Finding) -> str:
    """The groups a finding compares: ``group=B vs group=A``, one group (cluster balance), or ``2 groups`` (leakage)."""
    e, kind = finding.evidence or {}, finding_kind(finding)
    if kind == "leakage":
        return f"{e.get('groups', '?')} groups"
    if kind == "selection":
        return "vs baselines"
    pair = e.get("headline") or {}
    if kind == "balance" or not pair.get("other"):
        return str(pair.get("group", ""))
    return f"{pair.get('group')} vs {pair.get('other')}"


def cost_text(finding: Finding, compact: bool = False) -> str:
    """What a fair variant paid, from its evidence: ``+5.67 % total reconstruction error``, ``residual
    fit 0.0618 (vanilla 0.0107)``, or ``""`` (``compact``: ``+5.67 % error``, ``fit 0.0618 (vanilla 0.0107)``)."""
    e = finding.evidence or {}
    cost = e.get("cost") or {}
    if cost.get("change_percent") is not None:
        return f"{percent(cost['change_percent'] / 100, sign=True)} {'error' if compact else COST_WORDS.get(finding.family, 'total error')}"
    if e.get("residual_fit") is not None and e.get("vanilla_residual_fit") is not None:
        return f"{'fit' if compact else 'residual fit'} {number(e['residual_fit'])} (vanilla {number(e['vanilla_residual_fit'])})"
    if e.get("alignment_data") is not None and e.get("baselines_alignment_data"):
        values = [v for v in e["baselines_alignment_data"] if v is not None]
        return (f"{'keeps' if compact else 'alignment with all features'} {number(e['alignment_data'])} (baselines "
                f"{interval(min(values), max(values)) if values else 'n/a'})")
    return ""


def deciding_number(finding: Finding, compact: bool = False) -> str | None:
    """The number that decided ``finding``, with its interval and test, in a few words; None for a
    statement of fact (no disparity, balance or leakage evidence). ``compact``: for a table whose
    header names the confidence level and whose other columns say what is judged and the cost —
    without them."""
    e, kind = finding.evidence or {}, finding_kind(finding)
    confidence = None if compact else e.get("confidence") or 0.95
    if kind == "leakage":
        tests = ", ".join(p for p in (f"chance {number(e.get('chance'))}", _p(e.get("pvalue"))) if p)
        measured = _estimate({"value": e.get("balanced_accuracy"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high")}, confidence)
        text = f"bal. acc. {measured} vs {tests}" if compact else f"balanced accuracy {measured}; {tests}"
        if finding.variant != "vanilla" and isinstance(e.get("vanilla_balanced_accuracy"), Mapping):
            text += f"; vanilla {number(e['vanilla_balanced_accuracy'].get('value'))}"
    elif kind == "balance":
        pair = e.get("headline") or {}
        p = _adjusted_p(pair)
        text = (f"{'share' if compact else 'cluster share'} {_estimate(e.get('share'), confidence)}"
                + (f" vs parity {number(e.get('parity', 1.0))}" if compact else f"; parity {number(e.get('parity', 1.0))}")
                + (f", {p}" if p else ""))
    elif kind == "subgroup":
        text = _pair_text(e.get("headline") or {}, "loss", confidence)
    elif kind == "selection":
        baselines = [v for v in (e.get("baselines_alignment_protected") or {}).values() if v is not None]
        text = (f"alignment{'' if compact else ' with the groups'} {_estimate(e.get('alignment_protected'), confidence)} vs baselines "
                f"{interval(min(baselines), max(baselines)) if baselines else 'n/a'}; cluster share "
                f"{_estimate(e.get('cluster_share'), confidence)}")
    elif kind:
        what = METRIC_WORDS.get(kind.removeprefix(HELDOUT_PREFIX), kind.replace("_", " "))
        if kind.startswith(HELDOUT_PREFIX):
            what = "held-out " + what
        if finding.verdict == "worse" and e.get("worst") and e.get("vanilla_worst"):
            text = (f"worst {e['worst'].get('group')}{'' if compact else ' ' + what} {_estimate(e['worst'], confidence)} vs "
                    f"vanilla's worst {_estimate(e['vanilla_worst'], confidence)}")
        else:
            text = _pair_text(e.get("headline") or {}, what, confidence)
    else:
        return None
    if not compact and finding.verdict in ("mitigated", "worse", "gap") and finding.variant not in (None, "vanilla") and cost_text(finding):
        text += f"; cost {cost_text(finding)}"
    return text


def _shortened(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + " …"


def finding_line(finding: Finding, width: int = 100) -> str:
    """One finding on one line: verdict, family, variant, rank, groups and the number that decided it
    (a statement of fact: its sentence, shortened to ``width`` characters)."""
    verdict = VERDICT_LABELS.get(finding.verdict, finding.verdict).split(":")[0].upper()
    if finding.provisional is not None:
        verdict += "?"
    where = f"{verdict:<11} {finding.family:<4} {finding.variant or '':<15} " + (f"rank {finding.rank:<3}" if finding.rank is not None else " " * 8)
    decided = deciding_number(finding)
    if decided is None:
        return f"{where} {_shortened(finding.text, width)}"
    what = "leakage: " if finding_kind(finding) == "leakage" else ""
    return f"{where} {groups_text(finding)}  {what}{decided}"


@dataclass
class VerdictRow:
    """One row of a family's verdict table (:func:`verdict_rows`)."""

    variant: str
    title: str
    verdict: str
    rank: int | None
    what: str
    groups: str
    number: str
    """The deciding number in the table's compact form (its level in the table's header)."""
    cost: str = ""
    """A fair variant's cost (compact), ``""`` for vanilla and where the evidence states none."""
    provisional: int | None = None
    confidence: float = 0.95
    short: str = ""
    """The variant's title without its parenthesis where that leaves the table's titles apart
    (“Fair PCA”, not “Fair PCA (exact eigen-solver)”), for a table that must fit one screen."""


KIND_WORDS = {"leakage": "leakage", "balance": "cluster balance", "selection": "FUFS vs baselines", "subgroup": "worst-served subgroup"}
SHORT_WORDS = {"cluster balance": "balance", "worst-served subgroup": "subgroup", "FUFS vs baselines": "alignment", "relative loss": "rel. loss", "residual fit": "fit",
               "held-out loss": "held-out loss"}
"""The verdict table's column of what is judged, short (the table must fit one screen)."""


def verdict_rows(found: Sequence[Finding]) -> list[VerdictRow]:
    """A family's verdict per variant at the rank that matters: every finding that judges a
    disparity, cluster balance or leakage (statements of fact stay in the findings list)."""
    rows = []
    for finding in found:
        decided = deciding_number(finding)
        if decided is None:
            continue
        kind = finding_kind(finding)
        what = KIND_WORDS.get(kind) or METRIC_WORDS.get(kind.removeprefix(HELDOUT_PREFIX), kind).replace("_", " ")
        if kind.startswith(HELDOUT_PREFIX):
            what = "held-out " + what
        variant = finding.variant or ""
        cost = cost_text(finding, compact=True) if variant not in ("", "vanilla") and kind != "balance" else ""
        rows.append(VerdictRow(variant, variant_title(finding.family, variant) if variant else "—", finding.verdict, finding.rank,
                               SHORT_WORDS.get(what, what), groups_text(finding), deciding_number(finding, compact=True) or decided,
                               cost, finding.provisional, float((finding.evidence or {}).get("confidence") or 0.95)))
    stems = {row.title: row.title.split(" (", 1)[0] for row in rows}
    clash = {stem for stem in stems.values() if sum(1 for t, s in stems.items() if s == stem) > 1}
    for row, finding in zip(rows, (f for f in found if deciding_number(f) is not None), strict=True):
        if stems[row.title] not in clash:
            row.short = stems[row.title]
        else:
            row.short = CLASHING_SHORT_TITLES.get(finding.family, {}).get(row.variant, row.title)
    return rows


CLASHING_SHORT_TITLES = {"nmf": {"fair_mu": "Fairer-NMF (MU)", "fair_am": "Fairer-NMF (AM)"}}
"""Short titles of variants whose titles share their stem (the two Fairer-NMF solvers: Algorithm 3's
multiplicative updates, Algorithm 2's alternating minimisation), for the verdict table."""


@dataclass
class FamilySummary:
    """One family of an audit in one line (:func:`audit_summary`)."""

    method: str
    title: str
    verdict: str
    """Vanilla's (for feature selection: the baselines') verdict over what it was judged on: ``gap`` if
    any, else ``info`` if anything went unjudged (no intervals: nothing is cleared), else ``no_evidence``."""
    gaps: list[str] = field(default_factory=list)
    """Vanilla's gaps: ``"loss at rank 3 (group=B vs group=A)"``."""
    no_evidence: list[str] = field(default_factory=list)
    """What vanilla shows no evidence of a gap in: ``"leakage at rank 1"``."""
    unjudged: list[str] = field(default_factory=list)
    """What vanilla was not judged on (no intervals): ``"relative loss at rank 1"``."""
    closed: list[tuple[str, str]] = field(default_factory=list)
    """Fair variants that close a gap (mitigated): ``(title, cost)``."""
    open: list[str] = field(default_factory=list)
    """Fair variants that leave a gap: ``"HSIC-BCD (linear kernel) (leakage)"``."""
    worse: list[str] = field(default_factory=list)
    """Fair variants less fair than vanilla (their titles)."""

    def where(self) -> str:
        """Vanilla's verdicts by what they judge: ``gap: loss at rank 3 (…); no evidence: leakage at rank 3``."""
        parts = [f"gap: {'; '.join(self.gaps)}" if self.gaps else "",
                 f"no evidence: {'; '.join(self.no_evidence)}" if self.no_evidence else "",
                 f"not judged (no intervals): {'; '.join(self.unjudged)}" if self.unjudged else ""]
        return "; ".join(p for p in parts if p)

    def text(self) -> str:
        """The family in one sentence."""
        parts = [self.where()]
        if self.closed:
            parts.append("closed by " + ", ".join(f"{t} ({c})" if c else t for t, c in self.closed))
        if self.open:
            parts.append("still a gap with " + ", ".join(self.open))
        if self.worse:
            parts.append("less fair: " + ", ".join(self.worse))
        return f"{self.title}: " + "; ".join(p for p in parts if p)


def _is_baseline(finding: Finding) -> bool:
    return finding.variant == "vanilla" or finding_kind(finding) == "balance"


def _what(finding: Finding, groups: bool = True) -> str:
    kind = finding_kind(finding)
    what = KIND_WORDS.get(kind) or METRIC_WORDS.get(kind.removeprefix(HELDOUT_PREFIX), kind.replace("_", " "))
    if kind.startswith(HELDOUT_PREFIX):
        what = "held-out " + what
    return f"{what} at rank {finding.rank}" + (f" ({groups_text(finding)})" if groups else "")


def audit_summary(found: Mapping[str, Sequence[Finding]]) -> list[FamilySummary]:
    """Per family of ``found`` (``fairaudit.findings.findings``): where vanilla shows a gap (and
    between whom), no evidence of one, or was not judged (no intervals: never read as cleared);
    which fair variants close a gap and at what cost (their evidence's), which leave one and which
    are less fair."""
    out = []
    for method, items in found.items():
        judged = [f for f in items if finding_kind(f)]
        if not judged:
            continue
        summary = FamilySummary(method, FAMILY_TITLES.get(method, method), "info")
        for f in judged:
            if _is_baseline(f):
                if f.verdict == "gap":
                    summary.gaps.append(_what(f))
                elif f.verdict == "no_evidence":
                    summary.no_evidence.append(_what(f, groups=False))
                else:
                    summary.unjudged.append(_what(f, groups=False))
                continue
            title = variant_title(method, f.variant or "")
            if f.verdict == "mitigated":
                summary.closed.append((title, cost_text(f)))
            elif f.verdict == "worse" and title not in summary.worse:
                summary.worse.append(title)
            elif f.verdict == "gap":
                kind = finding_kind(f)
                summary.open.append(f"{title} ({KIND_WORDS.get(kind) or METRIC_WORDS.get(kind, kind.replace('_', ' '))})")
        summary.verdict = "gap" if summary.gaps else "info" if summary.unjudged or not summary.no_evidence else "no_evidence"
        summary.open = [t for t in dict.fromkeys(summary.open) if t.rsplit(" (", 1)[0] not in summary.worse]
        out.append(summary)
    return out


def key_figure(figures: Sequence[tuple[str, object]], method: str) -> tuple[tuple[str, object] | None, list[tuple[str, object]]]:
    """``(the one chart that carries method's answer, the other charts)`` from
    :func:`fairaudit.plots.family_figures`' list (:data:`KEY_METRICS`)."""
    for wanted in KEY_METRICS.get(method, ()):
        for index, (metric, _) in enumerate(figures):
            if metric == wanted:
                return figures[index], [f for i, f in enumerate(figures) if i != index]
    return (figures[0], list(figures[1:])) if figures else (None, [])
