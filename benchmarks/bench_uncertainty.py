"""Time cost of the intervals, per family: the audit without them (bootstrap=0) against the
family's default bootstrap (fairaudit.uncertainty.DEFAULT_BOOTSTRAP).

On the default sample (``two_groups``, 600 × 10) every family runs its default audit twice:
``bootstrap=0`` and the default number of replicates. On the 30,000-row credit file
(``../shared/datasets/credit/UCI_Credit_Card.csv``, sensitive SEX, ID and the default label
left out; skipped when absent) a full default bootstrap of the slow families takes hours, so
they run ``--credit-replicates`` replicates (default 3) and the time of the default number is
projected from the measured time per replicate — printed as such. PCA runs its full default
there too.

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_uncertainty.py [--families pca,nmf,fs,cpd]
"""

from __future__ import annotations

import argparse
import os
import time

from _common import machine, run_replicates, shared

from fairaudit import load
from fairaudit.audit import AuditConfig, run_audit
from fairaudit.samples import load_sample
from fairaudit.uncertainty import DEFAULT_BOOTSTRAP, DEFAULT_CAP_VARIABLE

OPTIONS = {"nmf": {"nmf": {"nonnegative": "shift"}}}
"""Credit has negative values (repayment status −2, negative bills): NMF shifts each feature."""


def audit(data, method: str, bootstrap: int) -> tuple[float, float | None]:
    """(seconds of the whole audit, seconds of its bootstrap)."""
    started = time.perf_counter()
    result = run_audit(data, AuditConfig(methods=(method,), bootstrap=bootstrap, options=OPTIONS.get(method, {})))
    total = time.perf_counter() - started
    return total, result.uncertainty.get(method, {}).get("seconds")


def replicate_seconds(data, method: str, count: int) -> float:
    """Seconds of ``count`` bootstrap replicates run by the audit's own driver pieces (fewer than an
    ``AuditConfig`` accepts: a percentile interval needs at least 10)."""
    from fairaudit.audit import RecordSink, _family

    config = AuditConfig(methods=(method,), bootstrap=0, options=OPTIONS.get(method, {}), n_jobs=1)
    family = _family(method)(data, config, RecordSink(method))
    started = time.perf_counter()
    run_replicates(family, count)
    return time.perf_counter() - started


def line(name: str, method: str, data, replicates: int | None) -> None:
    default = DEFAULT_BOOTSTRAP[method]
    off, _ = audit(data, method, 0)
    count = default if replicates is None else min(replicates, default)
    spent = audit(data, method, count)[1] if count == default else replicate_seconds(data, method, count)
    per = (spent or 0.0) / max(count, 1)
    projected = off + per * default
    kind = "measured" if count == default else f"projected from {count} replicates"
    print(
        f"{name:12s} {method:4s} off {off:8.1f} s | {default:3d} replicates: {projected:8.1f} s ({kind}; "
        f"{per:.2f} s per replicate, ×{projected / off:.1f} the audit without intervals)",
        flush=True,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="pca,nmf,fs,cpd")
    parser.add_argument("--credit-replicates", type=int, default=3, help="replicates actually run on credit for nmf, fs, cpd")
    parser.add_argument("--skip-sample", action="store_true", help="only the credit file")
    parser.add_argument("--skip-credit", action="store_true")
    args = parser.parse_args(argv)
    os.environ.pop(DEFAULT_CAP_VARIABLE, None)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    print(f"bench_uncertainty on {machine()}, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_sample:
        sample = load_sample("two_groups")
        for method in families:
            line("two_groups", method, sample, None)
    path = shared("credit/UCI_Credit_Card.csv")
    if args.skip_credit or path is None:
        print("credit: skipped" + ("" if args.skip_credit else " (../shared/datasets/credit/UCI_Credit_Card.csv absent)"))
        return 0
    credit = load(path, sensitive="SEX", ignore=["ID", "default_payment_next_month"])
    print(f"credit: {credit.n_rows} rows × {credit.n_features} features")
    for method in families:
        line("credit", method, credit, None if method == "pca" else args.credit_replicates)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
