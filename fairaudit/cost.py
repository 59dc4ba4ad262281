"""How long an audit will take, roughly, before it starts — so that the CLI can say so (or refuse
without ``--allow-slow``) and the dashboard can say so beside its Run button.

A model fitted to measured default audits (ten ranks, default variants, no intervals) on two
cores, 2026-11-22 (after issue 13's second pass; the model before it was fitted to audits 2–100×
slower): the default sample 600 × 10 took PCA 0.6 s, NMF 5.8 s, feature selection 0.5 s, CP 4.1 s;
the 4,165 × 12 credit table 1.4, 4.8, 1.9 and 9.9 s; the 30,000 × 22 credit file 2.0, 31.7, 15.1
and 7.1 s (CP skips KHSIC above ``khsic_max_rows``, 5,000 entities); 50 × 500 (busy machine) 1.0,
20.8, 40.1 and 1.1 s.
The PCA family works in the row space when rows are fewer than features, so its
eigen-decompositions grow with ``s³``, ``s = min(rows, features)``, plus JEVD's Jacobi sweeps on
at most 100 dimensions (measured before, shared cores: 300 × 2,000 20–25 s, 2,000 × 300 24 s,
1,000 × 1,000 166–206 s); its leakage tests and gap test read a sample of at most 10,000 rows, and
one pass over every row gives the moments. It is scaled by the number of ranks asked for; family
options are not modelled. The bootstrap replicates are added from
:func:`fairaudit.uncertainty.replicate_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .audit import FAMILY_TITLES, AuditConfig
from .formatting import duration, plural
from .uncertainty import pca_dimension_seconds, replicate_seconds, resolve_replicates

__all__ = ["FAMILY_COST", "Expected", "duration", "expected_parts", "expected_seconds", "expected_text"]


def _cpd_seconds(n: int, d: int) -> float:
    """The CP family's default audit: KHSIC's fits cost most of it, and the audit runs them up to
    its ``khsic_max_rows`` entities (:data:`fairaudit.cpd.audit.DEFAULT_OPTIONS`, the one place
    of that limit), skipping them above."""
    from .cpd.audit import DEFAULT_OPTIONS  # here, not at the top: the CP package loads only when a CP audit is costed

    return 3.0 + (1.4e-4 if n <= DEFAULT_OPTIONS["khsic_max_rows"] else 6e-6) * n * d


FAMILY_COST = {
    "pca": lambda n, d: 0.5 + pca_dimension_seconds(min(n, d)) + 1.5e-4 * min(n, 10_000) + 5e-8 * n * d,
    "nmf": lambda n, d: 4.0 + 4.2e-5 * n * d + 0.03 * d,
    "fs": lambda n, d: 0.2 + 5e-4 * n + 3e-7 * d**3,
    "cpd": _cpd_seconds,
}
"""Per family, seconds of its default audit of ``n`` rows × ``d`` features (see the module docstring)."""


@dataclass(frozen=True)
class Expected:
    """One family's expected time: its fits, and its bootstrap replicates (the intervals)."""

    fits: float
    replicates: int
    bootstrap: float

    @property
    def seconds(self) -> float:
        return self.fits + self.bootstrap


def expected_parts(n_rows: int, n_features: int, config: AuditConfig) -> dict[str, Expected]:
    """Per family of ``config``, the expected seconds of auditing ``n_rows × n_features`` data:
    the fits (:data:`FAMILY_COST`, scaled by the number of ranks) and the bootstrap replicates of
    the intervals (as many as ``config.bootstrap`` resolves to, each
    :func:`fairaudit.uncertainty.replicate_seconds`)."""
    ranks = None if config.ranks is None else len(config.ranks)
    scale = 1.0 if ranks is None else max(1, ranks) / 10
    parts = {}
    for m in config.methods:
        if m not in FAMILY_COST:
            continue
        replicates = resolve_replicates(m, config.bootstrap, n_rows, n_features, ranks)[0]
        each = replicate_seconds(m, n_rows, n_features, ranks)
        parts[m] = Expected(FAMILY_COST[m](n_rows, n_features) * scale, replicates, replicates * each)
    return parts


def expected_seconds(n_rows: int, n_features: int, config: AuditConfig) -> tuple[float, str]:
    """``(seconds, what dominates)`` for auditing ``n_rows × n_features`` data as ``config`` says
    (the bootstrap replicates of its intervals included)."""
    chosen = {m: part.seconds for m, part in expected_parts(n_rows, n_features, config).items()}
    if not chosen:
        return 0.0, ""
    worst = max(chosen, key=chosen.get)
    return sum(chosen.values()), f"{FAMILY_TITLES.get(worst, worst)} on {n_rows:,} rows × {n_features:,} features"


def expected_text(n_rows: int, n_features: int, config: AuditConfig) -> tuple[float, float, str]:
    """``(seconds, of them the bootstrap's, words)``: what a run of ``config`` should take, with the
    replicates' share said ("roughly 46 seconds, most of it for the 100 bootstrap replicates of
    the intervals") — the dashboard's expectation beside its Run buttons."""
    parts = expected_parts(n_rows, n_features, config)
    total = sum(part.seconds for part in parts.values())
    replicates = sum(part.bootstrap for part in parts.values())
    counts = [part.replicates for part in parts.values() if part.replicates]
    text = f"roughly {duration(total)}"
    if replicates >= 1:
        many = f"the {plural(counts[0], 'bootstrap replicate')}" if len(set(counts)) == 1 else "the bootstrap replicates"
        share = "most of it" if replicates >= 0.5 * total else f"about {duration(replicates)} of it"
        text += f", {share} for {many} of the intervals"
    return total, replicates, text
