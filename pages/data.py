"""Data page: pick a sample or upload a file, preview it, choose the column roles, see what they
keep — rows read, used and dropped per group, the features, the columns left out and why, the
warnings — and only then confirm them with “Use this data”.

The roles are prepared (``fairaudit.prepare`` / ``prepare_tensor``) once per choice: the result
is kept in this session on (the file's identity, the roles), so a rerun that changes nothing —
and the click on “Use this data” — prepares nothing again. Nothing is shared between sessions.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from fairaudit import FairAuditError, prepare, read_table
from fairaudit.data import (
    DEFAULT_MAX_MB,
    MAX_CATEGORIES,
    MAX_TEXT_GROUPS,
    MISSING_POLICIES,
    SCALINGS,
    accounting_lines,
    prepare_tensor,
    value_counts,
)
from fairaudit.errors import MissingValueError
from fairaudit.samples import SAMPLES, sample_bytes
from fairaudit.vocabulary import OPTIONS
from pages.accounting import missing_policy_buttons, show_accounting
from pages.common import current_data, data_summary, kept_upload, kept_upload_id, plain, set_data, show_error, words
from pages.merging import MERGE_MAX_VALUES, MERGE_MIN_VALUES, merge_control
from pages.widgets import choose_many, choose_one, choose_radio, keep_widgets, kept_widget

MISSING_LABELS = OPTIONS["missing"].choices  # the words error messages use for these choices
SCALING_LABELS = OPTIONS["scaling"].choices
PREPARED_KEPT = 2
"""Prepared role choices kept per session (the current one and the one before: switching back is instant)."""
LAYOUTS = ["Rows are samples (an ordinary table)", "Long-format tensor (one line per cell)"]
GROUPS_BY = {"threshold": "a threshold", "bins": "quantile bins", "merge": "merging values"}

keep_widgets()
st.title("Data")
st.markdown(
    "Start from an embedded sample or upload your own CSV or Parquet file — it is only read, never changed. "
    "Then say which column holds the **sensitive attribute** (several columns give intersectional groups), "
    "which columns are **features**, and how to treat missing cells. Below the roles you see what they keep "
    "— rows per group, features, columns left out and why — **before** you press **Use this data**. "
    "The data in use is audited on the method pages: **PCA** first (seconds), then NMF, Feature selection and Tensor."
)
st.caption("In use now: " + data_summary(current_data()))
st.page_link("pages/pca.py", label="Audit the data in use with PCA", icon=":material/arrow_forward:")


# ---------------------------------------------------------------- reading
def read_once(source: tuple, raw, name: str, skip_rows: int, header, defaults: dict) -> None:
    """Read once per (source, reading options): ``raw()`` gives the bytes only when they have to
    be read. A FairAuditError is shown and no table is previewed."""
    identity = (*source, skip_rows, header)
    if st.session_state.get("table-id") == identity:
        return
    try:
        table = read_table(raw(), name=name, skip_rows=skip_rows, header=header, max_mb=DEFAULT_MAX_MB)
    except FairAuditError as exc:
        st.session_state.pop("table", None)
        st.session_state["table-id"] = identity
        st.session_state["table-error"] = exc
        return
    st.session_state.pop("table-error", None)
    st.session_state["table"] = table
    st.session_state["table-id"] = identity
    st.session_state["role-defaults"] = defaults


def choose_source():
    """The sample or the uploaded file, read (a kept upload stays when the user visits other pages)."""
    source = choose_radio("Source", ["Embedded sample", "Upload a file (CSV or Parquet)"], key="data-source", horizontal=True)
    if source == "Embedded sample":
        choice = choose_one("Sample", list(SAMPLES), key="data-sample", format_func=lambda n: SAMPLES[n].title)
        sample = SAMPLES[choice]
        st.caption(sample.description)
        read_once(("sample", choice), lambda: sample_bytes(choice), sample.file_name, 0, None, {
            "sensitive": list(sample.sensitive), "ignore": list(sample.ignore), "label": sample.label,
            "scaling": sample.scaling, "tensor_index": list(sample.tensor_index), "tensor_value": sample.tensor_value,
        })
    else:
        upload = kept_upload(
            f"CSV or Parquet file (up to {DEFAULT_MAX_MB} MB; comma, semicolon, tab or | separated; "
            "UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1)",
            "data-upload", ["csv", "tsv", "txt", "data", "parquet"], max_upload_size=DEFAULT_MAX_MB,
        )
        with st.expander("Reading options"):
            skip_rows = int(st.number_input("Lines to skip before the header", 0, 1000, key=kept_widget("data-skip", 0)))
            header_choice = choose_radio(
                "Header row", ["detect", "first line is the header", "no header"], key="data-header", horizontal=True
            )
        header = {"detect": None, "first line is the header": True, "no header": False}[header_choice]
        if upload is None:
            for key in ("table", "table-id", "table-error"):
                st.session_state.pop(key, None)
            st.info("Choose a file to upload.")
            return None
        name, content = upload
        read_once(("upload", name, kept_upload_id("data-upload")), lambda: content, name, skip_rows, header, {})
    if st.session_state.get("table-error") is not None:
        show_error(st.session_state["table-error"])
    return st.session_state.get("table")


def preview(table) -> pd.DataFrame:
    """The first rows and a per-column summary; returns the summary table."""
    st.subheader(f"Preview of {plain(table.name)}")
    delimiter = "TAB" if table.delimiter == "\t" else repr(table.delimiter)
    st.caption(plain(
        f"{table.n_rows:,} rows × {len(table.columns)} columns · "
        + (f"encoding {table.encoding} · delimiter {delimiter} · " if table.format == "csv" else "Parquet · ")
        + f"{'header row' if table.has_header else 'no header row'} · sha256 {table.sha256[:16]}…"
    ))
    for line in table.log:
        st.caption(f"• {words(line)}")
    st.dataframe(table.head(50), width="stretch", height=240)
    summary = table.describe()
    with st.expander("Columns: type, distinct values, missing cells"):
        st.dataframe(summary, hide_index=True, width="stretch")
    return summary


# ---------------------------------------------------------------- roles
def counts_of(table, column: str) -> tuple[list[str], object]:
    """A column's values and rows per value (the merge control's options), once per table."""
    cache = st.session_state.get("value-counts")
    if cache is None or cache[0] != st.session_state.get("table-id"):
        cache = (st.session_state.get("table-id"), {})
        st.session_state["value-counts"] = cache
    if column not in cache[1]:
        cache[1][column] = value_counts(table, column)
    return cache[1][column]


def sensitive_inputs(table, summary, defaults: dict, tag: str) -> tuple[dict, list[str]]:
    """Sensitive column(s); a numeric one with many values is split at a threshold, cut into
    quantile bins or merged; any other can have values merged into groups. Returns ``prepare``'s
    ``sensitive``, ``binarize``, ``bins`` and ``merge``, and the columns with a merge control."""
    columns = table.columns
    numeric = set(summary.loc[summary.kind == "numeric", "column"])
    distinct = dict(zip(summary.column, summary.distinct, strict=True))
    guess = [c for c in defaults.get("sensitive", []) if c in columns]
    if not guess:
        guess = [c for c in columns if c.lower() in {"sex", "gender", "race", "group", "ethnicity"}][:1]
    sensitive = choose_many(
        "Sensitive attribute(s) — several columns give intersectional groups", columns, key=f"roles-sensitive-{tag}", default=guess
    )
    options = {"sensitive": sensitive, "binarize": {}, "bins": {}, "merge": {}}
    mergeable = []
    for column in sensitive:
        how = "merge"
        if column in numeric and distinct.get(column, 0) > MAX_CATEGORIES:
            how = numeric_groups_input(table, column, distinct[column], tag, options)
        if how != "merge":
            continue
        values, counts = counts_of(table, column)
        limit = MAX_CATEGORIES if column in numeric else MAX_TEXT_GROUPS
        spec = merge_control(column, values, counts, f"roles-merge-{tag}-{column}", needed=len(values) > limit)
        if spec:
            options["merge"][column] = spec
        if MERGE_MIN_VALUES <= len(values) <= MERGE_MAX_VALUES:
            mergeable.append(column)
    return options, mergeable


def numeric_groups_input(table, column: str, n_values: int, tag: str, options: dict) -> str:
    """How a numeric column with many values makes groups — a threshold (``binarize``), quantile
    bins (``bins``), or merging values (returned as ``"merge"``, for the caller's control)."""
    ways = [w for w in GROUPS_BY if w != "merge" or n_values <= MERGE_MAX_VALUES]
    how = choose_radio(
        plain(f"“{column}” is numeric with {n_values:,} values: make groups by"), ways,
        key=f"roles-how-{tag}-{column}", format_func=GROUPS_BY.get, horizontal=True,
    )
    if how == "threshold":
        options["binarize"][column] = st.number_input(
            plain(f"Threshold for “{column}” (groups: below / at or above)"),
            key=kept_widget(f"roles-threshold-{tag}-{column}", lambda: float(np.nanmedian(table.numbers(column)))),
        )
    elif how == "bins":
        options["bins"][column] = int(st.number_input(
            plain(f"Number of quantile bins for “{column}”"), 2, MAX_CATEGORIES, key=kept_widget(f"roles-bins-{tag}-{column}", 4)
        ))
    return how


def group_size_inputs(tag: str) -> tuple[int, str]:
    left, right = st.columns(2)
    with left:
        minimum = int(st.number_input("Minimum group size", 1, 10_000, key=kept_widget(f"roles-min-size-{tag}", 2)))
    with right:
        drop = st.checkbox("Drop groups below the minimum instead of stopping", key=kept_widget(f"roles-drop-small-{tag}", False))
    return minimum, "drop" if drop else "error"


def table_roles(table, summary, defaults: dict, sensitive: list[str], tag: str) -> tuple[dict, dict]:
    """Options for :func:`fairaudit.prepare` (rows are samples), and the keys of the widgets the
    accounting's buttons change."""
    columns = table.columns
    numeric = set(summary.loc[summary.kind == "numeric", "column"])
    label_options = ["(none)"] + [c for c in columns if c not in sensitive]
    label = choose_one(
        "Label (ground truth, optional) — used for clustering accuracy in feature selection; never a feature",
        label_options, key=f"roles-label-{tag}", default=defaults.get("label") or "(none)",
    )
    label = None if label == "(none)" else label
    ignore = choose_many(
        "Ignore (identifiers, free text, anything that is not a feature)",
        [c for c in columns if c not in sensitive and c != label], key=f"roles-ignore-{tag}", default=defaults.get("ignore", []),
    )
    candidates = [c for c in columns if c not in sensitive and c != label and c not in ignore]
    features_key = None
    if not st.checkbox(
        "Features: every numeric column not used above (identifiers, empty and constant columns are left out and listed below)",
        key=kept_widget(f"roles-all-features-{tag}", True),
    ):
        features_key = f"roles-features-{tag}"
        last = last_features(candidates)
        features = choose_many("Features", candidates, key=features_key, default=last or [c for c in candidates if c in numeric])
    else:
        features = None
    left, right = st.columns(2)
    with left:
        one_hot = st.checkbox("One-hot encode text feature columns", key=kept_widget(f"roles-onehot-{tag}", False))
        missing = choose_one("Missing cells", list(MISSING_POLICIES), key=f"roles-missing-{tag}", format_func=MISSING_LABELS.get)
    with right:
        scaling = choose_one(
            "Scaling", list(SCALINGS), key=f"roles-scaling-{tag}", default=defaults.get("scaling", "standardize"),
            format_func=SCALING_LABELS.get,
        )
    id_key = f"roles-id-like-{tag}"
    roles = {"features": features, "label": label, "ignore": ignore, "one_hot": one_hot, "missing": missing, "scaling": scaling}
    if features is None:  # chosen under the accounting (the flagged columns come from it)
        roles["use_id_like"] = [c for c in st.session_state.get(id_key, []) if c in candidates]
    actions = {"missing": f"roles-missing-{tag}", "ignore": f"roles-ignore-{tag}", "features": features_key,
               "use_id_like": id_key if features is None else None}
    return roles, actions


def last_features(candidates: list[str]) -> list[str]:
    """The features of the roles last prepared in this session that are still candidates (where
    an explicit feature list starts)."""
    for _, prepared, _ in reversed(st.session_state.get("roles-prepared", [])):
        if prepared is not None:
            return [c for c in prepared.accounting.get("features", []) if c in candidates]
    return []


def tensor_roles(table, defaults: dict, sensitive: list[str], tag: str) -> dict:
    """Options for :func:`fairaudit.data.prepare_tensor` (one line per tensor cell)."""
    columns = [c for c in table.columns if c not in sensitive]
    index = choose_many(
        "Index columns, entity first (the groups describe the entities), e.g. user, item, context",
        columns, key=f"tensor-index-{tag}", default=defaults.get("tensor_index", []),
    )
    values = [c for c in columns if c not in index]
    value = choose_one("Value column", values, key=f"tensor-value-{tag}", default=defaults.get("tensor_value")) if values else None
    fill = None
    if st.checkbox("Fill absent cells with a value (otherwise an absent cell stops with its line)", key=kept_widget(f"tensor-fill-on-{tag}", False)):
        fill = float(st.number_input("Fill value", key=kept_widget(f"tensor-fill-{tag}", 0.0)))
    return {"index": index, "value": value, "fill": fill}


# ---------------------------------------------------------------- what the roles keep
def prepared_for(table, roles: dict, build):
    """``build()`` once per (file, roles) in this session: (AuditData or None, FairAuditError or None).
    The last :data:`PREPARED_KEPT` choices are kept, so switching back is instant."""
    signature = (st.session_state.get("table-id"), json.dumps(roles, sort_keys=True, default=str))
    kept = st.session_state.setdefault("roles-prepared", [])
    for entry in kept:
        if entry[0] == signature:
            return entry[1], entry[2]
    try:
        entry = (signature, build(), None)
    except FairAuditError as exc:
        entry = (signature, None, exc)
    kept.append(entry)
    del kept[:-PREPARED_KEPT]
    return entry[1], entry[2]


def check_and_use(table, summary, roles: dict, actions: dict, mergeable: list[str], build, kind: str) -> bool:
    """What the roles keep, then “Use this data” (the prepared data, not a second preparation).
    True when the roles shown are the data in use."""
    prepared, error = prepared_for(table, roles, build)
    st.subheader("What these roles keep")
    if error is not None:
        show_error(error)
        if isinstance(error, MissingValueError) and roles.get("missing") == "error" and actions.get("missing"):
            missing_policy_buttons(actions["missing"])
        st.caption("Change the roles above; the data in use stays as it is until you press “Use this data”.")
        return False
    missing = dict(zip(summary.column, summary.missing, strict=True))
    show_accounting(
        prepared.accounting, missing_by_column=missing, actions=actions, sensitive=roles["sensitive"], mergeable=mergeable,
        tensor=(prepared.tensor_shape, prepared.tensor_modes) if prepared.tensor_shape else None,
    )
    if same_data(prepared, current_data()):
        st.success("Data ready: this is the data in use. Open a method page (PCA, NMF, Feature selection, Tensor) to audit it.")
        st.page_link("pages/pca.py", label="Audit it with PCA", icon=":material/arrow_forward:")
        return True
    if st.button("Use this data", type="primary", key="roles-apply", icon=":material/check:"):
        set_data(prepared, {"kind": kind, "name": prepared.source.get("name")})
        st.rerun()
    return False


def same_data(a, b) -> bool:
    """``a`` and ``b`` are one file prepared the same way (e.g. the sample the session opened with,
    and the sample with its default roles on this page): same source, decisions and accounting."""
    def identity(d):
        return (d.source.get("sha256"), d.source.get("name"), d.log, d.accounting, d.scaling, d.feature_names,
                d.sensitive, d.label_name, d.tensor_shape)
    return a is b or identity(a) == identity(b)


def show_table_and_roles(table) -> bool:
    """Preview, roles and what they keep; True when those roles are the data in use."""
    summary = preview(table)
    defaults = st.session_state.get("role-defaults", {})
    tag = table.sha256[:12]  # widgets whose options depend on the table
    st.subheader("Column roles")
    layout = choose_radio(
        "Layout", LAYOUTS, key=f"roles-layout-{tag}", default=LAYOUTS[1] if defaults.get("tensor_index") else LAYOUTS[0],
        horizontal=True,
    )
    groups, mergeable = sensitive_inputs(table, summary, defaults, tag)
    sensitive = groups["sensitive"]
    if layout == LAYOUTS[0]:
        roles, actions = table_roles(table, summary, defaults, sensitive, tag)
        minimum, small_groups = group_size_inputs(tag)
        options = {**groups, **roles, "min_group_size": minimum, "small_groups": small_groups}
        return check_and_use(table, summary, options, actions, mergeable, lambda: prepare(table, **options), "table")
    else:
        st.caption(
            "A tensor for the CP decomposition family: every line gives one cell's coordinates and value; "
            "the sensitive column must be the same on every line of an entity. Duplicate or absent cells "
            "stop with the line named."
        )
        roles = tensor_roles(table, defaults, sensitive, tag)
        minimum, small_groups = group_size_inputs(tag)
        options = {**groups, **roles, "min_group_size": minimum, "small_groups": small_groups}
        actions = {"missing": None, "ignore": None, "features": None, "use_id_like": None}
        return check_and_use(table, summary, options, actions, mergeable, lambda: prepare_tensor(table, **options), "tensor")


def data_in_use(shown_above: bool) -> None:
    """The data the method pages audit: its groups (unless the roles above are that data) and the
    record that goes into every report."""
    data = current_data()
    st.subheader("The data in use")
    st.caption(data_summary(data))
    if data.tensor_shape:
        st.caption(
            f"A tensor of shape {' × '.join(map(str, data.tensor_shape))} (modes: {plain(', '.join(data.tensor_modes))}); "
            "groups are per entity."
        )
    if not shown_above:
        sizes = pd.DataFrame({"group": list(data.group_sizes()), "rows": list(data.group_sizes().values())})
        sizes["share"] = (sizes["rows"] / sizes["rows"].sum()).map(lambda v: f"{v:.1%}")
        st.dataframe(sizes, hide_index=True)
    with st.expander("Preprocessing record (goes into every report)"):
        fingerprint = data.fingerprint()
        st.markdown(f"**{plain(fingerprint['name'])}** · sha256 `{fingerprint['sha256']}`")
        for line in accounting_lines(data.accounting):
            st.markdown(f"- {words(line)}")
        for line in fingerprint["preprocessing"]:
            st.markdown(f"- {words(line)}")
        for warning in data.accounting.get("warnings", []):
            st.markdown(f"- ⚠ {words(warning)}")


table = choose_source()
data_in_use(shown_above=table is not None and show_table_and_roles(table))
