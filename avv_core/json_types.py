"""JSON's types as this code sees them (pure core, no I/O): the names that mark where JSON enters.

Request and response bodies, SSE events, samples, tool-call arguments, run.json, records on their way to CSV,
simulator configs and truth logs are JSON objects: ``json.loads`` gives them, ``json.dumps`` takes them. Their
values are whatever the sender wrote, so they stay ``Any`` here, in one place, and the code that reads a field
checks its type there (a vendor's reply is untrusted). Everything that is not JSON has its own type.

``python bench/any_count.py`` counts ``Any`` in type positions (issue 36: these aliases hold what is left, with
:data:`avv_core.frame_rows.Cell` for a table's cells). Use them only where a value comes from or goes to JSON (or
YAML, which parses to the same values); a value only checked or passed on is ``object``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

#: One JSON value as parsed or about to be written: an object, an array, a string, a number, a boolean or null
#: (a member of a parsed object, a tool call's argument, a CSV cell read back as JSON); its reader checks its type.
JSONValue: TypeAlias = Any
#: A JSON object as parsed or about to be written (mutable).
JSONObject: TypeAlias = dict[str, Any]
#: A JSON object only read (a parameter that takes a ``JSONObject`` or any other mapping of JSON values).
JSONMapping: TypeAlias = Mapping[str, Any]

__all__ = ["JSONMapping", "JSONObject", "JSONValue"]
