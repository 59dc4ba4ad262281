"""The worst-served subgroup's search (``AuditConfig(subgroups=True)``): found rate, false-alarm
rate and the time it adds.

1. **Planted** — :func:`fairaudit.samples.planted_subgroup` (2,000 rows, 6 features, two sensitive
   columns of three values; the intersection ``age_band=old & region=west`` is 3 % of the rows and
   varies along the directions the others vary least in): in how many seeds the finding is a gap
   naming exactly that intersection. ``--weak`` also runs a milder plant (the planted cell's
   spectrum half-way between the others' and its reverse).
2. **Null** — the same cells, every row from the common distribution: in how many seeds the search
   reports a gap (the family-wise rate it controls at α = 0.05).
3. **Time** — the PCA audit of the default variants with and without the search, alternated and
   best of ``--repeat``, on the planted sample and on the credit table (30,000 × 22, sensitive SEX ×
   EDUCATION, from ``../shared``), as a ratio in the same process; and the search's own seconds
   (``uncertainty["pca"]["subgroup_seconds"]``).

Run: ``python benchmarks/bench_subgroups.py [--seeds 20] [--bootstrap 100] [--repeat 2] [--weak]`` (``--seeds 0``:
the timing alone; ``--no-timing``: the rates alone).
Prints ``uptime``'s load: times on a shared machine are noisy; read the ratios.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from _common import machine, shared

from fairaudit import AuditConfig, AuditData, read_table, run_audit
from fairaudit.samples import planted_subgroup
from fairaudit.subgroups import worst_subgroup

PLANTED = "age_band=old & region=west"


def sample_data(seed: int, planted: bool = True, weak: bool = False) -> AuditData:
    frame = planted_subgroup(planted=planted, random_state=seed)
    if weak:  # the planted cell's rows drawn again with a milder spectrum
        rng = np.random.default_rng(10_000 + seed)
        cell = ((frame.age_band == "old") & (frame.region == "west")).to_numpy()
        spread = np.array([3.0, 2.5, 2.0, 1.5, 1.0, 0.5])
        basis = np.linalg.qr(np.random.default_rng(seed).standard_normal((6, 6)))[0]
        mild = (spread + spread[::-1]) / 2
        frame.loc[cell, [f"x{i + 1}" for i in range(6)]] = (rng.standard_normal((cell.sum(), 6)) * mild) @ basis.T
    return AuditData.from_arrays(frame.filter(like="x").to_numpy(), frame[["age_band", "region"]])


def rates(seeds: int, bootstrap: int, weak: bool) -> None:
    designs = [("planted", True, False), ("null", False, False)] + ([("weak plant", True, True)] if weak else [])
    for name, planted, mild in designs:
        verdicts, named, seconds = [], 0, []
        for seed in range(seeds):
            result = run_audit(sample_data(seed, planted, mild), AuditConfig(variants=["vanilla"], bootstrap=bootstrap, subgroups=True,
                                                                         random_state=seed))
            found = worst_subgroup(result)
            verdicts.append(found.verdict)
            named += found.verdict == "gap" and found.headline.group == PLANTED
            seconds.append(result.uncertainty["pca"]["subgroup_seconds"])
        if not seeds:
            return
        gaps = verdicts.count("gap")
        print(f"{name:10s}: gap in {gaps}/{seeds} seeds, naming {PLANTED} in {named}/{seeds}; "
              f"search {np.median(seconds):.2f} s (median), {found.candidates} subgroups × {len(found.ranks)} ranks")


def credit() -> AuditData | None:
    path = shared("credit/default_degree.csv")
    if path is None:
        return None
    frame = read_table(path, skip_rows=1).frame
    sex = np.where(frame["SEX"].astype(int) == 1, "male", "female")
    education = frame["EDUCATION"].astype(int).map({1: "graduate", 2: "university", 3: "high school"}).fillna("other")
    features = frame.drop(columns=[c for c in ("ID", "SEX", "EDUCATION", "default payment next month") if c in frame])
    return AuditData.from_arrays(features.to_numpy(dtype=float), pd.DataFrame({"sex": sex, "education": education}))


def timing(repeat: int, bootstrap: int) -> None:
    for name, data in (("planted sample", sample_data(0)), ("credit SEX × EDUCATION", credit())):
        if data is None:
            print(f"{name}: skipped (not in ../shared)")
            continue
        best = {False: np.inf, True: np.inf}
        search = np.inf
        for _ in range(repeat):
            for flag in (False, True):
                started = time.perf_counter()
                result = run_audit(data, AuditConfig(bootstrap=bootstrap, subgroups=flag))
                best[flag] = min(best[flag], time.perf_counter() - started)
                if flag:
                    search = min(search, result.uncertainty["pca"]["subgroup_seconds"])
        found = worst_subgroup(result)
        print(f"{name} ({data.n_rows:,} × {data.n_features}, {len(data.groups.labels)} cells): audit {best[False]:.1f} s, with the "
              f"search {best[True]:.1f} s ({best[True] / best[False]:.2f}×; the search itself {search:.1f} s, {found.candidates} subgroups); "
              f"worst subgroup "
              f"{found.headline.group} ({found.verdict}, rank {found.rank}, difference {found.headline.difference:.3g})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--weak", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    print(f"{machine()}, load {os.getloadavg()[0]:.1f}; {args.bootstrap} bootstrap replicates")
    rates(args.seeds, args.bootstrap, args.weak)
    if not args.no_timing:
        timing(args.repeat, args.bootstrap)


if __name__ == "__main__":
    main()
