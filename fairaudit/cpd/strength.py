"""A fair CP method's default strength λ, chosen on the frontier the audit sweeps (ours, issue 24).

Kim & Gittens (2021) fix λ for their synthetic data (Fig. 2b) and sweep it to draw the frontier
of residual fit against unfairness (Figs. 2a, 3a); they give no rule for new data. A fixed λ —
the paper's, or our data-scaled ``λ_ref`` (:mod:`fairaudit.cpd.sweep`) — served some data and
harmed others: on a 397-row salaries table by sex (8 one-hot features) all three methods at
``λ_ref`` were *less* fair than vanilla CP (the group predicted with balanced accuracy 1.00 where
vanilla's 0.59 is chance), and on the App. A.8 sample ``λ_ref/100`` already costs most of what
any λ costs in fit. The rule below reads the sweep the audit runs anyway.

**What every method is for.** Hiding the group from the entity embedding: the audit's leakage
test, the balanced accuracy ``b`` with which a classifier predicts the group from the embedding
(its cross-validation interval beside it), above chance ``1/k``. The *leakage* of a fit is
``max(b − 1/k, 0)`` (a balanced accuracy below chance is noise, not fairness). Each method's own
penalty (‖ÂᵀS‖, HSIC, nKHSIC) is what it minimises, not what it is for; FATR can drive its own to 0
and hide nothing (Kim & Gittens, Theorem 1).

**The rule** (:func:`choose`), at the sweep's rank, on the sweep's grid (ascending λ):

1. *Admissible* points keep the fit: they give up at most :data:`FIT_LOSS_CAP` (10 %) of the
   energy vanilla CP explains, ``1 − r_λ² ≥ (1 − 0.1)(1 − r_0²)`` with ``r`` the residual fit.
2. The most leakage an admissible point removes, ``G`` (vanilla's leakage minus the smallest).
3. If ``G > 0`` and some admissible point's leakage interval lies entirely below vanilla's (the
   method demonstrably hides the group here), the default is the smallest admissible λ that
   removes at least :data:`REDUCTION_SHARE` (90 %) of ``G``: the weakest strength that reaches
   (nearly) all the fairness the method reaches on these data — the knee of the frontier, where
   more λ buys at most the last tenth.
4. Otherwise no λ lowers the leakage beyond the intervals: the default is the smallest admissible
   λ whose leakage interval does not lie entirely above vanilla's — the weakest strength, which
   gives up the least fit and is not less fair.
5. No admissible point, or none that is not less fair: the smallest λ of the grid, and the
   choice says why (the findings then name what would not be worse, or that nothing is).

The choice is a position on the grid, so it carries to every rank as the same multiple of that
rank's ``λ_ref`` (the same absolute λ for the paper's or a given grid), and to every bootstrap
replicate: fixed, not re-chosen per replicate (a replicate would need the whole sweep again).
It is deterministic for a seed: the fits and the leakage tests are seeded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..formatting import number, plural, with_interval
from ..vocabulary import term

FIT_LOSS_CAP = 0.10
"""The largest share of the energy vanilla CP explains (``1 − r_0²``) a default λ may give up."""

REDUCTION_SHARE = 0.90
"""The share of the best admissible reduction of leakage the default λ must reach."""

RULES = ("frontier", "reference", "paper")
"""How the default λ of a fair method is set (the CP audit's option ``lambda_choice``; a number
sets it outright): ``"frontier"`` — chosen on the sweep by :func:`choose` (ours, the default of our
formulation); ``"reference"`` — the grid point nearest ``λ_ref`` (ours, the previous default);
``"paper"`` — the paper's Fig. 2b weight (:data:`fairaudit.cpd.estimator.PAPER_LAMBDA`, the default
of the paper's formulation)."""


@dataclass(frozen=True)
class Point:
    """A fit on the frontier: its λ, residual fit and leakage test (balanced accuracy with its
    interval)."""

    lam: float
    residual_fit: float
    balanced: tuple[float, float, float]

    def leakage(self, chance: float) -> float:
        """Balanced accuracy above chance (0 at or below chance)."""
        return max(self.balanced[0] - chance, 0.0)

    def above(self, other: Point) -> bool:
        """This point's leakage interval lies entirely above ``other``'s (less fair, beyond the intervals)."""
        return _finite(self.balanced) and _finite(other.balanced) and self.balanced[1] > other.balanced[2]

    def keeps_fit(self, vanilla: Point) -> bool:
        """Gives up at most :data:`FIT_LOSS_CAP` of the energy vanilla explains."""
        return 1.0 - self.residual_fit**2 >= (1.0 - FIT_LOSS_CAP) * (1.0 - vanilla.residual_fit**2)


def _finite(estimate: tuple[float, float, float]) -> bool:
    return all(math.isfinite(v) for v in estimate)


@dataclass(frozen=True)
class Choice:
    """The default λ of one method: ``index`` on the sweep's grid (ascending), ``lam`` there,
    ``reason`` (``"reaches"``, ``"no_gain"``, ``"no_admissible"``, ``"all_worse"``) and ``text``,
    the sentence that cites the rule with the numbers that decided it."""

    index: int
    lam: float
    reason: str
    text: str


def choose(vanilla: Point, points: Sequence[Point | None], chance: float, rank: int) -> Choice | None:
    """The default λ on the frontier ``points`` (the sweep at ``rank``, ascending λ; ``None`` for
    a fit that diverged) against ``vanilla`` (module docstring: the rule). ``None`` when no point
    was fitted."""
    fitted = [(i, p) for i, p in enumerate(points) if p is not None and _finite(p.balanced) and math.isfinite(p.residual_fit)]
    if not fitted:
        return None
    where = f"at rank {rank}"
    admissible = [(i, p) for i, p in fitted if p.keeps_fit(vanilla)]
    if not admissible:
        i, p = fitted[0]
        return Choice(i, p.lam, "no_admissible", (
            f"λ = {number(p.lam)}, the weakest of the {len(points)} swept {where}: every λ there gives up more than "
            f"{_share(FIT_LOSS_CAP)} of the fit vanilla explains (residual fit {number(vanilla.residual_fit)} → "
            f"{number(p.residual_fit)} at the weakest)"
        ))
    gain = {i: vanilla.leakage(chance) - p.leakage(chance) for i, p in admissible}
    most = max(gain.values())
    top = min((p for _, p in admissible), key=lambda p: p.balanced[0])  # the lowest balanced accuracy, for the text
    if most > 0 and any(vanilla.above(p) for _, p in admissible):
        i, p = next((i, p) for i, p in admissible if gain[i] >= REDUCTION_SHARE * most)
        return Choice(i, p.lam, "reaches", (
            f"λ = {number(p.lam)}, point {i + 1} of the {len(points)} swept {where}: the smallest that removes at "
            f"least {_share(REDUCTION_SHARE)} of the leakage above chance the sweep removes at most (balanced accuracy "
            f"{number(vanilla.balanced[0])} for vanilla → {number(p.balanced[0])}; the lowest, {number(top.balanced[0])}, at "
            f"λ = {number(top.lam)}) while giving up at most {_share(FIT_LOSS_CAP)} of the fit vanilla explains "
            f"(residual fit {number(vanilla.residual_fit)} → {number(p.residual_fit)})"
        ))
    safe = [(i, p) for i, p in admissible if not p.above(vanilla)]
    if not safe:
        i, p = admissible[0]
        return Choice(i, p.lam, "all_worse", (
            f"λ = {number(p.lam)}, the weakest of the {len(points)} swept {where}: at every λ that keeps the fit the group is predicted "
            f"better than from vanilla, beyond the intervals"
        ))
    i, p = safe[0]
    return Choice(i, p.lam, "no_gain", (
        f"λ = {number(p.lam)}, point {i + 1} of the {len(points)} swept {where}: no λ "
        f"lowers the leakage beyond the intervals (vanilla {_span(vanilla.balanced)}; the lowest "
        f"{_span(top.balanced)}), so the weakest strength that is not less fair, which gives up the least fit"
    ))


def _share(value: float) -> str:
    return f"{round(100 * value):d} %"


def _span(estimate: tuple[float, float, float]) -> str:
    return with_interval(*estimate)


def next_step(name: str, vanilla: Point, points: Sequence[tuple[float, Point | None]], chance: float, rank: int) -> str:
    """For a fair method less fair than vanilla at its default λ: the setting on the
    frontier (``points``: ``(λ, fit)`` of the sweep at ``rank``) that would not be — the one the
    rule picks among those that are not less fair and keep the fit — in the words of the
    interface (``cpd_lambda``), or the sentence that none exists on these data."""
    candidates = [(lam, p) for lam, p in points if p is not None and _finite(p.balanced) and not p.above(vanilla)]
    keeping = [(lam, p) for lam, p in candidates if p.keeps_fit(vanilla)]
    if keeping or candidates:
        pool = keeping or candidates
        lam, p = min(pool, key=lambda item: (item[1].leakage(chance), item[0]))
        fit = "" if keeping else f" (though it gives up more than {_share(FIT_LOSS_CAP)} of the fit vanilla explains)"
        return (
            f"Next step: at rank {rank}, λ = {number(lam)} is not less fair than vanilla — balanced accuracy "
            f"{_span(p.balanced)} against vanilla's {_span(vanilla.balanced)}, residual fit {number(p.residual_fit)}"
            f"{fit}; set it with {term('cpd_lambda', _plain(lam))}."
        )
    swept = [lam for lam, p in points if p is not None]
    span = f"from λ = {number(min(swept))} to {number(max(swept))}" if swept else "at any λ"
    return (
        f"Next step: none on this frontier — at every λ swept at rank {rank} ({plural(len(points), 'point')}, {span}) {name} "
        f"lets the group be predicted better than vanilla does, beyond the intervals; on these data keep vanilla CP, or sweep "
        f"another rank ({term('cpd_sweep_rank')})."
    )


def _plain(value: float) -> str:
    """``value`` as a user would type it back (six significant figures, no thousands separators)."""
    return f"{value:.6g}"


def from_records(get: Callable[[str, str], tuple[float, float, float] | None], variant: str) -> Point | None:
    """A :class:`Point` from an audit's records (``get(variant, metric)`` → ``(value, ci_low,
    ci_high)``), or ``None`` where a record is missing."""
    lam, fit, balanced = get(variant, "lam"), get(variant, "residual_fit"), get(variant, "balanced_accuracy")
    if lam is None or fit is None or balanced is None:
        return None
    return Point(lam[0], fit[0], balanced)


def how_set(options: dict, chosen: str | None) -> str:
    """How a fair method's default λ was set, for its finding: the audit's ``options["cpd"]`` as
    the run's configuration gives them, and ``chosen``, the sweep's ``lambda_choice`` detail (the
    rule with its numbers) where the frontier chose it."""
    rule = options.get("lambda_choice")
    if rule is None:
        rule = "paper" if options.get("formulation") == "paper" else "frontier"
    if rule == "frontier":
        if chosen:
            return f"chosen on the frontier, {chosen}"
        return (f"the grid point nearest λ_ref: no sweep to choose on (run one with {term('cpd_sweep', True)}, "
                f"or set λ with {term('cpd_lambda')})")
    if rule == "paper":
        return f"the paper's Fig. 2b weight ({term('cpd_lambda', 'paper')}; {term('cpd_lambda', 'frontier')} chooses it on the λ sweep)"
    if rule == "reference":
        return f"the grid point nearest λ_ref ({term('cpd_lambda', 'reference')}; {term('cpd_lambda', 'frontier')} chooses it on the λ sweep)"
    return f"as given ({term('cpd_lambda', _plain(float(rule)))})"
