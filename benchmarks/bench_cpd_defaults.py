"""The CP fair methods at their default λ on named data: are they less fair than vanilla, what λ
was chosen, and what the audit costs (issue 24).

    env PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_cpd_defaults.py [--data cpd_tensor,salaries,cmc,credit]
    env PYTHONPATH=/work/main .venv/bin/python benchmarks/bench_cpd_defaults.py   # the same on another checkout

Per data set: the CP audit's default (ranks 1–10, every variant, the λ sweep, no intervals —
the leakage verdicts use the leakage test's own interval), and per fair method at the findings'
rank: its default λ, residual fit, balanced accuracy with its interval against vanilla's, and
the leakage verdict (``worse`` = less fair than vanilla beyond the intervals). Then the wall and
CPU seconds of the audit, and the machine's load (the cores are shared).

Data: ``cpd_tensor`` (the dashboard's CP sample, App. A.8's distribution, 120 × 10 × 6);
``salaries`` (:func:`fairaudit.samples.salaries_like`, one-hot: issue 24's table); ``cmc``
(Kim & Gittens App. A.9's contraceptive data, 1,473 × 8, working status); ``credit`` (the
4,165 × 12 table of ``bench_all_families.py``, SEX).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import warnings

import pandas as pd

from fairaudit import prepare, read_table
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.findings import findings
from fairaudit.samples import load_sample

try:
    from _common import shared
except ImportError:  # run from elsewhere
    sys.path.insert(0, os.path.dirname(__file__))
    from _common import shared

CMC_COLUMNS = ["wife_age", "wife_edu", "husband_edu", "n_children", "wife_religion", "wife_working", "husband_occ", "living_std", "media", "method"]


def _table(frame: pd.DataFrame, sensitive: str, name: str, **options):
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return prepare(read_table(buffer.getvalue().encode(), name=name), sensitive=sensitive, **options)


def data_set(name: str):
    if name == "cpd_tensor":
        return load_sample("cpd_tensor")
    if name == "salaries":
        from fairaudit import samples

        if not hasattr(samples, "salaries_like"):  # an older checkout: this branch's generator
            return None
        return _table(samples.salaries_like(), "sex", "salaries.csv", one_hot=True)
    if name == "cmc":
        path = shared("cmc/cmc.data")
        if path is None:
            return None
        frame = pd.read_csv(path, header=None, names=CMC_COLUMNS).drop(columns="method")
        return _table(frame, "wife_working", "cmc.csv")
    if name == "credit":
        from bench_all_families import credit_table

        return credit_table()
    raise SystemExit(f"unknown data set {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="cpd_tensor,salaries,cmc,credit")
    args = parser.parse_args()
    for name in args.data.split(","):
        data = data_set(name)
        if data is None:
            print(f"{name}: skipped (data not available)")
            continue
        wall, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run_audit(data, AuditConfig(methods=("cpd",), bootstrap=0, random_state=0))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        found = findings(result)["cpd"]
        rank = next((f.rank for f in found if f.text.startswith("From ")), None)
        records = result.records[(result.records["rank"] == rank) & (result.records.group == "")]
        table = records.pivot_table(index="variant", columns="metric", values="value")
        lows = records[records.metric == "balanced_accuracy"].set_index("variant")["ci_low"]
        highs = records[records.metric == "balanced_accuracy"].set_index("variant")["ci_high"]
        verdicts = {f.variant: f.verdict for f in found if f.text.startswith("From ")}
        print(f"\n{name}: {data.n_rows} entities, shape {data.tensor().shape}; findings at rank {rank}; "
              f"audit {wall:.1f} s wall, {cpu:.1f} s CPU, load {os.getloadavg()[0]:.1f}")
        print(f"  {'variant':<8} {'λ':>10} {'residual fit':>12} {'balanced accuracy':>24} verdict")
        for variant in ("vanilla", "fatr", "hsic", "khsic"):
            if variant not in table.index:
                continue
            row = table.loc[variant]
            span = f"{row['balanced_accuracy']:.3f} ({lows[variant]:.3f}–{highs[variant]:.3f})"
            print(f"  {variant:<8} {row['lam']:>10.4g} {row['residual_fit']:>12.4f} {span:>24} {verdicts.get(variant, '')}")


if __name__ == "__main__":
    main()
