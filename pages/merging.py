"""The Data page's “Merge values into groups”: groups from sets of values of a sensitive column.

A view over ``prepare(..., merge={column: {group: [values] | "*"}})`` (``fairaudit.data``): the
user picks the values of each merged group from the column's values (with their row counts) and
may gather every other value into one group (``"*"``) — Samadi et al.'s credit split is
*EDUCATION 1 and 2* against the rest; merging small categories is one group of the small ones,
the rest left as they are. Widgets only; the data package checks the spec and names what is wrong.
"""

from __future__ import annotations

import streamlit as st

from fairaudit.data import REST
from pages.common import plain
from pages.widgets import choose_many, kept_widget

MERGE_MIN_VALUES = 3
"""Two values are two groups already: the control starts at three."""
MERGE_MAX_VALUES = 1000
"""Above this many distinct values a column is not a set of categories to merge by hand."""
AUTO_NAME_CHARS = 40
REST_DEFAULT = "other"


def auto_name(values: list[str]) -> str:
    """A merged group's name when the user gives none: its values joined by ``+`` (shortened)."""
    name = "+".join(values)
    return name if len(name) <= AUTO_NAME_CHARS else name[: AUTO_NAME_CHARS - 1] + "…"


def merge_spec(groups: list[tuple[str, list[str]]], rest: str | None) -> dict[str, list[str] | str]:
    """``prepare``'s ``merge[column]`` from the control's groups (name, values) and the name of
    the group gathering every other value (None: the other values keep their own groups).
    Groups given the same name are one group; a rest named like a group is that group with every
    value no other group lists (``"*"`` covers its own values too)."""
    spec: dict[str, list[str] | str] = {}
    for name, values in groups:
        listed = spec.setdefault(name, [])
        listed.extend(v for v in values if v not in listed)
    if rest is not None:
        spec[rest] = REST
    return spec


def merge_summary(column: str, spec: dict[str, list[str] | str], rows: dict[str, int]) -> str:
    """The groups a spec makes, with their values and rows (the rest last)."""
    listed = {v for values in spec.values() if values != REST for v in values}
    parts = []
    for name, values in spec.items():
        members = [v for v in rows if v not in listed] if values == REST else values
        parts.append(f"{column}={name}: {', '.join(members)} ({sum(rows[v] for v in members):,} rows)")
    kept = [v for v in rows if v not in listed] if REST not in spec.values() else []
    return "Groups: " + "; ".join(parts) + (f"; every other value its own group ({', '.join(kept)})" if kept else "")


def merge_control(column: str, values: list[str], counts, prefix: str, *, needed: bool) -> dict[str, list[str] | str]:
    """“Merge values into groups” for one sensitive column (an expander, open when a merge is set
    or ``needed``); returns ``merge[column]`` for ``prepare`` (empty: nothing merged)."""
    if len(values) < MERGE_MIN_VALUES:
        return {}
    title = plain(f"Merge values into groups — “{column}” ({len(values):,} values)")
    if len(values) > MERGE_MAX_VALUES:
        st.caption(title + plain(f": too many values to merge by hand (more than {MERGE_MAX_VALUES:,})."))
        return {}
    rows = {v: int(n) for v, n in zip(values, counts, strict=True)}
    active = bool(st.session_state.get(f"{prefix}-1-values"))
    with st.expander(title, expanded=active or needed):
        st.caption(
            "Pick the values that form one group — for instance categories too small to audit on their own, "
            "or a split such as education levels 1 and 2 against the rest. Values you do not pick keep "
            "their own group, unless you gather them below. The groups and their rows appear under "
            "*What these roles keep*."
        )
        groups = _value_groups(values, rows, prefix)
        rest = _rest_group(values, groups, prefix)
        spec = merge_spec(groups, rest)
        if spec:
            st.caption(plain(merge_summary(column, spec, rows)))
    return spec


def _value_groups(values: list[str], rows: dict[str, int], prefix: str) -> list[tuple[str, list[str]]]:
    """One row of (values, name) per merged group; the next row appears once this one has values."""
    groups: list[tuple[str, list[str]]] = []
    taken: set[str] = set()
    for i in range(1, len(values) + 1):
        options = [v for v in values if v not in taken]
        if not options:
            break
        left, right = st.columns([3, 1])
        with left:
            chosen = choose_many(
                f"Group {i}: values", options, key=f"{prefix}-{i}-values",
                format_func=lambda v: f"{v} ({rows[v]:,} rows)", placeholder="Choose the values of a group",
            )
        with right:
            name = st.text_input(
                f"Group {i}: name", key=kept_widget(f"{prefix}-{i}-name", ""),
                placeholder=auto_name(chosen) if chosen else "a name", max_chars=80,
            ).strip()
        if not chosen:
            break
        groups.append((name or auto_name(chosen), chosen))
        taken.update(chosen)
    return groups


def _rest_group(values: list[str], groups: list[tuple[str, list[str]]], prefix: str) -> str | None:
    """The name of the group gathering every value not picked above, or None."""
    listed = {v for _, members in groups for v in members}
    left = [v for v in values if v not in listed]
    if not groups or not left:
        return None
    gather, name = st.columns([3, 1], vertical_alignment="bottom")
    with gather:
        on = st.checkbox(
            plain(f"Gather the other {len(left):,} value{'s' if len(left) != 1 else ''} into one group"),
            key=kept_widget(f"{prefix}-rest", False),
        )
    with name:
        text = st.text_input(
            "Its name", key=kept_widget(f"{prefix}-rest-name", ""), placeholder=REST_DEFAULT, max_chars=80, disabled=not on
        ).strip()
    return (text or REST_DEFAULT) if on else None
