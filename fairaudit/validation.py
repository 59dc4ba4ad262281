"""Checks on parameters shared by every method family."""

from __future__ import annotations

import numpy as np

from .errors import RankError


def check_rank(d, limit: int, what: str = "n_components", limit_name: str = "the number of features") -> int:
    """``d`` as an int in ``1 … limit``, or a :class:`RankError` that says why not."""
    if isinstance(d, bool) or not isinstance(d, int | np.integer):
        raise RankError(f"{what} must be a whole number, got {d!r}.")
    if d < 1:
        raise RankError(f"{what} must be at least 1, got {d}.")
    if d > limit:
        raise RankError(f"{what}={d} is larger than {limit_name} ({limit}); choose a rank between 1 and {limit}.")
    return int(d)
