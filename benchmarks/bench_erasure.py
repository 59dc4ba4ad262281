"""Removing linear leakage on the papers' data: LEACE and Kleindessner et al.'s fair PCA beside PCA.

On the credit table (30,000 × 22; groups: Samadi's EDUCATION split, or ``--credit-groups SEX``) and
LFW (13,232 × 1,764 pixels; female / male), for vanilla PCA, PCA + LEACE (``vanilla+leace``),
Kleindessner's Algorithm 1 (``equal_means``) and Algorithm 2 (``equal_means_cov``):

1. **time beside vanilla PCA** — each estimator fitted on the rows (``fit(X, sensitive_features)``:
   the group moments, the group spectra the family's losses need, the fit), alternated and best
   of ``--repeat``, as a ratio to vanilla PCA's time in the same process (target ≤ 2×); and LEACE
   alone on the raw features (``LeaceEraser``, one full eigen-decomposition of Σ_XX);
2. **leakage before / after** — the audit (``run_audit``, PCA family, ``leace=True``, 30 % of each
   group held out, no bootstrap) measures on the held-out rows (the fit never saw them) the
   balanced accuracy of predicting the group, with the leakage test's cross-validation interval
   and permutation p-value: QDA (the audit's classifier: means *and* covariances) and logistic
   regression (what LEACE guarantees against: linear);
3. **reconstruction cost** — the held-out rows' mean squared reconstruction error (size-weighted
   over the groups) and the worst group's loss, beside vanilla's; LEACE's ``leace_distortion``.

Run: ``python benchmarks/bench_erasure.py [--data credit,lfw] [--ranks 2,5,10] [--repeat 3]``.
Prints ``uptime``'s load: times on a shared machine are noisy; read the ratios.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _common import machine, shared

from fairaudit import AuditConfig, AuditData, read_table, run_audit
from fairaudit.erasure import LeaceEraser
from fairaudit.metrics import leakage_test
from fairaudit.pca import PCA, EqualMeansPCA, LeacePCA
from fairaudit.uncertainty import stratified_split

VARIANTS = ("vanilla", "vanilla+leace", "equal_means", "equal_means_cov")
HOLDOUT = 0.3


def credit(groups_column: str) -> AuditData | None:
    path = shared("credit/default_degree.csv")
    if path is None:
        return None
    frame = read_table(path, skip_rows=1).frame
    if groups_column == "EDUCATION":
        groups = np.where(frame["EDUCATION"].astype(int).isin([1, 2]), "high", "low")  # Samadi's split
    else:
        groups = np.where(frame["SEX"].astype(int) == 1, "male", "female")
    features = frame.drop(columns=["ID", groups_column]).astype(float)
    return AuditData.from_arrays(features.to_numpy(), groups, feature_names=list(features.columns), name=f"credit by {groups_column}")


def lfw() -> AuditData | None:
    path = shared("lfw/lfw_42x42.npz")
    if path is None:
        return None
    arrays = np.load(path)
    return AuditData.from_arrays(arrays["pixels_x3"] / 3.0 / 255.0, np.where(arrays["male"] == 1, "male", "female"),
                                 scaling="center", name="LFW")


def timings(data: AuditData, rank: int, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds of each estimator's ``fit`` on the data, alternated."""
    X, groups = data.X, data.groups.codes
    makers = {
        "vanilla": lambda: PCA(rank),
        "vanilla+leace": lambda: LeacePCA(rank),
        "equal_means": lambda: EqualMeansPCA(rank),
        "equal_means_cov": lambda: EqualMeansPCA(rank, match_covariance=True),
        "LEACE on the features": LeaceEraser,
    }
    best = dict.fromkeys(makers, float("inf"))
    for _ in range(repeat):
        for name, make in makers.items():
            started = time.perf_counter()
            make().fit(X, sensitive_features=groups)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def logistic_leakage(data: AuditData, result, rank: int, variant: str):
    """The held-out rows' leakage under logistic regression (the audit's split and settings)."""
    _, test = stratified_split(data.groups.codes, HOLDOUT, result.config["random_state"])
    model = result.models[("pca", variant, rank)]
    Z = model.transform(data.X[test])
    basis = getattr(model, "output_basis_", None)
    return leakage_test(Z if basis is None else Z @ basis, data.groups.codes[test], classifier="logistic", random_state=0)


def report(data: AuditData, ranks, repeat: int) -> None:
    print(f"\n{data.source['name']}: {data.n_rows:,} × {data.n_features:,}, groups {data.group_sizes()}")
    seconds = timings(data, max(ranks), repeat)
    base = seconds["vanilla"]
    print(f"  fit time at rank {max(ranks)} (best of {repeat}, alternated; ratio to vanilla PCA's {base:.3f} s):")
    for name, value in seconds.items():
        print(f"    {name:>22}: {value:7.3f} s  {value / base:5.2f}×")
    started = time.perf_counter()
    config = AuditConfig(methods=("pca",), ranks=tuple(ranks), variants=("vanilla", "equal_means", "equal_means_cov"), leace=True,
                         holdout=HOLDOUT, bootstrap=0, keep_models=True)
    result = run_audit(data, config)
    print(f"  audit (3 variants + PCA+LEACE, ranks {list(ranks)}, 30 % held out, no bootstrap): {time.perf_counter() - started:.1f} s")
    records = result.records
    sizes = data.group_sizes()

    def value(variant, rank, metric, group=""):
        row = records[(records.variant == variant) & (records["rank"] == rank) & (records.metric == metric) & (records.group == group)]
        return row.iloc[0] if len(row) else None

    print("  held-out rows: balanced accuracy of predicting the group (95 % CV interval, permutation p) | mean squared "
          "reconstruction error, worst group's loss | LEACE changed")
    for rank in ranks:
        vanilla_error = sum(value("vanilla", rank, "heldout_error", g).value * n for g, n in sizes.items()) / sum(sizes.values())
        for variant in VARIANTS:
            qda = value(variant, rank, "heldout_balanced_accuracy")
            p = value(variant, rank, "heldout_leakage_pvalue")
            linear = logistic_leakage(data, result, rank, variant)
            error = sum(value(variant, rank, "heldout_error", g).value * n for g, n in sizes.items()) / sum(sizes.values())
            worst = value(variant, rank, "heldout_max_loss").value
            changed = value(variant, rank, "leace_distortion")
            print(
                f"    d={rank:<2} {variant:>15}: QDA {qda.value:.3f} ({qda.ci_low:.3f}–{qda.ci_high:.3f}, p {p.value:.3f}); "
                f"logistic {linear.balanced:.3f} ({linear.balanced_low:.3f}–{linear.balanced_high:.3f}, "
                f"p {linear.pvalue:.3f}) | error {error:.4g} ({100 * (error / vanilla_error - 1):+.1f} %), worst loss {worst:.4g}"
                + (f" | {100 * changed.value:.1f} %" if changed is not None else "")
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="credit,lfw")
    parser.add_argument("--ranks", default="2,5,10")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--credit-groups", default="EDUCATION", choices=("EDUCATION", "SEX"))
    args = parser.parse_args()
    print(f"{machine()}; load average {os.getloadavg()[0]:.2f} at start")
    ranks = [int(r) for r in args.ranks.split(",")]
    for name in args.data.split(","):
        data = credit(args.credit_groups) if name == "credit" else lfw()
        if data is None:
            print(f"{name}: skipped (../shared/datasets not present)")
            continue
        report(data, ranks, args.repeat)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
