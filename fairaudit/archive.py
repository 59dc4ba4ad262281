"""ZIP archives and NumPy arrays a user hands over, read without trusting their headers.

* **A ZIP member is inflated only within limits**: before a byte is inflated, the size its
  header declares (``ZipInfo.file_size``) must be below the caller's cap and at most
  :data:`MAX_RATIO` times its compressed size (a 1 MB ZIP that inflates to 1 GiB is a ZIP bomb,
  not a model); while inflating, reading stops past the declared size (a header can lie).
* **A ``.npy`` array is read only as far as its bytes go**: the dtype and shape of its header are
  checked against the bytes the file really holds before anything is allocated (a header can
  claim 10¹¹ × 10 values in 200 bytes); no pickle, and only real numbers (booleans, integers,
  floats) — text, Python objects, complex numbers, dates and structured arrays are refused with
  what they hold.
"""

from __future__ import annotations

import io
import lzma
import struct
import zipfile
import zlib

import numpy as np

from .errors import FairAuditError
from .schema import shown

MAX_RATIO = 100
"""Largest inflated-to-compressed size ratio of a member (fairaudit's own ZIPs: below 10)."""

RATIO_FLOOR = 1 << 20
"""Members that inflate to less than this (1 MiB) are not held to :data:`MAX_RATIO`."""

MAX_MEMBERS = 10_000

REAL_KINDS = "biuf"
"""NumPy dtype kinds read as numbers: booleans, signed and unsigned integers, floats."""

_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, struct.error, ValueError,
               NotImplementedError, RuntimeError)
"""What ``zipfile`` raises for a damaged, encrypted or unsupported archive."""

_KIND_WORDS = {
    "O": "Python objects, which could only be read with pickle (fairaudit never unpickles a file)",
    "c": "complex numbers (give real numbers: the imaginary part would be lost)",
    "U": "text, not numbers",
    "S": "bytes of text, not numbers",
    "M": "dates, not numbers",
    "m": "time spans, not numbers",
    "V": "raw bytes, not numbers",
}


def open_zip(raw: bytes, where: str, error: type[FairAuditError]) -> zipfile.ZipFile:
    """``raw`` as a ZIP archive (its directory read, nothing inflated), or ``error``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        infos = archive.infolist()
    except _ZIP_ERRORS:
        raise error(f"{where} is not a ZIP archive that can be read.") from None
    if len(infos) > MAX_MEMBERS:
        raise error(f"{where} holds {len(infos):,} files; a model holds two.")
    return archive


def members(archive: zipfile.ZipFile, where: str, error: type[FairAuditError]) -> dict[str, zipfile.ZipInfo]:
    """The archive's files by name (folders left out); a name given twice is refused (which of
    the two would be read is up to the reader)."""
    found: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        if not info.filename:  # zipfile's is_dir() would fail on it
            raise error(f"{where} holds a file without a name; it is damaged or was altered.")
        if info.is_dir():
            continue
        if info.filename in found:
            raise error(f"{where} holds {shown(info.filename)} twice; it is damaged or was altered.")
        found[info.filename] = info
    return found


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, error: type[FairAuditError], *, max_bytes: int) -> bytes:
    """The bytes of one member, inflated within the limits of the module docstring."""
    name = f"{where}: {shown(info.filename)}"
    if info.file_size > max_bytes:
        raise error(f"{name} would inflate to {info.file_size / 2**20:,.1f} MB, above the {max_bytes / 2**20:,.0f} MB a "
                    "model file may have; it is not read.")
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise error(f"{name} would inflate {info.file_size / max(info.compress_size, 1):,.0f} times (from {info.compress_size:,} "
                    f"to {info.file_size:,} bytes); a file compressed that far is a ZIP bomb, not a model, and it is not read.")
    parts, total = [], 0
    try:
        with archive.open(info) as stream:
            while piece := stream.read(1 << 20):
                total += len(piece)
                if total > info.file_size:
                    raise error(f"{name} inflates beyond the size its header declares; it is damaged or was altered.")
                parts.append(piece)
    except _ZIP_ERRORS:
        raise error(f"{name} cannot be inflated (damaged, encrypted or compressed in a way ZIP readers do not share).") from None
    return b"".join(parts)


def read_npy(raw: bytes, where: str, error: type[FairAuditError]) -> np.ndarray:
    """A ``.npy`` file's array (read-only, no copy of the numbers), its header checked against
    its bytes first; real numbers only (:data:`REAL_KINDS`)."""
    stream = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"format version {version[0]}.{version[1]} (fairaudit reads versions 1 and 2)")
    except Exception as exc:  # noqa: BLE001 - NumPy parses the header text (ast, tokenize): whatever it raises, this is no array file
        raise error(f"{where} is not a NumPy array file ({' '.join(str(exc).split())[:160]}).") from None
    if dtype.names is not None:
        raise error(f"{where} is a structured array (fields {', '.join(map(repr, dtype.names[:6]))}); save a plain array of numbers.")
    if dtype.kind not in REAL_KINDS:
        raise error(f"{where} holds {_KIND_WORDS.get(dtype.kind, f'values of type {dtype}')}.")
    count = int(np.prod(shape, dtype=object)) if shape else 1
    held = len(raw) - stream.tell()
    if count * dtype.itemsize != held:
        raise error(
            f"{where} is damaged: its header claims {' × '.join(map(str, shape)) or 'one value'} values of {dtype} "
            f"({count * dtype.itemsize:,} bytes), but it holds {held:,} bytes of data."
        )
    array = np.frombuffer(raw, dtype=dtype, count=count, offset=stream.tell())
    return array.reshape(shape, order="F" if fortran else "C")


def read_npz(raw: bytes, where: str, error: type[FairAuditError], *, max_bytes: int) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive (``np.savez``'s), by name, each member inflated within
    the limits and read by :func:`read_npy`."""
    archive = open_zip(raw, where, error)
    arrays = {}
    for name, info in members(archive, where, error).items():
        if not name.endswith(".npy"):
            raise error(f"{where} holds {shown(name)}, which is not a NumPy array; it is not an .npz of a fairaudit model.")
        content = read_member(archive, info, where, error, max_bytes=max_bytes)
        arrays[name.removesuffix(".npy")] = read_npy(content, f"{where}: {shown(name)}", error)
    return arrays
