"""Findings: what an audit's records say, each with a verdict and the rule that produced it.

``findings(result)`` returns, per method family, a list of :class:`Finding` objects (contract
3): ``family, rank, variant, verdict, text, rule, evidence``; ``str(finding)`` is its sentence.
A verdict is one of :data:`VERDICTS`:

``gap``
    a disparity whose interval excludes parity and which exceeds the stated tolerance
    (``AuditConfig.flag_ratio``, default 1.25);
``no_evidence``
    no disparity beyond the interval and the tolerance (for leakage: "no detectable leakage");
``mitigated``
    the fair variant closes a gap that vanilla has, at a stated cost;
``worse``
    the "fair" variant is less fair than vanilla (or than every baseline);
``info``
    a statement that is not a verdict (also every disparity when intervals are off).

The rules are written once, in :data:`VERDICT_RULES` (filled in by :func:`verdict_rules` with
the run's tolerance and confidence); every report prints them. Numbers are written by
:mod:`fairaudit.formatting` (three significant figures, no e-notation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .audit import (
    HELDOUT_PREFIX,
    family_options,
    family_run,
    is_sweep_variant,
    split_variant,
    whole_metrics,
)
from .formatting import (
    interval,
    level,
    number,
    percent,
    plural,
    pvalue,
    times,
    with_interval,
)
from .plots import variant_title
from .vocabulary import term

VERDICTS = ("gap", "no_evidence", "mitigated", "worse", "info")

VERDICT_RULES: dict[str, str] = {
    "gap": (
        "gap: at a rank that is not degenerate, the worst-served group fares at least {flag_ratio}× worse than the "
        "best-served one (its loss or error is at least {flag_ratio} times the best group's; for cluster balance, the "
        "least-represented group's share of its worst cluster is at most 1/{flag_ratio} of its share of the data), and "
        "the {confidence} % bootstrap interval of the difference excludes parity; for the PCA family the difference must "
        "also be one that random groups of the same sizes rarely show (a group's loss is measured against its own best "
        "fit on the same rows, which flatters small groups): its permutation p-value at most α = {alpha} divided by the "
        "number of ranks assessed. For leakage: the group is predicted "
        "from the representation above chance — the permutation test's p-value is at most α = {alpha} (without "
        "permutations: the cross-validation interval of the balanced accuracy lies above chance, 1/k) — with a "
        "balanced accuracy of at least {flag_ratio} × 1/k."
    ),
    "no_evidence": (
        "no_evidence: the difference's {confidence} % interval includes parity, or the disparity is below the "
        "tolerance of {flag_ratio}×: no evidence of a gap at the stated tolerance. For leakage: not above chance "
        "(\"no detectable leakage\"; a balanced accuracy below chance is noise, never an improvement), or above "
        "chance but below {flag_ratio} × 1/k."
    ),
    "mitigated": (
        "mitigated: vanilla has a gap at this rank and the fair variant has none by the same rule, without serving "
        "the worst-off group worse (its worst-group interval does not lie entirely above vanilla's); the cost in "
        "overall error or fit is stated."
    ),
    "worse": (
        "worse: the fair variant is less fair than vanilla (for feature selection: than every baseline): its "
        "worst-group interval lies entirely above vanilla's, or it has a gap where vanilla has none, or its leakage "
        "interval lies entirely above vanilla's."
    ),
    "info": "info: a statement of fact, not a verdict (with the intervals turned off, {off}, every disparity is info: there is no test).",
    "degenerate": (
        "Degenerate ranks (full rank or an exact fit, or every group's value numerically zero) and differences "
        "whose interval includes 0 are never reported as the largest gap."
    ),
}
"""The verdict rules, once; ``{flag_ratio}``, ``{confidence}``, ``{alpha}`` and ``{off}`` (the
option that turns the intervals off, a :func:`fairaudit.vocabulary.term`) are filled in by
:func:`verdict_rules`."""

VERDICT_LABELS: dict[str, str] = {
    "gap": "gap",
    "no_evidence": "no evidence",
    "mitigated": "mitigated",
    "worse": "worse: less fair",
    "info": "info",
}
"""Each verdict as a label for people (the report's and the dashboard's badges)."""


def verdict_rules(flag_ratio: float = 1.25, confidence: float = 0.95) -> dict[str, str]:
    """:data:`VERDICT_RULES` with the run's tolerance and confidence written in."""
    values = {"flag_ratio": number(flag_ratio), "confidence": level(confidence).removesuffix(" %"), "alpha": f"{round(1 - confidence, 6):g}",
              "off": term("bootstrap", 0)}
    return {name: rule.format(**values) for name, rule in VERDICT_RULES.items()}


@dataclass
class Finding:
    """One finding (contract 3). ``str(finding) == finding.text``."""

    family: str
    rank: int | None
    variant: str | None
    verdict: str
    text: str
    rule: str = ""
    evidence: dict = field(default_factory=dict)
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
            "evidence": {key: _json(value) for key, value in self.evidence.items()},
            "provisional": self.provisional,
        }


def _json(value):
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


# ============================================================================ reading records
Estimate = tuple[float, float, float]
"""``(value, ci_low, ci_high)``."""


class Records:
    """One family's records of a result, looked up by key, with the run's settings."""

    def __init__(self, result, method: str):
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
        self.flag_ratio = float(run.get("flag_ratio", 1.25))
        self.confidence = float(run.get("confidence", 0.95))
        summary = result.uncertainty.get(method, {}) if getattr(result, "uncertainty", None) else {}
        self.degenerate = {int(rank): reason for rank, reason in summary.get("degenerate_ranks", {}).items()}
        why = summary.get("why") if not summary.get("replicates") and run.get("bootstrap") != 0 else None
        self.no_intervals = why or term("bootstrap", 0)
        """Why this family has no intervals, for the findings' "No verdict" (turned off, too slow by
        default on data this size, cancelled by the user, …)."""
        self.rules = verdict_rules(self.flag_ratio, self.confidence)
        self.variants = list(dict.fromkeys(rows.variant))
        self.sizes = result.data.get("group_sizes", {})

    def get(self, variant: str, rank: int, metric: str, group: str = "") -> Estimate | None:
        return self.table.get((variant, int(rank), group, metric))

    def value(self, variant: str, rank: int, metric: str, group: str = "") -> float | None:
        found = self.get(variant, rank, metric, group)
        return None if found is None else found[0]

    def groups(self, variant: str, rank: int, metric: str) -> dict[str, Estimate]:
        return {g: est for (v, r, g, m), est in self.table.items() if v == variant and r == rank and m == metric and g}

    def ranks(self, variant: str, metric: str) -> list[int]:
        return sorted({r for (v, r, g, m) in self.table if v == variant and m == metric})

    def level(self) -> str:
        return level(self.confidence)

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def assessed(self, variant: str, metric: str) -> int:
        """How many ranks of ``variant`` are tested for a gap in ``metric`` (not degenerate)."""
        return sum(1 for r in self.ranks(variant, metric) if r not in self.degenerate)

    def finding(self, rank, variant, verdict, text, evidence=None) -> Finding:
        rule = self.rules.get(verdict, self.rules["info"])
        evidence = {key: _json(value) for key, value in (evidence or {}).items()}  # NaN → None: comparable, JSON-ready
        return Finding(self.method, rank, variant, verdict, text, rule, evidence)


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


# ============================================================================ disparities
@dataclass
class Assessment:
    """A per-group, lower-is-better metric of one fit judged by the ``gap`` rule."""

    variant: str
    rank: int
    worst: str
    best: str
    worst_value: Estimate
    best_value: Estimate
    gap: Estimate | None
    ratio: Estimate | None
    degenerate: str | None
    verdict: str | None  # "gap", "no_evidence", "info" (no interval), None (degenerate)
    error_ratio: Estimate | None = None
    pvalue: float | None = None

    def within_tolerance(self, flag_ratio: float) -> bool:
        """The worst group fares less than ``flag_ratio`` times worse than the best (point values;
        the error ratio where there is one)."""
        if self.error_ratio is not None and math.isfinite(self.error_ratio[0]):
            return self.error_ratio[0] < flag_ratio
        high, low = self.worst_value[0], self.best_value[0]
        return high <= 0 or high < flag_ratio * max(low, 0.0)

    def evidence(self) -> dict:
        return {
            "worst_group": self.worst,
            "best_group": self.best,
            "worst": list(self.worst_value),
            "best": list(self.best_value),
            "gap": list(self.gap) if self.gap else None,
            "ratio": list(self.ratio) if self.ratio else None,
            "error_ratio": list(self.error_ratio) if self.error_ratio else None,
            "gap_pvalue": self.pvalue,
        }


def assess(records: Records, variant: str, rank: int, metric: str, gap: str, ratio: str, prefix: str = "") -> Assessment | None:
    """Judge ``metric`` (per group) of ``variant`` at ``rank`` by the ``gap`` rule; ``None`` if
    there are fewer than two groups.

    The tolerance applies to the error ratio (``error_ratio`` / ``rel_error_ratio``, see
    :class:`fairaudit.uncertainty.Disparity`) where the family records one, else to the plain
    ratio of the two groups' values. Where a permutation p-value of the gap is recorded
    (``loss_gap_pvalue``: the gap against random groups of the same sizes), it must be at most
    α divided by the number of ranks assessed (Bonferroni over the rank sweep)."""
    groups = records.groups(variant, rank, prefix + metric)
    groups = {g: est for g, est in groups.items() if math.isfinite(est[0])}
    if len(groups) < 2:
        return None
    worst = max(groups, key=lambda g: groups[g][0])
    best = min(groups, key=lambda g: groups[g][0])
    high, low = groups[worst][0], groups[best][0]
    scale = max((abs(est[0]) for r in records.ranks(variant, prefix + metric) for est in records.groups(variant, r, prefix + metric).values()), default=0.0)
    degenerate = records.degenerate.get(rank)
    if degenerate is None and max(abs(high), abs(low)) <= 1e-9 * max(scale, 1e-300):
        degenerate = "every group's value is numerically zero"
    difference = records.get(variant, rank, prefix + gap)
    error_ratio = records.get(variant, rank, prefix + ERROR_RATIOS.get(metric, "")) if metric in ERROR_RATIOS else None
    p = records.value(variant, rank, prefix + gap + "_pvalue")
    if error_ratio is not None and math.isfinite(error_ratio[0]):
        material = error_ratio[0] >= records.flag_ratio
    else:
        material = high > 0 and high >= records.flag_ratio * max(low, 0.0)
    tested = p is None or p <= records.alpha / max(records.assessed(variant, prefix + metric), 1)
    if degenerate:
        verdict = None
    elif not _has_interval(difference):
        verdict = "info"
    elif difference[1] > 0 and material and tested:
        verdict = "gap"
    else:
        verdict = "no_evidence"
    return Assessment(
        variant, rank, worst, best, groups[worst], groups[best], difference, records.get(variant, rank, prefix + ratio),
        degenerate, verdict, error_ratio, p,
    )


ERROR_RATIOS = {"loss": "error_ratio", "rel_loss": "rel_error_ratio"}
"""Per-group loss → the record the ``gap`` verdict's tolerance applies to."""


def headline(records: Records, variant: str, metric: str, gap: str, ratio: str) -> tuple[Assessment | None, list[Assessment]]:
    """The rank to report for ``variant``: the largest difference (worst − best group) among
    ranks with a ``gap`` verdict, else among the assessable ranks (ratios are left out of the
    choice: a near-zero best group makes any ratio huge). Returns it and every assessable rank's
    assessment."""
    found = [a for r in records.ranks(variant, metric) if (a := assess(records, variant, r, metric, gap, ratio))]
    usable = [a for a in found if a.verdict is not None]
    gaps = [a for a in usable if a.verdict == "gap"]
    pool = gaps or usable
    if not pool:
        return None, usable
    return max(pool, key=lambda a: a.worst_value[0] - a.best_value[0]), usable


SMALL_GROUP_ROWS = 30
"""A finding about a group with fewer rows says so: its intervals rest on few rows."""


def _disparity_sentence(records: Records, a: Assessment, title: str, what: str, own: str) -> str:
    """How ``a``'s worst and best group compare, with intervals, in the quantity the tolerance
    is applied to (the error ratio where there is one, else the plain ratio)."""
    level = records.level()
    worst, best = a.worst_value, a.best_value
    plain_ratio = a.error_ratio is None and a.ratio is not None and math.isfinite(a.ratio[0])
    if plain_ratio:
        comparison = f"{title}'s {what} for {a.worst} is {times(a.ratio[0])} {a.best}'s ({number(worst[0])} vs {number(best[0])}"
    elif a.error_ratio is None:
        comparison = f"{title}'s {what} for {a.worst} is {number(worst[0])} while {a.best}'s is {number(best[0])} ({own}"
    else:
        times_as_much = f"{number(a.ratio[0])} times as much" if a.ratio is not None and math.isfinite(a.ratio[0]) else ""
        comparison = f"{title}'s {what} is {number(worst[0])} for {a.worst} against {number(best[0])} for {a.best} ({times_as_much}"
    if a.gap is not None and _has_interval(a.gap):
        comparison += ("; " if comparison[-1] != "(" else "") + f"difference {number(a.gap[0])}, {level} interval {interval(a.gap[1], a.gap[2])}"
    comparison = comparison.removesuffix(" (") + (")" if not comparison.endswith(" (") else "")
    if a.error_ratio is not None and math.isfinite(a.error_ratio[0]):
        comparison += (
            f": {a.worst}'s error is {times(a.error_ratio[0])} what it would be if it were served as well as {a.best}"
        )
    small = [g for g in (a.worst, a.best) if 0 < records.sizes.get(g, SMALL_GROUP_ROWS) < SMALL_GROUP_ROWS]
    if small:
        comparison += " — " + ", ".join(f"{g} has only {plural(records.sizes[g], 'row')}" for g in small) + ": read with care"
    return comparison


def disparity_findings(
    records: Records,
    *,
    metric: str,
    gap: str,
    ratio: str,
    what: str,
    own: str,
    fair_variants: list[str],
    cost: Callable[[int, str], str],
) -> tuple[list[Finding], int | None]:
    """Vanilla's verdict at its headline rank and each fair variant's there (PCA, NMF, CP).

    ``what`` names the metric in a sentence ("reconstruction loss"), ``own`` says what a value
    of 0 means ("served as well as by its own PCA"), ``cost(rank, variant)`` words the fair
    variant's price at ``rank``.
    """
    if "vanilla" not in records.variants:
        return [], None
    top, usable = headline(records, "vanilla", metric, gap, ratio)
    if top is None:
        return [], None
    title = variant_title(records.method, "vanilla")
    flag = times(records.flag_ratio)
    sentence = _disparity_sentence(records, top, f"vanilla {title}", what, own)
    gaps = sum(a.verdict == "gap" for a in usable)
    if top.verdict == "gap":
        text = (
            f"Gap at rank {top.rank}: {sentence}. The difference's interval excludes 0 and the worst group fares at least "
            f"{flag} worse. {plural(gaps, 'rank')} of {len(usable)} {'shows' if gaps == 1 else 'show'} a gap; this one the largest difference."
        )
    elif top.verdict == "no_evidence":
        text = (
            f"No evidence of a gap: at no rank does the {what} differ between groups beyond its {records.level()} interval "
            f"and the tolerance of {flag}. The largest difference, at rank {top.rank}: {sentence}."
        )
    else:
        text = (
            f"At rank {top.rank}, {sentence}. No verdict: the intervals were not computed ({records.no_intervals}), so this "
            "difference is not tested against sampling noise."
        )
    found = [records.finding(top.rank, "vanilla", top.verdict, text, top.evidence())]
    vanilla_gap = top.verdict == "gap"
    for variant in fair_variants:
        a = assess(records, variant, top.rank, metric, gap, ratio)
        if a is None or a.verdict is None:
            continue
        name = variant_title(records.method, variant)
        level = records.level()
        against = f"vanilla's worst {_span(top.worst_value, records)}"
        price = cost(top.rank, variant)
        equal = a.gap is not None and abs(a.gap[0]) <= 1e-6 * max(abs(a.worst_value[0]), 1e-12)
        mine = f"the groups' {what} at {_span(a.worst_value, records)}" if equal else _disparity_sentence(records, a, name, what, own)
        serves_worse = _above(a.worst_value, top.worst_value)
        opens = a.verdict == "gap" and not vanilla_gap
        if serves_worse or opens:
            reasons = []
            if serves_worse:
                reasons.append(f"its worst-off group ({a.worst}) has {what} {_span(a.worst_value, records)}, above {against} beyond the intervals")
            if opens:
                reasons.append(f"it opens a gap vanilla does not have: {_disparity_sentence(records, a, name, what, own)}")
            verdict, text = "worse", f"{name} is less fair than vanilla at rank {top.rank}: {'; '.join(reasons)}; {price}."
        elif a.verdict == "gap":
            verdict, text = "gap", f"{name} leaves a gap at rank {top.rank}: {_disparity_sentence(records, a, name, what, own)}; {price}."
        elif vanilla_gap and a.verdict == "no_evidence" and a.within_tolerance(records.flag_ratio):
            how = f"equalises {mine}" if equal else f"keeps the disparity within the tolerance of {flag} ({mine})"
            verdict, text = "mitigated", f"{name} closes the gap at rank {top.rank}: it {how}, against {against}; {price}."
        elif vanilla_gap and a.verdict == "no_evidence":
            verdict = "no_evidence"
            text = (
                f"{name} does not demonstrably close the gap at rank {top.rank}: {mine} — the groups still differ by more "
                f"than {flag} at the point estimate, but the {level} interval of the difference includes 0; {price}."
            )
        elif vanilla_gap:  # no intervals for this variant (not bootstrapped)
            verdict, text = "info", f"{name} at rank {top.rank}: {mine}, against {against}; {price}. No verdict: its intervals were not computed."
        else:
            verdict, text = "info", f"{name} at rank {top.rank}: {mine}, against {against}; {price}. Vanilla shows no gap to close here."
        found.append(records.finding(top.rank, variant, verdict, text, a.evidence()))
    return found, top.rank


def leakage_finding(records: Records, variant: str, rank: int, prefix: str = "") -> Finding | None:
    """The leakage test of ``variant``'s representation at ``rank``, as a verdict.

    Same quantity and words as the leakage chart: the balanced accuracy of predicting the group,
    against chance ``1/k``."""
    measured = records.get(variant, rank, prefix + "balanced_accuracy")
    if measured is None or not math.isfinite(measured[0]):
        return None
    k = max(len(records.sizes), 2)
    chance = 1.0 / k
    p = records.value(variant, rank, prefix + "leakage_pvalue")
    level = records.level()
    alpha = records.alpha
    tolerance = records.flag_ratio * chance
    name = ("vanilla " if variant == "vanilla" else "") + variant_title(records.method, variant)
    what = plural(rank, "selected feature") if records.method == "fs" else f"rank-{rank} representation"
    where = f"{name}'s {what}" + (" (held-out rows)" if prefix else "")
    if p is not None and math.isfinite(p):
        above = p <= alpha
        test = f"{pvalue(p)} against the chance distribution from permuted groups"
    elif _has_interval(measured):
        above = measured[1] > chance
        test = f"the {level} cross-validation interval {'lies above' if above else 'reaches down to'} chance"
    else:
        above = None
        test = "no test (no permutations and no interval)"
    head = f"From {where} a classifier predicts the group with balanced accuracy {_span(measured, records)}; chance is {number(chance)}"
    evidence = {"balanced_accuracy": list(measured), "chance": chance, "pvalue": p, "tolerance": tolerance}
    if above is None:
        return records.finding(rank, variant, "info", f"{head}. {test.capitalize()}.", evidence)
    if above and measured[0] >= tolerance:
        verdict, tail = "gap", f"Leakage: above chance ({test}) and at least {number(tolerance)} ({times(records.flag_ratio)} chance)."
    elif above:
        verdict, tail = "no_evidence", f"Above chance ({test}) but below the tolerance of {number(tolerance)} ({times(records.flag_ratio)} chance): detectable, small leakage."
    else:
        below = " (below chance: noise, not an improvement)" if measured[0] < chance else ""
        verdict, tail = "no_evidence", f"No detectable leakage: not above chance ({test}){below}."
    return records.finding(rank, variant, verdict, f"{head}. {tail}", evidence)


def _leakage_comparison(records: Records, variant: str, rank: int, base: Finding | None) -> Finding | None:
    """A fair variant's leakage against vanilla's: mitigated / worse / its own verdict."""
    own = leakage_finding(records, variant, rank)
    if own is None or base is None:
        return own
    mine = records.get(variant, rank, "balanced_accuracy")
    theirs = records.get("vanilla", rank, "balanced_accuracy")
    if _above(mine, theirs):
        own.verdict, own.rule = "worse", records.rules["worse"]
        own.text += f" That is more leakage than vanilla's {_span(theirs, records)}: less fair, beyond the intervals."
    elif base.verdict == "gap" and own.verdict == "no_evidence":
        own.verdict, own.rule = "mitigated", records.rules["mitigated"]
        own.text += f" Vanilla's leakage ({number(theirs[0])}) is gone: mitigated."
    elif _above(theirs, mine):
        own.text += f" Less than vanilla's {_span(theirs, records)}, beyond the intervals."
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


def pca_findings(result) -> list[Finding]:
    """Vanilla PCA's loss gap (verdict), what each fair variant does there, and leakage."""
    records = Records(result, "pca")
    fair = [v for v in FAIR_PCA_PREFERENCE if v in records.variants][:1] + [v for v in ("jevd", "cov_fair", YOURS) if v in records.variants]

    def cost(rank: int, variant: str) -> str:
        before, after = _total_error(records, "vanilla", rank, "error"), _total_error(records, variant, rank, "error")
        kept = records.get(variant, rank, "variance_explained")
        if not before or after is None:
            return "cost not available"
        return (
            f"for {percent((after - before) / before, sign=True)} total reconstruction error ({number(before)} → {number(after)})"
            + (f", variance explained {number(kept[0])}" if kept else "")
        )

    found, rank = disparity_findings(
        records, metric="loss", gap="loss_gap", ratio="loss_ratio", what="reconstruction loss",
        own="served as well as by its own PCA", fair_variants=fair, cost=cost,
    )
    if rank is None:
        return found
    for variant in fair[:1]:
        effective = records.value(variant, rank, "effective_rank")
        if effective is not None and effective > rank:
            found.append(records.finding(
                rank, variant, "info",
                f"{variant_title('pca', variant)} uses {plural(int(effective), 'direction')} at rank {rank} "
                "(Samadi et al.: at most k − 1 extra dimensions for k groups).",
                {"effective_rank": effective},
            ))
    leak = leakage_finding(records, "vanilla", rank)
    if leak:
        found.append(leak)
    found.extend(_heldout_findings(records, rank, "loss", "loss_gap", "loss_ratio", "reconstruction loss", fair[:1]))
    return found


def _heldout_findings(records: Records, rank: int, metric: str, gap: str, ratio: str, what: str, fair: list[str]) -> list[Finding]:
    """With ``holdout``: vanilla's and the first fair variant's disparity on the held-out rows."""
    found = []
    for variant in ["vanilla", *fair]:
        a = assess(records, variant, rank, metric, gap, ratio, prefix=HELDOUT_PREFIX)
        if a is None or a.verdict is None:
            continue
        name = variant_title(records.method, variant)
        sentence = _disparity_sentence(records, a, name, f"held-out {what}", "served as well as by its own model")
        labels = {"gap": "a gap on the held-out rows", "no_evidence": "no evidence of a gap on the held-out rows", "info": "not tested (no intervals)"}
        found.append(records.finding(rank, variant, a.verdict, f"Held-out rows, rank {rank}: {sentence}: {labels[a.verdict]}.", a.evidence()))
    return found


FAIR_NMF_PREFERENCE = ("fair_mu", "fair_am")


def nmf_findings(result) -> list[Finding]:
    """Standard NMF's relative-loss gap (verdict), Fairer-NMF there, and leakage."""
    records = Records(result, "nmf")
    fair = [v for v in (*FAIR_NMF_PREFERENCE, YOURS) if v in records.variants]

    def cost(rank: int, variant: str) -> str:
        before, after = records.value("vanilla", rank, "total_rel_error"), records.value(variant, rank, "total_rel_error")
        if not before or after is None:
            return "cost not available"
        return f"for {percent((after - before) / before, sign=True)} total relative error ({number(before)} → {number(after)})"

    found, rank = disparity_findings(
        records, metric="rel_loss", gap="rel_loss_gap", ratio="rel_loss_ratio", what="relative loss",
        own="served as well as by an NMF of its own", fair_variants=fair, cost=cost,
    )
    if rank is None:
        return found
    top = found[0].evidence
    own = records.groups("vanilla", rank, "own_rel_error")
    if own and top.get("worst_group") in own:
        worst, best = top["worst_group"], top["best_group"]
        found.append(records.finding(
            rank, "vanilla", "info",
            f"On their own, rank-{rank} NMFs reconstruct {worst} with relative error {number(own[worst][0])} and "
            f"{best} with {number(own[best][0])} (E_ℓ, Algorithm 1).",
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
            ))
    leak = leakage_finding(records, "vanilla", rank)
    if leak:
        found.append(leak)
    found.extend(_heldout_findings(records, rank, "rel_loss", "rel_loss_gap", "rel_loss_ratio", "relative loss", fair[:1]))
    return found


def cpd_findings(result) -> list[Finding]:
    """Leakage and residual-fit gap of vanilla CP's embedding, and what each fair method at its
    default λ buys for how much fit, at the sweep's rank (no minimum over the sweep's points:
    that would pick the luckiest one)."""
    records = Records(result, "cpd")
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
    a = assess(records, "vanilla", rank, "residual_fit", "residual_fit_gap", "residual_fit_ratio")
    if a is not None and a.verdict is not None:
        sentence = _disparity_sentence(records, a, "vanilla CP", "residual fit", "reproduced exactly")
        words = {"gap": "a gap in how well the groups' entities are reproduced", "no_evidence": "no evidence of a gap in fit between the groups", "info": "not tested (no intervals)"}
        found.append(records.finding(rank, "vanilla", a.verdict, f"At rank {rank}, {sentence}: {words[a.verdict]}.", a.evidence()))
    vanilla = table.loc["vanilla"]
    for name in ("khsic", "hsic", "fatr"):
        if name not in table.index:
            continue
        point = table.loc[name]
        leak = _leakage_comparison(records, name, rank, base)
        if leak is None:
            continue
        nk, nk0 = records.get(name, rank, "nkhsic"), records.get("vanilla", rank, "nkhsic")
        leak.text += (
            f" At its default λ = {number(point['lam'])}: residual fit {number(point['residual_fit'])} (vanilla "
            f"{number(vanilla['residual_fit'])}), normalised KHSIC {_span(nk, records)} (vanilla {number(nk0[0]) if nk0 else 'n/a'})."
        )
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
            ))
    return found


def _range_text(values: list[float]) -> str:
    low, high = min(values), max(values)
    return number(low) if np.isclose(low, high) else f"{number(low)}–{number(high)}"


def fs_findings(result) -> list[Finding]:
    """Cluster balance of every selector (verdict), FUFS against the baselines, and leakage."""
    records = Records(result, "fs")
    table = whole_metrics(records.records, "fs")
    baselines = [v for v in records.variants if v != "fufs"]
    if "fufs" not in records.variants or not baselines or "alignment_protected" not in table.columns:
        return []
    ranks = sorted(set(table.loc["fufs"].index))
    gaps = {r: np.mean([table.loc[(b, r), "alignment_protected"] for b in baselines]) - table.loc[("fufs", r), "alignment_protected"] for r in ranks}
    rank = max(gaps, key=gaps.get)
    flag = records.flag_ratio
    found = []

    def balance_verdict(variant: str) -> tuple[str, Estimate | None]:
        est = records.get(variant, rank, "relative_balance")
        if est is None or not math.isfinite(est[0]):
            return "info", est
        if not _has_interval(est):
            return "info", est
        return ("gap" if est[2] < 1 and est[0] <= 1 / flag else "no_evidence"), est

    verdicts = {v: balance_verdict(v) for v in [*baselines, "fufs"]}
    names = ", ".join(variant_title("fs", b) for b in baselines)
    flagged = [b for b in baselines if verdicts[b][0] == "gap"]
    worst = min(baselines, key=lambda b: verdicts[b][1][0] if verdicts[b][1] else math.inf)
    est = verdicts[worst][1]
    describe = (
        f"the least-represented group has {_span(est, records)} of its fair share in its worst k-means cluster "
        f"(relative balance: 1 = parity, 0 = a cluster without it)"
    )
    if flagged:
        text = (
            f"Gap with {plural(rank, 'selected feature')}: clusters on the fairness-unaware selections are unbalanced — with "
            f"{variant_title('fs', worst)} {describe}; {plural(len(flagged), 'baseline')} of {len(baselines)} at or below "
            f"1/{number(flag)} of parity, the interval below 1."
        )
        verdict = "gap"
    elif all(verdicts[b][0] == "info" for b in baselines):
        text, verdict = f"With {plural(rank, 'selected feature')}, with {variant_title('fs', worst)} {describe}. No verdict: no intervals ({records.no_intervals}).", "info"
    else:
        text, verdict = f"No evidence of unbalanced clusters with {plural(rank, 'selected feature')} by {names}: at worst, with {variant_title('fs', worst)}, {describe}.", "no_evidence"
    found.append(records.finding(rank, worst, verdict, text, {"relative_balance": list(est) if est else None}))

    mine = verdicts["fufs"][1]
    align = records.get("fufs", rank, "alignment_protected")
    others = {b: records.get(b, rank, "alignment_protected") for b in baselines}
    best_balance = max(baselines, key=lambda b: verdicts[b][1][0] if verdicts[b][1] else -math.inf)
    worse_balance = _above(verdicts[best_balance][1], mine)
    worse_alignment = all(_above(align, others[b]) for b in baselines)
    keeps = records.get("fufs", rank, "alignment_data")
    keeps_text = f"it keeps {number(keeps[0])} alignment with all features ({_range_text([records.value(b, rank, 'alignment_data') for b in baselines])} for the baselines)" if keeps else ""
    head = (
        f"FUFS with {plural(rank, 'feature')}: relative balance {_span(mine, records)}; alignment with the groups {_span(align, records)} "
        f"(lower is fairer) against {_range_text([o[0] for o in others.values() if o])} for {names}; {keeps_text}"
    )
    if worse_balance or worse_alignment:
        reasons = []
        if worse_balance:
            reasons.append(f"its clusters are less balanced than {variant_title('fs', best_balance)}'s")
        if worse_alignment:
            reasons.append("its selection follows the groups more closely than every baseline's")
        verdict, text = "worse", f"{head}. Less fair than the baselines: {' and '.join(reasons)}, beyond the intervals."
    elif flagged and verdicts["fufs"][0] == "no_evidence":
        verdict, text = "mitigated", f"{head}. Mitigated: its clusters show no gap where {plural(len(flagged), 'baseline')} do."
    elif verdicts["fufs"][0] == "gap":
        better = _above(mine, verdicts[best_balance][1])
        verdict, text = "gap", f"{head}. Its clusters are still unbalanced (a gap by the same rule)" + (
            ", though more balanced than every baseline's beyond the intervals." if better else "."
        )
    else:
        verdict, text = ("info" if not flagged else "no_evidence"), f"{head}."
    found.append(records.finding(rank, "fufs", verdict, text, {"relative_balance": list(mine) if mine else None, "alignment_protected": list(align) if align else None}))

    clusters = f"k-means clusters on FUFS's features have balance {number(table.loc[('fufs', rank), 'balance'])} (others {_range_text([table.loc[(b, rank), 'balance'] for b in baselines])}; higher is fairer) and proportion {number(table.loc[('fufs', rank), 'proportion'])} (others {_range_text([table.loc[(b, rank), 'proportion'] for b in baselines])})"
    if "acc" in table.columns:
        clusters += f"; clustering accuracy {number(table.loc[('fufs', rank), 'acc'])} (others {_range_text([table.loc[(b, rank), 'acc'] for b in baselines])})"
    found.append(records.finding(rank, "fufs", "info", clusters[0].upper() + clusters[1:] + "."))
    leak = leakage_finding(records, "fufs", rank)
    if leak:
        found.append(leak)
    detail = result.details.get("fs", {}).get("fufs", {}).get(str(rank), {})
    if detail.get("proxies"):
        proxies = detail["proxies"]
        shown = ", ".join(proxies[:8]) + (" …" if len(proxies) > 8 else "")
        found.append(records.finding(rank, "fufs", "info", f"FUFS found these features most aligned with the protected attribute and steered away from them: {shown}."))
    scaling = family_options(result.config, "fs").get("scaling", "minmax")
    if scaling == "minmax":
        found.append(records.finding(None, None, "info", "For feature selection every feature was rescaled to [0, 1] (the range of the FUFS paper's data)."))
    return found


FINDERS: dict[str, Callable] = {"pca": pca_findings, "nmf": nmf_findings, "fs": fs_findings, "cpd": cpd_findings}


def findings(result) -> dict[str, list[Finding]]:
    """Findings per method family present in ``result``."""
    methods = list(dict.fromkeys(result.records.method))
    found = {method: FINDERS[method](result) for method in methods if method in FINDERS}
    for method, items in found.items():  # intervals of the replicates in so far: every verdict is provisional
        summary = (result.uncertainty or {}).get(method, {})
        if summary.get("provisional"):
            for finding in items:
                finding.provisional = int(summary["replicates_done"])
    return found
