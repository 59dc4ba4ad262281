"""Findings: what an audit's records say, each with a verdict, the rule that produced it, and the
evidence it was written from.

``findings(result, reference=None)`` returns, per method family, a list of :class:`Finding`
objects (contract 3): ``family, rank, variant, verdict, text, rule, evidence, details``;
``str(finding)`` is its sentence. The verdicts are decided by :mod:`fairaudit.verdicts` (pairs of
groups, Holm's correction, groups too small to judge, the reference group); this module only
writes sentences from its evidence objects, whose ``to_dict()`` is the finding's ``evidence`` —
so every number a sentence states is in its evidence, and the CLI, the dashboard, the HTML and
the JSON render the same objects. A verdict is one of :data:`VERDICTS`:

``gap``
    two groups large enough to judge differ beyond the interval, the corrected test and the
    stated tolerance (``AuditConfig.flag_ratio``, default 1.25);
``no_evidence``
    no pair does (for leakage: "no detectable leakage"); the sentence names the condition that
    failed, with its number, and the smallest difference the tests would have seen;
``mitigated``
    the fair variant closes a gap that vanilla has, at a stated cost;
``worse``
    the "fair" variant is less fair than vanilla (or than every baseline);
``info``
    a statement that is not a verdict (also every disparity when intervals are off).

A finding's ``text`` is its headline (about 40 words: one comparison, its numbers to three
significant figures, the deciding condition); ``details`` are the sentences one click away (the
other pairs, the groups too small to judge, the tests). The rules are written once, in
:data:`VERDICT_RULES` (filled in by :func:`verdict_rules`); every report prints them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .audit import (
    HELDOUT_PREFIX,
    erased_base,
    family_options,
    family_run,
    is_sweep_variant,
    split_variant,
    whole_metrics,
)
from .formatting import level, number, percent, plural, times, with_interval
from .plots import variant_title
from .verdicts import (
    MIN_JUDGED_ROWS,
    BalanceVerdict,
    DisparityVerdict,
    Pair,
    Settings,
    json_ready,
    judge_balance,
    judge_disparity,
    judge_leakage,
    judged_groups,
    resolve_reference,
)
from .vocabulary import term

VERDICTS = ("gap", "no_evidence", "mitigated", "worse", "info")

VERDICT_RULES: dict[str, str] = {
    "gap": (
        "gap: two groups, each with at least {min_rows} rows, differ at a rank that is not degenerate: the worse-served "
        "one fares at least {flag_ratio}× worse (its error at least {flag_ratio} times what it would be if it were served "
        "as well as the other, where the family measures an error — PCA, NMF; else its value at least {flag_ratio} times "
        "the other's), the {confidence} % bootstrap interval of the difference excludes 0, and the difference is "
        "significant after Holm's correction at α = {alpha}. Its p-value is the bootstrap test's (the difference over its "
        "bootstrap standard error) and, for PCA, also the permutation test's against random groups of the same sizes (a "
        "group's loss is measured against its own best fit on the same rows, which flatters small groups), the larger of "
        "the two; Holm's correction counts every comparison made, which controls the chance of any false gap at α per "
        "variant. With the reference chosen by the data (the best-served group large enough to judge), every pair of "
        "groups is compared — choosing the best group after seeing the data is itself a comparison; with a reference you "
        "name ({reference}), each group with it. Vanilla is judged over every rank that is not degenerate; a fair "
        "variant, the held-out rows and CP at the one rank their finding states. Cluster balance (feature selection): "
        "a group's share of its worst k-means cluster, over its share of the data, lies below 1/{flag_ratio} by the "
        "one-sided bootstrap test at the Holm level over the groups and selectors, its interval below 1. Leakage: the "
        "group is predicted from the representation above chance — the permutation test's p-value at most α = {alpha} "
        "(without permutations: the cross-validation interval of the balanced accuracy above chance, 1/k for the k "
        "groups tested) — with a balanced accuracy of at least {flag_ratio} × 1/k."
    ),
    "no_evidence": (
        "no_evidence: no pair of groups large enough to judge meets every condition of a gap. The finding names the "
        "condition that failed, with its number, and the smallest difference the tests would have detected at these "
        "group sizes (with probability 0.8): no evidence of a gap is not evidence of fairness. For leakage: not above "
        "chance (\"no detectable leakage\"; a balanced accuracy below chance is noise, never an improvement), or above "
        "chance but below {flag_ratio} × 1/k."
    ),
    "mitigated": (
        "mitigated: vanilla has a gap at this rank and the fair variant has none by the same rule, its groups within the "
        "tolerance at the point estimate, without serving the worst-off group worse (its worst group's interval does "
        "not lie entirely above vanilla's); the cost in overall error or fit is stated."
    ),
    "worse": (
        "worse: the fair variant is less fair than vanilla (for feature selection: than every baseline): its "
        "worst group's interval lies entirely above vanilla's, or it has a gap where vanilla has none, or its leakage "
        "interval lies entirely above vanilla's."
    ),
    "info": "info: a statement of fact, not a verdict (with the intervals turned off, {off}, every disparity is info: there is no test).",
    "too_small": (
        "Too small to judge: a group with fewer than {min_rows} rows ({min_rows_option}) takes part in no test — not in "
        "the pairs, not in the leakage test — and is never the reference; each finding names it, with the smallest "
        "difference from the reference its size would let the tests detect."
    ),
    "degenerate": (
        "Degenerate ranks (full rank or an exact fit, or every group's value numerically zero) are never judged."
    ),
}
"""The verdict rules, once; ``{flag_ratio}``, ``{confidence}``, ``{alpha}``, ``{min_rows}`` and the
options they name are filled in by :func:`verdict_rules`."""

VERDICT_LABELS: dict[str, str] = {
    "gap": "gap",
    "no_evidence": "no evidence",
    "mitigated": "mitigated",
    "worse": "worse: less fair",
    "info": "info",
}
"""Each verdict as a label for people (the report's and the dashboard's badges)."""


def verdict_rules(flag_ratio: float = 1.25, confidence: float = 0.95, min_judged_rows: int = MIN_JUDGED_ROWS) -> dict[str, str]:
    """:data:`VERDICT_RULES` with the run's tolerance, confidence and smallest group to judge written in."""
    values = {"flag_ratio": number(flag_ratio), "confidence": level(confidence).removesuffix(" %"),
              "alpha": f"{round(1 - confidence, 6):g}", "off": term("bootstrap", 0), "min_rows": number(int(min_judged_rows)),
              "min_rows_option": term("min_judged_rows"), "reference": term("reference")}
    return {name: rule.format(**values) for name, rule in VERDICT_RULES.items()}


@dataclass
class Finding:
    """One finding (contract 3). ``str(finding) == finding.text``; ``details`` are the sentences
    one click away (the other pairs, the groups too small to judge, the tests)."""

    family: str
    rank: int | None
    variant: str | None
    verdict: str
    text: str
    rule: str = ""
    evidence: dict = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    provisional: int | None = None
    """While the family's replicates are still coming in: how many the verdict rests on (it may
    change when the rest are in; the renderers say so). ``None`` for a final verdict."""

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "rank": self.rank,
            "variant": self.variant,
            "verdict": self.verdict,
            "text": self.text,
            "rule": self.rule,
            "evidence": json_ready(self.evidence),
            "details": list(self.details),
            "provisional": self.provisional,
        }


# ============================================================================ reading records
Estimate = tuple[float, float, float]
"""``(value, ci_low, ci_high)``."""


class Records:
    """One family's records and comparisons of a result, looked up by key, with the run's
    settings (``reference`` overrides the run's reference group)."""

    def __init__(self, result, method: str, reference: str | None = None):
        rows = result.records[result.records.method == method]
        lows = rows["ci_low"] if "ci_low" in rows else pd.Series(np.nan, index=rows.index)
        highs = rows["ci_high"] if "ci_high" in rows else pd.Series(np.nan, index=rows.index)
        self.table: dict[tuple, Estimate] = {
            (v, int(r), g, m): (float(x), float(lo), float(hi))
            for v, r, g, m, x, lo, hi in zip(rows.variant, rows["rank"], rows.group, rows.metric, rows.value, lows, highs, strict=True)
        }
        self.method = method
        self.records = rows
        run = family_run(result.config, method)
        summary = result.uncertainty.get(method, {}) if getattr(result, "uncertainty", None) else {}
        self.sizes: dict[str, int] = {str(g): int(n) for g, n in (summary.get("group_rows") or result.data.get("group_sizes", {})).items()}
        settings = Settings.of_run(run, reference)
        self.settings = Settings(settings.confidence, settings.flag_ratio, settings.min_judged_rows,
                                 resolve_reference(settings.reference, self.sizes, settings.min_judged_rows))
        self.flag_ratio, self.confidence = self.settings.flag_ratio, self.settings.confidence
        self.degenerate = {int(rank): reason for rank, reason in summary.get("degenerate_ranks", {}).items()}
        why = summary.get("why") if not summary.get("replicates") and run.get("bootstrap") != 0 else None
        self.no_intervals = why or term("bootstrap", 0)
        """Why this family has no intervals, for the findings' "No verdict" (turned off, too slow by
        default on data this size, cancelled by the user, …)."""
        self.rules = verdict_rules(self.flag_ratio, self.confidence, self.settings.min_judged_rows)
        self.variants = list(dict.fromkeys(rows.variant))
        compared = getattr(result, "comparisons", None)
        self.comparisons = [] if compared is None or compared.empty else compared[compared.method == method].to_dict("records")

    def get(self, variant: str, rank: int, metric: str, group: str = "") -> Estimate | None:
        return self.table.get((variant, int(rank), group, metric))

    def value(self, variant: str, rank: int, metric: str, group: str = "") -> float | None:
        found = self.get(variant, rank, metric, group)
        return None if found is None else found[0]

    def groups(self, variant: str, rank: int, metric: str) -> dict[str, Estimate]:
        return {g: est for (v, r, g, m), est in self.table.items() if v == variant and r == rank and m == metric and g}

    def ranks(self, variant: str) -> list[int]:
        """The ranks ``variant`` has records at (at least one: ``[0]`` when none)."""
        return sorted({r for (v, r, _, _) in self.table if v == variant}) or [0]

    def level(self) -> str:
        return level(self.confidence)

    @property
    def alpha(self) -> float:
        return self.settings.alpha

    def judge(self, variant: str, metric: str, ranks=None) -> DisparityVerdict | None:
        """``variant``'s per-group ``metric`` judged (:func:`fairaudit.verdicts.judge_disparity`)."""
        return judge_disparity(self.comparisons, self.sizes, self.settings, method=self.method, variant=variant, metric=metric,
                               ranks=ranks, degenerate=self.degenerate, no_intervals=self.no_intervals)

    def worst_judged(self, variant: str, rank: int, metric: str) -> tuple[str, Estimate] | None:
        """The judged group with the largest ``metric`` (lower is better) and its estimate."""
        judged = {g: est for g, est in self.groups(variant, rank, metric).items()
                  if self.sizes.get(g, 0) >= self.settings.min_judged_rows and math.isfinite(est[0])}
        if not judged:
            return None
        group = max(judged, key=lambda g: judged[g][0])
        return group, judged[group]

    def finding(self, rank, variant, verdict, text, evidence=None, details=()) -> Finding:
        rule = self.rules.get(verdict, self.rules["info"])
        return Finding(self.method, rank, variant, verdict, text, rule, json_ready(evidence or {}), list(details))


def _has_interval(estimate: Estimate | None) -> bool:
    return estimate is not None and math.isfinite(estimate[1]) and math.isfinite(estimate[2])


def _span(estimate: Estimate | None, records: Records) -> str:
    """``"0.412 (95 % interval 0.371–0.455)"``."""
    if estimate is None:
        return "n/a"
    return with_interval(estimate[0], estimate[1], estimate[2], records.confidence)


def _above(a: Estimate | None, b: Estimate | None) -> bool:
    """``a``'s interval lies entirely above ``b``'s."""
    return _has_interval(a) and _has_interval(b) and a[1] > b[2]


def _estimate(value: Estimate | None) -> dict | None:
    """An estimate as evidence."""
    return None if value is None else {"value": value[0], "ci_low": value[1], "ci_high": value[2]}


# ============================================================================ sentences of a comparison
def _p(p: float) -> str:
    """``"p = 0.0123"`` (three significant figures, as every number), ``"p < 0.001"``."""
    return "p < 0.001" if p < 0.001 else f"p = {number(p)}"


def _list(ranks) -> str:
    """``"1, 2, 3"``."""
    return ", ".join(str(int(r)) for r in ranks)


def _alpha(records: Records) -> str:
    """α as the rules write it: ``"0.05"``."""
    return f"{round(records.alpha, 6):g}"


def _named(group: str, verdict: DisparityVerdict) -> str:
    """``group``, marked when it is the reference: ``"(reference)"`` when the user chose it, ``"(best
    served)"`` when the data did."""
    if group != verdict.reference:
        return group
    return f"{group} ({'reference' if verdict.reference_chosen == 'user' else 'best served'})"


def _comparison(records: Records, v: DisparityVerdict, pair: Pair, whose: str, what: str) -> str:
    """``"vanilla PCA's reconstruction loss is 0.340 for black against 0.0890 for white
    (reference), difference 0.250 (95 % interval 0.185–0.327)"`` (``whose``: ``"vanilla PCA's"``,
    ``"its"``)."""
    return (f"{whose} {what} is {number(pair.value)} for {_named(pair.group, v)} against {number(pair.other_value)} for "
            f"{_named(pair.other, v)}, difference {with_interval(pair.difference, pair.ci_low, pair.ci_high, records.confidence)}")


def _tolerance(pair: Pair, what: str) -> str:
    """How much worse the worse group fares, in the quantity the tolerance is applied to."""
    if pair.ratio_of == "error":
        return f"{pair.group}'s error is {times(pair.ratio)} what it would be if served like {pair.other}"
    return f"{pair.group}'s {what} is {times(pair.ratio)} {pair.other}'s"


def _failure(pair: Pair, records: Records, what: str, every: bool = False) -> str:
    """The condition of a gap that decided ``pair``'s *no evidence*, with its number: the first that
    fails of the interval, the test and the tolerance (``every``: all that fail)."""
    reasons = []
    for condition in pair.failed if every else pair.failed[:1]:
        if condition == "interval":
            reasons.append("its interval includes 0")
        elif condition == "test":
            adjusted = (f"{_p(pair.p)}, Holm-adjusted for {plural(pair.comparisons, 'comparison')} {number(pair.p_adjusted)} "
                        f"> {_alpha(records)}")
            if pair.decisive_test == "permutation":
                more = pair.null_mean >= pair.difference
                reasons.append(f"random groups of these sizes differ {'by more on average' if more else 'about as much'} "
                               f"({'mean ' + number(pair.null_mean) + '; ' if more else ''}{adjusted})")
            else:
                reasons.append(f"it is within sampling noise ({adjusted})")
        elif condition == "tolerance":
            reasons.append(f"{_tolerance(pair, what)}, below the tolerance of {times(records.flag_ratio)}")
    return "; and ".join(reasons)


def _could_see(pair: Pair) -> str:
    """What a *No evidence* could have seen: the difference the tolerance needs here when the
    tolerance decided it, else the smallest difference these group sizes let the tests detect."""
    if pair.failed[:1] == ["tolerance"] and math.isfinite(pair.tolerance_difference):
        return f" The tolerance needs a difference of at least {number(pair.tolerance_difference)} here."
    if math.isfinite(pair.detectable):
        return f" At these group sizes a difference below {number(pair.detectable)} would likely go undetected."
    return ""


def _verdict_text(records: Records, v: DisparityVerdict, title: str, what: str, where: str = "") -> str:
    """The headline of a judged disparity: the comparison the verdict rests on and the condition
    that decided it. ``where``: ``" on the held-out rows"`` and the like."""
    if v.headline is None:  # fewer than two groups large enough to judge
        text = f"No verdict{where}: fewer than two groups have at least {number(v.min_judged_rows)} rows ({term('min_judged_rows')})"
        if v.small:
            s = v.small[0]
            text += (f"; at rank {v.rank}, {title}'s {what} is {number(s.value)} for {s.group} ({plural(s.rows, 'row')}) against "
                     f"{number(s.reference_value)} for {s.reference}")
            if math.isfinite(s.detectable):
                text += f", and at this size a difference below {number(s.detectable)} would likely go undetected"
        return text + "."
    pair = v.headline
    comparison = _comparison(records, v, pair, f"{title}'s", what)
    if v.verdict == "gap":
        return (f"Gap{where} at rank {pair.rank}: {comparison}; {_tolerance(pair, what)} (tolerance {times(records.flag_ratio)}), "
                f"{_p(pair.p_adjusted)} after Holm's correction.")
    if v.verdict == "no_evidence":
        return f"No evidence of a gap{where}: at rank {pair.rank}, {comparison}, but {_failure(pair, records, what)}.{_could_see(pair)}"
    return (f"At rank {pair.rank}{where}, {comparison}. No verdict: the intervals were not computed ({v.why_not}), so this "
            "difference is not tested against sampling noise.")


def _pair_detail(records: Records, v: DisparityVerdict, pair: Pair, what: str) -> str:
    """One other comparison at the headline's rank, in a sentence."""
    head = (f"At rank {pair.rank}, {_named(pair.group, v)} against {_named(pair.other, v)}: {what} {number(pair.value)} against "
            f"{number(pair.other_value)}, difference {with_interval(pair.difference, pair.ci_low, pair.ci_high, records.confidence)}")
    if pair.verdict == "gap":
        return f"{head}: a gap ({_tolerance(pair, what)}; {_p(pair.p_adjusted)} after Holm's correction)."
    if pair.verdict == "no_evidence":
        return f"{head}: no evidence ({_failure(pair, records, what)})."
    return f"{head}: not tested."


def _disparity_details(records: Records, v: DisparityVerdict, what: str, reference: bool = False) -> list[str]:
    """What sits one click away from a disparity's headline: the reference (``reference``: for the
    family's headline finding), the tests, the ranks, the other pairs and the groups too small to
    judge."""
    out = []
    if reference and v.reference and v.headline is not None:
        out.append(
            f"Compared with {v.reference}, the reference you chose ({term('reference')})." if v.reference_chosen == "user" else
            f"Reference: {v.reference}, the best-served group with at least {number(v.min_judged_rows)} rows; every pair of "
            f"groups that large is compared ({term('reference')} names another)."
        )
    pair = v.headline
    if pair is not None and pair.tested:
        test = f"The tests at rank {pair.rank}: bootstrap {_p(pair.p_bootstrap)} (standard error {number(pair.se)})"
        if math.isfinite(pair.p_permutation):
            test += (f"; against random regroupings {_p(pair.p_permutation)} (random groups of these sizes differ by "
                     f"{number(pair.null_mean)} on average, standard deviation {number(pair.null_sd)})")
        ranks = f"rank {v.ranks[0]}" if len(v.ranks) == 1 else f"ranks {_list(v.ranks)}"
        test += (f"; the larger, Holm-adjusted over {plural(pair.comparisons, 'comparison')} (pairs of groups at {ranks}): "
                 f"{_p(pair.p_adjusted)} (α = {_alpha(records)}).")
        out.append(test)
        held = {"interval": "the interval excludes 0", "test": "the test at the Holm level", "tolerance": "the tolerance"}
        out.append(f"Conditions of a gap at rank {pair.rank}: " + "; ".join(
            f"{held[name]} — {'yes' if ok else 'no'}" for name, ok in pair.conditions.items()) + ": "
            + (f"{_tolerance(pair, what)}." if not pair.failed else f"{_failure(pair, records, what, every=True)}."))
    if v.gap_ranks and len(v.ranks) > 1:
        out.append(f"A gap at {'rank' if len(v.gap_ranks) == 1 else 'ranks'} {_list(v.gap_ranks)} of ranks {_list(v.ranks)}; "
                   f"rank {v.rank} has the largest difference.")
    out += [_pair_detail(records, v, p, what) for p in v.pairs if p is not pair]
    for s in v.small:
        out.append(
            f"{s.group} ({plural(s.rows, 'row')}) is too small to judge (fewer than {number(v.min_judged_rows)}): {what} "
            f"{number(s.value)} against {number(s.reference_value)} for {s.reference}, difference "
            f"{with_interval(s.difference, s.ci_low, s.ci_high, records.confidence)}"
            + (f"; at its size a difference below {number(s.detectable)} would likely go undetected." if math.isfinite(s.detectable) else ".")
        )
    return out


def _disparity_finding(records: Records, v: DisparityVerdict, title: str, what: str, where: str = "", headline: bool = False) -> Finding:
    """A judged disparity as a finding (``headline``: the family's first, which names its reference)."""
    return records.finding(v.rank, v.variant, v.verdict, _verdict_text(records, v, title, what, where),
                           {**v.to_dict(), "alpha": records.alpha}, _disparity_details(records, v, what, reference=headline))


# ============================================================================ disparities: vanilla and the fair variants
Cost = Callable[[int, str], tuple[str, dict]]
"""``(rank, variant) → (the fair variant's price in words, its numbers)``."""


def disparity_findings(
    records: Records,
    *,
    metric: str,
    what: str,
    fair_variants: list[str],
    cost: Cost,
) -> tuple[list[Finding], int | None]:
    """Vanilla's verdict at its headline rank and each fair variant's there (PCA, NMF).

    ``what`` names the metric in a sentence ("reconstruction loss"), ``cost(rank, variant)`` words
    the fair variant's price at ``rank`` (and gives its numbers for the evidence)."""
    if "vanilla" not in records.variants:
        return [], None
    top = records.judge("vanilla", metric)
    if top is None and not records.comparisons and records.groups("vanilla", max(records.ranks("vanilla")), metric):
        return [_without_comparisons(records)], None
    if top is None or top.rank is None:
        return [], None
    title = f"vanilla {variant_title(records.method, 'vanilla')}"
    found = [_disparity_finding(records, top, title, what, headline=True)]
    for variant in fair_variants:
        finding = _fair_finding(records, top, variant, metric, what, cost)
        if finding is not None:
            found.append(finding)
    return found, top.rank


def _without_comparisons(records: Records) -> Finding:
    """A result saved before the comparisons of groups existed (``AuditResult.comparisons``): no
    verdict, and why."""
    return records.finding(None, "vanilla", "info", "No verdict on the groups' disparities: this result carries no comparisons "
                           "of groups (it was saved by an earlier version of fairaudit); audit the data again for verdicts.")


def _fair_finding(records: Records, top: DisparityVerdict, variant: str, metric: str, what: str, cost: Cost) -> Finding | None:
    """A fair variant at vanilla's headline rank: mitigated / gap / worse / no evidence / info."""
    rank = top.rank
    a = records.judge(variant, metric, ranks=[rank])
    if a is None or a.headline is None:
        return None
    name = variant_title(records.method, variant)
    price, price_numbers = cost(rank, variant)
    mine, theirs = records.worst_judged(variant, rank, metric), records.worst_judged("vanilla", rank, metric)
    against = f"vanilla's worst {_span(theirs[1], records)}" if theirs else "vanilla"
    pair = a.headline
    equal = abs(pair.difference) <= 1e-6 * max(abs(pair.value), 1e-12)
    comparison = _comparison(records, a, pair, "its", what)  # the sentence names the variant first
    serves_worse = mine is not None and theirs is not None and _above(mine[1], theirs[1])
    opens = a.verdict == "gap" and top.verdict != "gap"
    within = math.isfinite(pair.ratio) and pair.ratio < records.flag_ratio
    if serves_worse or opens:
        reasons = []
        if serves_worse:
            reasons.append(f"its worst-off group ({mine[0]}) has {what} {_span(mine[1], records)}, above {against} beyond the intervals")
        if opens:
            reasons.append(f"it opens a gap vanilla does not have: {comparison}")
        verdict, text = "worse", f"{name} is less fair than vanilla at rank {rank}: {'; '.join(reasons)}; {price}."
    elif a.verdict == "gap":
        verdict, text = "gap", f"{name} leaves a gap at rank {rank}: {comparison}; {_tolerance(pair, what)}; {price}."
    elif top.verdict == "gap" and a.verdict == "no_evidence" and within:
        how = (f"equalises the groups' {what} at {_span(mine[1], records) if mine else number(pair.value)}" if equal else
               f"brings the largest difference, {pair.group} against {pair.other}, down to "
               f"{with_interval(pair.difference, pair.ci_low, pair.ci_high, records.confidence)}, within the tolerance of {times(records.flag_ratio)}")
        verdict, text = "mitigated", f"{name} closes the gap at rank {rank}: it {how}, against {against}; {price}."
    elif top.verdict == "gap" and a.verdict == "no_evidence":
        verdict, text = "no_evidence", f"{name} does not demonstrably close the gap at rank {rank}: {comparison}, but {_failure(pair, records, what)}; {price}."
    elif top.verdict == "gap":
        verdict, text = "info", f"{name} at rank {rank}: {comparison}, against {against}; {price}. No verdict: its intervals were not computed."
    else:
        verdict, text = "info", f"{name} at rank {rank}: {comparison}; {price}. Vanilla shows no gap to close here."
    evidence = {**a.to_dict(), "alpha": records.alpha, "cost": price_numbers,
                "worst": {"group": mine[0], **_estimate(mine[1])} if mine else None,
                "vanilla_worst": {"group": theirs[0], **_estimate(theirs[1])} if theirs else None}
    return records.finding(rank, variant, verdict, text, evidence, _disparity_details(records, a, what))


def _heldout_findings(records: Records, rank: int, metric: str, what: str, fair: list[str]) -> list[Finding]:
    """With ``holdout``: vanilla's and the first fair variant's disparity on the held-out rows."""
    found = []
    for variant in ["vanilla", *fair]:
        v = records.judge(variant, HELDOUT_PREFIX + metric, ranks=[rank])
        if v is None or v.headline is None:
            continue
        title = ("vanilla " if variant == "vanilla" else "") + variant_title(records.method, variant)
        found.append(_disparity_finding(records, v, title, f"held-out {what}", " on the held-out rows"))
    return found


# ============================================================================ leakage
def leakage_finding(records: Records, variant: str, rank: int, prefix: str = "") -> Finding | None:
    """The leakage test of ``variant``'s representation at ``rank``, as a verdict
    (:func:`fairaudit.verdicts.judge_leakage`). Same quantity and words as the leakage chart: the
    balanced accuracy of predicting the group, against chance ``1/k``."""
    measured = records.get(variant, rank, prefix + "balanced_accuracy")
    if measured is None:
        return None
    v = judge_leakage(measured, records.value(variant, rank, prefix + "leakage_pvalue"), records.sizes, records.settings,
                      method=records.method, variant=variant, rank=rank)
    if v is None:
        return None
    name = ("vanilla " if variant == "vanilla" else "") + variant_title(records.method, variant)
    what = plural(rank, "selected feature") if records.method == "fs" else f"rank-{rank} representation"
    where = f"{name}'s {what}" + (" (held-out rows)" if prefix else "")
    among = f" among the {v.groups} groups large enough to judge" if v.left_out else ""
    head = (f"From {where} a classifier predicts the group{among} with balanced accuracy {_span(measured, records)}; "
            f"chance is {number(v.chance)}")
    if v.test == "permutation":
        test = f"{_p(v.pvalue)} against the chance distribution from permuted groups"
    elif v.test == "interval":
        test = f"the {records.level()} cross-validation interval {'lies above' if v.above else 'reaches down to'} chance"
    else:
        test = "no test (no permutations and no interval)"
    if v.verdict == "info" and v.test == "" and v.above is None and len(judged_groups(records.sizes, records.settings.min_judged_rows)) < 2:
        text = (f"{head}. No verdict: fewer than two groups have at least {number(records.settings.min_judged_rows)} rows "
                f"({term('min_judged_rows')}).")
    elif v.verdict == "info":
        text = f"{head}. {test[0].upper() + test[1:]}."
    elif v.verdict == "gap":
        text = f"{head}. Leakage: above chance ({test}) and at least {number(v.tolerance)} ({times(records.flag_ratio)} chance)."
    elif v.above:
        text = (f"{head}. Above chance ({test}) but below the tolerance of {number(v.tolerance)} ({times(records.flag_ratio)} "
                "chance): detectable, small leakage.")
    else:
        below = " (below chance: noise, not an improvement)" if v.balanced_accuracy < v.chance else ""
        text = f"{head}. No detectable leakage: not above chance ({test}){below}."
    details = [f"Left out of the test as too small to judge (fewer than {number(records.settings.min_judged_rows)} rows): "
               + ", ".join(f"{g} ({plural(n, 'row')})" for g, n in v.left_out.items()) + "."] if v.left_out else []
    return records.finding(rank, variant, v.verdict, text, {**v.to_dict(), "confidence": records.confidence,
                                                            "min_judged_rows": records.settings.min_judged_rows}, details)


def _leakage_comparison(records: Records, variant: str, rank: int, base: Finding | None, against: str = "vanilla") -> Finding | None:
    """A fair variant's leakage against ``against``'s (vanilla's, or the variant a LEACE twin
    erased): mitigated / worse / its own verdict."""
    own = leakage_finding(records, variant, rank)
    if own is None or base is None:
        return own
    mine = records.get(variant, rank, "balanced_accuracy")
    theirs = records.get(against, rank, "balanced_accuracy")
    own.evidence[f"{against}_balanced_accuracy"] = json_ready(_estimate(theirs))
    name = "vanilla" if against == "vanilla" else variant_title(records.method, against)
    whose = f"{name}'s"
    if _above(mine, theirs):
        own.verdict, own.rule = "worse", records.rules["worse"]
        own.text += f" That is more leakage than {whose} {_span(theirs, records)}: less fair, beyond the intervals."
    elif base.verdict == "gap" and own.verdict == "no_evidence":
        own.verdict, own.rule = "mitigated", records.rules["mitigated"]
        gone = "Vanilla's leakage" if against == "vanilla" else f"The leakage of {name}"
        own.text += f" {gone} ({number(theirs[0])}) is gone: mitigated."
    elif _above(theirs, mine):
        own.text += f" Less than {whose} {_span(theirs, records)}, beyond the intervals."
    return own


# ============================================================================ families
FAIR_PCA_PREFERENCE = ("fair_eig", "fair_sdp", "fair_mw")

YOURS = "yours"
"""A representation the user brought (:mod:`fairaudit.yours`): judged next to vanilla like the fair
variants."""


def _total_error(records: Records, variant: str, rank: int, metric: str) -> float | None:
    groups = records.groups(variant, rank, metric)
    if not groups:
        return None
    weights = np.array([records.sizes.get(g, 0) for g in groups], dtype=float)
    if weights.sum() == 0:
        weights = np.ones(len(groups))
    return float(np.dot([est[0] for est in groups.values()], weights) / weights.sum())


def _price(before: float | None, after: float | None, what: str, extra: str = "", numbers: dict | None = None) -> tuple[str, dict]:
    """``"for +5.2 % total reconstruction error (1.20 → 1.26)"`` and its numbers."""
    if not before or after is None:
        return "cost not available", {}
    change = (after - before) / before
    return f"for {percent(change, sign=True)} {what} ({number(before)} → {number(after)}){extra}", {
        "before": before, "after": after, "change_percent": 100 * change, **(numbers or {})}


def pca_findings(result, reference: str | None = None) -> list[Finding]:
    """Vanilla PCA's loss gap (verdict), what each fair variant does there, and leakage."""
    records = Records(result, "pca", reference)
    fair = [v for v in FAIR_PCA_PREFERENCE if v in records.variants][:1] + [
        v for v in records.variants if v not in ("vanilla", *FAIR_PCA_PREFERENCE)
    ]

    def cost(rank: int, variant: str) -> tuple[str, dict]:
        before, after = _total_error(records, "vanilla", rank, "error"), _total_error(records, variant, rank, "error")
        kept = records.get(variant, rank, "variance_explained")
        extra = f", variance explained {number(kept[0])}" if kept else ""
        return _price(before, after, "total reconstruction error", extra, {"variance_explained": kept[0]} if kept else None)

    found, rank = disparity_findings(records, metric="loss", what="reconstruction loss", fair_variants=fair, cost=cost)
    if rank is None:
        return found
    for variant in fair[:1]:
        effective = records.value(variant, rank, "effective_rank")
        if effective is not None and effective > rank:
            found.append(records.finding(
                rank, variant, "info",
                f"{variant_title('pca', variant)} uses {plural(int(effective), 'direction')} at rank {rank} "
                "(Samadi et al.: fewer extra dimensions than there are groups).",
                {"effective_rank": effective, "rank": rank},
            ))
    leak = leakage_finding(records, "vanilla", rank)
    if leak:
        found.append(leak)
    found.extend(_heldout_findings(records, rank, "loss", "reconstruction loss", fair[:1]))
    worst = subgroup_finding(records, result.data.get("sensitive") or [])
    return found + ([worst] if worst else [])


# ============================================================================ the worst-served subgroup
SUBGROUP_RULE = (
    "Worst-served subgroup ({option}): every subgroup that fixes the values of one or more sensitive columns, with at "
    "least {min_rows} rows and as many outside it, is compared with the rest of the rows under vanilla PCA at every rank "
    "that is not degenerate — each loss against its own best fit. A subgroup is a gap when it is served worse than the "
    "rest by the conditions of a gap between two groups (interval, test, tolerance); each comparison's p-value is the "
    "larger of the bootstrap test's and the test against random subgroups of the same size, and Holm's correction "
    "counts every subgroup at every rank, which keeps the chance of any false gap in the whole search at α = {alpha}."
)
"""The subgroup search's rule (:mod:`fairaudit.subgroups`), filled in by :func:`subgroup_finding`."""


def subgroup_finding(records: Records, columns) -> Finding | None:
    """The worst-served subgroup (:func:`fairaudit.subgroups.judge_subgroups`) as a finding: a
    *gap* naming the subgroup, *no evidence* naming the worst one and what the search could have
    seen, or *info*; ``None`` when the audit searched no subgroup."""
    from .subgroups import judge_subgroups

    v = judge_subgroups(records.comparisons, records.settings, method=records.method, columns=columns,
                        degenerate=records.degenerate, no_intervals=records.no_intervals)
    if v is None:
        return None
    rule = SUBGROUP_RULE.format(option=term("subgroups"), min_rows=number(v.min_rows), alpha=_alpha(records))
    evidence = {**v.to_dict(), "alpha": records.alpha}
    pair, searched = v.headline, plural(v.candidates, "subgroup")
    if pair is None:
        return Finding(records.method, None, v.variant, "info", f"No subgroup searched: {v.why_not} ({term('min_judged_rows')}).",
                       rule, json_ready(evidence))
    what = "reconstruction loss"
    compared = (f"at rank {pair.rank}, vanilla PCA's {what} is {number(pair.value)} for {pair.group} ({plural(pair.rows, 'row')}) "
                f"against {number(pair.other_value)} for {pair.other}, difference "
                f"{with_interval(pair.difference, pair.ci_low, pair.ci_high, records.confidence)}")
    if v.verdict == "gap":
        text = (f"Worst-served subgroup: {pair.group}. {compared[0].upper()}{compared[1:]}; {_tolerance(pair, what)} (tolerance "
                f"{times(records.flag_ratio)}), {_p(pair.p_adjusted)} after Holm's correction over the search of {searched}.")
    elif v.verdict == "no_evidence":
        text = f"No subgroup stands out among {searched}: {compared}, but {_failure(pair, records, what)}.{_could_see(pair)}"
    else:
        text = (f"The worst-served of {searched}: {compared}. No verdict: the intervals were not computed ({v.why_not}), so this "
                "difference is not tested against sampling noise.")
    return Finding(records.method, pair.rank, v.variant, v.verdict, text, rule, json_ready(evidence), _subgroup_details(records, v, what))


def _subgroup_details(records: Records, v, what: str) -> list[str]:
    """The search (what was searched, the tests and conditions) and the next-worst subgroups."""
    pair = v.headline
    ranks = f"rank {v.ranks[0]}" if len(v.ranks) == 1 else f"ranks {_list(v.ranks)}"
    out = [f"Searched: {plural(v.candidates, 'subgroup')} of {', '.join(v.columns)} (each value of one column or several, with "
           f"at least {number(v.min_rows)} rows and as many outside it; {term('min_judged_rows')}) at {ranks}."]
    if pair.tested:
        test = f"The tests at rank {pair.rank}: bootstrap {_p(pair.p_bootstrap)} (standard error {number(pair.se)})"
        if math.isfinite(pair.p_permutation):
            test += (f"; against random subgroups of {plural(pair.rows, 'row')} {_p(pair.p_permutation)} (they differ from the "
                     f"rest by {number(pair.null_mean)} on average, standard deviation {number(pair.null_sd)})")
        out.append(test + f"; the larger, Holm-adjusted over {plural(pair.comparisons, 'comparison')} (subgroups × ranks): "
                   f"{_p(pair.p_adjusted)} (α = {_alpha(records)}).")
        if v.gaps > 1:
            out.append(f"{plural(v.gaps, 'comparison')} of a subgroup with the rest meet every condition of a gap; this one "
                       "has the largest difference.")
    for other in v.worst:
        head = (f"At rank {other.rank}, {other.group} ({plural(other.rows, 'row')}): {what} {number(other.value)} against "
                f"{number(other.other_value)}, difference {with_interval(other.difference, other.ci_low, other.ci_high, records.confidence)}")
        out.append(f"{head}: a gap too." if other.verdict == "gap" else f"{head}." if not other.tested
                   else f"{head}: no evidence ({_failure(other, records, what)}).")
    return out


FAIR_NMF_PREFERENCE = ("fair_mu", "fair_am")


def nmf_findings(result, reference: str | None = None) -> list[Finding]:
    """Standard NMF's relative-loss gap (verdict), Fairer-NMF there, and leakage."""
    records = Records(result, "nmf", reference)
    fair = [v for v in (*FAIR_NMF_PREFERENCE, YOURS) if v in records.variants]

    def cost(rank: int, variant: str) -> tuple[str, dict]:
        return _price(records.value("vanilla", rank, "total_rel_error"), records.value(variant, rank, "total_rel_error"),
                      "total relative error")

    found, rank = disparity_findings(records, metric="rel_loss", what="relative loss", fair_variants=fair, cost=cost)
    if rank is None:  # no verdict: the notes on losses below 0 still belong where those losses are shown
        return found + _negative_loss_findings(records, [r for r in records.ranks("vanilla") if r], fair)
    top = found[0].evidence.get("headline") or {}
    own = records.groups("vanilla", rank, "own_rel_error")
    if own and top.get("group") in own and top.get("other") in own:
        worse, other = top["group"], top["other"]
        found.append(records.finding(
            rank, "vanilla", "info",
            f"On their own, rank-{rank} NMFs reconstruct {worse} with relative error {number(own[worse][0])} and "
            f"{other} with {number(own[other][0])} (E_ℓ, Algorithm 1).",
            {"rank": rank, "own_rel_error": {worse: own[worse][0], other: own[other][0]}, "algorithm": 1},
        ))
    for variant in fair[:1]:
        before = records.groups("vanilla", rank, "rel_loss")
        after = records.groups(variant, rank, "rel_loss")
        raised = [g for g in after if g in before and after[g][0] > before[g][0] + 1e-12]
        if raised:
            found.append(records.finding(
                rank, variant, "info",
                f"The groups that give up accuracy for {variant_title('nmf', variant)}: "
                + ", ".join(f"{g} ({number(before[g][0])} → {number(after[g][0])})" for g in raised) + ".",
                {"rank": rank, "rel_loss": {g: {"before": before[g][0], "after": after[g][0]} for g in raised}},
            ))
    found.extend(_negative_loss_findings(records, [rank], fair))
    leak = leakage_finding(records, "vanilla", rank)
    if leak:
        found.append(leak)
    found.extend(_heldout_findings(records, rank, "rel_loss", "relative loss", fair[:1]))
    return found


def _negative_loss_findings(records: Records, ranks, fair) -> list[Finding]:
    """At each of ``ranks``, the note on relative losses below 0 (:func:`fairaudit.nmf.notes.negative_losses`)
    where vanilla or a fair variant has one."""
    from .nmf.notes import negative_losses  # here: a PCA audit imports no other family (tests/test_cli.py)

    found = []
    for rank in ranks:
        values = {(variant_title("nmf", v), g): est[0] for v in ["vanilla", *fair] for g, est in records.groups(v, rank, "rel_loss").items()}
        below = negative_losses(rank, values)
        if below:
            found.append(records.finding(rank, None, "info", below))
    return found


def cpd_findings(result, reference: str | None = None) -> list[Finding]:
    """Leakage and residual-fit gap of vanilla CP's embedding, and what each fair method at its
    default λ buys for how much fit, at the sweep's rank (no minimum over the sweep's points:
    that would pick the luckiest one)."""
    records = Records(result, "cpd", reference)
    rows = records.records
    if rows.empty or "vanilla" not in records.variants:
        return []
    sweep = [v for v in records.variants if is_sweep_variant(v)]
    ranks = sorted(set(rows["rank"]))
    usable = [r for r in ranks if r not in records.degenerate] or ranks
    rank = int(rows[rows.variant.isin(sweep)]["rank"].max()) if sweep else int(max(usable))
    table = whole_metrics(rows, "cpd", rank)
    if "vanilla" not in table.index or "balanced_accuracy" not in table.columns:
        return []
    found = []
    base = leakage_finding(records, "vanilla", rank)
    if base:
        found.append(base)
    fit = records.judge("vanilla", "residual_fit", ranks=[rank])
    if fit is not None:
        found.append(_disparity_finding(records, fit, "vanilla CP", "residual fit", headline=True))
    from .cpd import strength  # here: a PCA audit imports no other family (tests/test_cli.py)

    vanilla = table.loc["vanilla"]
    options = family_options(result.config, "cpd")
    if rank in records.degenerate:
        found.append(records.finding(rank, None, "info", (
            f"Rank {rank} is degenerate ({records.degenerate[rank]}): the embedding has directions the data do not determine, "
            f"so what the fair methods do there says little; sweep a rank below it ({term('cpd_sweep_rank')})."
        )))
    for name in ("khsic", "hsic", "fatr"):
        if name not in table.index:
            continue
        point = table.loc[name]
        leak = _leakage_comparison(records, name, rank, base)
        if leak is None:
            continue
        nk, nk0 = records.get(name, rank, "nkhsic"), records.get("vanilla", rank, "nkhsic")
        chosen = result.details.get("cpd", {}).get(name, {}).get(str(rank), {}).get("lambda_choice")
        leak.text += (
            f" At its default λ = {number(point['lam'])}: residual fit {number(point['residual_fit'])} (vanilla "
            f"{number(vanilla['residual_fit'])}), normalised KHSIC {_span(nk, records)} (vanilla {number(nk0[0]) if nk0 else 'n/a'})."
            f" The default λ was {strength.how_set(options, chosen)}."
        )
        leak.evidence.update(json_ready({"lam": point["lam"], "residual_fit": point["residual_fit"], "vanilla_residual_fit": vanilla["residual_fit"],
                                    "nkhsic": _estimate(nk), "vanilla_nkhsic": nk0[0] if nk0 else None}))
        if leak.verdict == "worse":
            leak.text += " " + _cp_next_step(records, name, rank)
        found.append(leak)
    points = table[[is_sweep_variant(v) and split_variant(v)[0] == "fatr" for v in table.index]]
    if not points.empty and vanilla["orthogonality"] > 0 and vanilla["unfairness_balanced"] > 0:
        flat = points.loc[points["orthogonality"].idxmin()]
        if flat["orthogonality"] <= 0.01 * vanilla["orthogonality"] and flat["unfairness_balanced"] >= 0.5 * vanilla["unfairness_balanced"]:
            found.append(records.finding(
                rank, "fatr", "info",
                f"FATR drives the orthogonality ‖ÂᵀS‖ from {number(vanilla['orthogonality'])} to "
                f"{number(flat['orthogonality'])}, yet the group is still predicted with balanced accuracy "
                f"{number(flat['balanced_accuracy'])}: orthogonality does not hide the group (Kim & Gittens 2021, Theorem 1).",
                {"orthogonality": vanilla["orthogonality"], "fatr_orthogonality": flat["orthogonality"],
                 "balanced_accuracy": flat["balanced_accuracy"], "year": 2021, "theorem": 1},
            ))
    return found


def _cp_next_step(records: Records, name: str, rank: int) -> str:
    """What a CP method less fair than vanilla could do instead, from its sweep's points at ``rank``
    (:func:`fairaudit.cpd.strength.next_step`)."""
    from .cpd import strength

    def get(variant, metric):
        return records.get(variant, rank, metric)

    points = [(p.lam, p) for v in records.variants if is_sweep_variant(v) and split_variant(v)[0] == name
              if (p := strength.from_records(get, v)) is not None]
    vanilla = strength.from_records(get, "vanilla")
    chance = 1.0 / max(len(records.sizes), 2)
    return strength.next_step(variant_title("cpd", name), vanilla, sorted(points, key=lambda item: item[0]), chance, rank)


def _range_text(values: list[float]) -> str:
    low, high = min(values), max(values)
    return number(low) if np.isclose(low, high) else f"{number(low)}–{number(high)}"


def _balance_text(records: Records, v: BalanceVerdict, names: str) -> str:
    """The headline of feature selection's cluster-balance verdict about the baselines."""
    pair, share, rank = v.headline, v.share, v.rank
    describe = (f"with {variant_title('fs', v.variant)}, {pair.group} has "
                f"{with_interval(share['value'], share['ci_low'], share['ci_high'], records.confidence)} of its share of the "
                f"data in its worst k-means cluster (parity {number(v.parity)})")
    flagged = [s for s, found in v.selectors.items() if found["verdict"] == "gap" and s != "fufs"]
    if v.verdict == "gap":
        return (f"Gap with {plural(rank, 'selected feature')}: {describe}, below the tolerance {number(v.threshold)}, "
                f"{_p(pair.p_adjusted)} after Holm's correction; {plural(len(flagged), 'baseline')} show it.")
    if v.verdict == "no_evidence":
        reasons = []
        for condition in pair.failed:
            if condition == "tolerance":
                reasons.append(f"not below the tolerance {number(v.threshold)}")
            elif condition == "test":
                reasons.append(f"not below {number(v.threshold)} beyond noise ({_p(pair.p)}, Holm-adjusted for "
                               f"{plural(pair.comparisons, 'comparison')} {number(pair.p_adjusted)} > {_alpha(records)})")
            elif condition == "interval":
                reasons.append("its interval reaches parity")
        seen = v.detectable_share
        detect = f" At these sizes only a share below {number(seen)} would likely be detected." if math.isfinite(seen) and seen > 0 else ""
        return f"No evidence of unbalanced clusters with {plural(rank, 'selected feature')} by {names}: at worst, {describe}, {'; and '.join(reasons)}.{detect}"
    return f"With {plural(rank, 'selected feature')}, {describe}. No verdict: no intervals ({v.why_not})."


def _balance_details(records: Records, v: BalanceVerdict) -> list[str]:
    out = [f"Reading: a group's share of its worst k-means cluster, over its share of the data, averaged over the k-means runs "
           f"(parity {number(v.parity)}); each group large enough to judge tested one-sided against {number(v.threshold)}, "
           f"Holm-adjusted over {plural(v.comparisons, 'comparison')} (groups × selectors)."]
    for selector, found in v.selectors.items():
        worst = found["worst"]
        out.append(f"{variant_title('fs', selector)}: {worst.group} {number(worst.value)}"
                   + (f" ({_p(worst.p_adjusted)} after Holm's correction)" if worst.tested else "") + f": {VERDICT_LABELS[found['verdict']]}.")
    for s in v.small:
        out.append(f"{s.group} ({plural(s.rows, 'row')}) is too small to judge (fewer than {number(v.min_judged_rows)}): its share "
                   f"{number(s.value)}; at its size only a shortfall beyond {number(s.detectable)} would likely be detected.")
    return out


def fs_findings(result, reference: str | None = None) -> list[Finding]:
    """Cluster balance of every selector (verdict), FUFS against the baselines, and leakage
    (``reference`` is accepted for a common signature: cluster balance compares each group with
    parity, not with another group)."""
    records = Records(result, "fs", reference)
    table = whole_metrics(records.records, "fs")
    baselines = [v for v in records.variants if v not in ("fufs", YOURS)]  # your representation is no baseline
    if "fufs" not in records.variants or not baselines or "alignment_protected" not in table.columns:
        return []
    ranks = sorted(set(table.loc["fufs"].index))
    gaps = {r: np.mean([table.loc[(b, r), "alignment_protected"] for b in baselines]) - table.loc[("fufs", r), "alignment_protected"] for r in ranks}
    rank = max(gaps, key=gaps.get)
    found = []
    names = ", ".join(variant_title("fs", b) for b in baselines)
    balance = judge_balance(records.comparisons, records.sizes, records.settings, method="fs", variants=[*baselines, "fufs"],
                            rank=rank, about=baselines, no_intervals=records.no_intervals)
    if balance is not None:
        found.append(records.finding(rank, balance.variant, balance.verdict, _balance_text(records, balance, names),
                                     {**balance.to_dict(), "alpha": records.alpha}, _balance_details(records, balance)))
    found.extend(_fufs_findings(records, table, rank, baselines, balance, names))
    leak = leakage_finding(records, "fufs", rank)
    if leak:
        found.append(leak)
    detail = result.details.get("fs", {}).get("fufs", {}).get(str(rank), {})
    if detail.get("proxies"):
        proxies = detail["proxies"]
        shown = ", ".join(proxies[:8]) + (" …" if len(proxies) > 8 else "")
        found.append(records.finding(rank, "fufs", "info", f"FUFS found these features most aligned with the protected attribute and steered away from them: {shown}.",
                                     {"rank": rank, "shown": min(len(proxies), 8)}))
    scaling = family_options(result.config, "fs").get("scaling", "minmax")
    if scaling == "minmax":
        found.append(records.finding(None, None, "info", "For feature selection every feature was rescaled to [0, 1] (the range of the FUFS paper's data).",
                                     {"range": [0, 1]}))
    return found


def _fufs_findings(records: Records, table: pd.DataFrame, rank: int, baselines: list[str], balance: BalanceVerdict | None,
                   names: str) -> list[Finding]:
    """FUFS against the baselines (its cluster balance and its alignment with the groups), and the
    clusters' balance, proportion and accuracy."""
    align = records.get("fufs", rank, "alignment_protected")
    others = {b: records.get(b, rank, "alignment_protected") for b in baselines}
    keeps = records.get("fufs", rank, "alignment_data")
    baseline_data = [records.value(b, rank, "alignment_data") for b in baselines]
    keeps_text = f"it keeps {number(keeps[0])} alignment with all features ({_range_text(baseline_data)} for the baselines)" if keeps else ""
    selectors = balance.selectors if balance is not None else {}
    mine = selectors.get("fufs", {}).get("worst")
    mine_share = selectors.get("fufs", {}).get("share")
    share_text = (f"{mine.group}'s share of its worst cluster "
                  f"{with_interval(mine_share['value'], mine_share['ci_low'], mine_share['ci_high'], records.confidence)}"
                  if mine is not None else "cluster balance n/a")
    head = (
        f"FUFS with {plural(rank, 'feature')}: {share_text}; alignment with the groups {_span(align, records)} "
        f"(lower is fairer) against {_range_text([o[0] for o in others.values() if o])} for {names}; {keeps_text}"
    )
    baseline_worst = {b: s["worst"] for b, s in selectors.items() if b != "fufs"}
    best_balance = max(baseline_worst, key=lambda b: baseline_worst[b].value) if baseline_worst else None

    def share(selector: str) -> Estimate | None:
        found = selectors.get(selector, {}).get("share")
        return None if found is None else (found["value"], found["ci_low"], found["ci_high"])

    worse_balance = best_balance is not None and _above(share(best_balance), share("fufs"))
    worse_alignment = all(_above(align, others[b]) for b in baselines)
    flagged = [b for b in baseline_worst if selectors[b]["verdict"] == "gap"]
    own = selectors.get("fufs", {}).get("verdict", "info")
    if worse_balance or worse_alignment:
        reasons = []
        if worse_balance:
            reasons.append(f"its clusters are less balanced than {variant_title('fs', best_balance)}'s")
        if worse_alignment:
            reasons.append("its selection follows the groups more closely than every baseline's")
        verdict, text = "worse", f"{head}. Less fair than the baselines: {' and '.join(reasons)}, beyond the intervals."
    elif flagged and own == "no_evidence":
        verdict, text = "mitigated", f"{head}. Mitigated: its clusters show no gap where {plural(len(flagged), 'baseline')} do."
    elif own == "gap":
        better = best_balance is not None and _above(share("fufs"), share(best_balance))
        verdict, text = "gap", f"{head}. Its clusters are still unbalanced (a gap by the same rule)" + (
            ", though more balanced than every baseline's beyond the intervals." if better else "."
        )
    else:
        verdict, text = ("info" if not flagged else "no_evidence"), f"{head}."
    evidence = {"rank": rank, "cluster_share": mine_share, "alignment_protected": _estimate(align),
                "baselines_alignment_protected": {b: o[0] for b, o in others.items() if o},
                "alignment_data": keeps[0] if keeps else None, "baselines_alignment_data": baseline_data, "confidence": records.confidence}
    found = [records.finding(rank, "fufs", verdict, text, evidence)]
    cluster_metrics = [m for m in ("balance", "proportion", "acc") if m in table.columns]
    values = {m: {v: table.loc[(v, rank), m] for v in [*baselines, "fufs"]} for m in cluster_metrics}
    clusters = (f"k-means clusters on FUFS's features have balance {number(values['balance']['fufs'])} (others "
                f"{_range_text([values['balance'][b] for b in baselines])}; higher is fairer) and proportion "
                f"{number(values['proportion']['fufs'])} (others {_range_text([values['proportion'][b] for b in baselines])})")
    if "acc" in values:
        clusters += f"; clustering accuracy {number(values['acc']['fufs'])} (others {_range_text([values['acc'][b] for b in baselines])})"
    found.append(records.finding(rank, "fufs", "info", clusters[0].upper() + clusters[1:] + ".", {"rank": rank, **values}))
    return found


FINDERS: dict[str, Callable] = {"pca": pca_findings, "nmf": nmf_findings, "fs": fs_findings, "cpd": cpd_findings}

HIDING_VARIANTS = {"pca": ("equal_means", "equal_means_cov")}
"""Variants built to hide the group from a classifier (Kleindessner et al. 2023: equal projected
means): their leakage is judged against vanilla's, like a LEACE twin's against its base's."""


def erasure_findings(result, method: str, rank: int | None, reference: str | None = None) -> list[Finding]:
    """The leakage of every variant built to hide the group (:data:`HIDING_VARIANTS`) against
    vanilla's, and of every ``+leace`` twin (``AuditConfig(leace=True)``) against the variant it
    erased — with what the erasure cost (``leace_distortion``; for the PCA family the
    reconstruction error, and the twin's own loss gap by the ``gap`` rule) and, with held-out rows,
    its leakage on rows the eraser never saw. At ``rank``, the family's headline rank (the largest
    audited rank when the family's findings have none)."""
    records = Records(result, method, reference)
    twins = [(v, erased_base(v)) for v in records.variants if erased_base(v) is not None]
    hiding = [(v, "vanilla") for v in HIDING_VARIANTS.get(method, ()) if v in records.variants]
    if not twins and not hiding:
        return []
    found: list[Finding] = []
    headline = rank
    for variant, against in hiding + twins:
        rank = _measured_rank(records, variant, headline)
        if rank is None:
            continue
        base = leakage_finding(records, against, rank)
        own = _leakage_comparison(records, variant, rank, base, against=against)
        if own is None:
            continue
        if variant in dict(twins):
            own.text += " " + _erasure_cost(records, variant, against, rank)
        found.append(own)
        heldout = leakage_finding(records, variant, rank, prefix=HELDOUT_PREFIX)
        if heldout is not None:
            heldout.text += " These rows took no part in fitting the representation" + (" or its eraser." if variant in dict(twins) else ".")
            found.append(heldout)
        judged = records.judge(variant, "loss", ranks=[rank]) if method == "pca" and variant in dict(twins) else None
        if judged is not None:
            found.append(_disparity_finding(records, judged, variant_title(method, variant), "reconstruction loss"))
    return found


def _measured_rank(records: Records, variant: str, rank: int | None) -> int | None:
    """``rank`` if ``variant``'s leakage is measured there, else the next rank up where it is (at a
    rank of at most ``k − 1`` LEACE may erase every direction, and the audit's note says so), else
    the largest measured one."""
    measured = sorted({r for (v, r, _, m), est in records.table.items()
                       if v == variant and m == "balanced_accuracy" and math.isfinite(est[0])})
    if not measured:
        return None
    if rank is None:
        return max(measured)
    return min((r for r in measured if r >= rank), default=max(measured))


def _erasure_cost(records: Records, variant: str, base: str, rank: int) -> str:
    """What LEACE cost a twin at ``rank``: the share of the representation it changed and, where
    the family reconstructs (PCA), the reconstruction error before and after."""
    changed = records.get(variant, rank, "leace_distortion")
    parts = []
    if changed is not None and math.isfinite(changed[0]):
        parts.append(f"LEACE changed {percent(changed[0])} of the representation's variance (the least any erasure of the "
                     f"linear information changes, Belrose et al. 2023, Theorem 4.2)")
    before, after = _total_error(records, base, rank, "error"), _total_error(records, variant, rank, "error")
    if before and after is not None:
        kept = records.value(variant, rank, "effective_rank")
        parts.append(
            f"total reconstruction error {number(before)} → {number(after)} ({percent((after - before) / before, sign=True)})"
            + (f", {plural(int(kept), 'direction')} of {rank} kept" if kept is not None else "")
        )
    return ("Cost: " + "; ".join(parts) + ".") if parts else ""


def findings(result, reference: str | Mapping[str, str | None] | None = None) -> dict[str, list[Finding]]:
    """Findings per method family present in ``result``. ``reference``: the group to compare
    every other group with (a label, or the value part of one), instead of the run's — for every
    family, or per family as ``{method: group}``; ``ParameterError`` when it is not a group large
    enough to judge. A family's own finder reads its variants; ``+leace`` twins and the variants
    built to hide the group get :func:`erasure_findings`."""
    from dataclasses import replace

    methods = list(dict.fromkeys(result.records.method))
    chosen = reference if isinstance(reference, Mapping) else dict.fromkeys(methods, reference)
    twins = result.records.variant.map(lambda v: erased_base(v) is not None)
    own = replace(result, records=result.records[~twins]) if twins.any() else result
    found = {}
    for method in methods:
        if method not in FINDERS:
            continue
        family = FINDERS[method](own, chosen.get(method))
        headline = next((f.rank for f in family if f.rank is not None), None)
        found[method] = family + erasure_findings(result, method, headline, chosen.get(method))
    for method, items in found.items():  # intervals of the replicates in so far: every verdict is provisional
        summary = (result.uncertainty or {}).get(method, {})
        if summary.get("provisional"):
            for finding in items:
                finding.provisional = int(summary["replicates_done"])
    return found
