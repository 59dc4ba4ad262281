"""Verdicts on k groups (issue 22): how often a real gap is found, how often a false one is raised.

Synthetic data, 20 seeds each (``--seeds``), vanilla's verdict counted:

* ``gap``: two groups of 1,500 rows whose covariance structures differ (a real loss gap at low
  ranks) plus a third group of 25 rows drawn like the first;
* ``hidden``: the same with a moderate gap (near the tolerance) and the 25 rows lying in the pooled
  principal plane — the issue's situation, where the small group had the lowest loss and a wide
  interval, and the comparison with it hid the gap between the large groups;
* ``null``: identically distributed rows whose groups are drawn at random, 750/750/25 (and 2 groups
  of 750/775, 4 groups of 750/750/750/25) — any gap is a false alarm; PCA and NMF.

    python benchmarks/bench_verdicts.py [--seeds 20] [--replicates 30] [--only gap,null,nmf]
    python benchmarks/bench_verdicts.py --files DIR   # the issue-like CSV files, written from the sample generator

The tests (``tests/test_verdicts.py``) run a few seeds of each design with the same generators.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from fairaudit import AuditData
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.findings import findings
from fairaudit.samples import two_groups

LOADINGS = {"A": (2.5, 0.8), "B": (0.8, 2.0)}
"""Each large group's latent factors: rows ``a·z₁·u + b·z₂·v + noise`` with ``u`` along features 1–2
and ``v`` along features 3–4 — the first group's variance mostly along ``u``, the second's along
``v``, so pooled PCA at rank 1 (``u``) serves the first and fails the second (a real loss gap; the
second's error about 2× what it would be if served as well); correlated features, so the data's
standardisation leaves the structure in place."""


MODERATE = {"A": (2.0, 1.0), "B": (1.0, 1.7)}
"""A moderate gap: the second group's error about 1.3–1.4× what it would be if served as well
(the tolerance is 1.25)."""


def gap_data(seed: int, sizes=(1500, 1500, 25), loadings=None, third: str = "like_first") -> AuditData:
    """Two large groups with a real loss gap (``loadings``: :data:`LOADINGS` by default) and a small
    third group: drawn like the first (``third="like_first"``), or lying in the pooled principal
    plane with little noise (``"plane"``: its loss is the lowest, as the issue's 27-row group's
    was, and its bootstrap replicates spread widely)."""
    rng = np.random.default_rng(seed)
    loadings = loadings or LOADINGS
    u = np.array([1.0, 1.0, 0, 0, 0, 0]) / np.sqrt(2)
    v = np.array([0, 0, 1.0, 1.0, 0, 0]) / np.sqrt(2)
    blocks = []
    for (a, b), n in zip([loadings["A"], loadings["B"]], sizes[:2], strict=True):
        z = rng.normal(size=(n, 2))
        blocks.append(a * z[:, :1] * u + b * z[:, 1:] * v + 0.6 * rng.normal(size=(n, 6)))
    if len(sizes) > 2:
        n = sizes[2]
        z = rng.normal(size=(n, 2))
        (a, b), noise = (loadings["A"], 0.6) if third == "like_first" else (loadings["A"], 0.05)
        blocks.append(a * z[:, :1] * u + b * z[:, 1:] * v + noise * rng.normal(size=(n, 6)))
    labels = np.repeat(["A", "B", "C"][: len(sizes)], sizes)
    return AuditData.from_arrays(np.vstack(blocks), labels)


def null_data(seed: int, sizes=(750, 750, 25), nonnegative: bool = False) -> AuditData:
    """Identically distributed rows, the groups drawn at random with the given sizes."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    if nonnegative:
        X = rng.gamma(1.0, size=(n, 3)) @ rng.uniform(size=(3, 6)) + rng.uniform(0, 0.3, size=(n, 6))
    else:
        X = rng.multivariate_normal(np.zeros(6), np.diag([5, 3, 2, 1, 0.5, 0.3]), size=n)
    labels = rng.permutation(np.repeat([f"g{i}" for i in range(len(sizes))], sizes))
    return AuditData.from_arrays(X, labels, scaling="none" if nonnegative else "standardize")


def vanilla_verdict(data: AuditData, method: str, replicates: int, seed: int, ranks=(1, 2, 3)) -> tuple[str, str]:
    """Vanilla's verdict (the family's first finding) on ``data``, and the group its headline
    compares the worse-served one with (read from the evidence as this version writes it, or as
    the version before the verdict engine did: ``best_group``)."""
    config = AuditConfig(methods=(method,), ranks=ranks, variants=("vanilla",), bootstrap=replicates, random_state=seed)
    top = findings(run_audit(data, config))[method][0]
    evidence = top.evidence or {}
    return top.verdict, str(evidence.get("best_group") or (evidence.get("headline") or {}).get("other"))


def count(make, method: str, seeds, replicates: int) -> tuple[dict[str, int], dict[str, int]]:
    """How often each verdict came, and (verdict, compared with) how often."""
    found: dict[str, int] = {}
    compared: dict[str, int] = {}
    for seed in seeds:
        verdict, other = vanilla_verdict(make(seed), method, replicates, seed)
        found[verdict] = found.get(verdict, 0) + 1
        compared[f"{verdict} against {other}"] = compared.get(f"{verdict} against {other}", 0) + 1
    return found, compared


DESIGNS = {
    "gap": ("PCA, 1,500/1,500 with a real gap + 25 drawn like the first", "pca", gap_data),
    "hidden": ("PCA, 1,500/1,500 with a moderate gap + 25 in the pooled principal plane", "pca",
               lambda s: gap_data(s, loadings=MODERATE, third="plane")),
    "null": ("PCA, iid rows, random groups 750/750/25", "pca", null_data),
    "null2": ("PCA, iid rows, random groups 750/775", "pca", lambda s: null_data(s, (750, 775))),
    "null4": ("PCA, iid rows, random groups 750/750/750/25", "pca", lambda s: null_data(s, (750, 750, 750, 25))),
    "nmf": ("NMF, iid non-negative rows, random groups 750/750/25", "nmf", lambda s: null_data(s, nonnegative=True)),
    "nmf2": ("NMF, iid non-negative rows, random groups 750/775", "nmf", lambda s: null_data(s, (750, 775), nonnegative=True)),
    "nmf4": ("NMF, iid non-negative rows, random groups 750/750/750/25", "nmf",
             lambda s: null_data(s, (750, 750, 750, 25), nonnegative=True)),
}


# ---------------------------------------------------------------------------- the issue's two files
def issue_files(folder: Path) -> list[Path]:
    """Two CSV files like the issue's, from the sample generator (:func:`fairaudit.samples.two_groups`):
    ``small_third_group.csv`` — 3,869 rows of one structure (``white``), 1,852 of another
    (``black``) and 27 drawn like the first (``other``); ``ten_to_one.csv`` — 358 / 39 (``sex``)."""
    folder.mkdir(parents=True, exist_ok=True)
    large = two_groups(n_major=3869, n_minor=1852, random_state=11)
    small = two_groups(n_major=27, n_minor=0, random_state=12)
    large["race"] = large.pop("group").map({"A": "white", "B": "black"})
    small["race"] = small.pop("group").map({"A": "other"})
    survey = pd.concat([large, small], ignore_index=True).sample(frac=1.0, random_state=13).reset_index(drop=True)
    imbalance = two_groups(n_major=358, n_minor=39, random_state=14)
    imbalance["sex"] = imbalance.pop("group").map({"A": "m", "B": "f"})
    paths = [folder / "small_third_group.csv", folder / "ten_to_one.csv"]
    survey.to_csv(paths[0], index=False, lineterminator="\n")
    imbalance.to_csv(paths[1], index=False, lineterminator="\n")
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--only", default=",".join(DESIGNS))
    parser.add_argument("--files", type=Path, default=None, help="write the issue-like CSV files there and stop")
    args = parser.parse_args(argv)
    if args.files:
        for path in issue_files(args.files):
            print(path)
        return 0
    for name in args.only.split(","):
        title, method, make = DESIGNS[name]
        started = time.perf_counter()
        found, compared = count(make, method, range(args.seeds), args.replicates)
        print(f"{name:6s} {title}: {found} of {args.seeds} seeds ({args.replicates} replicates; {time.perf_counter() - started:.0f} s); "
              f"{compared}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
