"""Plain-language findings computed from an audit's records (used by the app and the report).

Each family contributes a function ``result -> list[str]`` to :data:`FINDERS`. A finding is a
sentence with the numbers in it, e.g. "At rank 2, PCA's loss for group=B is 66× group=A's
(8.27 vs 0.126). Fair PCA (exact eigen-solver) brings every group's loss to 2.70 for +18 %
total reconstruction error."
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .audit import family_options, is_sweep_variant, split_variant, whole_metrics
from .plots import variant_title

FAIR_PCA_PREFERENCE = ("fair_eig", "fair_sdp", "fair_mw")


def _pivot(records: pd.DataFrame, method: str, metric: str) -> pd.DataFrame:
    rows = records[(records.method == method) & (records.metric == metric) & (records.group != "")]
    return rows.pivot_table(index=["variant", "rank"], columns="group", values="value", sort=False)


def _scalar(records: pd.DataFrame, method: str, variant: str, rank: int, metric: str) -> float | None:
    rows = records[
        (records.method == method) & (records.variant == variant) & (records["rank"] == rank) & (records.metric == metric)
    ]
    return float(rows.value.iloc[0]) if len(rows) else None


def _total_error(errors: pd.Series, sizes: dict[str, int]) -> float:
    weights = np.array([sizes.get(g, 0) for g in errors.index], dtype=float)
    if weights.sum() == 0:
        weights = np.ones(len(errors))
    return float(np.dot(errors.to_numpy(), weights) / weights.sum())


def _ratio_text(high: float, low: float) -> str:
    if low <= 1e-12 * max(high, 1e-300):
        return "far above"
    return f"{high / low:.1f}×"


def _largest_gap(losses: pd.DataFrame):
    """The vanilla variant's rank with the largest loss gap: ``(rank, losses there, worst, best)``."""
    vanilla = losses.loc["vanilla"]
    gaps = vanilla.max(axis=1) - vanilla.min(axis=1)
    rank = int(gaps.idxmax())
    row = vanilla.loc[rank]
    return rank, row, row.idxmax(), row.idxmin()


def pca_findings(result) -> list[str]:
    """Where vanilla PCA is most unequal, and what the fair variant does there."""
    records = result.records
    losses = _pivot(records, "pca", "loss")
    errors = _pivot(records, "pca", "error")
    if losses.empty or "vanilla" not in losses.index.get_level_values(0):
        return []
    sizes = result.data.get("group_sizes", {})
    rank, row, worst, best = _largest_gap(losses)
    sentences = [
        f"At rank {rank}, vanilla PCA's reconstruction loss for {worst} is {_ratio_text(row[worst], row[best])} "
        f"{best}'s ({row[worst]:.3g} vs {row[best]:.3g}); this is the rank with the largest gap."
    ]
    fair = next((v for v in FAIR_PCA_PREFERENCE if v in losses.index.get_level_values(0)), None)
    if fair is not None and (fair, rank) in losses.index:
        fair_row = losses.loc[(fair, rank)]
        total_vanilla = _total_error(errors.loc[("vanilla", rank)], sizes)
        total_fair = _total_error(errors.loc[(fair, rank)], sizes)
        change = 100.0 * (total_fair - total_vanilla) / total_vanilla if total_vanilla > 0 else float("nan")
        spread = float(fair_row.max() - fair_row.min())
        equal = spread <= 1e-6 * max(float(fair_row.max()), 1e-12)
        sentences.append(
            f"{variant_title('pca', fair)} {'equalises the losses at' if equal else 'lowers the largest loss to'} "
            f"{fair_row.max():.3g}{'' if equal else f' (gap {spread:.3g})'} at rank {rank}, for "
            f"{change:+.1f} % total reconstruction error ({total_vanilla:.3g} → {total_fair:.3g})."
        )
        effective = _scalar(records, "pca", fair, rank, "effective_rank")
        if effective is not None and effective > rank:
            sentences.append(
                f"To do so it uses {int(effective)} directions at rank {rank} "
                f"(Samadi et al.: at most k − 1 extra dimensions for k groups)."
            )
    leak = _scalar(records, "pca", "vanilla", rank, "unfairness_balanced")
    if leak is not None:
        k = max(len(sizes), 2)
        sentences.append(
            f"From vanilla PCA's rank-{rank} representation a classifier predicts the group with balanced "
            f"accuracy {leak + 1.0 / k:.2f} (chance {1.0 / k:.2f})."
        )
    return sentences


FAIR_NMF_PREFERENCE = ("fair_mu", "fair_am")


def nmf_findings(result) -> list[str]:
    """Where standard NMF's relative losses are most unequal, and what Fairer-NMF does there."""
    records = result.records
    losses = _pivot(records, "nmf", "rel_loss")
    if losses.empty or "vanilla" not in losses.index.get_level_values(0):
        return []
    rank, row, worst, best = _largest_gap(losses)
    sentences = [
        f"At rank {rank}, standard NMF's relative loss for {worst} is {row[worst]:.3g} against {row[best]:.3g} "
        f"for {best} (gap {row[worst] - row[best]:.3g}); this is the rank with the largest gap."
    ]
    own = _pivot(records, "nmf", "own_rel_error")
    if ("vanilla", rank) in own.index:
        own_row = own.loc[("vanilla", rank)]
        sentences.append(
            f"On their own, rank-{rank} NMFs reconstruct {worst} with relative error {own_row[worst]:.3g} "
            f"and {best} with {own_row[best]:.3g} (E_ℓ, Algorithm 1)."
        )
    fair = next((v for v in FAIR_NMF_PREFERENCE if (v, rank) in losses.index), None)
    if fair is not None:
        fair_row = losses.loc[(fair, rank)]
        before = _scalar(records, "nmf", "vanilla", rank, "total_rel_error")
        after = _scalar(records, "nmf", fair, rank, "total_rel_error")
        cost = ""
        if before and after is not None:
            cost = f", for {100.0 * (after - before) / before:+.1f} % total relative error ({before:.3g} → {after:.3g})"
        sentences.append(
            f"{variant_title('nmf', fair)} brings the largest relative loss from {row.max():.3g} to "
            f"{fair_row.max():.3g} (gap {fair_row.max() - fair_row.min():.3g}) at rank {rank}{cost}."
        )
        raised = [g for g in fair_row.index if fair_row[g] > row[g] + 1e-12]
        if raised:
            sentences.append(
                "The groups that give up accuracy for it: "
                + ", ".join(f"{g} ({row[g]:.3g} → {fair_row[g]:.3g})" for g in raised)
                + "."
            )
    return sentences


def cpd_findings(result) -> list[str]:
    """Leakage of vanilla CP's embedding and what each fair method at its default λ buys for how
    much fit, at the sweep's rank (no minimum over the sweep's noisy leakage values: that would
    pick the luckiest classifier split)."""
    records = result.records
    rows = records[records.method == "cpd"]
    if rows.empty or "vanilla" not in set(rows.variant):
        return []
    sweep_variants = [v for v in dict.fromkeys(rows.variant) if is_sweep_variant(v)]
    rank = int(rows[rows.variant.isin(sweep_variants)]["rank"].max()) if sweep_variants else int(rows["rank"].max())
    table = whole_metrics(records, "cpd", rank)
    if "vanilla" not in table.index or "unfairness_balanced" not in table.columns:
        return []
    k = max(len(result.data.get("group_sizes", {})), 2)
    vanilla = table.loc["vanilla"]
    sentences = [
        f"From vanilla CP's rank-{rank} entity embedding a classifier predicts the group with balanced accuracy "
        f"{vanilla['unfairness_balanced'] + 1.0 / k:.2f} (chance {1.0 / k:.2f}); residual fit "
        f"{vanilla['residual_fit']:.3g}, normalised KHSIC {vanilla['nkhsic']:.3g}."
    ]
    for base in ("khsic", "hsic", "fatr"):
        if base not in table.index:
            continue
        point = table.loc[base]
        sentences.append(
            f"{variant_title('cpd', base)} at its default λ = {point['lam']:.3g}: residual fit "
            f"{point['residual_fit']:.3g} (vanilla {vanilla['residual_fit']:.3g}), normalised KHSIC "
            f"{point['nkhsic']:.3g} (vanilla {vanilla['nkhsic']:.3g}), balanced accuracy of the group "
            f"classifier {point['unfairness_balanced'] + 1.0 / k:.2f}."
        )
    sweep = table[[is_sweep_variant(v) and split_variant(v)[0] == "fatr" for v in table.index]]
    if not sweep.empty and vanilla["orthogonality"] > 0 and vanilla["unfairness_balanced"] > 0:
        flat = sweep.loc[sweep["orthogonality"].idxmin()]
        if flat["orthogonality"] <= 0.01 * vanilla["orthogonality"] and flat["unfairness_balanced"] >= 0.5 * vanilla["unfairness_balanced"]:
            sentences.append(
                f"FATR drives the orthogonality ‖ÂᵀS‖ from {vanilla['orthogonality']:.3g} to "
                f"{flat['orthogonality']:.2g}, yet the group is still predicted with balanced accuracy "
                f"{flat['unfairness_balanced'] + 1.0 / k:.2f}: orthogonality does not hide the group "
                "(Kim & Gittens 2021, Theorem 1)."
            )
    return sentences



def _range_text(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.3g}" if np.isclose(low, high) else f"{low:.3g}–{high:.3g}"


def fs_findings(result) -> list[str]:
    """How FUFS's selection compares with the fairness-unaware selectors (feature selection)."""
    records = result.records
    whole = records[(records.method == "fs") & (records.group == "")]
    table = whole_metrics(records, "fs")
    variants = list(dict.fromkeys(whole.variant))
    baselines = [v for v in variants if v != "fufs"]
    if "fufs" not in variants or not baselines or "alignment_protected" not in table.columns:
        return []
    ranks = sorted(set(table.loc["fufs"].index))
    gaps = {r: np.mean([table.loc[(b, r), "alignment_protected"] for b in baselines]) - table.loc[("fufs", r), "alignment_protected"] for r in ranks}
    rank = max(gaps, key=gaps.get)
    fufs = table.loc[("fufs", rank)]
    others = [table.loc[(b, rank)] for b in baselines]
    names = ", ".join(variant_title("fs", b) for b in baselines)
    sentences = [
        f"With {rank} selected features, FUFS's selection is aligned with the groups at "
        f"{fufs['alignment_protected']:.3g} (centred kernel alignment; lower is fairer) against "
        f"{_range_text([o['alignment_protected'] for o in others])} for {names}, and keeps "
        f"{fufs['alignment_data']:.3g} alignment with all features ({_range_text([o['alignment_data'] for o in others])})."
    ]
    clusters = f"k-means clusters on FUFS's features have balance {fufs['balance']:.3g} (others {_range_text([o['balance'] for o in others])}; higher is fairer) and proportion {fufs['proportion']:.3g} (others {_range_text([o['proportion'] for o in others])})"
    if "acc" in table.columns:
        clusters += f"; clustering accuracy {fufs['acc']:.3g} (others {_range_text([o['acc'] for o in others])})"
    sentences.append(clusters[0].upper() + clusters[1:] + ".")
    detail = result.details.get("fs", {}).get("fufs", {}).get(str(rank), {})
    if detail.get("proxies"):
        proxies = detail["proxies"]
        shown = ", ".join(proxies[:8]) + (" …" if len(proxies) > 8 else "")
        sentences.append(f"FUFS found these features most aligned with the protected attribute and steered away from them: {shown}.")
    scaling = family_options(result.config, "fs").get("scaling", "minmax")
    if scaling == "minmax":
        sentences.append("For feature selection every feature was rescaled to [0, 1] (the range of the FUFS paper's data).")
    return sentences


FINDERS: dict[str, Callable] = {"pca": pca_findings, "nmf": nmf_findings, "fs": fs_findings, "cpd": cpd_findings}


def findings(result) -> dict[str, list[str]]:
    """Findings per method family present in ``result``."""
    methods = list(dict.fromkeys(result.records.method))
    return {method: FINDERS[method](result) for method in methods if method in FINDERS}
