"""Fuzz of the model and report readers (issue 27): any mutation of a valid manifest, arrays file,
model ZIP or report ends in a model / a comparison that works, or in a clear error (a
:class:`~fairaudit.errors.FairAuditError`) — never another exception — within seconds.

Mutations are structural (a field of the JSON replaced by any JSON value, removed, or one added;
NaN, huge integers, lone surrogates, control characters and the vocabulary's brackets included)
and raw (bytes overwritten). The process's peak memory while they run stays within 600 MB
of what it held before. A mutated manifest is, half of the time, sealed again with the
arrays' checksum, as someone who edits a model on purpose would, so the checks behind the
checksum are reached too."""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fairaudit.compare import compare, render_html, report_with_findings
from fairaudit.errors import FairAuditError
from fairaudit.models import load_model

from .hostile_files import build_valid, zipped

SECONDS = 10
PEAK_MB = 600
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

LEAVES = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(max_size=12) | st.sampled_from(["\ud800", "\x1b[2J", "\u27e6max_mb\u27e7", "", "vanilla@x", "1e400", "group=F"])
)
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    root = tmp_path_factory.mktemp("valid")
    build_valid(root)
    folder = root / "models" / "pca-vanilla-rank2"
    manifest = json.loads((folder / "manifest.json").read_text())
    report = json.loads((root / "good.json").read_text())
    report["records"] = report["records"][:40]  # small: each example reads it
    data = np.loadtxt(root / "data.csv", delimiter=",", skiprows=1, usecols=(1, 2, 3, 4))
    return manifest, (folder / "arrays.npz").read_bytes(), (root / "model.zip").read_bytes(), report, data


def _paths(value, prefix=()):
    """Every place in a JSON value: (path, value) for the value itself and what it holds."""
    yield prefix, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*prefix, i))


def _mutated(document, data) -> object:
    """``document`` with one to three places replaced, removed or given a new field."""
    document = copy.deepcopy(document)
    for _ in range(data.draw(st.integers(1, 3))):
        places = [path for path, _ in _paths(document) if path]
        if not places:
            return data.draw(JSON)
        path = data.draw(st.sampled_from(places))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        action = data.draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "remove":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(max_size=8))] = data.draw(JSON)
        else:
            parent[path[-1]] = data.draw(JSON)
    return document


NUMBERS = st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 1e-300, 1e300, -1e308, 5e-324])
RECORD_EDITS = {
    "value": NUMBERS, "ci_low": NUMBERS, "ci_high": NUMBERS, "rank": st.integers(0, 10**9),
    "group": st.text(max_size=10) | st.sampled_from(["", "=cmd()", "\x1b[31m", "group=A"]),
    "variant": st.sampled_from(["vanilla", "fair_eig", "yours", "khsic@3", "khsic@0", "x.y-z"]),
    "metric": st.sampled_from(["loss", "max_loss", "loss_gap", "seconds", "heldout_loss", "lam", "unknown_metric", "balance"]),
    "method": st.sampled_from(["pca", "nmf", "fs", "cpd", "other"]),
}


def _edited(report, data) -> dict:
    """``report`` with some records' fields set to what a valid report may hold, however odd."""
    report = copy.deepcopy(report)
    for _ in range(data.draw(st.integers(1, 6))):
        record = report["records"][data.draw(st.integers(0, len(report["records"]) - 1))]
        name = data.draw(st.sampled_from(sorted(RECORD_EDITS)))
        record[name] = data.draw(RECORD_EDITS[name])
    return report


def _text(document, data) -> bytes:
    raw = json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        return raw
    mutated = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    return bytes(mutated)


def _use(model, X) -> None:
    """What a user does with a model that loaded: it describes itself and transforms rows into
    finite numbers, or refuses the rows clearly."""
    assert model.describe()
    try:
        out = model.transform(X)
    except FairAuditError:
        return
    assert np.isfinite(out).all()


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith(key))


@pytest.fixture(scope="module", autouse=True)
def memory():
    """The process's peak resident memory is reset when the fuzz starts (Linux's
    ``/proc/self/clear_refs``); each example checks the growth since then."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        start = _status_mb("VmRSS")
    except (OSError, StopIteration):
        pytest.skip("the peak memory of a process is read from Linux's /proc")
    return start


def _within_bounds(began: float, memory: float) -> None:
    """Each example within :data:`SECONDS`, and the fuzz's examples within :data:`PEAK_MB` above
    the memory held when it began (hostile files made with that little: tens of kB)."""
    assert time.perf_counter() - began < SECONDS
    assert _status_mb("VmHWM") - memory < PEAK_MB


@FUZZ
@given(st.data())
def test_any_mutation_of_a_manifest_loads_or_is_refused_clearly(valid, memory, data):
    manifest, blob, _, _, X = valid
    mutated = _mutated(manifest, data)
    if isinstance(mutated, dict) and data.draw(st.booleans()):
        mutated["arrays_sha256"] = hashlib.sha256(blob).hexdigest()  # sealed again
    began = time.perf_counter()
    try:
        model = load_model(zipped({"manifest.json": _text(mutated, data), "arrays.npz": blob}))
    except FairAuditError as exc:
        assert str(exc) and "bug" not in str(exc)
        event(f"refused: {type(exc).__name__}")
    else:
        event("loaded")
        _use(model, X)
    _within_bounds(began, memory)


@FUZZ
@given(st.data())
def test_any_mutation_of_the_arrays_loads_or_is_refused_clearly(valid, memory, data):
    manifest, blob, _, _, X = valid
    mutated = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 8))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    sealed = {**manifest, "arrays_sha256": hashlib.sha256(bytes(mutated)).hexdigest()}
    began = time.perf_counter()
    try:
        model = load_model(zipped({"manifest.json": json.dumps(sealed).encode(), "arrays.npz": bytes(mutated)}))
    except FairAuditError as exc:
        assert str(exc)
    else:
        _use(model, X)
    _within_bounds(began, memory)


@FUZZ
@given(st.data())
def test_any_mutation_of_a_model_zip_loads_or_is_refused_clearly(valid, memory, data):
    _, _, archive, _, X = valid
    mutated = bytearray(archive)
    for _ in range(data.draw(st.integers(1, 8))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    began = time.perf_counter()
    try:
        model = load_model(bytes(mutated))
    except FairAuditError as exc:
        assert str(exc)
    else:
        _use(model, X)
    _within_bounds(began, memory)


@FUZZ
@given(st.data())
def test_any_mutation_of_a_report_compares_or_is_refused_clearly(valid, memory, data):
    *_, report, _ = valid
    original = json.dumps(report).encode()
    if data.draw(st.booleans()):
        report = copy.deepcopy(report)
        report.pop("findings", None)  # the findings are then worked out from the records
    if data.draw(st.booleans()):
        mutated = _text(_mutated(report, data), data)
    else:  # a report that is valid but strange: values, groups, variants, ranks a real one would not have
        mutated = json.dumps(_edited(report, data), allow_nan=False).encode("utf-8", "surrogatepass")
    began = time.perf_counter()
    try:
        (a, found_a), (b, found_b) = report_with_findings(original, name="a.json"), report_with_findings(mutated, name="b.json")
        comparison = compare(a, b, names=("a", "b"), findings=(found_a, found_b))
    except FairAuditError as exc:
        assert str(exc)
        event(f"refused: {str(exc).split(':')[1][:30] if ':' in str(exc) else str(exc)[:30]}")
    else:
        event(f"compared ({len(comparison.changed)} changed)" if len(comparison.changed) else "compared")
        assert "</html>" in render_html(comparison)
        rows = json.loads(comparison.to_json())["rows"]
        # counted as CSV records: a mutated name may hold a line break (quoted) or a character
        # str.splitlines() breaks on and CSV does not (U+2028, \x1c …)
        assert len(rows) == len(comparison.table) == len(list(csv.reader(io.StringIO(comparison.to_csv(), newline="")))) - 1
        comparison.summary()
    _within_bounds(began, memory)
