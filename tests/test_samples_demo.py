"""Fast checks of the bundled sample sets: the 32 hand-written conversations (samples/demo-conversations.jsonl) and
the embedded demo built from them (avv_harness/data/demo.jsonl, samples/make_demo.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from avv_core.samples import Sample, load_samples
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import build_body

DEMO_PATH = Path(__file__).resolve().parent.parent / "samples" / "demo-conversations.jsonl"
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_LINE_BYTES = 6 * 1024
MAX_FILE_BYTES = 150 * 1024


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return load_samples(DEMO_PATH).samples


def _tool_map(sample: Sample) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in sample.tools}


def _earlier_tool_calls(sample: Sample):
    """Yield (message index, tool call) for every tool call in an assistant message of the history."""
    for i, msg in enumerate(sample.body["messages"]):
        if msg.get("role") == "assistant":
            for call in msg.get("tool_calls") or []:
                yield i, call


def test_file_loads_with_32_unique_ids(samples):
    assert len(samples) == 32
    ids = [s.sample_id for s in samples]
    assert len(set(ids)) == 32
    assert ids == [str(n) for n in range(1, 33)]


def test_file_size_limits():
    raw = DEMO_PATH.read_bytes()
    assert len(raw) < MAX_FILE_BYTES
    for line_no, line in enumerate(raw.splitlines(), start=1):
        assert len(line) <= MAX_LINE_BYTES, f"line {line_no} is {len(line)} bytes"


def test_metadata_is_stripped_and_request_fields_present(samples):
    for s in samples:
        assert isinstance(s.metadata.get("expected_tool_call"), bool), s.sample_id
        assert "data_index" not in s.body and "expected_tool_call" not in s.body
        assert "model" not in s.body and "stream" not in s.body, "the harness sets model and stream"
        assert s.body["temperature"] == 0.6
        assert s.body["max_tokens"] == 1024
        roles = {m["role"] for m in s.body["messages"]}
        assert roles <= {"system", "user", "assistant", "tool", "_input"}, (s.sample_id, roles)
        assert s.body["messages"][-1]["role"] in ("user", "tool"), s.sample_id


def test_input_role_is_kept_in_the_sample_and_becomes_system_on_the_wire(samples):
    raw_lines = DEMO_PATH.read_text(encoding="utf-8").splitlines()
    raw_with_input = [json.loads(line)["data_index"] for line in raw_lines if '"role": "_input"' in line]
    assert raw_with_input, "the demo set should exercise the K2VV '_input' role"
    by_id = {s.sample_id: s for s in samples}
    vendor = Vendor("m", "v", "m", "http://127.0.0.1/v1")  # the default (generic) adapter
    for idx in raw_with_input:
        sample = by_id[str(idx)]
        assert sample.body["messages"][0]["role"] == "_input"  # the sample is never changed
        assert build_body(sample, vendor)["messages"][0]["role"] == "system"
        assert sample.body["messages"][0]["role"] == "_input"


def test_tool_definitions_are_valid(samples):
    for s in samples:
        names = [t["function"]["name"] for t in s.tools]
        assert len(names) == len(set(names)), f"sample {s.sample_id}: duplicate tool names"
        assert len(names) <= 6
        for tool in s.tools:
            assert tool["type"] == "function"
            fn = tool["function"]
            assert TOOL_NAME_RE.match(fn["name"]), fn["name"]
            assert len(fn["name"]) <= 64
            assert fn.get("description")
            params = fn["parameters"]
            Draft202012Validator.check_schema(params)
            assert params["type"] == "object", (s.sample_id, fn["name"])


def test_tools_absent_means_no_tool_choice(samples):
    without_tools = [s for s in samples if not s.tools]
    assert len(without_tools) == 2
    for s in without_tools:
        assert "tools" not in s.body and "tool_choice" not in s.body
        assert s.metadata["expected_tool_call"] is False
    for s in samples:
        if s.tools:
            assert s.body["tool_choice"] in ("auto", "none", "required"), s.sample_id


def test_earlier_tool_call_arguments_fit_schemas(samples):
    format_checker = Draft202012Validator.FORMAT_CHECKER
    checked = 0
    for s in samples:
        tools = _tool_map(s)
        for _, call in _earlier_tool_calls(s):
            assert call["type"] == "function"
            assert call["id"].startswith("call_"), call["id"]
            name = call["function"]["name"]
            assert name in tools, f"sample {s.sample_id}: call to undeclared tool {name}"
            args = json.loads(call["function"]["arguments"])
            assert isinstance(args, dict)
            validator = Draft202012Validator(tools[name]["parameters"], format_checker=format_checker)
            errors = [e.message for e in validator.iter_errors(args)]
            assert not errors, f"sample {s.sample_id}, {name}: {errors}"
            checked += 1
    assert checked >= 20


def test_tool_messages_answer_earlier_calls(samples):
    for s in samples:
        seen_ids: set[str] = set()
        answered: set[str] = set()
        for msg in s.body["messages"]:
            if msg["role"] == "assistant":
                for call in msg.get("tool_calls") or []:
                    assert call["id"] not in seen_ids, f"sample {s.sample_id}: reused id {call['id']}"
                    seen_ids.add(call["id"])
            elif msg["role"] == "tool":
                tcid = msg["tool_call_id"]
                assert tcid in seen_ids, f"sample {s.sample_id}: tool result for unknown call {tcid}"
                assert tcid not in answered, f"sample {s.sample_id}: call {tcid} answered twice"
                assert isinstance(msg["content"], str)
                answered.add(tcid)
        assert answered == seen_ids, f"sample {s.sample_id}: unanswered calls {seen_ids - answered}"


def test_expected_tool_call_share(samples):
    negatives = sum(1 for s in samples if s.metadata["expected_tool_call"] is False)
    share = negatives / len(samples)
    assert 0.30 <= share <= 0.45, f"{negatives}/{len(samples)} = {share:.0%}"


def test_tool_choice_variants(samples):
    none_samples = [s for s in samples if s.body.get("tool_choice") == "none"]
    required_samples = [s for s in samples if s.body.get("tool_choice") == "required"]
    assert len(none_samples) == 2
    assert len(required_samples) == 1
    assert all(s.metadata["expected_tool_call"] is False for s in none_samples)
    assert all(s.metadata["expected_tool_call"] is True for s in required_samples)


def test_languages_mixed(samples):
    user_text = " ".join(m["content"] for s in samples for m in s.body["messages"] if m["role"] == "user")
    assert re.search(r"[\u4e00-\u9fff]", user_text), "expected a Chinese user turn"
    assert "vuelos" in user_text, "expected a Spanish user turn"


# ------------------------------------------------------------------------------------- the embedded demo (400)

EMBEDDED = Path(__file__).resolve().parent.parent / "avv_harness" / "data" / "demo.jsonl"


def _make_demo():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_demo", DEMO_PATH.parent / "make_demo.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_embedded_demo_is_what_make_demo_writes_and_begins_with_the_conversations():
    text = EMBEDDED.read_text(encoding="utf-8")
    assert text == "".join(_make_demo().lines())  # python samples/make_demo.py regenerates it
    assert text.startswith(DEMO_PATH.read_text(encoding="utf-8"))
    assert (DEMO_PATH.parent / "demo.jsonl").resolve() == EMBEDDED.resolve()  # samples/demo.jsonl links to it


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_embedded_demo_has_400_valid_samples_with_gold():
    demo = load_samples(EMBEDDED).samples
    assert [s.sample_id for s in demo] == [str(n) for n in range(1, 401)]
    assert all(isinstance(s.metadata.get("expected_tool_call"), bool) for s in demo)
    calls = sum(s.metadata["expected_tool_call"] for s in demo)
    assert 0.6 < calls / len(demo) < 0.75  # about the reference's tool_call_rate
    for s in demo[32:]:
        for tool in s.tools:
            Draft202012Validator.check_schema(tool["function"]["parameters"])
        if not s.tools:
            assert "tool_choice" not in s.body
        assert len(json.dumps(s.body)) < 1500  # short: the demo stays well under a minute
