"""Issue 22, "nothing hangs, everything stops": each case reproduces what hung or reached out before.

Schema validation never touches the network and bounds its regex searches; the raw-mode template sandbox
has a step, output and time limit; YAML aliases cannot expand without bound; SIGTERM stops the scoring.
"""

from __future__ import annotations

import http.server
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import gevent
import gevent.monkey
import pytest

from avv_core import bounded_schema
from avv_core.agent_task import parse_agent
from avv_core.errors import InputError
from avv_core.record_file import read_records
from avv_core.stop_signals import Interrupted, interrupt_on_signals
from avv_core.yaml_io import load_yaml, loads_yaml
from avv_harness.dialects import chat_template
from avv_harness.dialects.chat_template import TemplateLimitError, check_chat_template, load_chat_template
from avv_harness.inputs.config import load_config
from avv_harness.run.controller import EXIT_OK
from avv_scoring import load_thresholds
from avv_scoring.metrics import headline as M
from avv_scoring.metrics import schema as S
from avv_scoring.testing import call, records_frame
from avv_sim import ProfileError, load_profiles, schema_args
from avv_sim.profiles import parse_set
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import clean_env, locust_cmd
from tests.wire_server import ScriptServer, chunk, headers, sse


def _tools(**schemas):
    return [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in schemas.items()]


def _check(name, arguments, **schemas):
    return S.check_call(call(name, arguments), S.tool_schemas(_tools(**schemas)))


# 1 ------------------------------------------------------------ a remote $ref is never fetched


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that serves a schema and records every path it is asked for."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_host() -> Iterator[str]:
    """A host that accepts the connection and never answers (before: scoring waited on it forever)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_a_remote_ref_is_never_fetched_and_makes_the_schema_uncheckable(recording_server):
    """Before: jsonschema's default registry fetched the URL while scoring (an SSRF: the same code asks
    http://169.254.169.254/latest/meta-data for a cloud machine's credentials)."""
    url, asked = recording_server
    S.clear_cache()
    remote = {"type": "object", "properties": {"city": {"$ref": f"{url}/city.json"}}}
    hidden = {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"$ref": f"{url}/x"}]}}}
    assert _check("w", {"city": "Paris"}, w=remote) == S.UNCHECKABLE
    assert _check("w", {"city": 3}, w=remote) == S.UNCHECKABLE
    # decided from the schema, not the arguments: a call cannot steer around (or into) the remote branch
    assert _check("h", {"x": 1}, h=hidden) == S.UNCHECKABLE
    assert _check("h", {"x": "steered"}, h=hidden) == S.UNCHECKABLE
    assert _check("m", {}, m={"$ref": "http://169.254.169.254/latest/meta-data"}) == S.UNCHECKABLE
    # the simulator validates the same way: it neither fetches nor trusts the remote branch
    assert schema_args.is_valid(remote, {"city": "Paris"})
    frame = records_frame([{"sample_id": "1", "finish_reason": "tool_calls",
                            "tool_calls": [call("w", {"city": "Paris"})]}])
    got = M.schema_accuracy(frame, {"1": _tools(w=remote)})
    assert got["schema_uncheckable_calls"] == 1 and got["schema_calls"] == 0
    assert asked == []


def test_local_refs_and_defs_keep_working():
    S.clear_cache()
    schema = {"type": "object", "properties": {"where": {"$ref": "#/$defs/place"},
                                               "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
              "required": ["where"],
              "$defs": {"place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}}}
    assert _check("p", {"where": {"lat": 1.5}}, p=schema) == S.VALID
    assert _check("p", {"where": {"lat": "north"}}, p=schema) == S.INVALID
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"n": {"type": "integer"}},
              "properties": {"n": {"$ref": "#/definitions/n"}}}
    assert _check("d", {"n": 1}, d=draft7) == S.VALID
    assert _check("d", {"n": "one"}, d=draft7) == S.INVALID
    nested_id = {"$id": "https://example.test/root", "properties": {"a": {"$ref": "inner"}},
                 "$defs": {"inner": {"$id": "inner", "properties": {"b": {"$ref": "#/$defs/s"}},
                                     "$defs": {"s": {"type": "string"}}}}}
    assert _check("n", {"a": {"b": "x"}}, n=nested_id) == S.VALID
    assert _check("n", {"a": {"b": 1}}, n=nested_id) == S.INVALID
    assert _check("u", {}, u={"$ref": "#/$defs/missing"}) == S.UNCHECKABLE


def test_a_host_that_never_answers_cannot_hang_scoring(silent_host):
    """Before: validation blocked in urlopen() with no timeout, for ever."""
    S.clear_cache()
    started = time.monotonic()
    assert _check("s", {"a": 1}, s={"properties": {"a": {"$ref": f"{silent_host}/a.json"}}}) == S.UNCHECKABLE
    # the simulator treats a schema it cannot check as accepting anything, and does not wait either
    assert schema_args.is_valid({"type": "object", "properties": {"a": {"type": "string"}},
                                 "$defs": {"r": {"$ref": f"{silent_host}/r"}}}, {"a": 1})
    assert time.monotonic() - started < 2.0


# 2 ------------------------------------------------------ a backtracking pattern is time-bounded

EVIL = "^(a|a)+$"  # Python's re takes ~2^40 steps on 40 "a" and a "!"; regex's guards do not help here
EVIL_CLASSIC = "^(a+)+$"  # the issue's case: >12 min in re at 100 % CPU, ignoring SIGTERM
VICTIM = "a" * 40 + "!"


@pytest.mark.parametrize("pattern", [EVIL, EVIL_CLASSIC])
def test_a_catastrophic_pattern_is_decided_in_bounded_time_and_counts_invalid(pattern):
    """Before: scoring ran for more than 12 minutes at 100 % CPU on one call and ignored SIGTERM."""
    S.clear_cache()
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    started = time.monotonic()
    assert _check("t", {"code": VICTIM}, t=schema) == S.INVALID
    assert time.monotonic() - started < 1.0
    assert _check("t", {"code": "aaaa"}, t=schema) == S.VALID  # normal strings: decided as before


def test_a_timed_out_check_never_improves_the_score():
    """A vendor cannot make its call uncheckable (left out of the accuracy) by sending a string that makes
    the pattern time out: it is invalid, like a string that does not match."""
    S.clear_cache()
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}
    frame = records_frame([
        {"sample_id": "1", "finish_reason": "tool_calls", "tool_calls": [call("t", {"code": "aaa"})]},
        {"sample_id": "2", "finish_reason": "tool_calls", "tool_calls": [call("t", {"code": VICTIM})]},
    ])
    got = M.schema_accuracy(frame, {"1": _tools(t=schema), "2": _tools(t=schema)})
    assert got["schema_calls"] == 2 and got["schema_uncheckable_calls"] == 0
    assert got["schema_accuracy"] == pytest.approx(0.5)


def test_pattern_properties_and_property_names_are_bounded_too():
    S.clear_cache()
    started = time.monotonic()
    by_key = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}
    closed = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False}
    names = {"type": "object", "propertyNames": {"pattern": EVIL}}
    assert _check("k", {VICTIM: 1}, k=by_key) == S.INVALID
    assert _check("c", {VICTIM: 1}, c=closed) == S.INVALID
    assert _check("n", {VICTIM: 1}, n=names) == S.INVALID
    # many keys share one budget per call: not 100 ms each
    assert _check("k", {VICTIM + str(i): 1 for i in range(50)}, k=by_key) == S.INVALID
    assert time.monotonic() - started < 2.0
    assert _check("c", {"aaa": 1}, c=closed) == S.VALID
    assert _check("c", {"bbb": 1}, c=closed) == S.INVALID
    # jsonschema would match these patterns again with re, without a bound: refused when compiled
    both = {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert _check("b", {"a": 1}, b=both) == S.UNCHECKABLE


def test_the_simulator_checks_and_generates_within_bounds():
    """The simulator validates the same way, and its generator cannot be made to build a huge string."""
    started = time.monotonic()
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}}
    assert not schema_args.is_valid(schema, {"code": VICTIM})
    nested = schema_args._from_pattern("((a{100}){100}){100}", random.Random(1))  # 10^6 characters before
    assert len(nested) <= schema_args.MAX_GENERATED_CHARS
    huge = schema_args.generate({"type": "object", "required": ["s", "a"], "properties": {
        "s": {"type": "string", "minLength": 10**9}, "a": {"type": "array", "minItems": 10**9}}}, "seed")
    assert len(huge["s"]) == schema_args.MAX_GENERATED_CHARS and len(huge["a"]) == schema_args.MAX_GENERATED_ITEMS
    assert time.monotonic() - started < 3.0


def test_the_regex_budget_is_per_check():
    validator = bounded_schema.build_validator({"type": "string", "pattern": EVIL})
    for _ in range(3):  # each check gets its own budget: an earlier timeout does not fail a later value
        assert not bounded_schema.is_valid(validator, VICTIM)
        assert bounded_schema.is_valid(validator, "aa")


# 4 ------------------------------------------------------------------------ YAML alias bombs

def _alias_bomb(levels: int = 9) -> str:
    """The billion laughs: nine lists of nine aliases to the list above (about 700 bytes, 9^9 strings)."""
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = [f'    {names[0]}: &{names[0]} ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"    {names[i]}: &{names[i]} [" + ", ".join([f"*{names[i - 1]}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_a_vendor_config_is_refused_naming_file_and_line(tmp_path):
    """Before: 698 bytes in extra_body expanded to 2.3 GB in memory while the config loaded."""
    config = tmp_path / "vendors.yaml"
    config.write_text("m:\n  vendors:\n    - name: v\n      url: http://127.0.0.1:9/v1\n      extra_body:\n"
                      + _alias_bomb().replace("    ", "        "), encoding="utf-8")
    assert len(config.read_bytes()) < 1000
    started = time.monotonic()
    with pytest.raises(InputError, match=r"vendors\.yaml: line \d+: alias \*\w expands the document past 100,000"):
        load_config(str(config), check_keys=False)
    assert time.monotonic() - started < 1.0


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_every_yaml_the_project_reads_has_the_limit(tmp_path):
    """Simulator profiles (a file and --set) and threshold files go through the same loader."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("profiles:\n  p:\n    extra:\n" + _alias_bomb(), encoding="utf-8")
    with pytest.raises(ProfileError, match=r"bomb\.yaml: line \d+: alias"):
        load_profiles(bomb)
    with pytest.raises(ProfileError, match=r"--set .*line 1: alias"):
        parse_set(["x=" + "{" + _alias_bomb().replace("\n", ",").strip(",").replace("    ", "") + "}"])
    thresholds = tmp_path / "t.yaml"
    thresholds.write_text("name: t\nbase: none\nextra:\n" + _alias_bomb(), encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.yaml: line \d+: alias"):
        load_thresholds(thresholds)
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")  # before: RecursionError
    with pytest.raises(InputError, match=r"deep\.yaml: nested too deeply to read"):
        load_yaml(str(deep), "config")
    recursive = tmp_path / "r.yaml"
    recursive.write_text("models:\n  m: &m [*m]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"r\.yaml: line 2: alias \*m is inside the node it refers to"):
        load_yaml(str(recursive), "config")


def test_configs_with_a_few_anchors_and_merge_keys_keep_working(tmp_path):
    config = tmp_path / "vendors.yaml"
    config.write_text(
        "m:\n  vendors:\n"
        "    - &first {name: v1, url: 'http://127.0.0.1:9/v1', concurrency: 2, is_baseline: true,\n"
        "              extra_body: &body {temperature: 0, stop: [a, b]}}\n"
        "    - {<<: *first, name: v2, concurrency: 3, is_baseline: false, extra_body: *body}\n",
        encoding="utf-8")
    vendors = load_config(str(config), check_keys=False).vendors
    assert [v.concurrency for v in vendors] == [2, 3]
    assert all(v.extra_body == {"temperature": 0, "stop": ["a", "b"]} for v in vendors)
    assert loads_yaml("a: &a [1, 2]\nb: [*a, *a, *a]\n", "x") == {"a": [1, 2], "b": [[1, 2]] * 3}


# 3 ------------------------------------------------- raw mode's chat template: step, output, time limits

NESTED_RANGES = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"


@pytest.mark.parametrize("body, limit", [
    (NESTED_RANGES, "steps"),  # before: 10^10 iterations, SIGTERM and -t ignored, records lost
    ("{% for i in range(100000) %}{{ 'x' * 2500 }}{% endfor %}", "characters of output"),  # before: 250 MB
    ("{% for i in range(100000) %}" + "y" * 2500 + "{% endfor %}", "characters of output"),  # the template's text
    ("{% set b %}{% for i in range(100000) %}{{ 'z' * 2500 }}{% endfor %}{% endset %}{{ b|length }}",
     "characters of output"),  # buffered in a set block, never written out
    ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     "a value of"),  # doubling with ~: 2 TB after 40 rounds
    ("{% set ns = namespace(s=['a']) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
     "a value of"),
    ("{{ 2 ** 1000000000 }}", "bits"),
    ("{{ 'x'|center(1000000000) }}", "filter center"),
    ("{{ 'x'.ljust(1000000000) }}", "a call with the argument"),
    ("{{ [1]|slice(1000000000)|list|length }}", "filter slice"),
    ("{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(1) }}", "recursion too deep"),
    ("{% for x in [1, 2] recursive %}{{ loop([1, 2]) }}{% endfor %}", "recursion too deep"),
])
@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_template_over_a_limit_stops_with_an_error_naming_it(tmp_path, body, limit):
    path = tmp_path / "evil.jinja"
    path.write_text(body, encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(TemplateLimitError, match=rf"chat template {path}: .*{limit}"):
        load_chat_template(path).render([{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < chat_template.MAX_RENDER_S + 1.0
    # and the config refuses it when it loads (a two-message trial rendering)
    assert f"{path}: " in check_chat_template(str(path)) and limit in check_chat_template(str(path))


def test_the_limits_are_a_step_count_an_output_size_and_a_time(tmp_path, monkeypatch):
    """The time bound holds where the step bound is far away (slow steps)."""
    monkeypatch.setattr(chat_template, "MAX_RENDER_S", 0.2)
    path = tmp_path / "slow.jinja"
    path.write_text("{% for i in range(100000) %}{{ range(100000)|list|length }}{% endfor %}", encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(TemplateLimitError, match="rendering took more than 0.2 s"):
        load_chat_template(path).render([{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 1.5


def test_normal_templates_render_as_before(tmp_path):
    path = tmp_path / "ok.jinja"
    path.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content ~ '!' }}{% endfor %}"
                    "{% for i in range(3) %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}"
                    "{{ 'ab' * 2 }}{{ [1] + [2] }}{{ 2 ** 10 }}{{ '%s-%s' % ('a', 'b') }}{{ 'x'|center(5) }}"
                    "{% if add_generation_prompt %}<assistant>{% endif %}", encoding="utf-8")
    assert check_chat_template(str(path)) is None
    assert load_chat_template(path).render([{"role": "user", "content": "hi"}]) == (
        "<user>hi!1/32/33/3abab[1, 2]1024a-b  x  <assistant>")


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_template_over_a_limit_at_run_time_is_a_client_error_and_the_run_goes_on(tmp_path):
    """A template that passes the config's trial but not a real conversation: before, the whole process froze
    (SIGTERM and -t ignored, records lost); now that item is recorded client_error with the reason."""
    template = tmp_path / "long.jinja"
    template.write_text("{% if messages|length > 2 %}" + NESTED_RANGES + "{% endif %}"
                        "{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]
    lines = [{"data_index": "short", "messages": turns[:1]}, {"data_index": "long", "messages": turns}]
    raw = {"endpoint": "completions", "chat_template": str(template)}
    config, samples = write_inputs(tmp_path, {"a": raw, "b": raw}, sample_lines=lines)
    text = b'data: {"choices": [{"index": 0, "text": "done", "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    adapter = ScriptedAdapter(lambda request: (200, {"Content-Type": "text/event-stream"}, text))
    env, ctl = make_env(options(tmp_path, config, samples), adapter=adapter)
    started = time.monotonic()
    assert run_to_end(env) == EXIT_OK
    assert time.monotonic() - started < 4 * chat_template.MAX_RENDER_S + 5
    frame = read_records(ctl.run_dir / "records.csv").set_index(["vendor", "sample_id"])
    for vendor in ("a", "b"):
        assert frame.loc[(vendor, "short"), "status"] == "success"
        assert frame.loc[(vendor, "long"), "error_kind"] == "client_error"
        assert "long.jinja" in frame.loc[(vendor, "long"), "error_detail"]
        assert "more than 1,000,000 steps" in frame.loc[(vendor, "long"), "error_detail"]


# 5 ------------------------------------------------------- SIGTERM stops the scoring, and avv-score


def _slow_to_score(tmp_path, server: ScriptServer, n_samples: int = 60):
    """A vendor config and samples whose scoring takes ~0.1 s per item: each sample's tool has its own schema
    (a backtracking pattern) and the vendor always sends the string that makes it time out."""
    call_text = json.dumps({"code": VICTIM})
    server.scripts["/v/v1"] = [headers(), sse(chunk({"role": "assistant", "content": ""})),
                               sse(chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                          "function": {"name": "t", "arguments": call_text}}]})),
                               sse(chunk({}, "tool_calls")), b"data: [DONE]\n\n"]
    lines = [{"data_index": f"s{i}", "messages": [{"role": "user", "content": f"q{i}"}],
              "tools": _tools(t={"type": "object", "$comment": f"sample {i}",
                                 "properties": {"code": {"type": "string", "pattern": EVIL}}})}
             for i in range(n_samples)]
    return write_inputs(tmp_path, {"v": {"concurrency": 4}}, sample_lines=lines,
                        url=f"http://127.0.0.1:{server.port}/{{name}}/v1")


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.integration
@pytest.mark.timing  # a signal sent 0.3 s into a step of a few seconds: run alone (tests/shards.py)
def test_sigterm_during_the_scoring_stops_it_and_says_how_to_score_later(tmp_path):
    """Before: the harness's signal handler was a gevent one, which runs only when the hub gets control, so a
    signal during the end-of-run scoring (pandas and schema checks in one greenlet) was at best
    "acknowledged", and a backtracking pattern kept the process at 100 % CPU for minutes."""
    server = ScriptServer()
    try:
        config, samples = _slow_to_score(tmp_path, server)
        out = tmp_path / "out"
        log = (tmp_path / "stdout.txt").open("w")
        proc = subprocess.Popen(locust_cmd("--headless", "--avv-config", str(config), "--avv-samples", str(samples),
                                           "--avv-out", str(out), "--avv-run-id", "slow", "--avv-start-jitter-s", "0"),
                                cwd=tmp_path, env=clean_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_for(lambda: "avv-locust: scoring" in (tmp_path / "stdout.txt").read_text(), 60, "the scoring")
            time.sleep(0.3)  # well inside the scoring (~6 s of schema checks)
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            status = proc.wait(timeout=30)
            stopped_in = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    finally:
        server.stop()
    output = (tmp_path / "stdout.txt").read_text()
    assert stopped_in < 3.0, output[-2000:]
    assert status == 128 + signal.SIGTERM, output[-2000:]
    run_dir = out / "slow"
    assert f"scoring stopped by SIGTERM; the records and run.json are complete: score them with avv-score {run_dir}" \
        in output
    assert "60 records" in output and "Traceback" not in output
    assert json.loads((run_dir / "run.json").read_text())["completed"] is True
    assert len(read_records(run_dir / "records.csv")) == 60

    # avv-score on the same slow input: SIGTERM (and Ctrl-C) stop it at once, one line, no traceback
    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([sys.executable, "-m", "avv_scoring.cli", str(run_dir), "--out", str(tmp_path / "s")],
                                cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(2.5)  # imported and scoring (the schema checks alone take ~6 s)
        assert proc.poll() is None
        proc.send_signal(signum)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - sent < 3.0
        assert proc.returncode == 128 + signum, err
        assert f"avv-score: stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err


def signal_later(signum: int, delay_s: float = 0.2) -> None:
    """Send ``signum`` to this process from a real OS thread after ``delay_s``: under Locust's monkey-patching,
    threading's threads are greenlets and would never run during a busy loop."""
    start_new_thread = gevent.monkey.get_original("_thread", "start_new_thread")
    sleep = gevent.monkey.get_original("time", "sleep")
    start_new_thread(lambda: (sleep(delay_s), os.kill(os.getpid(), signum)), ())


def test_interrupt_on_signals_stops_a_cpu_bound_step_and_restores_the_handlers():
    """The mechanism in-process: a Python-level handler raises between bytecodes of a busy loop; after the
    block the previous handler is back and ``after`` (the harness re-arms gevent's handlers there) has run."""
    before = signal.getsignal(signal.SIGTERM)
    rearmed = []
    signal_later(signal.SIGTERM)
    started = time.monotonic()
    with pytest.raises(Interrupted) as info, interrupt_on_signals(after=lambda: rearmed.append(True)):
        while time.monotonic() - started < 10:
            sum(range(1000))
    assert info.value.signum == signal.SIGTERM and info.value.exit_status == 143 and info.value.name == "SIGTERM"
    assert time.monotonic() - started < 2.0
    assert signal.getsignal(signal.SIGTERM) == before and rearmed == [True]


def test_interrupt_on_signals_works_in_any_greenlet_of_the_main_thread():
    """The harness scores in whichever greenlet ends the run (the shape's, a web request's); under gevent
    those are not threading's main thread, but signals still reach them."""

    def busy() -> str:
        started = time.monotonic()
        try:
            with interrupt_on_signals():
                signal_later(signal.SIGINT)
                while time.monotonic() - started < 10:
                    sum(range(1000))
        except Interrupted as exc:
            return f"{exc.name} after {time.monotonic() - started:.1f} s"
        return "not interrupted"

    result = gevent.spawn(busy).get(timeout=15)
    assert result.startswith("SIGINT after") and float(result.split()[2]) < 2.0, result


def test_an_agent_tasks_final_text_pattern_is_time_bounded_too():
    """The same rule for the user's ``final_text_pattern`` matched against a vendor's answer: before, Python's
    re could run for minutes on an answer built to backtrack; now such an answer is no match (wrong_answer)."""
    task = parse_agent({"max_steps": 2, "final_text_pattern": EVIL}, None, "samples.jsonl: line 1: agent")
    started = time.monotonic()
    assert not task.final_text_matches(VICTIM)
    assert time.monotonic() - started < 1.0
    assert task.final_text_matches("aaaa")


def test_a_config_whose_template_is_over_a_limit_is_an_input_error_naming_it(tmp_path):
    template = tmp_path / "nested.jinja"
    template.write_text(NESTED_RANGES, encoding="utf-8")
    config, _ = write_inputs(tmp_path, {"a": {"endpoint": "completions", "chat_template": str(template)}})
    started = time.monotonic()
    with pytest.raises(InputError, match=rf"chat_template: chat template {template}: more than 1,000,000 steps"):
        load_config(str(config), check_keys=False)
    assert time.monotonic() - started < chat_template.MAX_RENDER_S + 1.0
