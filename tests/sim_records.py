"""What the simulator records, for the tests: its truth log as written by a running simulator (the one reader:
:func:`truth_lines`, :func:`truth_by_tag`, :func:`truth_of`), and records made in-process from its pure
decisions (no HTTP, no Locust): each (profile, sample, repeat) gets the record the harness would write for the
response the simulator would send, plus the truth the simulator would log (reference decision, flips,
self-flips, decision).

The in-process records are used by the statistics tests, which need many seeded score tables quickly. The calls
carry schema-valid arguments drawn by the simulator (``avv_sim.calls.reference_calls``), so faithful profiles
agree exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any

import pandas as pd

import avv_sim
from avv_harness.run.preflight import is_preflight_tag
from avv_scoring.testing import call, records_frame
from avv_sim import behaviour, read_truth_log
from avv_sim.calls import PlannedCall, reference_calls
from avv_sim.identity import decision_key
from avv_sim.profiles import Profile, make_profile
from tests.builders import chat_body

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
]


def truth_lines(path: str | PathLike[str], preflight: bool = False) -> list[dict[str, Any]]:
    """The simulator's truth log (``--truth-log``, a run's sim_truth.jsonl): one dict per line, in order (the
    simulator's own reader, ``avv_sim.read_truth_log``). The run's pre-flight requests (one per vendor before the
    load, tagged ``…/preflight/0/1``: avv_harness/run/preflight.py) are left out unless ``preflight``: the tests
    compare the truth of the items with their records."""
    return [line for line in read_truth_log(path) if preflight or not is_preflight_tag(line.get("client_tag"))]


def truth_by_tag(path: str | PathLike[str], preflight: bool = False) -> dict[str, dict[str, Any]]:
    """Truth lines by client tag (the ``X-AVV-Item`` header: run/model/vendor/sample/repeat/attempt; a later line
    of a tag replaces an earlier one); lines of requests sent without a tag are left out, and so are the pre-flight's
    (unless ``preflight``)."""
    return {tag: line for tag, line in avv_sim.truth_by_tag(path).items()
            if tag and (preflight or not is_preflight_tag(tag))}


def truth_of(path: str | PathLike[str], tag: str) -> dict[str, Any]:
    """The one truth line of the request tagged ``tag`` (fails unless there is exactly one)."""
    (line,) = [line for line in truth_lines(path) if line["client_tag"] == tag]
    return line


def body(i: int, prefix: str = "question") -> dict[str, Any]:
    return chat_body(f"{prefix} {i}", TOOLS, model=None)


@dataclass(frozen=True)
class Truth:
    """What the simulator's truth log would say of one (profile, sample, repeat)."""

    vendor: str
    sample_id: str
    repeat: int
    reference: bool
    flipped: bool
    self_flipped: bool
    decision: bool


def sim_records(profiles: Mapping[str, Mapping[str, Any] | Profile], baseline: str, samples: int, repeats: int,
                prefix: str = "question", arguments: bool = True) -> tuple[pd.DataFrame, list[Truth]]:
    """Records of every profile on ``samples`` bodies × ``repeats`` repeats (all successful, model ``m``), typed
    as the reader types records.csv, and the truth of each. ``profiles`` maps a vendor name to its knobs;
    ``arguments=False`` sends ``{}`` as every call's arguments (faster, for trigger-only sweeps)."""
    rows, truth = sim_rows(profiles, baseline, samples, repeats, prefix, arguments)
    return records_frame(rows), truth


def sim_rows(profiles: Mapping[str, Mapping[str, Any] | Profile], baseline: str, samples: int, repeats: int,
             prefix: str = "question", arguments: bool = True) -> tuple[list[dict[str, Any]], list[Truth]]:
    """The record fields of :func:`sim_records` (for :func:`avv_scoring.testing.record`), and the truth."""
    built = {name: p if isinstance(p, Profile) else make_profile(name, p) for name, p in profiles.items()}
    rows: list[dict[str, Any]] = []
    truth: list[Truth] = []
    for i in range(samples):
        b = body(i, prefix)
        h = decision_key(b)
        for name, profile in built.items():
            for r in range(1, repeats + 1):
                d = behaviour.decide(profile, b, h, None, r)
                calls = (reference_calls(d.calls, h, None) if arguments else [PlannedCall(t, {}) for t in d.calls]) \
                    if d.decision else []
                rows.append({
                    "vendor": name, "is_baseline": name == baseline, "sample_id": str(i), "repeat": r,
                    "finish_reason": "tool_calls" if d.decision else "stop",
                    "tool_calls": [call(c.tool.name, json.dumps(c.args), f"call_{k}") for k, c in enumerate(calls)],
                    "content": "" if d.decision else "an answer",
                    "ttft_ms": profile.ttft_ms, "tps": profile.tokens_per_s, "total_tokens": 100,
                })
                truth.append(Truth(name, str(i), r, bool(d.reference), d.flipped, d.self_flipped, d.decision))
    return rows, truth


def tools_by_sample(samples: int) -> dict[str, list[dict[str, Any]]]:
    return {str(i): TOOLS for i in range(samples)}
