"""Widgets whose values stay with the session while the user visits other pages.

Streamlit forgets a widget's value when its page is not shown, so a user who chose the roles of
an upload, audited it and came back to the Data page found the sample and the defaults again.
A *kept* widget starts from the value it had when its page was last shown: :func:`kept_widget`
seeds its key from the session's record (or the default) before the widget is created — the
widget is then created without a default of its own, so the session's value is the only one —
and :func:`keep_widgets`, called at the top of the page, records the latest values and puts
back those Streamlit dropped while the page was not shown. Keys name their table (file hash)
where the options depend on it, so the values of one file never reach another file's widgets.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

KEPT = "kept-widgets"


def keep_widgets() -> None:
    """At the top of a page: record the kept widgets' latest values, and restore those Streamlit
    dropped while the page was not shown."""
    kept: dict = st.session_state.setdefault(KEPT, {})
    for key, value in list(kept.items()):
        if key in st.session_state:
            kept[key] = st.session_state[key]
        else:
            st.session_state[key] = value


def kept_widget(key: str, default) -> str:
    """``key``, seeded with the widget's kept value (or ``default`` the first time; a callable
    default is called only then); create the widget with ``key=`` and no default of its own."""
    kept: dict = st.session_state.setdefault(KEPT, {})
    if key not in st.session_state:
        st.session_state[key] = kept[key] if key in kept else (default() if callable(default) else default)
    kept[key] = st.session_state[key]
    return key


def _keep_one(options: Sequence, key: str, default) -> None:
    """Keep ``key``'s single choice; a kept value no longer among ``options`` falls back to
    ``default`` (or the first option)."""
    fallback = default if default in options else (options[0] if options else None)
    kept_widget(key, fallback)
    if st.session_state[key] not in options:
        st.session_state[key] = fallback


def choose_one(label: str, options: Sequence, *, key: str, default=None, **kwargs):
    """A kept selectbox (:func:`_keep_one`)."""
    _keep_one(options, key, default)
    return st.selectbox(label, options, key=key, **kwargs)


def choose_many(label: str, options: Sequence, *, key: str, default: Sequence = (), **kwargs) -> list:
    """A kept multiselect; kept values no longer among ``options`` are dropped."""
    kept_widget(key, [v for v in default if v in options])
    st.session_state[key] = [v for v in st.session_state[key] if v in options]
    return st.multiselect(label, options, key=key, **kwargs)


def choose_radio(label: str, options: Sequence, *, key: str, default=None, **kwargs):
    """A kept radio (:func:`_keep_one`)."""
    _keep_one(options, key, default)
    return st.radio(label, options, key=key, **kwargs)
