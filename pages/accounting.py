"""What the chosen roles keep, shown on the Data page before the user confirms them.

A view over ``AuditData.accounting`` (contract 5, ``fairaudit.data``): rows read, used and
dropped by reason per group; the features used; every column left out with its reason; the
warnings — the unequal-drop warning first, with what the user can do about it right there (fill
missing cells instead of dropping rows, or leave out the feature with the most missing cells) —
and the columns that look like identifiers, which the user may keep as features. Every user
string goes through :func:`pages.common.plain` or into a dataframe (shown as text).
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from fairaudit.data import DROP_REASONS, NO_GROUP, unequal_drop_warning
from fairaudit.vocabulary import OPTIONS, render, term
from pages.common import TABLE_ROWS, plain, sentence, words
from pages.widgets import choose_many

SMALL_GROUP_WARNING = 30
"""A group with fewer rows than this gets a warning: its per-group metrics will be noisy."""
FEATURES_SHOWN = 40
REASON_WORDS = {
    "sensitive": "sensitive",
    "label": "label",
    "ignored": "ignored",
    "not_selected": "not selected",
    "text": "text",
    "id_like": "ID-like",
    "empty": "empty",
    "constant": "constant",
    "index": "tensor index",
    "unused": "unused",
}
MISSING = OPTIONS["missing"]


def groups_frame(accounting: dict) -> pd.DataFrame:
    """Per group: read, used, dropped (and the share), and one column per reason rows were dropped."""
    unit = accounting.get("unit", "rows")
    reasons = [r for r in DROP_REASONS if any(g["dropped"].get(r) for g in accounting["groups"])]
    rows = []
    for entry in accounting["groups"]:
        dropped = entry["rows_read"] - entry["rows_used"]
        row = {
            "group": entry["group"],
            f"{unit} read": entry["rows_read"],
            f"{unit} used": entry["rows_used"],
            f"{unit} dropped": dropped,
            "% dropped": round(100.0 * dropped / entry["rows_read"], 1) if entry["rows_read"] else 0.0,
        }
        row.update({f"dropped: {reason}": entry["dropped"].get(reason, 0) for reason in reasons})
        rows.append(row)
    return pd.DataFrame(rows)


def excluded_frame(accounting: dict) -> pd.DataFrame:
    """Every column left out: the column, the reason in a word, and the detail in the dashboard's words."""
    return pd.DataFrame(
        [
            {"column": e["column"], "reason": REASON_WORDS.get(e["reason"], e["reason"]),
             "detail": render(str(e.get("detail", "")), "dashboard")}
            for e in accounting.get("excluded", [])
        ],
        columns=["column", "reason", "detail"],
    )


def column_warning(warning: str, columns: list[str]) -> bool:
    """The warnings about one of ``columns`` (they start ``column 'NAME'``)."""
    return any(warning.startswith(f"column {c!r}") for c in columns)


def show_accounting(
    accounting: dict, *, missing_by_column: dict[str, int], actions: dict, sensitive: list[str], mergeable: list[str],
    tensor: tuple[tuple[int, ...], tuple[str, ...]] | None = None,
) -> None:
    """The accounting of the roles as chosen (before “Use this data”): rows first (per group, the
    unequal-drop warning and its remedies, small groups), then columns (features, columns left out,
    identifiers), then any other warning.

    ``missing_by_column``: missing cells per table column (the preview's summary); ``mergeable``:
    the sensitive columns with a “Merge values into groups” control; ``tensor``: the shape and
    modes of a tensor (its features are the cells of the other modes, not columns);
    ``actions``: widget keys the buttons change (``missing``, ``ignore``, ``features`` — None when
    every numeric column is used — and ``use_id_like``, None for tensors)."""
    unit = accounting.get("unit", "rows")
    features = accounting.get("features", [])
    excluded = accounting.get("excluded", [])
    kept = (f"a tensor of {' × '.join(f'{n:,}' for n in tensor[0])}" if tensor
            else f"**{len(features):,}** feature{'s' if len(features) != 1 else ''}")
    st.markdown(
        f"**{accounting['rows_used']:,}** of {accounting['rows_read']:,} {unit} used · {kept} · "
        f"{len(excluded):,} column{'s' if len(excluded) != 1 else ''} left out"
    )
    st.dataframe(
        groups_frame(accounting), hide_index=True, width="stretch",
        column_config={"% dropped": st.column_config.NumberColumn(format="%.1f %%")},
    )
    unequal = unequal_drop_warning(accounting["groups"], unit)
    if unequal is not None:
        unequal_drop_panel(unequal, accounting, missing_by_column, actions)
    small_group_warnings(accounting, sensitive, mergeable)
    named = [e["column"] for e in excluded] + list(features)
    for warning in accounting.get("warnings", []):
        if warning != unequal and not column_warning(warning, named):
            st.warning(words(sentence(warning)), icon=":material/warning:")

    if tensor:
        shape, modes = tensor
        st.markdown(plain(f"Value column {', '.join(map(str, features))}; modes {', '.join(f'{m} ({n:,})' for m, n in zip(modes, shape, strict=True))}; "
                          f"each entity's features are the {math.prod(shape[1:]):,} cells of the other modes."))
    else:
        shown = ", ".join(map(str, features[:FEATURES_SHOWN])) + (f", … ({len(features) - FEATURES_SHOWN:,} more)" if len(features) > FEATURES_SHOWN else "")
        st.markdown(f"**Features used ({len(features):,}):** " + plain(shown))
    if excluded:
        st.markdown(f"**Columns left out ({len(excluded):,})**, each with the reason:")
        left_out = excluded_frame(accounting)
        if len(left_out) <= TABLE_ROWS:  # st.table wraps the detail; its cells render Markdown, so escaped
            st.table(left_out.map(plain).set_index("column"), border="horizontal")
        else:
            st.dataframe(left_out, hide_index=True, width="stretch", height=300)
    decided = id_like_control(accounting, actions["use_id_like"]) if actions.get("use_id_like") else []
    for warning in accounting.get("warnings", []):  # those about ID-like columns are the control's
        if warning != unequal and column_warning(warning, named) and not column_warning(warning, decided):
            st.warning(words(sentence(warning)), icon=":material/warning:")


def unequal_drop_panel(warning: str, accounting: dict, missing_by_column: dict[str, int], actions: dict) -> None:
    """The unequal-drop warning, prominent, with the two remedies it names as buttons."""
    st.warning("**Rows are lost unequally between the groups.** " + words(sentence(warning)), icon=":material/error:")
    if not actions.get("missing") or not any(g["dropped"].get("missing cells") for g in accounting["groups"]):
        return  # rows dropped for another reason (no label, no group value): no missing-cell remedy applies
    features = [f for f in accounting.get("features", []) if missing_by_column.get(f)]
    features.sort(key=lambda f: -missing_by_column[f])
    if features:
        st.caption(
            "Missing cells per feature column (whole file): "
            + plain(", ".join(f"{f} {missing_by_column[f]:,}" for f in features[:8]) + (" …" if len(features) > 8 else ""))
        )
    left, right = st.columns(2)
    median = MISSING.choices["median"]
    left.button(
        f"{MISSING.widget} → {median}", key="roles-fix-median", icon=":material/healing:", width="stretch",
        help="Keep every row; a missing feature cell gets its column's median (the preprocessing record says so).",
        on_click=_set, args=(actions["missing"], "median"),
    )
    if features:
        worst = features[0]
        right.button(
            plain(f"Leave out “{worst}” ({missing_by_column[worst]:,} missing cells)"), key="roles-fix-leave-out",
            icon=":material/remove_circle:", width="stretch",
            help="Adds the column to “Ignore” (or takes it off “Features”), so its missing cells drop no rows.",
            on_click=_leave_out, args=(worst, actions),
        )


def missing_policy_buttons(key: str) -> None:
    """Under “stop and list the missing cells”: the other choices of “Missing cells” as buttons, so
    the user sees at once what each keeps per group."""
    st.markdown(f"Or set **{MISSING.widget}** to:")
    for policy in [p for p in MISSING.choices if p != "error"]:  # one per line: the choices differ in their last words
        st.button(MISSING.choices[policy], key=f"roles-missing-to-{policy}", on_click=_set, args=(key, policy),
                  help=f"Sets “{MISSING.widget}” to “{MISSING.choices[policy]}”; the table above shows what each group keeps.")


def _set(key: str, value) -> None:
    st.session_state[key] = value


def _leave_out(column: str, actions: dict) -> None:
    if actions.get("features"):
        key = actions["features"]
        st.session_state[key] = [c for c in st.session_state.get(key, []) if c != column]
    else:
        key = actions["ignore"]
        st.session_state[key] = [*st.session_state.get(key, []), column]


def small_group_warnings(accounting: dict, sensitive: list[str], mergeable: list[str]) -> None:
    """Groups so small that their metrics will be noisy: merge them (where the control is), use
    fewer sensitive columns, or drop them."""
    fixes = []
    if mergeable:
        merge = term("merge", mergeable[0]) if len(mergeable) == 1 else term("merge")
        fixes.append(f"merge it with related values under {merge}")
    if len(sensitive) > 1:
        fixes.append("use fewer sensitive columns (fewer intersections)")
    fixes.append(f"drop it with {term('min_group_size')} and {term('small_groups', 'drop')}")
    advice = ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1]
    unit = accounting.get("unit", "rows")
    for entry in accounting["groups"]:
        if entry["group"] == NO_GROUP or not 0 < entry["rows_used"] < SMALL_GROUP_WARNING:
            continue
        st.warning(
            words(f"Group {entry['group']} has only {entry['rows_used']:,} {unit}: its per-group metrics will be noisy. "
                  + sentence(advice) + "."),
            icon=":material/group_remove:",
        )


def id_like_control(accounting: dict, key: str) -> list[str]:
    """The columns flagged as identifiers, for the user to decide: kept as features if chosen.
    Returns the columns it speaks for (flagged, kept or not)."""
    flagged = [e["column"] for e in accounting.get("excluded", []) if e["reason"] == "id_like"]
    chosen = [c for c in st.session_state.get(key, []) if c in accounting.get("features", [])]
    options = chosen + [c for c in flagged if c not in chosen]
    if not options:
        return []
    choose_many(
        "Use ID-like columns as features", options, key=key,
        help="A column that numbers rows, people, schools or households is a label, not a measurement: as a "
        "feature, the audit would treat its numbering as a quantity. Keep one only if its numbers mean something "
        "(e.g. a code that is also an amount).",
    )
    if chosen:
        one = len(chosen) == 1
        st.warning(
            plain(f"{', '.join(chosen)} {'looks like an identifier and is' if one else 'look like identifiers and are'} "
                  "used as a feature, as you chose: the audit treats "
                  f"{'its numbers' if one else 'their numbers'} as a quantity. The report says so."),
            icon=":material/warning:",
        )
    if flagged:
        one = len(flagged) == 1
        st.caption(
            plain(f"{', '.join(flagged)} {'looks like an identifier and is' if one else 'look like identifiers and are'} "
                  f"left out (details in the table above); choose {'it' if one else 'one'} here to use it as a feature.")
        )
    return options
