"""Integration: vendor dialects in real headless Locust runs against the simulator, checked against its truth
log — adapters against a vendor that requires ``reasoning_content``, chat vs raw-completions mode against a
broken chat template, reasoning under each field name, and overrides / ``${VAR}`` arriving on the wire."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from avv_core.record_file import read_records
from avv_core.samples import load_samples
from tests.builders import sim_config, sim_url, vendor_entry, vendors_config, write_yaml
from tests.locust_runs import DEMO_SAMPLES, clean_env, only_run_dir, run_locust, truth_tag
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 40, "tokens_per_s": 400, "output_tokens": 8}
REASONER = {**FAST, "reasoning_tokens": 6, "reasoning_only_rate": 0.3, "seed": 5}
FIELDS = ("reasoning_content", "reasoning", "reasoning_details")
PROFILES = {
    "reference": FAST,
    "kimi": {**FAST, "quirks": ["require_reasoning_content"]},
    "llamacpp": {**FAST, "quirks": ["broken_template"]},
    **{f"r-{field}": {**REASONER, "reasoning_field": field} for field in FIELDS},
}


PACE = {"concurrency": 2, "timeout_s": 15}  # every vendor's
VENDORS = vendors_config([
    vendor_entry("reference", sim_url("reference"), **PACE, is_baseline=True),
    vendor_entry("kimi-generic", sim_url("kimi"), **PACE),
    vendor_entry("kimi-adapted", sim_url("kimi"), **PACE, adapter="kimi"),
    vendor_entry("llamacpp-chat", sim_url("llamacpp"), **PACE),
    vendor_entry("llamacpp-raw", sim_url("llamacpp"), **PACE, endpoint="completions", chat_template="hermes.jinja",
                 tool_parser="hermes"),
    *[vendor_entry(f"r-{field}", sim_url(f"r-{field}"), **PACE) for field in FIELDS],
], "demo")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("dialects")
    write_yaml(work / "sim.yaml", sim_config(PROFILES))
    write_yaml(work / "vendors.yaml", VENDORS)
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out", "--avv-retries", "0"], cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = only_run_dir(work / "out")
    rows = [{k: (None if v is None or v != v else v) for k, v in r.items()}
            for r in read_records(run_dir / "records.csv").astype(object).to_dict("records")]
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    return {"rows": rows, "scores": scores, "truth": truth_by_tag(run_dir / "sim_truth.jsonl"), "run_dir": run_dir}


def by_sample(run, vendor: str) -> dict[str, dict]:
    return {r["sample_id"]: r for r in run["rows"] if r["vendor"] == vendor}


def with_tool_history() -> set[str]:
    return {s.sample_id for s in load_samples(DEMO_SAMPLES).samples
            if any(m.get("role") == "assistant" and m.get("tool_calls") for m in s.body["messages"])}


def test_kimi_adapter_passes_where_generic_gets_http_400(run):
    multi_turn = with_tool_history()
    assert 10 <= len(multi_turn) < 32  # the demo has both kinds
    generic, adapted = by_sample(run, "kimi-generic"), by_sample(run, "kimi-adapted")
    for sample_id, row in generic.items():
        truth = run["truth"][truth_tag(row)]
        if sample_id in multi_turn:
            assert (row["status"], row["error_kind"], row["http_status"]) == ("failed", "http_4xx", 400)
            assert "reasoning_content is missing" in row["error_detail"]
            assert truth["fault"] == "require_reasoning_content" and truth["http_status"] == 400
        else:
            assert row["status"] == "success" and truth["fault"] is None
    assert all(r["status"] == "success" for r in adapted.values()) and len(adapted) == 32
    assert {r["transforms"] for r in adapted.values()} == {
        "input_role_to_system;rename_reasoning_fields;inject_reasoning_content;renumber_tool_call_ids"}
    scores = run["scores"]
    assert scores.loc["kimi-adapted", "success_rate"] == 1.0 and scores.loc["kimi-adapted", "f1"] == 1.0
    assert scores.loc["kimi-generic", "success_rate"] == pytest.approx((32 - len(multi_turn)) / 32)
    assert scores.loc["kimi-generic", "verdict"] == "FAIL"


def test_broken_template_fails_in_chat_mode_and_passes_in_raw_mode(run):
    reference, chat, raw = (by_sample(run, v) for v in ("reference", "llamacpp-chat", "llamacpp-raw"))
    calling = {s for s, r in reference.items() if r["finish_reason"] == "tool_calls"}
    assert 5 <= len(calling) < 32
    for sample_id, ref in reference.items():
        truth_chat, truth_raw = run["truth"][truth_tag(chat[sample_id])], run["truth"][truth_tag(raw[sample_id])]
        assert truth_chat["decision"] == truth_raw["decision"] == run["truth"][truth_tag(ref)]["decision"]
        assert chat[sample_id]["finish_reason"] == "stop" and chat[sample_id]["tool_call_count"] == 0
        assert raw[sample_id]["finish_reason"] == ref["finish_reason"] and raw[sample_id]["endpoint"] == "completions"
        calls = [(c["name"], json.loads(c["arguments"])) for c in json.loads(raw[sample_id]["tool_calls"])]
        assert calls == [(c["name"], json.loads(c["arguments"])) for c in json.loads(ref["tool_calls"])]
        if sample_id in calling:
            assert "```json" in chat[sample_id]["content"] and truth_chat["text_tool_calls"]
    scores = run["scores"]
    assert scores.loc["llamacpp-chat", "f1"] == 0.0 and scores.loc["llamacpp-chat", "fn"] == len(calling)
    assert scores.loc["llamacpp-raw", "f1"] == 1.0 and scores.loc["llamacpp-raw", "tp"] == len(calling)
    assert scores.loc["llamacpp-raw", "schema_accuracy"] == 1.0 and scores.loc["llamacpp-raw", "success_rate"] == 1.0


@pytest.mark.timing  # milliseconds of measured time: run alone (tests/shards.py)
def test_each_reasoning_field_gives_the_same_ttft_and_reasoning_only_results(run):
    rows = {field: by_sample(run, f"r-{field}") for field in FIELDS}
    truth = {field: {s: run["truth"][truth_tag(r)] for s, r in rows[field].items()} for field in FIELDS}
    only = {s for s, t in truth["reasoning_content"].items() if t["reasoning_only"]}
    assert 3 <= len(only) < 32
    ttft_gaps = []
    for field in FIELDS:
        assert {s for s, t in truth[field].items() if t["reasoning_only"]} == only
        for sample_id, row in rows[field].items():
            assert (row["status"], row["ttft_kind"], row["reasoning_field"]) == ("success", "reasoning", field)
            assert row["reasoning_chars"] == rows["reasoning_content"][sample_id]["reasoning_chars"] > 0
            t = truth[field][sample_id]
            ttft_gaps.append(abs(row["t0_monotonic"] + row["ttft_ms"] / 1000 - t["t_first_token"]) * 1000)
        errors = [abs(r["ttft_ms"] - REASONER["ttft_ms"]) for r in rows[field].values()]
        assert statistics.median(errors) <= 5.0, (field, sorted(errors))
        assert run["scores"].loc[f"r-{field}", "reasoning_only"] == len(only)
    assert statistics.median(ttft_gaps) <= 5.0, sorted(ttft_gaps)  # each TTFT is its own reasoning event


def test_run_json_keeps_each_vendors_dialect(run):
    manifest = json.loads((run["run_dir"] / "run.json").read_text())
    entries = {v["name"]: v for v in manifest["vendors"]}
    assert entries["kimi-adapted"]["adapter"] == "kimi" and entries["reference"]["adapter"] == "generic"
    assert entries["llamacpp-raw"]["endpoint"] == "completions" and entries["llamacpp-raw"]["tool_parser"] == "hermes"
    assert entries["llamacpp-raw"]["chat_template"].endswith("hermes.jinja")


def test_overrides_and_variables_reach_the_wire(tmp_path):
    """locust.conf, LOCUST_AVV_* and the command line for the overrides; .env and the environment for ${VAR}."""
    write_yaml(tmp_path / "sim.yaml", sim_config({"wire": {**FAST, "log_request": True}, "ref": FAST}))
    write_yaml(tmp_path / "vendors.yaml", vendors_config([
        {"name": "ref", "url": "{sim}/ref/v1", "is_baseline": True},
        {"name": "wire", "model_id": "kimi-k2-test", "url": "{sim}/${SIM_ROUTE}/v1",
         "headers": {"X-Route": "${ROUTE_TOKEN}"}, "extra_body": {"metadata": {"user": "${USER_TAG}"}}},
    ], adapter="auto"))
    (tmp_path / ".env").write_text("SIM_ROUTE=wire\nUSER_TAG=user-from-dotenv-41\n")
    (tmp_path / "samples.jsonl").write_text("\n".join(DEMO_SAMPLES.read_text().splitlines()[:2]) + "\n")
    (tmp_path / "locust.conf").write_text("avv-header = [X-Conf:from-conf, X-Two:2]\navv-temperature = 0.15\n")
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-no-score",
                       "--avv-extra-body", '{"top_k": 7, "metadata": {"team": "qa"}}'], cwd=tmp_path,
                      env=clean_env(LOCUST_AVV_MAX_TOKENS="333", ROUTE_TOKEN="route-from-env-52"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    received = [t for t in truth_by_tag(run_dir / "sim_truth.jsonl").values() if t["profile"] == "wire"]
    assert len(received) == 2
    for truth in received:
        body, headers = truth["request"]["body"], truth["request"]["headers"]
        assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.15, 333, 7)
        assert body["metadata"] == {"user": "user-from-dotenv-41", "team": "qa"}
        assert body["model"] == "kimi-k2-test" and body["stream"] is True
        assert (headers["X-Conf"], headers["X-Two"], headers["X-Route"]) == ("from-conf", "2", "route-from-env-52")
        assert "Authorization" not in headers
        if any(m.get("tool_calls") for m in body["messages"]):  # adapter: auto picked kimi for kimi-k2-test
            assert all(m.get("reasoning_content") == " " for m in body["messages"] if m.get("tool_calls"))
    manifest = (run_dir / "run.json").read_text()
    assert json.loads(manifest)["extra"]["adapters_auto"]["m/wire"]["adapter"] == "kimi"
    frame = read_records(run_dir / "records.csv")
    assert sorted(frame["vendor"]) == ["ref", "ref", "wire", "wire"]  # names are kept, though SIM_ROUTE=wire
    assert "{sim}/***/v1" in manifest
    for secret in ("route-from-env-52", "user-from-dotenv-41"):  # substituted values are secrets
        assert secret not in manifest and secret not in (run_dir / "records.csv").read_text()
        assert secret not in proc.stdout + proc.stderr
