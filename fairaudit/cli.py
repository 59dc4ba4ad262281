"""Command line: ``python -m fairaudit audit DATA.csv --sensitive COL ...``.

Exit status 0 on success; 2 with one line on stderr for bad input (never a traceback).
``python -m fairaudit columns DATA.csv`` lists a file's columns and how they would be read.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from . import __version__
from .audit import FAMILIES, AuditConfig, run_audit
from .cpd.estimator import KERNELS
from .data import DEFAULT_MAX_MB, MISSING_POLICIES, NONNEGATIVE_POLICIES, SCALINGS, prepare, prepare_tensor, read_table
from .metrics import LEAKAGE_CLASSIFIERS
from .nmf._standard import SOLVERS as NMF_SOLVERS
from .nmf.audit import AUDIT_INITS, MU_WEIGHTS, NMF_SCALINGS, STOPPING_RULES, ZERO_ROW_POLICIES
from .errors import FairAuditError, ParameterError


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with status 2."""

    def error(self, message):  # noqa: D401 - argparse API
        raise _UsageError(f"{message} (see --help)")


class _UsageError(Exception):
    pass


def parse_ranks(text: str) -> list[int]:
    """``"1:10"`` (inclusive), ``"2,4,8"``, ``"1:21:2"`` or a single number."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) == 2:
                return list(range(parts[0], parts[1] + 1))
            if len(parts) == 3 and parts[2] > 0:
                return list(range(parts[0], parts[1] + 1, parts[2]))
            raise ValueError
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ParameterError(f"--ranks {text!r} is not understood; write 1:10, 2,4,8 or 1:21:2.") from None


def _pairs(items: list[str] | None, option: str, cast) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError(f"{option} expects COLUMN=VALUE, got {item!r}.")
        column, value = item.rsplit("=", 1)
        try:
            out[column.strip()] = cast(value)
        except ValueError:
            raise ParameterError(f"{option} {item!r}: {value!r} is not a number.") from None
    return out


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m fairaudit", description="Fairness audit for unsupervised learning.")
    parser.add_argument("--version", action="version", version=f"fairaudit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    audit = commands.add_parser("audit", help="audit a CSV file", description="Run vanilla and fair methods on a CSV file.")
    audit.add_argument("data", help="CSV file (UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1)")
    _add_input_options(audit)
    runs = audit.add_argument_group("what to run")
    runs.add_argument("--methods", default="pca", help=f"comma-separated families: {', '.join(FAMILIES)} (default pca)")
    runs.add_argument("--ranks", default=None, help="ranks to sweep: 1:10, 2,4,8 or 1:21:2 (default 1 … min(10, features))")
    runs.add_argument("--variants", default="all", help="all, or names such as vanilla,fair_eig (optionally pca:fair_sdp)")
    runs.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    runs.add_argument("--leakage-classifier", default=AuditConfig.leakage_classifier, choices=LEAKAGE_CLASSIFIERS,
                      help="classifier behind the unfairness (leakage) metrics (default qda)")
    runs.add_argument("--sdp-max-features", type=int, default=AuditConfig.sdp_max_features, help="skip the SDP above this many features")
    runs.add_argument("--clusters", type=int, default=None, metavar="K",
                      help="fs: k-means clusters (default: the --label's number of classes, else the number of groups)")
    runs.add_argument("--kmeans-runs", type=int, default=None, metavar="N",
                      help="fs: k-means runs per selection, reported as mean and std (default 50, as the FUFS paper)")
    _add_nmf_options(audit)
    cpd = audit.add_argument_group("CP tensor decomposition (--methods cpd)")
    cpd.add_argument("--cpd-classifier", default=None, choices=LEAKAGE_CLASSIFIERS,
                     help="leakage classifier for CP embeddings (default qda, fast; mlp = the paper's 1,500-unit network, 50–100× slower per fit)")
    cpd.add_argument("--cpd-lambdas", default=None, help="λ values for every fair method, e.g. 0.1,1,10 (default: a 10-point grid scaled to the data)")
    cpd.add_argument("--cpd-points", type=int, default=None, help="points of the default λ grid (default 10)")
    cpd.add_argument("--cpd-sweep-rank", type=int, default=None, help="CP rank of the λ sweep (default: the largest audited rank below the exact-fit rank)")
    cpd.add_argument("--cpd-no-sweep", action="store_true", help="skip the λ sweep (fair methods at their default λ only)")
    cpd.add_argument("--cpd-epochs", type=int, default=None, help="largest number of epochs per fit (default 200)")
    cpd.add_argument("--cpd-khsic-max-rows", type=int, default=None, help="skip KHSIC above this many entities (default 5000)")
    cpd.add_argument("--cpd-tol", type=float, default=None, help="stop a fit when the objective changes by less than this, relative, over an epoch (default 1e-4)")
    cpd.add_argument("--cpd-kernel", default=None, choices=KERNELS,
                     help="KHSIC's RBF kernel: exact, Nyström, or auto (default: exact up to 2000 entities, Nyström above)")
    cpd.add_argument("--cpd-landmarks", type=int, default=None, help="landmark entities of the Nyström kernel (default 500)")
    outputs = audit.add_argument_group("outputs")
    outputs.add_argument("--html", help="write a self-contained HTML report here")
    outputs.add_argument("--json", help="write the JSON result here")
    outputs.add_argument("--csv", help="write the tidy records as CSV here")
    outputs.add_argument("--quiet", action="store_true", help="print nothing on success")

    columns = commands.add_parser("columns", help="list a CSV file's columns", description="Show how a CSV file is read.")
    columns.add_argument("data")
    columns.add_argument("--skip-rows", type=int, default=0)
    columns.add_argument("--no-header", action="store_true")
    columns.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB)
    return parser


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    reading = parser.add_argument_group("reading the file")
    reading.add_argument("--skip-rows", type=int, default=0, help="lines to skip before the header")
    reading.add_argument("--no-header", action="store_true", help="the first line is data (columns become col_1, col_2, …)")
    reading.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB, help=f"size limit in MB (default {DEFAULT_MAX_MB})")
    columns = parser.add_argument_group("columns")
    columns.add_argument("--sensitive", action="append", required=True, help="sensitive column; repeat for intersections")
    columns.add_argument("--features", help="comma-separated feature columns (default: all numeric, non-ID columns)")
    columns.add_argument("--ignore", help="comma-separated columns to leave out")
    columns.add_argument("--label", help="ground-truth column (clustering accuracy); never a feature")
    columns.add_argument("--one-hot", action="store_true", help="one-hot encode text feature columns")
    columns.add_argument("--binarize", action="append", metavar="COL=THRESHOLD", help="split a numeric sensitive column at a threshold")
    columns.add_argument("--bins", action="append", metavar="COL=N", help="cut a numeric sensitive column into N quantile bins")
    tensor = parser.add_argument_group("tensor input (long format: one line per cell)")
    tensor.add_argument("--tensor-index", metavar="ENTITY,MODE2,…", help="index columns, entity first (e.g. user,item,context); the file is then read as a tensor")
    tensor.add_argument("--tensor-value", metavar="COL", help="the value column of a long-format tensor")
    tensor.add_argument("--tensor-fill", metavar="VALUE", type=float, default=None,
                        help="value for absent cells (default: stop and say which cells are absent)")
    rows = parser.add_argument_group("rows and scaling")
    rows.add_argument("--missing", default="error", choices=MISSING_POLICIES, help="missing cells: stop (default), drop rows, impute")
    rows.add_argument("--min-group-size", type=int, default=2)
    rows.add_argument("--drop-small-groups", action="store_true", help="drop groups below --min-group-size instead of stopping")
    scaling = rows.add_mutually_exclusive_group()
    scaling.add_argument("--scaling", choices=SCALINGS, default=None, help="feature scaling (default standardize)")
    scaling.add_argument("--standardize", dest="standardize", action="store_true", default=None, help="same as --scaling standardize")
    scaling.add_argument("--no-standardize", dest="standardize", action="store_false", help="same as --scaling center")


def _add_nmf_options(parser: argparse.ArgumentParser) -> None:
    nmf = parser.add_argument_group("NMF (--methods nmf)")
    nmf.add_argument("--nonnegative", choices=NONNEGATIVE_POLICIES, default=None,
                     help="negative values: stop with a message (default), shift each feature by its minimum, or clip at 0")
    nmf.add_argument("--zero-rows", choices=ZERO_ROW_POLICIES, default=None, help="all-zero rows: stop (default) or drop them")
    nmf.add_argument("--nmf-scaling", choices=NMF_SCALINGS, default=None,
                     help="feature scaling for NMF (default unit_norm, the paper's; --scaling is for PCA)")
    nmf.add_argument("--nmf-estimates", type=int, default=None, help="T: NMF runs per group averaged into E_l (default 5)")
    nmf.add_argument("--nmf-solver", choices=NMF_SOLVERS, default=None,
                     help="standard NMF and E_l solver: mu (default, the paper's) or cd (coordinate descent, tighter E_l)")
    nmf.add_argument("--nmf-stopping", choices=STOPPING_RULES, default=None,
                     help="stopping rule of standard NMF and E_l with --nmf-solver mu: eq10 (default, the paper's) or window")
    nmf.add_argument("--fair-nmf-stopping", choices=STOPPING_RULES, default=None,
                     help="stopping rule of Fairer-NMF: window (default; eq10 stops MU on plateaus) or eq10 (the paper's)")
    nmf.add_argument("--fair-nmf-weights", choices=MU_WEIGHTS, default=None,
                     help="Fairer-NMF (MU) H-step weights: squared (default, Algorithm 3) or gradient (ours)")
    nmf.add_argument("--fair-nmf-init", choices=AUDIT_INITS, default=None,
                     help="Fairer-NMF start: nmf (default: the standard NMF of the same rank) or random (the paper's)")
    nmf.add_argument("--fair-nmf-keep-best", action=argparse.BooleanOptionalAction, default=None,
                     help="return the Fairer-NMF iterate with the smallest largest loss (default: the last one, the paper's)")
    nmf.add_argument("--nmf-tol", type=float, default=None, help="stopping tolerance (default 1e-4, eq. (10)'s)")
    nmf.add_argument("--nmf-max-iter", type=int, default=None, help="Fairer-NMF iteration cap (default 5000 MU, 200 AM)")
    nmf.add_argument("--am-max-cells", type=int, default=None, help="skip Fairer-NMF AM above rows x features (default 100000)")


def _nmf_options(args) -> dict:
    chosen = {
        "nonnegative": args.nonnegative,
        "zero_rows": args.zero_rows,
        "scaling": args.nmf_scaling,
        "n_estimates": args.nmf_estimates,
        "nmf_solver": args.nmf_solver,
        "nmf_stopping": args.nmf_stopping,
        "stopping": args.fair_nmf_stopping,
        "mu_weights": args.fair_nmf_weights,
        "init": args.fair_nmf_init,
        "keep_best": args.fair_nmf_keep_best,
        "tol": args.nmf_tol,
        "max_iter": args.nmf_max_iter,
        "am_max_cells": args.am_max_cells,
    }
    return {key: value for key, value in chosen.items() if value is not None}


def _scaling(args, default: str = "standardize") -> str:
    """--scaling, else --standardize / --no-standardize, else ``default``."""
    if args.scaling:
        return args.scaling
    if args.standardize is None:
        return default
    return "standardize" if args.standardize else "center"


def load_from_args(args):
    """Read and prepare the data as the command line says."""
    table = read_table(args.data, skip_rows=args.skip_rows, header=False if args.no_header else None, max_mb=args.max_mb)
    if args.tensor_index or args.tensor_value or args.tensor_fill is not None:
        return _load_tensor(args, table)
    return prepare(
        table,
        sensitive=args.sensitive,
        features=_split(args.features),
        ignore=_split(args.ignore) or (),
        label=args.label,
        one_hot=args.one_hot,
        binarize=_pairs(args.binarize, "--binarize", float),
        bins=_pairs(args.bins, "--bins", int),
        missing=args.missing,
        scaling=_scaling(args),
        min_group_size=args.min_group_size,
        small_groups="drop" if args.drop_small_groups else "error",
    )


def _load_tensor(args, table):
    if not args.tensor_index or not args.tensor_value:
        raise ParameterError("a long-format tensor needs both --tensor-index ENTITY,MODE2,… and --tensor-value COL.")
    for option, given in (("--features", args.features), ("--label", args.label), ("--one-hot", args.one_hot), ("--ignore", args.ignore)):
        if given:
            raise ParameterError(f"{option} does not apply to a long-format tensor (its cells come from --tensor-value).")
    if args.missing != "error":
        raise ParameterError("--missing does not apply to a long-format tensor; absent cells are filled with --tensor-fill VALUE.")
    return prepare_tensor(
        table,
        index=_split(args.tensor_index),
        value=args.tensor_value,
        sensitive=args.sensitive,
        binarize=_pairs(args.binarize, "--binarize", float),
        bins=_pairs(args.bins, "--bins", int),
        fill=args.tensor_fill,
        scaling=_scaling(args, default="none"),
        min_group_size=args.min_group_size,
        small_groups="drop" if args.drop_small_groups else "error",
    )


def _cpd_options(args) -> dict:
    lambdas = None
    if args.cpd_lambdas:
        try:
            lambdas = [float(v) for v in _split(args.cpd_lambdas)]
        except ValueError:
            raise ParameterError(f"--cpd-lambdas {args.cpd_lambdas!r} is not a list of numbers such as 0.1,1,10.") from None
    options = {
        "leakage_classifier": args.cpd_classifier,
        "lambdas": lambdas,
        "n_lambdas": args.cpd_points,
        "sweep_rank": args.cpd_sweep_rank,
        "sweep": False if args.cpd_no_sweep else None,
        "n_epochs": args.cpd_epochs,
        "khsic_max_rows": args.cpd_khsic_max_rows,
        "tol": args.cpd_tol,
        "khsic_kernel": args.cpd_kernel,
        "khsic_landmarks": args.cpd_landmarks,
    }
    for name in ("n_lambdas", "n_epochs", "khsic_max_rows", "sweep_rank"):
        if options[name] is not None and options[name] < 1:
            raise ParameterError(f"--cpd-{name.replace('_', '-')} must be at least 1; got {options[name]}.")
    if options["khsic_landmarks"] is not None and options["khsic_landmarks"] < 2:
        raise ParameterError(f"--cpd-landmarks must be at least 2; got {options['khsic_landmarks']}.")
    if options["tol"] is not None and not options["tol"] >= 0:
        raise ParameterError(f"--cpd-tol must be a number >= 0; got {options['tol']}.")
    return {key: value for key, value in options.items() if value is not None}


def _fs_options(args) -> dict:
    """Feature-selection options from the command line (``AuditConfig.options["fs"]``)."""
    fs = {}
    if args.clusters is not None:
        if args.clusters < 2:
            raise ParameterError(f"--clusters must be at least 2, got {args.clusters}.")
        fs["n_clusters"] = args.clusters
    if args.kmeans_runs is not None:
        if args.kmeans_runs < 1:
            raise ParameterError(f"--kmeans-runs must be at least 1, got {args.kmeans_runs}.")
        fs["kmeans_runs"] = args.kmeans_runs
    return fs


def config_from_args(args) -> AuditConfig:
    cpd = _cpd_options(args)
    return AuditConfig(
        methods=_split(args.methods) or ["pca"],
        ranks=parse_ranks(args.ranks) if args.ranks else None,
        variants=args.variants,
        random_state=args.seed,
        leakage_classifier=args.leakage_classifier,
        sdp_max_features=args.sdp_max_features,
        options={name: given for name, given in (("nmf", _nmf_options(args)), ("fs", _fs_options(args)), ("cpd", cpd)) if given},
    )


def _print_summary(result, out) -> None:
    from .findings import findings
    from .report import summary_table

    data = result.data
    groups = ", ".join(f"{g} ({n})" for g, n in data["group_sizes"].items())
    print(f"{data['name']}: {data['rows']} rows, {data['features']} features; groups: {groups}", file=out)
    for method in dict.fromkeys(result.records.method):
        table = summary_table(result, method)
        keep = [
            c
            for c in (
                "variant", "rank", "max_loss", "loss_gap", "variance_explained", "max_rel_loss", "rel_loss_gap",
                "total_rel_error", "acc", "nmi", "balance", "proportion", "alignment_protected", "lam", "residual_fit",
                "orthogonality", "nkhsic", "unfairness", "unfairness_balanced", "effective_rank", "seconds",
            )
            if c in table.columns
        ]
        print(f"\n[{method}]", file=out)
        print(table[keep].to_string(index=False, float_format=lambda v: f"{v:.4g}"), file=out)
        _print_details(result, method, out)
    for method, sentences in findings(result).items():
        for sentence in sentences:
            print(f"finding ({method}): {sentence}", file=out)
    for skip in result.skipped:
        print(f"skipped {skip['method']}/{skip['variant']}: {skip['reason']}", file=out)
    for warning in result.warnings:
        print(f"warning: {warning}", file=out)


def _print_details(result, method: str, out, limit: int = 12) -> None:
    """One line per fit detail (e.g. the selected features), long lists shortened."""
    from .report import details_rows

    for variant, rank, key, text in details_rows(result, method, titles=False, limit=limit):
        print(f"{key} ({method}/{variant}, rank {rank}): {text}", file=out)


def _run_audit(args) -> int:
    from .report import write_reports

    data = load_from_args(args)
    config = config_from_args(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # warnings are collected in the result and printed below
        result = run_audit(data, config)
    written = write_reports(result, html_path=args.html, json_path=args.json, csv_path=args.csv)
    if not args.quiet:
        _print_summary(result, sys.stdout)
        for path in written:
            print(f"wrote {path}")
    return 0


def _run_columns(args) -> int:
    table = read_table(args.data, skip_rows=args.skip_rows, header=False if args.no_header else None, max_mb=args.max_mb)
    print(f"{table.name}: {len(table.frame)} rows, {len(table.columns)} columns, encoding {table.encoding}, delimiter {table.delimiter!r}")
    print(table.describe().to_string(index=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "audit":
            return _run_audit(args)
        return _run_columns(args)
    except (FairAuditError, _UsageError) as exc:
        text = exc.render("cli") if isinstance(exc, FairAuditError) else str(exc)
        print(f"fairaudit: error: {' '.join(text.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        print("fairaudit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("FAIRAUDIT_DEBUG"):
            raise
        print(
            f"fairaudit: unexpected error (a bug in fairaudit, please report it): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())} — rerun with FAIRAUDIT_DEBUG=1 for the traceback",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
