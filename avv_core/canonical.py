"""Canonical tool-call arguments (pure core, no I/O): the one definition shared by the harness (agent tasks match
a call's arguments against recorded tool results), scoring (:mod:`avv_scoring.metrics.correctness` re-exports it)
and the simulator (its request hashes and its gold values). :func:`canonical_json` is the text form without
value normalisation, and :func:`canonical_sha256` the one hash of a JSON value taken over it (a sample body, a
simulator request's decision view, a node identity's settings).

A call's ``arguments`` string is parsed as JSON and compared as a value: object key order is ignored, numbers
compare by value (``1 == 1.0``, ``-0.0 == 0``), ``true`` is not ``1``, strings compare exactly after JSON decoding
(``"\\u00e9" == "é"``, but no Unicode normalisation and no case folding), arrays keep their order. Arguments that
do not parse as JSON are :data:`UNPARSED`.

Vendor text is parsed as JSON by :func:`parse_json_text` only (or, where a decoder is needed, with :data:`JSON_ERRORS`
caught): every way ``json`` can refuse a text counts as "does not parse", not only a syntax error.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping

from avv_core.json_types import JSONMapping, JSONValue


class _Unparsed:
    """Marker for arguments that are not JSON."""

    def __repr__(self) -> str:
        return "UNPARSED"


UNPARSED = _Unparsed()

#: What ``json`` raises for a text it cannot read: ``JSONDecodeError`` (a ``ValueError``) for bad syntax, a plain
#: ``ValueError`` for an integer of more digits than Python converts (``sys.get_int_max_str_digits()``, 4,300 by
#: default), ``RecursionError`` for nesting past the interpreter's limit. A vendor controls all three.
JSON_ERRORS: tuple[type[Exception], ...] = (ValueError, RecursionError)


def parse_json_text(text: str | bytes) -> JSONValue:
    """``text`` as a JSON value, or :data:`UNPARSED` when ``json`` cannot read it (any of :data:`JSON_ERRORS`)."""
    try:
        return json.loads(text)
    except JSON_ERRORS:
        return UNPARSED


def parses_as_json(text: str | bytes) -> bool:
    """Whether ``text`` is JSON that ``json`` can read (:func:`parse_json_text`)."""
    return parse_json_text(text) is not UNPARSED


def canonical(value: object) -> JSONValue:
    """``value`` with integral floats as ints and object keys sorted (see the module docstring)."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(k): canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def canonical_json(value: object, default: Callable[[object], object] | None = None) -> str:
    """``value`` as canonical JSON text: object keys sorted, no whitespace, non-ASCII kept; values as they are
    (``1.0`` stays ``1.0``; :func:`canonical_key` normalises them first). ``default`` as :func:`json.dumps`'s."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)


def canonical_sha256(value: object, default: Callable[[object], object] | None = None) -> str:
    """The SHA-256 (hex) of ``value``'s :func:`canonical_json` text in UTF-8."""
    return hashlib.sha256(canonical_json(value, default).encode("utf-8")).hexdigest()


def canonical_key(value: object) -> str:
    """A string equal for two values exactly when they are canonically equal."""
    return canonical_json(canonical(value))


def parse_arguments(raw: object) -> JSONValue:
    """A call's ``arguments`` (the streamed string, or an already-decoded value) as a JSON value, or
    :data:`UNPARSED`."""
    if not isinstance(raw, str):
        return raw if isinstance(raw, (dict, list)) else UNPARSED
    return parse_json_text(raw)


def partial_match(args: object, wanted: JSONMapping) -> bool:
    """Every key of ``wanted`` is in ``args`` (a parsed object) with a canonically equal value; other keys of
    ``args`` do not matter. Arguments that are not an object (or did not parse) never match a non-empty
    ``wanted``; an empty ``wanted`` matches any arguments."""
    if not wanted:
        return True
    if not isinstance(args, Mapping):
        return False
    return all(key in args and canonical_key(args[key]) == canonical_key(value) for key, value in wanted.items())


__all__ = ["JSON_ERRORS", "UNPARSED", "canonical", "canonical_json", "canonical_key", "parse_arguments",
           "parse_json_text", "parses_as_json", "partial_match"]
