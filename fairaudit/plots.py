"""Plotly figures built from an audit's tidy records — the same objects the app shows and the
HTML report embeds. Nothing here computes a metric: it only reshapes ``AuditResult.records``.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .audit import is_sweep_variant, split_variant, whole_metrics
from .metrics import METRIC_DEFINITIONS

GROUP_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
GROUP_SYMBOLS = ["circle", "diamond", "square", "triangle-up", "x", "star", "cross", "triangle-down", "pentagon", "hexagon"]
GROUP_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
VANILLA_COLOUR = "#3b3b3b"
VARIANT_COLOURS = ["#e6550d", "#2b8cbe", "#31a354", "#756bb1", "#dd1c77", "#8c6d31", "#636363"]
VARIANT_DASHES = ["dash", "dot", "dashdot", "longdash", "longdashdot", "solid"]

VARIANT_TITLES: dict[str, dict[str, str]] = {
    "pca": {
        "vanilla": "PCA",
        "fair_eig": "Fair PCA (exact eigen-solver)",
        "fair_sdp": "Fair PCA (SDP + LP, Samadi Alg. 1)",
        "fair_mw": "Fair PCA (multiplicative weights)",
        "jevd": "JEVD-PCA",
        "cov_fair": "covFairPCA",
    },
    "nmf": {
        "vanilla": "NMF",
        "fair_mu": "Fairer-NMF (multiplicative updates, Alg. 3)",
        "fair_am": "Fairer-NMF (alternating minimisation, Alg. 2)",
    },
    "cpd": {
        "vanilla": "CP (ALS)",
        "fatr": "FATR (orthogonality)",
        "hsic": "HSIC-BCD (linear kernel)",
        "khsic": "KHSIC-BCD (RBF kernel)",
    },
    "fs": {
        "variance": "Variance",
        "lapscore": "Laplacian Score",
        "spec": "SPEC",
        "mcfs": "MCFS",
        "fufs": "FUFS (fair)",
    },
}
for _titles in VARIANT_TITLES.values():
    _titles["yours"] = "Your representation"  # a components matrix or embeddings the user brings (fairaudit.yours)
"""Per family, variant name → display title."""

def safe(text) -> str:
    """User-supplied text made inert for plotly's pseudo-HTML (tags shown literally)."""
    return html.escape(str(text), quote=False)


def panel_title(text: str, n_panels: int) -> str:
    """A side-by-side panel's title, escaped and wrapped onto lines that fit the panel's width
    (six panels in a report page leave room for about 20 characters each)."""
    width = {1: 90, 2: 60, 3: 40, 4: 28, 5: 24}.get(n_panels, 20)
    lines = textwrap.wrap(str(text), width, break_long_words=False, break_on_hyphens=False) or [""]
    return "<br>".join(safe(line) for line in lines)


def variant_title(method: str, variant: str) -> str:
    base, index = split_variant(variant)
    title = VARIANT_TITLES.get(method, {}).get(base, base)
    return f"{title}, λ point {index}" if index is not None else title


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
        subplot_titles=[panel_title(variant_title(method, v), len(ordered)) for v in ordered] or [""],
        horizontal_spacing=0.04,
    )
    title_lines = max([t.text.count("<br>") + 1 for t in fig.layout.annotations] or [1])
    fig.update_annotations(font_size=13 if len(ordered) <= 3 else 12)
    for col, variant in enumerate(ordered, start=1):
        part = rows[rows.variant == variant]
        for index, group in enumerate(groups):
            line = part[part.group == group]
            # distinct colour, marker and dash per group: coinciding lines (equal losses) stay visible
            fig.add_trace(
                go.Scatter(
                    x=line["rank"],
                    y=line["value"],
                    mode="lines+markers",
                    name=safe(group),
                    legendgroup=safe(group),
                    showlegend=col == 1,
                    line=dict(color=GROUP_COLOURS[index % len(GROUP_COLOURS)], dash=GROUP_DASHES[index % len(GROUP_DASHES)]),
                    marker=dict(symbol=GROUP_SYMBOLS[index % len(GROUP_SYMBOLS)], size=9 - min(index, 3)),
                    hovertemplate=f"{safe(group)}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="rank", dtick=1 if rows["rank"].nunique() <= 12 else None, row=1, col=col)
    fig = _layout(fig, title or f"{metric_title(metric)} — vanilla and fair side by side", metric_title(metric))
    # the figure title pinned to the top, with room below it for the (possibly wrapped) panel titles
    extra = 16 * (title_lines - 1)
    fig.update_layout(
        title=dict(yref="container", y=1, yanchor="top", pad=dict(t=14)), margin=dict(t=64 + extra), height=380 + extra
    )
    return fig


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
    others = 0
    for variant in _ordered_variants(rows, variants):
        line = rows[rows.variant == variant]
        if variant == "vanilla":
            style = dict(color=VANILLA_COLOUR, dash="solid", width=3)
        else:
            style = dict(color=VARIANT_COLOURS[others % len(VARIANT_COLOURS)], dash=VARIANT_DASHES[others % len(VARIANT_DASHES)])
            others += 1
        fig.add_trace(
            go.Scatter(
                x=line["rank"],
                y=line["value"],
                mode="lines+markers",
                name=safe(variant_title(method, variant)),
                line=style,
                hovertemplate=f"{safe(variant)}: %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="rank", dtick=1 if rows["rank"].nunique() <= 12 else None)
    if log_y:
        fig.update_yaxes(type="log")
    return _layout(fig, title or metric_title(metric), metric_title(metric))


def frontier(
    records: pd.DataFrame,
    method: str,
    y_metric: str = "unfairness",
    x_metric: str = "residual_fit",
    rank: int | None = None,
    title: str | None = None,
) -> go.Figure:
    """The trade-off frontier of a parameter sweep: ``x_metric`` against ``y_metric``, one line
    per swept variant through its points in order of ``lam`` (the sweep variants ``name@i``), and
    the vanilla fit at the same rank as a star (Kim & Gittens 2021, Figs. 2a and 3a).

    ``rank`` defaults to the rank the sweep was run at (the largest, if several).
    """
    rows = records[(records.method == method) & (records.group == "")]
    sweep = rows[rows.variant.map(is_sweep_variant)]
    fig = make_subplots(rows=1, cols=1)
    if sweep.empty:
        return _layout(fig, title or "λ frontier (no sweep in these records)", metric_title(y_metric))
    if rank is None:
        rank = int(sweep["rank"].max())
    table = whole_metrics(records, method, rank)
    needed = {x_metric, y_metric, "lam"}
    if not needed <= set(table.columns):
        return _layout(fig, title or "λ frontier (metrics missing)", metric_title(y_metric))
    table = table.dropna(subset=[x_metric, y_metric])
    bases = list(dict.fromkeys(split_variant(v)[0] for v in table.index if is_sweep_variant(v)))
    for index, base in enumerate(bases):
        points = table[[is_sweep_variant(v) and split_variant(v)[0] == base for v in table.index]]
        points = points.sort_values("lam")
        fig.add_trace(
            go.Scatter(
                x=points[x_metric],
                y=points[y_metric],
                mode="lines+markers",
                name=safe(variant_title(method, base)),
                line=dict(color=VARIANT_COLOURS[index % len(VARIANT_COLOURS)], dash=VARIANT_DASHES[index % len(VARIANT_DASHES)]),
                customdata=points["lam"],
                hovertemplate=f"{safe(variant_title(method, base))}<br>λ = %{{customdata:.3g}}<br>"
                f"{safe(metric_title(x_metric))} %{{x:.4g}}<br>{safe(metric_title(y_metric))} %{{y:.4g}}<extra></extra>",
            )
        )
    if "vanilla" in table.index:
        anchor = table.loc["vanilla"]
        fig.add_trace(
            go.Scatter(
                x=[anchor[x_metric]],
                y=[anchor[y_metric]],
                mode="markers",
                name=safe(variant_title(method, "vanilla")),
                marker=dict(symbol="star", size=14, color=VANILLA_COLOUR),
                hovertemplate=f"{safe(variant_title(method, 'vanilla'))} (λ = 0)<br>%{{x:.4g}}, %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text=safe(metric_title(x_metric)))
    figure = _layout(fig, title or f"{metric_title(y_metric)} vs {metric_title(x_metric)} over λ (rank {rank})", metric_title(y_metric))
    figure.update_layout(hovermode="closest")
    return figure


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
    "nmf": [
        ("group", "rel_loss"),
        ("group", "rel_error"),
        ("variant", "max_rel_loss"),
        ("variant", "rel_loss_gap"),
        ("variant", "total_rel_error"),
        ("variant", "unfairness_balanced"),
        ("variant", "seconds"),
    ],
    "cpd": [
        ("frontier", "unfairness_balanced"),
        ("frontier", "nkhsic"),
        ("frontier", "unfairness"),
        ("group", "residual_fit"),
        ("variant", "residual_fit"),
        ("variant", "unfairness_balanced"),
        ("variant", "nkhsic"),
        ("variant", "orthogonality"),
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
"""Per family, the standard figures: ``("group", metric)``, ``("variant", metric)`` (curves over
rank; sweep variants ``name@i`` are left out of these) or ``("frontier", metric)`` (``metric``
against ``residual_fit`` over a λ sweep, :func:`frontier`)."""


def family_figures(records: pd.DataFrame, method: str, variants: Sequence[str] | None = None) -> list[tuple[str, go.Figure]]:
    """The standard figures of a family that has records, as ``(metric, figure)`` pairs."""
    figures = []
    present = set(records[records.method == method].metric)
    if variants is None:
        variants = [v for v in dict.fromkeys(records[records.method == method].variant) if not is_sweep_variant(v)]
    for kind, metric in FAMILY_FIGURES.get(method, []):
        if metric not in present:
            continue
        if kind == "frontier":
            if any(is_sweep_variant(v) for v in records[records.method == method].variant):
                figures.append((metric, frontier(records, method, metric)))
            continue
        if kind == "group":
            figures.append((metric, group_curves(records, method, metric, variants)))
        else:
            figures.append((metric, variant_curves(records, method, metric, variants, log_y=metric == "seconds")))
    return figures


def group_sizes_figure(sizes: dict[str, int], title: str = "Rows per group") -> go.Figure:
    """A small horizontal bar chart of the groups' sizes (the data in use, at a glance)."""
    labels = [safe(label) for label in sizes]
    fig = go.Figure(
        go.Bar(
            x=list(sizes.values()),
            y=labels,
            orientation="h",
            marker_color=[GROUP_COLOURS[i % len(GROUP_COLOURS)] for i in range(len(sizes))],
            text=[f"{n:,}" for n in sizes.values()],
            textposition="auto",
            hovertemplate="%{y}: %{x:,} rows<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=safe(title), x=0.01, font=dict(size=13)),
        height=70 + 26 * len(sizes),
        margin=dict(l=10, r=10, t=32, b=10),
        template="plotly_white",
        yaxis=dict(autorange="reversed", automargin=True),
        xaxis=dict(visible=False),
    )
    return fig
