"""How long an audit will take, roughly, before it starts — so that the CLI can say so (or refuse
without ``--allow-slow``) and the dashboard can say so beside its Run button.

A deliberately generous model fitted to measured default audits (ten ranks, default variants) on
two cores shared with other work, so a quiet machine is faster: 600 × 10 (the default sample)
took PCA 0.8 s, NMF 11.7 s, feature selection 90 s, CP 12.8 s; 50 × 500 took NMF 100 s (∝ cells),
feature selection 79 s, CP 8 s. The PCA family works in the row space when rows are fewer than
features, so its eigen-decompositions grow with ``s³``, ``s = min(rows, features)``, plus JEVD's
Jacobi sweeps on at most 100 dimensions; measured (shared cores): 50 × 500 5.0 s, 50 × 5,000
5.4 s, 300 × 2,000 20–25 s, 2,000 × 300 24 s, 1,000 × 1,000 166–206 s. It is scaled by the number
of ranks asked for; family options are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from .audit import FAMILY_TITLES, AuditConfig
from .formatting import duration, plural
from .uncertainty import pca_dimension_seconds

__all__ = ["FAMILY_COST", "Expected", "duration", "expected_parts", "expected_seconds", "expected_text"]

FAMILY_COST = {
    "pca": lambda n, d: 1.0 + pca_dimension_seconds(min(n, d)) + 6e-4 * min(n, 10_000),
    "nmf": lambda n, d: 1.0 + 3e-3 * n * d,
    "fs": lambda n, d: 0.15 * n + 5e-7 * d**3,
    "cpd": lambda n, d: 0.02 * n + 3e-4 * n * d,
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
    from .uncertainty import replicate_seconds, resolve_replicates

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
