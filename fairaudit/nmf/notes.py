"""Sentences about the NMF family's numbers that the findings say (:mod:`fairaudit.findings` calls
them; the family knows what its numbers mean)."""

from __future__ import annotations

from ..formatting import number
from ..metrics import NEGATIVE_LOSS_NOTE


def negative_losses(rank: int, losses: dict[tuple[str, str], float]) -> str | None:
    """Why relative losses below 0 are shown at ``rank`` (``losses``: ``(fit title, group)`` →
    relative loss, Def. 4.1), or ``None`` when none is below 0."""
    below = {key: value for key, value in losses.items() if value < 0}
    if not below:
        return None
    named = "; ".join(f"{group} under {title}: {number(value)}" for (title, group), value in below.items())
    return f"Relative losses below 0 at rank {rank} ({named}). {NEGATIVE_LOSS_NOTE}"
