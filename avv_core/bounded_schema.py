"""JSON Schema validators that cannot reach the network or run without end (a leaf: it imports nothing of
ours, so the scoring and the simulator validate the same way).

Layer: inputs (a tool's ``parameters`` is the user's input; the value checked may be a vendor's).

- **No network.** A validator resolves ``$ref`` only inside its own schema (``#/...``, ``$defs``, an
  embedded ``$id``) and the JSON Schema metaschemas: its :class:`referencing.Registry` refuses every other
  URI. jsonschema's default would *fetch* ``http(s)://`` refs (an SSRF: ``http://169.254.169.254/...``) and
  wait forever for a host that does not answer. Every ``$ref`` is looked up when the validator is built,
  so a schema with one that cannot be resolved is refused then, whatever value it is later asked about.
- **Regex time bound.** ``pattern``, ``patternProperties`` and the pattern part of ``additionalProperties``
  are evaluated by the ``regex`` package with a time limit: all the searches of one :func:`is_valid` share
  :data:`REGEX_BUDGET_S`. A search that does not finish within it fails the value (:class:`PatternTimeout`
  as a validation error): catastrophic backtracking happens on strings that do *not* match. Formats
  (``format: regex``) are not asserted. jsonschema evaluates ``patternProperties`` again, with Python's
  ``re`` and no bound, for ``unevaluatedProperties``; a schema using both is refused when built.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import regex
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend, validator_for
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing import Registry, Resource, Specification
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from avv_core.json_types import JSONMapping, JSONValue

#: Time for all the regex searches of one validation (seconds); a search still running then fails the value.
REGEX_BUDGET_S = 0.1

# the deadline of the validation in progress (time.monotonic()); unset: each search gets the whole budget
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("avv_regex_deadline", default=None)
# keys whose values are data, not subschemas: a "$ref" key inside them is not a reference
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


class SchemaValidator(Protocol):
    """What this code uses of a jsonschema validator (jsonschema ships no type information)."""

    def is_type(self, instance: object, type: str) -> bool: ...

    def is_valid(self, instance: object) -> bool: ...

    def descend(self, instance: object, schema: object, path: str | int | None = None,
                schema_path: str | int | None = None) -> Iterator[ValidationError]: ...


class _Resolver(Protocol):
    """What this code uses of a ``referencing`` resolver."""

    def lookup(self, ref: str) -> object: ...

    def in_subresource(self, subresource: Resource[JSONValue]) -> _Resolver: ...


class _CompiledPattern(Protocol):
    """What this code uses of a ``regex`` compiled pattern (the package ships no type information)."""

    def search(self, string: str, *, timeout: float | None = None) -> object: ...


#: A jsonschema keyword function: (validator, the keyword's value, the instance, the schema around it) → errors.
_Keyword = Callable[[SchemaValidator, JSONValue, JSONValue, JSONMapping], Iterator[ValidationError]]


class UnusableSchema(ValueError):
    """The schema cannot be checked safely (a ``$ref`` that cannot be resolved without the network, a
    pattern the regex engine refuses, ``unevaluatedProperties`` with ``patternProperties``)."""


class PatternTimeout(Exception):
    """A regex search did not finish within the validation's budget."""


def _refuse_retrieval(uri: str) -> Resource:
    # never fetched: the network is not ours to reach from a schema (an attrs class mypy cannot see through)
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


#: Resolves nothing but the schema itself (jsonschema adds the metaschemas to any registry it is given).
OFFLINE_REGISTRY: Registry = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


def search(pattern: str, text: str) -> bool:
    """``regex.search(pattern, text)`` within the validation's remaining budget; PatternTimeout after it."""
    deadline = _DEADLINE.get()
    remaining = REGEX_BUDGET_S if deadline is None else deadline - time.monotonic()
    if remaining <= 0:
        raise PatternTimeout(pattern)
    try:
        return _compiled(pattern).search(text, timeout=remaining) is not None
    except TimeoutError:
        raise PatternTimeout(pattern) from None


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> _CompiledPattern:
    """``regex.compile``, cached here: regex's own cache lookup costs more than the search of a short string."""
    return regex.compile(pattern)


def _timeout_error(pattern: str) -> ValidationError:
    return ValidationError(f"pattern {pattern!r} not decided within {REGEX_BUDGET_S * 1000:.0f} ms "
                           "(counted as not matching)")


def _pattern(validator: SchemaValidator, pattern: str, instance: JSONValue, schema: JSONMapping
             ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = search(pattern, instance)
    except PatternTimeout:
        yield _timeout_error(pattern)
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: SchemaValidator, patterns: JSONMapping, instance: JSONValue, schema: JSONMapping
                        ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = search(pattern, key)
            except PatternTimeout:
                yield _timeout_error(pattern)
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _bounded_additional_properties(original: _Keyword) -> _Keyword:
    """``additionalProperties`` with the ``patternProperties`` matching done here, bounded; jsonschema's own
    keyword then sees those keys as declared properties."""

    def additional_properties(validator: SchemaValidator, aP: JSONValue, instance: JSONValue, schema: JSONMapping
                              ) -> Iterator[ValidationError]:
        patterns = schema.get("patternProperties") if validator.is_type(instance, "object") else None
        if not patterns:
            yield from original(validator, aP, instance, schema)
            return
        declared = dict.fromkeys(schema.get("properties") or {}, True)
        for key in instance:
            if key in declared:
                continue
            for pattern in patterns:
                try:
                    if search(pattern, key):
                        declared[key] = True
                        break
                except PatternTimeout:
                    yield _timeout_error(pattern)
                    return
        plain = {k: v for k, v in schema.items() if k != "patternProperties"}
        yield from original(validator, aP, instance, {**plain, "properties": declared})

    return additional_properties


_BOUNDED: dict[type, type] = {}


def _bounded_class(cls: type) -> type:
    """``cls`` with the regex keywords bounded (one class per draft)."""
    bounded = _BOUNDED.get(cls)
    if bounded is None:
        keywords: dict[str, _Keyword] = {"pattern": _pattern, "patternProperties": _pattern_properties}
        if "additionalProperties" in cls.VALIDATORS:  # type: ignore[attr-defined]
            keywords["additionalProperties"] = _bounded_additional_properties(
                cls.VALIDATORS["additionalProperties"])  # type: ignore[attr-defined]
        bounded = _BOUNDED[cls] = extend(cls, keywords)
    return bounded


def _walk(schema: JSONValue, spec: Specification[JSONValue], resolver: _Resolver,
          found: dict[str, list[str]]) -> None:
    """Collect the patterns and keywords of ``schema`` and look up each ``$ref`` (UnusableSchema if one fails)."""
    if isinstance(schema, list):
        for item in schema:
            _walk(item, spec, resolver, found)
        return
    if not isinstance(schema, dict):
        return
    if spec.id_of(schema):  # a nested base URI: the refs below resolve against it
        resolver = resolver.in_subresource(spec.create_resource(schema))
    for key, value in schema.items():
        if key in ("$ref", "$dynamicRef") and isinstance(value, str):
            try:
                resolver.lookup(value)
            except Unresolvable:
                raise UnusableSchema(f"{key} {value!r} cannot be resolved inside the schema (never fetched)") from None
        elif key == "pattern" and isinstance(value, str):
            found["patterns"].append(value)
        elif key == "patternProperties" and isinstance(value, dict):
            found["patterns"].extend(k for k in value if isinstance(k, str))
            found["keywords"].append(key)
        elif key == "unevaluatedProperties":
            found["keywords"].append(key)
        if key not in _DATA_KEYWORDS:
            _walk(value, spec, resolver, found)


def build_validator(schema: object, default: object = Draft202012Validator) -> SchemaValidator:
    """A validator for ``schema`` that reaches no network and bounds its regex searches (module docstring), of the
    draft its ``$schema`` names, else of ``default`` (Draft 2020-12; OpenRouter's error classes use Draft 7).

    Raises ``jsonschema.SchemaError`` for a schema its metaschema refuses, :class:`UnusableSchema` for one
    that cannot be checked safely, and TypeError or similar for a value that is not a schema at all."""
    cls = validator_for(schema, default=default)
    cls.check_schema(schema)
    validator = _bounded_class(cls)(schema, registry=OFFLINE_REGISTRY)
    found: dict[str, list[str]] = {"patterns": [], "keywords": []}
    spec = specification_with(cls.ID_OF(cls.META_SCHEMA) or "", default=DRAFT202012)  # type: ignore[attr-defined]
    resolver = METASCHEMAS.combine(OFFLINE_REGISTRY).resolver_with_root(spec.create_resource(schema))
    _walk(schema, spec, resolver, found)
    for pattern in found["patterns"]:
        try:
            _compiled(pattern)
        except (regex.error, OverflowError, RecursionError) as exc:
            raise UnusableSchema(f"pattern {pattern!r} is not a usable regex ({exc})") from None
    if {"patternProperties", "unevaluatedProperties"} <= set(found["keywords"]):
        raise UnusableSchema("patternProperties with unevaluatedProperties: jsonschema would evaluate those "
                             "patterns without a time bound")
    return validator


def is_valid(validator: SchemaValidator, instance: object) -> bool:
    """``validator.is_valid(instance)`` with every regex search of it sharing one :data:`REGEX_BUDGET_S`."""
    token = _DEADLINE.set(time.monotonic() + REGEX_BUDGET_S)
    try:
        return validator.is_valid(instance)
    finally:
        _DEADLINE.reset(token)
