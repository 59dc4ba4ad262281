"""Declared schemas for JSON a user hands over (a model's manifest, a saved report), checked before
anything is computed from it.

A schema is built from a few small specs — :class:`Text`, :class:`Whole`, :class:`Number`,
:class:`Flag`, :class:`Items`, :class:`Fields`, :class:`Keyed`, :class:`Nullable`,
:data:`ANY` — and :func:`validate` checks a parsed value against it: types, sizes, finite
numbers, lengths, and every string encodable as UTF-8 (JSON's ``"\\ud800"`` parses to a lone
surrogate that no file can hold). The first problem raises the caller's error with one message
that names the file and the field, e.g. ``model.zip: field 'rank' must be a whole number from 1
to 100000; it is 'abc'.``

Written here rather than taken from ``jsonschema`` (MIT, installed with streamlit): the checks
that matter most relate fields to each other (as many centres as features, a selected index
below the number of features), which JSON Schema cannot state, and its messages would need
rewording for users anyway.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import FairAuditError
from .vocabulary import literal

MAX_TEXT = 10_000
"""Longest string accepted where a schema does not say otherwise."""


class Invalid(Exception):
    """A value that does not match its spec: where (a field path) and what was expected."""

    def __init__(self, path: str, expected: str, value, found: str | None = None):
        super().__init__(path, expected, value)
        self.path, self.expected, self.value = path, expected, value
        self.found = shown(value) if found is None else found


def shown(value, limit: int = 60) -> str:
    """A short, printable description of a JSON value for a message (control characters and the
    vocabulary's brackets escaped, long values cut)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return f"an object of {len(value)} field(s)"
    if isinstance(value, list):
        return f"a list of {len(value)} value(s)"
    text = literal(repr(value) if isinstance(value, str) else str(value))  # repr escapes control and direction characters
    return text if len(text) <= limit else text[: limit - 1] + "…"


def field_name(path: str) -> str:
    return path or "the top level"


def _check_text(value: str, path: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(path, "text (it holds an invalid character: a lone surrogate)", value) from None


@dataclass(frozen=True)
class Text:
    """A string of at most ``max_len`` characters, optionally matching ``pattern`` (described as
    ``what``) or one of ``choices``."""

    max_len: int = MAX_TEXT
    pattern: str | None = None
    what: str = "text"
    choices: tuple[str, ...] | None = None

    def check(self, value, path: str):
        if not isinstance(value, str):
            raise Invalid(path, self.what, value)
        _check_text(value, path)
        if self.choices is not None and value not in self.choices:
            raise Invalid(path, f"one of {', '.join(map(repr, self.choices))}", value)
        if len(value) > self.max_len:
            raise Invalid(path, f"{self.what} of at most {self.max_len:,} characters", value)
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise Invalid(path, self.what, value)
        return value


@dataclass(frozen=True)
class Whole:
    """A whole number from ``low`` to ``high`` (a float with no fractional part counts)."""

    low: int = 0
    high: int = 2**53

    def check(self, value, path: str):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not self.low <= value <= self.high:
            raise Invalid(path, f"a whole number from {self.low:,} to {self.high:,}", value)
        return value


@dataclass(frozen=True)
class Number:
    """A finite number; ``positive``: above 0; ``below``: below that bound too."""

    positive: bool = False
    below: float | None = None

    def check(self, value, path: str):
        if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                or (self.positive and not value > 0) or (self.below is not None and not value < self.below)):
            bounds = " above 0" if self.positive else ""
            bounds += (" and" if bounds else "") + f" below {self.below:g}" if self.below is not None else ""
            raise Invalid(path, "a finite number" + bounds, value)
        return float(value)


@dataclass(frozen=True)
class Flag:
    def check(self, value, path: str):
        if not isinstance(value, bool):
            raise Invalid(path, "true or false", value)
        return value


@dataclass(frozen=True)
class Nullable:
    spec: object

    def check(self, value, path: str):
        return None if value is None else self.spec.check(value, path)


@dataclass(frozen=True)
class Items:
    """A list of values of ``spec``, ``min`` to ``max`` long; ``unique``: no value twice."""

    spec: object
    min: int = 0
    max: int = 10_000_000
    unique: bool = False

    def check(self, value, path: str):
        if not isinstance(value, list):
            raise Invalid(path, f"a list (of {self.min:,} to {self.max:,} values)", value)
        if not self.min <= len(value) <= self.max:
            raise Invalid(path, f"a list of {self.min:,} to {self.max:,} values", value)
        checked = [self.spec.check(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if self.unique and len(set(checked)) < len(checked):
            seen = set()
            twice = next(item for item in checked if item in seen or seen.add(item))
            raise Invalid(path, "a list without repeated values", value, f"a list that holds {shown(twice)} twice")
        return checked


@dataclass(frozen=True)
class Keyed:
    """An object whose keys are free (e.g. group names; ``key``: a :class:`Text` they must match)
    and whose values follow ``spec``."""

    spec: object
    max: int = 1_000_000
    key: Text = Text(1000)

    def check(self, value, path: str):
        if not isinstance(value, dict):
            raise Invalid(path, "an object", value)
        if len(value) > self.max:
            raise Invalid(path, f"an object of at most {self.max:,} fields", value)
        for key in value:
            self.key.check(key, f"{path} (a field name)")
        return {key: self.spec.check(item, f"{path}.{key}" if path else key) for key, item in value.items()}


@dataclass(frozen=True)
class Fields:
    """An object with named fields: ``required`` ones, ``optional`` ones, and any other field
    checked by ``other`` (:data:`ANY` by default: kept as it is, strings checked)."""

    required: Mapping[str, object] = field(default_factory=dict)
    optional: Mapping[str, object] = field(default_factory=dict)
    other: object = None

    def check(self, value, path: str):
        if not isinstance(value, dict):
            raise Invalid(path, "an object", value)
        missing = [name for name in self.required if name not in value]
        if missing:
            raise Invalid(f"{path}.{missing[0]}" if path else missing[0], "present", None, "absent")
        out = {}
        for key, item in value.items():
            spec = self.required.get(key) or self.optional.get(key) or self.other or ANY
            out[key] = spec.check(item, f"{path}.{key}" if path else key)
        return out


class _Anything:
    """Any JSON value (its nesting is already bounded by the reader); strings must be UTF-8."""

    def check(self, value, path: str):
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.check(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, path)
                self.check(item, f"{path}.{key}")
        return value


ANY = _Anything()


def validate(value, spec, where: str, error: type[FairAuditError]):
    """``value`` checked (and normalised: whole numbers as ``int``, numbers as ``float``) against
    ``spec``; a mismatch raises ``error`` naming ``where`` and the field."""
    try:
        return spec.check(value, "")
    except Invalid as bad:
        raise invalid(where, error, bad) from None


def invalid(where: str, error: type[FairAuditError], bad: Invalid) -> FairAuditError:
    """The user's message for ``bad`` in the file ``where``."""
    name = literal(field_name(bad.path))
    if bad.expected == "present":
        return error(f"{where} lacks the field '{name}'; it is damaged or not a file fairaudit wrote.")
    return error(f"{where}: field '{name}' must be {bad.expected}; it is {bad.found}.")
