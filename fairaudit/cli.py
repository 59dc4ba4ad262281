"""Command line: ``python -m fairaudit audit DATA.csv --sensitive COL ...``.

Exit status 0 on success; 2 with one line on stderr for anything the user can cause (never a
traceback); 1 only for a bug in fairaudit. ``python -m fairaudit columns DATA.csv`` lists a file's
columns and how they would be read.

Before any work the command checks what it will write: an output path that is the input (or
another output, a folder, a device) is refused, and every output's folder must accept a file. The
audit then reports its progress on stderr, per family and fit, with the elapsed time (``--quiet``
silences it), and warns — or, past :data:`REFUSE_SECONDS`, refuses unless ``--allow-slow`` — when
the data make it a matter of minutes. Outputs are written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
import time
import warnings
from pathlib import Path

from . import __version__
from .audit import FAMILIES, FAMILY_TITLES, AuditConfig, run_audit
from .cost import duration, expected_seconds
from .cpd.estimator import KERNELS
from .data import DEFAULT_MAX_MB, MISSING_POLICIES, NONNEGATIVE_POLICIES, SCALINGS, prepare, prepare_tensor, read_table
from .errors import FairAuditError, InputFileError, ParameterError
from .fs.audit import KMEANS_RUNS
from .metrics import LEAKAGE_CLASSIFIERS
from .nmf._standard import SOLVERS as NMF_SOLVERS
from .nmf.audit import AUDIT_INITS, MU_WEIGHTS, NMF_SCALINGS, STOPPING_RULES, ZERO_ROW_POLICIES
from .vocabulary import render, term

MAX_RANKS = 1000
"""At most this many ranks in one ``--ranks`` (``1:1000000000`` is a typo, not a plan)."""

SEED_LIMIT = 2**32
"""Seeds are 0 … 2³² − 1 (what NumPy's and scikit-learn's generators accept)."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with status 2."""

    def error(self, message):  # noqa: D401 - argparse API
        raise _UsageError(f"{message} (see --help)")


class _UsageError(Exception):
    pass


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
    audit.add_argument("data", help="CSV file (UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1)")
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
    runs.add_argument("--sdp-max-features", type=int, default=AuditConfig.sdp_max_features,
                      help=f"skip the SDP (fair_sdp) above this many features (default {AuditConfig.sdp_max_features})")
    runs.add_argument("--mw-max-features", type=int, default=AuditConfig.mw_max_features,
                      help=f"skip multiplicative weights (fair_mw) above this many features (default {AuditConfig.mw_max_features})")
    runs.add_argument("--allow-slow", action="store_true",
                      help=f"run an audit expected to take more than {REFUSE_SECONDS // 60} minutes instead of stopping before it")
    runs.add_argument("--clusters", type=int, default=None, metavar="K",
                      help="fs: k-means clusters (default: the --label's number of classes, else the number of groups)")
    runs.add_argument("--kmeans-runs", type=int, default=None, metavar="N",
                      help=f"fs: k-means runs per selection, reported as mean and std (default {KMEANS_RUNS}, as the FUFS paper)")
    _add_nmf_options(audit)
    _add_fs_options(audit)
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
    outputs.add_argument("--quiet", action="store_true", help="print nothing on success (no summary, no progress on stderr)")

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
        binarize=_pairs(args.binarize, "binarize", float),
        bins=_pairs(args.bins, "bins", int),
        missing=args.missing,
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
            raise ParameterError(f"{term('cpd_lambdas', args.cpd_lambdas)} is not a list of numbers such as 0.1,1,10.") from None
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
    for name, option in (("n_lambdas", "cpd_points"), ("n_epochs", "cpd_epochs"), ("khsic_max_rows", "cpd_khsic_max_rows"),
                         ("sweep_rank", "cpd_sweep_rank")):
        if options[name] is not None and options[name] < 1:
            raise ParameterError(f"{term(option)} must be at least 1; got {options[name]}.")
    if options["khsic_landmarks"] is not None and options["khsic_landmarks"] < 2:
        raise ParameterError(f"{term('cpd_landmarks')} must be at least 2; got {options['khsic_landmarks']}.")
    if options["tol"] is not None and not options["tol"] >= 0:
        raise ParameterError(f"{term('cpd_tol')} must be a number >= 0; got {options['tol']}.")
    return {key: value for key, value in options.items() if value is not None}


def _add_fs_options(parser: argparse.ArgumentParser) -> None:
    """FUFS's options (``--methods fs``); ``--clusters`` and ``--kmeans-runs`` are in "what to run"."""
    from .fs.fufs import FORMULATIONS

    fs = parser.add_argument_group("feature selection (--methods fs)")
    fs.add_argument("--fufs-formulation", default=None, choices=FORMULATIONS,
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
        sdp_max_features=args.sdp_max_features,
        mw_max_features=args.mw_max_features,
        options={name: given for name, given in (("nmf", _nmf_options(args)), ("fs", _fs_options(args)), ("cpd", _cpd_options(args))) if given},
    )
    config.check_variants()
    return config


# ---------------------------------------------------------------- inputs and outputs
OUTPUT_FLAGS = (("html", "--html"), ("json", "--json"), ("csv", "--csv"))


def check_input(path: str) -> None:
    """The input must be an existing regular file: a folder, a FIFO or a device is refused before
    it is opened (opening a FIFO would wait for a writer forever)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file.") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot be read ({exc.strerror}).") from None
    if stat.S_ISDIR(mode):
        raise InputFileError(f"{path} is a folder; give the CSV file inside it.")
    if not stat.S_ISREG(mode):
        kind = "a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
        raise InputFileError(f"{path} is {kind}, not a regular file; save the data to a file first.")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(args) -> list[tuple[str, Path]]:
    """``(flag, path)`` of every requested output, checked before any work: not the input, not
    another output, not a folder or device, and writable (a probe file is created and removed in
    the folder that will hold it; nothing is left behind)."""
    outputs: list[tuple[str, Path]] = []
    for attribute, flag in OUTPUT_FLAGS:
        value = getattr(args, attribute, None)
        if not value:
            continue
        path = Path(value)
        if _same_file(path, Path(args.data)):
            raise ParameterError(f"{flag} {value} is the input file, which is never overwritten; choose {term('output')}.")
        for other_flag, other in outputs:
            if _same_file(path, other):
                raise ParameterError(f"{flag} and {other_flag} both name {value}; give each output its own path.")
        _check_writable(flag, path)
        outputs.append((flag, path))
    return outputs


def _check_writable(flag: str, path: Path) -> None:
    if path.exists() or path.is_symlink():
        if path.is_dir():
            raise ParameterError(f"{flag} {path} is a folder; give a file name such as {path / ('report.' + flag[2:])}.")
        if not path.is_file():
            raise ParameterError(f"{flag} {path} is not a regular file (a device or a pipe); choose {term('output')}.")
    folder = path.parent
    while not folder.exists():  # the folders still to create: the probe goes where they would start
        folder = folder.parent
    if not folder.is_dir():
        raise ParameterError(f"{flag} {path}: {folder} is a file, not a folder; choose {term('output')}.")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fairaudit-probe-"):
            pass
        if path.exists():
            with open(path, "ab"):
                pass
    except OSError as exc:
        raise ParameterError(f"{flag} {path} cannot be written ({exc.strerror}); choose {term('output')}.") from None


# ---------------------------------------------------------------- how long it will take
WARN_SECONDS = 60
REFUSE_SECONDS = 600


def _check_expectation(data, config: AuditConfig, allow_slow: bool, say) -> None:
    seconds, cause = expected_seconds(data.n_rows, data.n_features, config)
    if seconds > REFUSE_SECONDS and not allow_slow:
        raise ParameterError(
            f"this audit would take roughly {duration(seconds)} ({cause}); pass {term('allow_slow')} to run it "
            f"anyway, or audit fewer features ({term('features')}), ranks ({term('ranks')}) or families ({term('methods')})."
        )
    if seconds > WARN_SECONDS:
        say(f"expect roughly {duration(seconds)} ({cause}); progress follows.")


# ---------------------------------------------------------------- progress on stderr
class ProgressReporter:
    """The ``run_audit`` progress callback of the CLI: a line per fit on stderr with the elapsed
    time (rewritten in place on a terminal; at most one line per ``interval`` seconds otherwise,
    plus each family's first and last fit), and a line when a family is done."""

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
        now = time.monotonic()
        method = event.get("method")
        if method != self.method:
            self.family_done(now)
            self.method, self.method_started = method, self.last_event_time
        self.last_event_time = now
        self.fits = int(event.get("done", 0))
        total = int(event.get("total", 0))
        stage = event.get("stage")
        what = f"{event.get('variant')}, rank {event.get('rank')}" + (f", {stage}" if stage and stage != "fit" else "")
        line = f"[{now - self.started:7.1f} s] {method}: {self.fits}/{total} fits ({what})"
        if self.tty:
            print("\r\033[K" + line, end="", file=self.stream, flush=True)
            self._open_line = True
        elif self.fits in (1, total) or now - self.last_written >= self.interval:
            print(line, file=self.stream, flush=True)
            self.last_written = now

    def family_done(self, now: float | None = None) -> None:
        if self.method is None:
            return
        now = now or time.monotonic()
        self.say(f"{self.method} done: {self.fits} fits in {now - self.method_started:.1f} s (total {now - self.started:.1f} s)")
        self.method = None

    def end_line(self) -> None:
        if self._open_line:
            print(file=self.stream, flush=True)
            self._open_line = False


# ---------------------------------------------------------------- the commands
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
        print(_directions(keep), file=out)
        _print_details(result, method, out)
    for method, sentences in findings(result).items():
        for sentence in sentences:
            print(f"finding ({method}): {render(str(sentence), 'cli')}", file=out)
    for skip in result.skipped:
        print(f"skipped {skip['method']}/{skip['variant']}: {render(skip['reason'], 'cli')}", file=out)
    for warning in result.warnings:
        print(f"warning: {render(warning, 'cli')}", file=out)


def _directions(columns) -> str:
    """“↓ better: max_loss, …; ↑ better: …” for a table's metric columns."""
    from .metrics import better

    lower = [c for c in columns if better(c) == "lower"]
    higher = [c for c in columns if better(c) == "higher"]
    parts = [f"↓ better: {', '.join(lower)}" if lower else "", f"↑ better: {', '.join(higher)}" if higher else ""]
    return "  (" + "; ".join(p for p in parts if p) + ")"


def _print_details(result, method: str, out, limit: int = 12) -> None:
    """One line per fit detail (e.g. the selected features), long lists shortened."""
    from .report import details_rows

    for variant, rank, key, text in details_rows(result, method, titles=False, limit=limit):
        print(f"{key} ({method}/{variant}, rank {rank}): {text}", file=out)


def _run_audit(args) -> int:
    from .report import write_reports

    check_input(args.data)
    outputs = dict(check_outputs(args))
    config = config_from_args(args)
    progress = None if args.quiet else ProgressReporter(sys.stderr)
    data = load_from_args(args)
    _check_expectation(data, config, args.allow_slow, progress.say if progress else lambda text: None)
    if progress:  # printed with the first fit: a bad option found before any fit leaves one line on stderr
        progress.header = (
            f"auditing {data.source.get('name', args.data)} ({data.n_rows:,} rows × {data.n_features:,} features): "
            + ", ".join(FAMILY_TITLES.get(m, m) for m in config.methods)
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are collected in the result and printed below
            result = run_audit(data, config, progress=progress)
    except BaseException:
        if progress:
            progress.end_line()  # the error starts a line of its own
        raise
    if progress:
        progress.family_done()
    try:
        written = write_reports(
            result, html_path=outputs.get("--html"), json_path=outputs.get("--json"), csv_path=outputs.get("--csv"), interface="cli"
        )
    except OSError as exc:  # e.g. the disk filled up during the audit: nothing half-written is left
        raise ParameterError(f"{exc.filename or 'an output'} could not be written ({exc.strerror}); nothing was written.") from None
    if not args.quiet:
        _print_summary(result, sys.stdout)
        for path in written:
            print(f"wrote {path}")
    return 0


def _run_columns(args) -> int:
    check_input(args.data)
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
    except KeyboardInterrupt:
        print("fairaudit: interrupted", file=sys.stderr)
        return 130
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


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
