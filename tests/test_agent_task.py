"""Agent tasks on the harness side: the ``agent`` object validated with file, line and field; tool results
matched on canonical values; the loop against an in-process vendor (steps, tool messages, adapters, stops); and
the Locust glue recording each trajectory once, as one item."""

from __future__ import annotations

import json

import pytest

from avv_core import canonical as harness_canonical
from avv_core.agent_task import DEFAULT_RESULT, SOURCE_DEFAULT, SOURCE_INJECTED, SOURCE_MATCHED, parse_agent
from avv_core.errors import InputError
from avv_core.items import ITEM_HEADER, ItemKey, WorkItem
from avv_core.record_file import read_records
from avv_core.samples import load_samples
from avv_harness.inputs.config import load_config
from avv_harness.run.controller import EXIT_OK
from avv_harness.wire.agent_loop import run_trajectory
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, build_body
from avv_harness.wire.run_item import run_item_safely
from avv_scoring.metrics import correctness
from tests.builders import VENDOR_URL, vendor_entry, vendors_config, write_inputs, write_jsonl, write_yaml
from tests.fake_vendor import ScriptedAdapter, error_reply, fake_session_factory, stream_reply
from tests.glue import make_env, options, run_to_end


def tool(name: str, **props: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()}}}}


TOOLS = [tool("get_booking", ref="string"), tool("search", day="integer", city="string"), tool("rebook", ref="string")]
TASK = {
    "max_steps": 5,
    "tool_results": [
        {"name": "get_booking", "arguments": {"ref": "QX7"}, "content": {"status": "cancelled"}},
        {"name": "search", "arguments": {"day": 14}, "content": "LH 906 at 13:05"},
        {"name": "search", "arguments": {"day": 14}, "content": "LH 906 at 13:05 (cached)"},
        {"name": "rebook", "arguments": {}, "content": "confirmed"},
    ],
    "final_text_pattern": "LH 906",
}


def line(agent: dict | None = None, **extra) -> dict:
    out = {"data_index": "t1", "messages": [{"role": "user", "content": "rebook QX7"}], "tools": TOOLS, **extra}
    if agent is not None:
        out["agent"] = agent
    return out


# ------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("agent, message", [
    ([1], "field 'agent' must be an object"),
    ({"steps": 3}, "field 'agent': unknown key(s) steps"),
    ({"max_steps": 0}, "field 'agent'.max_steps must be an integer from 1 to 100, got 0"),
    ({"tool_results": [{"name": "nope", "content": "x"}]}, "tool_results[0].name 'nope' is not a tool of the request"),
    ({"tool_results": [{"name": "search", "arguments": [14], "content": "x"}]}, "tool_results[0].arguments must be"),
    ({"tool_results": [{"name": "search"}]}, "tool_results[0].content is missing"),
    ({"max_steps": 3, "inject_error": {"step": 4}}, "inject_error.step must be an integer from 1 to 3"),
    ({"final_text_pattern": "LH (906"}, "final_text_pattern is not a valid regular expression"),
    ({"final_calls": [{"name": "rebook", "args": {}}]}, "final_calls[0] must be an object with 'name' and"),
    ({"final_calls": [{"name": "cancel", "arguments": {}}]}, "final_calls[0].name 'cancel' is not a tool"),
])
def test_a_malformed_agent_object_names_file_line_and_field(tmp_path, agent, message):
    path = write_jsonl(tmp_path / "samples.jsonl", [{"messages": [{"role": "user", "content": "x"}]}, line(agent)])
    with pytest.raises(InputError) as exc:
        load_samples(path)
    assert f"{path}:2: field 'agent'" in str(exc.value) and message in str(exc.value)


def test_an_agent_task_needs_tools(tmp_path):
    path = write_jsonl(tmp_path / "samples.jsonl", [{"messages": [{"role": "user", "content": "x"}], "agent": {}}])
    with pytest.raises(InputError, match=r"samples.jsonl:1: field 'agent': an agent task needs 'tools'"):
        load_samples(path)


def test_the_agent_object_is_metadata_and_never_sent(tmp_path):
    sample = load_samples(write_jsonl(tmp_path / "samples.jsonl", [line(TASK)])).samples[0]
    config = load_config(write_yaml(tmp_path / "v.yaml", vendors_config([
        vendor_entry("a", "http://x.test/v1", is_baseline=True, require_key=False)])))
    body = build_body(sample, config.vendors[0])
    assert "agent" not in body and sample.agent.max_steps == 5 and sample.gold.agent is sample.agent
    assert sample.gold.known and not sample.gold.labelled  # an agent task alone is not a trigger label


# --------------------------------------------------------------------------------------------- matching


def test_tool_results_match_partially_on_canonical_values_and_are_used_in_order():
    task = parse_agent(TASK, TOOLS, "f:1")
    used: set[int] = set()
    assert task.match("get_booking", '{"ref": "QX7", "extra": true}', used) == (0, '{"status": "cancelled"}')
    assert task.match("search", '{"city": "FRA", "day": 14.0}', used) == (1, "LH 906 at 13:05")  # 14.0 == 14
    assert task.match("search", '{"day": 14}', used) == (2, "LH 906 at 13:05 (cached)")  # the next unused one
    assert task.match("search", '{"day": 14}', used) == (2, "LH 906 at 13:05 (cached)")  # all used: the last again
    assert task.match("search", '{"day": 15}', used) == (None, DEFAULT_RESULT)
    assert task.match("search", "{not json", used) == (None, DEFAULT_RESULT)
    assert task.match("rebook", "{not json", used)[0] == 3  # {} matches any call of the tool
    assert task.match("get_booking", '{"ref": "qx7"}', used)[0] is None  # strings compare exactly


def test_answers_at_the_injection_step_are_the_error_for_every_call():
    task = parse_agent({**TASK, "inject_error": {"step": 2}}, TOOLS, "f:1")
    calls = [{"id": "a", "name": "search", "arguments": '{"day": 14}'}, {"id": "b", "name": "nope", "arguments": "{}"}]
    assert [(a.source, a.content) for a in task.answers(2, calls)] == [
        (SOURCE_INJECTED, "Error: upstream timeout (503)")] * 2
    assert [a.source for a in task.answers(1, calls)] == [SOURCE_MATCHED, SOURCE_DEFAULT]


def test_scoring_uses_the_harness_canonical_form():
    assert correctness.canonical is harness_canonical.canonical
    assert correctness.canonical_key({"b": 1.0, "a": [2.0]}) == '{"a":[2],"b":1}'


# ------------------------------------------------------------------------------------------------ the loop


def agent_vendor(script):
    """A vendor that answers each step from ``script(step, request_body)`` → a stream reply."""
    def handler(request):
        body = json.loads(request.body)
        step = ItemKey.tag_step(request.headers[ITEM_HEADER])
        return script(step, body)
    return ScriptedAdapter(handler)


def follows_the_task(step, body):
    plan = {1: ("get_booking", {"ref": "QX7"}), 2: ("search", {"day": 14}), 3: ("rebook", {"ref": "QX7"})}
    if step in plan:
        return stream_reply(tool_calls=[plan[step]])
    return stream_reply("rebooked on LH 906")


def setup(tmp_path, agent=TASK, adapter="generic", retries=0):
    sample = load_samples(write_jsonl(tmp_path / "samples.jsonl", [line(agent)])).samples[0]
    config = load_config(write_yaml(tmp_path / "v.yaml", vendors_config([
        vendor_entry("a", VENDOR_URL.format(name="a"), is_baseline=True, require_key=False, adapter=adapter)])))
    item = WorkItem(ItemKey("m", "a", sample.sample_id, 1), sample)
    ctx = ExecContext(run_id="r1", worker="w", policy=RetryPolicy(retries=retries, backoff_base_s=0.0))
    return config.vendors[0], item, ctx


def run(tmp_path, script, **kw):
    vendor, item, ctx = setup(tmp_path, **kw)
    adapter = agent_vendor(script)
    session = fake_session_factory(adapter)()
    records = run_trajectory(ItemRun(session, vendor, vendor.url, item, ctx, sleep=lambda s: None))
    return records, [json.loads(r.body) for r in adapter.requests], adapter


def test_the_loop_plays_the_tools_and_stops_at_the_final_answer(tmp_path):
    records, bodies, adapter = run(tmp_path, follows_the_task)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r["finish_reason"] for r in records] == ["tool_calls"] * 3 + ["stop"]
    assert records[-1].get("tool_results") is None and records[-1]["content"] == "rebooked on LH 906"
    assert {r["request_hash"] for r in records} == {records[0]["request_hash"]}  # the sample's, for resume
    step2 = bodies[1]["messages"]
    assert step2[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_booking", "arguments": '{"ref": "QX7"}'}}]}
    assert step2[2] == {"role": "tool", "tool_call_id": "call_0", "content": '{"status": "cancelled"}'}
    assert len(bodies[3]["messages"]) == 1 + 3 * 2 and "agent" not in bodies[0]
    answers = [json.loads(r["tool_results"]) for r in records[:3]]
    assert [(a[0]["source"], a[0]["index"]) for a in answers] == [("matched", 0), ("matched", 1), ("matched", 3)]
    tags = [r.headers[ITEM_HEADER] for r in adapter.requests]
    assert [ItemKey.tag_step(t) for t in tags] == [1, 2, 3, 4] and {ItemKey.parse_tag(t)[1] for t in tags} == {
        ItemKey("m", "a", "t1", 1)}


def test_the_history_goes_through_the_vendors_adapter(tmp_path):
    _, bodies, _ = run(tmp_path, follows_the_task, adapter="kimi")
    assistant = bodies[1]["messages"][1]
    assert assistant["reasoning_content"] == " "  # kimi: inject_reasoning_content on tool-call turns
    assert assistant["tool_calls"][0]["id"] == "functions.get_booking:0"  # kimi: renumber_tool_call_ids
    assert bodies[1]["messages"][2]["tool_call_id"] == "functions.get_booking:0"


def test_max_steps_ends_a_trajectory_that_keeps_calling(tmp_path):
    records, bodies, _ = run(tmp_path, lambda step, body: stream_reply(tool_calls=[("search", {"day": 14})]),
                             agent={**TASK, "max_steps": 3})
    assert [r["step"] for r in records] == [1, 2, 3] and len(bodies) == 3
    assert records[-1]["finish_reason"] == "tool_calls" and records[-1].get("tool_results") is None


def test_a_failed_step_ends_the_trajectory_after_its_retries(tmp_path):
    def fails_at_2(step, body):
        return error_reply(500, "down") if step == 2 else follows_the_task(step, body)

    records, bodies, _ = run(tmp_path, fails_at_2, retries=1)
    assert [(r["step"], r["status"], r["attempts"]) for r in records] == [(1, "success", 1), (2, "failed", 2)]
    assert records[-1]["error_kind"] == "http_5xx" and len(bodies) == 3


def test_the_injected_error_reaches_the_vendor_at_its_step(tmp_path):
    injected = {**TASK, "inject_error": {"step": 2, "content": "Error: x"}}
    records, bodies, _ = run(tmp_path, follows_the_task, agent=injected)
    assert bodies[2]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "Error: x"}
    assert json.loads(records[1]["tool_results"])[0]["source"] == "injected_error"


def test_a_client_failure_mid_trajectory_keeps_the_steps_before_it(tmp_path):
    vendor, item, ctx = setup(tmp_path)

    def broken(step, body):
        if step == 3:
            raise RuntimeError("boom in the client")
        return follows_the_task(step, body)

    session = fake_session_factory(agent_vendor(broken))()
    records = run_item_safely(ItemRun(session, vendor, vendor.url, item, ctx, sleep=lambda s: None))
    assert [(r["step"], r["status"], r.get("error_kind")) for r in records] == [
        (1, "success", None), (2, "success", None), (3, "failed", "client_error")]
    # the client_error row is its step's: begun after step 2 ended, one attempt (the one that raised)
    assert records[2]["attempts"] == 1 and records[2]["started_at"] >= records[1]["started_at"]


# ---------------------------------------------------------------------------------------------- the glue


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_local_run_records_each_trajectory_once_as_one_item(tmp_path):
    lines = [line(TASK), {**line(TASK), "data_index": "t2"}, {"data_index": "plain",
                                                                "messages": [{"role": "user", "content": "hi"}]}]
    config, samples = write_inputs(tmp_path, ["a", "b"], sample_lines=lines)
    adapter = agent_vendor(lambda step, body: follows_the_task(step or 9, body))
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-repeats", "2"), adapter=adapter)
    assert run_to_end(env) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv")
    assert len(ctl.ledger.done) == ctl.ledger.total == 2 * 3 * 2 and ctl.manifest.records_written == len(frame)
    for key, rows in frame.groupby(["vendor", "sample_id", "repeat"]):
        steps = rows["step"].tolist()
        if key[1] == "plain":
            assert len(rows) == 1 and rows["step"].isna().all()  # a single request: step empty
        else:  # contiguous in the file (one write), steps 1..4, exactly once
            assert steps == [1, 2, 3, 4] and list(rows.index) == list(range(rows.index[0], rows.index[0] + 4))


def test_resume_reruns_a_trajectory_whose_last_step_failed(tmp_path):
    from avv_core.record_file import RecordWriter
    from avv_core.records import Record
    from avv_harness.run.resume import done_items

    samples = load_samples(write_jsonl(tmp_path / "samples.jsonl", [line(TASK), {**line(TASK), "data_index": "t2"}]))
    digest = samples.samples[0].request_hash
    writer = RecordWriter(tmp_path / "records.csv")
    common = {"run_id": "r", "model": "m", "vendor": "a", "repeat": 1, "request_hash": digest}
    writer.write_many([Record(common, sample_id="t1", step=1, status="success"),
                       Record(common, sample_id="t1", step=2, status="success")])
    writer.write_many([Record(common, sample_id="t2", step=1, status="success"),
                       Record(common, sample_id="t2", step=2, status="failed", error_kind="http_5xx")])
    writer.close()
    assert done_items(tmp_path, samples) == {ItemKey("m", "a", "t1", 1)}
