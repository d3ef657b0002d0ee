"""Issue 22, "records survive any text": no answer, number or name can make a run unscoreable. Each test says
what happened before. In-process (fake vendor, in-process Locust) except where a CLI's exit status is the point.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avv_core.record_file import RecordWriter, read_records, read_records_checked, read_rows, upgrade_columns
from avv_core.records import COLUMN_NAMES, MAX_TOKENS, Record, encode_cells, header_line, usage_counts
from avv_core.samples import load_samples
from avv_harness.run.controller import EXIT_INCOMPLETE, EXIT_OK, EXIT_SCORING
from avv_harness.run.resume import done_items
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.execute import attempt_record
from avv_scoring import score_paths
from avv_scoring.cli import main as avv_score
from avv_scoring.live_scores import LiveRecords
from avv_scoring.testing import call, record
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, item_of, stream_reply
from tests.glue import make_env, options, run_to_end

CR_TEXT = "line one\rline two\r\nthird\n\"quoted\", comma\x07bell\x00nul\x1b[31mred"


def _write(path: Path, rows: list[dict]) -> Path:
    writer = RecordWriter(path)
    writer.write_many([Record(r) for r in rows])
    writer.close()
    return path


def _hostile_text_rows() -> list[dict]:
    return [
        record(vendor="ref\rbase", is_baseline=True, sample_id="1", content=CR_TEXT, reasoning="think\rhard",
               finish_reason="stop\r", total_tokens=10),
        record(vendor="v", sample_id="1", status="failed", error_kind="http_5xx", error_detail="HTTP 500: busy\r",
               repeat=1),
        record(vendor="v", sample_id="2", finish_reason="tool_calls",
               tool_calls=[call("get_weather", {"city": "Par\ris"})], content="\r", total_tokens=12),
    ]


# 1 ------------------------------------------------------------------ a bare carriage return in any text


def test_every_control_character_round_trips_through_the_writer_and_both_readers(tmp_path):
    # before: the csv writer quoted only "\n" (its line terminator), so "\r" went out unquoted; pandas ended the
    # row at it (silently wrong cells) and Python's csv reader refused the file: nothing could be scored
    rows = _hostile_text_rows()
    path = _write(tmp_path / "records.csv", rows)
    frame = read_records(path)
    assert frame["vendor"].tolist() == ["ref\rbase", "v", "v"]
    assert frame.loc[0, "content"] == CR_TEXT and frame.loc[0, "reasoning"] == "think\rhard"
    assert frame.loc[0, "finish_reason"] == "stop\r" and frame.loc[1, "error_detail"] == "HTTP 500: busy\r"
    assert json.loads(frame.loc[2, "tool_calls"])[0]["arguments"] == '{"city": "Par\\ris"}'
    assert frame.loc[2, "content"] == "\r"
    header, cells = read_rows(path)
    assert header == list(COLUMN_NAMES) and cells[0][COLUMN_NAMES.index("content")] == CR_TEXT
    # every cell with a control character is quoted: a spreadsheet or another reader sees the same rows
    assert b'"line one\rline two' in path.read_bytes()


def test_the_writers_per_column_encoders_write_exactly_the_line_the_column_formats_make():
    """encode_rows (per-column encoders: it runs for every stored record) against the reference it replaces,
    encode_cells(to_csv_row(record)), on values of every kind, the awkward ones included."""
    import random

    from avv_core.records import COLUMNS, RecordError, encode_rows, to_csv_row

    texts = ["", "plain", 'a "quoted" word', "a,b", "line\nbreak", "cr\ronly", "tab\there", "\x7f", "é ü ✓",
             "\ud800 lone", "x" * 300, "0", "true"]
    by_kind = {
        "str": texts + [7, 2.5],  # whatever a caller puts in a text column is written as its str()
        "json": texts + [[], [{"name": "f", "arguments": '{"a": "b,\\"c\\""}'}], {"k": ["v", 1, None]}],
        "int": [0, 1, 17, -3, 3.0, True, 10**20],
        "float": [0.0, 1.5, -2.25, 1e-9, 123456.7894, float("nan"), float("inf"), 3, True],
        "bool": [True, False, 0, 1],
    }
    rng = random.Random(7)
    for _ in range(300):
        record = {c.name: rng.choice([None, *by_kind[c.kind]]) for c in COLUMNS if rng.random() < 0.9}
        assert encode_rows([record]) == encode_cells(to_csv_row(record)).encode("utf-8"), record
    with pytest.raises(RecordError, match="unknown record column"):
        encode_rows([{"run_id": "r", "no_such_column": 1}])


def test_a_lone_surrogate_from_a_json_escape_is_written_as_a_replacement_character(tmp_path):
    # a vendor may stream "\ud800" (valid JSON, not encodable as UTF-8): the row must still be written
    path = _write(tmp_path / "records.csv", [record(content="bad \ud800 half")])
    assert read_records(path).loc[0, "content"] == "bad ? half"


def test_a_file_written_before_the_fix_with_a_bare_cr_is_read_resumed_and_scored(tmp_path, monkeypatch):
    # before: "new-line character seen in unquoted field" from every reader; --avv-resume crashed in the
    # column upgrade
    old_row = ["r", "m", "v", "true", "1", "1"] + [""] * (len(COLUMN_NAMES) - 6)
    old_row[COLUMN_NAMES.index("status")] = "success"
    old_row[COLUMN_NAMES.index("finish_reason")] = "stop"
    old_row[COLUMN_NAMES.index("content")] = "windows\rline"
    old_row[COLUMN_NAMES.index("tool_calls")] = "[]"
    path = tmp_path / "records.csv"
    path.write_bytes(header_line() + (",".join(old_row) + "\n").encode())  # the old writer's bytes
    assert read_records(path).loc[0, "content"] == "windows\rline"
    assert read_rows(path)[1][0][COLUMN_NAMES.index("content")] == "windows\rline"
    # an older column set is upgraded for a resume: the rows keep their text and are quoted now
    short_header = [c for c in COLUMN_NAMES if c != "stale_conn_retries"]
    path.write_bytes((",".join(short_header) + "\n" + ",".join(old_row[:-1]) + "\n").encode())
    assert upgrade_columns(path)
    assert read_records(path).loc[0, "content"] == "windows\rline"
    assert b'"windows\rline"' in path.read_bytes()


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_cr_in_answers_survives_a_run_resume_avv_score_and_the_live_board(tmp_path, capsys):
    # the round trip of the issue: records.csv through the writer, the reader, resume and avv-score
    answers = {"s1": "ok\r\nfine", "s2": "bare\rcr", "s3": "plain"}
    adapter = ScriptedAdapter(lambda request: stream_reply(answers[item_of(request).sample_id]))
    config, samples = write_inputs(tmp_path, ["ref", "alt"], n_samples=3)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-run-id", "cr"), adapter=adapter)
    live = LiveRecords()  # fed as the web UI's live board is: from the stored records, not from the file
    ctl.record_hook.add_listener(lambda records, **_: live.add(records))
    assert run_to_end(env) == EXIT_OK
    run_dir = ctl.run_dir
    frame = read_records(run_dir / "records.csv")
    assert sorted(set(frame["content"])) == sorted(answers.values())
    assert live.frame()["content"].tolist() == frame["content"].tolist()
    # resume sees every item done (no crash, nothing rerun)
    assert len(done_items(run_dir, load_samples(str(samples)))) == 6
    # avv-score scores it: exit 0, report.md and scores.json written
    capsys.readouterr()
    assert avv_score([str(run_dir), "--no-html", "-q"]) == 0
    assert json.loads((run_dir / "scores.json").read_text())["models"][0]["vendors"]


# 2 ------------------------------------------------------------------------- numbers from the vendor


@pytest.mark.parametrize("usage, problem", [
    ({"prompt_tokens": 10, "completion_tokens": 10**30, "total_tokens": 10**30}, "completion_tokens"),
    ({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 1e308}, "total_tokens"),
    ({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 10**400}, "out of range"),
    ({"prompt_tokens": -1000, "completion_tokens": -500, "total_tokens": -1500}, "below 0"),
    ({"prompt_tokens": 10, "completion_tokens": 2.5}, "not a whole number"),
    ({"prompt_tokens": "10", "completion_tokens": 3}, "str, not a number"),
    ({"prompt_tokens": True, "completion_tokens": 3}, "bool, not a number"),
    ({"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 5}, "below prompt_tokens + completion_tokens"),
    ({"prompt_tokens": MAX_TOKENS + 1, "completion_tokens": 1}, "above"),
])
def test_usage_a_record_cannot_hold_is_missing_and_flagged_never_a_value(usage, problem):
    # before: 10^30 made the whole run unscoreable, 1e308 likewise, and -1500 gave Avg Token -1500 and PASS
    counts, why = usage_counts(usage)
    assert counts == {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}
    assert problem in why
    att = Attempt(t0=0.0, t_headers=0.01, t_first_token=0.02, t_last_token=0.05, t_end=0.06, http_status=200,
                  finish_reason="stop", usage=usage, chunks=3, saw_done=True, content=["hi"], token_events=2,
                  first_token_read=1, last_token_read=2)
    row = Record(attempt_record(att, include_usage=True))
    assert row["status"] == "success" and "usage_invalid" in row["anomalies"]
    assert row["total_tokens"] is None and row["tps"] is None and problem in row["error_detail"]


def test_believable_usage_is_kept_and_a_whole_float_is_a_count():
    assert usage_counts({"prompt_tokens": 10, "completion_tokens": 3.0}) == (
        {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}, None)
    assert usage_counts({"completion_tokens": 7}) == (
        {"prompt_tokens": None, "completion_tokens": 7, "total_tokens": None}, None)


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_negative_usage_neither_lowers_avg_tokens_nor_lets_the_run_spend_past_its_budget(tmp_path):
    # before: -1500 per answer gave Avg Token -1500 (lower is better: ranked first) and PASS, and with
    # --avv-max-total-tokens the negative counts kept the budget from ever being reached
    def answer(request):
        liar = "liar" in request.url
        usage = ({"prompt_tokens": -1000, "completion_tokens": -500, "total_tokens": -1500} if liar
                 else {"prompt_tokens": 60, "completion_tokens": 40, "total_tokens": 100})
        return stream_reply("hello there", usage=usage)

    config, samples = write_inputs(tmp_path, ["ref", "liar"], n_samples=20)
    # --avv-max-tokens 10: small reservations, so both vendors have items in flight before the cap
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-max-total-tokens", "500", "--avv-max-tokens", "10"),
                        adapter=ScriptedAdapter(answer))
    assert run_to_end(env) == EXIT_INCOMPLETE  # the budget stopped it (before: it ran all 40 items)
    # a success whose usage is not believed is charged its reservation (its worst case): the budget is reached
    assert ctl.manifest.budget["exhausted"] and ctl.manifest.budget["charged"]["tokens"] >= 500
    frame = read_records(ctl.run_dir / "records.csv")
    liar = frame[frame["vendor"] == "liar"]
    assert len(frame) < 40 and liar["total_tokens"].isna().all()
    assert liar["anomalies"].str.contains("usage_invalid").all()
    result = score_paths([ctl.run_dir], write=False)
    scores = result.scores.set_index("vendor")
    assert scores.loc["ref", "avg_tokens"] == 100 and pd_isna(scores.loc["liar", "avg_tokens"])


def pd_isna(value) -> bool:
    return value is None or value != value


# 3 --------------------------------------------------------- one bad cell never stops the scoring of a run


def _scored_run(tmp_path: Path) -> Path:
    config, samples = write_inputs(tmp_path, ["ref", "alt"], n_samples=3)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-run-id", "cells"))
    assert run_to_end(env) == EXIT_OK
    return ctl.run_dir


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
@pytest.mark.parametrize("column, text, why", [
    ("ttft_ms", "1e309", "is not a finite number"),
    ("total_tokens", "1e309", "is not a finite number"),
    ("total_tokens", "1" + "0" * 30, "is above 1e+08"),
    ("total_tokens", "-1500", "is below 0"),
    ("latency_ms", "-5.0", "is below 0"),
    ("attempts", "2.5", "is not a whole number"),
    ("chunks", "many", "is not a number"),
])
def test_a_cell_no_record_can_hold_leaves_its_row_out_named_and_the_rest_is_scored(tmp_path, capsys, column, text,
                                                                                    why):
    # before: total_tokens 10^30 / 1e308 → "scoring failed (cannot safely cast non-equivalent float64 to int64)"
    # for every vendor; ttft_ms=1e309 left a truncated, invalid scores.json; total_tokens=1e309 an
    # OverflowError traceback
    run_dir = _scored_run(tmp_path)
    path = run_dir / "records.csv"
    header, rows = read_rows(path)
    rows[1][header.index(column)] = text
    item = {k: rows[1][header.index(k)] for k in ("model", "vendor", "sample_id", "repeat")}
    path.write_text("".join(encode_cells(r) for r in [header, *rows]), encoding="utf-8")
    capsys.readouterr()
    assert avv_score([str(run_dir), "--no-html", "-q"]) == 4  # scored, without that row
    err = capsys.readouterr().err
    assert f"records.csv:3: row left out (model {item['model']}, vendor {item['vendor']}, sample_id " \
           f"{item['sample_id']}, repeat {item['repeat']}): {column} '{text}' {why}" in err
    data = json.loads((run_dir / "scores.json").read_text())  # whole, valid JSON
    assert {v["vendor"] for v in data["models"][0]["vendors"]} == {"ref", "alt"}
    assert any("row(s) left out" in w for w in data["warnings"])
    assert "row left out" in (run_dir / "report.md").read_text()
    frame, excluded = read_records_checked(path)
    assert len(frame) == len(rows) - 1 and len(excluded) == 1


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_run_whose_scoring_fails_says_so_in_its_exit_status_and_closing_line(tmp_path, capsys, monkeypatch):
    # before: "scoring failed (...)" in the log, then "run complete" and exit 0: no scores, no reports
    import avv_scoring

    def broken(*args, **kwargs):
        raise ValueError("cannot safely cast non-equivalent float64 to int64")

    monkeypatch.setattr(avv_scoring, "score", broken)
    config, samples = write_inputs(tmp_path, ["ref", "alt"], n_samples=2)
    args = [a for a in options(tmp_path, config, samples) if a != "--avv-no-score"] + ["--avv-no-html"]
    env, ctl = make_env(args)
    assert run_to_end(env) == EXIT_SCORING
    out = capsys.readouterr().out
    assert "run complete, but scoring failed (ValueError: cannot safely cast" in out
    assert f"score it with avv-score {ctl.run_dir}" in out


# 4 ------------------------------------------------------------------------------ text in the figures


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_tool_name_with_dollar_signs_does_not_break_report_html(tmp_path):
    # before: matplotlib read "$\undefinedcmd$" as TeX math and raised: no report.html, no tables, exit 0
    name = "get$\\undefinedcmd$"
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]
    lines = [{"data_index": f"s{i}", "messages": [{"role": "user", "content": "q"}], "tools": tools}
             for i in (1, 2)]
    adapter = ScriptedAdapter(lambda request: stream_reply(tool_calls=[(name, {})]))
    config, samples = write_inputs(tmp_path, {"r$ef$": {}, "a$\\alpha$lt": {}}, sample_lines=lines)
    env, ctl = make_env(options(tmp_path, config, samples), adapter=adapter)
    assert run_to_end(env) == EXIT_OK
    result = score_paths([ctl.run_dir], out_dir=ctl.run_dir, html=True)
    page = (ctl.run_dir / "report.html").read_text()
    assert "report.html" in result.outputs and "get$\\undefinedcmd$" in page and "data:image/png" in page


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_the_web_ui_does_not_call_scores_final_when_the_runs_own_scoring_failed(tmp_path, monkeypatch):
    # before: records.csv could not be read back, report.html was 404, yet the Vendors tab said "final scores"
    # (scored from memory)
    import sys

    import avv_scoring
    from tests.test_web_ui import start_ui, ui_args, wait_until

    monkeypatch.setattr(sys, "argv", ["locust"])
    monkeypatch.setattr(avv_scoring, "score", lambda *a, **k: (_ for _ in ()).throw(ValueError("broken")))
    config, samples = write_inputs(tmp_path, ["ref", "alt"], n_samples=2)
    env, ctl = make_env(ui_args(tmp_path, config, samples, "--avv-no-html"))
    client = start_ui(env, ctl)
    try:
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        wait_until(lambda: ctl.run is not None and ctl.run.finished)
        note = wait_until(lambda: (n := client.get("/avv/live.json").get_json()["note"]) != "final scores"
                          and "scoring failed" in n and n)
        assert note.startswith("scores of the records in memory: the run's scoring failed (ValueError: broken)")
        assert ctl.run.exit_code == EXIT_SCORING
    finally:
        env.runner.quit()
