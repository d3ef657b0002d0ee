"""JSON the user hands us — a sample line (and its agent task), a BFCL file line, a K2VV / MiniMax results line,
a run.json, a tokenizer config — parsed in one place with one bound on nesting (pure core: no I/O).

A value nested deeper than :data:`MAX_JSON_DEPTH` arrays and objects is refused like any other malformed line:
an :class:`InputError` naming the file and line (exit status 2), or a skipped line where the caller skips bad
lines. Why a bound: Python's ``json`` raises ``RecursionError`` (not ``JSONDecodeError``) near 1,000 levels, so
a 100,000-deep line used to crash start-up with a traceback; and every later step that walks a body (hashing,
canonical arguments, schema validation, a chat template) recurses once or more per level, so a line that parses
at 900 levels could still fail later, in the middle of a run. Real requests are far shallower: a tool schema
nests a few levels per property (``parameters → properties → x → items → properties → …``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from avv_core.errors import InputError
from avv_core.json_types import JSONValue

#: Deepest nesting of arrays and objects accepted in a JSON input (the top-level value is level 1).
MAX_JSON_DEPTH = 100


def json_depth(value: object, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a decoded JSON value (a scalar is 0, ``[]`` is 1, ``{"a": [1]}`` is 2). Stops counting
    once past ``limit`` (returns ``limit + 1``), so an absurd value costs no more than a legal one. Iterative:
    the depth being measured may be beyond the recursion limit."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        children: Iterable[object]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if level > limit:
            return limit + 1
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def too_deep_message(where: str) -> str:
    return (f"{where}: nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects "
            f"(the documented bound; real requests are far shallower)")


def parse_json(text: str | bytes, where: str) -> JSONValue:
    """``text`` decoded, or :class:`InputError` naming ``where`` ("file:line") when it is not JSON or is nested
    deeper than :data:`MAX_JSON_DEPTH`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"{where}: not valid JSON ({exc.msg} at {at})") from None
    except RecursionError:  # json's C parser gives up near the interpreter's recursion limit
        raise InputError(too_deep_message(where)) from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits())
        raise InputError(f"{where}: not valid JSON we can read ({str(exc).split(';')[0]})") from None
    brackets = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if brackets > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:  # fewer brackets cannot nest deeper
        raise InputError(too_deep_message(where))
    return value


__all__ = ["MAX_JSON_DEPTH", "json_depth", "parse_json", "too_deep_message"]
