"""How long an audit will take, roughly, before it starts — so that the CLI can say so (or refuse
without ``--allow-slow``) and the dashboard can say so beside its Run button.

A deliberately generous model fitted to measured default audits (ten ranks, default variants) on
two cores shared with other work, so a quiet machine is faster: 600 × 10 (the default sample)
took PCA 0.8 s, NMF 11.7 s, feature selection 90 s, CP 12.8 s; 50 × 500 took PCA about 130 s
(its eigen-decompositions of d × d matrices grow with d³), NMF 100 s (∝ cells), feature selection
79 s, CP 8 s. It is scaled by the number of ranks asked for; family options are not modelled.
"""

from __future__ import annotations

from .audit import FAMILY_TITLES, AuditConfig

FAMILY_COST = {
    "pca": lambda n, d: 1.0 + 1.0e-6 * d**3,
    "nmf": lambda n, d: 1.0 + 3e-3 * n * d,
    "fs": lambda n, d: 0.15 * n + 5e-7 * d**3,
    "cpd": lambda n, d: 0.02 * n + 3e-4 * n * d,
}
"""Per family, seconds of its default audit of ``n`` rows × ``d`` features (see the module docstring)."""


def expected_seconds(n_rows: int, n_features: int, config: AuditConfig) -> tuple[float, str]:
    """``(seconds, what dominates)`` for auditing ``n_rows × n_features`` data as ``config`` says."""
    scale = 1.0 if config.ranks is None else max(1, len(config.ranks)) / 10
    chosen = {m: FAMILY_COST[m](n_rows, n_features) * scale for m in config.methods if m in FAMILY_COST}
    if not chosen:
        return 0.0, ""
    worst = max(chosen, key=chosen.get)
    return sum(chosen.values()), f"{FAMILY_TITLES.get(worst, worst)} on {n_rows:,} rows × {n_features:,} features"


def duration(seconds: float) -> str:
    """``seconds`` in words a person plans with: 40 seconds, 12 minutes, 3 hours, 2 days."""
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 86400:.0f} days"
