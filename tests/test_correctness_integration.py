"""On BFCL gold, every tool-call correctness figure of a real Locust run against the simulator equals what the
simulator's truth log implies (what it sent, and which deviation it drew for each call), computed here without
our scoring."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pandas as pd
import pytest

from avv_core.samples import load_samples
from avv_sim import request_hash
from tests.builders import sim_config, sim_vendors, write_jsonl, write_yaml
from tests.locust_runs import ROOT, only_run_dir, run_locust
from tests.sim_records import truth_by_tag

pytestmark = pytest.mark.integration

BASE = {"ttft_ms": 5, "tokens_per_s": 4000, "output_tokens": 6}
PROFILES = {
    "official": BASE,
    "mirror": {**BASE, "seed": 1},
    "deviant": {**BASE, "flip_rate": 0.15, "wrong_tool_rate": 0.25, "wrong_value_rate": 0.25,
                "drop_parallel_rate": 0.5, "seed": 7},
    "forms": {**BASE, "tool_as_text_rate": 0.25, "truncate_call_rate": 0.25, "seed": 9},
}
EVERY = 5  # every 5th line of samples/bfcl-mini.jsonl: 40 lines over all nine categories


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("correctness")
    lines = (ROOT / "samples" / "bfcl-mini.jsonl").read_text(encoding="utf-8").splitlines()[::EVERY]
    write_jsonl(work / "samples.jsonl", lines)
    write_yaml(work / "sim.yaml", sim_config(PROFILES))
    write_yaml(work / "vendors.yaml", sim_vendors("m", list(PROFILES), "official"))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-retries", "0"], cwd=work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    run_dir = only_run_dir(work / "out")
    truth: dict[str, dict[str, dict]] = {}
    for tag, line in truth_by_tag(run_dir / "sim_truth.jsonl").items():
        _, _, vendor, sample, _, _ = tag.split("/")
        truth.setdefault(vendor, {})[sample] = line
    samples = {s.sample_id: s for s in load_samples(work / "samples.jsonl").samples}
    return {"run_dir": run_dir, "truth": truth, "samples": samples,
            "scores": pd.read_csv(run_dir / "scores.csv").set_index("vendor"),
            "disagreements": pd.read_csv(run_dir / "disagreements.csv", dtype=str, keep_default_na=False),
            "json": json.loads((run_dir / "scores.json").read_text())}


# ----------------------------------------------------------------- what the truth log implies (our own code)


def called(line):
    return line["finish_reason"] == "tool_calls" or bool(line["tool_calls"])


def deviated(line):
    """The simulator says this response's calls differ from the reference's."""
    return bool(line["dropped_calls"] or line["call_form"] == "truncated"
                or any(c["wrong_tool"] or c["changed"] or c["broken"] for c in line["tool_calls"]))


def follows_gold(line):
    return bool(line["decision"] and not line["flipped"] and line["call_form"] == "calls" and not deviated(line))


def _norm(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return [_norm(v) for v in value] if isinstance(value, list) else value


def _leaves(call):
    try:
        args = json.loads(call["arguments"])
    except json.JSONDecodeError:
        return Counter({(call["name"], "", "raw:" + call["arguments"].strip()): 1})
    out = Counter()

    def walk(v, path):
        if isinstance(v, dict) and v:
            for k, x in v.items():
                walk(x, f"{path}/{k}")
        elif isinstance(v, list) and v:
            for i, x in enumerate(v):
                walk(x, f"{path}/{i}")
        else:
            out[(call["name"], path, json.dumps(_norm(v), sort_keys=True))] += 1

    walk(args, "")
    return out


def f1(mine, theirs):
    total = sum(sum(_leaves(c).values()) for c in mine + theirs)
    matched = 0
    for name in {c["name"] for c in mine} & {c["name"] for c in theirs}:
        a, b = [c for c in mine if c["name"] == name], [c for c in theirs if c["name"] == name]
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        matched += max(sum(sum((_leaves(s) & _leaves(large[j])).values()) for s, j in zip(small, p, strict=True))
                       for p in itertools.permutations(range(len(large)), len(small)))
    return 2 * matched / total if total else 1.0


def expected(run, vendor):
    mine, base, samples = run["truth"][vendor], run["truth"]["official"], run["samples"]
    pairs = [(mine[s], base[s]) for s in mine if called(mine[s]) and called(base[s])]
    labelled = list(mine)
    with_calls = [s for s in mine if samples[s].gold.expected_calls]

    def names(s):
        gold = samples[s].gold
        return Counter(gold.original_name(c["name"]) for c in mine[s]["tool_calls"])

    return {
        "call_pairs": len(pairs),
        "tool_match": sum(Counter(c["name"] for c in v["tool_calls"]) == Counter(c["name"] for c in b["tool_calls"])
                          for v, b in pairs) / len(pairs),
        "args_match": sum(not deviated(v) for v, _ in pairs) / len(pairs),
        "call_count_match": sum(len(v["tool_calls"]) == len(b["tool_calls"]) for v, b in pairs) / len(pairs),
        "args_f1": sum(f1(v["tool_calls"], b["tool_calls"]) for v, b in pairs) / len(pairs),
        "gold_labelled": len(labelled),
        "gold_trigger_accuracy": sum((mine[s]["finish_reason"] == "tool_calls") == samples[s].gold.expected_tool_call
                                     for s in labelled) / len(labelled),
        "gold_call_items": len(with_calls),
        "gold_tool_accuracy": sum(names(s) == Counter(e["name"] for e in samples[s].gold.expected_calls)
                                  for s in with_calls) / len(with_calls),
        "gold_args_accuracy": sum(follows_gold(mine[s]) for s in with_calls) / len(with_calls),
    }


def expected_kinds(run, vendor):
    mine, base, samples = run["truth"][vendor], run["truth"]["official"], run["samples"]
    kinds = Counter()
    for s, line in mine.items():
        gold = samples[s].gold
        positive = line["finish_reason"] == "tool_calls"
        vs_base = called(line) != called(base[s]) or (called(line) and deviated(line))
        vs_gold = positive != gold.expected_tool_call or (
            positive and gold.expected_calls is not None and not follows_gold(line))
        if not (vs_base or vs_gold):
            continue
        if line["call_form"] in ("text", "truncated"):
            kinds["as_text" if line["call_form"] == "text" else "truncated"] += 1
        elif line["flipped"]:
            kinds["trigger_flip"] += 1
        elif line["dropped_calls"]:
            kinds["call_count"] += 1
        elif any(c["wrong_tool"] for c in line["tool_calls"]):
            kinds["other_tool"] += 1
        else:
            kinds["other_arguments"] += 1
    return kinds


# --------------------------------------------------------------------------------------------------- tests


def test_no_vendor_was_sent_gold(run):
    for vendor, lines in run["truth"].items():
        for sample_id, line in lines.items():
            assert line["request_hash"] == request_hash(run["samples"][sample_id].body), (vendor, sample_id)
            assert line["gold"] is True  # and yet the simulator found every sample's gold by itself


@pytest.mark.parametrize("vendor", list(PROFILES))
def test_every_correctness_metric_equals_the_truth(run, vendor):
    want = expected(run, vendor)
    got = run["scores"].loc[vendor]
    for column, value in want.items():
        assert got[column] == pytest.approx(value), (vendor, column)


def test_faithful_vendors_score_one_and_the_deviants_have_teeth(run):
    scores = run["scores"]
    for vendor in ("official", "mirror"):
        for column in ("tool_match", "args_match", "args_f1", "call_count_match", "gold_trigger_accuracy",
                       "gold_tool_accuracy", "gold_args_accuracy", "schema_accuracy"):
            assert scores.loc[vendor, column] == 1.0, (vendor, column)
    assert scores.loc["deviant", "args_match"] < 0.8 and scores.loc["deviant", "gold_args_accuracy"] < 0.8
    assert scores.loc["deviant", "call_count_match"] < 1.0 and scores.loc["deviant", "tool_match"] < 1.0
    assert scores.loc["forms", "gold_trigger_accuracy"] < 0.9 and scores.loc["forms", "schema_accuracy"] < 1.0


def test_anomalies_and_disagreements_equal_the_truth(run):
    lines = run["truth"]["forms"]
    text = sum(line["call_form"] == "text" for line in lines.values())
    cut = sum(line["call_form"] == "truncated" for line in lines.values())
    assert text and cut
    counts = dict(part.split(":") for part in run["scores"].loc["forms", "anomaly_counts"].split(";"))
    assert (int(counts["tool_call_as_text"]), int(counts["tool_call_truncated"])) == (text, cut)
    table = run["disagreements"]
    assert set(table[table["vendor"].isin(["official", "mirror"])]["kind"]) == set()
    for vendor in ("deviant", "forms"):
        got = Counter(table[table["vendor"] == vendor]["kind"])
        assert got == expected_kinds(run, vendor), vendor


def test_per_tool_table_counts_every_call(run):
    (model,) = run["json"]["models"]
    tools = pd.DataFrame(model["tools"])
    for vendor, lines in run["truth"].items():
        sent = sum(len(line["tool_calls"]) for line in lines.values())
        assert tools[tools["vendor"] == vendor]["calls"].sum() == sent, vendor
    mirror = tools[tools["vendor"] == "mirror"]
    assert (mirror["tool_match"].dropna() == 1).all() and (mirror["gold_accuracy"].dropna() == 1).all()
    assert any("." in t for t in mirror["tool"])  # BFCL's dotted names, mapped back from the wire names
