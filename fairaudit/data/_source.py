"""Opening what the user gave us, safely, and one pass over its bytes.

A source is a path, bytes (an upload) or a binary/text file object. Before anything is read:
paths that are not regular files (FIFOs, character or block devices, sockets, folders) are
refused — opening a FIFO would block and a device may never end — and a size limit is checked
against the size on disk. Streams have no trustworthy size, so at most ``max_bytes + 1`` bytes
are ever read from them. The source is only read, never written.

:func:`scan` reads the bytes once in chunks and records what the readers need to know without
holding them: the SHA-256 of the file, whether it is valid UTF-8 (and where it stops being
so), NUL bytes, bytes that Windows-1252 cannot decode, line terminators, quote characters.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import math
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import (
    FairAuditError,
    FileTooLargeError,
    InputFileNotFound,
    ParameterError,
)
from ..vocabulary import term

CHUNK = 4 << 20
"""Bytes read per step of a scan (4 MiB)."""
_TAIL = 1 << 16

_CP1252_UNDEFINED = (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")
_KINDS = (
    (stat.S_ISFIFO, "a pipe (FIFO)"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def max_bytes_for(max_mb) -> int:
    """The byte limit for ``max_mb`` megabytes; a finite positive number or a ParameterError."""
    try:
        value = float(max_mb)
    except (TypeError, ValueError):
        raise ParameterError(f"the size limit must be a number of megabytes; got {max_mb!r} ({term('max_mb')}).") from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"the size limit must be a finite number of megabytes above 0; got {max_mb!r} ({term('max_mb')}).")
    return max(1, int(value * 2**20))


def too_large(name: str, size: int, max_bytes: int, *, at_least: bool = False) -> FileTooLargeError:
    shown = f"more than {max_bytes / 2**20:.1f}" if at_least else f"{size / 2**20:.1f}"
    return FileTooLargeError(
        f"{name} is {shown} MB, above the {max_bytes / 2**20:g} MB limit; sample or split the rows, "
        f"or raise {term('max_mb')}."
    )


def _kind(mode: int) -> str | None:
    return next((what for test, what in _KINDS if test(mode)), None)


@dataclass(frozen=True)
class Source:
    """Bytes to read: a regular file on disk (``path``) or bytes in memory (``data``)."""

    name: str
    size: int
    path: Path | None = None
    data: bytes | None = None
    identity: tuple | None = None  # (device, inode, size, mtime) of a file, checked again after reading

    def open(self):
        """A binary file object positioned at the start."""
        if self.data is not None:
            return io.BytesIO(self.data)
        descriptor = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):  # swapped for something else since it was checked
            os.close(descriptor)
            raise InputFileNotFound(f"{self.path} is {_kind(info.st_mode) or 'not a regular file'}, not a regular file.")
        return os.fdopen(descriptor, "rb")

    def check_unchanged(self) -> None:
        """Raise if the file on disk changed since it was scanned (its hash would be wrong)."""
        if self.path is None or self.identity is None:
            return
        info = os.stat(self.path)
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != self.identity:
            raise FairAuditError(f"{self.name} changed while it was being read; wait until it is written completely and try again.")


def open_source(source, max_bytes: int, name: str | None = None) -> Source:
    """Check ``source`` and return a :class:`Source`, or raise a specific error before reading."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        shown = name or "upload.csv"
        if len(data) > max_bytes:
            raise too_large(shown, len(data), max_bytes)
        return Source(name=shown, size=len(data), data=data)
    if isinstance(source, str | os.PathLike):
        return _open_path(Path(source), max_bytes, name)
    if hasattr(source, "read"):
        return _read_stream(source, max_bytes, name)
    raise FairAuditError(f"cannot read a table from a {type(source).__name__}; pass a path or bytes.")


def check_path(path) -> os.stat_result:
    """Refuse, before it is opened, a path that is not a readable regular file: a missing path,
    a folder, a FIFO (opening it would wait for a writer forever), a device or a socket."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputFileNotFound(f"{path}: no such file. Check the path.") from None
    except OSError as exc:
        raise InputFileNotFound(f"cannot open {path}: {exc.strerror or exc}. Check the path and its permissions.") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputFileNotFound(f"{path} is a folder; give the data file inside it.")
    if not stat.S_ISREG(info.st_mode):
        raise InputFileNotFound(f"{path} is {_kind(info.st_mode) or 'not a regular file'}, not a regular file; save the data to a file first.")
    if not os.access(path, os.R_OK):
        raise InputFileNotFound(f"cannot read {path}: permission denied.")
    return info


def _open_path(path: Path, max_bytes: int, name: str | None) -> Source:
    info = check_path(path)
    shown = name or path.name
    if info.st_size > max_bytes:
        raise too_large(shown, info.st_size, max_bytes)
    identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    return Source(name=shown, size=info.st_size, path=path, identity=identity)


def _read_stream(stream, max_bytes: int, name: str | None) -> Source:
    """Read at most ``max_bytes + 1`` bytes from a file object (its size is not trusted)."""
    shown = name or Path(str(getattr(stream, "name", "") or "upload.csv")).name
    fileno = getattr(stream, "fileno", None)
    if callable(fileno):
        try:
            mode = os.fstat(fileno()).st_mode
        except (OSError, ValueError, io.UnsupportedOperation):
            mode = None
        if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISDIR(mode)):
            raise InputFileNotFound(f"{shown} is {_kind(mode)}, not a regular file; save the data to a file first.")
    parts: list[bytes] = []
    total = 0
    while total <= max_bytes:
        piece = stream.read(min(CHUNK, max_bytes + 1 - total))
        if not piece:
            break
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        parts.append(bytes(piece))
        total += len(piece)
    if total > max_bytes:
        raise too_large(shown, total, max_bytes, at_least=True)
    data = b"".join(parts)
    return Source(name=shown, size=len(data), data=data)


def read_bytes(source, max_mb, name: str | None = None) -> tuple[bytes, str]:
    """All bytes of ``source`` (a path, bytes or a file object) and its display name, with the
    data boundary's checks: regular files only, at most ``max_mb`` MB read (for files that are
    not tables, e.g. a ``.npy`` array)."""
    max_bytes = max_bytes_for(max_mb)
    opened = open_source(source, max_bytes, name)
    if opened.data is not None:
        return opened.data, opened.name
    with opened.open() as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_large(opened.name, len(data), max_bytes, at_least=True)
    return data, opened.name


@dataclass(frozen=True)
class Scan:
    """What one pass over the bytes found."""

    sha256: str
    n_bytes: int
    head: bytes  # the first bytes (up to one chunk)
    tail: bytes  # the last bytes (up to one chunk)
    blank: bool  # nothing but ASCII white space
    utf8_error: int | None  # offset of the first byte that is not UTF-8
    utf8_error_line: int  # its line (counting LF only, as the first reader did)
    utf8_error_byte: int  # its value
    has_nul: bool
    cp1252_undefined: bool  # a byte Windows-1252 cannot decode (0x81 0x8D 0x8F 0x90 0x9D)
    terminators: int  # line ends: LF, CR, CRLF
    has_quote: bool
    bare_cr: bool  # a CR that is not followed by LF (old Mac line ends, or a stray CR)

    @property
    def lines(self) -> int:
        """Physical lines, as Python's ``newline=""`` text reader counts them."""
        if self.n_bytes == 0:
            return 0
        return self.terminators + (0 if self.tail.endswith((b"\n", b"\r")) else 1)


def scan(source: Source, max_bytes: int) -> Scan:
    """One pass over ``source``: hash, UTF-8 validity, line ends, quotes, NULs.

    The SHA-256 of each chunk is computed on a second thread (``hashlib`` releases the GIL)
    while this one counts; a chunk of ASCII is valid UTF-8 without decoding it and cannot hold a
    byte Windows-1252 lacks."""
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    total = lf = cr = crlf = 0
    nonblank = has_nul = undefined = has_quote = False
    utf8_error: int | None = None
    utf8_line = utf8_byte = 0
    head = tail = b""
    previous_cr = False
    hashing = None
    with source.open() as stream, ThreadPoolExecutor(1) as hasher:
        while True:
            chunk = stream.read(CHUNK)
            if not chunk:
                break
            if total + len(chunk) > max_bytes:
                raise too_large(source.name, total + len(chunk), max_bytes, at_least=True)
            if hashing is not None:
                hashing.result()  # one chunk at a time, in order
            hashing = hasher.submit(digest.update, chunk)
            if not head:
                head = chunk
            tail = chunk[-_TAIL:] if len(chunk) >= _TAIL else (tail + chunk)[-_TAIL:]
            ascii = chunk.isascii()
            if utf8_error is None and not (ascii and not decoder.getstate()[0]):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    utf8_error = total - pending + exc.start
                    utf8_line = lf + chunk[: max(utf8_error - total, 0)].count(b"\n") + 1
                    utf8_byte = exc.object[exc.start]
            lf += int(np.count_nonzero(np.frombuffer(chunk, dtype=np.uint8) == 10))
            if b"\r" in chunk:
                cr += chunk.count(b"\r")
                crlf += chunk.count(b"\r\n")
            crlf += previous_cr and chunk.startswith(b"\n")
            previous_cr = chunk.endswith(b"\r")
            nonblank = nonblank or not chunk.isspace()
            has_nul = has_nul or b"\x00" in chunk
            has_quote = has_quote or b'"' in chunk
            undefined = undefined or (not ascii and any(byte in chunk for byte in _CP1252_UNDEFINED))
            total += len(chunk)
        if hashing is not None:
            hashing.result()
    if utf8_error is None:
        pending = decoder.getstate()[0]  # an incomplete sequence at the very end (no LF in it)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            utf8_error = total - len(pending) + exc.start
            utf8_line = lf + 1
            utf8_byte = exc.object[exc.start]
    return Scan(
        sha256=digest.hexdigest(),
        n_bytes=total,
        head=head,
        tail=tail,
        blank=not nonblank,
        utf8_error=utf8_error,
        utf8_error_line=utf8_line,
        utf8_error_byte=utf8_byte,
        has_nul=has_nul,
        cp1252_undefined=undefined,
        terminators=lf + cr - crlf,
        has_quote=has_quote,
        bare_cr=cr > crlf,
    )
