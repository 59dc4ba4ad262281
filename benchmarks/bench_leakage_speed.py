"""The leakage test's cost: our batched QDA against scikit-learn's QDA refitted fold by fold.

On the representations of a large audit — 10,000 rows (the audit's leakage sample,
``AuditConfig.leakage_max_rows``), two groups (40 % / 60 %), widths 1, 5, 10 and 20 — it times, side by
side in one process:

* ``sklearn`` — the reference: the same test (the same stratified 5-fold × 3 splits and the same
  permutations of the first repeat, each fold a ``QuadraticDiscriminantAnalysis(priors=uniform,
  reg_param=QDA_REG_PARAM)`` fitted on its training rows and scored on its test rows);
* ``ours`` — :func:`fairaudit.metrics.leakage_test`, one width at a time;
* ``ours, nested`` — :func:`fairaudit.metrics.leakage_tests` on the widest representation with every
  width at once (what the PCA audit does for vanilla PCA's nested ranks);
* ``--against REV`` — also the ``fairaudit/metrics.py`` of git revision ``REV`` (e.g. ``0cadc4a``,
  before this change), loaded from ``git show`` into the same process.

It checks that every balanced accuracy and p-value agrees between the implementations and prints
seconds and ratios. Run it alone on the machine:

    flock /tmp/fairaudit-heavy.lock env PYTHONPATH=$PWD python benchmarks/bench_leakage_speed.py [--against 0cadc4a]
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import best_of, machine, module_at

from fairaudit import metrics

WIDTHS = (1, 5, 10, 20)


def sklearn_test(Z: np.ndarray, groups: np.ndarray, random_state: int = 0) -> tuple[float, float]:
    """(balanced accuracy, p-value) of the audit's protocol with a scikit-learn refit per fold."""
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis
    from sklearn.model_selection import RepeatedStratifiedKFold

    rng = np.random.default_rng(random_state)
    seed = int(rng.integers(2**31 - 1))
    folds, k = metrics.LEAKAGE_FOLDS, 2
    splits = list(RepeatedStratifiedKFold(n_splits=folds, n_repeats=metrics.LEAKAGE_REPEATS, random_state=seed).split(Z, groups))

    def mean_balanced(order, chosen):
        scores = []
        for train, test in chosen:
            model = QuadraticDiscriminantAnalysis(priors=np.full(k, 1 / k), reg_param=metrics.QDA_REG_PARAM)
            predicted = model.fit(Z[order][train], groups[train]).predict(Z[order][test])
            scores.append(np.mean([np.mean(predicted[groups[test] == c] == c) for c in range(k)]))
        return float(np.mean(scores))

    observed = mean_balanced(np.arange(len(groups)), splits)
    count = metrics._permutation_count("qda", len(groups), Z.shape[1], k, folds)
    null = [mean_balanced(rng.permutation(len(groups)), splits[:folds]) for _ in range(count)]
    return observed, (1 + sum(v >= observed - 1e-12 for v in null)) / (1 + count)


def metrics_at(revision: str):
    """``fairaudit/metrics.py`` as it was at ``revision``, imported under another name."""
    return module_at(revision, "fairaudit/metrics.py", "fairaudit.metrics_then",
                     edit=lambda text: text.replace("from .linalg import", "from fairaudit.linalg import"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (the best is reported)")
    parser.add_argument("--against", help="a git revision whose metrics.py is timed too")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    groups = (rng.random(args.rows) < 0.4).astype(int)
    wide = rng.standard_normal((args.rows, max(WIDTHS))) + 0.05 * groups[:, None]
    then = metrics_at(args.against) if args.against else None
    print(f"{args.rows:,} rows, two groups, widths {WIDTHS}; {machine()}; best of {args.repeat}")
    totals = {"sklearn": 0.0, "ours": 0.0, **({f"metrics.py at {args.against}": 0.0} if then else {})}
    for width in WIDTHS:
        Z = wide[:, :width]
        ours_s, ours = best_of(lambda Z=Z: metrics.leakage_test(Z, groups), args.repeat)
        ref_s, (balanced, pvalue) = best_of(lambda Z=Z: sklearn_test(Z, groups), 1)
        assert abs(ours.balanced - balanced) < 1e-9 and abs(ours.pvalue - pvalue) < 1e-12, (width, ours, balanced, pvalue)
        line = f"  width {width:2d}: sklearn {ref_s:6.2f} s, ours {ours_s:6.3f} s ({ref_s / ours_s:5.1f}×)"
        totals["sklearn"] += ref_s
        totals["ours"] += ours_s
        if then:
            then_s, old = best_of(lambda Z=Z: then.leakage_test(Z, groups), args.repeat)
            assert old.balanced == ours.balanced and old.pvalue == ours.pvalue
            line += f", {args.against} {then_s:6.3f} s ({then_s / ours_s:4.2f}× ours)"
            totals[f"metrics.py at {args.against}"] += then_s
        print(line + f"; balanced accuracy {ours.balanced:.4f}, p = {ours.pvalue:.3f}, {ours.permutations} permutations")
    nested_s, nested = best_of(lambda: metrics.leakage_tests(wide, groups, WIDTHS), args.repeat)
    assert [e.balanced for e in nested] == [metrics.leakage_test(wide[:, :w], groups).balanced for w in WIDTHS]
    print("totals over the widths: " + ", ".join(f"{name} {value:.2f} s" for name, value in totals.items()))
    print(f"  every width in one nested pass: {nested_s:.3f} s ({totals['ours'] / nested_s:.1f}× faster than one test per width)")
    print(f"  ours vs sklearn: {totals['sklearn'] / totals['ours']:.0f}×" + (f"; ours vs {args.against}: {totals[f'metrics.py at {args.against}'] / totals['ours']:.2f}×" if then else ""))


if __name__ == "__main__":
    main()
