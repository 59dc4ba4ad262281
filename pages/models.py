"""Models page: take the audit to action — download a fitted model, transform new rows with it,
audit the representation you already have (variant "yours"). A thin view over
:mod:`fairaudit.models` and :mod:`fairaudit.yours`.

The work a user starts here (fitting a model again with the audit's settings, auditing their own
components or embeddings) is a session run like any audit (:func:`pages.common.start_work`):
progress in the sidebar, cancel, and it goes on while the user looks at other pages. The page
keeps each run it started (``models-runs``) and takes its output when it ends."""

from __future__ import annotations

import hashlib
import json

import streamlit as st

from fairaudit import FairAuditError
from fairaudit.audit import FAMILIES, AuditConfig, erased_variant, family_options, family_run
from fairaudit.data import read_table
from fairaudit.families import FAMILY_TITLES
from fairaudit.findings import findings
from fairaudit.models import (
    GAP_METRICS,
    exportable,
    load_model,
    model_directory_name,
    refit_model,
    suggested_export,
    transform_table,
)
from fairaudit.plots import variant_title
from fairaudit.report import spreadsheet_safe
from fairaudit.yours import COMPONENT_METHODS, YOURS, attach, audit_yours, read_components, read_embedding, sentences
from pages.common import (
    UNCERTAINTY_SETTINGS,
    current_data,
    data_summary,
    data_token,
    kept_upload,
    leace_control,
    plain,
    results_for,
    runs_panel,
    show_error,
    show_figures,
    show_findings_list,
    show_notes,
    start_work,
    words,
)

st.title("Models: take the result with you")
data, token = current_data(), data_token()
st.caption(data_summary(data) + " — change it on the **Data** page.")
results = results_for()
prepared: dict = st.session_state.setdefault("models-prepared", {})
"""(method, variant, rank, data token) → the PortableModel prepared for download."""
audited_yours: dict = st.session_state.setdefault("models-yours", {})
"""(kind, family, file sha256, base audit, data token) → the audit of the user's representation."""
runs: dict = st.session_state.setdefault("models-runs", {})
"""The runs this page started, by the key of what they produce (kept until replaced)."""


def collect(key, store: dict) -> None:
    """Take the output of the run started for ``key`` into ``store`` once it has ended; say why
    when it produced nothing (an error in the dashboard's words, or a cancellation)."""
    run = runs.get(key)
    if run is None or run.active:
        return
    output = run.outputs.get(run.jobs[0].method)
    if output is not None:
        store[key] = output
        del runs[key]
        return
    for _, message in run.errors:
        st.error(plain(message))
    if run.state == "cancelled":
        st.warning(f"{plain(run.label)} was cancelled; nothing from it was kept.")


def start(key, label: str, method: str, work, config: AuditConfig | None = None) -> None:
    """Start ``work`` as a session run; ``config`` is what it runs (for its time estimate): by
    default one family's fits without intervals (a model's refit needs no replicates)."""
    runs[key] = start_work(label, method, config or AuditConfig(methods=(method,), bootstrap=0), work)


REFIT_TOLERANCE = 1e-9
"""A refit whose audit values differ from the audit's by more than this is called out (refits
replay the audit's settings and rank path: 0 difference for every family on the default sample)."""

fitted, transform, yours = st.tabs(["Fitted models", "Transform new rows", "Your representation"])

# ---------------------------------------------------------------- download a fitted model
with fitted:
    st.markdown(
        "A fitted model leaves as data: a ZIP with `manifest.json` (method, variant, rank, the features in order, "
        "the centring and scaling to apply, the sensitive attribute, the data fingerprint, this fit's own audit "
        "records) and `arrays.npz` (the fitted arrays, read without pickle). `fairaudit.load_model(path)` reads it "
        "anywhere and `python -m fairaudit transform MODEL data.csv --out scores.csv` applies it."
    )
    families = [m for m in FAMILIES if m in results]
    if not families:
        st.info("Run an audit first (PCA, NMF, Feature selection or Tensor page); its fitted models can then be downloaded here.")
    else:
        columns = st.columns(3)
        method = columns[0].selectbox("Family", families, format_func=FAMILY_TITLES.get, key="models-family")
        fits = exportable(results[method], method)
        suggested_variant, suggested_rank = suggested_export(results[method], method)
        variant = columns[1].selectbox("Variant", list(fits), index=list(fits).index(suggested_variant),
                                       format_func=lambda v: variant_title(method, v), key=f"models-variant-{method}")
        ranks = fits[variant]
        rank = int(columns[2].selectbox("Rank", ranks, index=ranks.index(suggested_rank) if suggested_rank in ranks else len(ranks) // 2,
                                        key=f"models-rank-{method}-{variant}"))
        st.caption(f"Suggested: {plain(variant_title(method, suggested_variant))} at rank {suggested_rank}"
                   + (" (where vanilla's gap between groups is largest)" if method in GAP_METRICS else "")
                   + ". Any audited fit can be taken away.")
        key = (method, variant, rank, token)
        collect(key, prepared)
        run = runs.get(key)
        if key not in prepared and (run is None or not run.active):
            if st.button("Prepare the model", type="primary", key="models-prepare",
                         help="Fits this variant again at this rank with the audit's own settings (seed, options) "
                              "and checks its records against the audit's."):
                result = results[method]
                start(key, f"Model: {variant_title(method, variant)}, rank {rank}", method,
                      lambda progress: refit_model(result, data, method, variant, rank, progress=progress))
                collect(key, prepared)
        if key in runs and runs[key].active:
            runs_panel("page-models-fitted", runs=[runs[key]])
        if key in prepared:
            model = prepared[key]
            st.success(plain(model.describe()))
            refit = model.manifest.get("refit") or {}
            difference = refit.get("max_abs_difference")
            if difference is not None and difference > REFIT_TOLERANCE:
                st.warning(f"Fitted again with the audit's settings, its audit values differ from the audit's by up to "
                           f"{difference:.3g}: the model is close to, not exactly, the audited fit.")
            elif difference is not None:
                st.caption(f"Fitted again with the audit's settings: its {refit.get('compared_values', 0)} audit values match "
                           f"the audit's (largest difference {difference:.1g}).")
            for note in model.manifest.get("notes", []):
                st.caption(words(note))
            st.download_button(
                "Download the fitted model (ZIP)", model.to_zip(), file_name=f"{model_directory_name(method, variant, rank)}.zip",
                mime="application/zip", key="models-download", on_click="ignore",
            )

# ---------------------------------------------------------------- transform new rows
with transform:
    st.markdown(
        "Apply a model to new rows: the file needs the model's feature columns (by name; other columns are ignored), "
        "and is only read. Each output row keeps the ID column you mark, or its line in the file."
    )
    choices = {
        f"{variant_title(model.method, model.variant)} ({model.method}), rank {model.rank}": model
        for key, model in prepared.items() if key[-1] == token
    }
    source = st.radio("Model", ["A model prepared under “Fitted models”", "Upload a model (ZIP)"], horizontal=True,
                      key="models-source")
    model = None
    if source.startswith("Upload"):
        upload = kept_upload("Model (ZIP)", "models-upload-model", ["zip"])
        if upload is not None:
            try:
                model = load_model(upload[1])
            except FairAuditError as exc:
                show_error(exc)
    elif choices:
        model = choices[st.selectbox("Prepared model", list(choices), key="models-prepared-choice")]
    else:
        st.info("Prepare a model under “Fitted models”, or upload one.")
    rows = kept_upload("Rows to transform (CSV)", "models-upload-rows", ["csv", "txt", "tsv"])
    if model is not None and rows is not None:
        rows_name, rows_bytes = rows
        try:
            table = read_table(rows_bytes, name=rows_name)
            left, right = st.columns(2)
            id_column = left.selectbox("ID column", [None, *table.columns], format_func=lambda c: "(none: the file line)" if c is None else c,
                                       key="models-id")
            missing = right.selectbox("Rows with a missing cell", ["error", "drop"], key="models-missing",
                                      format_func={"error": "stop and list them", "drop": "leave them out of the output"}.get)
            frame, found = transform_table(model, table, id_column=id_column, missing=missing)
            st.caption(plain(f"{model.describe()}. {table.n_rows} rows read, {len(frame)} transformed"
                             + (f"; ignored columns: {', '.join(found.unused)}" if found.unused else "")))
            for line in found.log:
                st.warning(words(line))
            st.dataframe(frame.head(200), hide_index=True)
            st.download_button(
                "Download the transformed rows", spreadsheet_safe(frame).to_csv(index=False).encode("utf-8"),
                file_name=f"{rows_name.rsplit('.', 1)[0]}_{model.method}_{model.variant}_rank{model.rank}.csv", mime="text/csv",
                key="models-download-rows", on_click="ignore",
                help="Text cells a spreadsheet would run as a formula get a leading ' (as the Report page's CSV).",
            )
        except FairAuditError as exc:
            show_error(exc)

# ---------------------------------------------------------------- your own representation
with yours:
    st.markdown(
        "Audit the PCA or NMF already in your pipeline: upload its components (one row per component, a header naming "
        "the features, e.g. `pd.DataFrame(pca.components_, columns=features).to_csv(path, index=False)`), or "
        "embeddings with one row per data row. They are audited as **Your representation**, next to vanilla and "
        "fair when this family has been audited on its page, at the ranks audited there. Components must be in the "
        "scaling the family uses (the Data page's scaling for PCA; the NMF input for NMF)."
    )
    kind = st.radio("What you have", ["Components (rank × features)", "Embeddings (one row per data row)"], horizontal=True,
                    key="models-yours-kind")
    components = kind.startswith("Components")
    if components:
        family = st.radio("Audit it as", list(COMPONENT_METHODS), format_func=FAMILY_TITLES.get, horizontal=True,
                          key="models-yours-family")
        upload = kept_upload("Components file (rank × features)", "models-yours-components", ["csv", "txt", "npy"])
    else:
        options = [m for m in FAMILIES if m in results] or ["pca"]
        family = st.selectbox("Show it with", options, format_func=FAMILY_TITLES.get, key="models-yours-with")
        upload = kept_upload("Embeddings file (one row per data row)", "models-yours-embedding", ["csv", "txt", "npy"])
    base = results.get(family)
    leace = leace_control("models-yours-leace", {"leace": bool(base is not None and family_run(base.config, family).get("leace"))})
    if upload is not None:
        name, raw = upload
        audit_id = None if base is None else (base.created, base.seconds, json.dumps(base.config, sort_keys=True, default=str))
        key = ("components" if components else "embedding", family, hashlib.sha256(raw).hexdigest(), audit_id, leace, token)
        collect(key, audited_yours)
        try:
            reader = read_components if components else read_embedding
            representation = reader(raw, data, name=name)
            if base is not None:
                # the audit's own settings, its intervals, held-out rows and tolerance included, so
                # that yours is judged next to vanilla by the same rules
                config = AuditConfig(methods=(family,), ranks=base.config.get("ranks"), random_state=base.config.get("random_state", 0),
                                     leakage_classifier=base.config.get("leakage_classifier", AuditConfig.leakage_classifier),
                                     options={family: family_options(base.config, family)}, leace=leace,
                                     **{name: base.config.get(name, getattr(AuditConfig, name)) for name in UNCERTAINTY_SETTINGS})
            else:
                config = AuditConfig(methods=(family,), leace=leace)
        except FairAuditError as exc:
            show_error(exc)
        else:
            source = representation.source
            st.caption(plain(f"{source['name']}: {' × '.join(map(str, source['shape']))}, {source['layout']}."))
            label = f"Your representation ({FAMILY_TITLES.get(family, family)})"

            def audit_it():
                start(key, label, family, lambda progress: audit_yours(data, representation, config, progress=progress), config)
                collect(key, audited_yours)

            if key not in audited_yours and key not in runs:  # the upload is the request: audit it once
                audit_it()
            elif key not in audited_yours and not runs[key].active and st.button(
                "Audit it again", key="models-yours-again", help="The last audit of this file was cancelled or stopped."
            ):
                audit_it()
            if key in runs and runs[key].active:
                runs_panel("page-models-yours", runs=[runs[key]])
            if key in audited_yours:
                audited = audited_yours[key]
                shown = attach(base, audited) if base is not None and not {YOURS, erased_variant(YOURS)} & set(base.records.variant) else audited
                if base is None:
                    st.info(f"Audit {FAMILY_TITLES.get(family, family)} on its page to see vanilla and fair next to yours.")
                for sentence in sentences(shown, family):
                    st.info(words(sentence))
                # its verdict next to vanilla, with the rule
                show_findings_list([f for f in findings(shown).get(family, []) if f.variant in (YOURS, erased_variant(YOURS))])
                show_notes(audited, family)
                show_figures(shown, family)
                st.subheader("Your representation's records")
                st.dataframe(audited.records, hide_index=True)
