"""Numbers for people: one place that writes every number a sentence, table or chart shows.

Three significant figures, no e-notation, thousands separators, correct plurals::

    >>> number(0.000031416), number(1234567.0), number(2.0), number(0.5)
    ('0.0000314', '1,230,000', '2.00', '0.500')
    >>> interval(0.371, 0.455), times(2.6198), plural(1, "row"), plural(3, "replicate")
    ('0.371–0.455', '2.62×', '1 row', '3 replicates')
"""

from __future__ import annotations

import math

SIGNIFICANT = 3
TINY = 1e-9
"""Non-zero values below this in size are rounding noise for people (a loss of 3e-16 at full
rank): written ``≈0`` rather than as a string of zeros."""


def number(value, significant: int = SIGNIFICANT) -> str:
    """``value`` to ``significant`` figures, in positional notation (never ``1e-05``).

    NaN (or ``None``) is ``"n/a"``, infinities ``"∞"`` / ``"−∞"``, sizes below :data:`TINY`
    ``"≈0"``; integers keep every digit (``1,234``); large values get thousands separators; a
    minus sign is U+2212.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return _sign(value) + f"{abs(value):,}"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    if abs(value) < TINY:
        return "≈0"
    magnitude = math.floor(math.log10(abs(value)))
    rounded = _round(value, significant - 1 - magnitude)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > magnitude:  # 9.996 → 10.0
        magnitude += 1
    decimals = significant - 1 - magnitude
    if decimals > 0:
        return _sign(rounded) + f"{abs(rounded):.{decimals}f}"
    return _sign(rounded) + f"{abs(_round(rounded, decimals)):,.0f}"


def _round(value: float, digits: int) -> float:
    """``round(value, digits)``, or ``value`` where rounding would pass the largest float (1.8e308)."""
    try:
        return round(value, digits)
    except OverflowError:
        return value


def _sign(value) -> str:
    return "−" if value < 0 else ""


def signed(value, significant: int = SIGNIFICANT) -> str:
    """``number`` with an explicit ``+`` for positive values (changes)."""
    text = number(value, significant)
    return text if text.startswith(("−", "n/a", "≈")) or value == 0 else "+" + text


def percent(fraction, significant: int = SIGNIFICANT, sign: bool = False) -> str:
    """A fraction as a percentage: ``percent(0.1823) == "18.2 %"`` (``sign``: ``"+18.2 %"``)."""
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "n/a"
    text = (signed if sign else number)(100.0 * fraction, significant)
    return f"{text} %"


def times(ratio, significant: int = SIGNIFICANT) -> str:
    """A ratio as a multiple: ``"2.62×"``."""
    return f"{number(ratio, significant)}×"


def interval(low, high, significant: int = SIGNIFICANT) -> str:
    """``"low–high"`` (``"n/a"`` when either end is missing; ``"−0.237 to 0.687"`` when an end is
    negative, where a dash after a minus sign would misread); an end a million times smaller than
    the other is rounding noise around 0 and written ``0``."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return "n/a"
    low, high = float(low), float(high)
    scale = max(abs(low), abs(high))
    ends = [0.0 if math.isfinite(scale) and abs(v) < 1e-6 * scale else v for v in (low, high)]
    separator = " to " if min(ends) < 0 else "–"
    return f"{number(ends[0], significant)}{separator}{number(ends[1], significant)}"


def level(confidence: float) -> str:
    """A confidence level as people write it: ``level(0.95) == "95 %"``, ``level(0.975) == "97.5 %"``."""
    return f"{round(100 * float(confidence), 6):g} %"


OUTSIDE_MARK = "†"
"""After a table cell whose value lies outside its own interval (:func:`outside_interval`)."""

OUTSIDE_NOTE = (
    "† the value lies outside its own interval: the refits on resampled rows came out systematically different "
    "from the fit on your rows (a selector that picks other columns, a solver that stops elsewhere), so the interval "
    "shows how much a refit varies, not how far this value is from the truth; read such a value with care."
)
"""What :data:`OUTSIDE_MARK` means (the dashboard's and the report's tables say it under the table)."""

START_MARK = "‡"
"""After a table cell whose value moves between random starts of the fit by more than its interval
is wide (``AuditResult.uncertainty[method]["start_spread"]``)."""

START_NOTE = (
    "‡ another random start of the fit moves this value by more than its interval is wide: the interval is how the "
    "audit's own solution varies over resampled rows (its replicates start from it), and fits from other random starts "
    "landed further apart — the number depends on the start as much as on the sample."
)
"""What :data:`START_MARK` means (under the dashboard's and the report's tables)."""

OUTSIDE_WORDS = "the refits differ systematically from this fit (they are fitted on resampled rows)"
"""Why a value lies outside its interval, in a sentence (:func:`with_interval`) or a chart's hover."""


def outside_interval(value, low, high, significant: int = SIGNIFICANT) -> bool:
    """Whether ``value`` lies outside ``[low, high]`` as they are written (:func:`number`,
    :func:`interval`): each rounded to ``significant`` figures, sizes below :data:`TINY` and an end
    a million times smaller than the other taken as 0. So a value that is written equal to an end
    (“0.455 (0.371–0.455)”) is never marked, and one written outside always is.

    A percentile interval can exclude its own point estimate when the bootstrap replicates are
    biased relative to it (Efron & Tibshirani 1993, §10: the bias estimate ``mean(θ*) − θ̂``;
    here the whole 95 % range of ``θ*`` lies to one side of ``θ̂``, a bias of about two standard
    errors or more)."""
    try:
        value, low, high = float(value), float(low), float(high)
    except (TypeError, ValueError, OverflowError):
        return False
    if not all(math.isfinite(v) for v in (value, low, high)):
        return False
    scale = max(abs(low), abs(high))
    low, high = (0.0 if abs(end) < 1e-6 * scale else end for end in (low, high))
    value, low, high = (_as_written(v, significant) for v in (value, low, high))
    return value < low or value > high


def _as_written(value: float, significant: int) -> float:
    """``value`` as :func:`number` writes it: 0 below :data:`TINY`, else rounded to ``significant``
    figures."""
    if abs(value) < TINY:
        return 0.0
    return round(value, significant - 1 - math.floor(math.log10(abs(value))))


def cell(value, low, high, significant: int = SIGNIFICANT) -> str:
    """A table cell: ``"0.412 (0.371–0.455)"``, just the value without an interval, and
    :data:`OUTSIDE_MARK` after a value outside its interval (:func:`outside_interval`)."""
    text = number(value, significant)
    span = interval(low, high, significant)
    if span == "n/a":
        return text
    return f"{text} ({span})" + (f" {OUTSIDE_MARK}" if outside_interval(value, low, high) else "")


def with_interval(value, low, high, confidence: float | None = None, significant: int = SIGNIFICANT) -> str:
    """``"0.412 (95 % interval 0.371–0.455)"``, or just the value when there is no interval; a
    value outside its interval says so (:func:`outside_interval`)."""
    text = number(value, significant)
    span = interval(low, high, significant)
    if span == "n/a":
        return text
    named = f"{level(confidence) + ' ' if confidence else ''}interval {span}"
    if outside_interval(value, low, high):
        return f"{text} (outside its {named}: {OUTSIDE_WORDS})"
    return f"{text} ({named})"


def plural(count, singular: str, plural_form: str | None = None) -> str:
    """``"1 row"``, ``"2 rows"``, ``"1,204 replicates"`` (``plural_form`` for irregular words)."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{number(int(count)) if float(count).is_integer() else number(count)} {word}"


def pvalue(p) -> str:
    """A p-value for a sentence: ``"p = 0.0099"`` (two significant figures), ``"p < 0.001"``."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "p n/a"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {number(p, 2)}"


def duration(seconds: float) -> str:
    """``seconds`` in words a person plans with: 40 seconds, 12 minutes, 3 hours, 2 days."""
    if seconds < 1.5:
        return "a second"
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 86400:.0f} days"
