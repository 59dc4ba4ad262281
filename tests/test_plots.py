"""Charts people can read: colour-blind-safe colours visible on light and dark backgrounds, axis
titles in each family's terms, which way is better on every metric, plain tick labels."""

from __future__ import annotations

import pytest

from fairaudit.audit import AuditConfig, run_audit
from fairaudit.metrics import METRIC_BETTER, METRIC_DEFINITIONS, better
from fairaudit.plots import (
    GROUP_COLOURS,
    OKABE_ITO,
    RANK_TITLES,
    VANILLA_COLOUR,
    VARIANT_COLOURS,
    family_figures,
    metric_label,
    metric_line,
)
from fairaudit.samples import load_sample

LIGHT, DARK = "#ffffff", "#0e1117"  # plotly_white's paper; Streamlit's dark background


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_palette_is_okabe_ito_and_vanilla_reads_on_light_and_dark():
    assert set(GROUP_COLOURS) <= set(OKABE_ITO.values()) and set(VARIANT_COLOURS) <= set(OKABE_ITO.values())
    assert "#000000" not in GROUP_COLOURS + VARIANT_COLOURS  # black vanishes in the dark theme
    # WCAG's 3:1 for graphical objects, on both backgrounds
    assert contrast(VANILLA_COLOUR, LIGHT) >= 3 and contrast(VANILLA_COLOUR, DARK) >= 3
    assert VANILLA_COLOUR not in GROUP_COLOURS + VARIANT_COLOURS


def test_every_metric_says_which_way_is_better():
    assert set(METRIC_DEFINITIONS) <= set(METRIC_BETTER), set(METRIC_DEFINITIONS) - set(METRIC_BETTER)
    assert better("loss") == "lower" and better("variance_explained") == "higher" and better("lam") is None
    assert better("heldout_loss") == "lower"
    assert metric_label("max_loss").endswith("(↓ better)") and metric_label("balance").endswith("(↑ better)")
    assert metric_line("loss").endswith(".") and "\n" not in metric_line("loss")


@pytest.fixture(scope="module")
def pca_figures():
    result = run_audit(load_sample("two_groups"), AuditConfig(ranks=(1, 2, 3), variants="vanilla,fair_eig"))
    return family_figures(result.records, "pca")


def test_axes_speak_the_family_terms_and_ticks_are_plain_numbers(pca_figures):
    for metric, figure in pca_figures:
        layout = figure.layout
        assert layout.xaxis.title.text == RANK_TITLES["pca"], metric
        arrow = "better" in (layout.yaxis.title.text or "")
        assert all(len(line) <= 30 for line in layout.yaxis.title.text.split("<br>")), layout.yaxis.title.text
        assert arrow == (better(metric) is not None), (metric, layout.yaxis.title.text)
        assert layout.yaxis.tickformat and "s" not in layout.yaxis.tickformat  # d3's "s" is the SI-prefix format
        if metric == "seconds":
            assert layout.yaxis.type == "log" and "log scale" in layout.yaxis.title.text.replace("<br>", " ")


def test_legend_does_not_sit_on_the_axis_title(pca_figures):
    for _, figure in pca_figures:
        assert figure.layout.legend.y <= -0.25 and figure.layout.margin.b >= 100


# ---------------------------------------------------------------- intervals that stay readable
def _records(variants: list[str], groups: list[str], ranks=(1, 2, 3)):
    """Hand-made PCA records with intervals: per variant and group a loss, per variant a gap."""
    import pandas as pd

    rows = []
    for v, variant in enumerate(variants):
        for rank in ranks:
            rows.append(("pca", variant, rank, "", "loss_gap", 0.5 + v, 0.2 + v, 0.9 + v))
            for g, group in enumerate(groups):
                rows.append(("pca", variant, rank, group, "loss", 1.0 + g, 0.5 + g, 1.5 + g))
    return pd.DataFrame(rows, columns=["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"])


def _bands(figure) -> list:
    return [trace for trace in figure.data if trace.fill == "toself"]


def test_two_curves_get_interval_bands_more_get_dodged_error_bars():
    from fairaudit.plots import INTERVAL_BANDS_MAX_SERIES, group_curves, variant_curves

    few = variant_curves(_records(["vanilla", "fair_eig"], ["a", "b"]), "pca", "loss_gap")
    assert len(_bands(few)) == 2 and all(trace.error_y.array is None for trace in few.data if trace.mode == "lines+markers")
    many_variants = ["vanilla", "fair_eig", "jevd", "cov_fair"]
    assert len(many_variants) > INTERVAL_BANDS_MAX_SERIES
    many = variant_curves(_records(many_variants, ["a", "b"]), "pca", "loss_gap")
    curves = [trace for trace in many.data if trace.mode == "lines+markers"]
    assert not _bands(many) and len(curves) == 4
    assert all(list(trace.error_y.array) == pytest.approx([0.4] * 3) and list(trace.error_y.arrayminus) == pytest.approx([0.3] * 3)
               for trace in curves)
    shifts = [round(float(trace.x[0]) - 1, 6) for trace in curves]
    assert shifts == sorted(shifts) and len(set(shifts)) == 4 and abs(sum(shifts)) < 1e-9  # apart, centred on the rank
    assert "rank 1: 0.500 (0.200–0.900)" in curves[0].text[0]  # the hover says the interval
    groups = group_curves(_records(["vanilla"], ["a", "b", "c"]), "pca", "loss")
    assert not _bands(groups) and all(t.error_y.array is not None for t in groups.data)
    assert len(_bands(group_curves(_records(["vanilla"], ["a", "b"]), "pca", "loss"))) == 2


def test_the_chance_line_reads_on_light_and_dark_and_says_what_below_means():
    from fairaudit.plots import CHANCE_COLOUR, leakage_curves

    assert contrast(CHANCE_COLOUR, LIGHT) >= 3 and contrast(CHANCE_COLOUR, DARK) >= 3
    records = _records(["vanilla"], ["a", "b"])
    records.loc[len(records)] = ("pca", "vanilla", 1, "", "balanced_accuracy", 0.45, 0.40, 0.50)
    records.loc[len(records)] = ("pca", "vanilla", 1, "", "chance_balanced_accuracy", 0.5, 0.45, 0.55)
    figure = leakage_curves(records, "pca")
    assert any("no detectable leakage" in a.text for a in figure.layout.annotations)


def test_seven_variants_get_seven_distinct_styles():
    """Feature selection has seven selectors and no vanilla: the seventh curve (FUFS) must not be
    drawn like the first (it was: same colour, same dash, no marker in the leakage chart)."""
    from fairaudit.plots import series_style

    styles = [series_style(f"v{i}", i) for i in range(7)]
    looks = {(line["color"], line["dash"], marker["symbol"]) for line, marker in styles}
    assert len(looks) == 7
    assert len({(line["color"], line["dash"]) for line, _ in styles}) == 7  # even without the markers


def test_feature_selection_draws_every_selector_in_a_colour_of_its_own():
    """Issue 25: Variance and FUFS (fair) shared one orange. Variance is the family's grey
    reference; the six other selectors get six different colours."""
    from fairaudit.plots import VARIANT_TITLES, is_reference, series_style

    others, colours = 0, []
    for variant in VARIANT_TITLES["fs"]:
        if variant == "yours":
            continue
        line, _ = series_style(variant, others, "fs")
        others += not is_reference("fs", variant)
        colours.append(line["color"])
    assert len(set(colours)) == len(colours) == 7


def test_the_frontier_draws_balanced_accuracy_with_its_interval_and_chance():
    import pandas as pd

    from fairaudit.plots import frontier

    rows = []
    for i, (lam, fit, acc) in enumerate([(0.1, 0.2, 0.9), (1.0, 0.3, 0.7), (10.0, 0.5, 0.55)]):
        rows += [("cpd", f"khsic@{i}", 2, "", "lam", lam, float("nan"), float("nan")),
                 ("cpd", f"khsic@{i}", 2, "", "residual_fit", fit, float("nan"), float("nan")),
                 ("cpd", f"khsic@{i}", 2, "", "balanced_accuracy", acc, acc - 0.05, acc + 0.05),
                 ("cpd", f"khsic@{i}", 2, "", "chance_balanced_accuracy", 0.5, 0.45, 0.55)]
    rows += [("cpd", "vanilla", 2, "", "residual_fit", 0.1, float("nan"), float("nan")),
             ("cpd", "vanilla", 2, "", "balanced_accuracy", 1.0, 0.95, 1.0)]
    records = pd.DataFrame(rows, columns=["method", "variant", "rank", "group", "metric", "value", "ci_low", "ci_high"])
    figure = frontier(records, "cpd", "balanced_accuracy")
    khsic = figure.data[0]
    assert list(khsic.error_y.array) == pytest.approx([0.05] * 3)
    assert any(shape.y0 == 0.5 for shape in figure.layout.shapes)
    assert any("no detectable leakage" in a.text for a in figure.layout.annotations)


def test_a_hover_says_when_a_value_lies_outside_its_interval():
    import pandas as pd

    from fairaudit.plots import hover_texts

    line = pd.DataFrame({"rank": [1, 2], "value": [0.852, 0.7], "ci_low": [0.508, 0.6], "ci_high": [0.782, 0.8]})
    outside, inside = hover_texts(line, "MCFS")
    assert outside.startswith("MCFS, rank 1: 0.852 (0.508–0.782) †") and "refits differ systematically" in outside
    assert inside == "MCFS, rank 2: 0.700 (0.600–0.800)"
