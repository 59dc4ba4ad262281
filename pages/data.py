"""Data page: pick a sample or upload a CSV, preview it, assign column roles, prepare it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from fairaudit import FairAuditError, prepare, read_table
from fairaudit.data import DEFAULT_MAX_MB, MAX_CATEGORIES, MISSING_POLICIES, SCALINGS, parse_merge, prepare_tensor
from fairaudit.samples import SAMPLES, sample_bytes
from fairaudit.vocabulary import OPTIONS, render
from pages.common import current_data, data_summary, plain, set_data, show_error

SMALL_GROUP_WARNING = 30
MISSING_LABELS = OPTIONS["missing"].choices  # the words error messages use for these choices
SCALING_LABELS = OPTIONS["scaling"].choices

st.title("Data")
st.markdown(
    "Start from an embedded sample or upload your own CSV. The file is only read, never changed. "
    "Then say which column holds the **sensitive attribute** (several columns give intersectional "
    "groups), which columns are **features**, and how to treat missing cells. The data in use is "
    "audited on the method pages: **PCA** first (seconds), then NMF, Feature selection and Tensor."
)
current = current_data()
st.caption("In use now: " + data_summary(current))
st.page_link("pages/pca.py", label="Audit the data in use with PCA", icon=":material/arrow_forward:")

source = st.radio("Source", ["Embedded sample", "Upload a CSV file"], horizontal=True, key="data-source")


def _read(source: tuple, raw, name: str, skip_rows: int, header, defaults: dict) -> None:
    """Read once per (source, reading options): ``source`` names the sample or the uploaded file,
    ``raw()`` gives its bytes only when it has to be read. A FairAuditError is shown and nothing
    changes."""
    identity = (source, name, skip_rows, header)
    if st.session_state.get("table-id") == identity:
        return
    try:
        table = read_table(raw(), name=name, skip_rows=skip_rows, header=header, max_mb=DEFAULT_MAX_MB)
    except FairAuditError as exc:
        show_error(exc)
        st.session_state.pop("table", None)
        st.session_state["table-id"] = identity
        return
    st.session_state["table"] = table
    st.session_state["table-id"] = identity
    st.session_state["role-defaults"] = defaults


if source == "Embedded sample":
    names = list(SAMPLES)
    choice = st.selectbox("Sample", names, format_func=lambda n: SAMPLES[n].title, key="data-sample")
    sample = SAMPLES[choice]
    st.caption(sample.description)
    _read(
        ("sample", choice),
        lambda: sample_bytes(choice),
        sample.file_name,
        0,
        None,
        {
            "sensitive": list(sample.sensitive),
            "ignore": list(sample.ignore),
            "label": sample.label,
            "scaling": sample.scaling,
            "tensor_index": list(sample.tensor_index),
            "tensor_value": sample.tensor_value,
        },
    )
else:
    upload = st.file_uploader(
        f"CSV file (up to {DEFAULT_MAX_MB} MB; comma, semicolon, tab or | separated; "
        "UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1)",
        type=["csv", "tsv", "txt", "data", "parquet"],
        max_upload_size=DEFAULT_MAX_MB,
        key="data-upload",
    )
    with st.expander("Reading options"):
        skip_rows = int(st.number_input("Lines to skip before the header", 0, 1000, 0, key="data-skip"))
        header_choice = st.radio(
            "Header row", ["detect", "first line is the header", "no header"], horizontal=True, key="data-header"
        )
    header = {"detect": None, "first line is the header": True, "no header": False}[header_choice]
    if upload is None:
        st.session_state.pop("table", None)
        st.session_state.pop("table-id", None)
        st.info("Choose a file to upload.")
    else:
        _read(("upload", upload.file_id), upload.getvalue, upload.name, skip_rows, header, {})

table = st.session_state.get("table")


def preview(table):
    """The first rows and a per-column summary; returns the summary table."""
    st.subheader(f"Preview of {plain(table.name)}")
    st.caption(plain(
        f"{table.n_rows:,} rows × {len(table.columns)} columns · "
        + (f"encoding {table.encoding} · delimiter {'TAB' if table.delimiter == chr(9) else repr(table.delimiter)} · "
           if table.format == "csv" else "Parquet · ")
        + f"{'header row' if table.has_header else 'no header row'} · sha256 {table.sha256[:16]}…"
    ))
    for line in table.log:
        st.caption(f"• {plain(line)}")
    st.dataframe(table.head(50), width="stretch", height=240)
    summary = table.describe()
    with st.expander("Columns: type, distinct values, missing cells"):
        st.dataframe(summary, hide_index=True, width="stretch")
    return summary


def sensitive_inputs(table, summary, defaults: dict) -> tuple[list[str], dict, dict, list[str]]:
    """Sensitive column(s); a numeric one with many values gets a threshold or quantile bins, the
    others can have values merged into groups (``merge`` items, parsed when the data are used)."""
    columns = table.columns
    numeric = set(summary.loc[summary.kind == "numeric", "column"])
    distinct = dict(zip(summary.column, summary.distinct, strict=True))
    guess = [c for c in defaults.get("sensitive", []) if c in columns]
    if not guess:
        guess = [c for c in columns if c.lower() in {"sex", "gender", "race", "group", "ethnicity"}][:1]
    sensitive = st.multiselect(
        "Sensitive attribute(s) — several columns give intersectional groups",
        columns,
        default=guess,
        key=f"roles-sensitive-{table.sha256[:8]}",
    )
    binarize, bins = {}, {}
    for column in sensitive:
        if column in numeric and distinct.get(column, 0) > MAX_CATEGORIES:
            values = pd.Series(table.numbers(column))
            how = st.radio(
                f"“{plain(column)}” is numeric with {distinct[column]} values: make groups by",
                ["a threshold", "quantile bins"],
                horizontal=True,
                key=f"roles-how-{column}",
            )
            if how == "a threshold":
                binarize[column] = st.number_input(
                    f"Threshold for “{plain(column)}” (groups: below / at or above)",
                    value=float(values.median()),
                    key=f"roles-threshold-{column}",
                )
            else:
                bins[column] = int(
                    st.number_input(f"Number of quantile bins for “{plain(column)}”", 2, 10, 4, key=f"roles-bins-{column}")
                )
    merges = []
    for column in sensitive:
        if column in binarize or column in bins:
            continue
        text = st.text_input(
            f"Merge values into groups — “{plain(column)}” (optional)",
            placeholder="e.g. 1,2:high; *:low   (* = every value not listed; others keep their own group)",
            key=f"roles-merge-{column}",
        )
        merges += [f"{column}={part.strip()}" for part in text.split(";") if part.strip()]
    return sensitive, binarize, bins, merges


def group_size_inputs() -> tuple[int, str]:
    left, right = st.columns(2)
    with left:
        minimum = int(st.number_input("Minimum group size", 1, 10_000, 2, key="roles-min-size"))
    with right:
        drop = st.checkbox("Drop groups below the minimum instead of stopping", key="roles-drop-small")
    return minimum, "drop" if drop else "error"


def table_roles(table, summary, defaults: dict, sensitive: list[str]) -> dict:
    """Options for :func:`fairaudit.prepare` (rows are samples)."""
    columns = table.columns
    numeric = set(summary.loc[summary.kind == "numeric", "column"])
    label_options = ["(none)"] + [c for c in columns if c not in sensitive]
    default_label = defaults.get("label") or "(none)"
    label = st.selectbox(
        "Label (ground truth, optional) — used for clustering accuracy in feature selection; never a feature",
        label_options,
        index=label_options.index(default_label) if default_label in label_options else 0,
        key=f"roles-label-{table.sha256[:8]}",
    )
    label = None if label == "(none)" else label
    id_like = [c for c in columns if c.lower() in {"id", "index"} or c.lower().endswith("_id")]
    ignore = st.multiselect(
        "Ignore (identifiers, free text, anything that is not a feature)",
        [c for c in columns if c not in sensitive and c != label],
        default=[c for c in defaults.get("ignore", id_like) if c in columns and c not in sensitive and c != label],
        key=f"roles-ignore-{table.sha256[:8]}",
    )
    candidates = [c for c in columns if c not in sensitive and c != label and c not in ignore]
    features = None
    if not st.checkbox("Features: every numeric column not used above", value=True, key="roles-all-features"):
        features = st.multiselect("Features", candidates, default=[c for c in candidates if c in numeric], key="roles-features")
    left, right = st.columns(2)
    with left:
        one_hot = st.checkbox("One-hot encode text feature columns", value=False, key="roles-onehot")
        missing = st.selectbox("Missing cells", MISSING_POLICIES, format_func=MISSING_LABELS.get, key="roles-missing")
    with right:
        scaling_default = defaults.get("scaling", "standardize")
        scaling = st.selectbox(
            "Scaling",
            SCALINGS,
            index=SCALINGS.index(scaling_default),
            format_func=SCALING_LABELS.get,
            key=f"roles-scaling-{table.sha256[:8]}",
        )
    return {"features": features, "label": label, "ignore": ignore, "one_hot": one_hot, "missing": missing, "scaling": scaling}


def tensor_roles(table, defaults: dict, sensitive: list[str]) -> dict:
    """Options for :func:`fairaudit.data.prepare_tensor` (one line per tensor cell)."""
    columns = [c for c in table.columns if c not in sensitive]
    default_index = [c for c in defaults.get("tensor_index", []) if c in columns]
    index = st.multiselect(
        "Index columns, entity first (the groups describe the entities), e.g. user, item, context",
        columns,
        default=default_index,
        key=f"tensor-index-{table.sha256[:8]}",
    )
    values = [c for c in columns if c not in index]
    default_value = defaults.get("tensor_value")
    value = st.selectbox(
        "Value column",
        values,
        index=values.index(default_value) if default_value in values else 0,
        key=f"tensor-value-{table.sha256[:8]}",
    ) if values else None
    fill = None
    if st.checkbox("Fill absent cells with a value (otherwise an absent cell stops with its line)", key="tensor-fill-on"):
        fill = float(st.number_input("Fill value", value=0.0, key="tensor-fill"))
    return {"index": index, "value": value, "fill": fill}


def use_data(build) -> None:
    """Prepare the data with ``build()``; a FairAuditError is shown and the old data stays."""
    try:
        prepared = build()
    except FairAuditError as exc:
        show_error(exc)
        return
    set_data(prepared, {"kind": "table", "name": prepared.source.get("name")})
    st.success("Data ready. Open a method page (PCA, NMF, Feature selection, Tensor) to audit it.")
    st.page_link("pages/pca.py", label="Audit it with PCA", icon=":material/arrow_forward:")


def show_table_and_roles(table) -> None:
    summary = preview(table)
    defaults = st.session_state.get("role-defaults", {})
    st.subheader("Column roles")
    layouts = ["Rows are samples (an ordinary table)", "Long-format tensor (one line per cell)"]
    layout = st.radio(
        "Layout", layouts, index=1 if defaults.get("tensor_index") else 0, horizontal=True, key=f"roles-layout-{table.sha256[:8]}"
    )
    sensitive, binarize, bins, merges = sensitive_inputs(table, summary, defaults)
    if layout == layouts[0]:
        options = table_roles(table, summary, defaults, sensitive)
        minimum, small_groups = group_size_inputs()
        if st.button("Use this data", type="primary", key="roles-apply"):
            use_data(lambda: prepare(
                table, sensitive=sensitive, binarize=binarize, bins=bins, merge=parse_merge(merges), min_group_size=minimum,
                small_groups=small_groups, **options,
            ))
    else:
        st.caption(
            "A tensor for the CP decomposition family: every line gives one cell's coordinates and value; "
            "the sensitive column must be the same on every line of an entity. Duplicate or absent cells "
            "stop with the line named."
        )
        options = tensor_roles(table, defaults, sensitive)
        minimum, small_groups = group_size_inputs()
        if st.button("Use this data", type="primary", key="roles-apply"):
            use_data(lambda: prepare_tensor(
                table, sensitive=sensitive, binarize=binarize, bins=bins, merge=parse_merge(merges), min_group_size=minimum,
                small_groups=small_groups, **options,
            ))


if table is not None:
    show_table_and_roles(table)

data = current_data()
st.subheader("Groups in the data in use")
if data.tensor_shape:
    st.caption(
        f"A tensor of shape {' × '.join(map(str, data.tensor_shape))} (modes: {plain(', '.join(data.tensor_modes))}); "
        "groups are per entity."
    )
sizes = pd.DataFrame({"group": list(data.group_sizes()), "rows": list(data.group_sizes().values())})
sizes["share"] = (sizes["rows"] / sizes["rows"].sum()).map(lambda v: f"{v:.1%}")
st.dataframe(sizes, hide_index=True)
small = sizes[sizes.rows < SMALL_GROUP_WARNING]
for _, row in small.iterrows():
    st.warning(
        f"Group {plain(row['group'])} has only {row['rows']} rows: its per-group metrics will be noisy. "
        "Use fewer sensitive columns (fewer intersections), or drop the group with “Minimum group size” and "
        "“Drop groups below the minimum instead of stopping” above."
    )
with st.expander("Preprocessing record (goes into every report)"):
    fingerprint = data.fingerprint()
    st.markdown(f"**{plain(fingerprint['name'])}** · sha256 `{fingerprint['sha256']}`")
    st.markdown(
        f"{fingerprint['rows']} rows used of {fingerprint['rows_read']} read · features: "
        f"{plain(', '.join(map(str, fingerprint['feature_names'])))}"
    )
    for line in fingerprint["preprocessing"]:
        st.markdown(f"- {plain(render(line, 'dashboard'))}")
for warning in data.accounting.get("warnings", []):
    st.warning(plain(render(warning, "dashboard")))
