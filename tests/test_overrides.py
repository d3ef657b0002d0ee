"""Global overrides: option parsing (command line, locust.conf, LOCUST_AVV_*), range checks, how they shape
each request, and that workers send the master's overrides (in-process master and two workers)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import gevent
import pytest
import requests

from avv_core.errors import InputError
from avv_core.items import ItemKey, WorkItem
from avv_core.record_file import read_records
from avv_core.samples import Sample
from avv_harness.dialects.dialect import Dialect
from avv_harness.dialects.overrides import Overrides, parse_overrides
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import Redactor
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.wire.execute import ExecContext, ItemRun, RetryPolicy, build_body, build_headers, execute_item
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, messages_reply, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import ROOT


def test_parse_and_apply():
    o = parse_overrides(0.3, 77, '{"top_p": 0.9, "provider": {"sort": "price"}}', ["X-A: 1", "[X-B:2, X-C:3]"])
    assert o.headers == (("X-A", "1"), ("X-B", "2"), ("X-C", "3"))
    body = o.apply_body({"temperature": 1.0, "max_completion_tokens": 5, "provider": {"only": ["x"]}, "messages": []})
    assert body == {"temperature": 0.3, "max_tokens": 77, "max_completion_tokens": 77, "top_p": 0.9,
                    "provider": {"only": ["x"], "sort": "price"}, "messages": []}
    assert Overrides.from_message(json.loads(json.dumps(o.to_message()))) == o
    assert parse_overrides(None, None, "", None).empty


@pytest.mark.parametrize("args, needle", [
    ((2.5, None, "", None), "--avv-temperature: must be within [0, 2]"),
    ((float("nan"), None, "", None), "--avv-temperature"),
    ((None, 0, "", None), "--avv-max-tokens: must be ≥ 1"),
    ((None, None, "{bad", None), "--avv-extra-body: not valid JSON"),
    ((None, None, "[1]", None), "--avv-extra-body: must be a JSON object, got list"),
    ((None, None, "", ["NoColon"]), "--avv-header: expected NAME:VALUE"),
    ((None, None, "", ["Bad Name:1"]), "--avv-header: expected NAME:VALUE"),
    ((None, None, "", ["X-A:é"]), "--avv-header X-A: the value holds"),
])
def test_range_checks(args, needle):
    with pytest.raises(InputError) as err:
        parse_overrides(*args)
    assert needle in str(err.value)


def test_overrides_win_over_sample_and_vendor():
    vendor = Vendor("m", "v", "id", "http://h/v1", extra_body={"top_p": 0.5, "temperature": 0.1},
                    headers={"X-A": "vendor", "X-V": "v"})
    o = Overrides(temperature=0.0, max_tokens=9, extra_body={"top_p": 0.7}, headers=(("X-A", "global"),))
    body = build_body(Sample("1", 1, {"messages": [], "temperature": 0.9, "max_tokens": 1000}), vendor, o)
    assert (body["temperature"], body["max_tokens"], body["top_p"]) == (0.0, 9, 0.7)
    headers = build_headers(vendor, "tag", 1, o)
    assert headers["X-A"] == "global" and headers["X-V"] == "v"


@pytest.mark.parametrize(("endpoint", "reply"), [("chat", stream_reply("hi")),
                                                  ("messages", messages_reply())])
@pytest.mark.parametrize(("sample_temperature", "override", "recorded"), [
    (0.7, None, 0.7), (0.7, 0.0, 0.0), (None, None, None), (None, 1.2, 1.2)])
def test_the_record_holds_the_temperature_the_request_carried(endpoint, reply, sample_temperature, override,
                                                               recorded):
    """records.csv's ``temperature`` is what went on the wire (the identity test reads it): the sample's, or the
    override's; empty when the request set none, whatever the wire format."""
    adapter = ScriptedAdapter(lambda r: reply)
    session = requests.Session()
    session.mount("http://vendor.test/", adapter)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16,
            **({"temperature": sample_temperature} if sample_temperature is not None else {})}
    vendor = Vendor("m", "v", "id", "http://vendor.test/v1", dialect=Dialect(endpoint=endpoint))
    ctx = ExecContext("run", "w", RetryPolicy(retries=0), overrides=Overrides(temperature=override))
    item = WorkItem(ItemKey("m", "v", "1", 1), Sample("1", 1, body))
    outcome = execute_item(ItemRun(session, vendor, vendor.url, item, ctx, rng=random.Random(1)))
    sent = json.loads(adapter.requests[0].body)
    assert sent.get("temperature") == recorded
    assert outcome.record["temperature"] == recorded and outcome.record["status"] == "success"


def test_exec_context_carries_overrides_to_workers():
    ctx = ExecContext("run", "w", RetryPolicy(), overrides=Overrides(0.2, 10, {"a": 1}, (("X-K", "v"),)))
    assert ExecContext.from_message(ctx.to_message(), "other").overrides == ctx.overrides


def test_override_header_secrets_are_redacted():
    o = parse_overrides(None, None, "", ["X-Api-Token: tok-SECRET-123", "X-Route: public"])
    assert o.secrets() == ["tok-SECRET-123"]
    redact = Redactor()
    redact.extend(o.secrets())
    assert redact("echo tok-SECRET-123 back") == "echo *** back"
    assert redact.value({"avv_header": ["X-Api-Token: tok-SECRET-123"]}) == {"avv_header": ["X-Api-Token: ***"]}


@pytest.mark.integration  # starts a process
def test_options_from_locust_conf_and_environment(tmp_path):
    """configargparse reads the repeatable --avv-header from locust.conf and LOCUST_AVV_HEADER as lists."""
    (tmp_path / "locust.conf").write_text("avv-header = [X-Conf:1, X-Two:2]\navv-temperature = 0.4\n"
                                          'avv-extra-body = {"top_p": 0.8}\n')
    code = ("import json, avv_harness.locust.plugin as p; from avv_harness.run.options import RunOptions, "
            "preparse_options; o = RunOptions.from_parsed(preparse_options([])).overrides; "
            "print(json.dumps(o.to_message()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCUST_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "LOCUST_AVV_MAX_TOKENS": "33",
                          "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"temperature": 0.4, "max_tokens": 33, "extra_body": {"top_p": 0.8},
                                       "headers": [["X-Conf", "1"], ["X-Two", "2"]]}
    (tmp_path / "locust.conf").unlink()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT),
                          "LOCUST_AVV_HEADER": "[X-Env:3, X-Env2:4]"}, capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stdout)["headers"] == [["X-Env", "3"], ["X-Env2", "4"]], proc.stderr[-2000:]


def test_bad_override_is_an_input_error_naming_the_option():
    with pytest.raises(InputError, match="--avv-max-tokens"):
        RunOptions.from_parsed(preparse_options(["--avv-max-tokens", "-3"]))


@pytest.mark.integration  # a master and workers in this process: seconds
def test_workers_send_the_masters_overrides(tmp_path):
    """The master's overrides reach the wire from workers whose own options have none."""
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=3)
    base = options(tmp_path, config, samples, "--avv-retries", "0")
    master_args = [*base, "--avv-temperature", "0.25", "--avv-max-tokens", "64", "--avv-extra-body",
                   '{"top_k": 20}', "--avv-header", "X-Global:yes", "--avv-header", "X-Auth-Extra:sk-OVR-secret-1"]
    adapter = ScriptedAdapter(lambda r: stream_reply("echo sk-OVR-secret-1"))
    master_env, master = make_env(master_args, runner="master")
    workers = [make_env(base, runner="worker", adapter=adapter, master_port=master_env.runner.server.port)
               for _ in range(2)]
    gevent.sleep(0.5)
    assert all(w.exec.overrides.empty for _, w in workers)  # before the first item: their own (none)
    assert run_to_end(master_env, timeout=60) == EXIT_OK
    assert len(adapter.requests) == 6
    for request in adapter.requests:
        body = json.loads(request.body)
        assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.25, 64, 20)
        assert request.headers["X-Global"] == "yes" and request.headers["X-Auth-Extra"] == "sk-OVR-secret-1"
    frame = read_records(master.run_dir / "records.csv")
    assert (frame["content"] == "echo ***").all()  # the override secret is redacted on the workers too
    run_json = (master.run_dir / "run.json").read_text()
    assert "sk-OVR-secret-1" not in run_json and "X-Auth-Extra:***" in run_json
    for env, _ in workers:
        env.runner.quit()


@pytest.mark.parametrize("name", ["Content-Length", "transfer-encoding", "Connection", "X-AVV-Item", "x-avv-attempt"])
def test_headers_the_client_owns_are_refused_in_the_config_and_in_avv_header(name):
    """The framing headers and the item tags are the client's: naming one is an input error at start-up, naming
    the field (docs/reference/wire-faults.md, "Request headers"), never a request sent with two of them."""
    from avv_harness.inputs.config import parse_config
    from tests.builders import vendors_config

    raw = vendors_config([{"name": "v", "url": "http://127.0.0.1:9/v1", "is_baseline": True, "headers": {name: "1"}}])
    with pytest.raises(InputError, match=rf"vendors\[0\] \(v\)\.headers\.{name}: .*remove it"):
        parse_config(raw, "c.yaml", {})
    with pytest.raises(InputError, match=rf"--avv-header {name}: .*remove it"):
        parse_overrides(None, None, "", [f"{name}: 1"])
