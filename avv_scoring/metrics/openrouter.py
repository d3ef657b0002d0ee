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

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from jsonschema import Draft7Validator

from avv_core.bounded_schema import build_validator, is_valid
from avv_core.json_types import JSONObject
from avv_scoring.load import is_success
from avv_scoring.metrics.additive import Columns, Sums, additive, count, rate
from avv_scoring.metrics.calls import CALLS, SCHEMAS, TC_PARSE_ERROR
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces

INVALID_JSON, UNKNOWN_TOOL, SCHEMA_MISMATCH = "invalid_json", "unknown_tool", "schema_mismatch"
#: The classes, in the order they are checked.
CLASSES: tuple[str, ...] = (INVALID_JSON, UNKNOWN_TOOL, SCHEMA_MISMATCH)
#: A call left out (its request's tools or schema cannot be checked).
LEFT_OUT = "left_out"

#: Draft 7 validators by schema key (the schema's repr, as :class:`~avv_scoring.metrics.schema.CallChecker` keys
#: them); a schema that cannot be checked maps to None. A cache: it holds no run state.
_VALIDATORS: JSONObject = {}


def _validator(key: str, schema: Any) -> Any:
    if key not in _VALIDATORS:
        try:
            _VALIDATORS[key] = build_validator(schema, default=Draft7Validator)
        except Exception:  # SchemaError, UnusableSchema, a value that is no schema: the request's fault
            _VALIDATORS[key] = None
    return _VALIDATORS[key]


def call_class(name: str, args: Any, parsed: bool, schemas: Mapping[str, tuple[str, Any]] | None) -> str | None:
    """The class of one call (module docstring): one of :data:`CLASSES`, :data:`LEFT_OUT`, or None (valid).
    ``schemas``: the request's tools, name → (schema key, parameters); None when unknown."""
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
    validator = _validator(key, parameters)
    if validator is None:
        return LEFT_OUT
    try:
        return None if is_valid(validator, args) else SCHEMA_MISMATCH
    except Exception:  # arguments nested deeper than the validator follows: they do not fit
        return SCHEMA_MISMATCH


def _features(rows: pd.DataFrame) -> pd.DataFrame:
    ok = is_success(rows).to_numpy(dtype=bool)
    calls = rows[CALLS].to_numpy(dtype=object)
    schemas = rows[SCHEMAS].to_numpy(dtype=object)
    parse_error = rows[TC_PARSE_ERROR].to_numpy(dtype=bool)
    out = np.zeros((len(rows), len(CLASSES) + 3), dtype=np.int64)  # classes, counted calls, requests, failed
    memo: dict[tuple[int, str, str], str | None] = {}
    for i in np.flatnonzero(ok):
        row_calls = calls[i] or []
        if parse_error[i]:
            found: list[str | None] = [INVALID_JSON] * max(1, len(row_calls))
        else:
            found = []
            for call in row_calls:
                key = (id(schemas[i]), call.name, call.raw)
                if key not in memo:
                    memo[key] = call_class(call.name, call.args, call.parsed, schemas[i])
                found.append(memo[key])
        counted = [c for c in found if c != LEFT_OUT]
        for j, name in enumerate(CLASSES):
            out[i, j] = counted.count(name)
        out[i, len(CLASSES)] = len(counted)
        out[i, len(CLASSES) + 1] = int(bool(counted))
        out[i, len(CLASSES) + 2] = int(any(c is not None for c in counted))
    return pd.DataFrame(out, index=rows.index, columns=[*CLASSES, "calls", "requests", "failed_requests"])


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
