"""Fail fast, say it plainly (unit tier, no socket): the hard-fault table, the pre-flight's verdict on each answer
(an in-process vendor), the circuit breaker's rule, the run's exit status, retries not spent on answers that cannot
change, the 404 message naming the URL, an unset api_key_env, no option abbreviations, "did you mean", the
subcommands of avv-score, and scores.csv's column order. Against real processes: test_fail_fast_integration.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import requests

from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus
from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.samples import Sample, SampleSet
from avv_core.suggest import did_you_mean
from avv_harness.inputs.config import Vendor, parse_config
from avv_harness.inputs.secrets import Redactor
from avv_harness.run.breaker import VENDOR_DOWN, CircuitBreaker
from avv_harness.run.hard_faults import FAULTS, HARD_FAULTS, classify, render_fault_table
from avv_harness.run.ledger import Ledger
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.run.preflight import PREFLIGHT_MAX_TOKENS, Preflight, Target, preflight_sample, run_preflight
from avv_harness.run.state import RunState
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, execute_item
from tests.builders import VENDOR_URL, vendors_config
from tests.fake_vendor import ScriptedAdapter, error_reply, fake_session_factory, item_of, stream_reply

URL = "http://vendor.test/v1"


# ------------------------------------------------------------------------------------------- the fault table

@pytest.mark.parametrize("kind, status, detail, key", [
    ("connect", None, "cannot connect to http://127.0.0.1:9/v1/chat/completions: ConnectionRefusedError: [Errno 111] "
                      "Connection refused", "connect_refused"),
    ("connect", None, "cannot connect to http://127.0.0.1:9/v1/chat/completions: HTTPConnectionPool(host='127.0.0.1', "
                      "port=9): Max retries exceeded (Caused by NewConnectionError('Failed to establish a new "
                      "connection: [Errno 111] Connection refused'))", "connect_refused"),
    ("connect", None, "cannot connect to http://nohost.test/v1/chat/completions: gaierror: [Errno -2] Name or service "
                      "not known", "dns"),
    ("connect", None, "cannot connect to https://127.0.0.1:8/v1/chat/completions: SSLError: [SSL: WRONG_VERSION_NUMBER]"
                      " wrong version number", "tls"),
    ("connect", None, "cannot connect to http://tls.example/v1/chat/completions: ConnectionRefusedError: [Errno 111] "
                      "Connection refused", "connect_refused"),  # a host named tls… is not a TLS failure
    ("connect", None, "cannot connect to http://h/v1: ConnectionResetError: [Errno 104] reset", "connect"),
    ("http_4xx", 401, "HTTP 401: Incorrect API key provided", "http_401"),
    ("http_4xx", 403, "HTTP 403: not allowed", "http_403"),
    ("http_4xx", 404, "HTTP 404: 404: Not Found (POST http://h/v1/chat/completions)", "http_404"),
    ("http_4xx", 404, "HTTP 404: The model `kimi-k9` does not exist or you do not have access to it", "unknown_model"),
    ("http_4xx", 400, "HTTP 400: model_not_found: unknown model 'x'", "unknown_model"),
    ("http_4xx", 400, "HTTP 400: tools is not supported in this request", "http_400"),
    ("http_4xx", 409, "HTTP 409: conflict", "http_4xx"),
    ("http_429", 429, "HTTP 429: slow down", "rate_limited"),
    ("http_5xx", 502, "HTTP 502: bad gateway", "server_error"),
    ("timeout", None, "no response headers within 5s", "timeout"),
    ("bad_sse", 200, "HTTP 200 with a JSON body instead of an SSE stream (application/json)", "not_streamed"),
])
def test_each_failure_has_one_name_and_only_those_that_cannot_pass_are_hard(kind, status, detail, key):
    found = classify(kind, status, detail)
    assert found is not None and found.key == key
    assert found.hard == (key in ("connect_refused", "dns", "tls", "http_401", "http_403", "http_404",
                                  "unknown_model"))
    assert classify(None, 200, "") is None and classify("truncated", 200, "mid-stream") is None


def test_the_fault_table_is_declared_once_and_rendered_for_the_docs():
    assert HARD_FAULTS == ("dns", "tls", "connect_refused", "http_401", "http_403", "unknown_model", "http_404")
    table = render_fault_table()
    assert all(f"`{f.key}`" in table for f in FAULTS) and table.count("\n") == len(FAULTS) + 2
    doc = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "broken-vendors.md").read_text(encoding="utf-8")
    assert table in doc  # docs/how-to/broken-vendors.md shows the table as declared


# ----------------------------------------------------------------------------------------- the pre-flight

def _answers(request: requests.PreparedRequest):
    vendor = request.url.split("/")[3]
    return {"ok": stream_reply("OK"),
            "locked": error_reply(401, "Incorrect API key provided: sk-secret-123"),
            "gone": (404, {"Content-Type": "text/plain"}, b"404: Not Found"),
            "nomodel": error_reply(404, "The model `model-x` does not exist"),
            "busy": error_reply(503, "overloaded, later"),
            "picky": error_reply(400, "stream_options is not supported")}[vendor]


def test_the_preflight_sends_one_small_request_per_vendor_and_names_what_to_check():
    adapter = ScriptedAdapter(_answers)
    vendors = {name: Vendor("m", name, "model-x", VENDOR_URL.format(name=name),
                            api_key="sk-secret-123" if name == "locked" else None)
               for name in ("ok", "locked", "gone", "nomodel", "busy", "picky")}
    samples = SampleSet("s.jsonl", "sha", [Sample("s1", 1, {"messages": [{"role": "user", "content": "hi " * 500}],
                                                            "tools": [{"type": "function",
                                                                       "function": {"name": "f"}}]})])
    ctx = ExecContext(run_id="run1", worker="w", policy=RetryPolicy(retries=3))
    result = run_preflight([Target(n, v, v.url) for n, v in vendors.items()], samples, ctx, "strict",
                           fake_session_factory(adapter), Redactor(["sk-secret-123"]))
    assert len(adapter.requests) == len(vendors)  # one each, no retry (503 and 400 included)
    sent = json.loads(adapter.requests[0].body)
    assert sent["max_tokens"] == PREFLIGHT_MAX_TOKENS and sent["tools"] == samples.samples[0].tools
    assert sent["messages"] != samples.samples[0].body["messages"]  # a small request, not a sample's
    assert {item_of(r) for r in adapter.requests} == {ItemKey("m", n, "preflight", 0) for n in vendors}
    by_name = {c.name: c for c in result.checks}
    assert by_name["ok"].ok and by_name["ok"].fault is None
    assert [c.name for c in result.refused] == ["locked", "gone", "nomodel"]
    assert [c.name for c in result.warnings] == ["busy", "picky"]  # soft: the run goes on
    assert (by_name["locked"].fault, by_name["gone"].fault, by_name["nomodel"].fault) == (
        "http_401", "http_404", "unknown_model")
    text = result.refusal()
    assert "sk-secret-123" not in text + json.dumps(result.to_manifest())  # the key is never shown
    lines = text.splitlines()[1:]
    assert len(lines) == 3 and all(line.startswith("  ") for line in lines)
    assert lines[0] == ('  locked (m): POST http://vendor.test/locked/v1/chat/completions → HTTP 401: the key was '
                        'refused: "Incorrect API key provided: ***" — check the key: api_key / api_key_env in the '
                        "config (run.json's key_source says where it came from)")
    assert "POST http://vendor.test/gone/v1/chat/completions → HTTP 404: nothing is served at that path" in lines[1]
    assert "HTTP 404, the vendor does not know the model" in lines[2] and "check model_id" in lines[2]
    assert Preflight("warn", result.checks, 1.0).refused == ()  # warn: nothing refused, all warned
    assert len(Preflight("warn", result.checks, 1.0).warnings) == 5
    assert result.to_manifest()["vendors"][0]["vendor"] == "ok" and result.summary().startswith(
        "pre-flight: 1 of 6 vendors answered in ")


def test_the_preflight_request_follows_the_vendor_format_and_overrides():
    sample = preflight_sample(None)
    assert sample.body == {"messages": [{"role": "user", "content": sample.body["messages"][0]["content"]}],
                           "max_tokens": PREFLIGHT_MAX_TOKENS}
    adapter = ScriptedAdapter(lambda r: error_reply(401, "no"))
    messages = Vendor("m", "anthropic", "claude-x", "http://vendor.test/anthropic/v1", api_key="k1",
                      dialect=__import__("avv_harness.dialects.dialect", fromlist=["Dialect"]).Dialect(
                          endpoint="messages"))
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy())
    result = run_preflight([Target("anthropic", messages, messages.url)], None, ctx, "strict",
                           fake_session_factory(adapter), Redactor(["k1"]))
    (request,) = adapter.requests
    assert request.url == "http://vendor.test/anthropic/v1/messages" and request.headers["x-api-key"] == "k1"
    assert json.loads(request.body)["max_tokens"] == PREFLIGHT_MAX_TOKENS and result.refused


# ------------------------------------------------------------------------------------------- the breaker

def _row(kind=None, status=None, detail=""):
    return {"status": "failed" if kind else "success", "error_kind": kind, "http_status": status,
            "error_detail": detail}


REFUSED = _row("connect", None, "cannot connect to http://h/v1: ConnectionRefusedError: [Errno 111] refused")


def test_the_breaker_trips_after_k_items_in_a_row_with_the_same_hard_fault():
    vendor = VendorId("m", "a")
    breaker = CircuitBreaker(3)
    assert [breaker.observe(vendor, [REFUSED]) is None for _ in range(2)] == [True, True]
    trip = breaker.observe(vendor, [REFUSED])
    assert trip is not None and (trip.fault, trip.items, trip.vendor) == ("connect_refused", 3, vendor)
    assert "refused" in trip.example and "host and port" in trip.check
    assert breaker.observe(vendor, [REFUSED]) is None  # once
    other = CircuitBreaker(3)
    for rows in ([REFUSED], [REFUSED], [_row()], [REFUSED], [REFUSED], [_row("http_5xx", 500, "boom")], [REFUSED],
                 [_row("http_4xx", 401, "HTTP 401: no")], [REFUSED], [REFUSED]):
        assert other.observe(vendor, rows) is None  # a success, a soft failure or another hard fault restarts it
    assert other.observe(vendor, [_row(), REFUSED]) is not None  # an agent task: its last step counts
    assert CircuitBreaker(0).observe(vendor, [REFUSED]) is None  # 0: off


def test_a_tripped_vendor_keeps_its_items_as_skipped_and_the_run_exits_6():
    vendor, other = VendorId("m", "a"), VendorId("m", "b")
    ledger = Ledger.for_items([vendor, other], ["s1", "s2", "s3", "s4"], 1)
    taken = ledger.take(vendor, "local", 1)
    assert ledger.skip_pending(vendor, VENDOR_DOWN) == 3 and ledger.take(vendor, "local") == []
    assert sorted(k.sample_id for k, why in ledger.skipped.items() if why == VENDOR_DOWN) == ["s2", "s3", "s4"]
    ledger.release(taken[0])  # its user stopped: the item is skipped too, never lost
    assert ledger.skipped[taken[0]] == VENDOR_DOWN
    for key in ledger.take(other, "local", 4):
        ledger.complete(key)
    run = RunState("r", Path("."), None, ledger, None)  # type: ignore[arg-type]
    assert ledger.finished and run.completed and run.exit_status() == ExitStatus.OK
    run.vendors_down[vendor] = {"fault": "connect_refused"}
    assert run.exit_status() == ExitStatus.VENDOR_BROKEN
    run.stop_reason = "interrupted"
    assert run.exit_status() == ExitStatus.INCOMPLETE  # a run stopped early says so first


# ------------------------------------------------------------------ retries, the 404 message, keys, options

def _item(answer, retries=3, url=URL):
    adapter = ScriptedAdapter(answer)
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    ctx = ExecContext(run_id="r", worker="w", policy=RetryPolicy(retries=retries, backoff_base_s=0.0))
    outcome = execute_item(ItemRun(session, Vendor("m", "v", "x", url), url, WorkItem(ItemKey("m", "v", "s1", 1),
                           Sample("s1", 1, {"messages": [{"role": "user", "content": "hi"}]})), ctx,
                           sleep=lambda s: None, rng=random.Random(1)))
    return outcome.record, len(adapter.requests)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_no_retry_is_spent_on_an_answer_that_cannot_change(status):
    record, sent = _item(lambda r: error_reply(status, "invalid request"))
    assert (record["error_kind"], record["attempts"], sent) == ("http_4xx", 1, 1)
    retried, sent = _item(lambda r: error_reply(500, "try again"))
    assert (retried["attempts"], sent) == (4, 4)


def test_a_404_names_the_url_called_without_its_key():
    record, _ = _item(lambda r: (404, {"Content-Type": "text/plain"}, b"404: Not Found"),
                      url="http://vendor.test/v1?api_key=sk-hidden-9")
    assert record["error_detail"].startswith("HTTP 404: 404: Not Found (POST http://vendor.test/v1/chat/completions?")
    assert "sk-hidden-9" not in record["error_detail"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "{sim}/ref/v1", "https://api.example.com/v1"])
def test_an_unset_api_key_env_is_an_error_for_every_url(url):
    base = {"name": "v", "url": url, "is_baseline": True, "api_key_env": "NOT_SET_KEY"}
    with pytest.raises(InputError, match=r"api_key: no API key: api_key_env 'NOT_SET_KEY' is not set"):
        parse_config(vendors_config([base]), "c.yaml", {})
    assert parse_config(vendors_config([base]), "c.yaml", {"NOT_SET_KEY": "k"}).vendors[0].api_key == "k"
    assert parse_config(vendors_config([{**base, "require_key": False}]), "c.yaml", {}).vendors[0].api_key is None
    if url != "https://api.example.com/v1":  # loopback and {sim} without api_key_env: no key needed, as before
        del base["api_key_env"]
        assert parse_config(vendors_config([base]), "c.yaml", {}).vendors[0].api_key is None


def test_misspelt_config_keys_get_the_closest_name():
    with pytest.raises(InputError) as err:
        parse_config(vendors_config([{"name": "v", "url": URL, "is_baseline": True, "ulr": "x", "concurency": 2,
                                      "price": {"input": 1, "outptu": 2}}], adaptr="x"), "c.yaml", {})
    text = str(err.value)
    for wrong, right in (("ulr", "url"), ("concurency", "concurrency"), ("outptu", "output"), ("adaptr", "adapter")):
        assert f".{wrong}: unknown key (did you mean '{right}'?)" in text, text
    assert did_you_mean("zzzz", ["url"]) == ""


def test_our_options_are_not_abbreviated_and_the_new_ones_are_checked():
    from locust.argument_parser import get_parser

    from avv_harness.locust import plugin  # noqa: F401  (registers the --avv-* options on Locust's parser)

    assert preparse_options(["--avv-sample", "other.jsonl"]).avv_samples.endswith("demo.jsonl")  # not taken
    with pytest.raises(SystemExit):
        get_parser().parse_args(["--avv-sample", "other.jsonl"])
    assert get_parser().parse_args(["--avv-samples", "x.jsonl", "--headl"]).headless  # Locust's own: as Locust does
    options = RunOptions.from_parsed(preparse_options([]))
    assert (options.preflight, options.breaker_items) == ("strict", 5)
    options = RunOptions.from_parsed(preparse_options(["--avv-preflight", "warn", "--avv-breaker", "0"]))
    assert (options.preflight, options.breaker_items) == ("warn", 0)
    with pytest.raises(InputError, match="--avv-breaker: must be ≥ 0"):
        RunOptions.from_parsed(preparse_options(["--avv-breaker", "-1"]))


# --------------------------------------------------------------------------------------------- avv-score

def test_avv_score_help_lists_every_subcommand_and_history_has_its_actions(capsys):
    from avv_scoring.cli import SUBCOMMANDS, main
    from avv_scoring.history.cli import ACTIONS
    from avv_scoring.presets import PRESETS

    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    for command in SUBCOMMANDS:
        assert f"  {command.name}" in out and command.summary in out.replace("\n", " ").replace("  ", " ") or \
            command.summary[:30] in out
    assert {c.name for c in SUBCOMMANDS} >= {"export", "stress", "trajectory", "irf", "metrics", "thresholds",
                                              "history", "trend"}
    assert "|".join(PRESETS) in out.replace("\n", "").replace(" ", "")  # every preset, from the registry
    assert list(ACTIONS) == ["add", "trend", "show"]
    assert main(["history", "trned", "--db", "x"]) == 2
    assert "did you mean 'trend'?" in capsys.readouterr().err
    assert main(["metrcs"]) == 2 and "did you mean 'metrics'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["x.csv", "--bootstra", "5"])  # no abbreviation
    assert "Did you mean '--bootstrap'?" in capsys.readouterr().err


def test_export_defaults_to_its_only_format():
    from avv_harness.exports import export_parser

    assert export_parser().parse_args(["run"]).format == "k2vv"


def test_history_show_lists_the_runs_of_a_history(tmp_path, capsys):
    from avv_scoring.cli import main
    from avv_scoring.history import connect

    connect(tmp_path / "h.db").close()
    assert main(["history", "show", "--db", str(tmp_path / "h.db")]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path / 'h.db'}: no runs"


def test_scores_csv_has_each_interval_right_after_its_metric():
    from avv_scoring import SCORE_COLUMNS

    assert SCORE_COLUMNS[SCORE_COLUMNS.index("tps"):SCORE_COLUMNS.index("tps") + 3] == (
        "tps", "tps_ci_low", "tps_ci_high")
    assert SCORE_COLUMNS.index("loop_rate") not in range(SCORE_COLUMNS.index("tps"), SCORE_COLUMNS.index("tps") + 3)
