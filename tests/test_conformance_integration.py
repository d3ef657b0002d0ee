"""Integration (issue 37): ``--avv-mode conformance`` as a user runs it — one Locust run, many simulated vendors, each
breaking one parameter (or none), on chat, Messages and Responses — its records equal to the simulator's truth, its
conformance.csv failing exactly what each vendor breaks, the verdict joined, resume; and a plain verify run in which a
vendor billing 25 % more prompt tokens is flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from avv_core.manifest import read_manifest
from avv_core.record_file import read_records
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.locust_runs import DEMO_SAMPLES, only_run_dir, run_locust, truth_tag
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 1, "tokens_per_s": 5000, "output_tokens": 40, "tool_call_rate": 0.6}
#: vendor → (its knobs, its endpoint, the checks it fails)
VENDORS: dict[str, tuple[dict[str, Any], str, set[str]]] = {
    "reference": ({}, "chat", set()),
    "faithful": ({"seed": 1}, "chat", set()),
    "tool_choice": ({"ignore_tool_choice": True}, "chat",
                    {"tool_choice_required", "tool_choice_named", "tool_choice_none"}),
    "parallel": ({"ignore_parallel_tool_calls": True}, "chat", {"parallel_tool_calls_false"}),
    "max_tokens": ({"ignore_max_tokens": True}, "chat", {"max_tokens"}),
    "stop": ({"ignore_stop": True}, "chat", {"stop"}),
    "response_format": ({"ignore_response_format": True}, "chat",
                        {"response_format_json_object", "response_format_json_schema"}),
    "clamps": ({"clamp_out_of_range": True}, "chat", {"out_of_range_rejected"}),
    "overbills": ({"prompt_tokens_factor": 1.25}, "chat", {"prompt_tokens_match"}),
    "other_calls": ({"stream_other_calls": True}, "chat", {"stream_parity"}),
    "same_ids": ({"repeat_tool_call_ids": True}, "chat", {"tool_call_ids"}),
    "messages": ({}, "messages", set()),
    "responses_bad": ({"ignore_tool_choice": True}, "responses",
                      {"tool_choice_required", "tool_choice_named", "tool_choice_none"}),
}


@pytest.fixture(scope="module")
def conformance(tmp_path_factory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("conformance")
    write_yaml(work / "sim.yaml", sim_config({name: {**FAST, **knobs} for name, (knobs, _, _) in VENDORS.items()}))
    write_yaml(work / "vendors.yaml", sim_vendors("m", list(VENDORS), "reference", **{
        name: {"endpoint": endpoint, "concurrency": 3} for name, (_, endpoint, _) in VENDORS.items()}))
    proc = run_locust(["--headless", "--avv-mode", "conformance", "--avv-config", "vendors.yaml",
                       "--avv-sim-config", "sim.yaml", "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out",
                       "--avv-retries", "0"], cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = only_run_dir(work / "out")
    return {"work": work, "run_dir": run_dir, "stdout": proc.stdout, "records": read_records(run_dir / "records.csv"),
            "truth": truth_by_tag(run_dir / "sim_truth.jsonl"),
            "table": pd.read_csv(run_dir / "conformance.csv", keep_default_na=False)}


def test_each_vendor_fails_exactly_what_it_breaks(conformance) -> None:
    table = conformance["table"]
    assert list(table.columns) == ["model", "vendor", "check", "result", "evidence"]
    failed = {v: set(part.loc[part["result"] == "fail", "check"]) for v, part in table.groupby("vendor")}
    assert failed == {name: checks for name, (_, _, checks) in VENDORS.items()}
    faithful = table[table["vendor"] == "faithful"]
    assert set(faithful["result"]) == {"pass"}  # no false alarm
    messages = table[table["vendor"] == "messages"].set_index("check")
    assert messages.loc["response_format_json_object", "result"] == "not_applicable"
    assert "not sent (messages" in messages.loc["response_format_json_object", "evidence"]
    assert set(messages.drop(["response_format_json_object", "response_format_json_schema"])["result"]) == {"pass"}
    bad = table[table["vendor"] == "responses_bad"].set_index("check")
    assert bad.loc["stop", "result"] == "not_applicable" and "not sent (responses" in bad.loc["stop", "evidence"]


def test_the_records_are_the_simulators_truth(conformance) -> None:
    """What the checks read is what the simulator sent: the ignored parameters, the usage it reported, the calls of
    the non-streamed answers."""
    records, truth = conformance["records"], conformance["truth"]
    for row in records.astype(object).where(records.notna(), None).to_dict("records"):
        line = truth[truth_tag(row)]
        assert line["stream"] is (not row["sample_id"].endswith(":whole")), row["sample_id"]
        if row["sample_id"].startswith("out_of_range_rejected") and row["vendor"] != "clamps":
            assert (row["http_status"], line["http_status"]) == (400, 400)
            continue
        assert row["status"] == "success", row
        assert row["prompt_tokens"] == line["usage_prompt_tokens"] and row["completion_tokens"] == \
            line["usage_completion_tokens"]
        sent = [(c["name"], c["arguments"]) for c in json.loads(row["tool_calls"])]  # as sent: cut ones too
        assert sent == [(c["name"], c["arguments"]) for c in line["tool_calls"]], row["sample_id"]
        check = row["sample_id"].split(":")[0]
        ignored = set(line["ignored"])
        if row["vendor"] in ("tool_choice", "responses_bad") and check.startswith("tool_choice"):
            assert ignored == {"tool_choice"}
        if row["vendor"] == "overbills":
            assert row["prompt_tokens"] == round(line["prompt_tokens"] * 1.25)
        if row["vendor"] == "other_calls":
            assert line["other_calls"] is (row["sample_id"].endswith(":whole") and row["tool_call_count"] > 0)
        if row["vendor"] in ("reference", "faithful", "messages"):
            assert not ignored and not line["other_calls"]


def test_the_run_folder_the_verdict_and_the_report(conformance) -> None:
    run_dir = conformance["run_dir"]
    manifest = read_manifest(run_dir)
    assert manifest.mode == "conformance"
    assert Path(manifest.samples["path"]).name.startswith("probes-")  # the probe file is the run's sample file
    assert "m/responses_bad" in manifest.extra["not_sent"] and "stop:story" in manifest.extra["not_sent"][
        "m/responses_bad"]
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    for name, (_, _, checks) in VENDORS.items():
        assert scores.loc[name, "conformance_failures"] == len(checks), name
        reasons = scores.loc[name, "verdict_reasons"]
        assert scores.loc[name, "verdict"] == ("FAIL" if checks else "PASS"), (name, reasons)
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Conformance (does the vendor honour the request?" in report and "| stream_parity |" in report
    assert "tool_choice · `tool_choice_none`" in report
    assert "m  conformance: " in conformance["stdout"]
    assert "FAIL clamps · out_of_range_rejected" in conformance["stdout"]


def test_a_conformance_run_resumes(conformance, tmp_path) -> None:
    """--avv-resume sends again only what has no successful answer (the probes answered 4xx) and scores the same."""
    work, run_dir = conformance["work"], conformance["run_dir"]
    before = len(conformance["records"])
    proc = run_locust(["--headless", "--avv-mode", "conformance", "--avv-config", "vendors.yaml", "--avv-sim-config",
                       "sim.yaml", "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out", "--avv-retries", "0",
                       "--avv-resume", str(run_dir)], cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    after = read_records(run_dir / "records.csv")
    rerun = after.iloc[before:]
    assert len(rerun) and set(rerun["sample_id"].str.split(":").str[0]) == {"out_of_range_rejected"}
    table = pd.read_csv(run_dir / "conformance.csv", keep_default_na=False)
    assert table[["vendor", "check", "result"]].equals(conformance["table"][["vendor", "check", "result"]])


def test_a_vendor_billing_a_quarter_more_is_flagged_in_a_plain_verify_run(tmp_path) -> None:
    """The demo's vendors on its 32 hand-written conversations (the 400 samples would only cost time), one vendor
    reporting 1.25× the prompt tokens (the simulator's knob): flagged against the ±5 % tolerance, its ratio the
    truth's; the other vendors not; pass@k and pass^k over two repeats."""
    proc = run_locust(["--headless", "--avv-out", "out", "--avv-repeats", "2", "--avv-samples", str(DEMO_SAMPLES),
                       "--avv-sim-set", "faithful:prompt_tokens_factor=1.25"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    records = read_records(run_dir / "records.csv")
    truth = truth_by_tag(run_dir / "sim_truth.jsonl")
    mine = records[(records["vendor"] == "faithful") & (records["status"] == "success")]
    truth_ratios = [truth[truth_tag(r)]["usage_prompt_tokens"] / truth[truth_tag(r)]["prompt_tokens"]
                    for r in mine.to_dict("records")]
    assert scores.loc["faithful", "prompt_tokens_ratio"] == pytest.approx(pd.Series(truth_ratios).median(), abs=2e-3)
    assert scores.loc["faithful", "prompt_tokens_ratio"] == pytest.approx(1.25, abs=0.01)
    assert scores.loc["flaky", "prompt_tokens_ratio"] == 1 and scores.loc["reference", "prompt_tokens_ratio"] == 1
    assert "demo-model/faithful: reports 1.25× the baseline's prompt_tokens" in proc.stdout
    assert "FLAGGED" in (run_dir / "report.md").read_text(encoding="utf-8")
    assert "flaky: reports" not in proc.stdout
    for vendor, part in records.groupby("vendor"):
        ok = part.assign(ok=part["status"] == "success").groupby("sample_id")["ok"]
        assert scores.loc[vendor, "pass_at_k"] == pytest.approx(ok.any().mean())
        assert scores.loc[vendor, "pass_hat_k"] == pytest.approx(ok.all().mean())
        assert scores.loc[vendor, "pass_k"] == 2
    assert not (run_dir / "conformance.csv").exists() and scores["conformance_failures"].isna().all()
