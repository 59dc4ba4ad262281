"""Command line: ``python -m fairaudit audit DATA.csv --sensitive COL ...``.

Exit status 0 on success; 2 with one line on stderr for anything the user can cause (never a
traceback); 1 only for a bug in fairaudit. ``python -m fairaudit columns DATA.csv`` lists a file's
columns and how they would be read.

Before any work the command checks what it will write: an output path that is the input (or
another output, a folder, a device) is refused, and every output's folder must accept a file. The
audit then reports its progress on stderr, per family and fit, with the elapsed time (``--quiet``
silences it); once its pace is measured on this machine (the fits as they go, then the first of
each family's bootstrap replicates) it says how long the audit will take, and past
:data:`REFUSE_SECONDS` it stops unless ``--allow-slow``. Outputs are written whole or not at all.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import io
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .audit import FAMILIES, AuditConfig, run_audit
from .data import (
    DEFAULT_MAX_MB,
    MISSING_POLICIES,
    NONNEGATIVE_POLICIES,
    SCALINGS,
    check_path,
    parse_merge,
    prepare,
    prepare_tensor,
    read_table,
)
from .errors import FairAuditError, ParameterError
from .families import FAMILY_TITLES
from .formatting import duration, plural
from .metrics import LEAKAGE_CLASSIFIERS
from .vocabulary import render, term

MAX_RANKS = 1000
"""At most this many ranks in one ``--ranks`` (``1:1000000000`` is a typo, not a plan)."""

SEED_LIMIT = 2**32
"""Seeds are 0 … 2³² − 1 (what NumPy's and scikit-learn's generators accept)."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with status 2, and shows help texts that name
    a family's constant (:class:`_Help`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise _UsageError(f"{message} (see --help)")


class _UsageError(Exception):
    pass


# ---------------------------------------------------------------- the families' flags, declared without their packages
# The audit command's parser declares every family's flags, whose choices and default texts the
# families own (one set of defaults). Importing the NMF, feature-selection and CP packages to read
# them cost a PCA audit 0.07–0.13 s and 8 MiB; instead a flag names the constant, and argparse
# imports it when it first needs it: a value checked against its choices (only when the flag is
# given), the help shown. (argparse lists the choices of an argument added to a parser, not to an
# argument group, when it is declared: the family flags are in groups.)
def _constant(path: str):
    """The family constant ``path`` ("nmf.audit.STOPPING_RULES": module ``fairaudit.nmf.audit``)."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


class _Choices(Sequence):
    """A flag's ``choices``: the family constant ``path`` (:func:`_constant`), imported on first use."""

    def __init__(self, path: str):
        self.path = path

    @functools.cached_property
    def values(self) -> tuple:
        return tuple(_constant(self.path))

    def __getitem__(self, index):
        return self.values[index]

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return repr(self.values)


class _Help(str):
    """A help text that names a family's constant: ``make()`` writes it when the help is shown
    (:class:`_HelpFormatter`); the string itself is only a placeholder."""

    def __new__(cls, make: Callable[[], str]):
        text = super().__new__(cls, "(written when shown)")
        text.make = make
        return text


class _HelpFormatter(argparse.HelpFormatter):
    def _get_help_string(self, action):
        return action.help.make() if isinstance(action.help, _Help) else action.help


def parse_ranks(text: str) -> list[int]:
    """``"1:10"`` (inclusive), ``"2,4,8"``, ``"1:21:2"`` or a single number; at most
    :data:`MAX_RANKS` of them."""
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
                raise ValueError
            ranks = range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1)
        else:
            ranks = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ParameterError(f"{term('ranks', text)} is not understood; write 1:10, 2,4,8 or 1:21:2.") from None
    if len(ranks) > MAX_RANKS:
        raise ParameterError(
            f"{term('ranks', text)} asks for {len(ranks):,} ranks; give at most {MAX_RANKS} (e.g. 1:10 or 2,4,8)."
        )
    return list(ranks)


def _pairs(items: list[str] | None, option: str, cast) -> dict:
    """``COLUMN=NUMBER`` items of ``--binarize``/``--bins`` (``option`` is the vocabulary name)."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError(f"{term(option)} expects COLUMN=VALUE, got {item!r}.")
        column, value = item.rsplit("=", 1)
        try:
            out[column.strip()] = cast(value)
        except ValueError:
            raise ParameterError(f"{term(option)} {item!r}: {value!r} is not a number.") from None
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
    audit.add_argument("data", help="CSV file (UTF-8, UTF-8 with BOM or Windows-1252; comma, semicolon, tab or | separated) or Parquet file")
    _add_input_options(audit)
    runs = audit.add_argument_group("what to run")
    runs.add_argument("--methods", default="pca", help=f"comma-separated families: {', '.join(FAMILIES)} (default pca)")
    runs.add_argument("--ranks", default=None, help="ranks to sweep: 1:10, 2,4,8 or 1:21:2 (default 1 … min(10, features))")
    runs.add_argument("--variants", default="all",
                      help="all (each family's default set, as in the dashboard; fair_sdp and fair_mw run only when named), "
                      "or names such as vanilla,fair_eig (optionally qualified: pca:fair_sdp)")
    runs.add_argument("--seed", type=int, default=AuditConfig.random_state, help=f"random seed, 0 to {SEED_LIMIT - 1} (default 0)")
    runs.add_argument("--leakage-classifier", default=AuditConfig.leakage_classifier, choices=LEAKAGE_CLASSIFIERS,
                      help="classifier behind the unfairness (leakage) metrics (default qda)")
    runs.add_argument("--leace", action="store_true",
                      help="also audit every representation (yours too) after LEACE, which erases the group's linear "
                      "information, as <variant>+leace: its leakage and what erasure cost")
    runs.add_argument("--subgroups", action="store_true",
                      help="also search every subgroup of the sensitive columns (one value, or values of several: "
                      "sex=f, sex=f & race=black) for the one vanilla PCA serves worst, the search's comparisons corrected")
    runs.add_argument("--sdp-max-features", type=int, default=AuditConfig.sdp_max_features,
                      help=f"skip the SDP (fair_sdp) above this many features (default {AuditConfig.sdp_max_features})")
    runs.add_argument("--mw-max-features", type=int, default=AuditConfig.mw_max_features,
                      help=f"skip multiplicative weights (fair_mw) above this many features (default {AuditConfig.mw_max_features})")
    runs.add_argument("--allow-slow", action="store_true",
                      help=f"run an audit expected to take more than {REFUSE_SECONDS // 60} minutes instead of stopping before it")
    runs.add_argument("--clusters", type=int, default=None, metavar="K",
                      help="fs: k-means clusters (default: the --label's number of classes, else the number of groups)")
    runs.add_argument("--kmeans-runs", type=int, default=None, metavar="N",
                      help=_Help(lambda: f"fs: k-means runs per selection, reported as mean and std "
                                         f"(default {_constant('fs.audit.KMEANS_RUNS')}, as the FUFS paper)"))
    _add_uncertainty_options(audit)
    _add_pca_options(audit)
    _add_nmf_options(audit)
    _add_fs_options(audit)
    _add_cpd_options(audit)
    outputs = audit.add_argument_group("outputs")
    outputs.add_argument("--html", help="write a self-contained HTML report here")
    outputs.add_argument("--json", help="write the JSON result here")
    outputs.add_argument("--csv", help="write the tidy records as CSV here")
    outputs.add_argument("--quiet", action="store_true", help="print nothing on success (no summary, no progress on stderr)")
    outputs.add_argument("-v", "--verbose", action="store_true",
                         help="print everything, not one line per finding: each family's per-rank table and fit details, "
                         "every finding's sentence and details (the other pairs of groups, the groups too small to judge, the "
                         "tests), the verdict rules, and the numbers without an interval and why")
    outputs.add_argument("--card", metavar="CARD.md",
                         help="write an audit card here (Markdown: data hash, configuration, versions, verdicts, rules) and its "
                              "JSON beside it (CARD.json), to sit beside a model card")
    gate = audit.add_argument_group("a verdict a pipeline can act on")
    gate.add_argument("--fail-on", metavar="WHAT", type=_fail_on,
                      help=_Help(lambda: "exit with status " + str(_constant("card.GATE_EXIT")) + " (after writing every output) when "
                                         "a finding of this kind is present: " + "; ".join(f"{k}: {v}" for k, v in _fail_choices().items())
                                         + " (comma-separated)"))
    gate.add_argument("--fail-variants", metavar="NAMES", type=_split,
                      help="with --fail-on: only findings about these variants count (e.g. fair_eig, or yours); default every variant")
    _add_action_options(audit)
    _add_engine_options(audit)

    columns = commands.add_parser("columns", help="list a CSV file's columns", description="Show how a CSV file is read.")
    columns.add_argument("data")
    columns.add_argument("--skip-rows", type=int, default=0)
    columns.add_argument("--no-header", action="store_true")
    columns.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB)
    _add_action_commands(commands)
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
    columns.add_argument("--merge", action="append", metavar="COL=V1,V2:GROUP",
                         help="merge values of a sensitive column into one group; * stands for every value not listed "
                              "(repeat it: --merge EDUCATION=1,2:high --merge EDUCATION=*:low)")
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


def _add_uncertainty_options(parser: argparse.ArgumentParser) -> None:
    """Intervals, held-out rows and the verdicts' tolerance (defaults from the library)."""
    from .uncertainty import DEFAULT_BOOTSTRAP

    defaults = ", ".join(f"{method} {count}" for method, count in DEFAULT_BOOTSTRAP.items())
    trust = parser.add_argument_group("uncertainty and verdicts")
    trust.add_argument("--bootstrap", type=int, default=AuditConfig.bootstrap, metavar="N",
                       help=f"bootstrap replicates behind every interval; 0 turns the intervals off (default per family: {defaults})")
    trust.add_argument("--confidence", type=float, default=AuditConfig.confidence,
                       help=f"level of every interval; 1 − it is the leakage test's significance level (default {AuditConfig.confidence})")
    trust.add_argument("--holdout", type=float, default=AuditConfig.holdout, metavar="SHARE",
                       help="hold out this share of each group's rows (e.g. 0.3), fit on the rest and report every metric on them too (heldout_…)")
    trust.add_argument("--flag-ratio", type=float, default=AuditConfig.flag_ratio, metavar="RATIO",
                       help=f"tolerance of the gap verdict: of two groups, the worse served must fare this many times worse (default {AuditConfig.flag_ratio})")
    trust.add_argument("--reference", default=None, metavar="GROUP",
                       help="compare every group with this one (a group's name, e.g. white or race=white); default: the best-served "
                       "group large enough to judge, every pair of groups compared")
    trust.add_argument("--min-judged-rows", type=int, default=AuditConfig.min_judged_rows, metavar="N",
                       help=f"groups with fewer rows are reported as too small to judge, outside every test (default {AuditConfig.min_judged_rows})")
    trust.add_argument("--jobs", type=int, default=AuditConfig.n_jobs, metavar="N",
                       help="processes computing the bootstrap replicates side by side (default: one per core; 1: this process "
                            "alone); the numbers are the same whatever N")
    trust.add_argument("--time-budget", type=float, default=AuditConfig.time_budget, metavar="SECONDS",
                       help="stop starting bootstrap replicates once the audit has run this long; the intervals then say from how "
                            "many replicates they come (default: no limit)")


def _uncertainty_options(args) -> dict:
    """``AuditConfig`` keyword arguments from :func:`_add_uncertainty_options`' flags."""
    return {"bootstrap": args.bootstrap, "confidence": args.confidence, "holdout": args.holdout or None, "flag_ratio": args.flag_ratio,
            "reference": args.reference, "min_judged_rows": args.min_judged_rows, "n_jobs": args.jobs,
            "time_budget": args.time_budget}
def _add_pca_options(parser: argparse.ArgumentParser) -> None:
    pca = parser.add_argument_group("PCA (--methods pca)")
    pca.add_argument("--jevd-solver", choices=_Choices("pca.jevd.SOLVERS"), default=None,
                     help=_Help(lambda: f"JEVD-PCA's scheme (default {_constant('pca.audit.DEFAULT_OPTIONS')['jevd_solver']}: "
                                        "orthogonal Jacobi, stable; paper: Algorithm 1 as printed, which diverges on standardised "
                                        "data and converges slowly on raw features of unequal scales; damped: Algorithm 1 with a "
                                        "backtracking step)"))


def _pca_options(args) -> dict:
    return {"jevd_solver": args.jevd_solver} if args.jevd_solver else {}


def _add_nmf_options(parser: argparse.ArgumentParser) -> None:
    nmf = parser.add_argument_group("NMF (--methods nmf)")
    nmf.add_argument("--nonnegative", choices=NONNEGATIVE_POLICIES, default=None,
                     help="negative values: stop with a message (default), shift each feature by its minimum, or clip at 0")
    nmf.add_argument("--zero-rows", choices=_Choices("nmf.audit.ZERO_ROW_POLICIES"), default=None, help="all-zero rows: stop (default) or drop them")
    nmf.add_argument("--nmf-scaling", choices=_Choices("nmf.audit.NMF_SCALINGS"), default=None,
                     help="feature scaling for NMF (default unit_norm, the paper's; --scaling is for PCA)")
    nmf.add_argument("--nmf-estimates", type=int, default=None, help="T: NMF runs per group averaged into E_l (default 5)")
    nmf.add_argument("--nmf-solver", choices=_Choices("nmf._standard.SOLVERS"), default=None,
                     help="standard NMF and E_l solver: mu (default, the paper's) or cd (coordinate descent, tighter E_l)")
    nmf.add_argument("--nmf-stopping", choices=_Choices("nmf.audit.STOPPING_RULES"), default=None,
                     help="stopping rule of the group NMFs behind E_l with --nmf-solver mu: eq10 (default, the paper's) or window")
    nmf.add_argument("--fair-nmf-stopping", choices=_Choices("nmf.audit.FAIR_STOPPING_RULES"), default=None,
                     help="stopping rule of Fairer-NMF, and of the standard NMF it is compared with: window (default; eq10 "
                     "stops MU on plateaus), eq10 (the paper's) or authors (the authors' code: the change of the relative "
                     "losses, MU weights from 1/L; it reproduces their saved results, up to 1,000,000 iterations)")
    nmf.add_argument("--fair-nmf-weights", choices=_Choices("nmf.audit.MU_WEIGHTS"), default=None,
                     help="Fairer-NMF (MU) H-step weights: squared (default, Algorithm 3) or gradient (ours)")
    nmf.add_argument("--fair-nmf-init", choices=_Choices("nmf.audit.AUDIT_INITS"), default=None,
                     help="Fairer-NMF start: nmf (default: the standard NMF of the same rank) or random (the paper's)")
    nmf.add_argument("--fair-nmf-keep-best", action=argparse.BooleanOptionalAction, default=None,
                     help="return the Fairer-NMF iterate with the smallest largest loss (default: the last one, the paper's)")
    nmf.add_argument("--nmf-tol", type=float, default=None, help="stopping tolerance (default 1e-4, eq. (10)'s)")
    nmf.add_argument("--nmf-max-iter", type=int, default=None, help="Fairer-NMF iteration cap (default 5000 MU, 1000000 MU with --fair-nmf-stopping authors, 200 AM)")
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
        binarize=_pairs(args.binarize, "binarize", float),
        bins=_pairs(args.bins, "bins", int),
        merge=parse_merge(args.merge),
        missing=args.missing,
        reuse_table=True,  # the table is not used again: the matrix may take over its memory
        scaling=_scaling(args),
        min_group_size=args.min_group_size,
        small_groups="drop" if args.drop_small_groups else "error",
    )


def _load_tensor(args, table):
    if not args.tensor_index or not args.tensor_value:
        raise ParameterError(
            f"a long-format tensor needs both {term('tensor_index', 'ENTITY,MODE2,…')} and {term('tensor_value', 'COL')}."
        )
    for option, given in (("features", args.features), ("label", args.label), ("one_hot", args.one_hot), ("ignore", args.ignore)):
        if given:
            raise ParameterError(
                f"{term(option)} does not apply to a long-format tensor (its cells come from {term('tensor_value')})."
            )
    if args.missing != "error":
        raise ParameterError(
            f"{term('missing')} does not apply to a long-format tensor; absent cells are filled with {term('tensor_fill', 'VALUE')}."
        )
    return prepare_tensor(
        table,
        index=_split(args.tensor_index),
        value=args.tensor_value,
        sensitive=args.sensitive,
        binarize=_pairs(args.binarize, "binarize", float),
        bins=_pairs(args.bins, "bins", int),
        merge=parse_merge(args.merge),
        fill=args.tensor_fill,
        scaling=_scaling(args, default="none"),
        min_group_size=args.min_group_size,
        small_groups="drop" if args.drop_small_groups else "error",
    )


def _add_cpd_options(audit) -> None:
    """The CP family's flags (``AuditConfig.options["cpd"]``; read back by :func:`_cpd_options`)."""
    cpd = audit.add_argument_group("CP tensor decomposition (--methods cpd)")
    cpd.add_argument("--cpd-formulation", default=None, choices=_Choices("cpd.estimator.FORMULATIONS"),
                     help="fairaudit (default: scale-free penalties, median-heuristic γ, λ scaled to the data, fast) or paper "
                     "(Kim & Gittens' Algorithm 1 as printed, with the paper's λ values; slow)")
    cpd.add_argument("--cpd-classifier", default=None, choices=LEAKAGE_CLASSIFIERS,
                     help="leakage classifier for CP embeddings (default qda, fast; mlp = the paper's 1,500-unit network, 50–100× slower per fit)")
    cpd.add_argument("--cpd-lambda", default=None, metavar="frontier|reference|paper|VALUE",
                     help="each fair method's default λ: frontier (default for --cpd-formulation fairaudit: the smallest λ on the "
                     "sweep that removes the leakage it can, keeping 90 %% of the fit), reference (λ_ref), paper (Kim & Gittens' "
                     "Fig. 2b; default for --cpd-formulation paper) or a number")
    cpd.add_argument("--cpd-lambdas", default=None, help="λ values for every fair method, e.g. 0.1,1,10 (default: a 10-point grid scaled to the data)")
    cpd.add_argument("--cpd-points", type=int, default=None, help="points of the default λ grid (default 10)")
    cpd.add_argument("--cpd-sweep-rank", type=int, default=None, help="CP rank of the λ sweep (default: the largest audited rank below the one from which CP can reproduce the data)")
    cpd.add_argument("--cpd-no-sweep", action="store_true", help="skip the λ sweep (fair methods at their default λ only)")
    cpd.add_argument("--cpd-epochs", type=int, default=None, help="largest number of epochs per fit (default 200)")
    cpd.add_argument("--cpd-khsic-max-rows", type=int, default=None, help="skip KHSIC above this many entities (default 5000)")
    cpd.add_argument("--cpd-tol", type=float, default=None, help="stop a fit when the objective changes by less than this, relative, over an epoch (default 1e-4)")
    cpd.add_argument("--cpd-kernel", default=None, choices=_Choices("cpd.estimator.KERNELS"),
                     help="KHSIC's RBF kernel: exact, Nyström, or auto (default: exact up to 2000 entities, Nyström above)")
    cpd.add_argument("--cpd-landmarks", type=int, default=None,
                     help=_Help(lambda: f"landmark entities of the Nyström kernel (default {_constant('cpd._kernels.NYSTROM_LANDMARKS')})"))
    cpd.add_argument("--cpd-jobs", type=int, default=None, metavar="N",
                     help="worker threads for the fair fits (default 2: two fits side by side on two cores)")


def _cpd_options(args) -> dict:
    lambdas = None
    if args.cpd_lambdas:
        try:
            lambdas = [float(v) for v in _split(args.cpd_lambdas)]
        except ValueError:
            raise ParameterError(f"{term('cpd_lambdas', args.cpd_lambdas)} is not a list of numbers such as 0.1,1,10.") from None
    options = {
        "formulation": args.cpd_formulation,
        "lambda_choice": args.cpd_lambda,
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
        "n_jobs": args.cpd_jobs,
    }
    for name, option in (("n_lambdas", "cpd_points"), ("n_epochs", "cpd_epochs"), ("khsic_max_rows", "cpd_khsic_max_rows"),
                         ("sweep_rank", "cpd_sweep_rank"), ("n_jobs", "cpd_jobs")):
        if options[name] is not None and options[name] < 1:
            raise ParameterError(f"{term(option)} must be at least 1; got {options[name]}.")
    if options["khsic_landmarks"] is not None and options["khsic_landmarks"] < 2:
        raise ParameterError(f"{term('cpd_landmarks')} must be at least 2; got {options['khsic_landmarks']}.")
    if options["tol"] is not None and not options["tol"] >= 0:
        raise ParameterError(f"{term('cpd_tol')} must be a number >= 0; got {options['tol']}.")
    return {key: value for key, value in options.items() if value is not None}


def _add_fs_options(parser: argparse.ArgumentParser) -> None:
    """FUFS's options (``--methods fs``); ``--clusters`` and ``--kmeans-runs`` are in "what to run"."""
    fs = parser.add_argument_group("feature selection (--methods fs)")
    fs.add_argument("--fufs-formulation", default=None, choices=_Choices("fs.fufs.FORMULATIONS"),
                    help="FUFS as printed (paper: Xing et al. 2021 eq. 6, the default) or our normalised-alignment version (alignment)")
    fs.add_argument("--fufs-alpha", type=float, default=None, help="FUFS's fairness weight α (default 1, the paper's CRIME/GOOGLE+ setting)")
    fs.add_argument("--fufs-beta", type=float, default=None, help="FUFS's ℓ1 sparsity weight β (paper formulation; default 0.1)")


def _fs_options(args) -> dict:
    """Feature-selection options from the command line (``AuditConfig.options["fs"]``)."""
    fs = {}
    if args.clusters is not None:
        if args.clusters < 2:
            raise ParameterError(f"{term('fs_clusters')} must be at least 2, got {args.clusters}.")
        fs["n_clusters"] = args.clusters
    if args.kmeans_runs is not None:
        if args.kmeans_runs < 1:
            raise ParameterError(f"{term('fs_kmeans_runs')} must be at least 1, got {args.kmeans_runs}.")
        fs["kmeans_runs"] = args.kmeans_runs
    if args.fufs_formulation is not None:
        fs["formulation"] = args.fufs_formulation
    for option, key, value in (("fs_alpha", "alpha", args.fufs_alpha), ("fs_beta", "beta", args.fufs_beta)):
        if value is not None:
            if not value >= 0:
                raise ParameterError(f"{term(option)} must be a number ≥ 0, got {value}.")
            fs[key] = value
    return fs


def config_from_args(args) -> AuditConfig:
    """The audit configuration the flags describe, checked (variants, seed, ranks) before any data
    is read."""
    if not 0 <= args.seed < SEED_LIMIT:
        raise ParameterError(f"{term('seed', args.seed)} is out of range; give a whole number from 0 to {SEED_LIMIT - 1}.")
    for option, value in (("sdp_max_features", args.sdp_max_features), ("mw_max_features", args.mw_max_features)):
        if value < 0:
            raise ParameterError(f"{term(option)} must be 0 or more; got {value}.")
    config = AuditConfig(
        methods=_split(args.methods) or ["pca"],
        ranks=parse_ranks(args.ranks) if args.ranks else None,
        variants=args.variants,
        random_state=args.seed,
        leakage_classifier=args.leakage_classifier,
        leace=args.leace,
        subgroups=args.subgroups,
        sdp_max_features=args.sdp_max_features,
        mw_max_features=args.mw_max_features,
        engine=args.engine,
        options={name: given for name, given in (("pca", _pca_options(args)), ("nmf", _nmf_options(args)), ("fs", _fs_options(args)), ("cpd", _cpd_options(args))) if given},
        **_uncertainty_options(args),
    )
    config.check_variants()
    return config


# ---------------------------------------------------------------- inputs and outputs
OUTPUT_FLAGS = (("html", "--html"), ("json", "--json"), ("csv", "--csv"), ("card", "--card"), ("card_json", "--card (its JSON)"))


def check_input(path: str) -> None:
    """The input must be an existing regular file: a folder, a FIFO or a device is refused before
    it is opened (the data boundary's check, :func:`fairaudit.data.check_path`)."""
    check_path(path)


INPUT_ARGUMENTS = ("data", "components", "embedding", "a", "b")
"""Arguments that name a file a command reads (every one is checked against every output)."""


def input_files(args) -> list[tuple[Path, str]]:
    """The files the command reads, each with what it is: the data, ``--components`` /
    ``--embedding``, the two reports of ``compare``, and ``transform``'s model (its ZIP, or the
    files of its folder)."""
    files = [(Path(value), "the input file" if name == "data" else "an input file")
             for name in INPUT_ARGUMENTS if (value := getattr(args, name, None))]
    model = getattr(args, "model", None)
    if model:
        from .modelfile import model_files

        parts = model_files(model)
        files += [(path, "the input model" if len(parts) == 1 else f"an input file of the model {model}") for path in parts]
    return files


def check_outputs(args, flags=OUTPUT_FLAGS, *, option: str = "output", export: bool = False) -> dict[str, Path]:
    """Every output the flags request (``export``: and the ``--export-model`` folder), checked
    before any work by the one rule of :func:`fairaudit.paths.check_outputs` (no output is an
    input or another output, and each can be written); ``{flag: path}`` of the files."""
    from .paths import Output
    from .paths import check_outputs as check

    outputs = [Output(flag, Path(value)) for attribute, flag in flags if (value := getattr(args, attribute, None)) and value != "-"]
    if export and args.export_model:
        outputs.append(Output("--export-model", Path(args.export_model), folder=True))
    check(input_files(args), outputs, option=option)
    return {output.flag: output.path for output in outputs if not output.folder}


# ---------------------------------------------------------------- how long it will take
REFUSE_SECONDS = 600
"""An audit measured to take longer stops (exit 2) unless ``--allow-slow``."""

FIT_PACE_FITS = 3
FIT_PACE_SECONDS = 10.0
"""A family's fits are judged by their pace once this many are done and this long has passed (the
first fits are the cheapest: low ranks)."""


class PaceGuard:
    """The ``run_audit`` progress callback's first step: stops the audit (a one-line error, exit 2)
    when the time it is measured to take exceeds :data:`REFUSE_SECONDS` without ``--allow-slow`` —
    from a family's fits as they go, then from the audit's announcement once the first replicates
    of every family are timed (``stage="announce"``). Measured on this machine, now: no model of
    another machine's speed."""

    def __init__(self, allow_slow: bool, then=None):
        self.allow_slow, self.then = allow_slow, then
        self.started = time.monotonic()

    def __call__(self, event: dict) -> None:
        if not self.allow_slow:
            self._check(event)
        if self.then is not None:
            self.then(event)

    def _check(self, event: dict) -> None:
        stage = event.get("stage")
        if stage == "announce":
            expected = float(event.get("expected_seconds") or 0.0)
            each = ", ".join(f"{m} {plural(int(f['replicates']), 'replicate')} of about {f['each']:.2g} s"
                             for m, f in event.get("families", {}).items() if f.get("each") is not None)
            self._refuse(expected, f"its bootstrap replicates timed on this machine now: {each}, {event.get('jobs', '')}")
        elif stage == "fit" and event.get("seconds_left") is not None:
            elapsed = time.monotonic() - self.started
            done, total = int(event.get("done", 0)), int(event.get("total", 0))
            if done >= FIT_PACE_FITS and elapsed >= FIT_PACE_SECONDS:
                self._refuse(elapsed + float(event["seconds_left"]),
                             f"{event.get('method')}'s first {done} of {total} fits took {elapsed:.0f} s on this machine now")

    def _refuse(self, seconds: float, why: str) -> None:
        if seconds > REFUSE_SECONDS:
            raise ParameterError(
                f"this audit would take roughly {duration(seconds)} ({why}); pass {term('allow_slow')} to run it anyway, "
                f"{term('time_budget', REFUSE_SECONDS)} to stop its intervals after {duration(REFUSE_SECONDS)}, or audit fewer "
                f"features ({term('features')}), ranks ({term('ranks')}) or families ({term('methods')})."
            )


# ---------------------------------------------------------------- progress on stderr
class ProgressReporter:
    """The ``run_audit`` progress callback of the CLI: a line per fit on stderr with the elapsed
    time (rewritten in place on a terminal; at most one line per ``interval`` seconds otherwise,
    plus each family's first and last fit), and a line when a family's numbers are in, and when
    its intervals are (every family's numbers come before any family's intervals)."""

    def __init__(self, stream, *, interval: float = 1.0):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = interval
        self.started = time.monotonic()
        self.method: str | None = None
        self.method_started = self.started
        self.last_written = -float("inf")
        self.last_event_time = self.started
        self.fits = 0
        self.intervals_to_come: set[str] = set()
        self._open_line = False

    def say(self, text: str) -> None:
        self.end_line()
        print(f"fairaudit: {text}", file=self.stream, flush=True)

    header: str | None = None
    """Said before the first fit's line."""

    def __call__(self, event: dict) -> None:
        if self.header:
            self.say(self.header)
            self.header = None
        if event.get("stage") == "announce":  # the replicates' pace is measured: how long the whole audit takes
            self.say(f"expect about {duration(float(event['expected_seconds']))} in all (bootstrap replicates timed on this "
                     f"machine now, {event.get('jobs', '')}); about {duration(event['expected_seconds'] - event['seconds'])} to go")
            return
        now = time.monotonic()
        method = event.get("method")
        if method != self.method:
            self.family_done(now)
            self.method, self.method_started = method, self.last_event_time
        self.last_event_time = now
        done, total = int(event.get("done", 0)), int(event.get("total", 0))
        stage = event.get("stage")
        if stage == "estimates":  # the point estimates are in; the intervals' replicates follow every family's numbers
            self.intervals_to_come.add(method)
            self.say(f"{method}: {self.fits} fits and their point estimates done in {now - self.method_started:.1f} s; "
                     f"{total} bootstrap replicates for the intervals follow")
            return
        if stage == "bootstrap":  # the intervals: one event per bootstrap replicate
            left = event.get("seconds_left")
            line = (f"[{now - self.started:7.1f} s] {method}: bootstrap replicate {done}/{total} (intervals"
                    + (f", about {left:.0f} s left)" if left is not None else ")"))
        elif stage == "bootstrap_pass":  # the dask engine: one more pass over the data gives every replicate's moments
            line = f"[{now - self.started:7.1f} s] {method}: reading the data again for the bootstrap replicates, {done}/{total} partitions (intervals)"
        else:
            self.fits = done
            line = f"[{now - self.started:7.1f} s] {method}: {done}/{total} fits ({event.get('variant')}, rank {event.get('rank')})"
        if self.tty:
            print("\r\033[K" + line, end="", file=self.stream, flush=True)
            self._open_line = True
        elif done in (0 if stage == "bootstrap_pass" else 1, total) or now - self.last_written >= self.interval:  # the pass: from its start
            print(line, file=self.stream, flush=True)
            self.last_written = now
        if stage == "bootstrap" and done == total:
            self.intervals_to_come.discard(method)
            self.say(f"{method} intervals done: {total} bootstrap replicates in {now - self.method_started:.1f} s "
                     f"(total {now - self.started:.1f} s)")
            self.method = None

    def family_done(self, now: float | None = None) -> None:
        """The line for the family whose fits just ended, unless its intervals are still to come."""
        if self.method is None or self.method in self.intervals_to_come:
            return
        now = now or time.monotonic()
        self.say(f"{self.method} done: {self.fits} fits in {now - self.method_started:.1f} s (total {now - self.started:.1f} s)")
        self.method = None

    def end_line(self) -> None:
        if self._open_line:
            print(file=self.stream, flush=True)
            self._open_line = False


# ---------------------------------------------------------------- the commands
def _print_summary(result, found: dict, out, verbose: bool = False) -> None:
    """The data accounting, then the answer: one line per finding (verdict, rank, groups, the number
    that decided it), the skipped variants and the real warnings; facts that are no warnings (the
    numbers without an interval, the details, the per-rank table, the rules) are counted on one
    ``notes`` line. ``verbose``: each family's per-rank table and fit details, every finding's
    sentence with its details, the verdict rules and every note, as before."""
    data = result.data
    groups = ", ".join(f"{g} ({n})" for g, n in data["group_sizes"].items())
    print(f"{data['name']}: {data['rows']} rows, {data['n_features']} features; groups: {groups}", file=out)
    _print_accounting(data, out)
    if data.get("engine"):
        print(f"engine: {data['engine']['text']}", file=out)
    if verbose:
        for method in dict.fromkeys(result.records.method):
            _print_table(result, method, out)
    _print_findings(result, found, out, verbose)
    for skip in result.skipped:
        print(f"skipped {skip['method']}/{skip['variant']}: {render(skip['reason'], 'cli')}", file=out)
    facts = _fact_notes(result)
    for warning in result.warnings:
        if verbose or warning not in facts:
            print(f"{'note' if warning in facts else 'warning'}: {render(warning, 'cli')}", file=out)
    if not verbose:
        _print_notes_line(result, found, facts, out)


def _print_table(result, method: str, out) -> None:
    """``method``'s per-rank table, which way each column is better, and its fit details (``--verbose``)."""
    from .formatting import number
    from .report import summary_table

    table = summary_table(result, method)
    keep = [
        c
        for c in (
            "variant", "rank", "max_loss", "loss_gap", "loss_ratio", "variance_explained", "max_rel_loss", "rel_loss_gap",
            "total_rel_error", "acc", "nmi", "balance", "relative_balance", "proportion", "alignment_protected", "lam",
            "residual_fit", "orthogonality", "nkhsic", "balanced_accuracy", "leakage_pvalue", "leace_distortion", "effective_rank", "seconds",
        )
        if c in table.columns
    ]
    print(f"\n[{method}]", file=out)
    print(table[keep].to_string(index=False, float_format=number), file=out)
    print(_directions(keep), file=out)
    _print_details(result, method, out)


def _fact_notes(result) -> set[str]:
    """The result's warnings that state facts, not problems: why a number has no interval."""
    from .audit import no_interval_warning

    return {no_interval_warning(method, what, reason) for method, summary in (result.uncertainty or {}).items()
            for what, reason in summary.get("not_bootstrapped", {}).items()}


def _print_notes_line(result, found: dict, facts: set[str], out) -> None:
    """One line counting what ``--verbose`` adds (nothing when it would add nothing)."""
    from .formatting import plural

    details = sum(len(f.details) for items in found.values() for f in items)
    parts = [plural(len(facts & set(result.warnings)), "number") + " without an interval, and why"] if facts & set(result.warnings) else []
    if details:
        parts.append(plural(details, "detail") + " of the findings")
    parts.append("the full finding sentences, the per-rank tables")
    if any(f.verdict != "info" for items in found.values() for f in items):
        parts.append("the verdict rules")
    print(f"notes: {'; '.join(parts)} — see --verbose (and the HTML and JSON reports)", file=out)


def _directions(columns) -> str:
    """“↓ better: max_loss, …; ↑ better: …” for a table's metric columns."""
    from .metrics import better

    lower = [c for c in columns if better(c) == "lower"]
    higher = [c for c in columns if better(c) == "higher"]
    parts = [f"↓ better: {', '.join(lower)}" if lower else "", f"↑ better: {', '.join(higher)}" if higher else ""]
    return "  (" + "; ".join(p for p in parts if p) + ")"


def _print_findings(result, found: dict, out, verbose: bool = False) -> None:
    """How the intervals were made (a line per family), then each finding on one line (verdict,
    family, variant, rank, groups, the number that decided it: :func:`fairaudit.summary.finding_line`)
    and, for several families, the audit summary; ``verbose``: each finding's sentence and details,
    and the verdict rules once per setting."""
    from .findings import verdict_rules
    from .formatting import level, number, plural
    from .report import start_spread_text, verdict_settings
    from .summary import audit_summary, finding_line

    said: dict[str, list[str]] = {}  # quiet: one line for the families whose intervals were made alike
    for method, summary in result.uncertainty.items():
        replicates = int(summary.get("replicates", 0))
        what = f"{plural(replicates, 'bootstrap replicate')} ({summary.get('why', '')})" if replicates else summary.get("why", "no intervals")
        if not verbose:
            what = f"{plural(replicates, 'bootstrap replicate')}" if replicates else f"none ({summary.get('why', '')})"
        took = (f"; {summary['seconds']:.1f} s, announced {summary['expected_seconds']:.1f} s, {summary.get('jobs', '')}"
                if verbose and replicates and summary.get("expected_seconds") is not None
                else f", {summary['seconds']:.1f} s" if replicates and summary.get("seconds") is not None else "")
        text = f"{level(summary.get('confidence', 0.95))}, {render(what, 'cli')}{took}"
        if not verbose:
            said.setdefault(text, []).append(method)
            continue
        print(f"intervals ({method}): {text}", file=out)
        if summary.get("start_spread"):
            print(f"between random starts ({method}): {render(start_spread_text(summary, marks=False), 'cli')}", file=out)
    for text, methods in said.items():
        print(f"intervals ({', '.join(methods)}): {text}", file=out)
    if not verbose:
        items = [f for fs in found.values() for f in fs]
        if items:
            print("findings (verdict, family, variant, rank, groups, the number that decided it):", file=out)
        for finding in items:
            print(render(finding_line(finding), "cli"), file=out)
        if len(found) > 1:
            for family in audit_summary(found):
                print(f"summary: {render(family.text(), 'cli')}", file=out)
        return
    for method, items in found.items():
        for finding in items:
            print(f"finding ({method}, {finding.verdict}): {render(str(finding), 'cli')}", file=out)
            for line in finding.details:
                print(f"  · {render(line, 'cli')}", file=out)
    if any(f.verdict != "info" for items in found.values() for f in items):
        settings = verdict_settings(result)
        for families, flag_ratio, confidence, min_rows in settings:  # once per setting (families audited apart may differ)
            which = f"{', '.join(families)}: " if len(settings) > 1 else ""
            print(f"verdict rules ({which}tolerance {number(flag_ratio)}, confidence {level(confidence)}, groups of at least "
                  f"{plural(min_rows, 'row')} judged):", file=out)
            for text in verdict_rules(flag_ratio, confidence, min_rows).values():
                print(f"  {render(text, 'cli')}", file=out)


def _print_accounting(data: dict, out) -> None:
    """Rows read and used per group, the features used, the columns left out and why, and the
    data warnings (e.g. a drop that removed a much larger share of one group)."""
    from .data import accounting_lines

    for line in accounting_lines(data):
        print(render(line, "cli"), file=out)
    for warning in data.get("warnings", []):
        print(f"data warning: {render(warning, 'cli')}", file=out)


def _print_details(result, method: str, out, limit: int = 12) -> None:
    """One line per fit detail (e.g. the selected features), long lists shortened, a detail
    shared by consecutive ranks on one line."""
    from .report import details_rows_by_ranks

    for variant, ranks, key, text in details_rows_by_ranks(result, method, titles=False, limit=limit):
        print(f"{key} ({method}/{variant}, {ranks}): {text}", file=out)


def _run_audit(args) -> int:
    with _engine_session(args) as session:  # the dask engine's cluster lives until the outputs are written
        return _audit(args, session)


def _audit(args, session) -> int:
    session.check(args)
    _check_action_inputs(args)
    _check_card(args)
    outputs = check_outputs(args, export=True)
    config = config_from_args(args)
    export_ranks = _export_ranks(args)
    if args.export_model:
        config.keep_models = True
    progress = None if args.quiet else ProgressReporter(sys.stderr)
    data = session.load(args, progress)
    yours = _read_yours(args, data)  # before the audit: a bad file or option stops at once
    if session.client is not None:  # the dask engine's cluster computes the replicates too
        config.scheduler = session.client
    if progress:  # printed with the first fit: a bad option found before any fit leaves one line on stderr
        progress.header = (
            f"auditing {data.source.get('name', args.data)} ({data.n_rows:,} rows × {data.n_features:,} features): "
            + ", ".join(FAMILY_TITLES.get(m, m) for m in config.methods)
            + (f" and your {yours.kind}" if yours is not None else "")
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are collected in the result and printed below
            watched = PaceGuard(args.allow_slow, progress)
            result = run_audit(data, config, progress=watched)
            if yours is not None:
                from .yours import attach, audit_yours

                result = attach(result, audit_yours(data, yours, config, progress=watched))
    except BaseException:
        if progress:
            progress.end_line()  # the error starts a line of its own
        raise
    if progress:
        progress.family_done()
    found = None
    if not args.quiet or outputs.get("--html") or outputs.get("--json") or args.card or args.fail_on:
        from .findings import findings

        found = findings(result)  # once, for the printed summary, the reports, the card and the gate
    written, models = _write_audit_outputs(args, result, data, outputs, export_ranks, found)
    if not args.quiet:
        _print_summary(result, found, sys.stdout, args.verbose)
        if yours is not None:
            from .yours import sentences

            for method in dict.fromkeys(result.records.method):
                for sentence in sentences(result, method):
                    print(f"yours ({method}): {sentence}")
        for path in written:
            print(f"wrote {path}")
        if models:
            print(f"wrote {len(models)} model(s) to {args.export_model} (index: {args.export_model}/models.json)")
    return _audit_gate(args, found)


def _fail_choices() -> dict[str, str]:
    from .card import FAIL_ON

    return FAIL_ON


def _fail_on(text: str) -> list[str]:
    chosen = _split(text) or []
    unknown = [c for c in chosen if c not in _fail_choices()]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(_fail_choices())} (comma-separated); got {text!r}")
    return chosen


def _check_card(args) -> None:
    """``--card CARD.md`` also writes ``CARD.json``: both are outputs, checked like the others."""
    args.card_json = None
    if getattr(args, "card", None):
        if not args.card.lower().endswith(".md"):
            raise ParameterError(f"--card {args.card}: give a Markdown file name ending in .md (its JSON is written beside it).")
        args.card_json = str(Path(args.card).with_suffix(".json"))


def _audit_gate(args, found) -> int:
    """``--fail-on``: the exit status of a pipeline's gate (0, or :data:`fairaudit.card.GATE_EXIT`
    with one line per failing finding on stderr)."""
    if not args.fail_on:
        return 0
    from .card import GATE_EXIT, gate_failures

    variants = args.fail_variants
    if variants:
        run = set(found and {f.variant for items in found.values() for f in items} or ())
        unknown = [v for v in variants if v not in run]
        if unknown:
            raise ParameterError(f"--fail-variants {','.join(unknown)}: no finding is about such a variant (findings are about "
                                 f"{', '.join(sorted(map(str, run))) or 'none'}).")
    failing = gate_failures(found or {}, args.fail_on, variants)
    for finding in failing:
        print(f"fairaudit: gate: {finding.verdict} ({finding.family} · {finding.variant}"
              f"{f' · rank {finding.rank}' if finding.rank is not None else ''}): {' '.join(render(finding.text, 'cli').split())}",
              file=sys.stderr)
    return GATE_EXIT if failing else 0


def _run_columns(args) -> int:
    check_input(args.data)
    table = read_table(args.data, skip_rows=args.skip_rows, header=False if args.no_header else None, max_mb=args.max_mb)
    read_as = f"encoding {table.encoding}, delimiter {table.delimiter!r}" if table.format == "csv" else table.format
    print(f"{table.name}: {table.n_rows} rows, {len(table.columns)} columns, {read_as}")
    print(table.describe().to_string(index=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        commands = {"audit": _run_audit, "columns": _run_columns, "transform": _run_transform, "compare": _run_compare}
        return commands[args.command](args)
    except (FairAuditError, _UsageError) as exc:
        text = exc.render("cli") if isinstance(exc, FairAuditError) else str(exc)
        print(f"fairaudit: error: {printable(' '.join(text.split()))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fairaudit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`… | head -1`): stop quietly, as a program SIGPIPE ends
        _discard_output()
        return 141
    except MemoryError:
        advice = f"audit fewer features ({term('features')}), ranks ({term('ranks')}) or families ({term('methods')})"
        print(f"fairaudit: error: not enough memory for this audit; {render(advice, 'cli')}, or use a machine with more "
              "memory.", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("FAIRAUDIT_DEBUG"):
            raise
        print(
            f"fairaudit: unexpected error (a bug in fairaudit, please report it): {type(exc).__name__}: "
            f"{' '.join(str(exc).split())} — rerun with FAIRAUDIT_DEBUG=1 for the traceback",
            file=sys.stderr,
        )
        return 1


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text) -> str:
    """``text`` safe for a terminal: control characters (an escape sequence in a file's text could
    move the cursor, recolour or rewrite what is shown) and bidirectional overrides are written as
    escapes (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), str(text))


def _say(line: str) -> None:
    """Print a line that quotes what a file holds (a model's words, a report's values)."""
    print(printable(line))


def _discard_output() -> None:
    """Point standard output and error at the null device: what Python still holds for a closed
    pipe is dropped at exit instead of raising again (the ``signal`` documentation's recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


# ---------------------------------------------------------------------------- from audit to action
def _add_action_options(audit: argparse.ArgumentParser) -> None:
    action = audit.add_argument_group("take the result further")
    action.add_argument("--export-model", metavar="DIR",
                        help="write every fitted model (manifest.json + arrays.npz, no pickle) to DIR/<method>-<variant>-rank<r>/")
    action.add_argument("--export-rank", metavar="RANKS", help="export only these ranks (1:3, 2,4; default every audited rank)")
    yours = action.add_mutually_exclusive_group()
    yours.add_argument("--components", metavar="FILE",
                       help="audit your own components matrix (rank × features CSV with the features as header, or .npy) as variant 'yours'")
    yours.add_argument("--embedding", metavar="FILE",
                       help="audit your own embeddings (one row per audited data row) as variant 'yours': MMD² and leakage")


def _count(text: str) -> int:
    """argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"give a whole number, 0 or more (got {text!r})")
    return value


def _add_action_commands(commands) -> None:
    transform = commands.add_parser(
        "transform", help="apply an exported model to new rows",
        description="Apply a model written by --export-model to the rows of a CSV file; the file is only read.",
    )
    transform.add_argument("model", help="a model directory written by --export-model (holds manifest.json)")
    transform.add_argument("data", help="CSV file with the model's feature columns (other columns are ignored)")
    transform.add_argument("--out", required=True, help="output CSV (- for standard output); never the input file")
    transform.add_argument("--id", dest="id_column", metavar="COL", help="copy this column into the output (default: the file line of each row)")
    transform.add_argument("--missing", choices=("error", "drop"), default="error",
                           help="rows with a missing feature cell: stop and list them (default) or leave them out")
    transform.add_argument("--with-error", action="store_true", help="add each row's reconstruction error (PCA, NMF, CP models)")
    transform.add_argument("--skip-rows", type=int, default=0, help="lines to skip before the header")
    transform.add_argument("--no-header", action="store_true", help="the first line is data")
    transform.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB, help=f"size limit in MB (default {DEFAULT_MAX_MB})")
    transform.add_argument("--quiet", action="store_true", help="print nothing on success (no summary, no progress on stderr)")

    compare = commands.add_parser(
        "compare", help="compare two saved JSON reports",
        description="Say per metric and group what changed between two audits (JSON reports written by --json).",
    )
    compare.add_argument("a", help="the first JSON report (e.g. before)")
    compare.add_argument("b", help="the second JSON report (e.g. after)")
    compare.add_argument("--names", metavar="A,B", help="what to call the two audits (default: their file names)")
    compare.add_argument("--html", help="write the comparison as a self-contained HTML report here")
    compare.add_argument("--json", help="write the comparison as JSON here")
    compare.add_argument("--csv", help="write the matched values (one row per record key) as CSV here")
    compare.add_argument("--top", type=_count, default=10, help="changes to print (default 10)")
    compare.add_argument("--quiet", action="store_true", help="print nothing on success (no summary, no progress on stderr)")
    compare.add_argument("--fail-on", metavar="regression", choices=["regression"],
                         help=_Help(lambda: "exit with status " + str(_constant("card.GATE_EXIT")) + " (after writing every output) "
                                            "when a verdict got worse for the groups from the first audit to the second"))


def _read_yours(args, data):
    """Your components or embeddings (``--components``/``--embedding``), or None (without them the
    audit does not import :mod:`fairaudit.yours`, which imports the NMF and CP families)."""
    if not (args.components or args.embedding):
        return None
    from .yours import read_components, read_embedding

    if args.components:
        return read_components(args.components, data, max_mb=args.max_mb)
    return read_embedding(args.embedding, data, max_mb=args.max_mb)


def _check_action_inputs(args) -> None:
    """``--components``/``--embedding`` name existing regular files, like the data."""
    for given in (args.components, args.embedding):
        if given:
            check_input(given)


def _export_ranks(args) -> list[int] | None:
    """The ranks ``--export-rank`` names (checked before the audit runs)."""
    if args.export_rank and not args.export_model:
        raise ParameterError(f"{term('export_rank')} chooses which models {term('keep_models', True)} writes; give both.")
    if not args.export_rank:
        return None
    try:
        return parse_ranks(args.export_rank)
    except ParameterError:
        raise ParameterError(f"{term('export_rank', args.export_rank)} is not understood; write 3, 2,4 or 1:3.") from None


def _write_audit_outputs(args, result, data, outputs: dict[str, Path], export_ranks, found=None) -> tuple[list[Path], list[Path]]:
    """The reports (``found``: the findings, if already worked out), then the models: all or
    nothing (a failed export removes the reports it follows; each writer removes its own partial
    files)."""
    from .report import write_reports

    try:
        written = write_reports(
            result, html_path=outputs.get("--html"), json_path=outputs.get("--json"), csv_path=outputs.get("--csv"),
            interface="cli", found=found,
        )
        if outputs.get("--card"):
            written += _write_card(result, found, outputs["--card"], outputs["--card (its JSON)"], written)
    except OSError as exc:  # e.g. the disk filled up during the audit: nothing half-written is left
        raise ParameterError(f"{exc.filename or 'an output'} could not be written ({exc.strerror}); nothing was written.") from None
    if not args.export_model:
        return written, []
    from .models import export_models

    try:
        models = export_models(result, data, args.export_model, ranks=export_ranks)
    except BaseException as exc:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ParameterError(
                f"{exc.filename or args.export_model} could not be written ({exc.strerror}); nothing was written."
            ) from None
        raise
    return written, models


def _write_card(result, found, markdown: Path, as_json: Path, written: list[Path]) -> list[Path]:
    """The audit card as Markdown and JSON (all or nothing with the reports already ``written``)."""
    import json

    from .card import audit_card, card_markdown
    from .report import write_outputs

    card = audit_card(result, found, interface="cli")
    try:
        return write_outputs(card, ((markdown, card_markdown), (as_json, lambda c: json.dumps(c, indent=1, ensure_ascii=False, default=str))))
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def _run_transform(args) -> int:
    from .models import load_model, transform_table
    from .report import spreadsheet_safe, write_outputs

    check_input(args.data)
    outputs = check_outputs(args, (("out", "--out"),), option="out")
    model = load_model(args.model)
    table = read_table(args.data, skip_rows=args.skip_rows, header=False if args.no_header else None, max_mb=args.max_mb)
    frame, rows = transform_table(model, table, id_column=args.id_column, missing=args.missing, with_error=args.with_error)
    text = spreadsheet_safe(frame).to_csv(index=False)  # an ID column holds the user's text
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = outputs["--out"]
    try:
        write_outputs(text, ((out, str),))
    except OSError as exc:
        raise ParameterError(f"{exc.filename or out} could not be written ({exc.strerror}); nothing was written.") from None
    if not args.quiet:
        _say(f"model: {model.describe()}")
        _say(f"{table.name}: {table.n_rows} rows read, {len(frame)} transformed"
            + (f"; ignored columns: {', '.join(rows.unused)}" if rows.unused else ""))
        if rows.encoded:
            _say(f"one-hot indicators rebuilt: {', '.join(rows.encoded)}")
        for line in rows.log:
            _say(f"note: {render(line, 'cli')}")
        for line in model.manifest.get("notes", []):  # the model file's own words: printed as they are, never rendered
            _say(f"note: {line}")
        _say(f"wrote {out} ({len(frame)} rows × {frame.shape[1]} columns)")
    return 0


def _run_compare(args) -> int:
    from .compare import compare_files, write_comparison

    names = None
    if args.names:
        names = tuple(_split(args.names) or [])
        if len(names) != 2:
            raise ParameterError(f"{term('compare_names', 'before,after')} takes two names separated by a comma; got {args.names!r}.")
    for given in (args.a, args.b):
        check_input(given)
    outputs = check_outputs(args)
    comparison = compare_files(args.a, args.b, names=names)
    try:
        written = write_comparison(comparison, html_path=outputs.get("--html"), json_path=outputs.get("--json"),
                                   csv_path=outputs.get("--csv"))
    except OSError as exc:
        raise ParameterError(f"{exc.filename or 'an output'} could not be written ({exc.strerror}); nothing was written.") from None
    if not args.quiet:
        for line in comparison.summary():
            _say(line)
        for difference in comparison.differences[:12]:
            _say(f"input {difference['what']}: {difference['a']} → {difference['b']}")
        if len(comparison.differences) > 12:
            print(f"… {len(comparison.differences) - 12} more input differences (all in --html or --json)")
        for row in comparison.largest_changes(args.top).itertuples(index=False):
            interval = {True: ", beyond the intervals", False: ", within the intervals"}.get(row.beyond, "")
            relative = f" ({100 * row.relative:+.1f} %)" if row.relative == row.relative else ""
            _say(f"{row.method}/{row.variant} rank {row.rank} {row.metric}{f' [{row.group}]' if row.group else ''}: "
                 f"{row.a:.4g} → {row.b:.4g}{relative}, {row.judged}{interval}")
        for path in written:
            _say(f"wrote {path}")
    if args.fail_on:
        from .card import GATE_EXIT, regressions

        worse = regressions(comparison)
        for verdict in worse:
            print(printable(f"fairaudit: gate: regression: {verdict['sentence']}"), file=sys.stderr)
        return GATE_EXIT if worse else 0
    return 0



# ---------------------------------------------------------------------------- engines
DASK_REFUSED = (
    ("tensor_index", "tensor_index", "a long-format tensor is assembled in memory"),
    ("tensor_value", "tensor_value", "a long-format tensor is assembled in memory"),
    ("one_hot", "one_hot", "the levels of every partition are needed before the first row is used"),
    ("bins", "bins", "exact quantiles need every partition first"),
    ("export_model", "keep_models", "models are exported from in-memory data"),
    ("components", "components", "your representation is audited on in-memory data"),
    ("embedding", "embedding", "your representation is audited on in-memory data"),
)
"""Flags the dask engine refuses (attribute, vocabulary name, why), before any work."""


def _add_engine_options(audit: argparse.ArgumentParser) -> None:
    """``--engine`` and the dask engine's cluster (``AuditConfig.engine``; :mod:`fairaudit.engine`)."""
    engine = audit.add_argument_group("engine (data larger than memory: pip install 'fairaudit[dask]')")
    engine.add_argument("--engine", choices=("local", "dask"), default=AuditConfig.engine,
                        help="local (default): read the file into memory; dask: read CSV/Parquet partitions (a path, a glob, a "
                             "folder or an fsspec URL such as s3://bucket/data/*.parquet) on a dask cluster — the PCA family "
                             "from group moments of every row, leakage, RBF MMD² and the other families on a stratified sample")
    engine.add_argument("--scheduler", metavar="ADDRESS", help="with --engine dask: an existing cluster's scheduler (tcp://host:8786); "
                        "default: start a local cluster of worker processes")
    engine.add_argument("--workers", type=int, default=None, metavar="N",
                        help="with --engine dask and no --scheduler: worker processes of the local cluster (default: one per core)")
    engine.add_argument("--worker-memory", default=None, metavar="SIZE",
                        help="with --engine dask and no --scheduler: memory limit per worker, e.g. 2GiB (default: dask's share of this machine's memory)")


class _LocalSession:
    """The default engine: the file is checked, then read into memory by the data boundary."""

    client = None

    @staticmethod
    def check(args) -> None:
        check_input(args.data)

    @staticmethod
    def load(args, progress):
        return load_from_args(args)


class _DaskSession:
    """``--engine dask``: the source is checked (path or URL, no cluster yet); the cluster starts
    when the data are read, after every other check, and stops when the command ends."""

    def __init__(self, stack):
        self.stack = stack
        self.client = None  # the cluster, once started: it computes the bootstrap replicates too

    @staticmethod
    def check(args) -> None:
        from .engine._sources import filesystem, require_dask

        require_dask()
        filesystem(args.data)

    def load(self, args, progress):
        from .engine import dask_session, read_partitioned

        say = progress.say if progress else (lambda text: None)
        memory = args.worker_memory
        client, where = self.stack.enter_context(dask_session(args.scheduler, n_workers=args.workers, memory_limit=memory))
        self.client = client
        say(f"dask engine: {where}")
        return read_partitioned(
            args.data,
            sensitive=args.sensitive,
            features=_split(args.features),
            ignore=_split(args.ignore) or (),
            label=args.label,
            binarize=_pairs(args.binarize, "binarize", float),
            merge=parse_merge(args.merge),
            missing=args.missing,
            scaling=_scaling(args),
            min_group_size=args.min_group_size,
            small_groups="drop" if args.drop_small_groups else "error",
            skip_rows=args.skip_rows,
            header=False if args.no_header else None,
            scheduler=client,
            sample_rows=AuditConfig.leakage_max_rows,
            random_state=args.seed,
            say=say,
        )


@contextlib.contextmanager
def _engine_session(args):
    """The engine the flags choose, its incompatible flags refused before any work."""
    if args.engine != "dask":
        for flag, value in (("scheduler", args.scheduler), ("dask_workers", args.workers), ("dask_worker_memory", args.worker_memory)):
            if value is not None:
                raise ParameterError(f"{term(flag)} applies to the dask engine; add {term('engine', 'dask')} or leave it out.")
        yield _LocalSession()
        return
    for attribute, option, why in DASK_REFUSED:
        if getattr(args, attribute, None):
            raise ParameterError(
                f"{term(option)} is not available with {term('engine', 'dask')} ({why}); leave it out, or audit with "
                f"{term('engine', 'local')}."
            )
    if args.missing in ("mean", "median"):
        raise ParameterError(
            f"{term('missing', args.missing)} is not available with {term('engine', 'dask')} (the fill value needs every partition "
            f"first); drop those rows ({term('missing', 'drop')}) or audit with {term('engine', 'local')}."
        )
    if args.workers is not None and args.workers < 1:
        raise ParameterError(f"{term('dask_workers')} must be at least 1; got {args.workers}.")
    if args.scheduler and (args.workers is not None or args.worker_memory):
        raise ParameterError(f"{term('dask_workers')} and {term('dask_worker_memory')} size a local cluster; an existing one "
                             f"({term('scheduler')}) has its own. Leave one out.")
    if args.worker_memory:
        _check_memory(args.worker_memory)
    with contextlib.ExitStack() as stack:
        yield _DaskSession(stack)


def _check_memory(text: str) -> None:
    try:
        from dask.utils import parse_bytes

        value = parse_bytes(text)
    except (ImportError, ValueError, TypeError):
        value = 0
    if not value or value <= 0:
        raise ParameterError(f"{term('dask_worker_memory', text)} is not a size; write it like 2GiB or 512MB.")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
