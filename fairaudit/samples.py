"""Embedded sample data sets: generated here (synthetic, seeded) or shipped inside a dependency.

``python -m fairaudit.samples [FOLDER]`` writes them as CSV files (default ``sample_data/``).
:func:`load_sample` builds the same bytes in memory and reads them through the data boundary,
exactly as an upload would be read, so a sample's fingerprint equals its file's.

Samples
-------
``two_groups``
    Samadi et al. (2018, Fig. 2 style): a majority group whose variance lies along one set of
    directions and a minority group whose variance lies along others, so vanilla PCA of the
    pooled data serves the majority and fails the minority. The dashboard opens on it.
``nmf_table1``
    Kassab, George, Needell et al. ("Towards a Fairer Non-negative Matrix Factorization",
    Table 1): three groups of non-negative rank-structured rows, 1000×20 of rank 3, 500×20 of
    rank 3 and 250×20 of rank 6, each ``X_ℓ = W_ℓ H_ℓ`` with ``W``, ``H`` uniform on [0, 1).
``diabetes``
    scikit-learn's diabetes data (Efron et al. 2004; shipped inside scikit-learn, unscaled),
    442 patients, sensitive column ``sex``; ``disease_progression`` is the regression target
    and is not a feature.
``subgroups``
    Two sensitive columns of three values each, and one intersection of 3 % of the rows that
    vanilla PCA serves badly (:func:`planted_subgroup`): the subgroup search's example.
``cpd_tensor``
    A small long-format tensor (120 users × 10 items × 6 contexts, one line per cell) drawn
    from the distribution of Kim & Gittens' synthetic data (App. A.8; :func:`fair_cpd_tensor`).
    The full-size tensor of App. A.8 (200 × 100 × 100) is :func:`fair_cpd_tensor` with its
    defaults (:func:`load_fair_cpd_tensor` as :class:`AuditData`); at 2 million cells it is
    generated in memory, not shipped as a CSV.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .data import AuditData, prepare, prepare_tensor, read_table, tensor_from_arrays

DEFAULT_FOLDER = Path(__file__).resolve().parent.parent / "sample_data"


@dataclass(frozen=True)
class Sample:
    """A sample data set and how to read it."""

    name: str
    title: str
    description: str
    sensitive: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    label: str | None = None
    scaling: str = "standardize"
    tensor_index: tuple[str, ...] = ()
    tensor_value: str | None = None

    @property
    def file_name(self) -> str:
        return f"{self.name}.csv"


# ---------------------------------------------------------------- generators
def two_groups(n_major: int = 480, n_minor: int = 120, random_state: int = 0) -> pd.DataFrame:
    """Two groups whose structure differs, for every family at once (the dashboard's default).

    Non-negative parts-based rows (``X = W H`` plus small non-negative noise, ``W`` gamma
    distributed): the majority (``group=A``) mixes three parts on features x1–x5, the minority
    (``group=B``) three different parts on x5–x8 and x1. So:

    * PCA of the pooled rows follows the majority: at low ranks the minority's reconstruction
      loss is several times the majority's (Samadi et al. 2018, Fig. 2's situation);
    * NMF fitted to everyone explains the minority's parts worse (Fairer-NMF's motivation);
    * x9 and x10 are *proxies* of the group (a postcode, say): shifted for B, otherwise noise —
      together with the group-specific x8 they are what unfair feature selection picks up;
    * ``outcome`` is a binary label driven by x2 and x6 (for clustering accuracy / NMI).
    """
    rng = np.random.default_rng(random_state)
    n_features = 10

    def parts_block(rows: int, parts: list[tuple[list[int], float]]) -> np.ndarray:
        W = rng.gamma(2.0, 1.0, size=(rows, len(parts)))
        H = np.zeros((len(parts), n_features))
        for index, (columns, scale) in enumerate(parts):
            H[index, columns] = rng.uniform(0.6, 1.0, len(columns)) * scale
        return W @ H

    major = parts_block(n_major, [([0, 1], 3.0), ([1, 2, 3], 2.5), ([3, 4], 2.0)])
    minor = parts_block(n_minor, [([4, 5], 3.0), ([5, 6, 7], 2.5), ([7, 0], 2.0)])
    X = np.vstack([major, minor]) + rng.uniform(0.0, 0.5, size=(n_major + n_minor, n_features))
    groups = np.array(["A"] * n_major + ["B"] * n_minor)
    minority = groups == "B"
    X[:, 8] = 2.0 + 1.5 * minority + rng.gamma(2.0, 0.5, len(groups))
    X[:, 9] = 3.0 + 1.0 * minority + rng.gamma(2.0, 0.6, len(groups))
    score = X[:, 1] + X[:, 5] + rng.normal(0.0, 1.0, len(groups))
    frame = pd.DataFrame(np.round(X, 3), columns=[f"x{i + 1}" for i in range(n_features)])
    frame.insert(0, "group", groups)
    frame["outcome"] = (score > np.median(score)).astype(int)
    return frame.sample(frac=1.0, random_state=random_state).reset_index(drop=True)


def nmf_table1(random_state: int = 0) -> pd.DataFrame:
    """The three synthetic groups of Fairer-NMF Table 1 (sizes 1000/500/250, ranks 3/3/6, 20 features)."""
    rng = np.random.default_rng(random_state)
    blocks, labels = [], []
    for name, rows, rank in (("g1", 1000, 3), ("g2", 500, 3), ("g3", 250, 6)):
        W = rng.uniform(0.0, 1.0, size=(rows, rank))
        H = rng.uniform(0.0, 1.0, size=(rank, 20))
        blocks.append(W @ H)
        labels += [name] * rows
    frame = pd.DataFrame(np.round(np.vstack(blocks), 6), columns=[f"f{i + 1}" for i in range(20)])
    frame.insert(0, "group", labels)
    return frame


def salaries_like(n: int = 397, random_state: int = 0) -> pd.DataFrame:
    """A synthetic table like the one a user audited in issue 24 (397 academics' salaries by sex,
    8 features after one-hot; not shipped as a sample, used by tests and benchmarks): academic rank
    (3 values) and discipline (2) as text, years since PhD and of service, salary; about 10 %
    women, somewhat more often assistant professors and paid a little less. One-hot encoded and
    standardised it has rank 6 (each one-hot block sums to a constant)."""
    rng = np.random.default_rng(random_state)
    sex = np.where(rng.uniform(size=n) < 39 / 397, "Female", "Male")
    rank = rng.choice(["AsstProf", "AssocProf", "Prof"], size=n, p=[67 / 397, 64 / 397, 266 / 397])
    rank[(sex == "Female") & (rng.uniform(size=n) < 0.25)] = "AsstProf"
    discipline = rng.choice(["A", "B"], size=n, p=[181 / 397, 216 / 397])
    years = {"AsstProf": (5, 3), "AssocProf": (15, 6), "Prof": (28, 10)}
    phd = np.clip([rng.normal(*years[r]) for r in rank], 1, 56).round()
    service = np.clip(phd - rng.gamma(2.0, 2.0, size=n), 0, 60).round()
    pay = pd.Series(rank).map({"AsstProf": 80000, "AssocProf": 93000, "Prof": 126000}).to_numpy()
    salary = (pay + np.where(discipline == "B", 13000, 0) + 150 * phd - 100 * service + rng.normal(0, 18000, size=n)
              - np.where(sex == "Female", 4000, 0)).round()
    return pd.DataFrame({"rank": rank, "discipline": discipline, "yrs.since.phd": phd.astype(int),
                         "yrs.service": service.astype(int), "sex": sex, "salary": salary.astype(int)})


def planted_subgroup(n: int = 2000, share: float = 0.03, planted: bool = True, random_state: int = 0) -> pd.DataFrame:
    """Two sensitive columns of three values each (``age_band``, ``region``) and six features,
    every row drawn from one Gaussian whose variance falls along a random orthonormal basis
    (standard deviations 3, 2.5, 2, 1.5, 1, 0.5) — except the intersection ``age_band=old &
    region=west`` (``share`` of the rows, 3 %), whose variance runs the other way (0.5 … 3): vanilla
    PCA keeps the directions the other rows vary in and fails that cell, while each of its
    columns' values alone is served about as well as the rest. The other eight cells share the
    remaining rows equally. ``planted=False``: the same cells, every row from the common
    distribution (a null for the subgroup search)."""
    rng = np.random.default_rng(random_state)
    basis = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    cells = [(age, region) for age in ("young", "middle", "old") for region in ("north", "south", "west")]
    special = cells.index(("old", "west"))
    counts = np.full(len(cells), 0)
    counts[special] = round(share * n)
    rest = [i for i in range(len(cells)) if i != special]
    counts[rest] = (n - counts[special]) // len(rest)
    counts[rest[: n - counts.sum()]] += 1
    spread = np.array([3.0, 2.5, 2.0, 1.5, 1.0, 0.5])
    blocks, ages, regions = [], [], []
    for i, ((age, region), rows) in enumerate(zip(cells, counts, strict=True)):
        scale = spread[::-1] if planted and i == special else spread
        blocks.append((rng.standard_normal((rows, 6)) * scale) @ basis.T)
        ages += [age] * rows
        regions += [region] * rows
    order = rng.permutation(n)
    frame = pd.DataFrame(np.round(np.vstack(blocks), 4)[order], columns=[f"x{i + 1}" for i in range(6)])
    frame.insert(0, "region", np.array(regions)[order])
    frame.insert(0, "age_band", np.array(ages)[order])
    return frame


def diabetes() -> pd.DataFrame:
    """scikit-learn's diabetes data, unscaled, with readable column names."""
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(as_frame=True, scaled=False)
    frame = bunch.frame.rename(columns={"target": "disease_progression"})
    frame["sex"] = frame["sex"].map({1.0: "1", 2.0: "2"})
    return frame


def fair_cpd_factors(shape: tuple[int, ...] = (200, 100, 100), true_rank: int = 10, random_state: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """The generating factors of Kim & Gittens (2021), App. A.8, and the sub-population of each entity.

    As the appendix prints it: ``A_x ∈ ℝ^{200×10}``, ``B_x, C_x ∈ ℝ^{100×10}``; 50 % of the rows
    of ``A_x`` are drawn from ``N(μ, Σ)`` with ``μ = (1, 2, …, 10)`` and
    ``Σ = diag(1, 0.9, …, 0.1)`` (variances), the other 50 % from ``U(0, 1)`` entry-wise; every
    entry of ``B_x`` and ``C_x`` is ``U(0, 1)``.

    ``shape`` and ``true_rank`` generalise it (``μ = (1, …, R)``, variances ``linspace(1, 0.1, R)``,
    so the default is exactly the appendix's); the first ``n // 2`` entities are the normal
    sub-population (the appendix does not say how the rows are ordered; CP does not care).

    Returns
    -------
    factors : list of ndarray, ``[A_x, B_x, C_x, …]`` with ``true_rank`` columns
    groups : ndarray of str, ``"normal"`` / ``"uniform"`` per entity
    """
    rng = np.random.default_rng(random_state)
    n = shape[0]
    half = n // 2
    mean = np.arange(1.0, true_rank + 1.0)
    variance = np.linspace(1.0, 0.1, true_rank)
    A = np.vstack([rng.normal(mean, np.sqrt(variance), size=(half, true_rank)), rng.uniform(0.0, 1.0, size=(n - half, true_rank))])
    factors = [A] + [rng.uniform(0.0, 1.0, size=(d, true_rank)) for d in shape[1:]]
    return factors, np.array(["normal"] * half + ["uniform"] * (n - half))


def fair_cpd_tensor(shape: tuple[int, ...] = (200, 100, 100), true_rank: int = 10, random_state: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic tensor of Kim & Gittens (2021), App. A.8: ``X = ⟦A_x, B_x, C_x⟧`` from
    :func:`fair_cpd_factors`, 200 × 100 × 100 by default, no noise (the paper fits it at rank 8).

    Returns
    -------
    X : ndarray of shape ``shape``
    groups : ndarray of str, ``"normal"`` / ``"uniform"`` per entity
    """
    from .cpd._tensor import reconstruct

    factors, groups = fair_cpd_factors(shape, true_rank, random_state)
    return reconstruct(factors), groups


def load_fair_cpd_tensor(**options) -> AuditData:
    """:func:`fair_cpd_tensor` as tensor :class:`AuditData` (modes entity × item × context)."""
    X, groups = fair_cpd_tensor(**options)
    modes = ("entity", "item", "context", *(f"mode{m + 1}" for m in range(3, X.ndim)))[: X.ndim]
    levels = [[f"{mode[0]}{i + 1}" for i in range(d)] for mode, d in zip(modes, X.shape, strict=True)]
    return tensor_from_arrays(
        X, pd.Series(groups, name="population"), modes=modes, levels=levels, name="fair_cpd_tensor (App. A.8)"
    )


def cpd_tensor() -> pd.DataFrame:
    """A small long-format tensor from :func:`fair_cpd_tensor`'s distribution (App. A.8, true
    rank 10) at 120 users × 10 items × 6 contexts: 60 users of the normal population, 60 of
    the uniform one."""
    X, groups = fair_cpd_tensor(shape=(120, 10, 6), random_state=3)
    users, items, contexts = np.meshgrid(np.arange(120), np.arange(10), np.arange(6), indexing="ij")
    frame = pd.DataFrame(
        {
            "user": [f"u{i + 1:02d}" for i in users.ravel()],
            "item": [f"item{j + 1}" for j in items.ravel()],
            "context": [f"c{k + 1}" for k in contexts.ravel()],
            "score": np.round(X.ravel(), 4),
            "population": groups[users.ravel()],
        }
    )
    return frame


SAMPLES: dict[str, Sample] = {
    "two_groups": Sample(
        name="two_groups",
        title="Two groups with different structure (synthetic; the default)",
        description=(
            "480 rows of group A and 120 of group B, 10 non-negative features and a binary outcome. "
            "A's rows are mixes of parts on x1–x5, B's of other parts on x5–x8; x9 and x10 are "
            "proxies of the group. Vanilla methods follow the majority."
        ),
        sensitive=("group",),
        label="outcome",
    ),
    "nmf_table1": Sample(
        name="nmf_table1",
        title="Three non-negative groups (Fairer-NMF Table 1, synthetic)",
        description="Groups of 1000, 500 and 250 rows with ranks 3, 3 and 6 over 20 non-negative features.",
        sensitive=("group",),
        scaling="none",
    ),
    "diabetes": Sample(
        name="diabetes",
        title="Diabetes patients by sex (scikit-learn's diabetes data)",
        description="442 patients, 9 clinical features; sensitive attribute sex (1/2).",
        sensitive=("sex",),
        ignore=("disease_progression",),
    ),
}

SAMPLES["subgroups"] = Sample(
    name="subgroups",
    title="Two sensitive columns with a badly served intersection (synthetic)",
    description=(
        "2,000 rows, 6 features, sensitive age_band and region (3 values each); the intersection "
        "age_band=old & region=west (3 % of the rows) varies along the directions the others vary least in. "
        "Search it for the worst-served subgroup (PCA page)."
    ),
    sensitive=("age_band", "region"),
)

SAMPLES["cpd_tensor"] = Sample(
    name="cpd_tensor",
    title="Users × items × contexts, two populations (synthetic tensor, Kim & Gittens 2021, App. A.8)",
    description=(
        "A long-format tensor: one line per (user, item, context) score; 120 users in two populations "
        "drawn as in Kim & Gittens' synthetic experiment (App. A.8): half with Gaussian embeddings "
        "(means 1–10), half uniform on [0, 1]. Audit it with the CP family."
    ),
    sensitive=("population",),
    scaling="none",
    tensor_index=("user", "item", "context"),
    tensor_value="score",
)

DEFAULT_SAMPLE = "two_groups"

_GENERATORS = {"two_groups": two_groups, "nmf_table1": nmf_table1, "diabetes": diabetes, "subgroups": planted_subgroup,
               "cpd_tensor": cpd_tensor}


def sample_frame(name: str) -> pd.DataFrame:
    if name not in _GENERATORS:
        raise KeyError(f"unknown sample {name!r}; available: {', '.join(SAMPLES)}")
    return _GENERATORS[name]()


def sample_bytes(name: str) -> bytes:
    """The CSV file of a sample, byte for byte as :func:`write_samples` writes it."""
    buffer = io.StringIO()
    sample_frame(name).to_csv(buffer, index=False, lineterminator="\n")
    return buffer.getvalue().encode("utf-8")


def load_sample(name: str = DEFAULT_SAMPLE, **overrides) -> AuditData:
    """A sample as :class:`AuditData`, read through the same boundary as an upload."""
    sample = SAMPLES[name]
    table = read_table(sample_bytes(name), name=sample.file_name)
    if sample.tensor_index:
        options = {"index": list(sample.tensor_index), "value": sample.tensor_value, "sensitive": list(sample.sensitive), "scaling": sample.scaling}
        options.update(overrides)
        return prepare_tensor(table, **options)
    options = {"sensitive": list(sample.sensitive), "ignore": list(sample.ignore), "label": sample.label, "scaling": sample.scaling}
    options.update(overrides)
    return prepare(table, **options)


def write_samples(folder: str | Path = DEFAULT_FOLDER) -> list[Path]:
    """Write every sample to ``folder`` as CSV; returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, sample in SAMPLES.items():
        path = folder / sample.file_name
        path.write_bytes(sample_bytes(name))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0]) if argv else DEFAULT_FOLDER
    for path in write_samples(folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
