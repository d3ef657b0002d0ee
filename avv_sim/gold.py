"""Gold labels for the reference model (simulator, pure): a sample file's ``expected_tool_call``, ``expected_calls``
and ``tool_names``, found again for each request by the request's messages and tools (the file is read by
:mod:`avv_sim.sample_file`).

The harness never sends gold to a vendor: it strips these keys from every body. The simulator reads them from
the sample file itself (``avv-sim --gold FILE``; the harness passes its ``--avv-samples`` file to the simulator
it starts), keyed by :func:`gold_key` — a hash of the request's ``messages`` and ``tools`` only, so a vendor's
``model``, ``stream``, ``extra_body`` or provider pinning does not change it.

Following gold (the reference, see docs/simulator.md): call exactly the expected functions (wire names: the
inverse of ``tool_names``) with, for each expected argument, one of its acceptable values — preferring one that
keeps the call valid against the tool's schema — and leaving an argument out only when ``""`` is acceptable.
The acceptable-value rules are those of :mod:`avv_scoring.metrics.correctness` (an object value is matched key by key,
an array element by element); this module re-implements the little it needs (values compared as
:func:`avv_core.canonical.canonical_key` compares them) so the simulator stays independent of the scoring
package, and the integration tests check the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import avv_sim.schema_args as schema_args
from avv_core.canonical import canonical_key, canonical_sha256
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_sim.decision_key import conversation
from avv_sim.draws import unit

GOLD_KEYS = ("expected_tool_call", "expected_calls", "tool_names")
OMIT = object()  # "leave this argument out"


@dataclass(frozen=True)
class GoldEntry:
    expected_tool_call: bool | None = None
    expected_calls: tuple[JSONObject, ...] | None = None
    tool_names: dict[str, str] = field(default_factory=dict)  # wire name → original name

    def wire_name(self, original: str) -> str:
        return next((w for w, o in self.tool_names.items() if o == original), original)


def gold_key(body: JSONMapping) -> str:
    """sha256 of the canonical ``{"messages", "tools"}`` of a body, its messages reduced to what a chat
    template renders (:func:`avv_sim.decision_key.conversation`; K2VV's ``_input`` role read as ``system``, as
    the harness sends it). So a request transformed by an adapter (ids renumbered, reasoning injected) and a
    raw-completions prompt parsed back find the same gold as the sample line."""
    messages = body.get("messages")
    if isinstance(messages, list):
        messages = [{**m, "role": "system"} if isinstance(m, dict) and m.get("role") == "_input" else m
                    for m in messages]
    shown = {"messages": conversation(messages), "tools": body.get("tools") or None}
    return canonical_sha256(shown)


def gold_entry(obj: object) -> GoldEntry | None:
    """The gold of one parsed sample line; None when it has none or it is malformed (the harness validates samples
    and reports bad lines itself; here they are only skipped)."""
    if not isinstance(obj, dict) or not any(k in obj for k in GOLD_KEYS):
        return None
    calls, expected, names = obj.get("expected_calls"), obj.get("expected_tool_call"), obj.get("tool_names")
    if not isinstance(expected, (bool, type(None))) or not isinstance(calls, (list, type(None))) \
            or not isinstance(names, (dict, type(None))):
        raise ValueError("malformed gold keys")
    return GoldEntry(True if expected is None and calls else expected,
                     tuple(c for c in calls if isinstance(c, dict)) if calls else None, dict(names or {}))


def options(expected: object) -> list[JSONValue]:
    """The acceptable values of an expected argument (a list = alternatives, anything else = one)."""
    return list(expected) if isinstance(expected, list) else [expected]


def build_value(alternative: object, seed: str) -> JSONValue:
    """A concrete value for one acceptable value: objects and object elements of arrays are built key by key."""
    if isinstance(alternative, dict):
        return build_arguments(alternative, None, seed)
    if isinstance(alternative, list):
        return [build_value(e, f"{seed}:{i}") if isinstance(e, dict) else e for i, e in enumerate(alternative)]
    return alternative


def build_arguments(expected: JSONMapping, schema: JSONMapping | None, seed: str) -> JSONObject:
    """Arguments that match ``expected`` (see the module docstring); ``schema`` = the tool's parameters."""
    schema = schema if isinstance(schema, Mapping) else {}
    declared = schema.get("properties")
    props: JSONMapping = declared if isinstance(declared, Mapping) else {}
    required = set(schema.get("required") or [])
    out: JSONObject = {}
    for key, wanted in expected.items():
        choices = [OMIT if isinstance(o, str) and o == "" else build_value(o, f"{seed}:{key}") for o in options(wanted)]
        sub = props.get(key)
        valid = [c for c in choices if (c is OMIT and key not in required)
                 or (c is not OMIT and (not isinstance(sub, Mapping) or schema_args.is_valid(sub, c)))]
        pool = valid or choices
        if not pool:
            continue
        choice = pool[int(unit(seed, "gold", key) * len(pool))]
        if choice is not OMIT:
            out[key] = choice
    return out


def acceptable(value: object, expected: object) -> bool:
    """Whether ``value`` equals one of the acceptable values (objects compared as built: key by key)."""
    for option in options(expected):
        if isinstance(option, dict):
            if isinstance(value, dict) and set(value) <= set(option) and all(
                    acceptable(v, option[k]) for k, v in value.items()):
                return True
        elif canonical_key(value) == canonical_key(option):
            return True
    return False
