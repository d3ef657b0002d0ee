"""The reasoning fields (avv_core/reasoning.py): each response field the simulator writes is read back by the
wire client into the same record; the transforms and the README follow the declaration."""

from __future__ import annotations

import pytest
import requests

from avv_core.items import ItemKey, WorkItem
from avv_core.reasoning import (
    CANONICAL_FIELD,
    FIELD_NAMES,
    REASONING_FIELDS,
    RESPONSE_FIELD_NAMES,
    render_reasoning_table,
    split_reasoning,
)
from avv_core.samples import Sample
from avv_harness.dialects.transforms import apply_transforms
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, execute_item
from avv_sim.plan import make_plan
from avv_sim.profiles import REASONING_FIELDS as SIM_REASONING_FIELDS
from avv_sim.profiles import make_profile
from avv_sim.wire import Wire
from tests.fake_vendor import ScriptedAdapter
from tests.locust_runs import ROOT

BODY = {"messages": [{"role": "user", "content": "q"}], "model": "m", "stream": True}


def simulated(field: str) -> tuple[bytes, dict, str]:
    """(the simulator's stream, its JSON body, the reasoning text) for a profile sending ``field``."""
    profile = make_profile("p", {"reasoning_field": field, "reasoning_tokens": 4, "output_tokens": 3})
    plan = make_plan(profile, BODY, 1, "key")
    wire = Wire(plan, 1, "chatcmpl-1", field)
    stream = wire.role_event() + b"".join(wire.chunk_event(c, j) for j, c in enumerate(plan.chunks))
    stream += (wire.finish_event(False) or b"") + wire.done()
    return stream, wire.completion_body(), "".join(c.text for c in plan.chunks if c.kind == "reasoning")


def record_for(stream: bytes):
    session = requests.Session()
    session.mount("http://vendor.test/", ScriptedAdapter(lambda r: (200, {"Content-Type": "text/event-stream"},
                                                                    stream)))
    item = WorkItem(ItemKey("m", "v", "1", 1), Sample("1", 1, {"messages": BODY["messages"]}))
    vendor = Vendor("m", "v", "m", "http://vendor.test/v/v1", include_usage=False)
    ctx = ExecContext("r", "w", RetryPolicy(retries=0))
    return execute_item(ItemRun(session, vendor, vendor.url, item, ctx)).record


@pytest.mark.parametrize("field", RESPONSE_FIELD_NAMES)
def test_what_the_simulator_writes_the_wire_client_reads(field):
    stream, body, text = simulated(field)
    record = record_for(stream)
    assert (record["reasoning_field"], record["reasoning_chars"], record["ttft_kind"]) == (field, len(text),
                                                                                         "reasoning")
    declared = next(f for f in REASONING_FIELDS if f.name == field)
    assert declared.read(body["choices"][0]["message"][field]) == text


def test_the_declaration_is_the_list_everywhere():
    assert SIM_REASONING_FIELDS == RESPONSE_FIELD_NAMES and CANONICAL_FIELD in RESPONSE_FIELD_NAMES
    assert set(RESPONSE_FIELD_NAMES) < set(FIELD_NAMES)
    assert render_reasoning_table() in (ROOT / "docs" / "reference" / "wire-formats.md").read_text(encoding="utf-8")
    turn = {"role": "assistant", "content": "a", **{name: f"t-{name}" for name in FIELD_NAMES}}
    assert apply_transforms({"messages": [turn]}, ["strip_reasoning_content"])["messages"] == [
        {"role": "assistant", "content": "a"}]
    for field in REASONING_FIELDS:
        if field.name != CANONICAL_FIELD:
            renamed = apply_transforms({"messages": [{"role": "assistant", field.name: field.write("x")}]},
                                       ["rename_reasoning_fields"])
            assert renamed["messages"] == [{"role": "assistant", CANONICAL_FIELD: "x"}]


def test_a_think_block_is_split_off():
    assert split_reasoning("<think>\nplan\n</think>\n\nrest") == ("plan", "\n\nrest")
    assert split_reasoning("  <think>cut") == ("cut", "")
    assert split_reasoning("no think") == ("", "no think")
