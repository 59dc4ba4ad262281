"""What a PCA bootstrap replicate costs as the number of groups grows, against the cost model
(:func:`fairaudit.uncertainty.replicate_seconds` with ``n_groups``).

Fair PCA for two groups searches its dual by regula falsi on one weight; for ``k ≥ 3`` groups it
runs Kelley's cutting planes, whose LPs and number of cuts grow with ``k`` (``fairaudit/pca/_dual.py``),
and JEVD-PCA diagonalises ``k`` covariances jointly. So the same rows and features cost more per
replicate when they are split into more groups. Each data set is audited in several groupings of
the *same* rows (values of the sensitive column merged), so only the number of groups changes:

* LSAC (``../shared/datasets/lsac/lsac.csv``, 26,551 × 10; the 6-valued column 7, last column left
  out, rows with missing cells dropped): 2, 3, 4, 5 and 6 groups;
* the credit file (``../shared/datasets/credit/UCI_Credit_Card.csv``, 30,000 × 21; ID, SEX and the
  label left out): EDUCATION in 2, 3 and 6 groups (value 0, 14 rows, merged with 5 and 6 as
  "other");
* a synthetic 20,000 × 60 table (three groups of different covariance and a sixth of the rows
  split off each): 2, 3 and 6 groups — a wider problem than the files';
* the two-group anchors of the model (:data:`fairaudit.uncertainty.REPLICATE_MEASURED`): the
  default sample (600 × 10), the credit file by SEX (30,000 × 22) and a wide 50 × 5,000 table
  (``bench_pca_wide``'s; the row space);
* ``bench_dask.py``'s 1,000,000 × 20 Parquet file (three groups of different covariance; under
  ``--folder``, skipped when absent): as is, and its groups 1 and 2 merged;
* ``--table PATH --sensitive COL`` (optional, e.g. a three-group table): as is, and its first two
  values merged (one group fewer).

``--only TEXT`` keeps the groupings whose name contains it.

For every grouping: ``--replicates`` replicates of the default PCA audit (ten ranks, default
variants) through the audit's own driver pieces, as ``bench_uncertainty`` does, repeated
``--repeats`` times with the groupings alternated; the median seconds per replicate (wall, and
CPU — steadier on shared cores; one BLAS thread, so equal on a quiet machine) against the model's
prediction, and the default 100 replicates both ways.

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_pca_groups.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from _common import shared

from fairaudit import load
from fairaudit.audit import AuditConfig, RecordSink, _family, _replicate
from fairaudit.uncertainty import DEFAULT_BOOTSTRAP, Replicates, replicate_seconds, replicate_seeds

LSAC_MERGES = {
    2: {"col_7": {"1-3": ["1", "2", "3"], "4-6": ["4", "5", "6"]}},
    3: {"col_7": {"1-2": ["1", "2"], "3-4": ["3", "4"], "5-6": ["5", "6"]}},
    4: {"col_7": {"1-2": ["1", "2"], "3": ["3"], "4": ["4"], "5-6": ["5", "6"]}},
    5: {"col_7": {"1-2": ["1", "2"], "3": ["3"], "4": ["4"], "5": ["5"], "6": ["6"]}},
    6: None,
}
CREDIT_MERGES = {
    2: {"EDUCATION": {"graduate school": ["1"], "other": ["0", "2", "3", "4", "5", "6"]}},
    3: {"EDUCATION": {"graduate school": ["1"], "university": ["2"], "other": ["0", "3", "4", "5", "6"]}},
    6: {"EDUCATION": {"1": ["1"], "2": ["2"], "3": ["3"], "4": ["4"], "other": ["0", "5"], "6": ["6"]}},
}


def synthetic(rows: int = 20_000, features: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three groups (60/30/10 %) of different covariance and mean; each split in two (a sixth of
    its rows apart) for six groups of the same rows."""
    rng = np.random.default_rng(seed)
    group = rng.choice(3, size=rows, p=[0.6, 0.3, 0.1])
    X = np.empty((rows, features))
    for g in range(3):
        mixing = rng.normal(size=(features, features)) * (1.0 + 0.4 * g)
        X[group == g] = rng.normal(size=(int((group == g).sum()), features)) @ mixing + g
    split = group * 2 + (rng.random(rows) < 1 / 6)
    return X, split


def groupings(args) -> list[tuple[str, object]]:
    from fairaudit import AuditData
    from fairaudit.samples import load_sample

    found = [("default sample, 2 groups", load_sample("two_groups"))]
    X, six = synthetic()
    for k, codes in ((2, six // 4), (3, six // 2), (6, six)):
        found.append((f"synthetic 20k × 60, {k} groups", AuditData.from_arrays(X, np.array([f"g{c}" for c in codes]), name=f"synthetic {k}")))
    X, six = synthetic(rows=1_000_000, features=20, seed=1)
    found.append(("synthetic 1M × 20, 2 groups", AuditData.from_arrays(X, np.array(["g0", "g1"])[six // 4], name="synthetic 1M")))
    rng = np.random.default_rng(0)
    wide = rng.normal(size=(50, 8)) @ rng.normal(size=(8, 5000)) + rng.normal(size=(50, 5000))
    found.append(("wide 50 × 5000, 2 groups", AuditData.from_arrays(wide, np.repeat(["a", "b"], [30, 20]), name="wide")))
    lsac = shared("lsac/lsac.csv")
    if lsac is None:
        print("LSAC: skipped (../shared/datasets/lsac/lsac.csv absent)")
    else:
        for k, merge in LSAC_MERGES.items():
            found.append((f"LSAC, {k} groups", load(lsac, header=False, sensitive="col_7", ignore=["col_12"], missing="drop", merge=merge)))
    credit = shared("credit/UCI_Credit_Card.csv")
    if credit is None:
        print("credit: skipped (../shared/datasets/credit/UCI_Credit_Card.csv absent)")
    else:
        found.append(("credit SEX, 2 groups", load(credit, sensitive="SEX", ignore=["ID", "default_payment_next_month"])))
        for k, merge in CREDIT_MERGES.items():
            found.append((f"credit EDUCATION, {k} groups", load(credit, sensitive="EDUCATION", ignore=["ID", "SEX", "default_payment_next_month"],
                                                                 merge=merge)))
    dask_file = os.path.join(args.folder, "bench_1000000.parquet")
    if os.path.exists(dask_file):
        found.append(("bench_dask 1M × 20, 3 groups", load(dask_file, sensitive="group")))
        found.append(("bench_dask 1M × 20, 2 groups", load(dask_file, sensitive="group", merge={"group": {"0": ["0"], "1+2": ["1", "2"]}})))
    else:
        print(f"bench_dask 1M: skipped ({dask_file} absent: bench_dask.py --parts data writes it)")
    if args.table:
        whole = load(args.table, sensitive=args.sensitive, missing="drop")
        labels = [label.split("=", 1)[-1] for label in whole.groups.labels]
        merged = {args.sensitive: {"+".join(labels[:2]): labels[:2], **{v: [v] for v in labels[2:]}}}
        found.append((f"{os.path.basename(args.table)}, {whole.groups.n_groups} groups", whole))
        found.append((f"{os.path.basename(args.table)}, {whole.groups.n_groups - 1} groups",
                      load(args.table, sensitive=args.sensitive, missing="drop", merge=merged)))
    return found


def per_replicate(data, count: int) -> tuple[float, float]:
    """Wall and CPU seconds per replicate of ``count`` replicates of the default PCA audit (the
    driver's ``_replicate``, under one BLAS thread as ``_bootstrap`` runs them)."""
    from threadpoolctl import threadpool_limits

    family = _family("pca")(data, AuditConfig(methods=("pca",), bootstrap=0), RecordSink("pca"))
    rows = np.arange(len(family.codes))
    fits = family.fit(rows)
    replicates, pairs = Replicates(count), {}
    started, cpu = time.perf_counter(), time.process_time()
    with threadpool_limits(limits=1):
        for b, seed in enumerate(replicate_seeds(0, count)):
            _replicate(family, fits, rows, None, pairs, replicates, b, seed)
    return (time.perf_counter() - started) / count, (time.process_time() - cpu) / count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--table", help="a CSV with a sensitive column of three or more values (optional)")
    parser.add_argument("--sensitive", default="group")
    parser.add_argument("--folder", default="/tmp/fairaudit-bench-dask", help="where bench_dask.py keeps its data")
    parser.add_argument("--only", default="", help="keep the groupings whose name contains this")
    args = parser.parse_args(argv)
    found = [(name, data) for name, data in groupings(args) if args.only in name]
    print(f"bench_pca_groups: 2 cores shared with other work; load average {os.getloadavg()[0]:.2f}", flush=True)
    for _, data in found:  # warm: imports, solvers' first calls
        per_replicate(data, 2)
        break
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in found}
    for repeat in range(args.repeats):
        for name, data in found:
            times[name].append(per_replicate(data, args.replicates))
        print(f"  repeat {repeat + 1} done, load average {os.getloadavg()[0]:.2f}", flush=True)
    default = DEFAULT_BOOTSTRAP["pca"]
    print(f"{'data':30s} {'rows × features':>16s} {'groups':>6s} {'wall s/replicate':>22s} {'CPU':>6s} {'predicted':>9s} "
          f"{'CPU/predicted':>13s}  {default} replicates: CPU / predicted")
    for name, data in found:
        wall = [w for w, _ in times[name]]
        cpu = statistics.median(c for _, c in times[name])
        predicted = replicate_seconds("pca", data.n_rows, data.n_features, None, data.groups.n_groups)
        print(f"{name:30s} {f'{data.n_rows:,} × {data.n_features}':>16s} {data.groups.n_groups:6d} "
              f"{statistics.median(wall):7.3f} ({min(wall):.3f}–{max(wall):.3f}) {cpu:6.3f} {predicted:9.3f} {cpu / predicted:13.2f}  "
              f"{default * cpu:6.1f} s / {default * predicted:6.1f} s", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
