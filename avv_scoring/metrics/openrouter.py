"""Tool calls classified as OpenRouter counts them (scoring layer, pure): so our numbers line up with the error rates a
buyer sees on OpenRouter, which re-ranks providers on them. docs/scoring.md ("OpenRouter's error classes") says how
they relate to our schema accuracy and anomalies.

Every call of a successful response (whatever its finish reason, as schema accuracy) gets at most one class, checked
in this order:

1. ``invalid_json`` — its arguments do not parse as JSON (an unreadable ``tool_calls`` cell counts each of its calls);
2. ``unknown_tool`` — it names no tool of the request;
3. ``schema_mismatch`` — the tool has a (non-empty) ``parameters`` schema and the arguments do not validate against it
   with JSON Schema **Draft 7** (OpenRouter's draft; a schema naming its own draft in ``$schema`` is read as that
   draft). A tool without a schema accepts any arguments.

A call of a request whose tools are unknown, or whose schema cannot be checked safely (:mod:`avv_core.bounded_schema`),
is left out (as from schema accuracy). A **request** (a successful response with at least one counted call) counts
once, as failed when any of its calls has a class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from jsonschema import Draft7Validator

from avv_core.bounded_schema import SchemaValidator, build_validator, is_valid
from avv_core.json_types import JSONValue
from avv_scoring.load import is_success
from avv_scoring.metrics.additive import Columns, Sums, additive, count, rate
from avv_scoring.metrics.calls import CALLS, SCHEMAS, TC_PARSE_ERROR, VERDICTS
from avv_scoring.metrics.correctness import Call
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import first_rows, identity_codes, row_codes
from avv_scoring.metrics.schema import INVALID, VALID

INVALID_JSON, UNKNOWN_TOOL, SCHEMA_MISMATCH = "invalid_json", "unknown_tool", "schema_mismatch"
#: The classes, in the order they are checked.
CLASSES: tuple[str, ...] = (INVALID_JSON, UNKNOWN_TOOL, SCHEMA_MISMATCH)
#: A call left out (its request's tools or schema cannot be checked).
LEFT_OUT = "left_out"

#: Draft 7 validators by schema key (the schema's repr, as :class:`~avv_scoring.metrics.schema.CallChecker` keys
#: them); a schema that cannot be checked maps to None. A cache: it holds no run state.
_VALIDATORS: dict[str, SchemaValidator | None] = {}


def _validator(key: str, schema: object) -> SchemaValidator | None:
    if key not in _VALIDATORS:
        try:
            _VALIDATORS[key] = build_validator(schema, default=Draft7Validator)
        except Exception:  # SchemaError, UnusableSchema, a value that is no schema: the request's fault
            _VALIDATORS[key] = None
    return _VALIDATORS[key]


#: Draft 7 outcomes by (schema key, arguments as sent): the vendors of a run send many of the same calls, each
#: validated once. A cache (it holds no run state), emptied when it holds :data:`_OUTCOMES_KEPT` of them.
_OUTCOMES: dict[tuple[str, str], str | None] = {}
_OUTCOMES_KEPT = 500_000


def call_class(name: str, args: object, parsed: bool, schemas: Mapping[str, tuple[str, JSONValue]] | None,
               raw: str | None = None, verdict: str | None = None) -> str | None:
    """The class of one call (module docstring): one of :data:`CLASSES`, :data:`LEFT_OUT`, or None (valid).
    ``schemas``: the request's tools, name → (schema key, parameters); None when unknown. ``raw``: the arguments as
    sent (``args`` parsed), when known: the outcome is remembered per (schema, raw). ``verdict``: the call
    annotation's verdict of the call against the same ``schemas`` (:mod:`.schema`, Draft 2020-12), when known: taken
    for the outcome when the schema means the same under both drafts (:func:`drafts_agree`), not validated again."""
    if not parsed:
        return INVALID_JSON
    if schemas is None:
        return LEFT_OUT
    entry = schemas.get(name)
    if entry is None:
        return UNKNOWN_TOOL
    key, parameters = entry
    if parameters is None or (isinstance(parameters, Mapping) and not parameters):
        return None
    if verdict in (VALID, INVALID) and isinstance(args, dict) and _drafts_agree(key, parameters):
        # an object validated (or not) by the same keywords; a verdict means the 2020-12 validator was built, and
        # Draft 7's metaschema accepts whatever 2020-12's does in these keywords: no Draft 7 validator is needed
        return None if verdict == VALID else SCHEMA_MISMATCH
    validator = _validator(key, parameters)
    if validator is None:
        return LEFT_OUT
    if raw is not None and (key, raw) in _OUTCOMES:
        return _OUTCOMES[(key, raw)]
    try:
        outcome = None if is_valid(validator, args) else SCHEMA_MISMATCH
    except Exception:  # arguments nested deeper than the validator follows: they do not fit
        outcome = SCHEMA_MISMATCH
    if raw is not None:
        if len(_OUTCOMES) >= _OUTCOMES_KEPT:
            _OUTCOMES.clear()
        _OUTCOMES[(key, raw)] = outcome
    return outcome


#: The keywords that Draft 7 and Draft 2020-12 read alike in the forms :func:`drafts_agree` accepts (jsonschema checks
#: them with the same function, or — ``items`` as one schema, ``contains`` without ``minContains`` — the same way;
#: formats are asserted by neither), by what their value is: annotations and bounds, one subschema, a map of them, a
#: list of them. ``$ref``, ``items`` as a list, ``dependencies``, ``prefixItems``, ``unevaluated*``, ``$schema`` and
#: every other keyword are left out: a schema using one is validated under Draft 7 itself.
_VALUE_KEYWORDS = frozenset({
    "title", "description", "default", "examples", "$comment", "format", "readOnly", "writeOnly", "deprecated",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
    "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties", "required"})
_SCHEMA_KEYWORDS = frozenset({"additionalProperties", "items", "contains", "propertyNames", "not", "if", "then",
                              "else"})
_SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties"})
_SCHEMA_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf"})


def drafts_agree(schema: object) -> bool:
    """Whether ``schema`` gives every JSON object the same outcome under Draft 7 and Draft 2020-12: it is made of the
    keywords both drafts read alike (above), at every level. Both metaschemas ask the same of these keywords (Draft 7
    does not know ``deprecated``, so accepts it in any form), so such a schema 2020-12 can check Draft 7 can too."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for keyword, value in schema.items():
        if keyword in _VALUE_KEYWORDS:
            continue
        if keyword in _SCHEMA_KEYWORDS:
            agree = drafts_agree(value)
        elif keyword in _SCHEMA_MAP_KEYWORDS:
            agree = isinstance(value, dict) and all(drafts_agree(v) for v in value.values())
        elif keyword in _SCHEMA_LIST_KEYWORDS:
            agree = isinstance(value, list) and all(drafts_agree(v) for v in value)
        else:
            agree = False
        if not agree:
            return False
    return True


#: :func:`drafts_agree` by schema key (a cache, as :data:`_VALIDATORS`).
_AGREE: dict[str, bool] = {}


def _drafts_agree(key: str, schema: object) -> bool:
    if key not in _AGREE:
        _AGREE[key] = drafts_agree(schema)
    return _AGREE[key]


def _features(rows: pd.DataFrame) -> pd.DataFrame:
    ok = is_success(rows).to_numpy(dtype=bool)
    calls = rows[CALLS].to_numpy(dtype=object)
    verdicts = rows[VERDICTS].to_numpy(dtype=object)  # a row's verdicts come with its calls list
    schemas = rows[SCHEMAS].to_numpy(dtype=object)
    parse_error = rows[TC_PARSE_ERROR].to_numpy(dtype=bool)
    out = np.zeros((len(rows), len(CLASSES) + 3), dtype=np.int64)  # classes, counted calls, requests, failed
    at = np.flatnonzero(ok)
    if len(at):
        # annotate_calls hands every row with the same (tool set, cell) the same calls list: rows with the same list,
        # tool set and parse flag have the same classes, so each distinct one is classified once
        schema_codes = identity_codes(schemas[at])
        toolsets: dict[tuple[tuple[str, str], ...] | None, int] = {}
        toolset = np.array([toolsets.setdefault(_toolset_key(schemas[at[i]]), len(toolsets))
                            for i in first_rows(schema_codes)], dtype=np.int64)[schema_codes]
        combos = row_codes(identity_codes(calls[at]), toolset, parse_error[at])
        memo: dict[tuple[int, str, str], str | None] = {}
        classes = np.array([_row_classes(calls[at[i]], verdicts[at[i]], bool(parse_error[at[i]]), schemas[at[i]],
                                         toolset[i], memo)
                            for i in first_rows(combos)], dtype=np.int64).reshape(-1, out.shape[1])
        out[at] = classes[combos]
    return pd.DataFrame(out, index=rows.index, columns=[*CLASSES, "calls", "requests", "failed_requests"])


def _toolset_key(schemas: Mapping[str, tuple[str, JSONValue]] | None) -> tuple[tuple[str, str], ...] | None:
    """Equal for requests whose tools have the same names and schema keys (the classes of a call depend on no more)."""
    return None if schemas is None else tuple(sorted((name, entry[0]) for name, entry in schemas.items()))


def _row_classes(row_calls: Sequence[Call] | None, row_verdicts: Sequence[str] | None, parse_error: bool,
                 schemas: Mapping[str, tuple[str, JSONValue]] | None, toolset: int,
                 memo: dict[tuple[int, str, str], str | None]) -> list[int]:
    """One successful row's features: the count of each class, its counted calls, whether it is a counted request
    and whether it failed. ``row_verdicts``: the call annotation's verdict of each call (:func:`call_class`)."""
    row_calls = row_calls or []
    if parse_error:
        found: list[str | None] = [INVALID_JSON] * max(1, len(row_calls))
    else:
        found = []
        verdicts = row_verdicts if row_verdicts is not None and len(row_verdicts) == len(row_calls) \
            else [None] * len(row_calls)
        for call, verdict in zip(row_calls, verdicts, strict=True):
            key = (toolset, call.name, call.raw)
            if key not in memo:
                memo[key] = call_class(call.name, call.args, call.parsed, schemas,
                                       call.raw if isinstance(call.raw, str) else None, verdict)
            found.append(memo[key])
    counted = [c for c in found if c != LEFT_OUT]
    return [*(counted.count(name) for name in CLASSES), len(counted), int(bool(counted)),
            int(any(c is not None for c in counted))]


@produces(
    Metric("openrouter_call_error_rate", "OR call errors", "rate", "lower", order=380, group="field",
           doc="calls with an OpenRouter error class (invalid_json, unknown_tool, schema_mismatch — Draft 7) / "
               "counted calls of successful responses; missing with none"),
    Metric("openrouter_request_error_rate", "OR request errors", "rate", "lower", order=381, group="field",
           doc="successful responses with a call in an error class / successful responses with a counted call "
               "(a request counts once); missing with none"),
    Metric("openrouter_invalid_json", "OR invalid_json", "int", "lower", order=382, group="field",
           doc="calls whose arguments do not parse as JSON"),
    Metric("openrouter_unknown_tool", "OR unknown_tool", "int", "lower", order=383, group="field",
           doc="calls (arguments JSON) naming no tool of the request"),
    Metric("openrouter_schema_mismatch", "OR schema_mismatch", "int", "lower", order=384, group="field",
           doc="calls of a known tool whose arguments fail its schema under JSON Schema Draft 7 (no schema: valid)"),
    Metric("openrouter_calls", "OR calls", "int", "none", order=385,
           doc="calls of successful responses counted (tools and schema checkable)"),
    Metric("openrouter_requests", "OR requests", "int", "none", order=386,
           doc="successful responses with at least one counted call"),
)
@additive(_features)
def openrouter_error_classes(sums: Sums) -> Columns:
    """OpenRouter's tool-call error classes (module docstring)::

        openrouter_call_error_rate = (invalid_json + unknown_tool + schema_mismatch) / counted calls
        openrouter_request_error_rate = requests with a call in a class / requests with a counted call
    """
    calls, requests = count(sums["calls"]), count(sums["requests"])
    errors = sum(count(sums[name]) for name in CLASSES)
    return {
        "openrouter_call_error_rate": rate(errors, calls),
        "openrouter_request_error_rate": rate(count(sums["failed_requests"]), requests),
        "openrouter_invalid_json": count(sums[INVALID_JSON]),
        "openrouter_unknown_tool": count(sums[UNKNOWN_TOOL]),
        "openrouter_schema_mismatch": count(sums[SCHEMA_MISMATCH]),
        "openrouter_calls": calls,
        "openrouter_requests": requests,
    }
