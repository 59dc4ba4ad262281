"""Every row and column the user gave, accounted for.

``AuditData.accounting`` is a plain dict (it travels into JSON as ``data.groups``,
``data.features``, ``data.excluded`` and ``data.warnings``)::

    {
      "unit": "rows",                     # "entities" for a tensor (rows of the unfolding)
      "rows_read": 1000, "rows_used": 870,
      "groups": [{"group": "sex=F", "rows_read": 500, "rows_used": 390,
                  "dropped": {"missing cells": 110}}, ...],
      "features": ["age", "income"],
      "excluded": [{"column": "ID", "reason": "id_like", "detail": "..."}, ...],
      "warnings": ["dropping rows removed 22.0 % of sex=F ... "],
    }

Rows without a complete group value appear once, as the group ``(no group value)``. Each
dropped row is counted under the first reason that applies, in the order of
:data:`DROP_REASONS`. Exclusion reasons are listed in :data:`EXCLUSION_REASONS`.

**When is a drop unequal?** (:func:`unequal_drop_warning`) Among the groups (rows without a group
value and groups dropped as too small are reported on their own), compare the group that lost the largest share of its rows with the one that lost the
smallest. Warn when the shares differ by at least :data:`DROP_GAP_POINTS` percentage points
*and* the larger is at least :data:`DROP_RATIO` times the smaller. The absolute gap keeps tiny
differences quiet (1 % against 3 % of rows is noise for an audit, though a factor of 3); the
ratio keeps the warning about *unequal* loss (45 % against 55 % is a large, similar loss to
both, reported in the counts, and not a skew between groups). The issue that asked for this
(58 % of a minority group dropped against 24 % of the majority) is far past both thresholds.
"""

from __future__ import annotations

import numpy as np

from ..groups import GroupCodes
from ..vocabulary import render, term

NO_GROUP = "(no group value)"
DROP_REASONS = ("no group value", "no label", "missing cells", "small group")
"""Why rows are dropped, in the order a row's reason is chosen."""
EXCLUSION_REASONS = {
    "sensitive": "a sensitive attribute (defines the groups, never a feature)",
    "label": "the label (ground truth, never a feature)",
    "ignored": "ignored on request",
    "not_selected": "not among the chosen features",
    "text": "text (not numbers)",
    "id_like": "looks like an identifier",
    "empty": "every cell is missing",
    "constant": "the same value on every kept row",
    "index": "a tensor index (a mode of the tensor)",
    "unused": "not an index, value or sensitive column of the tensor",
    "unreadable": "its cells are neither numbers nor text (left out when the file was read)",
}
DROP_GAP_POINTS = 10.0
DROP_RATIO = 1.5
LARGE_DROP_SHARE = 20.0
"""Percent of the rows (of the groups in the audit) whose loss is cautioned even when every group
loses alike: the audit then describes the rows kept, not the file (issue 25: 46 % dropped, no word)."""


def group_entries(read_codes: np.ndarray, read_labels: list[str], reasons: np.ndarray, weights: np.ndarray | None = None) -> list[dict]:
    """Per group: rows read, rows used and rows dropped by reason.

    ``read_codes`` gives each row read its group (-1: no group value), ``reasons`` each row's
    drop reason as an index into :data:`DROP_REASONS` plus one (0: kept). ``weights`` (optional)
    is the number of rows each entry stands for (the dask engine counts rows per partition and
    hands over one entry per group value and reason)."""
    entries = []
    width = len(DROP_REASONS) + 1
    k = len(read_labels)
    # one count per (group, reason): group g's row of the table, the rows without a group the last
    cells = np.where(read_codes >= 0, read_codes, k) * width + reasons
    table = np.bincount(cells, weights=weights, minlength=(k + 1) * width).reshape(k + 1, width)
    for g, label in enumerate(list(read_labels) + [NO_GROUP]):
        n = int(table[g].sum())
        if n == 0:
            continue
        counts = np.rint(table[g]).astype(np.int64)
        dropped = {reason: int(counts[i + 1]) for i, reason in enumerate(DROP_REASONS) if counts[i + 1]}
        entries.append({"group": label, "rows_read": n, "rows_used": int(counts[0]), "dropped": dropped})
    return entries


def unequal_drop_warning(entries: list[dict], unit: str = "rows") -> str | None:
    """The warning when dropping removed a clearly larger share of one group than of another
    (rule in this module's docstring); None otherwise. Groups dropped as too small and rows
    without a group are left out of the comparison (they are reported on their own)."""
    shares = []
    for entry in entries:
        if entry["group"] == NO_GROUP or entry["dropped"].get("small group"):
            continue
        lost = entry["rows_read"] - entry["rows_used"]
        shares.append((100.0 * lost / entry["rows_read"], lost, entry))
    if len(shares) < 2:
        return None
    high = max(shares, key=lambda s: s[0])
    low = min(shares, key=lambda s: s[0])
    gap = high[0] - low[0]
    if gap < DROP_GAP_POINTS or high[0] < DROP_RATIO * low[0]:
        return None
    factor = "" if low[0] == 0 else f" and by a factor of {high[0] / low[0]:.2g}"
    reasons = ", ".join(f"{n} for {reason}" for reason, n in high[2]["dropped"].items() if reason != "small group")
    return (
        f"dropping {unit} removed {high[0]:.1f} % of {high[2]['group']} ({high[1]} of {high[2]['rows_read']}: {reasons}) "
        f"but {low[0]:.1f} % of {low[2]['group']} ({low[1]} of {low[2]['rows_read']}) — the shares differ by "
        f"{gap:.1f} percentage points{factor} (the warning's rule: at least {DROP_GAP_POINTS:g} points and a factor of "
        f"{DROP_RATIO:g}). The {unit} kept may not represent {high[2]['group']}; consider imputing feature cells "
        f"({term('missing', 'median')}) or leaving out the columns with the most missing cells."
    )


def large_drop_warning(entries: list[dict], unit: str = "rows") -> str | None:
    """The caution when dropping removed at least :data:`LARGE_DROP_SHARE` % of the rows of the
    groups (however evenly); None otherwise. Rows without a group value and groups dropped as too
    small are reported on their own."""
    kept = [e for e in entries if e["group"] != NO_GROUP and not e["dropped"].get("small group")]
    read = sum(e["rows_read"] for e in kept)
    lost = sum(e["rows_read"] - e["rows_used"] for e in kept)
    if not read or 100.0 * lost / read < LARGE_DROP_SHARE:
        return None
    shares = ", ".join(f"{e['group']} {100.0 * (e['rows_read'] - e['rows_used']) / e['rows_read']:.1f} %" for e in kept[:6])
    return (
        f"dropping {unit} removed {100.0 * lost / read:.1f} % of them ({lost:,} of {read:,}; {shares}): the audit describes "
        f"the {unit} kept, which may differ from the file as a whole; consider imputing feature cells "
        f"({term('missing', 'median')}) or leaving out the columns with the most missing cells."
    )


def whole_accounting(groups: GroupCodes, features: list[str], unit: str = "rows") -> dict:
    """The accounting of data that arrived complete (arrays): every row used, nothing excluded."""
    sizes = groups.sizes()
    entries = [{"group": label, "rows_read": int(n), "rows_used": int(n), "dropped": {}} for label, n in zip(groups.labels, sizes, strict=True)]
    total = int(sizes.sum())
    return {"unit": unit, "rows_read": total, "rows_used": total, "groups": entries, "features": list(features), "excluded": [], "warnings": []}


def accounting_lines(data: dict) -> list[str]:
    """The accounting as lines of text (the CLI prints them; reports and pages may too).

    ``data`` is a fingerprint (``AuditData.fingerprint()``, ``AuditResult.data``) or an
    accounting dict."""
    groups = data.get("groups") or []
    unit = "entities" if data.get("tensor") or data.get("unit") == "entities" else "rows"
    lines = []
    if groups:
        read = sum(e["rows_read"] for e in groups)
        used = sum(e["rows_used"] for e in groups)
        lines.append(f"{unit}: {used:,} used of {read:,} read")
        for entry in groups:
            dropped = ", ".join(f"{n:,} {reason}" for reason, n in entry.get("dropped", {}).items())
            lines.append(
                f"  {entry['group']}: {entry['rows_used']:,} of {entry['rows_read']:,} used"
                + (f" (dropped: {dropped})" if dropped else "")
            )
    features = data.get("features") or []
    if features:
        shown = ", ".join(map(str, features[:30])) + (f", … ({len(features) - 30} more)" if len(features) > 30 else "")
        lines.append(f"features used ({len(features)}): {shown}")
    for entry in data.get("excluded") or []:
        lines.append(f"left out {entry['column']!r}: {entry['reason']} — {entry['detail']}")
    return lines


def worded(fingerprint: dict, interface: str = "library") -> dict:
    """A fingerprint (``AuditData.fingerprint()``) with the option mentions in its notes —
    preprocessing log, warnings, excluded columns' details — worded for ``interface`` (the JSON
    carries the library's words)."""
    out = dict(fingerprint)
    if "preprocessing" in out:
        out["preprocessing"] = [render(str(line), interface) for line in out["preprocessing"]]
    if "warnings" in out:
        out["warnings"] = [render(str(line), interface) for line in out["warnings"]]
    if "excluded" in out:
        out["excluded"] = [{**entry, "detail": render(str(entry.get("detail", "")), interface)} for entry in out["excluded"]]
    return out
