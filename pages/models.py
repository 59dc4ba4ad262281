"""Models page: take the audit to action — download a fitted model, transform new rows with it,
audit the representation you already have (variant "yours"). A thin view over
:mod:`fairaudit.models` and :mod:`fairaudit.yours`."""

from __future__ import annotations

import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILY_TITLES, AuditConfig, family_options, is_sweep_variant
from fairaudit.data import read_table
from fairaudit.models import load_model, model_directory_name, refit_model, transform_table
from fairaudit.plots import variant_title
from fairaudit.yours import COMPONENT_METHODS, YOURS, attach, audit_yours, read_components, read_embedding, sentences
from pages.common import current_data, data_summary, plain, results_for, show_error, show_figures

st.title("Models: take the result with you")
data = current_data()
st.caption(data_summary(data))
results = results_for(data)
prepared: dict = st.session_state.setdefault("models-prepared", {})

download, transform, yours = st.tabs(["Download a fitted model", "Transform new rows", "Audit your representation"])

# ---------------------------------------------------------------- download a fitted model
with download:
    st.markdown(
        "A fitted model leaves as data: a ZIP with `manifest.json` (method, variant, rank, the features in order, "
        "the centring and scaling to apply, the sensitive attribute, the data fingerprint, this fit's own audit "
        "records) and `arrays.npz` (the fitted arrays, read without pickle). `fairaudit.load_model(path)` reads it "
        "anywhere and `python -m fairaudit transform MODEL data.csv --out scores.csv` applies it."
    )
    families = [m for m in results if m in FAMILY_TITLES]
    if not families:
        st.info("Run an audit first (PCA, NMF, Feature selection or Tensor page); its fitted models can then be downloaded here.")
    else:
        method = st.selectbox("Family", families, format_func=FAMILY_TITLES.get, key="models-family")
        records = results[method].records
        variants = [v for v in dict.fromkeys(records[records.method == method].variant) if v != YOURS and not is_sweep_variant(v)]
        variant = st.selectbox("Variant", variants, format_func=lambda v: variant_title(method, v), key="models-variant")
        ranks = sorted(int(r) for r in set(records[(records.method == method) & (records.variant == variant)]["rank"]))
        rank = st.selectbox("Rank", ranks, index=len(ranks) - 1, key="models-rank")
        key = (method, variant, int(rank), data.cache_key())
        if key not in prepared and st.button("Prepare the model", type="primary", key="models-prepare"):
            try:
                with st.spinner(f"Fitting {variant_title(method, variant)} at rank {rank} with the audit's settings…"):
                    prepared[key] = refit_model(results[method], data, method, variant, int(rank))
            except FairAuditError as exc:
                show_error(exc)
        if key in prepared:
            model = prepared[key]
            st.success(plain(model.describe()))
            refit = model.manifest.get("refit")
            if refit and (refit.get("max_abs_difference") or 0) > 1e-9:
                st.warning(f"Fitted again, its audit values differ from the audit's by up to {refit['max_abs_difference']:.3g}.")
            for note in model.manifest.get("notes", []):
                st.caption(plain(note))
            st.download_button(
                "Download the fitted model (ZIP)", model.to_zip(), file_name=f"{model_directory_name(method, variant, rank)}.zip",
                mime="application/zip", key="models-download",
            )

# ---------------------------------------------------------------- transform new rows
with transform:
    st.markdown(
        "Apply a model to new rows: the file needs the model's feature columns (by name; other columns are ignored), "
        "and is only read. Each output row keeps the ID column you mark, or its line in the file."
    )
    choices = {f"{model.method}/{model.variant}, rank {model.rank}": model for model in prepared.values()}
    source = st.radio("Model", ["A model prepared on the first tab", "Upload a model (ZIP)"], horizontal=True, key="models-source")
    model = None
    if source.startswith("Upload"):
        upload = st.file_uploader("Model (ZIP)", type=["zip"], key="models-upload-model")
        if upload is not None:
            try:
                model = load_model(upload.getvalue())
            except FairAuditError as exc:
                show_error(exc)
    elif choices:
        model = choices[st.selectbox("Prepared model", list(choices), key="models-prepared-choice")]
    else:
        st.info("Prepare a model on the first tab, or upload one.")
    rows = st.file_uploader("Rows to transform (CSV)", type=["csv", "txt", "tsv"], key="models-upload-rows")
    if model is not None and rows is not None:
        try:
            table = read_table(rows.getvalue(), name=rows.name)
            id_column = st.selectbox("ID column", [None, *table.columns], format_func=lambda c: "(none: the file line)" if c is None else c,
                                     key="models-id")
            missing = st.selectbox("Rows with a missing cell", ["error", "drop"], key="models-missing",
                                   format_func={"error": "stop and list them", "drop": "leave them out of the output"}.get)
            frame, found = transform_table(model, table, id_column=id_column, missing=missing)
            st.caption(plain(f"{len(table.frame)} rows read, {len(frame)} transformed"
                             + (f"; ignored columns: {', '.join(found.unused)}" if found.unused else "")))
            for line in found.log:
                st.warning(plain(line))
            st.dataframe(frame.head(200), hide_index=True)
            st.download_button(
                "Download the transformed rows", frame.to_csv(index=False).encode("utf-8"),
                file_name=f"{rows.name.rsplit('.', 1)[0]}_{model.method}_{model.variant}_rank{model.rank}.csv", mime="text/csv",
                key="models-download-rows",
            )
        except FairAuditError as exc:
            show_error(exc)

# ---------------------------------------------------------------- your own representation
with yours:
    st.markdown(
        "Audit the PCA or NMF already in your pipeline: upload its components (one row per component, a header naming "
        "the features, e.g. `pd.DataFrame(pca.components_, columns=features).to_csv(path, index=False)`), or "
        "embeddings with one row per data row. They are audited as **Your representation**, next to vanilla and "
        "fair when this family has been audited. Components must be in the scaling the family uses (the Data page's "
        "scaling for PCA; the NMF input for NMF)."
    )
    kind = st.radio("What you have", ["Components (rank × features)", "Embeddings (one row per data row)"], horizontal=True,
                    key="models-yours-kind")
    if kind.startswith("Components"):
        family = st.radio("Audit it as", list(COMPONENT_METHODS), format_func=FAMILY_TITLES.get, horizontal=True, key="models-yours-family")
        upload = st.file_uploader("Components file (rank × features)", type=["csv", "txt", "npy"], key="models-yours-components")
    else:
        family = st.selectbox("Show it with", list(results) or ["pca"], format_func=FAMILY_TITLES.get, key="models-yours-with")
        upload = st.file_uploader("Embeddings file (one row per data row)", type=["csv", "txt", "npy"], key="models-yours-embedding")
    if upload is not None:
        base = results.get(family)
        try:
            if base is not None:
                config = AuditConfig(methods=(family,), ranks=base.config.get("ranks"), random_state=base.config.get("random_state", 0),
                                     options={family: family_options(base.config, family)})
            else:
                config = AuditConfig(methods=(family,))
            reader = read_components if kind.startswith("Components") else read_embedding
            representation = reader(upload.getvalue(), data, name=upload.name)
            with st.spinner("Auditing your representation…"):
                audited = audit_yours(data, representation, config)
            shown = attach(base, audited) if base is not None and YOURS not in set(base.records.variant) else audited
            st.caption(plain(f"{representation.source['name']}: {' × '.join(map(str, representation.source['shape']))}, "
                             f"{representation.source['layout']}."))
            if base is None:
                st.info(f"Audit {FAMILY_TITLES.get(family, family)} on its page to see vanilla and fair next to yours.")
            for note in audited.warnings:
                st.warning(plain(note))
            for sentence in sentences(shown, family):
                st.info(plain(sentence))
            show_figures(shown, family)
            st.dataframe(audited.records, hide_index=True)
        except FairAuditError as exc:
            show_error(exc)
