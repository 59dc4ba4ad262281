"""Fair PCA on the papers' real data: credit (30,000 × 22, Samadi's EDUCATION split, d = 1..21)
and LFW (13,232 × 1,764 pixels, male/female, d = 1..10). Prints absolute times and the per-group
average loss of vanilla PCA and Fair PCA per d (the shape of Samadi et al. Figures 3–4).
"""

from __future__ import annotations

import time

import numpy as np
from _common import machine, peak_rss_mb, shared

from fairaudit import AuditData, read_table
from fairaudit.pca import PCA, FairPCA, GroupProblem, rank_sweep_problem


def credit() -> AuditData | None:
    path = shared("credit/default_degree.csv")
    if path is None:
        return None
    frame = read_table(path, skip_rows=1).frame
    groups = np.where(frame["EDUCATION"].astype(int).isin([1, 2]), "high", "low")
    features = frame.drop(columns=["ID", "EDUCATION"]).astype(float)
    return AuditData.from_arrays(features.to_numpy(), groups, feature_names=list(features.columns), name="credit")


def lfw() -> AuditData | None:
    path = shared("lfw/lfw_42x42.npz")
    if path is None:
        return None
    arrays = np.load(path)
    pixels = arrays["pixels_x3"] / 3.0 / 255.0
    groups = np.where(arrays["male"] == 1, "male", "female")
    return AuditData.from_arrays(pixels, groups, scaling="center", name="lfw")


def sweep(data: AuditData, ranks) -> None:
    start = time.perf_counter()
    problem = GroupProblem.from_data(data.X, data.groups)
    setup = time.perf_counter() - start
    fair = list(rank_sweep_problem(FairPCA(), problem, ranks))
    total = time.perf_counter() - start
    vanilla = list(rank_sweep_problem(PCA(), problem, ranks))
    labels = problem.labels
    print(f"{data.source['name']}: {data.n_rows} × {data.n_features}, groups {data.group_sizes()}")
    print(f"  Fair PCA (eig) over d = {ranks[0]}..{ranks[-1]}: {total:.2f} s total "
          f"({setup:.2f} s group covariances + spectra, {total - setup:.2f} s solving); peak RSS {peak_rss_mb():.0f} MB")
    print(f"  {'d':>3} | vanilla loss {labels[0]:>8} {labels[1]:>8} | fair loss {labels[0]:>8} {labels[1]:>8} | rank  gap       s")
    for (d, v, _), (_, f, seconds) in zip(vanilla, fair, strict=True):
        print(f"  {d:3d} | {'':13}{v.group_losses_[0]:8.4f} {v.group_losses_[1]:8.4f} | "
              f"{'':10}{f.group_losses_[0]:8.4f} {f.group_losses_[1]:8.4f} | {f.n_components_:4d} {f.dual_gap_:8.1e} {seconds:6.3f}")


def main() -> None:
    print(f"{machine()}")
    for name, loader, ranks in (("credit", credit, list(range(1, 22))), ("LFW", lfw, list(range(1, 11)))):
        data = loader()
        if data is None:
            print(f"{name}: skipped (../shared/datasets not present)")
            continue
        sweep(data, ranks)


if __name__ == "__main__":
    main()
