"""report.html: one self-contained page (no external reference), every vendor named, a figure in every
section, verdict colours and thresholds, the counts the records hold, the optional per-tool and stress
sections; and the live scorer (avv_scoring.live_scores) that the web UI uses equals avv-score on the same rows."""

from __future__ import annotations

import base64
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from avv_core.record_file import read_rows
from avv_core.records import COLUMN_NAMES
from avv_scoring import score_paths, stress_only
from avv_scoring.live_scores import LiveRecords, score_live
from avv_scoring.load import load_tools, resolve_inputs
from avv_scoring.report.html import render_html
from avv_scoring.report.section import html_sections
from avv_scoring.testing import record
from tests.builders import write_jsonl, write_run
from tests.test_scoring_paths import SAMPLE_LINES, _tc, baseline_rows, vendor_rows
from tests.test_scoring_stress import write_stress_run

#: A reference the browser would follow out of the file: any src/href/action that is not data: or #anchor,
#: CSS imports and url(), or an http(s) address anywhere.
EXTERNAL = re.compile(r"""(?:src|href|action)\s*=\s*(?!["']?(?:data:|#))|@import|url\(|https?:""", re.I)


def sections(page: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r'<section id="([^"]+)">(.*?)</section>', page, re.S)}


def png_count(block: str) -> int:
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', block)
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for data in images)
    return len(images)


def rows_with_trouble(vendor: str = "<b>noisy</b>") -> list[dict]:
    """A third vendor: one 429, one truncated, anomalies on two answers, two repeats."""
    rows = []
    for repeat in (1, 2):
        rows += [
            {"vendor": vendor, "sample_id": "1", "repeat": repeat, **_tc("Paris"), "ttft_ms": 200 + repeat,
             "tps": 60, "total_tokens": 950, "anomalies": "no_done;usage_missing" if repeat == 1 else ""},
            {"vendor": vendor, "sample_id": "2", "repeat": repeat, **_tc("Rome"), "ttft_ms": 220, "tps": 61,
             "total_tokens": 950, "anomalies": "no_done"},
            {"vendor": vendor, "sample_id": "3", "repeat": repeat, "status": "failed",
             "error_kind": "http_429" if repeat == 1 else "truncated", "attempts": 4},
            {"vendor": vendor, "sample_id": "4", "repeat": repeat, "ttft_ms": 240, "tps": 59, "total_tokens": 900},
        ]
    return rows


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One run scored once with its report.html (the tests only read it: scoring and figures take seconds)."""
    work = tmp_path_factory.mktemp("report_html")
    samples = write_jsonl(work / "samples.jsonl", SAMPLE_LINES)
    rows = [dict(r, repeat=rep) for rep in (1, 2) for r in baseline_rows() + vendor_rows()] + rows_with_trouble()
    run = write_run(work / "run", rows, samples)
    return run, score_paths([run])


def written_sections(run) -> dict[str, str]:
    """The sections of the report.html the scoring wrote (the same as render_html(result) gives; only the header
    with its time differs)."""
    return sections((run / "report.html").read_text(encoding="utf-8"))


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_report_html_is_self_contained_and_names_every_vendor_with_a_figure_per_section(scored):
    run, result = scored
    assert result.outputs["report.html"] == str(run / "report.html")
    page = (run / "report.html").read_text(encoding="utf-8")
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "<script" not in page and "<link" not in page
    for vendor in ("official", "cheap", "&lt;b&gt;noisy&lt;/b&gt;"):
        assert vendor in page
    assert "<b>noisy</b>" not in page  # names are escaped
    found = sections(page)
    # every declared HTML section that applies (no agent task, not a stress run, no --avv-settle, no prices, no
    # conformance run, no vendor stopped; the IRF with statistical ties, the default, differs from the published one
    # here), in the declared order; these six each with a figure (a section declared later may have none)
    not_applying = ("agent", "stress", "settle", "cost", "conformance", "vendor_down")
    assert list(found) == [s.key for s in html_sections() if s.html is not None and s.key not in not_applying]
    figured = ["scores", "uncertainty", "latency", "errors", "repeats", "tools"]  # tools: calls
    assert [key for key in found if key in figured] == figured
    for key in figured:
        assert png_count(found[key]) >= 1, key
    # verdict colours, thresholds under the headers, broken cells marked
    verdicts = {v: r["verdict"] for v, r in result.scores.set_index("vendor").iterrows()}
    for said, css in (("PASS", "pass"), ("FAIL", "fail"), ("INCONCLUSIVE", "open")):
        assert found["scores"].count(f'class="l {css}"') == list(verdicts.values()).count(said)
    assert "FAIL" in verdicts.values()
    assert "≥ 0.99" in found["scores"] and "≥ 0.98" in found["scores"]
    noisy = result.scores.set_index("vendor").loc["<b>noisy</b>"]
    state = next(b.state for b in result.decision("m", "<b>noisy</b>").bounds if b.column == "success_rate")
    marked = {"FAIL": "class=bad", "INCONCLUSIVE": "class=undecided"}[state]  # its bound's state, as decided
    assert noisy["success_rate"] == 0.75 and f"{marked}>0.7500<" in found["scores"]
    assert found["decision"].count("<tr>") == len(verdicts) + 1  # the decision opens the page: a line per vendor


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_errors_and_anomalies_are_counted_from_the_records(scored):
    run, result = scored
    block = written_sections(run)["errors"]
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", block).group(1)
    columns = re.findall(r"<th[^>]*>(.*?)</th>", header)
    assert columns == ["Vendor", "Items", "error: http_429", "error: http_5xx", "error: truncated",
                       "anomaly: no_done", "anomaly: usage_missing"]  # error kinds in the README's order
    rows = re.findall(r"<tr>(.*?)</tr>", block.split("<tbody>")[1])
    body = {cells[0]: cells[1:] for cells in (re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows)}
    assert body["&lt;b&gt;noisy&lt;/b&gt;"] == ["8", "1", "0", "1", "3", "1"]
    assert body["cheap"] == ["8", "0", "2", "0", "0", "0"]  # sample 4 failed with http_5xx in both repeats


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_repeat_spread_shows_each_repeat(scored):
    run, result = scored
    block = written_sections(run)["repeats"]
    assert "One point per repeat" in block
    noisy = result.scores.set_index("vendor").loc["<b>noisy</b>"]
    assert noisy["n_repeats"] == 2 and f"{noisy['avg_ttft_ms_mean']:.4g} ±" in block


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_stress_section_and_stress_only(tmp_path):
    samples = write_jsonl(tmp_path / "samples.jsonl", SAMPLE_LINES)
    run = write_stress_run(tmp_path / "run", samples=samples)
    page = (run / "report.html").read_text(encoding="utf-8") if score_paths([run]) else ""
    found = sections(page)
    assert "stress" in found and png_count(found["stress"]) == 1
    assert "fast" in found["stress"] and "limited" in found["stress"] and "TTFT p95" in found["stress"]
    only = stress_only(tmp_path / "run")
    assert "report.html" in only.outputs
    found = sections((run / "report.html").read_text(encoding="utf-8"))
    assert list(found) == ["stress"] and png_count(found["stress"]) == 1


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_tools_section_appears_only_when_the_result_has_a_per_tool_table(scored):
    _, result = scored
    result = replace(result, per_tool=pd.DataFrame(), disagreements=pd.DataFrame())  # ScoreResult is frozen
    assert "tools" not in sections(render_html(result))
    result = replace(result, per_tool=pd.DataFrame([
        {"model": "m", "vendor": "official", "tool": "get_weather", "calls": 4, "tool_match": 1.0},
        {"model": "m", "vendor": "cheap", "tool": "get_weather", "calls": 4, "tool_match": 0.5},
    ]), disagreements=pd.DataFrame([{"model": "m", "vendor": "cheap", "sample_id": str(i), "repeat": 1,
                                     "kind": "other_arguments", "vendor_calls": "<call>"} for i in range(30)]))
    block = sections(render_html(result))["tools"]
    assert png_count(block) == 1 and "get_weather" in block and "first disagreements (20 of 30" in block
    assert block.count("other_arguments") == 20 and "&lt;call&gt;" in block


def test_ttft_p95_is_registered_and_computed():
    rows = pd.DataFrame([record(vendor="v", sample_id=str(i), ttft_ms=float(t)) for i, t in enumerate(range(1, 21))])
    from avv_core.record_file import coerce_frame
    from avv_scoring.metrics.headline import ttft_stats

    out = ttft_stats(coerce_frame(rows.astype("object").where(rows.notna(), None)))
    assert out["ttft_p95_ms"] == pytest.approx(np.percentile(np.arange(1, 21), 95))


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_live_records_score_like_the_file(scored, tmp_path):
    run, result = scored
    header, cells = read_rows(run / "records.csv")
    assert tuple(header) == COLUMN_NAMES
    live = LiveRecords()
    for start in range(0, len(cells), 5):  # in chunks, as records arrive
        live.add_rows(cells[start:start + 5])
        live.frame()
    tools = load_tools(resolve_inputs([run])).tools_by_sample
    got = score_live(live.frame(), tools, str(run / "records.csv"))
    pd.testing.assert_frame_equal(got.scores, result.scores)
    pd.testing.assert_frame_equal(got.by_repeat, result.by_repeat)


def test_live_records_add_typed_records_as_the_writer_writes_them(tmp_path):
    live = LiveRecords()
    live.add([record(vendor="v", sample_id="1", ttft_ms=123.456789)])
    frame = live.frame()
    assert frame.loc[0, "ttft_ms"] == 123.457  # rounded as records.csv holds it
    with pytest.raises(ValueError, match="cells"):
        live.add_rows([["too", "short"]])
    assert isinstance(Path(tmp_path), Path)
