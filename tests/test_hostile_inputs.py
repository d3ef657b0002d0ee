"""The twelve hostile-input cases of issue 11, each reproducing what went wrong before: no hangs, no
leaked keys, no mixed or torn records, local mistakes named as input errors. Mostly in-process."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import gevent
import pytest
import yaml

from avv_core.errors import InputError
from avv_core.items import ItemKey
from avv_core.record_file import RecordWriter, read_records, read_records_checked, read_rows
from avv_core.records import encode_row
from avv_core.samples import load_samples
from avv_harness.inputs.config import load_config, parse_config
from avv_harness.run.controller import EXIT_INCOMPLETE, EXIT_OK, EXIT_WRITE
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.wire.execute import endpoint_url
from avv_scoring.cli import main as avv_score
from tests.builders import sim_config, vendors_config, write_inputs, write_yaml
from tests.fake_vendor import ScriptedAdapter, error_reply, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.sim_records import truth_lines
from tests.wire_server import ScriptServer, chunk, headers, sse

FAST = {"ttft_ms": 10, "tokens_per_s": 500, "output_tokens": 6}


# 1 -------------------------------------------------------------- non-Latin-1 names and ids: no hang


@pytest.mark.integration  # an in-process Locust run against the simulator as a process
def test_non_latin1_vendor_model_run_id_and_sample_id_complete_over_real_http(tmp_path):
    write_yaml(tmp_path / "sim.yaml", sim_config({"ref": FAST}))
    lines = [{"data_index": "样本-1", "messages": [{"role": "user", "content": "你好"}]},
             {"data_index": 2, "messages": [{"role": "user", "content": "hi"}]}]
    config, samples = write_inputs(tmp_path, {"供应商": {"url": "{sim}/ref/v1"}}, sample_lines=lines, model="模型")
    args = options(tmp_path, config, samples, "--avv-sim-config", str(tmp_path / "sim.yaml"), "--avv-run-id", "运行-1")
    env, ctl = make_env(args, real_http=True)
    assert run_to_end(env, timeout=30) == EXIT_OK  # before: 'latin-1' codec can't encode → item stuck, hang
    frame = read_records(ctl.run_dir / "records.csv")
    assert sorted(frame["sample_id"]) == ["2", "样本-1"] and (frame["status"] == "success").all()
    truth = truth_lines(ctl.run_dir / "sim_truth.jsonl")
    tags = {ItemKey.parse_tag(t["client_tag"]) for t in truth}
    assert ("运行-1", ItemKey("模型", "供应商", "样本-1", 1), 1) in tags


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_any_exception_inside_an_item_is_recorded_and_bad_timeouts_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="--avv-timeout: must be ≥ 0"):
        RunOptions.from_parsed(preparse_options(["--avv-timeout", "-5"]))

    def explode(request):
        raise UnicodeEncodeError("latin-1", "样", 0, 1, "ordinal not in range(256)")

    config, samples = write_inputs(tmp_path, ["a"], n_samples=2)
    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(explode))
    assert run_to_end(env, timeout=20) == EXIT_OK  # recorded, not left in flight
    frame = read_records(ctl.run_dir / "records.csv")
    assert list(frame["error_kind"]) == ["client_error"] * 2 and not ctl.ledger.in_flight


# 2 -------------------------------------------------------------------------------------- keys leak


def test_key_with_a_trailing_newline_is_stripped_and_one_with_an_inner_newline_refused(tmp_path):
    vendor = {"name": "v", "url": "https://api.example.com/v1", "is_baseline": True, "api_key_env": "MY_KEY"}
    cfg = parse_config(vendors_config([vendor]), "c.yaml", {"MY_KEY": "sk-LEAK-nl-123456\n"})
    assert cfg.vendors[0].api_key == "sk-LEAK-nl-123456"
    with pytest.raises(InputError, match=r"c.yaml: m.vendors\[0\] \(v\).api_key: the key from env:MY_KEY") as err:
        parse_config(vendors_config([vendor]), "c.yaml", {"MY_KEY": "sk-LEAK\nsecond-line"})
    assert "sk-LEAK" not in str(err.value)


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_vendor_echoing_the_key_or_a_url_password_never_reaches_records_run_json_or_stats(tmp_path):
    key, password = "sk-LEAK-echoed-7f3a9c", "pw-LEAK-9d8c7b"

    def echo_401(request):
        return error_reply(401, f"Incorrect API key provided: {request.headers['Authorization'].split(' ', 1)[1]}")

    url = f"http://user:{password}@vendor.test/a/v1"  # requests sends it as Basic auth: base64 user:password
    config, samples = write_inputs(tmp_path, {"a": {"url": url}, "b": {"api_key": key}}, n_samples=2)
    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(echo_401))
    assert run_to_end(env, timeout=20) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv")
    assert (frame["error_kind"] == "http_4xx").all() and frame["error_detail"].str.contains("provided: \\*\\*\\*").all()
    errors = " ".join(str(e.error) for e in env.runner.stats.errors.values())
    texts = [(ctl.run_dir / "records.csv").read_text(), (ctl.run_dir / "run.json").read_text(), errors]
    basic = base64.b64encode(f"user:{password}".encode()).decode()
    for text in texts:
        assert key not in text and password not in text and basic not in text


# 3 ---------------------------------------------------------------------------- resume mixes runs


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_resume_refuses_another_config_and_reruns_edited_samples(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=3)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-run-id", "r1"))
    assert run_to_end(env) == EXIT_OK
    run_dir = ctl.run_dir
    other = tmp_path / "other"
    other.mkdir()
    config_b, samples_b = write_inputs(other, ["a", "c"], n_samples=3)
    with pytest.raises(InputError, match="cannot resume: the vendor config differs"):
        make_env(options(tmp_path, config_b, samples_b, "--avv-resume", str(run_dir)))
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    lines[1]["messages"][0]["content"] = "an edited question"  # same id, other body
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    seen = []
    adapter = ScriptedAdapter(lambda r: seen.append(json.loads(r.body)) or stream_reply())
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(run_dir)), adapter=adapter)
    assert run_to_end(env) == EXIT_OK
    assert [b["messages"][0]["content"] for b in seen] == ["an edited question"] * 2  # only the edited sample
    frame = read_records(run_dir / "records.csv")
    assert len(frame) == 8 and frame.groupby(["vendor", "sample_id"]).size().max() == 2


# 4 ------------------------------------------------------------------------------- total time cap


@pytest.fixture
def script_server():
    server = ScriptServer()
    yield server
    server.stop()


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_trickling_vendor_and_pings_after_the_answer_cannot_hold_the_run(tmp_path, script_server):
    role = sse(chunk({"role": "assistant", "content": ""}))
    trickle = [headers(), role]
    for _ in range(40):
        trickle += [0.5, sse(chunk({"content": " tick"}))]  # 20 s, a token every 0.5 s
    script_server.scripts["/trickle/v1"] = trickle
    pings = [headers(), role, sse(chunk({"content": "done"})), sse(chunk({}, "stop")), b"data: [DONE]\n\n"]
    pings += [0.4, b": ping\n\n"] * 50
    script_server.scripts["/pings/v1"] = pings
    url = f"http://127.0.0.1:{script_server.port}/{{name}}/v1"
    config, samples = write_inputs(tmp_path, {"trickle": {"timeout_s": 2}, "pings": {"timeout_s": 2}},
                                   n_samples=1, url=url)
    args = options(tmp_path, config, samples, "--avv-max-request-s", "1.5", "--avv-retries", "0")
    env, ctl = make_env(args, real_http=True)
    assert run_to_end(env, timeout=25) == EXIT_OK
    rows = {r["vendor"]: r for r in read_records(ctl.run_dir / "records.csv").to_dict("records")}
    assert rows["trickle"]["error_kind"] == "timeout" and "max_request_s" in rows["trickle"]["error_detail"]
    assert rows["trickle"]["latency_ms"] < 2500
    assert rows["pings"]["status"] == "success" and rows["pings"]["content"] == "done"


# 6 -------------------------------------------------------------------- full disk: no torn rows


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a 64 KiB tmpfs here ({proc.stderr.decode().strip() or 'not root'})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.integration  # mounts a tmpfs (root, a process) for an in-process Locust run
def test_a_full_disk_stops_the_run_with_whole_rows_and_resume_completes_it(tmp_path, tiny_disk):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}}, n_samples=120)
    sent = []
    adapter = ScriptedAdapter(lambda r: sent.append(1) or stream_reply("word " * 200))
    args = options(tmp_path, config, samples, "--avv-out", str(tiny_disk), "--avv-run-id", "full")
    env, ctl = make_env(args, adapter=adapter)
    assert run_to_end(env, timeout=30) == EXIT_WRITE
    run_dir = tiny_disk / "full"
    assert ctl.manifest.stop_reason == "disk" and len(sent) < 120  # stopped starting items at the first failure
    header, rows = read_rows(run_dir / "records.csv")  # raises on a torn or glued row
    assert (run_dir / "records.csv").read_bytes().endswith(b"\n") and len(rows) == ctl.manifest.records_written
    assert ctl.manifest.items_recorded == len(rows)  # the item whose write failed is not counted as recorded
    assert not list(run_dir.glob("*.tmp"))
    saved = tmp_path / "saved"
    shutil.copytree(run_dir, saved)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(saved)))
    assert run_to_end(env, timeout=30) == EXIT_OK
    keys = [ItemKey.from_record(r) for r in read_records(saved / "records.csv").to_dict("records")]
    assert len(keys) == len(set(keys)) == 120


def test_resume_cuts_a_torn_tail_and_scoring_refuses_a_glued_row(tmp_path):
    path = tmp_path / "records.csv"
    writer = RecordWriter(path)
    writer.write({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "1", "repeat": 1, "status": "success"})
    writer.close()
    torn = encode_row({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "2", "repeat": 1})
    with open(path, "ab") as fh:
        fh.write(torn[: len(torn) // 2])
    writer = RecordWriter(path)  # a resumed run opens the file: the fragment is cut first
    writer.write({"run_id": "r", "model": "m", "vendor": "v", "sample_id": "3", "repeat": 1, "status": "success"})
    writer.close()
    assert [r[4] for r in read_rows(path)[1]] == ["1", "3"]
    with open(path, "ab") as fh:  # before the fix, an append onto a fragment glued two rows into one line
        fh.write(torn[: len(torn) // 2] + encode_row({"run_id": "r", "model": "m", "vendor": "v",
                                                      "sample_id": "4", "repeat": 1}))
    with pytest.raises(InputError, match=r"records.csv:4: \d+ cells where the header has \d+"):
        read_rows(path)



def _records_file(path: Path, rows: list[dict]) -> Path:
    writer = RecordWriter(path)
    for row in rows:
        writer.write(row)
    writer.close()
    return path


def test_the_typed_reader_names_a_short_row_and_reads_whole_rows_with_an_empty_last_cell(tmp_path):
    base = {"run_id": "r", "model": "m", "vendor": "v", "repeat": 1, "status": "success",
            "content": 'a "quoted", multi-line\nanswer'}
    whole = [{**base, "sample_id": str(i), "stale_conn_retries": 0 if i % 2 else None, "http_status": 200}
             for i in range(1, 5)]  # every other last cell empty: the cells are counted, all whole
    path = _records_file(tmp_path / "records.csv", whole)
    frame = read_records(path)
    assert frame["sample_id"].tolist() == ["1", "2", "3", "4"]
    assert frame["stale_conn_retries"].isna().tolist() == [False, True, False, True]
    assert frame["http_status"].tolist() == [200] * 4 and str(frame["http_status"].dtype) == "Int64"
    assert frame["content"].tolist() == [base["content"]] * 4
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    short = encode_row({**base, "content": "", "sample_id": "5"}).decode().rstrip("\n").rsplit(",", 2)[0] + "\n"
    path.write_text("".join(lines[:3]) + short + "".join(lines[3:]), encoding="utf-8")
    with pytest.raises(InputError, match=r"records.csv:4: \d+ cells where the header has \d+"):
        read_records(path)


def test_a_cell_that_is_not_a_number_leaves_its_row_out_by_name(tmp_path):
    # issue 11 read such a cell as missing; issue 22's rule: a row with a cell no record can hold is left out
    # and named (file, line, item, cell), and the other rows are read
    path = _records_file(tmp_path / "records.csv", [
        {"run_id": "r", "model": "m", "vendor": "v", "sample_id": str(i), "repeat": 1, "http_status": 200,
         "is_baseline": i == 1, "stale_conn_retries": 0} for i in (1, 2)])
    text = path.read_text(encoding="utf-8").replace(",200,", ",abc,", 1)
    path.write_text(text, encoding="utf-8")
    frame, excluded = read_records_checked(path)
    assert frame["sample_id"].tolist() == ["2"] and frame["is_baseline"].tolist() == [False]
    assert excluded == [f"{path}:2: row left out (model m, vendor v, sample_id 1, repeat 1): "
                        "http_status 'abc' is not a number"]

# 7, 9, 10, 12 ---------------------------------------------------- local mistakes are input errors


@pytest.mark.parametrize("vendor_patch, needle", [
    ({"headers": {"X-Trace": "a\r\nInjected: 1"}}, "headers.X-Trace: holds a line break"),
    ({"url": "http://127.0.0.1:99999/v1"}, "url: not a valid URL"),
    ({"timeout_s": float("nan")}, "timeout_s: must be a finite number > 0"),
    ({"concurrency": 0}, "concurrency: must be ≥ 1"),
])
def test_config_mistakes_are_input_errors_naming_the_field(vendor_patch, needle):
    vendor = {"name": "v", "url": "http://127.0.0.1:8000/v1", "is_baseline": True, **vendor_patch}
    with pytest.raises(InputError, match="c.yaml: m.vendors\\[0\\] \\(v\\)." + needle.replace(".", "\\.")):
        parse_config(vendors_config([vendor]), "c.yaml", {})


def test_duplicate_yaml_keys_are_an_error(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("m:\n  vendors:\n    - {name: a, url: 'http://127.0.0.1:1/v1', is_baseline: true}\n"
                    "m:\n  vendors:\n    - {name: b, url: 'http://127.0.0.1:1/v1', is_baseline: true}\n")
    with pytest.raises(InputError, match=r"dup.yaml: line 4: key 'm' appears twice in one mapping \(first on line 1\)"):
        load_config(path, env={})


MSG = [{"role": "user", "content": "x"}]


@pytest.mark.parametrize("line, needle", [
    ({"data_index": "a\nb", "messages": MSG}, "field 'data_index' must be a non-empty"),
    ({"data_index": 1.0, "messages": MSG}, "field 'data_index' must be an integer or a"),
    ({"data_index": True, "messages": MSG}, "field 'data_index' must be an integer or a"),
    ({"n": 2, "messages": MSG}, "field 'n' is 2: only one choice"),
])
def test_sample_mistakes_are_input_errors_naming_the_line(tmp_path, line, needle):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "ok"}]}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError, match=r"s\.jsonl:2: " + needle.replace("(", r"\(").replace(")", r"\)")):
        load_samples(path)


def test_data_index_1_and_string_1_are_the_same_id(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"data_index": 1, "messages": [{"role": "user", "content": "a"}]}) + "\n"
                    + json.dumps({"data_index": "1", "messages": [{"role": "user", "content": "b"}]}) + "\n")
    with pytest.raises(InputError, match="duplicate sample id '1'"):
        load_samples(path)


@pytest.mark.parametrize("args, needle", [
    (["--avv-max-total-tokens", "-1"], "--avv-max-total-tokens: must be ≥ 0"),
    (["--avv-repeats", "0"], "--avv-repeats: must be ≥ 1"),
    (["--avv-retries", "-1"], "--avv-retries: must be ≥ 0"),
    (["--avv-max-request-s", "nan"], "--avv-max-request-s: must be a finite number"),
    (["--avv-mode", "stress", "--avv-slo-error-rate", "2"], "--avv-slo-error-rate: must be ≤ 1"),
])
def test_options_are_range_checked(args, needle):
    with pytest.raises(InputError, match=needle):
        RunOptions.from_parsed(preparse_options(args))


# 8 ---------------------------------------------------------------------- query strings in the url


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_query_string_in_the_url_stays_after_the_path(tmp_path):
    assert endpoint_url("https://x.openai.azure.com/openai/v1?api-version=2024-06-01") == \
        "https://x.openai.azure.com/openai/v1/chat/completions?api-version=2024-06-01"
    adapter = ScriptedAdapter(lambda r: stream_reply())
    url = "http://vendor.test/{name}/v1?api-version=2024-06-01"
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1, url=url)
    env, ctl = make_env(options(tmp_path, config, samples), adapter=adapter)
    assert run_to_end(env) == EXIT_OK
    assert adapter.requests[0].url == "http://vendor.test/a/v1/chat/completions?api-version=2024-06-01"


# 11 ----------------------------------------------------------------------- avv-score on bad records


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
@pytest.mark.parametrize("column", ["finish_reason", "tool_calls", "ttft_ms", "total_tokens"])
def test_avv_score_names_a_missing_column_with_exit_2(tmp_path, capsys, column):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=2)
    env, ctl = make_env(options(tmp_path, config, samples))
    assert run_to_end(env) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv").drop(columns=[column])
    frame.to_csv(ctl.run_dir / "records.csv", index=False)
    assert avv_score([str(ctl.run_dir)]) == 2
    assert f"missing column(s) {column}" in capsys.readouterr().err


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_avv_score_strict_with_no_records_is_not_a_pass(tmp_path, capsys):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-max-total-tokens", "1"),
                        adapter=ScriptedAdapter(lambda r: gevent.sleep(0.2) or stream_reply()))
    assert run_to_end(env) == EXIT_INCOMPLETE
    records = ctl.run_dir / "records.csv"
    records.write_text(records.read_text().splitlines()[0] + "\n")  # the header only
    assert avv_score([str(ctl.run_dir), "--strict"]) == 7  # no vendor passed (before: 1)
    assert "no records" in capsys.readouterr().err


def test_run_folder_that_cannot_be_written_is_an_input_error(tmp_path):
    if os.geteuid() == 0:
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("a file where the output folder should be")
        out = blocker
    else:  # pragma: no cover - root ignores permissions
        out = tmp_path / "ro"
        out.mkdir(mode=0o500)
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    with pytest.raises(InputError, match="cannot write the run folder"):
        make_env(options(tmp_path, config, samples, "--avv-out", str(out)))
    assert Path(out).exists() and not yaml.safe_load("{}")


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_resuming_a_run_made_with_fewer_columns_upgrades_its_records_first(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=3)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-run-id", "old", "-t", "1s"),
                        adapter=ScriptedAdapter(lambda r: gevent.sleep(0.4) or stream_reply()))
    run_to_end(env)
    path = ctl.run_dir / "records.csv"
    frame = read_records(path).drop(columns=["client_lag_ms", "stale_conn_retries"])  # as an older version wrote
    frame.to_csv(path, index=False)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(ctl.run_dir)))
    assert run_to_end(env) == EXIT_OK
    header, rows = read_rows(path)
    assert len(rows) == 3 and all(len(r) == len(header) for r in rows)
