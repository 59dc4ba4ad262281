"""One message, three interfaces: the words for an option in the library, the CLI and the dashboard.

A message that tells the user what to change names an *option*. The same problem reaches a
notebook user (who passes ``missing="drop"``), a terminal user (``--missing drop``) and a
dashboard user (the “Missing cells” menu on the Data page). Messages are therefore written once,
with :func:`term` marking each option they mention::

    raise MissingValueError(
        f"3 rows have missing cells; choose {term('missing', 'drop')} to drop those rows."
    )

and rendered for the interface they appear in with :func:`render` (``str(error)`` is the library
rendering; the CLI prints ``error.render("cli")``, the dashboard ``error.render("dashboard")``):

* library:   ``missing='drop'``
* cli:       ``--missing drop``
* dashboard: ``“Missing cells” → “drop rows with a missing cell” (Data page)``

Every option a message may name is registered in :data:`OPTIONS` with all three renderings; an
unregistered name raises ``KeyError`` at the point the message is built, so a test that reaches
the message catches the typo. The dashboard rendering is plain text (typographic quotes, no
Markdown): pages escape whole messages, user values included.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

INTERFACES = ("library", "cli", "dashboard")

_OPEN, _CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧: never typed by a user, so a token cannot be forged by data
_TOKEN = re.compile(f"{_OPEN}([^{_OPEN}{_CLOSE}=]+)(?:=([^{_OPEN}{_CLOSE}]*))?{_CLOSE}")


@dataclass(frozen=True)
class Option:
    """How one option is named in each interface.

    Parameters
    ----------
    param : str
        The library parameter (``prepare(missing=...)``, ``AuditConfig(bootstrap=...)``, or an
        ``AuditConfig.options[family]`` key written ``family.key``).
    flag : str
        The CLI flag (``--missing``).
    widget : str
        The dashboard control's label, exactly as the page shows it.
    page : str
        The dashboard page holding the control.
    choices : mapping
        Value → the dashboard's label for that choice (for menus and radios).
    library, cli, dashboard : callable, optional
        ``value → text`` overrides for options whose value is not a plain scalar (e.g.
        ``binarize={'age': 30}`` / ``--binarize age=30``).
    """

    param: str
    flag: str
    widget: str
    page: str
    choices: Mapping[str, str] = field(default_factory=dict)
    library: Callable[[str], str] | None = None
    cli: Callable[[str], str] | None = None
    dashboard: Callable[[str], str] | None = None

    def render(self, interface: str, value: str | None) -> str:
        custom = getattr(self, interface)
        if custom is not None and value is not None:
            return custom(value)
        if interface == "library":
            name = self.param.split(".", 1)[-1]
            return name if value is None else f"{name}={_python_literal(value)}"
        if interface == "cli":
            if value is None or value == "true":
                return self.flag
            return f"{self.flag} {value}"
        where = f" ({self.page} page)"
        if value is None or value == "true":
            return f"“{self.widget}”{where}"
        return f"“{self.widget}” → “{self.choices.get(value, value)}”{where}"


def _python_literal(value: str) -> str:
    try:
        float(value)
    except ValueError:
        return {"true": "True", "false": "False", "none": "None"}.get(value, repr(value))
    return value


def _pair(value: str) -> tuple[str, str]:
    column, _, number = value.rpartition("=")
    return column, number


def _merge_parts(value: str) -> tuple[str, str, list[str] | str]:
    """``"EDUCATION=1,2:high"`` → ``("EDUCATION", "high", ["1", "2"])`` (``"*"`` stays a string)."""
    column, _, rest = value.partition("=")
    values, _, label = rest.rpartition(":")
    return column, label, values if values == "*" else values.split(",")


OPTIONS: dict[str, Option] = {}


def register(name: str, option: Option) -> Option:
    """Add (or replace) an option of :data:`OPTIONS`; returns it."""
    OPTIONS[name] = option
    return option


def term(name: str, value=None) -> str:
    """A marked mention of option ``name`` (optionally set to ``value``) inside a message.

    Raises ``KeyError`` for an unregistered option, so a misspelt name fails where the message
    is built rather than reaching a user as raw text.
    """
    if name not in OPTIONS:
        raise KeyError(f"unknown option {name!r} in a message; register it in fairaudit.vocabulary.OPTIONS")
    text = name if value is None else f"{name}={_value_text(value)}"
    return f"{_OPEN}{text}{_CLOSE}"


def literal(text: str) -> str:
    """``text`` from a user or a file, placed in a message: the brackets that mark a term are
    escaped, so no data can read as an option (or stop a message from being written)."""
    return str(text).replace(_OPEN, "\\u27e6").replace(_CLOSE, "\\u27e7")


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return text.replace(_OPEN, "").replace(_CLOSE, "")


def render(text: str, interface: str = "library") -> str:
    """``text`` with every :func:`term` written for ``interface`` (library, cli or dashboard)."""
    if interface not in INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(INTERFACES)}; got {interface!r}")

    def replace(match: re.Match) -> str:
        option = OPTIONS.get(match.group(1))  # term() registered every name it wrote; anything else came with data
        return match.group(0) if option is None else option.render(interface, match.group(2))

    return _TOKEN.sub(replace, text)


# ---------------------------------------------------------------------------- the options
# Reading and column roles (the Data page).
register("max_mb", Option(
    "max_mb", "--max-mb", "the upload limit", "Data",
    dashboard=lambda v: "the server's upload limit (server.maxUploadSize in .streamlit/config.toml)",
))
register("skip_rows", Option("skip_rows", "--skip-rows", "Lines to skip before the header", "Data"))
register("sensitive", Option("sensitive", "--sensitive", "Sensitive attribute(s)", "Data"))
register("features", Option("features", "--features", "Features", "Data"))
register("use_id_like", Option(
    "use_id_like", "--features", "Use ID-like columns as features", "Data",
    library=lambda v: f"use_id_like=[{v!r}]",
    cli=lambda v: f"--features with {v} among the other features",
))
register("ignore", Option("ignore", "--ignore", "Ignore", "Data"))
register("label", Option("label", "--label", "Label (ground truth, optional)", "Data"))
register("one_hot", Option("one_hot", "--one-hot", "One-hot encode text feature columns", "Data"))
register("binarize", Option(
    "binarize", "--binarize", "make groups by", "Data",
    library=lambda v: "binarize={{{!r}: {}}}".format(*_pair(v)),
    cli=lambda v: f"--binarize {v}",
    dashboard=lambda v: f"“make groups by” → “a threshold” for “{_pair(v)[0]}” (Data page, with it as a sensitive attribute)",
))
register("bins", Option(
    "bins", "--bins", "make groups by", "Data",
    library=lambda v: "bins={{{!r}: {}}}".format(*_pair(v)),
    cli=lambda v: f"--bins {v}",
    dashboard=lambda v: f"“make groups by” → “quantile bins” for “{_pair(v)[0]}” (Data page, with it as a sensitive attribute)",
))
register("missing", Option(
    "missing", "--missing", "Missing cells", "Data",
    choices={"error": "stop and list the missing cells", "drop": "drop rows with a missing cell",
             "mean": "fill feature cells with the column mean", "median": "fill feature cells with the column median"},
))
register("scaling", Option(
    "scaling", "--scaling", "Scaling", "Data",
    choices={"standardize": "standardize (centre, unit variance) — for mixed units", "center": "centre only",
             "none": "none", "unit_norm": "unit ℓ2 norm per feature (Fairer-NMF)"},
))
register("min_group_size", Option("min_group_size", "--min-group-size", "Minimum group size", "Data"))
register("small_groups", Option(
    "small_groups", "--drop-small-groups", "Drop groups below the minimum instead of stopping", "Data",
    cli=lambda v: "--drop-small-groups" if v == "drop" else "(leave out --drop-small-groups)",
    dashboard=lambda v: ("“Drop groups below the minimum instead of stopping” (Data page)" if v == "drop"
                         else "clear “Drop groups below the minimum instead of stopping” (Data page)"),
))
register("tensor_index", Option(
    "index", "--tensor-index", "Index columns, entity first", "Data",
    library=lambda v: f"index={v.split(',')!r}",
))
register("tensor_value", Option("value", "--tensor-value", "Value column", "Data"))
register("tensor_fill", Option("fill", "--tensor-fill", "Fill absent cells with a value", "Data"))
register("merge", Option(
    "merge", "--merge", "Merge values into groups", "Data",
    library=lambda v: f"merge={{{v!r}: {{'GROUP': [VALUES], ...}}}}" if "=" not in v else "merge={{{!r}: {{{!r}: {!r}}}}}".format(*_merge_parts(v)),
    cli=lambda v: f"--merge {v}" if "=" in v else f"--merge {v}=VALUES:GROUP",
    dashboard=lambda v: f"“Merge values into groups” for “{v.split('=', 1)[0]}” (Data page)",
))

# What to run (every method page).
register("methods", Option(
    "methods", "--methods", "the method pages", "PCA, NMF, Feature selection and Tensor",
    dashboard=lambda v: "the PCA, NMF, Feature selection and Tensor pages (one family each)",
))
register("variants", Option(
    "variants", "--variants", "Variants", "each method",
    dashboard=lambda v: "“Variants” (on the method's page)" + (f" → “{v}”" if v else ""),
))
register("ranks", Option(
    "ranks", "--ranks", "Ranks to sweep", "each method",
    dashboard=lambda v: "the rank slider (on the method's page)",
))
register("seed", Option("random_state", "--seed", "Random seed", "each method"))
register("leakage_classifier", Option(
    "leakage_classifier", "--leakage-classifier", "Classifier for the leakage (unfairness) metrics", "each method",
    choices={"qda": "QDA", "logistic": "logistic regression", "hgb": "gradient boosting", "mlp": "neural network"},
    dashboard=lambda v: "“Classifier for the leakage (unfairness) metrics” (on the method's page)",
))
register("sdp_max_features", Option(
    "sdp_max_features", "--sdp-max-features", "Fair PCA (SDP + LP, Samadi Alg. 1)", "PCA",
    dashboard=lambda v: "“Fair PCA (SDP + LP, Samadi Alg. 1)” among the Variants (PCA page; it then runs at any size)",
))
register("mw_max_features", Option(
    "mw_max_features", "--mw-max-features", "Fair PCA (multiplicative weights)", "PCA",
    dashboard=lambda v: "“Fair PCA (multiplicative weights)” among the Variants (PCA page; it then runs at any size)",
))
register("allow_slow", Option(
    "allow_slow", "--allow-slow", "Run audit", "each method",
    library=lambda v: "the audit anyway (nothing stops a library call)",
    dashboard=lambda v: "“Run audit” (on the method's page) to start it anyway",
))
register("output", Option(
    "output", "--html/--json/--csv", "the Report page's downloads", "Report",
    library=lambda v: "another output path",
    cli=lambda v: "another --html/--json/--csv path",
))

# Family options (``AuditConfig.options[family][key]``, written ``family.key``).
register("fs_clusters", Option("fs.n_clusters", "--clusters", "k-means clusters K", "Feature selection"))
register("fs_kmeans_runs", Option("fs.kmeans_runs", "--kmeans-runs", "k-means runs per selection (mean ± std)", "Feature selection"))
register("fs_formulation", Option(
    "fs.formulation", "--fufs-formulation", "FUFS formulation", "Feature selection",
    choices={"paper": "as printed (Xing et al. 2021, eq. 6)", "alignment": "normalised alignment (ours)"},
))
register("fs_alpha", Option("fs.alpha", "--fufs-alpha", "FUFS fairness weight α", "Feature selection"))
register("fs_beta", Option("fs.beta", "--fufs-beta", "FUFS sparsity weight β", "Feature selection"))
register("nonnegative", Option(
    "nmf.nonnegative", "--nonnegative", "Negative values (NMF needs non-negative data)", "NMF",
    choices={"error": "stop and say where the negative values are", "shift": "shift each feature by its minimum",
             "clip": "set negative cells to 0"},
))
register("zero_rows", Option(
    "nmf.zero_rows", "--zero-rows", "Rows that are all zero", "NMF",
    choices={"error": "stop and name them", "drop": "leave them out"},
))
register("nmf_max_iter", Option("nmf.max_iter", "--nmf-max-iter", "Iteration cap", "NMF"))
register("nmf_tol", Option("nmf.tol", "--nmf-tol", "Stopping tolerance", "NMF"))
register("nmf_estimates", Option("nmf.n_estimates", "--nmf-estimates", "NMF runs per group for E_ℓ", "NMF"))
_NMF_STOPPING = {"eq10": "eq. (10), as printed", "window": "window rule: change over 100 iterations (ours)"}
register("fair_nmf_stopping", Option("nmf.stopping", "--fair-nmf-stopping", "Fairer-NMF stopping rule", "NMF", choices={
    **_NMF_STOPPING, "authors": "the authors' code: change of the relative losses (slow)",
}))
register("fair_nmf_init", Option(
    "nmf.init", "--fair-nmf-init", "Fairer-NMF start", "NMF",
    choices={"random": "a random start, as printed", "nmf": "the standard NMF of the same rank (ours)"},
))
register("am_max_cells", Option(
    "nmf.am_max_cells", "--am-max-cells", "Fairer-NMF (alternating minimisation, Alg. 2)", "NMF",
    dashboard=lambda v: "“Fairer-NMF (alternating minimisation, Alg. 2)” among the Variants (NMF page; it then runs at any size)",
))
# NMF options the NMF page leaves at the audit's defaults (the paper's, or ours where docs/nmf.md
# says why): set from the command line or the library; the dashboard says so.
_NMF_CLI_ONLY = "NMF (command line and library)"


def _cli_only(flag: str) -> Callable[[str], str]:
    return lambda v: f"{flag} {v} on the command line (the NMF page runs the audit's default)"


register("nmf_scaling", Option(
    "nmf.scaling", "--nmf-scaling", "NMF feature scaling", _NMF_CLI_ONLY,
    choices={"unit_norm": "unit ℓ2 norm per feature (the paper's §6.1)", "none": "none"}, dashboard=_cli_only("--nmf-scaling"),
))
register("nmf_solver", Option(
    "nmf.nmf_solver", "--nmf-solver", "Standard NMF solver", _NMF_CLI_ONLY,
    choices={"mu": "multiplicative updates (the paper's)", "cd": "coordinate descent (tighter E_ℓ)"},
    dashboard=_cli_only("--nmf-solver"),
))
register("nmf_stopping", Option("nmf.nmf_stopping", "--nmf-stopping", "E_ℓ's NMF stopping rule", _NMF_CLI_ONLY,
                                choices=_NMF_STOPPING, dashboard=_cli_only("--nmf-stopping")))
register("fair_nmf_weights", Option(
    "nmf.mu_weights", "--fair-nmf-weights", "Fairer-NMF (MU) H-step weights", _NMF_CLI_ONLY,
    choices={"squared": "c_ℓ²/‖X_ℓ‖² (Algorithm 3)", "gradient": "from the gradient of eq. (8)"},
    dashboard=_cli_only("--fair-nmf-weights"),
))
register("fair_nmf_keep_best", Option(
    "nmf.keep_best", "--fair-nmf-keep-best", "Keep the best Fairer-NMF iterate", _NMF_CLI_ONLY,
    cli=lambda v: "--fair-nmf-keep-best" if v == "true" else "--no-fair-nmf-keep-best",
    dashboard=lambda v: ("--fair-nmf-keep-best" if v == "true" else "--no-fair-nmf-keep-best")
    + " on the command line (the NMF page runs the audit's default)",
))
register("cpd_kernel", Option(
    "cpd.khsic_kernel", "--cpd-kernel", "KHSIC kernel", "Tensor",
    choices={"auto": "automatic", "exact": "exact", "nystrom": "Nyström approximation"},
))
register("cpd_epochs", Option("cpd.n_epochs", "--cpd-epochs", "Largest number of epochs per fit", "Tensor"))
register("cpd_khsic_max_rows", Option(
    "cpd.khsic_max_rows", "--cpd-khsic-max-rows", "Run KHSIC anyway", "Tensor",
    dashboard=lambda v: "“Run KHSIC anyway” ticked (Tensor page)",
))
register("cpd_points", Option("cpd.n_lambdas", "--cpd-points", "λ values in the sweep", "Tensor"))
register("cpd_sweep", Option(
    "cpd.sweep", "--cpd-no-sweep", "λ sweep (the fit–leakage frontier)", "Tensor",
    cli=lambda v: "--cpd-no-sweep" if v == "false" else "the λ sweep (leave out --cpd-no-sweep)",
    dashboard=lambda v: ("clear “λ sweep (the fit–leakage frontier)” (Tensor page)" if v == "false"
                         else "“λ sweep (the fit–leakage frontier)” ticked (Tensor page)"),
))
register("cpd_sweep_rank", Option("cpd.sweep_rank", "--cpd-sweep-rank", "CP rank of the sweep", "Tensor"))
register("cpd_lambdas", Option("cpd.lambdas", "--cpd-lambdas", "λ values in the sweep", "Tensor"))
register("cpd_landmarks", Option("cpd.khsic_landmarks", "--cpd-landmarks", "KHSIC kernel", "Tensor",
                                 dashboard=lambda v: "“KHSIC kernel” (Tensor page; the Nyström choice uses 500 landmarks)"))
register("cpd_tol", Option("cpd.tol", "--cpd-tol", "Largest number of epochs per fit", "Tensor",
                           dashboard=lambda v: "“Largest number of epochs per fit” (Tensor page)"))
register("cpd_jobs", Option(
    "cpd.n_jobs", "--cpd-jobs", "", "no dashboard control",
    dashboard=lambda v: "the number of worker threads (the library's or the CLI's --cpd-jobs; the Tensor page uses 2)",
))
_CPD_LAMBDA = {
    "frontier": "chosen on the λ sweep (the smallest that removes the leakage, keeping the fit)",
    "reference": "λ_ref, scaled to the data (the previous default)",
    "paper": "the paper's (Kim & Gittens, Fig. 2b)",
}


def _cpd_lambda_dashboard(value: str) -> str:
    if value in _CPD_LAMBDA:
        return f"“Default λ” → “{_CPD_LAMBDA[value]}” (Tensor page)"
    return f"“Default λ” → “a value of my own” and {value} in “λ” (Tensor page)"


register("cpd_lambda", Option(
    "cpd.lambda_choice", "--cpd-lambda", "Default λ", "Tensor", choices=_CPD_LAMBDA, dashboard=_cpd_lambda_dashboard,
))
register("cpd_formulation", Option(
    "cpd.formulation", "--cpd-formulation", "Formulation", "Tensor",
    choices={"fairaudit": "fairaudit (scale-free, λ scaled to the data; fast)", "paper": "paper (Kim & Gittens as printed)"},
))

# Taking the audit to action: exported models, new rows, your own representation (the Models page).
register("keep_models", Option(
    "keep_models", "--export-model", "Fitted models", "Models",
    cli=lambda v: "--export-model DIR",
    dashboard=lambda v: "an audit run on this data in this session (the Models page lists its fitted models)",
))
register("export_rank", Option("ranks", "--export-rank", "Rank", "Models"))
register("transform_missing", Option(
    "missing", "--missing", "Rows with a missing cell", "Models",
    choices={"error": "stop and list them", "drop": "leave them out of the output"},
))
register("id_column", Option("id_column", "--id", "ID column", "Models"))
register("components", Option("components", "--components", "Components file (rank × features)", "Models"))
register("embedding", Option("embedding", "--embedding", "Embeddings file (one row per data row)", "Models"))
register("yours_family", Option("methods", "--methods", "Audit it as", "Models", choices={"pca": "PCA", "nmf": "NMF"}))
register("yours_ranks", Option(
    "ranks", "--ranks", "Ranks to sweep", "each method",
    dashboard=lambda v: f"the rank slider (on the PCA or NMF page: ranks {v.replace(':', ' to ')}), then “Run audit”",
))
register("leace", Option(
    "leace", "--leace", "Also audit each representation after LEACE", "each method",
    dashboard=lambda v: "“Also audit each representation after LEACE” (on the method's page, or the Models page for yours)",
))
register("subgroups", Option(
    "subgroups", "--subgroups", "Search for the worst-served subgroup", "PCA",
    dashboard=lambda v: "“Search for the worst-served subgroup” (PCA page)",
))
register("out", Option("out", "--out", "Download the transformed rows", "Models",
                       dashboard=lambda v: "“Download the transformed rows” (Models page)"))
register("compare_names", Option("names", "--names", "Names of the two audits", "Compare",
                                 library=lambda v: f"names={tuple(part.strip() for part in v.split(','))!r}"))

# The PCA family (the PCA page).
register("jevd_solver", Option(
    "pca.jevd_solver", "--jevd-solver", "JEVD-PCA scheme", "PCA",
    choices={"jacobi": "orthogonal Jacobi (stable; the audit's default)", "paper": "Algorithm 1 as printed",
             "damped": "Algorithm 1 with a backtracking step"},
))

# Uncertainty and verdicts (AuditConfig's bootstrap, confidence, holdout, flag_ratio): the same four
# controls on every method page and beside the Report page's run of every family. The dashboard
# shows the confidence level and the held-out share in percent.
_RUN_PAGES = "on the method's page, or the Report page"


def _percent(value: str) -> str:
    try:
        return f"{round(100 * float(value), 6):g}"
    except ValueError:
        return value


register("bootstrap", Option(
    "bootstrap", "--bootstrap", "Bootstrap replicates", "each method",
    dashboard=lambda v: f"“Bootstrap replicates” → “{v}” ({_RUN_PAGES})",
))
register("confidence", Option(
    "confidence", "--confidence", "Confidence level (%)", "each method",
    dashboard=lambda v: f"“Confidence level (%)” → “{_percent(v)}” ({_RUN_PAGES})",
))
register("holdout", Option(
    "holdout", "--holdout", "Held-out rows (% of each group)", "each method",
    dashboard=lambda v: (f"clear “Evaluate on held-out rows” ({_RUN_PAGES})" if v in ("0", "0.0", "none") else
                         f"“Evaluate on held-out rows” with “Held-out rows (% of each group)” → “{_percent(v)}” ({_RUN_PAGES})"),
))
register("n_jobs", Option(
    "n_jobs", "--jobs", "Processes", "each method",
    dashboard=lambda v: f"“Processes” → “{v}” ({_RUN_PAGES})",
))
register("time_budget", Option(
    "time_budget", "--time-budget", "Time budget (s)", "each method",
    dashboard=lambda v: f"“Time budget (s)” → “{v}” ({_RUN_PAGES})" if v not in (None, "true") else f"“Time budget (s)” ({_RUN_PAGES})",
))
register("flag_ratio", Option(
    "flag_ratio", "--flag-ratio", "Gap tolerance (×)", "each method",
    dashboard=lambda v: f"“Gap tolerance (×)” → “{v}” ({_RUN_PAGES})",
))
register("min_judged_rows", Option(
    "min_judged_rows", "--min-judged-rows", "Smallest group to judge (rows)", "each method",
    dashboard=lambda v: f"“Smallest group to judge (rows)”{f' → “{v}”' if v else ''} ({_RUN_PAGES})",
))
register("reference", Option(
    "reference", "--reference", "Compare with", "PCA, NMF or Tensor",
    dashboard=lambda v: "“Compare with” above the findings (PCA, NMF or Tensor page)",
))

# The engine (command line and library): the dashboard always audits in process, with no dask.
_ENGINE = "Engine (command line and library)"


def _engine_only(flag: str, what: str) -> Callable[[str], str]:
    return lambda v: f"{flag}{'' if v in (None, 'true') else ' ' + v} on the command line ({what}; the dashboard audits in process)"


register("engine", Option(
    "engine", "--engine", "Engine", _ENGINE, choices={"local": "in process (the default)", "dask": "dask (optional extra)"},
    dashboard=_engine_only("--engine", "the engine"),
))
register("scheduler", Option("scheduler", "--scheduler", "Dask scheduler", _ENGINE,
                             dashboard=_engine_only("--scheduler", "an existing dask cluster")))
register("dask_workers", Option("n_workers", "--workers", "Dask workers", _ENGINE,
                                dashboard=_engine_only("--workers", "the local dask cluster's worker processes")))
register("dask_worker_memory", Option("memory_limit", "--worker-memory", "Dask worker memory", _ENGINE,
                                      dashboard=_engine_only("--worker-memory", "each local dask worker's memory limit")))
