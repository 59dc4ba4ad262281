"""A fitted model's files as a user hands them over — its folder, the folder's ``manifest.json``, a
ZIP of the two files, or that ZIP's bytes (an upload) — read safely and checked against the
manifest's declared schema before any array is used.

What this reader promises (issue 27):

* only regular files are opened (a FIFO would block, ``/dev/zero`` never ends), each read with a
  size limit (:data:`MAX_MODEL_BYTES`, :data:`MAX_MANIFEST_BYTES`); a ZIP's members are inflated
  within limits (:mod:`fairaudit.archive`: absolute cap, ratio cap, stop past the declared size);
* the manifest is JSON read with a nesting guard (:mod:`fairaudit.jsonfile`) and validated against
  :data:`MANIFEST` (:mod:`fairaudit.schema`): every field the loader uses has its type, size and
  finite numbers checked, and one message names the file and the field;
* ``arrays_sha256`` is required: a manifest without it is refused, so a model whose arrays were
  changed or swapped is always refused (the arrays are checked against it before they are read).

The arrays each kind needs, and their shapes, are declared by the kind
(:attr:`fairaudit.models.PortableModel.arrays_spec`) and checked by :mod:`fairaudit.models`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .archive import members, open_zip, read_member
from .data import check_path
from .data._source import Source
from .errors import ModelFileError
from .jsonfile import read_json_bytes
from .schema import ANY, Fields, Items, Keyed, Nullable, Number, Text, Whole, validate

FORMAT = "fairaudit-model"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
ARRAYS_FILE = "arrays.npz"
INDEX_FILE = "models.json"
"""An export of several models writes one directory per model and this index next to them."""

MAX_MODEL_BYTES = 1 << 30
"""Largest model file (a ZIP, or ``arrays.npz``) read, and largest array file inflated: 1 GiB."""

MAX_MANIFEST_BYTES = 64 << 20
"""Largest manifest read (one of 100,000 features takes about 7 MB)."""

NAME = r"[A-Za-z0-9_.\-]{1,200}"
_MANY = 1_000_000

MANIFEST = Fields(
    required={
        "format": Text(choices=(FORMAT,)),
        "format_version": Whole(1, FORMAT_VERSION),
        "kind": Text(64),  # the kinds are checked by fairaudit.models (its table of kinds)
        "method": Text(64, r"[a-z][a-z0-9_]*", "a method name (lower-case letters, digits, '_')"),
        "variant": Text(216, NAME + r"(\+leace)?(@[0-9]{1,9})?", "a variant name (letters, digits, '_', '.', '-', optionally '+leace')"),
        "rank": Whole(1, _MANY),
        "features": Items(Text(1000), min=1, max=_MANY, unique=True),
        "outputs": Items(Text(1000), min=1, max=_MANY, unique=True),
        "preprocessing": Fields(
            required={"center": Items(Number(), max=_MANY), "scale": Items(Number(positive=True), max=_MANY)},
            optional={"clip_lower": Nullable(Number()), "steps": Items(Text(1000), max=100), "formula": Text(1000)},
        ),
        "arrays": Keyed(Fields(required={"shape": Items(Whole(0, 2**40), max=8)}, optional={"dtype": Text(64)}), max=100),
        "arrays_sha256": Text(64, r"[0-9a-f]{64}", "a SHA-256 (64 hexadecimal digits)"),
    },
    optional={
        "fairaudit_version": Text(64),
        "created": Text(64),
        "title": Text(1000),
        "notes": Items(Text(), max=100),
        "sensitive": Items(Text(1000), max=1000),
        "groups": Keyed(Whole()),
        "data": Fields(optional={"name": Nullable(Text(1000)), "sha256": Nullable(Text(64)), "rows": Nullable(Whole())}),
        "tensor_shape": Nullable(Items(Whole(1, 2**31), min=1, max=7)),
        "tensor_modes": Nullable(Items(Text(1000), max=7)),
        "n_factors": Whole(2, 8),
        "estimator": ANY,
        "options": ANY,
        "audit": ANY,
        "refit": ANY,
    },
)
"""The manifest's declared schema: every field the loader reads, typed and bounded; other fields
are kept as they are (their strings checked)."""


def model_files(source) -> list[Path]:
    """The files a model source consists of, without opening any (for the rule that no output
    is an input, :func:`fairaudit.paths.check_outputs`): a ZIP itself, or a folder's manifest and arrays."""
    path = Path(source)
    if path.is_dir():
        return [path / MANIFEST_FILE, path / ARRAYS_FILE]
    if path.name == MANIFEST_FILE:
        return [path, path.parent / ARRAYS_FILE]
    return [path]


def read_model_source(source) -> tuple[bytes, bytes, str, str]:
    """``(manifest bytes, arrays bytes, where the model is, where its manifest is)`` from a model
    folder, its manifest, a ZIP of the two (a path, bytes or a file object)."""
    if isinstance(source, bytes | bytearray) or hasattr(source, "read"):
        name = str(getattr(source, "name", "") or "the uploaded model")
        raw = bytes(source) if isinstance(source, bytes | bytearray) else source.read(MAX_MODEL_BYTES + 1)
        if len(raw) > MAX_MODEL_BYTES:
            raise ModelFileError(f"{name} is larger than {MAX_MODEL_BYTES / 2**20:,.0f} MB; it is not a model fairaudit wrote.")
        return _read_zip(raw, name)
    path = Path(source)
    if path.name == MANIFEST_FILE and not path.is_dir():
        path = path.parent
    if path.is_dir():
        return _read_folder(path)
    if not path.exists():
        raise ModelFileError(f"{path} does not exist; give a directory written by --export-model (it holds {MANIFEST_FILE}).")
    raw = _read_file(path, MAX_MODEL_BYTES, str(path))
    if not raw.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise ModelFileError(f"{path} is neither a model directory nor a ZIP of one; give the directory holding {MANIFEST_FILE} and {ARRAYS_FILE}.")
    return _read_zip(raw, str(path))


def _read_file(path: Path, max_bytes: int, where: str) -> bytes:
    """A regular file's bytes (a FIFO, a device — a symlink to ``/dev/zero`` too — or a folder is
    refused before it is opened), at most ``max_bytes`` of them."""
    info = check_path(path)
    if info.st_size > max_bytes:
        raise ModelFileError(f"{where} is {info.st_size / 2**20:,.1f} MB, above the {max_bytes / 2**20:,.0f} MB a model file may have; "
                             "it is not read.")
    with Source(name=where, size=info.st_size, path=path).open() as stream:
        raw = stream.read(max_bytes + 1)
    if len(raw) > max_bytes:  # it grew since it was checked
        raise ModelFileError(f"{where} is larger than {max_bytes / 2**20:,.0f} MB; it is not read.")
    return raw


def _read_folder(path: Path) -> tuple[bytes, bytes, str, str]:
    manifest_path = path / MANIFEST_FILE
    if not os.path.lexists(manifest_path):
        inside = sorted(p.parent.name for p in path.glob(f"*/{MANIFEST_FILE}"))
        if inside:
            raise ModelFileError(
                f"{path} holds {len(inside)} models; name one of them: {', '.join(str(path / n) for n in inside[:6])}"
                f"{' …' if len(inside) > 6 else ''}."
            )
        raise ModelFileError(f"{path} holds no {MANIFEST_FILE}; give a directory written by --export-model.")
    if not os.path.lexists(path / ARRAYS_FILE):
        raise ModelFileError(f"{path} has a manifest but no {ARRAYS_FILE}; copy both files of the model.")
    manifest = _read_file(manifest_path, MAX_MANIFEST_BYTES, str(manifest_path))
    return manifest, _read_file(path / ARRAYS_FILE, MAX_MODEL_BYTES, str(path / ARRAYS_FILE)), str(path), str(manifest_path)


def _read_zip(raw: bytes, where: str) -> tuple[bytes, bytes, str, str]:
    archive = open_zip(raw, where, ModelFileError)
    by_name: dict[str, list] = {}
    for name, info in members(archive, where, ModelFileError).items():
        by_name.setdefault(Path(name).name, []).append(info)
    for needed in (MANIFEST_FILE, ARRAYS_FILE):
        if needed not in by_name:
            raise ModelFileError(f"{where} does not hold a model: it needs {MANIFEST_FILE} and {ARRAYS_FILE}.")
        if len(by_name[needed]) > 1:
            raise ModelFileError(f"{where} holds {len(by_name[needed])} files named {needed}; a ZIP of a model holds one of each.")
    manifest = read_member(archive, by_name[MANIFEST_FILE][0], where, ModelFileError, max_bytes=MAX_MANIFEST_BYTES)
    arrays = read_member(archive, by_name[ARRAYS_FILE][0], where, ModelFileError, max_bytes=MAX_MODEL_BYTES)
    return manifest, arrays, where, f"{where} ({MANIFEST_FILE})"


def parse_manifest(raw: bytes, where: str, kinds) -> dict:
    """The manifest's JSON validated against :data:`MANIFEST` (``kinds``: the kinds a model may
    be), and its fields checked against each other (as many preprocessing values as features,
    a tensor shape that holds the features)."""
    manifest = read_json_bytes(raw, where, ModelFileError, max_bytes=MAX_MANIFEST_BYTES)
    if manifest.get("format") != FORMAT:
        raise ModelFileError(f"{where} is not a fairaudit model manifest (format {FORMAT!r}).")
    version = manifest.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ModelFileError(
            f"{where} uses model format version {version}; this fairaudit reads versions up to {FORMAT_VERSION}. Upgrade fairaudit."
        )
    if "arrays_sha256" not in manifest:
        raise ModelFileError(
            f"{where} has no arrays_sha256, so its arrays cannot be checked against it; a model whose arrays may have been "
            "changed or swapped is refused. Export the model again with fairaudit."
        )
    manifest = validate(manifest, MANIFEST, where, ModelFileError)
    if manifest["kind"] not in kinds:
        raise ModelFileError(f"{where} describes a model of kind {manifest['kind']!r}; known kinds: {', '.join(kinds)}.")
    n = len(manifest["features"])
    for name in ("center", "scale"):
        if len(manifest["preprocessing"][name]) != n:
            raise ModelFileError(
                f"{where}: field 'preprocessing.{name}' has {len(manifest['preprocessing'][name])} values for {n} features; "
                "it needs one per feature. The manifest is damaged."
            )
    shape = manifest.get("tensor_shape")
    if shape is not None and _product(shape) != n:
        raise ModelFileError(
            f"{where}: field 'tensor_shape' {shape} holds {_product(shape):,} cells per entity, but the model has {n} features; "
            "the manifest is damaged."
        )
    return manifest


def _product(values) -> int:
    out = 1
    for value in values:
        out *= int(value)
    return out
