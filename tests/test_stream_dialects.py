"""Response dialects: reasoning under ``reasoning_content``, ``reasoning`` or ``reasoning_details`` gives the
same record (TTFT kind, characters, reasoning-only detection); the record says which field carried it."""

from __future__ import annotations

import pandas as pd
import pytest
import requests

from avv_core.items import ItemKey, WorkItem
from avv_core.record_file import coerce_frame
from avv_core.records import Record
from avv_core.samples import Sample
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, execute_item
from avv_scoring.metrics.headline import reasoning_only_rate
from tests.fake_vendor import DONE, ScriptedAdapter
from tests.wire_server import chunk, sse

THOUGHTS = ["Let", " me", " think"]


def reasoning_delta(field: str, text: str) -> dict:
    if field == "reasoning_details":
        return {"reasoning_details": [{"type": "reasoning.text", "text": text, "index": 0}]}
    return {field: text}


def reply(field: str, answer: str | None) -> bytes:
    events = [sse(chunk({"role": "assistant", "content": ""}))]
    events += [sse(chunk(reasoning_delta(field, t))) for t in THOUGHTS]
    if answer:
        events.append(sse(chunk({"content": answer})))
    events += [sse(chunk({}, "stop")), DONE]
    return b"".join(events)


def record_for(body: bytes) -> Record:
    adapter = ScriptedAdapter(lambda request: (200, {"Content-Type": "text/event-stream"}, body))
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    item = WorkItem(ItemKey("m", "v", "1", 1), Sample("1", 1, {"messages": [{"role": "user", "content": "q"}]}))
    vendor = Vendor("m", "v", "m", "http://vendor.test/v/v1", include_usage=False)
    ctx = ExecContext("r", "w", RetryPolicy(retries=0))
    return execute_item(ItemRun(session, vendor, vendor.url, item, ctx)).record


@pytest.mark.parametrize("answer", ["Done.", None], ids=["answered", "reasoning-only"])
def test_every_reasoning_field_gives_the_same_record(answer):
    records = {f: record_for(reply(f, answer)) for f in ("reasoning_content", "reasoning", "reasoning_details")}
    for field, record in records.items():
        assert record["reasoning_field"] == field
        assert (record["status"], record["ttft_kind"], record["reasoning_chars"]) == ("success", "reasoning",
                                                                                      len("".join(THOUGHTS)))
        assert record["content"] == (answer or "")
    frame = coerce_frame(pd.DataFrame([dict(r) for r in records.values()]).astype(object))
    assert reasoning_only_rate(frame) == {"reasoning_only": 0 if answer else 3, "reasoning_only_rate": 0 if answer
                                          else 1.0}


def test_the_same_text_under_two_names_counts_once():
    both = {"reasoning": "abc", "reasoning_details": [{"type": "reasoning.text", "text": "abc"}]}
    body = b"".join([sse(chunk(both)), sse(chunk({"content": "x"})), sse(chunk({}, "stop")), DONE])
    record = record_for(body)
    assert record["reasoning_chars"] == 3 and record["reasoning_field"] == "reasoning"


def test_no_reasoning_leaves_the_field_empty():
    body = b"".join([sse(chunk({"content": "x"})), sse(chunk({}, "stop")), DONE])
    assert record_for(body)["reasoning_field"] is None
