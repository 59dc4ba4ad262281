"""JSON a user hands over, read with limits: nesting is measured before anything is parsed, and a
large document is read piece by piece.

Python's ``json`` recurses once per nesting level (200,000 nested brackets end in a
``RecursionError``), so every byte goes through :class:`NestingGuard` — a scan of bracket
nesting that follows strings and escapes across pieces — before ``json`` sees it. Only then are
the values parsed, one top-level value at a time (:func:`read_object`): a report's records are
handed over one by one to a callback, so memory holds what the caller keeps of them, not the
text and its Python objects all at once (a 104 MB report once took 3.4 GB to compare).

Messages name the file (``where``) and say what is wrong in the words of the format; the
caller's error class (a :class:`~fairaudit.errors.FairAuditError`) carries them to the user.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Callable

import numpy as np

from .errors import FairAuditError

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (a fairaudit report or manifest nests 6 deep)."""

CHUNK = 4 << 20
"""Bytes read per step."""

MAX_VALUE = 64 << 20
"""Longest text of one value parsed at a time (a record, a report's configuration, a whole
manifest): what the reader holds at once is bounded by it, however large the file."""

_WHITE = re.compile(r"[ \t\n\r]*")
_NUMBER_GOES_ON = frozenset("0123456789.eE+-")


class NestingGuard:
    """The bracket nesting of JSON bytes fed in pieces: raises ``error`` as soon as arrays and
    objects nest deeper than ``max_depth``. Brackets inside strings do not count; a quote
    preceded by an odd run of backslashes is part of its string. Bytes that are not JSON are
    left for the parser to name."""

    def __init__(self, where: str, error: type[FairAuditError], max_depth: int = MAX_DEPTH):
        self.where, self.error, self.max_depth = where, error, max_depth
        self.depth = 0
        self.in_string = False
        self.escaping = False  # the previous piece ended on an odd run of backslashes

    def feed(self, chunk: bytes) -> None:
        a = np.frombuffer(chunk, np.uint8)
        quotes = np.flatnonzero(a == 0x22)
        if self.escaping or b"\\" in chunk:
            quotes = quotes[~np.isin(quotes, self._escaped(a))]
        opening = (a == 0x5B) | (a == 0x7B)
        brackets = np.flatnonzero(opening | (a == 0x5D) | (a == 0x7D))
        if len(brackets):
            before = np.searchsorted(quotes, brackets) + self.in_string  # quotes before each bracket
            brackets = brackets[before % 2 == 0]
            steps = np.where(opening[brackets], 1, -1)
            depths = self.depth + np.cumsum(steps)
            if len(depths) and depths.max() > self.max_depth:
                raise self.error(
                    f"{self.where} nests arrays and objects more than {self.max_depth} deep; it is not a file fairaudit "
                    "wrote (its files nest a few levels), and it is not read."
                )
            self.depth = int(depths[-1]) if len(depths) else self.depth
        self.in_string = bool((len(quotes) + self.in_string) % 2)

    def _escaped(self, a: np.ndarray) -> np.ndarray:
        """Positions of ``a`` escaped by an odd run of backslashes (the run may start in the
        previous piece); updates :attr:`escaping` for the next piece."""
        slashes = np.flatnonzero(a == 0x5C)
        escaped = [np.array([0])] if self.escaping and (len(a) and a[0] != 0x5C) else []
        if len(slashes):
            breaks = np.flatnonzero(np.diff(slashes) != 1)
            starts = slashes[np.r_[0, breaks + 1]]
            ends = slashes[np.r_[breaks, len(slashes) - 1]]
            lengths = ends - starts + 1
            if self.escaping and starts[0] == 0:
                lengths[0] += 1
            odd = ends[lengths % 2 == 1] + 1
            self.escaping = bool(len(odd) and odd[-1] == len(a))
            escaped.append(odd)
        else:
            self.escaping = False
        return np.concatenate(escaped) if escaped else np.zeros(0, dtype=np.intp)


def _bad_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_bad_constant)


class _Text:
    """Decoded text of a binary stream, read as it is needed and dropped once parsed."""

    def __init__(self, stream, where: str, error: type[FairAuditError], max_bytes: int):
        self.stream, self.where, self.error, self.max_bytes = stream, where, error, max_bytes
        self.guard = NestingGuard(where, error)
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.text, self.pos, self.read, self.lines = "", 0, 0, 0
        self.eof = False
        self.step = CHUNK

    def more(self) -> bool:
        """Read the next piece (each read after a value did not fit is twice the last); False at the end."""
        if self.eof:
            return False
        chunk = self.stream.read(self.step)
        self.step = min(self.step * 2, 1 << 30)
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        self.read += len(chunk)
        if self.read > self.max_bytes:
            raise self.error(f"{self.where} is larger than {self.max_bytes / 2**20:g} MB; it is not read.")
        self.guard.feed(chunk)
        try:
            decoded = self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise self.error(f"{self.where} is not UTF-8 text; give the JSON file fairaudit wrote.") from None
        if self.pos > CHUNK and self.pos > len(self.text) // 2:  # what was parsed goes
            self.lines += self.text.count("\n", 0, self.pos)
            self.text, self.pos = self.text[self.pos:], 0
        self.text += decoded
        self.eof = not chunk
        return True

    def line(self, pos: int) -> int:
        return self.lines + self.text.count("\n", 0, pos) + 1

    def invalid(self, what: str, pos: int | None = None) -> FairAuditError:
        where = self.pos if pos is None else pos
        return self.error(f"{self.where} is not valid JSON (line {self.line(where)}: {what}); give the JSON file fairaudit wrote.")

    def skip_space(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            self.pos = _WHITE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def expect(self, characters: str, what: str) -> str:
        found = self.skip_space()
        if not found or found not in characters:
            raise self.invalid(f"expected {what}")
        self.pos += 1
        return found

    def value(self):
        """The JSON value at the cursor (read further while it may continue past the text held)."""
        self.skip_space()
        self.step = CHUNK
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                truncated = exc.pos >= len(self.text) - 64 or exc.msg.startswith("Unterminated string")
                if truncated and self._room() and self.more():
                    continue
                raise self.invalid(exc.msg, exc.pos) from None
            except (ValueError, RecursionError) as exc:  # a number of more than 4,300 digits, NaN or Infinity
                raise self.invalid(str(exc).split(";")[0]) from None
            # a value that reaches the end of the text held, or a number cut after "1." or "1e",
            # may go on in the next piece
            cut = end == len(self.text) or (type(value) in (int, float) and self.text[end] in _NUMBER_GOES_ON)
            if not cut or not self._room() or not self.more():
                self.pos = end
                return value


    def _room(self) -> bool:
        """True while the value being parsed is shorter than :data:`MAX_VALUE` (else an error)."""
        if len(self.text) - self.pos > MAX_VALUE:
            raise self.error(
                f"{self.where} holds a value of more than {MAX_VALUE >> 20} MB of text at line {self.line(self.pos)}; no file "
                "fairaudit writes does, and it is not read."
            )
        return True


def read_object(
    stream,
    where: str,
    error: type[FairAuditError],
    *,
    max_bytes: int,
    each: dict[str, Callable[[object, int], None]] | None = None,
) -> dict:
    """The top-level JSON object of a binary ``stream`` (at most ``max_bytes`` read), with the
    nesting guarded (:class:`NestingGuard`).

    For a key in ``each`` whose value is an array, every element is parsed on its own and
    handed to ``each[key](element, index)`` instead of being kept (the key maps to ``True`` in
    the result). A key given twice is refused."""
    each = each or {}
    text = _Text(stream, where, error, max_bytes)
    first = text.skip_space()
    if first != "{":
        if first and first in '["-0123456789tfn':
            raise error(f"{where} does not hold a JSON object; give the JSON file fairaudit wrote.")
        raise text.invalid("expected '{'")
    text.pos += 1
    found: dict = {}
    if text.skip_space() == "}":
        text.pos += 1
    else:
        while True:
            if text.skip_space() != '"':
                raise text.invalid("expected a field name in double quotes")
            key = text.value()
            if key in found:
                raise error(f"{where} gives the field {key!r} twice; a field must be given once.")
            text.expect(":", "':' after a field name")
            if key in each and text.skip_space() == "[":
                text.pos += 1
                _elements(text, each[key])
                found[key] = True
            else:
                found[key] = text.value()
            if text.expect(",}", "',' or '}' after a field") == "}":
                break
    if text.skip_space():
        raise text.invalid("extra data after the object")
    return found


def _elements(text: _Text, handle: Callable[[object, int], None]) -> None:
    if text.skip_space() == "]":
        text.pos += 1
        return
    index = 0
    while True:
        handle(text.value(), index)
        index += 1
        if text.expect(",]", "',' or ']' after an array element") == "]":
            return


def read_json_bytes(raw: bytes, where: str, error: type[FairAuditError], *, max_bytes: int) -> dict:
    """:func:`read_object` of bytes already in memory (a manifest from a ZIP, an upload)."""
    return read_object(io.BytesIO(raw), where, error, max_bytes=max_bytes)
