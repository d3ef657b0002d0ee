"""Integration (issue 24): one simulated deployment through chat completions, Anthropic Messages and OpenAI Responses
— the README's `configs/formats-demo.yaml` run as shipped, each format's records equal to each other and to the
simulator's truth log, the Messages and Responses vendors scored against the chat baseline, each format-specific
fault classified, and the agent demo's tasks completing through each format."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import requests

from avv_core.items import ItemKey, WorkItem, truth_tag
from avv_core.record_file import read_records
from avv_core.samples import Sample
from avv_harness.dialects.dialect import Dialect
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, execute_item
from avv_scoring import score_paths
from tests.builders import sim_config, write_yaml
from tests.locust_runs import DEMO_SAMPLES, ROOT, only_run_dir, run_locust
from tests.sim_records import truth_by_tag, truth_of

pytestmark = pytest.mark.integration

FORMATS = ("chat", "messages", "responses")
CONFIG = ROOT / "configs" / "formats-demo.yaml"


def _run(work: Path, *extra: str) -> Path:
    """A run of the shipped config; unscored at its end (--avv-no-score): the tests score its records themselves
    (``score_paths``), so the run's own scoring would be read by none of them."""
    samples = () if "--avv-samples" in extra else ("--avv-samples", str(DEMO_SAMPLES))
    proc = run_locust(["--headless", "--avv-config", str(CONFIG), *samples, "--avv-out", "out", "--avv-retries", "0",
                       "--avv-no-score", *extra], cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return only_run_dir(work / "out")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, Any]:
    run_dir = _run(tmp_path_factory.mktemp("formats"))
    rows = [{k: (None if v is None or v != v else v) for k, v in r.items()}
            for r in read_records(run_dir / "records.csv").astype(object).to_dict("records")]
    by_item: dict[tuple[str, int], dict[str, dict]] = {}
    for row in rows:
        by_item.setdefault((row["sample_id"], row["repeat"]), {})[row["vendor"]] = row
    return {"run_dir": run_dir, "rows": rows, "by_item": by_item, "truth": truth_by_tag(run_dir / "sim_truth.jsonl")}


def _calls(row: dict) -> list[tuple[str, Any]]:
    return [(c["name"], json.loads(c["arguments"])) for c in json.loads(row["tool_calls"])]


def test_each_format_records_what_the_simulator_sent(demo):
    for row in demo["rows"]:
        truth = demo["truth"][truth_tag(row)]
        assert row["endpoint"] == truth["endpoint"] == row["vendor"]  # each vendor is named after its format
        assert row["status"] == "success", row["error_detail"]
        assert (row["finish_reason"], row["prompt_tokens"], row["completion_tokens"]) == (
            truth["finish_reason"], truth["prompt_tokens"], truth["completion_tokens"])
        assert _calls(row) == [(c["name"], json.loads(c["arguments"])) for c in truth["tool_calls"]]


@pytest.mark.timing  # milliseconds of measured time: run alone (tests/shards.py)
def test_the_three_formats_agree_item_by_item(demo):
    ttft_gaps, tps_gaps = [], []
    for item, vendors in demo["by_item"].items():
        assert set(vendors) == set(FORMATS), item
        chat = vendors["chat"]
        for name in ("messages", "responses"):
            other = vendors[name]
            for column in ("finish_reason", "content", "reasoning_chars", "prompt_tokens", "completion_tokens",
                           "ttft_kind"):
                assert other[column] == chat[column], (item, name, column)
            assert _calls(other) == _calls(chat), (item, name)
            ttft_gaps.append(abs(other["ttft_ms"] - chat["ttft_ms"]))
            if other["tps"] is not None and chat["tps"] is not None:
                tps_gaps.append(abs(other["tps"] / chat["tps"] - 1))
    # the bounds (TTFT ± 5 ms, TPS ± 3 %), on a small shared machine: the median and nearly every item
    assert statistics.median(ttft_gaps) <= 5.0 and sum(g <= 5.0 for g in ttft_gaps) >= 0.9 * len(ttft_gaps), \
        sorted(ttft_gaps)
    assert statistics.median(tps_gaps) <= 0.03 and sum(g <= 0.03 for g in tps_gaps) >= 0.9 * len(tps_gaps), \
        sorted(tps_gaps)


def test_messages_and_responses_against_a_chat_baseline_agree_fully(demo):
    scores = score_paths([demo["run_dir"]], write=False).scores.set_index("vendor")
    for name in ("messages", "responses"):
        assert scores.loc[name, "f1"] == 1 and scores.loc[name, "success_rate"] == 1
        assert scores.loc[name, "tool_match"] == 1 and scores.loc[name, "args_match"] == 1
        assert scores.loc[name, "avg_tokens"] == scores.loc["chat", "avg_tokens"]


def test_the_agent_demo_completes_through_each_format(tmp_path):
    run_dir = _run(tmp_path, "--avv-samples", str(ROOT / "samples" / "agent-demo.jsonl"))
    frame = read_records(run_dir / "records.csv")
    assert set(frame["endpoint"]) == set(FORMATS) and (frame["status"] == "success").all()
    steps = frame.groupby(["vendor", "sample_id"])["step"].max().unstack(0)
    assert (steps["messages"] == steps["chat"]).all() and (steps["responses"] == steps["chat"]).all()
    assert steps["chat"].max() > 1  # tool results went back in each format, step after step
    scores = score_paths([run_dir], write=False).scores.set_index("vendor")
    rates = scores["task_completion_rate"]
    assert rates["messages"] == rates["responses"] == rates["chat"] > 0


# ------------------------------------------------------------------ format-specific faults, one request each

FAULT_PROFILES = {
    "overloaded": {"ttft_ms": 5, "tokens_per_s": 500, "output_tokens": 12, "quirks": ["overloaded_error"]},
    "nostop": {"ttft_ms": 5, "tokens_per_s": 500, "output_tokens": 12, "quirks": ["no_message_stop"]},
    "nocompleted": {"ttft_ms": 5, "tokens_per_s": 500, "output_tokens": 12, "quirks": ["no_response_completed"]},
    "badjson": {"ttft_ms": 5, "tokens_per_s": 500, "output_tokens": 24, "tool_call_rate": 1.0,
                "quirks": ["bad_input_json"]},
}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def fault_sim(tmp_path_factory):
    from avv_sim import start_simulator

    work = tmp_path_factory.mktemp("faults")
    write_yaml(work / "sim.yaml", sim_config(FAULT_PROFILES))
    with start_simulator(str(work / "sim.yaml"), truth_log=work / "truth.jsonl") as proc:
        yield proc


def _one(sim, profile: str, endpoint: str, retries: int = 1) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": f"weather in Paris? ({profile})"}], "tools": [WEATHER],
            "max_tokens": 200}
    vendor = Vendor("m", endpoint, "demo-model", f"{sim.url}/{profile}/v1", dialect=Dialect(endpoint=endpoint))
    item = WorkItem(ItemKey("m", endpoint, f"{profile}-{endpoint}", 1), Sample(f"{profile}-{endpoint}", 1, body))
    ctx = ExecContext(run_id="faults", worker="t", policy=RetryPolicy(retries=retries, backoff_base_s=0.01))
    with requests.Session() as session:
        record = execute_item(ItemRun(session, vendor, vendor.url, item, ctx, sleep=lambda s: None,
                                      rng=random.Random(1))).record
    return dict(record)


@pytest.mark.parametrize("endpoint", ["messages", "responses"])
def test_an_overload_mid_stream_is_the_overloaded_kind_and_is_retried(fault_sim, endpoint):
    record = _one(fault_sim, "overloaded", endpoint, retries=1)
    assert record["status"] == "failed" and record["error_kind"] == "overloaded" and record["attempts"] == 2


def test_a_messages_stream_without_message_stop_is_kept_and_flagged_no_done(fault_sim):
    record = _one(fault_sim, "nostop", "messages")
    assert record["status"] == "success" and "no_done" in record["anomalies"]


def test_a_responses_stream_without_response_completed_is_truncated(fault_sim):
    record = _one(fault_sim, "nocompleted", "responses", retries=0)
    assert record["status"] == "failed" and record["error_kind"] == "truncated"
    assert "no_done" in (record["anomalies"] or "")


@pytest.mark.parametrize("endpoint", ["messages", "responses"])
def test_tool_input_pieces_that_do_not_join_into_json_are_an_invalid_call(fault_sim, endpoint):
    from avv_scoring.metrics.schema import INVALID, check_call, tool_schemas

    record = _one(fault_sim, "badjson", endpoint)
    calls = json.loads(record["tool_calls"])
    truth = truth_of(fault_sim.truth_log, truth_tag({**record, "step": None}))
    assert record["finish_reason"] == "tool_calls" and calls and truth["quirks"] == ["bad_input_json"]
    assert check_call(calls[0], tool_schemas([WEATHER])) == INVALID  # the vendor's broken call costs it schema accuracy
