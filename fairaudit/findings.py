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


def pca_findings(result) -> list[str]:
    """Where vanilla PCA is most unequal, and what the fair variant does there."""
    records = result.records
    losses = _pivot(records, "pca", "loss")
    errors = _pivot(records, "pca", "error")
    if losses.empty or "vanilla" not in losses.index.get_level_values(0):
        return []
    sizes = result.data.get("group_sizes", {})
    vanilla = losses.loc["vanilla"]
    gaps = vanilla.max(axis=1) - vanilla.min(axis=1)
    rank = int(gaps.idxmax())
    row = vanilla.loc[rank]
    worst, best = row.idxmax(), row.idxmin()
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


def _range_text(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.3g}" if np.isclose(low, high) else f"{low:.3g}–{high:.3g}"


def fs_findings(result) -> list[str]:
    """How FUFS's selection compares with the fairness-unaware selectors (feature selection)."""
    records = result.records
    whole = records[(records.method == "fs") & (records.group == "")]
    table = whole.pivot_table(index=["variant", "rank"], columns="metric", values="value", sort=False)
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
    scaling = result.config.get("options", {}).get("fs", {}).get("scaling", "minmax")
    if scaling == "minmax":
        sentences.append("For feature selection every feature was rescaled to [0, 1] (the range of the FUFS paper's data).")
    return sentences


FINDERS: dict[str, Callable] = {"pca": pca_findings, "fs": fs_findings}


def findings(result) -> dict[str, list[str]]:
    """Findings per method family present in ``result``."""
    methods = list(dict.fromkeys(result.records.method))
    return {method: FINDERS[method](result) for method in methods if method in FINDERS}
