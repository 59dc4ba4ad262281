"""The corpus of hostile files for the model, report and representation readers (issue 27, items
2–5): each case is a file built to break a reader and the command that hands it over, with the
exit status and the words the refusal must have. ``tests/test_readers_hostile.py`` runs them all
in one child process and measures its time and memory; the fuzz tests start from the valid files
made here."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROWS = 120
DATA = "sex,age,income,score,tenure\n" + "".join(
    f"{'FM'[i % 2]},{20 + (i * 7) % 41},{100 + (13 * i) % 57 + 3 * (i % 2)},{(i * 5) % 11},{(i * 3) % 17}\n" for i in range(ROWS)
)


@dataclass
class Case:
    """``argv`` (``{root}`` is the corpus folder), the expected exit status, and a text the one
    line on stderr (status 2) or standard output (status 0) must hold."""

    id: str
    argv: list[str]
    status: int
    message: str
    quiet: bool = True
    absent: list[str] = field(default_factory=list)  # texts the output must not hold


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npy(array, *, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def zipped(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def bomb(members: dict[str, bytes], name: str, size: int) -> bytes:
    """A ZIP of ``members`` and of ``name``: ``size`` zero bytes, deflated (1,000 to 1), written in
    pieces so that making it never holds them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
        with archive.open(name, "w", force_zip64=True) as stream:
            zeros = bytes(1 << 20)
            for _ in range(size >> 20):
                stream.write(zeros)
    return buffer.getvalue()


def sealed(manifest: dict, arrays: dict[str, np.ndarray] | None = None, blob: bytes | None = None) -> tuple[dict, bytes]:
    """``manifest`` whose ``arrays`` and ``arrays_sha256`` describe ``arrays`` (or ``blob``):
    a model as consistent as an attacker who recomputes the checksum can make it."""
    blob = npz(**arrays) if blob is None else blob
    manifest = copy.deepcopy(manifest)
    if arrays is not None:
        manifest["arrays"] = {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in arrays.items()}
    manifest["arrays_sha256"] = hashlib.sha256(blob).hexdigest()
    return manifest, blob


def write_model(folder: Path, manifest: dict | str | bytes, blob: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = manifest if isinstance(manifest, str | bytes) else json.dumps(manifest)
    (folder / "manifest.json").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    (folder / "arrays.npz").write_bytes(blob)
    return folder


def build_valid(root: Path) -> None:
    """The valid files into ``root``: ``data.csv``, its audit's models (``models/``, one of them
    also as ``model.zip``) and report (``good.json``)."""
    from fairaudit.cli import main

    (root / "data.csv").write_text(DATA, encoding="utf-8")
    assert main(["audit", str(root / "data.csv"), "--sensitive", "sex", "--ranks", "1:2", "--variants", "vanilla,fair_eig",
                 "--export-model", str(root / "models"), "--json", str(root / "good.json"), "--quiet"]) == 0
    good = root / "models" / "pca-vanilla-rank2"
    (root / "model.zip").write_bytes(zipped({"manifest.json": (good / "manifest.json").read_bytes(), "arrays.npz": (good / "arrays.npz").read_bytes()}))


def build(root: Path) -> list[Case]:
    """Write the valid files and the hostile ones into ``root``; the cases that use them."""
    build_valid(root)
    good = root / "models" / "pca-vanilla-rank2"
    manifest = json.loads((good / "manifest.json").read_text())
    blob = (good / "arrays.npz").read_bytes()
    with np.load(good / "arrays.npz") as stored:
        arrays = {name: stored[name] for name in stored.files}
    report = json.loads((root / "good.json").read_text())
    cases: list[Case] = []

    def model(name: str, status: int, message: str, new_manifest=None, new_blob=None, **options):
        write_model(root / name, manifest if new_manifest is None else new_manifest, blob if new_blob is None else new_blob)
        cases.append(Case(f"model: {name}", ["transform", f"{{root}}/{name}", "{root}/data.csv", "--out", "{root}/out.csv"],
                          status, message, **options))

    def changed(**fields) -> dict:
        out = copy.deepcopy(manifest)
        out.update(fields)
        return out

    # --- the 15 malformed manifests, and others of the same kind
    model("rank-text", 2, "field 'rank' must be a whole number", changed(rank="abc"))
    model("rank-null", 2, "field 'rank' must be a whole number", changed(rank=None))
    model("rank-nan", 2, "NaN is not a JSON number", json.dumps(changed(rank=float("nan"))))
    model("rank-huge-int", 2, "Exceeds the limit", json.dumps(changed(rank=0)).replace('"rank": 0', '"rank": ' + "9" * 5000))
    model("features-not-a-list", 2, "field 'features' must be a list", changed(features="age"))
    model("features-twice", 2, "without repeated values", changed(features=["age", "age", "score", "tenure"]))
    model("preprocessing-text", 2, "field 'preprocessing' must be an object", changed(preprocessing="standardize"))
    model("preprocessing-empty", 2, "lacks the field 'preprocessing.center'", changed(preprocessing={}))
    model("preprocessing-short", 2, "'preprocessing.center' has 2 values for 4 features",
          changed(preprocessing={**manifest["preprocessing"], "center": [0.0, 1.0]}))
    model("scale-zero", 2, "field 'preprocessing.scale[0]' must be a finite number above 0",
          changed(preprocessing={**manifest["preprocessing"], "scale": [0.0, 1.0, 1.0, 1.0]}))
    model("arrays-text", 2, "field 'arrays' must be an object", changed(arrays="abc"))
    model("nested-200000", 2, "nests arrays and objects more than 64 deep", '{"a":' + "[" * 200_000 + "]" * 200_000 + "}")
    model("kind-unknown", 2, "describes a model of kind 'pickle'", changed(kind="pickle"))
    model("version-99", 2, "format version 99", changed(format_version=99))
    model("not-a-manifest", 2, "is not a fairaudit model manifest", changed(format="something"))
    model("key-twice", 2, "gives the field 'rank' twice", json.dumps(manifest)[:-1] + ', "rank": 3}')
    model("surrogate-feature", 2, "lone surrogate", json.dumps(changed(features=["age", "income", "score", "\ud800"])))
    model("empty-manifest", 2, "is not valid JSON", "")
    model("not-utf8", 2, "is not UTF-8 text", b"\xff\xfe{}")
    model("no-sha256", 2, "has no arrays_sha256", {k: v for k, v in manifest.items() if k != "arrays_sha256"},
          npz(**{**arrays, "components": arrays["components"][::-1]}))
    model("swapped-arrays", 2, "does not match its manifest", None, npz(**{**arrays, "components": arrays["components"][::-1]}))
    # --- arrays that do not fit the manifest, or hold what no model holds
    model("components-shape", 2, "field 'arrays.components.shape' is (3, 5)",
          *sealed(manifest, {**arrays, "components": np.ones((3, 5))}))
    model("components-text", 2, "holds text, not numbers", *sealed(manifest, {**arrays, "components": np.full((2, 4), "x")}))
    model("components-nan", 2, "holds NaN or infinite values", *sealed(manifest, {**arrays, "components": np.full((2, 4), np.nan)}))
    model("components-inf", 2, "holds NaN or infinite values", *sealed(manifest, {**arrays, "mean": np.full(4, np.inf)}))
    model("components-complex", 2, "holds complex numbers", *sealed(manifest, {**arrays, "components": arrays["components"] + 1j}))
    model("components-object", 2, "could only be read with pickle",
          *sealed(manifest, blob=zipped({"components.npy": npy(np.array([{"a": 1}], dtype=object), allow_pickle=True)})))
    header = npy(arrays["components"]).replace(b"(2, 4)", b"(100000000000, 10)")
    members = {f"{k}.npy": (header if k == "components" else npy(v)) for k, v in arrays.items()}
    model("npy-header-huge", 2, "its header claims 100000000000 × 10 values", *sealed(manifest, blob=zipped(members)))
    members = {f"{k}.npy": npy(v) for k, v in arrays.items()}
    members["extra.npy"] = npy(np.zeros(3))
    model("npz-extra-array", 2, "holds arrays the manifest does not list", *sealed(manifest, blob=zipped(members)))
    members = {f"{k}.npy": npy(v) for k, v in arrays.items()}
    members["readme.txt"] = b"hello"
    model("npz-not-an-array", 2, "which is not a NumPy array", *sealed(manifest, blob=zipped(members)))
    inner_bomb = bomb({f"{k}.npy": npy(v) for k, v in arrays.items() if k != "components"}, "components.npy", 64 << 20)
    model("npz-member-bomb", 2, "is a ZIP bomb", *sealed(manifest, blob=inner_bomb))
    selection = changed(kind="selection", method="fs", variant="variance", outputs=["age"])
    model("selection-index-100", 2, "column index 100, outside the model's 4 features",
          *sealed(selection, {"selected": np.array([100])}))
    model("selection-twice", 2, "holds a column index twice",
          *sealed({**selection, "outputs": ["age", "income"]}, {"selected": np.array([0, 0])}))
    model("selection-floats", 2, "needs whole numbers", *sealed(selection, {"selected": np.array([0.0])}))
    model("selection-outputs", 2, "outputs are not the features", *sealed(selection, {"selected": np.array([1])}))
    nmf = changed(kind="nmf", method="nmf", variant="vanilla", outputs=["w1", "w2"])
    model("nmf-negative", 2, "holds negative values", *sealed(nmf, {"H": -np.ones((2, 4))}))
    cp = changed(kind="cp", method="cpd", variant="vanilla", outputs=["a1", "a2"], n_factors=3)
    model("cp-factors", 2, "n_factors is 3", *sealed(cp, {"factor_1": np.ones((4, 2)), "normalisation": np.ones(2)}))
    # --- a valid model whose words would write to the terminal: printed escaped
    model("title-escapes", 0, "\\x1b[2J", changed(title="\x1b[2J\u202eevil \u27e6max_mb\u27e7", notes=["\x1b]0;owned\x07"]),
          quiet=False, absent=["\x1b", "\u202e", "--max-mb"])
    # --- files that are not what they seem
    fifo = root / "fifo"
    fifo.mkdir()
    (fifo / "arrays.npz").write_bytes(blob)
    os.mkfifo(fifo / "manifest.json")
    cases.append(Case("model: manifest is a FIFO", ["transform", "{root}/fifo", "{root}/data.csv", "--out", "{root}/out.csv"], 2,
                      "is a pipe (FIFO), not a regular file"))
    device = root / "device"
    device.mkdir()
    (device / "arrays.npz").write_bytes(blob)
    os.symlink("/dev/zero", device / "manifest.json")
    cases.append(Case("model: manifest is /dev/zero", ["transform", "{root}/device", "{root}/data.csv", "--out", "{root}/out.csv"], 2,
                      "is a device, not a regular file"))
    (root / "folder-manifest" / "manifest.json").mkdir(parents=True)
    cases.append(Case("model: manifest.json is a folder", ["transform", "{root}/folder-manifest", "{root}/data.csv", "--out",
                                                           "{root}/out.csv"], 2, "no arrays.npz"))
    # --- ZIPs
    text = (good / "manifest.json").read_bytes()

    def zip_case(name: str, content: bytes, message: str):
        (root / name).write_bytes(content)
        cases.append(Case(f"zip: {name}", ["transform", f"{{root}}/{name}", "{root}/data.csv", "--out", "{root}/out.csv"], 2, message))

    zip_case("bomb-arrays.zip", bomb({"manifest.json": text}, "arrays.npz", 1 << 30), "is a ZIP bomb")
    zip_case("bomb-manifest.zip", bomb({"arrays.npz": blob}, "manifest.json", 1 << 30), "above the 64 MB")
    zip_case("two-manifests.zip", zipped({"a/manifest.json": text, "b/manifest.json": text, "arrays.npz": blob}), "2 files named manifest.json")
    zip_case("truncated.zip", (root / "model.zip").read_bytes()[:300], "is not a ZIP archive that can be read")
    zip_case("no-arrays.zip", zipped({"manifest.json": text}), "needs manifest.json and arrays.npz")
    corrupt = bytearray((root / "model.zip").read_bytes())
    at = corrupt.find(b"arrays.npz") + 40
    corrupt[at:at + 64] = bytes(64)
    zip_case("corrupt.zip", bytes(corrupt), "cannot be inflated")
    # --- the transform's outputs: never an input, nor a file of the input model
    cases += [
        Case("output: the model's ZIP", ["transform", "{root}/model.zip", "{root}/data.csv", "--out", "{root}/model.zip"], 2,
             "is the input model, which is never overwritten"),
        Case("output: the model's arrays", ["transform", "{root}/models/pca-vanilla-rank2/manifest.json", "{root}/data.csv", "--out",
                                            "{root}/models/pca-vanilla-rank2/arrays.npz"], 2, "is an input file of the model"),
        Case("output: a link to the model's ZIP", ["transform", "{root}/model.zip", "{root}/data.csv", "--out", "{root}/link.zip"], 2,
             "is the input model"),
        Case("output: a hard link to the arrays", ["transform", "{root}/models/pca-vanilla-rank2", "{root}/data.csv", "--out",
                                                   "{root}/hard.npz"], 2, "is an input file of the model"),
        Case("export: over the components", ["audit", "{root}/data.csv", "--sensitive", "sex", "--components",
                                             "{root}/models/pca-vanilla-rank2/arrays.npz", "--export-model", "{root}/models"], 2,
             "would write over an input file"),
        Case("model: a valid ZIP", ["transform", "{root}/model.zip", "{root}/data.csv", "--out", "{root}/out.csv"], 0, ""),
    ]
    os.symlink(root / "model.zip", root / "link.zip")
    os.link(good / "arrays.npz", root / "hard.npz")

    # --- reports
    def report_case(name: str, content, status: int, message: str, **options):
        path = root / name
        path.write_bytes(content if isinstance(content, bytes) else (content if isinstance(content, str) else json.dumps(content)).encode("utf-8", "surrogatepass"))
        cases.append(Case(f"report: {name}", ["compare", "{root}/good.json", f"{{root}}/{name}", "--json", "{root}/compared.json"],
                          status, message, **options))

    def altered(change) -> dict:
        out = copy.deepcopy(report)
        change(out)
        return out

    def first_record(field_name, value):
        return altered(lambda r: r["records"][0].__setitem__(field_name, value))

    for depth in (5_000, 100_000):
        report_case(f"nested-{depth}.json", '{"fairaudit_version": "1", "records": [], "config": ' + "[" * depth + "]" * depth + "}", 2,
                    "nests arrays and objects more than 64 deep")
    report_case("data-text.json", altered(lambda r: r.__setitem__("data", "abc")), 2, "field 'data' must be an object")
    report_case("data-null.json", altered(lambda r: r.__setitem__("data", None)), 2, "field 'data' must be an object; it is null")
    report_case("method-object.json", first_record("method", {"x": 1}), 2, "field 'records[0].method' must be a method name")
    report_case("rank-1e300.json", first_record("rank", 1e300), 2, "field 'records[0].rank' must be a whole number")
    report_case("variant-at.json", first_record("variant", "vanilla@x"), 2, "field 'records[0].variant' must be a variant name")
    report_case("value-text.json", first_record("value", "abc"), 2, "field 'records[0].value' must be a finite number")
    report_case("records-text.json", altered(lambda r: r.__setitem__("records", "abc")), 2, "field 'records' must be a list")
    report_case("comparisons-text.json", altered(lambda r: r.__setitem__("comparisons", "abc")), 2, "field 'comparisons' must be a list")
    report_case("comparison-rows-null.json", altered(lambda r: r["comparisons"][0].__setitem__("rows", None)), 2,
                "field 'comparisons[0].rows' must be a whole number")
    report_case("comparison-p-text.json", altered(lambda r: r["comparisons"][-1].__setitem__("p_bootstrap", "0.01")), 2,
                "must be a finite number")
    report_case("findings-text.json", altered(lambda r: r.__setitem__("findings", "abc")), 2, "field 'findings' must be a list")
    report_case("flag-ratio-text.json", altered(lambda r: r["config"].__setitem__("flag_ratio", "abc")), 2, "field 'config.flag_ratio'")
    report_case("options-list.json", altered(lambda r: r["config"].__setitem__("options", [1])), 2, "field 'config.options' must be an object")
    report_case("degenerate-rank.json", altered(lambda r: r.__setitem__("uncertainty", {"pca": {"degenerate_ranks": {"x": "y"}}})), 2,
                "must be a rank")
    report_case("surrogate.json", json.dumps(first_record("group", "\ud800")), 2, "lone surrogate")
    report_case("digits.json", '{"fairaudit_version": "1", "records": [], "seconds": ' + "1" * 5000 + "}", 2, "Exceeds the limit")
    report_case("nan.json", json.dumps(first_record("value", float("nan"))), 2, "NaN is not a JSON number")
    report_case("key-twice.json", json.dumps(report)[:-1] + ', "records": []}', 2, "gives the field 'records' twice")
    report_case("record-twice.json", altered(lambda r: r["records"].append(dict(r["records"][0]))), 2, "has two records for")
    report_case("not-utf8.json", b'{"fairaudit_version": "\xff"}', 2, "is not UTF-8 text")
    report_case("truncated.json", (root / "good.json").read_bytes()[:1000], 2, "is not valid JSON")
    report_case("zip.json", (root / "model.zip").read_bytes(), 2, "is not UTF-8 text")
    report_case("escapes.json", altered(lambda r: [rec.__setitem__("group", f"\x1b[31m{rec['group']}\u202e") for rec in r["records"] if rec["group"]]),
                0, "only in escapes.json", quiet=False, absent=["\x1b", "\u202e"])
    os.mkfifo(root / "fifo.json")
    os.symlink("/dev/zero", root / "zero.json")
    cases += [
        Case("report: a FIFO", ["compare", "{root}/good.json", "{root}/fifo.json"], 2, "is a pipe (FIFO), not a regular file"),
        Case("report: /dev/zero", ["compare", "{root}/good.json", "{root}/zero.json"], 2, "is a device, not a regular file"),
        Case("report: compared with itself, printed", ["compare", "{root}/good.json", "{root}/good.json"], 0, "the same", quiet=False),
    ]

    # --- your representation: .npy files and CSVs
    def yours(name: str, content: bytes, status: int, message: str, flag: str = "--embedding", **options):
        (root / name).write_bytes(content)
        cases.append(Case(f"yours: {name}", ["audit", "{root}/data.csv", "--sensitive", "sex", "--ranks", "1:2", "--variants", "vanilla",
                                             flag, f"{{root}}/{name}"], status, message, **options))

    rng = np.random.default_rng(0)
    yours("text.npy", npy(np.full((ROWS, 2), "a")), 2, "holds text, not numbers")
    yours("structured.npy", npy(np.zeros(ROWS, dtype=[("a", float), ("b", float)])), 2, "is a structured array")
    yours("scalar.npy", npy(np.float64(3.0)), 2, "holds a single number, not a matrix")
    yours("no-columns.npy", npy(np.zeros((ROWS, 0))), 2, "holds an empty array")
    yours("complex.npy", npy(rng.normal(size=(ROWS, 3)) + 1j), 2, "holds complex numbers")
    yours("object.npy", npy(np.array([None] * ROWS, dtype=object), allow_pickle=True), 2, "could only be read with pickle")
    yours("dates.npy", npy(np.array(["2020-01-01"] * ROWS, dtype="datetime64[D]")), 2, "holds dates")
    yours("huge-header.npy", npy(np.zeros((2, 3))).replace(b"(2, 3)", b"(100000000000, 10)"), 2, "its header claims")
    yours("bad-header.npy", b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'shape': (__import__('os'),)}  \n", 2, "is not a NumPy array file")
    yours("nan.npy", npy(np.full((ROWS, 2), np.nan)), 2, "missing or infinite values")
    yours("text.csv", ("e1,e2\n" + "".join(f"{i},x\n" for i in range(ROWS))).encode(), 2, "text 'x'")
    yours("complex.csv", ("e1,e2\n" + "".join(f"{i},1+2j\n" for i in range(ROWS))).encode(), 2, "text '1+2j'")
    yours("valid.npy", npy(rng.normal(size=(ROWS, 3))), 0, "yours (pca): From your rank-3 representation", quiet=False)
    yours("components-complex.npy", npy(rng.normal(size=(2, 4)) + 1j), 2, "holds complex numbers", flag="--components")
    yours("components-huge.npy", npy(np.zeros((2, 4))).replace(b"(2, 4)", b"(100000000000, 10)"), 2, "its header claims",
          flag="--components")
    yours("components-valid.npy", npy(rng.normal(size=(2, 4))), 0, "yours (pca): At rank 2, your representation's largest group loss",
          flag="--components", quiet=False)
    return cases
