"""Plotly figures built from an audit's tidy records — the same objects the app shows and the
HTML report embeds. Nothing here computes a metric: it only reshapes ``AuditResult.records``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .metrics import METRIC_DEFINITIONS

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
VARIANT_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]

VARIANT_TITLES: dict[str, dict[str, str]] = {
    "pca": {
        "vanilla": "PCA",
        "fair_eig": "Fair PCA (exact eigen-solver)",
        "fair_sdp": "Fair PCA (SDP + LP, Samadi Alg. 1)",
        "fair_mw": "Fair PCA (multiplicative weights)",
        "jevd": "JEVD-PCA",
        "cov_fair": "covFairPCA",
    },
    "fs": {
        "variance": "Variance",
        "lapscore": "Laplacian Score",
        "spec": "SPEC",
        "mcfs": "MCFS",
        "fufs": "FUFS (fair)",
    },
}
"""Per family, variant name → display title."""


def safe(text) -> str:
    """User-supplied text made inert for plotly's pseudo-HTML (tags shown literally)."""
    return html.escape(str(text), quote=False)


def variant_title(method: str, variant: str) -> str:
    return VARIANT_TITLES.get(method, {}).get(variant, variant)


def metric_title(metric: str) -> str:
    return METRIC_DEFINITIONS.get(metric, {}).get("title", metric)


def _rows(records: pd.DataFrame, method: str, metric: str, variants: Sequence[str] | None) -> pd.DataFrame:
    rows = records[(records.method == method) & (records.metric == metric)]
    if variants is not None:
        rows = rows[rows.variant.isin(variants)]
    return rows.sort_values("rank")


def _ordered_variants(rows: pd.DataFrame, variants: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(rows.variant))
    return [v for v in variants if v in present] if variants is not None else present


def _layout(fig: go.Figure, title: str, y_title: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        title=dict(text=safe(title), x=0.01),
        height=height,
        margin=dict(l=60, r=20, t=60, b=50),
        legend=dict(orientation="h", yanchor="top", y=-0.18),
        template="plotly_white",
        hovermode="x unified",
    )
    fig.update_yaxes(title_text=safe(y_title), row=1, col=1)
    return fig


def group_curves(
    records: pd.DataFrame,
    method: str,
    metric: str,
    variants: Sequence[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """One panel per variant, side by side, with a line per group over rank (shared y axis)."""
    rows = _rows(records, method, metric, variants)
    rows = rows[rows.group != ""]
    ordered = _ordered_variants(rows, variants)
    groups = list(dict.fromkeys(rows.group))
    fig = make_subplots(
        rows=1,
        cols=max(1, len(ordered)),
        shared_yaxes=True,
        subplot_titles=[safe(variant_title(method, v)) for v in ordered] or [""],
        horizontal_spacing=0.04,
    )
    for col, variant in enumerate(ordered, start=1):
        part = rows[rows.variant == variant]
        for index, group in enumerate(groups):
            line = part[part.group == group]
            fig.add_trace(
                go.Scatter(
                    x=line["rank"],
                    y=line["value"],
                    mode="lines+markers",
                    name=safe(group),
                    legendgroup=safe(group),
                    showlegend=col == 1,
                    line=dict(color=PALETTE[index % len(PALETTE)]),
                    hovertemplate=f"{safe(group)}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="rank", dtick=1 if rows["rank"].nunique() <= 12 else None, row=1, col=col)
    return _layout(fig, title or f"{metric_title(metric)} by group", metric_title(metric))


def variant_curves(
    records: pd.DataFrame,
    method: str,
    metric: str,
    variants: Sequence[str] | None = None,
    title: str | None = None,
    log_y: bool = False,
) -> go.Figure:
    """One line per variant over rank for a whole-data metric."""
    rows = _rows(records, method, metric, variants)
    rows = rows[rows.group == ""]
    fig = make_subplots(rows=1, cols=1)
    for index, variant in enumerate(_ordered_variants(rows, variants)):
        line = rows[rows.variant == variant]
        fig.add_trace(
            go.Scatter(
                x=line["rank"],
                y=line["value"],
                mode="lines+markers",
                name=safe(variant_title(method, variant)),
                line=dict(color=PALETTE[index % len(PALETTE)], dash=VARIANT_DASHES[index % len(VARIANT_DASHES)]),
                hovertemplate=f"{safe(variant)}: %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="rank", dtick=1 if rows["rank"].nunique() <= 12 else None)
    if log_y:
        fig.update_yaxes(type="log")
    return _layout(fig, title or metric_title(metric), metric_title(metric))


FAMILY_FIGURES: dict[str, list[tuple[str, str]]] = {
    "pca": [
        ("group", "loss"),
        ("group", "error"),
        ("variant", "max_loss"),
        ("variant", "loss_gap"),
        ("variant", "variance_explained"),
        ("variant", "mmd2"),
        ("variant", "mmd2_rbf"),
        ("variant", "unfairness_balanced"),
        ("variant", "seconds"),
    ],
    "fs": [
        ("variant", "balance"),
        ("variant", "proportion"),
        ("variant", "acc"),
        ("variant", "nmi"),
        ("variant", "alignment_protected"),
        ("variant", "alignment_data"),
        ("variant", "unfairness_balanced"),
        ("variant", "seconds"),
    ],
}
"""Per family, the standard figures: ``("group", metric)`` or ``("variant", metric)``."""


def family_figures(records: pd.DataFrame, method: str, variants: Sequence[str] | None = None) -> list[tuple[str, go.Figure]]:
    """The standard figures of a family that has records, as ``(metric, figure)`` pairs."""
    figures = []
    present = set(records[records.method == method].metric)
    for kind, metric in FAMILY_FIGURES.get(method, []):
        if metric not in present:
            continue
        if kind == "group":
            figures.append((metric, group_curves(records, method, metric, variants)))
        else:
            figures.append((metric, variant_curves(records, method, metric, variants, log_y=metric == "seconds")))
    return figures
