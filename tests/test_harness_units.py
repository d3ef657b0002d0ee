"""Fast unit tests: config validation, samples, record schema, the work ledger, body building."""

import json
import random
import re
from functools import partial

import pytest

from avv_core.errors import InputError
from avv_core.items import ItemKey, VendorId
from avv_core.record_file import RecordWriter, iter_csv_rows, read_records
from avv_core.records import COLUMN_NAMES, Record, RecordError, encode_row
from avv_core.samples import load_samples
from avv_harness.inputs.config import load_config, parse_config
from avv_harness.inputs.secrets import redact_url
from avv_harness.run.ledger import Ledger
from avv_harness.wire.execute import RetryPolicy, build_body, build_headers
from tests.builders import vendor_entry, vendors_config, write_jsonl, write_yaml

#: A remote vendor with its key in the YAML, of model kimi-k2 (the builders with this file's defaults)
vendor = partial(vendor_entry, url="https://api.example.com/v1", model_id="m", api_key="sk-x")
config = partial(vendors_config, model="kimi-k2")


# ------------------------------------------------------------------------------------------ config


def test_config_parses_fields_and_provider_pinning():
    cfg = parse_config(config([vendor("a", is_baseline=True, provider="fireworks", concurrency=3)]), "c.yaml", {})
    (v,) = cfg.vendors
    assert (v.model, v.name, v.provider, v.concurrency, v.include_usage) == ("kimi-k2", "a", ["fireworks"], 3, True)


@pytest.mark.parametrize(
    "data, needle",
    [
        (config([vendor("a", is_baseline=True, colour="red")]), "kimi-k2.vendors[0] (a).colour: unknown key"),
        (config([{"name": "a", "api_key": "k", "is_baseline": True}]), "kimi-k2.vendors[0] (a).url: missing"),
        (config([vendor("a"), vendor("b")]), "no vendor has is_baseline"),
        (config([vendor("a", is_baseline=True), vendor("b", is_baseline=True)]), "several baselines (a, b)"),
        (config([vendor("a", is_baseline=True), vendor("a")]), "vendor name 'a' appears twice"),
        (config([vendor("a", is_baseline=True, concurrency="lots")]), "concurrency: must be int"),
        (config([]), "kimi-k2.vendors: missing or empty"),
    ],
)
def test_config_errors_name_file_and_field(data, needle):
    with pytest.raises(InputError) as err:
        parse_config(data, "cfg.yaml", {})
    assert "cfg.yaml" in str(err.value) and needle in str(err.value)


def test_missing_key_is_an_error_for_remote_vendors_only():
    remote = {"name": "openrouter", "url": "https://openrouter.ai/api/v1", "is_baseline": True}
    with pytest.raises(InputError, match=r"vendors\[0\] \(openrouter\)\.api_key: no API key"):
        parse_config(config([remote]), "c.yaml", {})
    local = {"name": "sim", "url": "{sim}/reference/v1", "is_baseline": True}
    assert parse_config(config([local]), "c.yaml", {}).vendors[0].api_key is None


def test_key_lookup_order_yaml_then_api_key_env_then_vendor_name():
    remote = {"name": "open-router", "url": "https://x.test/v1", "is_baseline": True}
    env = {"open-router": "k-name", "OPEN_ROUTER": "k-upper", "MYKEY": "k-env"}
    assert parse_config(config([remote]), "c", env).vendors[0].api_key == "k-name"
    assert parse_config(config([{**remote, "api_key_env": "MYKEY"}]), "c", env).vendors[0].api_key == "k-env"
    assert parse_config(config([{**remote, "api_key": "k-yaml"}]), "c", env).vendors[0].api_key == "k-yaml"
    assert parse_config(config([remote]), "c", {"OPEN_ROUTER": "k-upper"}).vendors[0].api_key == "k-upper"


def test_dotenv_file_supplies_keys(tmp_cwd, monkeypatch):
    monkeypatch.delenv("acme", raising=False)
    (tmp_cwd / ".env").write_text("acme=sk-from-dotenv\n")
    write_yaml(tmp_cwd / "c.yaml", config([{"name": "acme", "url": "https://a.test/v1", "is_baseline": True}]))
    assert load_config(tmp_cwd / "c.yaml").vendors[0].api_key == "sk-from-dotenv"


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("kimi:\n  vendors: [\n")
    with pytest.raises(InputError, match=r"bad.yaml: line \d+: not valid YAML"):
        load_config(bad, env={})


def test_redaction_of_keys_in_urls_and_run_json():
    assert redact_url("https://x/v1?key=abc&x=1&api_key=zz") == "https://x/v1?key=***&x=1&api_key=***"
    v = parse_config(config([vendor("a", is_baseline=True, headers={"X-Api-Key": "h-secret", "X-Trace": "1"})]),
                     "c", {}).vendors[0]
    dumped = json.dumps(v.redacted())
    assert "sk-x" not in dumped and "h-secret" not in dumped and '"X-Trace": "1"' in dumped


# ----------------------------------------------------------------------------------------- samples


def test_sample_ids_metadata_and_input_role(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [
        json.dumps({"data_index": 7, "messages": [{"role": "_input", "content": "sys"}], "expected_tool_call": True,
                    "_note": "x", "tools": []}),
        "",
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "check_type": "lang"}),
    ])
    s = load_samples(path)
    assert [x.sample_id for x in s.samples] == ["7", "3"]
    first = s.samples[0]
    assert first.metadata == {"data_index": 7, "expected_tool_call": True, "_note": "x"}
    assert "data_index" not in first.body and "_note" not in first.body
    assert first.body["messages"][0]["role"] == "_input"  # kept; the generic adapter's transform rewrites it
    assert len(s.sha256) == 64


@pytest.mark.parametrize(
    "line, needle",
    [
        ('{"messages": [', ":2: not valid JSON"),
        ("[1, 2]", ":2: a sample must be a JSON object, got list"),
        ('{"model": "x"}', ":2: field 'messages' is missing"),
        ('{"messages": [{"role":"user","content":"x"}], "tools": {}}', ":2: field 'tools' must be a list"),
    ],
)
def test_bad_sample_lines_name_file_and_line(tmp_path, line, needle):
    path = write_jsonl(tmp_path / "s.jsonl", ['{"messages": [{"role": "user", "content": "ok"}]}', line])
    with pytest.raises(InputError) as err:
        load_samples(path)
    assert str(path) in str(err.value) and needle in str(err.value)
    skipped = load_samples(path, skip_bad_lines=True)
    assert [s.sample_id for s in skipped.samples] == ["1"] and skipped.skipped_lines[0][0] == 2


def test_duplicate_ids_and_missing_file(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", ['{"data_index": 1, "messages": [{"role":"user","content":"a"}]}'] * 2)
    with pytest.raises(InputError, match="duplicate sample id '1'"):
        load_samples(path)
    with pytest.raises(InputError, match="cannot read sample file"):
        load_samples(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------------------------------- records


def test_records_roundtrip_keeps_missing_values_missing(tmp_path):
    path = tmp_path / "records.csv"
    writer = RecordWriter(path)
    writer.write({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "1", "repeat": 1, "status": "success",
                  "total_tokens": None, "usage_reported": False, "ttft_ms": 12.3456, "content": 'a,"b"\nc',
                  "tool_calls": [{"id": "c1", "name": "f", "arguments": '{"x": 1}'}]})
    writer.write({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "2", "repeat": 1, "status": "failed",
                  "total_tokens": 0})
    writer.close()
    frame = read_records(path)
    assert list(frame.columns) == list(COLUMN_NAMES)
    assert frame["total_tokens"].isna().iloc[0] and frame["total_tokens"].iloc[1] == 0
    assert frame["ttft_ms"].iloc[0] == pytest.approx(12.346)
    assert frame["content"].iloc[0] == 'a,"b"\nc'
    assert json.loads(frame["tool_calls"].iloc[0])[0]["arguments"] == '{"x": 1}'
    assert bool(frame["usage_reported"].iloc[0]) is False


def test_torn_last_row_is_dropped(tmp_path, caplog):
    path = tmp_path / "records.csv"
    writer = RecordWriter(path)
    writer.write({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "1", "repeat": 1, "status": "success"})
    writer.close()
    row = encode_row({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "2", "repeat": 1})
    with open(path, "ab") as fh:
        fh.write(row[: len(row) // 2])
    assert list(read_records(path)["sample_id"]) == ["1"]
    assert "torn last row" in caplog.text
    assert [r["sample_id"] for r in iter_csv_rows(path)] == ["1"]


def test_unknown_record_column_is_rejected():
    with pytest.raises(RecordError, match="colour"):
        encode_row({"vendor": "v", "colour": "red"})


@pytest.mark.parametrize("fields, needle", [
    ({"colour": "red"}, "unknown record column 'colour'"),
    ({"repeat": "1"}, "'repeat' (int) got str"),
    ({"repeat": True}, "'repeat' (int) got bool"),
    ({"ttft_ms": float("inf")}, "infinite"),
    ({"usage_reported": 1}, "'usage_reported' (bool) got int"),
])
def test_record_is_validated_where_it_is_made(fields, needle):
    with pytest.raises(RecordError, match=re.escape(needle)):
        Record(fields)
    record = Record(vendor="v", ttft_ms=1, tool_calls=[])  # an int is a fine float; json takes a list
    with pytest.raises(RecordError):
        record["attempts"] = "3"


# ----------------------------------------------------------------------------------------- ledger


A, B = VendorId("m", "a"), VendorId("m", "b")


def k(vendor: VendorId, sid: str, rep: int) -> ItemKey:
    return ItemKey.of(vendor, sid, rep)


def test_ledger_each_item_once_and_requeue_of_lost_taker():
    ledger = Ledger.for_items([A, B], ["1", "2", "3"], repeats=2)
    assert ledger.total == 12
    got = ledger.take(A, "w1", limit=4)
    assert got == [k(A, "1", 1), k(A, "2", 1), k(A, "3", 1), k(A, "1", 2)]
    assert ledger.complete(k(A, "1", 1)) is True
    assert ledger.requeue_taker("w1") == [k(A, "2", 1), k(A, "3", 1), k(A, "1", 2)]
    assert ledger.complete(k(A, "1", 1)) is False  # a duplicate record is dropped
    taken = []
    while batch := ledger.take(A, "w2", 10):
        taken += batch
    assert sorted(taken) == sorted([k(A, "1", 2), k(A, "2", 1), k(A, "2", 2), k(A, "3", 1), k(A, "3", 2)])
    for key in taken:
        ledger.complete(key)
    assert not ledger.finished and ledger.remaining == 6
    ledger.drop_pending()
    assert ledger.finished


def test_ledger_resume_skips_done_items_and_round_robin_is_endless():
    ledger = Ledger.for_items([A], ["1", "2"], repeats=1, skip={k(A, "1", 1)})
    assert ledger.take(A, "x", 5) == [k(A, "2", 1)]
    rr = Ledger.round_robin([A], ["1", "2"])
    assert [(x.sample_id, x.repeat) for x in rr.take(A, "x", 5)] == [("1", 1), ("2", 1), ("1", 2), ("2", 2), ("1", 3)]
    assert not rr.finished


def test_item_tags_are_ascii_and_round_trip():
    key = ItemKey("模型", "vendor/with slash", "样本-1", 2)
    tag = key.tag("run 1", 3)
    tag.encode("latin-1")  # a valid header value
    assert ItemKey.parse_tag(tag) == ("run 1", key, 3)
    assert ItemKey("m", "a", "1", 1).tag("r", 1) == "r/m/a/1/1/1"  # plain names stay readable


# --------------------------------------------------------------------------------- request build


def test_request_body_and_headers():
    cfg = parse_config(config([vendor("a", is_baseline=True, model_id="moonshotai/kimi-k2", provider="fireworks",
                                      extra_body={"temperature": 0.6, "provider": {"sort": "price"}},
                                      headers={"X-Extra": "1"})]), "c", {})
    v = cfg.vendors[0]
    samples_body = {"messages": [{"role": "user", "content": "hi"}], "stream": False, "model": "old"}
    from avv_core.samples import Sample

    body = build_body(Sample("1", 1, samples_body), v)
    assert body["model"] == "moonshotai/kimi-k2" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["provider"] == {"only": ["fireworks"], "sort": "price"} and body["temperature"] == 0.6
    headers = build_headers(v, "tag", 1)
    assert headers["Authorization"] == "Bearer sk-x" and headers["X-Extra"] == "1"
    no_usage = parse_config(config([vendor("a", is_baseline=True, include_usage=False)]), "c", {}).vendors[0]
    assert "stream_options" not in build_body(Sample("1", 1, {"messages": [], "stream_options": {"x": 1}}), no_usage)


def test_a_request_is_built_once_per_sample_vendor_and_overrides_and_sent_as_built():
    """Repeats of a sample to a vendor send the bytes built for the first (encoded_request's cache); another
    vendor, a sample with another body (same id) or one not streamed gets its own request, equal to a fresh build."""
    from avv_core.samples import Sample
    from avv_harness.wire.execute import build_request, encoded_request

    vendors = parse_config(config([vendor("a", is_baseline=True, model_id="m-a"), vendor("b", model_id="m-b")]),
                           "c", {}).vendors
    sample = Sample("1", 1, {"messages": [{"role": "user", "content": "hi"}]})
    path, body, data = encoded_request(sample, vendors[0])
    assert encoded_request(Sample("1", 1, dict(sample.body)), vendors[0])[2] is data  # a repeat: the same bytes
    for other_sample, other_vendor in [(sample, vendors[1]), (Sample("1", 1, {"messages": []}), vendors[0]),
                                       (Sample("1", 1, dict(sample.body), {"_stream": False}), vendors[0])]:
        other_path, other_body = build_request(other_sample, other_vendor)
        assert encoded_request(other_sample, other_vendor) == (
            other_path, other_body, json.dumps(other_body, ensure_ascii=False).encode("utf-8"))
        assert encoded_request(other_sample, other_vendor)[2] != data
    assert (path, body) == build_request(sample, vendors[0])


def test_backoff_grows_with_jitter_and_retry_after_is_capped():
    policy = RetryPolicy(retries=5, backoff_base_s=0.5, backoff_cap_s=3.0, retry_after_cap_s=10)
    rng = random.Random(1)
    delays = [policy.delay(n, None, rng) for n in range(1, 6)]
    assert 0.25 <= delays[0] <= 0.5 and 0.5 <= delays[1] <= 1.0 and delays[4] == 3.0
    assert policy.delay(1, 4.0, rng) == 4.0 and policy.delay(1, 120.0, rng) == 10


def test_shipped_configs_validate():
    from tests.locust_runs import ROOT

    env = {"moonshot": "k1", "OPENROUTER_API_KEY": "k2", "deepseek": "k3"}
    example = load_config(ROOT / "configs" / "example.yaml", env=env)
    assert example.models == ["kimi-k2", "deepseek-v3.2"] and len(example.vendors) == 5
    with pytest.raises(InputError, match=r"moonshot\)\.api_key: no API key"):
        load_config(ROOT / "configs" / "example.yaml", env={"OPENROUTER_API_KEY": "k2", "deepseek": "k3"})
    for name in ("demo.yaml", "stress-demo.yaml"):
        assert load_config(ROOT / "configs" / name, env={}).vendors
