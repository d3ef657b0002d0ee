"""Tool-call validation against the request's tool definitions.

A tool call is **valid** when

1. its ``name`` is the name of one of the request's tools,
2. its ``arguments`` (the raw string the vendor streamed) parse as a JSON *object*, and
3. ``jsonschema`` validates that object against the tool's ``parameters`` — using the draft named by
   ``$schema``, else Draft 2020-12. A missing or empty (``{}``) ``parameters`` accepts any object.

A call is **not checkable** (neither valid nor invalid) when the request's schema is itself invalid
(``check_schema`` fails), cannot be checked safely (a ``$ref`` that does not resolve inside the schema — it is
never fetched —, a pattern the regex engine refuses, ``unevaluatedProperties`` with ``patternProperties``:
see :mod:`avv_core.bounded_schema`) or the sample's tools are unknown. That is the request's fault, not the
vendor's, so it is reported separately and left out of the accuracy. All of it is decided when the schema is
compiled, never by the arguments: once a schema is checkable, a validation that does not finish (a regex
search past :data:`~avv_core.bounded_schema.REGEX_BUDGET_S`) or fails (arguments nested deeper than Python
follows) makes the call invalid, so no vendor can move its own call out of the accuracy.

Compiled validators are cached per schema (keyed by the schema's canonical JSON, :mod:`avv_core.canonical`); this
cache is the package's only module-level state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from avv_core.bounded_schema import SchemaValidator, build_validator, is_valid
from avv_core.canonical import UNPARSED, canonical_key, parse_json_text
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_scoring.metrics.correctness import Call

VALID = "valid"
INVALID = "invalid"
UNCHECKABLE = "uncheckable"

_VALIDATORS: dict[str, SchemaValidator | _BadSchema] = {}


class _BadSchema:
    """Cache marker for a schema that cannot be checked (``check_schema`` failed, or it is not safe to check)."""

    def __init__(self, reason: str):
        self.reason = reason


def compiled_validator(schema: object) -> SchemaValidator | _BadSchema:
    """The cached validator for ``schema``, or a ``_BadSchema`` marker when the schema is invalid. Keyed by the
    schema's canonical JSON (:func:`avv_core.canonical.canonical_key`: key order ignored, ``1`` and ``1.0`` one
    number), so equal schemas share one validator."""
    key = canonical_key(schema)
    cached = _VALIDATORS.get(key)
    if cached is None:
        try:
            cached = build_validator(schema)
        except Exception as exc:  # SchemaError, UnusableSchema, TypeError for non-schema values, ...
            cached = _BadSchema(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        _VALIDATORS[key] = cached
    return cached


def clear_cache() -> None:
    _VALIDATORS.clear()


def tool_schemas(tools: Sequence[JSONValue] | None) -> JSONObject:
    """``name → parameters`` for a request's ``tools`` list (first definition of a name wins).

    Accepts the OpenAI shape ``{"type": "function", "function": {"name", "parameters"}}`` and a flat
    ``{"name", "parameters"}``. A tool without ``parameters`` maps to None (any object is accepted).
    """
    out: JSONObject = {}
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        fn: JSONMapping = function if isinstance(function, Mapping) else tool
        name = fn.get("name")
        if isinstance(name, str) and name not in out:
            out[name] = fn.get("parameters")
    return out


def parse_tool_calls(value: object) -> list[JSONObject] | None:
    """The ``tool_calls`` record column as a list of dicts; ``[]`` when empty, None when unparseable."""
    if value is None or (isinstance(value, float) and value != value):
        return []
    if isinstance(value, list):
        calls = value
    else:
        text = str(value).strip()
        if not text:
            return []
        calls = parse_json_text(text)
        if calls is UNPARSED:
            return None
    if not isinstance(calls, list):
        return None
    return [c if isinstance(c, dict) else {"name": None, "arguments": c} for c in calls]


def check_call(call: JSONMapping, schemas: JSONMapping | None) -> str:
    """Classify one tool call as ``valid``, ``invalid`` or ``uncheckable`` (see the module docstring).

    ``schemas`` is :func:`tool_schemas` of the request; None means the request's tools are unknown.
    """
    if schemas is None:
        return UNCHECKABLE
    name = call.get("name")
    if not isinstance(name, str) or name not in schemas:
        return INVALID
    raw = call.get("arguments")
    if isinstance(raw, Mapping):
        args: JSONValue = raw
    elif isinstance(raw, str):
        args = parse_json_text(raw)
        if args is UNPARSED:
            return INVALID
    else:
        return INVALID
    if not isinstance(args, dict):
        return INVALID
    return _check_parsed(args, schemas[name])


class CallChecker:
    """:func:`check_call` for many calls at once, doing repeated work once (one per scoring pass; it holds
    no run state): a request's tool list is read once per distinct list, each tool's validator is looked up
    once, and a call is validated once per (tool schema, raw arguments) — the same arguments against the same
    schema always get the same verdict."""

    def __init__(self) -> None:
        self._schemas: dict[int, dict[str, tuple[str, JSONValue]]] = {}
        # the tool lists keyed by id() above stay alive while this checker does
        self._keep: list[Sequence[JSONValue]] = []
        self._verdicts: dict[tuple[str, str, str], str] = {}
        self._validators: dict[str, SchemaValidator | _BadSchema] = {}

    def schemas(self, tools: Sequence[JSONValue]) -> dict[str, tuple[str, JSONValue]]:
        """``name → (schema key, parameters)`` of a request's tools (:func:`tool_schemas`), cached per list.

        The key is ``repr``: equal for equal schemas read from equal text (the same tools in many samples),
        3× cheaper than canonical JSON; a schema written in another key order only gets its own entry."""
        found = self._schemas.get(id(tools))
        if found is None:
            found = {name: (repr(params), params) for name, params in tool_schemas(tools).items()}
            self._schemas[id(tools)] = found
            self._keep.append(tools)
        return found

    def verdict(self, call: Call, schemas: Mapping[str, tuple[str, JSONValue]] | None) -> str:
        """The verdict of one :class:`~avv_scoring.metrics.correctness.Call` (see :func:`check_call`)."""
        if schemas is None:
            return UNCHECKABLE
        entry = schemas.get(call.name)
        if entry is None:
            return INVALID
        memo_key = (entry[0], call.name, call.raw)
        verdict = self._verdicts.get(memo_key)
        if verdict is None:
            validator = self._validators.get(entry[0])
            if validator is None:
                validator = self._validators[entry[0]] = compiled_validator(entry[1])
            verdict = self._verdicts[memo_key] = _check_parsed(call.args, entry[1], validator)
        return verdict


def _check_parsed(args: object, parameters: object, validator: SchemaValidator | _BadSchema | None = None) -> str:
    if not isinstance(args, dict):  # unparseable (UNPARSED) or not an object
        return INVALID
    if parameters is None or (isinstance(parameters, Mapping) and not parameters):
        return VALID
    validator = validator if validator is not None else compiled_validator(parameters)
    if isinstance(validator, _BadSchema):
        return UNCHECKABLE
    try:
        return VALID if is_valid(validator, args) else INVALID
    except Exception:  # the schema was checked when compiled: what fails now is the arguments (e.g. too deep)
        return INVALID
