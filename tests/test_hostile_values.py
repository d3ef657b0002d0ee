"""Hostile inputs, round three (issue 33), the values and records family: numbers and text are validated where they
enter, and an item is recorded only when its rows are written.

- F17: a sample's `stop` (or `tools`, `tool_calls`, `reasoning`) of the wrong type for a Messages / Responses vendor
  is an input error naming file:line, vendor and field — never a traceback, never silently another value;
- F18: a model, vendor name or model_id holding a lone surrogate is refused at validation;
- F19: an integer of more than 4,300 digits in a call's arguments "does not parse" everywhere — the call readers,
  raw mode, the sample reader and scoring;
- F20: a price whose worst case would overflow is refused naming the field; and whatever fails while an item's rows
  are stored, the run fails loudly (exit status 3) and run.json's counts agree with records.csv.

Each test says what happened before. In-process (fake vendor, in-process Locust) throughout.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from avv_core.api_formats import ConversionError, to_messages, to_responses
from avv_core.call_json import call_from_json_text, maybe_json
from avv_core.canonical import UNPARSED, parse_arguments, parse_json_text, parses_as_json
from avv_core.errors import InputError
from avv_core.json_input import parse_json
from avv_core.manifest import RunManifest
from avv_core.pricing import MAX_PRICE, MAX_PRICED_REQUESTS, Price
from avv_core.record_file import read_records, read_rows
from avv_core.records import MAX_TOKENS, RecordError
from avv_core.samples import load_samples
from avv_core.tool_formats import find_text_calls, parse_completion
from avv_harness.dialects.dialect import Dialect
from avv_harness.inputs.config import Vendor, load_config, parse_config
from avv_harness.run.controller import EXIT_OK, EXIT_WRITE
from avv_harness.run.state import RunState
from avv_harness.wire.execute import check_requests
from avv_scoring import score_paths, terminal_text
from avv_scoring.metrics.schema import check_call
from avv_scoring.metrics.uncertainty import StatsSettings
from tests.builders import fake_vendors, vendors_config, write_inputs, write_jsonl, write_run, write_yaml
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options, run_to_end

URL = "http://vendor.test/v/v1"
BIG = "1" * 5000  # Python converts at most 4,300 digits to an int (sys.get_int_max_str_digits())
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def vendor(endpoint: str) -> Vendor:
    return Vendor("m", "v", "model-x", URL, dialect=Dialect(endpoint=endpoint))


# F17 ------------------------------------------------------------------- a sample that cannot be converted


@pytest.mark.parametrize("stop, got", [(5, "int"), ({"END": 1}, "dict"), (["END", 3], "a list holding int"),
                                       (True, "bool")])
def test_a_stop_of_the_wrong_type_is_an_input_error_naming_file_line_vendor_and_field(tmp_path, stop, got):
    """Before: `stop: 5` raised TypeError ('int' object is not iterable) out of the start-up check: a traceback,
    exit 1; `stop: {"END": 1}` silently went out as `stop_sequences: ["END"]`."""
    samples = load_samples(write_jsonl(tmp_path / "samples.jsonl", [
        {"messages": [{"role": "user", "content": "q"}], "stop": "fine"},
        {"messages": [{"role": "user", "content": "q"}], "stop": stop}]))
    with pytest.raises(InputError) as err:
        check_requests(samples, [vendor("messages")])
    assert str(err.value).splitlines()[1].strip() == (
        f"{tmp_path / 'samples.jsonl'}:2: vendor v (endpoint: messages): stop: must be a string or a list of strings "
        f"to be sent to the Messages API, got {got}")


def test_the_check_refuses_it_when_the_run_starts_before_any_request(tmp_path):
    config = write_yaml(tmp_path / "vendors.yaml", fake_vendors({"a": {}, "b": {"endpoint": "messages"}}))
    samples = write_jsonl(tmp_path / "samples.jsonl", [{"messages": [{"role": "user", "content": "q"}], "stop": 5}])
    adapter = ScriptedAdapter(lambda request: stream_reply())
    with pytest.raises(InputError, match=r"samples.jsonl:1: vendor b \(endpoint: messages\): stop: must be a string"):
        make_env(options(tmp_path, config, samples), adapter=adapter)
    assert adapter.requests == []


CHAT = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "q"}]},
                     {"role": "assistant", "content": "a", "tool_calls": [
                         {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
                     {"role": "tool", "tool_call_id": "c", "content": "r"}],
        "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": False,
        "max_tokens": 5, "reasoning_effort": "low", "reasoning": {"summary": "auto"}}
HOSTILE = [5, -1, 1.5, "text", True, None, {"a": 1}, [1], [None], [{}], [], {}, "\ud800", BIG]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if path else []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        out += _paths(child, (*path, key))
    return out


@pytest.mark.parametrize("convert, stop", [(to_messages, None), (to_messages, "END"), (to_responses, None)])
def test_no_value_anywhere_in_a_sample_makes_the_conversion_raise_anything_but_an_input_error(convert, stop):
    """Every field of a chat request replaced by each hostile value: the conversion gives a body or a
    ConversionError (an InputError naming the field). Before: `stop`, `tools` and an assistant message's
    `tool_calls` that were numbers, and a `reasoning` that was not an object (Responses), raised TypeError."""
    body = {**CHAT, **({"stop": stop} if stop else {})}
    for path in _paths(body):
        for value in HOSTILE:
            changed = copy.deepcopy(body)
            holder = changed
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = value
            try:
                convert(changed)
            except ConversionError:
                pass


# F18 ---------------------------------------------------------------------------- a lone surrogate in a name


@pytest.mark.parametrize("where, patch, field", [
    ("model", {}, "m\\ud800 (the model name): holds a lone surrogate (\\ud800)"),
    ("name", {"name": "a\udfff"}, "m.vendors[0] (a\\udfff).name: holds a lone surrogate (\\udfff)"),
    ("model_id", {"model_id": "gpt\ud801x"}, "m.vendors[0] (a).model_id: holds a lone surrogate (\\ud801)"),
])
def test_a_lone_surrogate_in_a_name_is_refused_at_validation(tmp_path, where, patch, field):
    """Before: `"m\\ud800"` (YAML's escape) passed validation, then Locust crashed writing it (no UTF-8 for a lone
    surrogate). Now the config is refused naming the field, and the message itself can be printed."""
    model = "m\ud800" if where == "model" else "m"
    config = vendors_config([{"name": "a", "url": "http://127.0.0.1:9/v1", "is_baseline": True,
                              "require_key": False, **patch}], model=model)
    path = tmp_path / "vendors.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML: the "\ud800" escape as written
    with pytest.raises(InputError) as err:
        load_config(path)
    message = str(err.value)
    assert f"vendors.yaml: {field}, which is no character" in message
    message.encode("utf-8")  # printable as it is: the surrogate is shown escaped


def test_terminal_text_shows_a_lone_surrogate_escaped():
    assert terminal_text("a\ud800b") == "a\\ud800b"
    parse_config(vendors_config([{"name": "é-ok", "url": URL, "is_baseline": True, "require_key": False}]),
                 "v.yaml", {})  # other non-ASCII names stay fine


# F19 ------------------------------------------------- an integer too long to convert is text that does not parse


def test_every_reader_of_call_arguments_reads_a_huge_integer_as_not_parsing():
    """Before: each raised ValueError ("Exceeds the limit (4300 digits) for integer string conversion"), which
    only a `json.JSONDecodeError` handler would have caught: the anomaly check, the canonical arguments (gold and
    baseline matching), the schema check, the as-text detector and raw mode's parser."""
    arguments = '{"city": ' + BIG + '}'
    assert parse_json_text(arguments) is UNPARSED and not parses_as_json(arguments)
    assert parse_arguments(arguments) is UNPARSED
    assert maybe_json(arguments) == arguments
    assert check_call({"name": "get_weather", "arguments": arguments}, {"get_weather": TOOL["function"]["parameters"]}
                      ) == "invalid"
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": ' + BIG + '}}\n```'
    assert find_text_calls(fenced, {"get_weather"}) == []  # nothing readable: not a call written as text
    for parser, text in (("hermes", f'<tool_call>{{"name": "get_weather", "arguments": {{"n": {BIG}}}}}</tool_call>'),
                         ("json_fenced", fenced), ("mistral", f'[TOOL_CALLS][{{"name": "get_weather", "n": {BIG}}}]')):
        parsed = parse_completion(text, parser)  # raw mode: the call is kept with its raw text, or is content
        assert all(not parses_as_json(c["arguments"]) for c in parsed.calls), parser
    assert call_from_json_text('{"name": "a\\x", "arguments": {"x": 1') == {"name": "a\\x", "arguments": '{"x": 1'}


def test_a_sample_line_with_a_huge_integer_is_an_input_error_naming_its_line(tmp_path):
    """Before: the ValueError escaped the sample reader: a traceback at start-up."""
    path = tmp_path / "samples.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "q"}]}\n{"messages": [], "n": ' + BIG + '}\n',
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"samples.jsonl:2: not valid JSON we can read \(Exceeds the limit \(4300 "
                                         r"digits\) for integer string conversion"):
        load_samples(path)
    with pytest.raises(InputError, match="not valid JSON we can read"):
        parse_json('{"n": ' + BIG + '}', "run.json")


def test_avv_score_scores_a_run_whose_answer_holds_a_huge_integer(tmp_path):
    """Before: scoring raised ValueError on the vendor's arguments (the gold / baseline match and the schema
    check): `avv-score` crashed and no vendor of the run was scored. Now that call is a call whose arguments do
    not parse: invalid against the schema, no argument match."""
    samples = write_jsonl(tmp_path / "samples.jsonl", [
        {"data_index": str(i), "messages": [{"role": "user", "content": f"weather {i}?"}], "tools": [TOOL],
         "expected_tool_call": True, "expected_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
        for i in (1, 2)])
    good = [{"id": "c", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    huge = [{"id": "c", "name": "get_weather", "arguments": '{"city": ' + BIG + '}'}]
    rows = [dict(vendor=vendor_name, is_baseline=vendor_name == "ref", sample_id=str(i), finish_reason="tool_calls",
                 tool_calls=huge if (vendor_name, i) == ("alt", 1) else good)
            for vendor_name in ("ref", "alt") for i in (1, 2)]
    run = write_run(tmp_path / "run", rows, samples)
    scores = score_paths([run], write=False, stats=StatsSettings(resamples=0)).scores.set_index("vendor")
    assert set(scores.index) == {"ref", "alt"}
    assert scores.loc["ref", "schema_accuracy"] == 1.0 and scores.loc["alt", "schema_accuracy"] == 0.5


# F20 ----------------------------------------------------------------------------- a price that would overflow


def test_max_price_keeps_a_runs_worst_case_finite():
    price = Price(MAX_PRICE, MAX_PRICE, MAX_PRICE)
    assert math.isfinite(price.worst(MAX_TOKENS, MAX_TOKENS) * MAX_PRICED_REQUESTS)
    assert math.isfinite(price.cost(MAX_TOKENS, MAX_TOKENS, 0) * MAX_PRICED_REQUESTS)
    assert MAX_PRICE > 1e290  # no real price comes near it


@pytest.mark.parametrize("key", ["input", "output", "cached_input"])
def test_a_price_whose_worst_case_overflows_is_refused_naming_the_field(key):
    """Before: `price: {input: 1.0e+308, …}` passed validation; the cost overflowed to infinity, the row could
    not be written (RecordError), the item was in no file while run.json said `completed`."""
    price = {"input": 1.0, "output": 2.0, key: 1.0e308}
    with pytest.raises(InputError) as err:
        parse_config(vendors_config([{"name": "a", "url": URL, "is_baseline": True, "require_key": False,
                                      "price": price}]), "v.yaml", {})
    assert f"v.yaml: m.vendors[0] (a).price.{key}: 1e+308 per million tokens is too large: a run's costs would " \
           "overflow (at most 4.49e+293" in str(err.value)
    parse_config(vendors_config([{"name": "a", "url": URL, "is_baseline": True, "require_key": False,
                                  "price": {**price, key: 1e9}}]), "v.yaml", {})  # a dear price is a price


# recorded only when written ------------------------------------------------------------------------------


def _counts_agree(run_dir: Path) -> RunManifest:
    """run.json's counts are records.csv's; returns run.json."""
    manifest = RunManifest.from_dict(json.loads((run_dir / "run.json").read_text(encoding="utf-8")))
    _, rows = read_rows(run_dir / "records.csv")
    assert manifest.records_written == manifest.items_recorded == len(rows)
    return manifest


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
@pytest.mark.parametrize("where", ["pricing", "writing"])
def test_a_failure_while_storing_an_item_fails_the_run_and_run_json_agrees_with_records_csv(tmp_path, monkeypatch,
                                                                                            where):
    """Before: an exception while pricing an item (the cost overflowing: RecordError) escaped after the ledger
    had the item done, and one raised while writing it (a row the writer refuses) was logged by Locust's event
    hook and swallowed: the run ended `completed`, exit 0, with `items_recorded 4, records_written 2`. Now the
    run stops with exit status 3 (`store_failed`), the item is not recorded, the counts agree, and a resume
    completes it."""
    price = {"input": 1.0, "output": 2.0}
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1, "price": price}}, n_samples=6)
    args = options(tmp_path, config, samples, "--avv-run-id", "store")
    env, ctl = make_env(args)
    seen = []
    if where == "pricing":  # the cost of the third item overflows (as a 1e308 price made it): no row holds it
        original_cost = Price.record_cost

        def record_cost(self, record):
            seen.append(record)
            return math.inf if len(seen) == 3 else original_cost(self, record)

        monkeypatch.setattr(Price, "record_cost", record_cost)
    else:
        original_write = RunState.write

        def write(run, records):
            seen.append(records)
            if len(seen) == 3:
                raise RecordError("unknown record column(s): ['costs']")
            original_write(run, records)

        monkeypatch.setattr(RunState, "write", write)
    assert run_to_end(env) == EXIT_WRITE
    run_dir = tmp_path / "out" / "store"
    manifest = _counts_agree(run_dir)
    assert (manifest.completed, manifest.stop_reason) == (False, "store_failed")
    assert manifest.items_recorded < 6
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(run_dir)))
    assert run_to_end(env) == EXIT_OK
    assert _counts_agree(run_dir).completed and len(read_records(run_dir / "records.csv")) == 6
