"""Plotly figures built from an audit's tidy records — the same objects the app shows and the
HTML report embeds. Nothing here computes a metric: it only reshapes ``AuditResult.records``.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .audit import HELDOUT_PREFIX, is_sweep_variant, split_variant, whole_metrics
from .formatting import OUTSIDE_MARK, OUTSIDE_WORDS, cell, number
from .metrics import better, metric_definition

# Okabe & Ito's colour-blind-safe palette (Okabe & Ito 2008, "Color Universal Design"), without its
# black, which a dark theme would hide; every colour here reads on white and on a dark background.
OKABE_ITO = {
    "blue": "#0072B2", "orange": "#E69F00", "bluish green": "#009E73", "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9", "vermillion": "#D55E00", "yellow": "#F0E442",
}
GROUP_COLOURS = [OKABE_ITO[c] for c in ("blue", "orange", "bluish green", "reddish purple", "sky blue", "vermillion", "yellow")]
GROUP_SYMBOLS = ["circle", "diamond", "square", "triangle-up", "x", "star", "cross", "triangle-down", "pentagon", "hexagon"]
GROUP_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
CHANCE_COLOUR = "#808080"
"""The leakage chart's chance line: a grey with contrast 3.9:1 on white and 4.9:1 on the dark
theme's background (the previous #555555 all but vanished on the dark theme)."""
VANILLA_COLOUR = "#8C8C8C"
"""Vanilla is the neutral reference: a mid grey (contrast 3.4:1 on white, 5.9:1 on Streamlit's dark
background), drawn thicker than the fair variants."""
VARIANT_COLOURS = [OKABE_ITO[c] for c in ("vermillion", "blue", "bluish green", "reddish purple", "orange", "sky blue")]
VARIANT_DASHES = ["dash", "dot", "dashdot", "longdash", "longdashdot", "solid"]

RANK_TITLES = {
    "pca": "rank d (number of principal components)",
    "nmf": "rank r (number of NMF parts)",
    "fs": "number of features kept",
    "cpd": "CP rank R (size of the entity embedding)",
}
"""Per family, what its ``rank`` counts (the x axis of every curve over rank)."""

ARROWS = {"lower": "↓ better", "higher": "↑ better"}

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
        "udfs": "UDFS",
        "ndfs": "NDFS",
        "fufs": "FUFS (fair)",
    },
}
"""Per family, variant name → display title."""
for _titles in VARIANT_TITLES.values():
    _titles["yours"] = "Your representation"  # a components matrix or embeddings the user brings (fairaudit.yours)


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
    return metric_definition(metric).get("title", metric)


def better_text(metric: str) -> str:
    """“↓ better”, “↑ better” or ``""`` (no better direction)."""
    return ARROWS.get(better(metric) or "", "")


def metric_label(metric: str) -> str:
    """The metric's title with its better direction: “Largest group loss (↓ better)”."""
    arrow = better_text(metric)
    return f"{metric_title(metric)} ({arrow})" if arrow else metric_title(metric)


TABLE_TITLES = {
    "balanced_accuracy": "Leakage (bal. acc.)",
    "alignment_protected": "Alignment with the protected attribute",
    "relative_balance": "Relative balance",
    "balance": "Balance",
    "proportion": "Proportion",
    "acc": "Clustering accuracy",
    "max_rel_loss": "Largest group rel. loss",
}
"""Shorter titles for a table's columns where a metric's title is long (the dashboard's column
help, on hovering its title, and its Columns list have it whole)."""

TABLE_ARROWS = {"lower": "↓", "higher": "↑"}
"""After a table column's title, which way is better (:data:`TABLE_ARROWS_NOTE` says what they
mean under the table): titles stay short, so that a family's default columns fit the dashboard at
1,400 pixels without scrolling sideways and the report's headers stay a few lines high."""

TABLE_ARROWS_NOTE = "↓ / ↑ after a title: lower / higher is better."


def table_title(metric: str, *, choice: bool = False) -> str:
    """A table column's title: the metric's title (shortened where :data:`TABLE_TITLES` says)
    and an arrow for which way is better; ``choice``: as a list of columns shows it, “(↓ better)”."""
    base = metric.removeprefix(HELDOUT_PREFIX)
    title = TABLE_TITLES[base] + (" (held-out rows)" if base != metric else "") if base in TABLE_TITLES else metric_title(metric)
    arrow = better_text(metric) if choice else TABLE_ARROWS.get(better(metric) or "")
    if not arrow:
        return title
    return f"{title} ({arrow})" if choice else f"{title} {arrow}"


def metric_line(metric: str) -> str:
    """One plain line for next to a chart: the first sentence of the metric's plain definition."""
    plain = metric_definition(metric).get("plain", "")
    first = plain.split(". ")[0].rstrip(".")
    if first and metric.startswith(HELDOUT_PREFIX):
        return f"{first}, on the held-out rows (the model was fitted on the others)."
    return f"{first}." if first else ""


def rank_title(method: str) -> str:
    return RANK_TITLES.get(method, "rank")


def _rows(records: pd.DataFrame, method: str, metric: str, variants: Sequence[str] | None) -> pd.DataFrame:
    rows = records[(records.method == method) & (records.metric == metric)]
    if variants is not None:
        rows = rows[rows.variant.isin(variants)]
    return rows.sort_values("rank")


def _ordered_variants(rows: pd.DataFrame, variants: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(rows.variant))
    return [v for v in variants if v in present] if variants is not None else present


TICK_FORMAT = ".4~g"
"""Tick labels as plain numbers (0.00015, 1.2e-05), never SI prefixes (150μ) — d3-format."""


def _layout(fig: go.Figure, title: str, y_title: str, height: int = 400) -> go.Figure:
    fig.update_layout(
        title=dict(text=safe(title), x=0.01),
        height=height,
        margin=dict(l=70, r=20, t=60, b=110),
        legend=dict(orientation="h", yanchor="top", y=-0.28, x=0, xanchor="left"),
        template="plotly_white",
        hovermode="x unified",
    )
    fig.update_yaxes(tickformat=TICK_FORMAT, exponentformat="e")
    fig.update_xaxes(title_standoff=6)
    fig.update_yaxes(title_text=axis_title(y_title), row=1, col=1)
    return fig


def axis_title(text: str, width: int = 30) -> str:
    """An escaped y-axis title wrapped onto lines of at most ``width`` characters: a long one
    (“Unfairness (leakage, balanced accuracy) (↓ better)”) would run past the plot's height into
    the chart title."""
    lines = textwrap.wrap(str(text), width, break_long_words=False) or [""]
    return "<br>".join(safe(line) for line in lines)


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
    bands = len(groups) <= INTERVAL_BANDS_MAX_SERIES
    for col, variant in enumerate(ordered, start=1):
        part = rows[rows.variant == variant]
        for index, group in enumerate(groups):
            line = part[part.group == group]
            colour = GROUP_COLOURS[index % len(GROUP_COLOURS)]
            # distinct colour, marker and dash per group: coinciding lines (equal losses) stay visible
            if bands:
                add_interval_band(fig, line, colour, safe(group), row=1, col=col)
            fig.add_trace(
                go.Scatter(
                    x=line["rank"] + (0 if bands else dodge(index, len(groups))),
                    y=line["value"],
                    mode="lines+markers",
                    name=safe(group),
                    legendgroup=safe(group),
                    showlegend=col == 1,
                    line=dict(color=colour, dash=GROUP_DASHES[index % len(GROUP_DASHES)]),
                    marker=dict(symbol=GROUP_SYMBOLS[index % len(GROUP_SYMBOLS)], size=9 - min(index, 3)),
                    error_y=None if bands else interval_bars(line, colour),
                    text=hover_texts(line, safe(group)),
                    hovertemplate="%{text}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=safe(rank_title(method)) if col == 1 else None, dtick=1 if rows["rank"].nunique() <= 12 else None, row=1, col=col)
    if len(rows):  # one rank range in every panel: a variant audited at fewer ranks (e.g. yours) shows where it stops
        low, high = float(rows["rank"].min()), float(rows["rank"].max())
        fig.update_xaxes(range=[low - 0.5, high + 0.5])
    fig = _layout(fig, title or f"{metric_title(metric)} — vanilla and fair side by side", metric_label(metric))
    if not bands:  # dodged points: one group's point at a time, its rank in the label
        fig.update_layout(hovermode="closest")
    # the figure title pinned to the top, with room below it for the (possibly wrapped) panel titles
    extra = 16 * (title_lines - 1)
    fig.update_layout(
        title=dict(yref="container", y=1, yanchor="top", pad=dict(t=14)), margin=dict(t=64 + extra), height=380 + extra
    )
    return fig


REFERENCE_VARIANTS = {"fs": "variance"}
"""A family without ``vanilla``: the variant drawn as its neutral reference (feature selection's
plainest baseline, the variance score), so its six other selectors get six colours of their own
(FUFS and Variance shared one orange when seven selectors cycled six colours)."""


def is_reference(method: str | None, variant: str) -> bool:
    """``variant`` is drawn as ``method``'s neutral reference (thick grey): vanilla, or the
    family's :data:`REFERENCE_VARIANTS` entry."""
    return variant == "vanilla" or REFERENCE_VARIANTS.get(method) == variant


def series_style(variant: str, others: int, method: str | None = None) -> tuple[dict, dict]:
    """``(line, marker)`` of a variant's curve: the reference (:func:`is_reference`) a thick grey
    line; the ``others``-th other variant a colour, dash and marker of its own — all three differ,
    so variants that coincide stay visible, and once the colours repeat the dash cycle shifts, so
    a seventh curve is not the first one's twin."""
    if is_reference(method, variant):
        return dict(color=VANILLA_COLOUR, dash="solid", width=3), dict(symbol="circle", size=7)
    colours = len(VARIANT_COLOURS)
    line = dict(color=VARIANT_COLOURS[others % colours], dash=VARIANT_DASHES[(others + others // colours) % len(VARIANT_DASHES)])
    return line, dict(symbol=GROUP_SYMBOLS[(others + 1) % len(GROUP_SYMBOLS)], size=max(5, 9 - others))


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
    ordered = _ordered_variants(rows, variants)
    bands = len(ordered) <= INTERVAL_BANDS_MAX_SERIES
    for index, variant in enumerate(ordered):
        line = rows[rows.variant == variant]
        style, marker = series_style(variant, others, method)
        others += not is_reference(method, variant)
        name = safe(variant_title(method, variant))
        if bands:
            add_interval_band(fig, line, style["color"], name)
        fig.add_trace(
            go.Scatter(
                x=line["rank"] + (0 if bands else dodge(index, len(ordered))),
                y=line["value"],
                mode="lines+markers",
                name=name,
                line=style,
                marker=marker,
                error_y=None if bands else interval_bars(line, style["color"]),
                text=hover_texts(line, name),
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text=safe(rank_title(method)), dtick=1 if rows["rank"].nunique() <= 12 else None)
    fig = _layout(fig, title or metric_title(metric), metric_label(metric) + (", log scale" if log_y else ""))
    if not bands:  # dodged points: one variant's point at a time, its rank in the label
        fig.update_layout(hovermode="closest")
    if log_y:
        # full numbers at every tick (0.002, 0.005, 0.01, 100), not plotly's bare mantissas (2, 5, 0.01)
        fig.update_yaxes(type="log", tickformat=".2~r")
    return fig


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
        return _layout(fig, title or "λ frontier (no sweep in these records)", metric_label(y_metric))
    if rank is None:
        rank = int(sweep["rank"].max())
    table = whole_metrics(records, method, rank)
    needed = {x_metric, y_metric, "lam"}
    if not needed <= set(table.columns):
        return _layout(fig, title or "λ frontier (metrics missing)", metric_label(y_metric))
    table = table.dropna(subset=[x_metric, y_metric])
    # the y metric's interval where the records carry one (leakage: its cross-validation interval)
    lows, highs = (whole_metrics(records, method, rank, values=v).reindex(index=table.index) for v in ("ci_low", "ci_high"))
    table = table.assign(ci_low=lows.get(y_metric), ci_high=highs.get(y_metric))
    bases = list(dict.fromkeys(split_variant(v)[0] for v in table.index if is_sweep_variant(v)))
    for index, base in enumerate(bases):
        points = table[[is_sweep_variant(v) and split_variant(v)[0] == base for v in table.index]]
        points = points.sort_values("lam")
        colour = VARIANT_COLOURS[index % len(VARIANT_COLOURS)]
        fig.add_trace(
            go.Scatter(
                x=points[x_metric],
                y=points[y_metric],
                mode="lines+markers",
                name=safe(variant_title(method, base)),
                line=dict(color=colour, dash=VARIANT_DASHES[index % len(VARIANT_DASHES)]),
                error_y=interval_bars(points.rename(columns={y_metric: "value"}), colour),
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
    if y_metric.removeprefix(HELDOUT_PREFIX) == "balanced_accuracy":
        add_chance_line(fig, records, method, y_metric.removesuffix("balanced_accuracy"))
    fig.update_xaxes(title_text=axis_title(metric_label(x_metric), 60), tickformat=TICK_FORMAT, exponentformat="e")
    figure = _layout(fig, title or f"{metric_title(y_metric)} vs {metric_title(x_metric)} over λ (rank {rank})", metric_label(y_metric))
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
        ("leakage", "balanced_accuracy"),
        ("variant", "seconds"),
    ],
    "nmf": [
        ("group", "rel_loss"),
        ("group", "rel_error"),
        ("variant", "max_rel_loss"),
        ("variant", "rel_loss_gap"),
        ("variant", "total_rel_error"),
        ("leakage", "balanced_accuracy"),
        ("variant", "seconds"),
    ],
    "cpd": [
        ("frontier", "balanced_accuracy"),
        ("frontier", "nkhsic"),
        ("frontier", "unfairness"),
        ("group", "residual_fit"),
        ("variant", "residual_fit"),
        ("leakage", "balanced_accuracy"),
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
        ("leakage", "balanced_accuracy"),
        ("variant", "seconds"),
    ],
}
"""Per family, the standard figures: ``("group", metric)``, ``("variant", metric)`` (curves over
rank; sweep variants ``name@i`` are left out of these), ``("frontier", metric)`` (``metric``
against ``residual_fit`` over a λ sweep, :func:`frontier`) or ``("leakage", metric)`` (the
balanced accuracy of predicting the group with chance drawn as a line, :func:`leakage_curves`).
With held-out records (``heldout_…``) each per-group figure also comes for the held-out rows."""


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
        if kind == "leakage":
            figures.append((metric, leakage_curves(records, method, variants)))
            if HELDOUT_PREFIX + metric in present:
                figures.append((HELDOUT_PREFIX + metric, leakage_curves(records, method, variants, prefix=HELDOUT_PREFIX)))
            continue
        if kind == "group":
            figures.append((metric, group_curves(records, method, metric, variants)))
            if HELDOUT_PREFIX + metric in present:
                figures.append((HELDOUT_PREFIX + metric, group_curves(records, method, HELDOUT_PREFIX + metric, variants)))
        else:
            figures.append((metric, variant_curves(records, method, metric, variants, log_y=metric == "seconds")))
    return figures


# ---------------------------------------------------------------- intervals and leakage
INTERVAL_OPACITY = 0.15
INTERVAL_BANDS_MAX_SERIES = 2
"""Up to this many curves in one panel, intervals are translucent bands behind them; with more,
bands stack into an opaque block that hides the curves (measured on the PCA page's MMD² chart:
four variants' overlapping bands covered the whole plot), so each curve gets error bars instead,
its points shifted a little sideways (:func:`dodge`) so that equal intervals stay apart."""

DODGE_SPREAD = 0.3
"""The total sideways shift, in ranks, of the curves of one panel drawn with error bars."""


def dodge(index: int, count: int) -> float:
    """The sideways shift of curve ``index`` of ``count`` (centred on the rank; at most
    :data:`DODGE_SPREAD` across all of them, 0.1 between neighbours)."""
    if count <= 1:
        return 0.0
    step = min(0.1, DODGE_SPREAD / (count - 1))
    return (index - (count - 1) / 2) * step


def interval_bars(line: pd.DataFrame, colour: str) -> dict | None:
    """``line``'s ``ci_low``–``ci_high`` as plotly error bars (None without intervals)."""
    if "ci_low" not in line or not line[["ci_low", "ci_high"]].notna().any(axis=None):
        return None
    return dict(
        type="data", symmetric=False, array=(line["ci_high"] - line["value"]).clip(lower=0),
        arrayminus=(line["value"] - line["ci_low"]).clip(lower=0), thickness=1.2, width=3, color=colour,
    )


def hover_texts(line: pd.DataFrame, name: str) -> list[str]:
    """Per point of ``line``: “name, rank 3: 0.412 (0.371–0.455)” (the interval where there is
    one; a value outside it says so), written by :mod:`fairaudit.formatting` like every other
    number shown."""
    lows = line["ci_low"] if "ci_low" in line else pd.Series(np.nan, index=line.index)
    highs = line["ci_high"] if "ci_high" in line else pd.Series(np.nan, index=line.index)
    texts = []
    for rank, value, low, high in zip(line["rank"], line["value"], lows, highs, strict=True):
        text = f"{name}, rank {int(rank)}: {cell(value, low, high)}"
        texts.append(text + f" outside its interval: {OUTSIDE_WORDS}" if text.endswith(OUTSIDE_MARK) else text)
    return texts


def _translucent(colour: str, opacity: float = INTERVAL_OPACITY) -> str:
    colour = colour.lstrip("#")
    red, green, blue = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({red},{green},{blue},{opacity})"


def add_interval_band(fig: go.Figure, line: pd.DataFrame, colour: str, legendgroup: str, row=None, col=None) -> None:
    """Draw ``line``'s ``ci_low``–``ci_high`` over rank as a translucent band behind its curve
    (nothing when the records carry no interval)."""
    if "ci_low" not in line or "ci_high" not in line:
        return
    band = line.dropna(subset=["ci_low", "ci_high"])
    band = band[np.isfinite(band["ci_low"]) & np.isfinite(band["ci_high"])].sort_values("rank")
    if band.empty:
        return
    x = list(band["rank"]) + list(band["rank"])[::-1]
    y = list(band["ci_high"]) + list(band["ci_low"])[::-1]
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            fill="toself",
            fillcolor=_translucent(colour),
            line=dict(width=0),
            mode="lines",
            hoverinfo="skip",
            showlegend=False,
            legendgroup=legendgroup,
            name=f"{legendgroup} interval",
        ),
        row=row,
        col=col,
    )


def _chance_hline(fig: go.Figure, chance: float) -> None:
    fig.add_hline(
        y=chance, line=dict(color=CHANCE_COLOUR, dash="dash", width=2), annotation_position="bottom right",
        annotation_text=f"chance {number(chance)}: at or below it, no detectable leakage",
    )


def add_chance_line(fig: go.Figure, records: pd.DataFrame, method: str, prefix: str = "") -> None:
    """Chance for the balanced accuracy of predicting the group, ``1/k``, as a dashed line (the
    line the leakage findings compare with), when the records say what ``k`` is."""
    k = records.attrs.get("n_groups")
    chance_rows = records[(records.method == method) & (records.metric == prefix + "chance_balanced_accuracy")]
    if k is None and not chance_rows.empty:
        k = max(2, round(1.0 / max(float(chance_rows["value"].median()), 1e-9)))
    if k:
        _chance_hline(fig, 1.0 / k)


def leakage_curves(records: pd.DataFrame, method: str, variants: Sequence[str] | None = None, prefix: str = "") -> go.Figure:
    """The leakage test over rank: the balanced accuracy of predicting the group from each
    variant's representation (error bars: the cross-validation interval) against chance ``1/k``
    (a dashed line; the permutation distribution's central interval shaded around it), on the
    full 0–1 axis. The same quantity and words as the leakage findings."""
    rows = _rows(records, method, prefix + "balanced_accuracy", variants)
    rows = rows[rows.group == ""]
    chance_rows = _rows(records, method, prefix + "chance_balanced_accuracy", variants)
    fig = make_subplots(rows=1, cols=1)
    k = records.attrs.get("n_groups")
    chance = None
    if not chance_rows.empty:
        band = chance_rows.groupby("rank")[["value", "ci_low", "ci_high"]].mean().sort_index()
        if k is None:
            k = max(2, round(1.0 / max(float(band["value"].median()), 1e-9)))
        chance = 1.0 / k
        if band[["ci_low", "ci_high"]].notna().all(axis=None):
            x = list(band.index) + list(band.index)[::-1]
            fig.add_trace(
                go.Scatter(
                    x=x, y=list(band["ci_high"]) + list(band["ci_low"])[::-1], fill="toself", fillcolor=_translucent(CHANCE_COLOUR, 0.2),
                    line=dict(width=0), mode="lines", hoverinfo="skip", name="chance (permuted groups)",
                )
            )
    others = 0
    for variant in _ordered_variants(rows, variants):
        line = rows[rows.variant == variant].sort_values("rank")
        style, marker = series_style(variant, others, method)
        others += not is_reference(method, variant)
        name = safe(variant_title(method, variant))
        fig.add_trace(
            go.Scatter(
                x=line["rank"], y=line["value"], mode="lines+markers", name=name, line=style, marker=marker,
                error_y=interval_bars(line, style["color"]), text=hover_texts(line, name), hovertemplate="%{text}<extra></extra>",
            )
        )
    if chance is not None:
        _chance_hline(fig, chance)
    fig.update_xaxes(title_text=safe(rank_title(method)), dtick=1 if rows["rank"].nunique() <= 12 else None)
    where = " (held-out rows)" if prefix else ""
    figure = _layout(fig, f"Leakage: balanced accuracy of predicting the group{where}", metric_label("balanced_accuracy"))
    figure.update_yaxes(range=[0, 1.05])  # the whole scale: chance and complete leakage both in view
    return figure


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
