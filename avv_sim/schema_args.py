"""Tool-call arguments from a JSON Schema, and deliberate breaking of them.

:func:`generate` returns a value satisfying the schema (best effort for ``pattern``, ``oneOf`` overlap
and exotic keywords), deterministic from a seed string. :func:`break_arguments` turns a valid argument
object into a JSON text that does NOT validate: a missing required property, a wrong type, or text that
is not JSON at all.

The schema is the user's, so the work is bounded: validation is the scoring's (no network, regex searches
time-bounded: :mod:`avv_core.bounded_schema`), and a generated string or array stops at
:data:`MAX_GENERATED_CHARS` / :data:`MAX_GENERATED_ITEMS` (such a value may then fail its schema).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from avv_core.json_types import JSONMapping, JSONObject, JSONValue

if TYPE_CHECKING:  # built lazily (below): jsonschema loads only when a schema is checked
    from avv_core.bounded_schema import SchemaValidator

BREAK_KINDS = ("missing_required", "wrong_type", "unparseable")

_WORDS = (
    "alpha",
    "bravo",
    "delta",
    "echo",
    "paris",
    "tokyo",
    "lima",
    "oslo",
    "red",
    "blue",
    "green",
    "fast",
    "small",
    "north",
    "south",
    "river",
    "stone",
    "cloud",
    "table",
    "report",
    "order",
    "user",
    "today",
)
_MAX_DEPTH = 8
#: The longest string generated (``pattern`` with nested repeats, ``minLength``): past it, memory and time.
MAX_GENERATED_CHARS = 10_000
#: The most items generated for an array (``minItems``).
MAX_GENERATED_ITEMS = 1_000


def _resolve_ref(ref: str, root: JSONMapping) -> JSONMapping:
    """Resolve a local ``#/...`` JSON pointer (``$defs``/``definitions``); anything else → ``{}``."""
    if not ref.startswith("#"):
        return {}
    node: JSONValue = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return {}
        node = node[part]
    return node if isinstance(node, Mapping) else {}


def _merge_all_of(schema: JSONMapping, root: JSONMapping) -> JSONObject:
    """Shallow merge of ``allOf`` branches (properties and required are unioned)."""
    merged: JSONObject = {k: v for k, v in schema.items() if k != "allOf"}
    for branch in schema.get("allOf") or []:
        if isinstance(branch, Mapping) and "$ref" in branch:
            branch = _resolve_ref(branch["$ref"], root)
        if not isinstance(branch, Mapping):
            continue
        for key, value in branch.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _schema_type(schema: JSONMapping) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        t = non_null[0] if non_null else "null"
    if isinstance(t, str):
        return t
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return "string"


@functools.cache
def _bounded_xeger_class() -> type:
    import rstr
    from rstr.xeger import STAR_PLUS_LIMIT

    class BoundedXeger(rstr.Rstr):
        """rstr's xeger that gives up (ValueError) once its repeats have produced MAX_GENERATED_CHARS: a
        nested repeat such as ``((a{100}){100}){100}`` would build a million characters."""

        def __init__(self, rng: random.Random) -> None:
            super().__init__(rng)
            self.produced = 0

        def _handle_repeat(self, start_range: int, end_range: int, value: Iterable[object]) -> str:
            pieces = []
            for _ in range(self._random.randint(start_range, min(end_range, STAR_PLUS_LIMIT))):
                piece = "".join(self._handle_state(state) for state in value)
                self.produced += len(piece)
                if self.produced > MAX_GENERATED_CHARS:
                    raise ValueError(f"more than {MAX_GENERATED_CHARS} characters")
                pieces.append(piece)
            return "".join(pieces)

    return BoundedXeger


def xeger(pattern: str, rng: random.Random) -> str:
    """A string matching ``pattern`` (rstr's xeger, driven by ``rng``), at most about MAX_GENERATED_CHARS
    long; ValueError (or re.error) when it cannot be made."""
    return _bounded_xeger_class()(rng).xeger(pattern)


def _from_pattern(pattern: str, rng: random.Random) -> str:
    """A string matching ``pattern`` (:func:`xeger`, driven by our seeded generator)."""
    try:
        return xeger(pattern, rng)
    except Exception:  # a regex feature xeger cannot invert: fall back to words (the schema may then fail)
        return " ".join(rng.choice(_WORDS) for _ in range(2))


def _gen_string(schema: JSONMapping, rng: random.Random) -> str:
    fmt = schema.get("format")
    if fmt == "date":
        text = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    elif fmt == "date-time":
        text = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
    elif fmt == "time":
        text = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
    elif fmt == "email":
        text = f"{rng.choice(_WORDS)}@example.com"
    elif fmt in ("uri", "url"):
        text = f"https://example.com/{rng.choice(_WORDS)}"
    elif fmt == "uuid":
        text = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    elif isinstance(schema.get("pattern"), str):
        text = _from_pattern(schema["pattern"], rng)
    else:
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
    min_len = min(int(schema.get("minLength", 0) or 0), MAX_GENERATED_CHARS)
    max_len = schema.get("maxLength")
    while len(text) < min_len:
        text += rng.choice("abcdefghijklmnopqrstuvwxyz")
    if max_len is not None and len(text) > int(max_len):
        text = text[: int(max_len)]
    return text


def _gen_number(schema: JSONMapping, rng: random.Random, integer: bool) -> int | float:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")
    # draft-4 style boolean exclusives
    if xlo is True:
        xlo, lo = lo, None
    if xhi is True:
        xhi, hi = hi, None
    step = 1 if integer else 0.01
    low = lo if isinstance(lo, (int, float)) else None
    high = hi if isinstance(hi, (int, float)) else None
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool):
        low = max(low, xlo + step) if low is not None else xlo + step
    if isinstance(xhi, (int, float)) and not isinstance(xhi, bool):
        high = min(high, xhi - step) if high is not None else xhi - step
    if low is None:
        low = high - 100 if high is not None else 0
    if high is None:
        high = low + 100
    if integer:
        lo_i, hi_i = math.ceil(low), math.floor(high)
        value: int | float = rng.randint(lo_i, max(lo_i, hi_i))
    else:
        value = round(rng.uniform(low, high), 2)
        value = min(max(value, low), high)
    mult = schema.get("multipleOf")
    if isinstance(mult, (int, float)) and mult > 0:
        k = int(value // mult)
        value = k * mult
        if value < low:
            value += mult
        if integer:
            value = int(value)
    return value


def _gen_array(schema: JSONMapping, rng: random.Random, root: JSONMapping, depth: int) -> list:
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and prefix:
        return [_gen(s, rng, root, depth + 1) for s in prefix]
    items = schema.get("items")
    if isinstance(items, list):  # draft-4 tuple form
        return [_gen(s, rng, root, depth + 1) for s in items]
    item_schema = items if isinstance(items, Mapping) else {}
    min_items = min(int(schema.get("minItems", 1) or 0), MAX_GENERATED_ITEMS)
    max_items = schema.get("maxItems")
    hi = min_items + 2 if max_items is None else min(int(max_items), max(min_items, 3))
    n = rng.randint(min_items, max(min_items, hi))
    out: list = []
    seen: set[str] = set()
    attempts = 0
    while len(out) < n and attempts < n * 10:
        attempts += 1
        value = _gen(item_schema, rng, root, depth + 1)
        key = json.dumps(value, sort_keys=True)
        if schema.get("uniqueItems") and key in seen:
            continue
        seen.add(key)
        out.append(value)
    return out


def _gen_object(schema: JSONMapping, rng: random.Random, root: JSONMapping, depth: int) -> dict:
    props = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    out: JSONObject = {}
    for name, sub in props.items():
        # every required property, and about half of the optional ones
        if name in required or (depth < 3 and rng.random() < 0.5):
            out[name] = _gen(sub if isinstance(sub, Mapping) else {}, rng, root, depth + 1)
    for name in required:
        if name not in out:  # required but not described: any value will do
            out[name] = _gen({}, rng, root, depth + 1)
    return out


def _gen(schema: object, rng: random.Random, root: JSONMapping, depth: int) -> JSONValue:
    if schema is True or not isinstance(schema, Mapping):
        return rng.choice(_WORDS)
    if depth > _MAX_DEPTH:
        return None if "null" in (schema.get("type") or []) else {}
    if "$ref" in schema:
        return _gen(_resolve_ref(schema["$ref"], root), rng, root, depth + 1)
    if "allOf" in schema:
        schema = _merge_all_of(schema, root)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(rng.choice(schema["enum"]))
    for key in ("oneOf", "anyOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return _gen_branch(schema, key, branches, rng, root, depth)
    kind = _schema_type(schema)
    if kind == "object":
        return _gen_object(schema, rng, root, depth)
    if kind == "array":
        return _gen_array(schema, rng, root, depth)
    if kind == "integer":
        return _gen_number(schema, rng, integer=True)
    if kind == "number":
        return _gen_number(schema, rng, integer=False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _gen_string(schema, rng)


def _gen_branch(
    schema: JSONMapping,
    key: str,
    branches: list,
    rng: random.Random,
    root: JSONMapping,
    depth: int,
) -> JSONValue:
    """Pick a branch (non-null ones first); sibling keywords of the branch list are merged in."""
    siblings = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
    order = list(range(len(branches)))
    rng.shuffle(order)
    order.sort(key=lambda i: isinstance(branches[i], Mapping) and branches[i].get("type") == "null")
    candidate = None
    for i in order:
        branch = branches[i]
        if isinstance(branch, Mapping) and "$ref" in branch:
            branch = _resolve_ref(branch["$ref"], root)
        merged = {**siblings, **branch} if isinstance(branch, Mapping) else branch
        candidate = _gen(merged, rng, root, depth + 1)
        if key == "anyOf" or _valid(
            {**schema, "$defs": root.get("$defs", {}), "definitions": root.get("definitions", {})}, candidate
        ):
            return candidate
    return candidate


def _valid(schema: JSONMapping, value: object) -> bool:
    """Validation as the scoring does it (no network, regex time-bounded), imported lazily (only oneOf and
    breaking need it)."""
    from avv_core.bounded_schema import is_valid

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except Exception:  # a schema that cannot be checked; assume the value is fine
        return True
    try:
        return is_valid(validator, value)
    except Exception:  # the value cannot be followed (e.g. nested too deep): not valid
        return False


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> SchemaValidator:
    """The validator of a schema given as canonical JSON (built once: checking the schema costs ~1 ms)."""
    from avv_core.bounded_schema import build_validator

    return build_validator(json.loads(schema_json))


def is_valid(schema: JSONMapping, value: object) -> bool:
    """Whether ``value`` validates against ``schema`` (True when the schema itself cannot be used)."""
    return _valid(schema, value)


def generate(schema: JSONMapping | None, seed: str) -> JSONValue:
    """A value valid for ``schema`` (an object for a tool's ``parameters``), deterministic from ``seed``."""
    schema = schema if isinstance(schema, Mapping) else {}
    rng = random.Random(seed)
    if not schema or (
        "type" not in schema
        and _schema_type(schema) == "string"
        and "$ref" not in schema
        and not any(k in schema for k in ("anyOf", "oneOf", "allOf", "enum", "const"))
    ):
        return {}  # tool parameters default to an (empty) object
    return _gen(schema, rng, schema, 0)


# ---------------------------------------------------------------------------------------------- breaking


def _wrong_value(sub: JSONMapping, root: JSONMapping) -> tuple[bool, JSONValue]:
    """A value of a different JSON type than ``sub`` allows; (False, None) if ``sub`` accepts anything."""
    if "$ref" in sub:
        sub = _resolve_ref(sub["$ref"], root)
    kinds: set[str] = set()
    t = sub.get("type")
    if isinstance(t, str):
        kinds.add(t)
    elif isinstance(t, list):
        kinds.update(x for x in t if isinstance(x, str))
    elif "enum" in sub or "const" in sub:
        values = sub.get("enum") or [sub.get("const")]
        kinds.update(type(v).__name__ for v in values)
    elif any(k in sub for k in ("properties", "items")):
        kinds.add(_schema_type(sub))
    if not kinds:
        return False, None
    for cand, names in (
        (12345, {"integer", "number", "int"}),
        ("not-a-number", {"string", "str"}),
        ({"unexpected": True}, {"object", "dict"}),
        ([1, 2], {"array", "list"}),
    ):
        if not kinds & names:
            return True, cand
    return False, None


def _break_missing(args: JSONValue, schema: JSONMapping) -> str | None:
    required = [r for r in schema.get("required") or [] if isinstance(args, dict) and r in args]
    if not required:
        return None
    broken = dict(args)
    broken.pop(required[0])
    return json.dumps(broken, ensure_ascii=False)


def _break_type(args: object, schema: JSONMapping) -> str | None:
    if isinstance(args, dict):
        props = schema.get("properties") or {}
        for name in args:
            sub = props.get(name)
            if isinstance(sub, Mapping):
                ok, value = _wrong_value(sub, schema)
                if ok:
                    return json.dumps({**args, name: value}, ensure_ascii=False)
    if _schema_type(schema) == "object" and "anyOf" not in schema and "oneOf" not in schema:
        return json.dumps([args], ensure_ascii=False)  # an array where an object is required
    return None


def _break_unparseable(args: object) -> str:
    text = json.dumps(args, ensure_ascii=False)
    return text[:-1] if len(text) > 1 else '{"'  # drop the closing brace: cut-off JSON


def break_arguments(args: object, schema: JSONMapping | None, kind: str) -> tuple[str, str]:
    """Serialized arguments that fail ``schema``; returns (text, kind actually used).

    The requested kind is tried first; kinds impossible for this schema (nothing required, no typed
    property) fall through to the others, and ``unparseable`` always works.
    """
    schema = schema if isinstance(schema, Mapping) else {}
    order = [kind] + [k for k in BREAK_KINDS if k != kind]
    for k in order:
        if k == "unparseable":
            return _break_unparseable(args), k
        text = _break_missing(args, schema) if k == "missing_required" else _break_type(args, schema)
        if text is not None and not _valid(schema, json.loads(text)):
            return text, k
    return _break_unparseable(args), "unparseable"  # pragma: no cover - loop always returns


def dumps_arguments(args: object) -> str:
    """How the simulator serializes valid arguments (OpenAI style: ``{"a": 1, "b": "x"}``)."""
    return json.dumps(args, ensure_ascii=False)
