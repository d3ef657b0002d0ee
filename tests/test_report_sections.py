"""The report's sections and formats (avv_scoring.report): each section declared once, found by the registry,
rendered in every output in its place and under its declared title; one number format per metric in every output
(the registry's); the stress tables declared once for the report and the web UI's Stress levels tab."""

from __future__ import annotations

import re

import pytest

from avv_harness.locust.web_ui import level_rows, level_structure
from avv_scoring import render_markdown, render_tables
from avv_scoring.metrics.registry import metric
from avv_scoring.report.format import Column, fmt, html_table, metric_cell, terminal_table
from avv_scoring.report.html import render_html
from avv_scoring.report.section import (
    ModelSection,
    Section,
    find_sections,
    html_sections,
    sections,
    terminal_sections,
)
from avv_scoring.report.sections import stress as stress_section
from avv_scoring.report.sections.stress import LEVEL_TABLE
from avv_scoring.score import score_frame
from avv_scoring.stress import StressSettings, stress_result
from avv_scoring.testing import record, records_frame


def result_of_two_vendors():
    rows = [record(vendor="base", is_baseline=True, sample_id=str(i), ttft_ms=100.0 + i) for i in range(4)]
    rows += [record(vendor="<b>v</b>", sample_id=str(i), ttft_ms=120.0 + i) for i in range(3)]
    rows += [record(vendor="<b>v</b>", sample_id="3", status="failed", error_kind="http_429")]
    return score_frame(records_frame(rows), {str(i): [] for i in range(4)})


def test_every_section_is_declared_once_in_its_module_and_found_in_order():
    found = sections()
    assert len({s.key for s in found}) == len(found) and all(s.title for s in found)
    assert [s.order for s in found] == sorted(s.order for s in found)
    keys = [s.key for s in found]
    assert keys[:4] == ["decision", "scores", "conformance", "uncertainty"]
    assert keys[-5:] == ["warnings", "vendor_down", "settle", "client_load", "stress"]
    assert keys.index("agent") < keys.index("tools")  # report.md: the agent table before the per-tool table
    html_keys = [s.key for s in html_sections()]
    assert html_keys.index("tools") < html_keys.index("agent")  # report.html: as it was published
    assert all(isinstance(s, ModelSection) for s in found if 1 < s.order < 900)
    assert isinstance(found[0], Section) and found[0].leads  # the decision opens report.md, ends the terminal
    assert [s.key for s in terminal_sections()][-1] == "decision"
    assert all(isinstance(s, Section) for s in found if s.order >= 900)


def fake_package(root, name, modules):
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)


def test_the_registry_rejects_a_module_without_a_section_and_a_key_declared_twice(tmp_path, monkeypatch):
    declare = ("from avv_scoring.report.section import Section\n"
               "SECTION = Section('same', {!r}, 1, lambda result: None)\n")
    fake_package(tmp_path, "twice_sections", {"a": declare.format("A"), "b": declare.format("B")})
    fake_package(tmp_path, "missing_sections", {"a": declare.format("A"), "b": "NOTHING = 1\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="'same' is declared twice"):
        find_sections("twice_sections")
    with pytest.raises(TypeError, match="missing_sections.b: declares no SECTION"):
        find_sections("missing_sections")


@pytest.mark.integration  # draws report.html's figures: seconds
def test_report_html_titles_and_links_come_from_the_declarations():
    result = result_of_two_vendors()
    page = render_html(result)
    shown = re.findall(r'<section id="([^"]+)"><h2>(.*?)</h2>', page)
    links = re.findall(r'<a href="#([^"]+)">(.*?)</a>', page.split("<nav>", 1)[1].split("</nav>", 1)[0])
    declared = {s.key: s.title for s in sections()}
    assert shown == links and shown and all(declared[key] == title for key, title in shown)
    assert [key for key, _ in shown] == [s.key for s in html_sections() if s.key in dict(shown)]


def test_every_output_renders_its_sections_and_escapes_names():
    result = result_of_two_vendors()
    md, terminal = render_markdown(result), render_tables(result)
    assert md.index("## Decision") < md.index("## m") < md.index("Counts (excluded and missing):")
    assert "&lt;b&gt;v&lt;/b&gt;" in md and "<b>v</b>" in terminal
    assert terminal.startswith("m  (baseline: base)") and terminal.endswith("\n") and "\n\n\n" not in terminal
    assert terminal.rstrip("\n").splitlines()[-3].startswith("Decision (95 % confidence, thresholds avv)")
    assert "Decision (" not in render_tables(result, decision=False)


def test_fmt_and_columns_print_a_metric_in_its_registry_format():
    assert [fmt(v, "rate") for v in (1.0, 0.0, 0.75, None)] == ["1", "0", "0.7500", "n/a"]
    assert [fmt(v, "num") for v in (155.678, 1452.4, 64.94)] == ["155.7", "1452", "64.94"]
    assert (fmt(3.0, "int"), fmt(0.5, "irf"), fmt(True, "yes_no"), fmt(False, "yes_no")) == ("3", "0.5000", "yes", "no")
    success = Column("Success", "success_rate")
    assert success.kind == metric("success_rate").fmt == "rate"
    assert success.cell({"success_rate": 0.75}) == metric_cell({"success_rate": 0.75}, "success_rate") == "0.7500"
    assert Column("Level", "level", "int").cell({}) == "n/a"


def test_tables_escape_and_align_for_their_output():
    lines = terminal_table(["Vendor", "Rate", "Ends"], [["a\x1b[31m", "1", "x"], ["bb", "0.7500", "yy"]],
                           left=(0, 2))
    assert lines == ["Vendor       Rate  Ends", "---------  ------  ----",
                     "a\\x1b[31m       1  x", "bb         0.7500  yy"]
    html = html_table(["<h>", "n"], [["<b>", "1"]], left=1)
    assert '<th class="l">&lt;h&gt;</th><th>n</th>' in html and '<td class="l">&lt;b&gt;</td><td>1</td>' in html


def stress_levels():
    settings = StressSettings(levels=(1, 2), step_s=2.0, slo_ttft_p95_ms=300.0, slo_error_rate=0.01)
    rows = [record(vendor="v", sample_id=str(i), level=1, ttft_ms=100.0, latency_ms=500.0, completion_tokens=10,
                   tps=20.0) for i in range(3)]
    rows.append(record(vendor="v", sample_id="9", level=1, status="failed", error_kind="http_429"))
    return stress_result(records_frame(rows), settings)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_level_table_is_one_declaration_for_report_md_report_html_and_the_web_ui():
    result = stress_levels()
    md = stress_section.render_stress_markdown(result)
    html = stress_section.html(result, {"v": "#000"})
    web = level_rows({"levels": result.levels.astype("object").to_dict("records")})
    assert [c["title"] for c in level_structure()] == [c.header for c in LEVEL_TABLE]
    cells = [c.cell(result.levels.iloc[0].to_dict()) for c in LEVEL_TABLE]
    assert cells[:5] == ["v", "1", "4", "0.7500", "0.2500"] and cells[-1] == "no"
    assert "| " + " | ".join(cells) + " |" in md  # report.md
    assert f'<td class="l">{cells[0]}</td>' + "".join(f"<td>{c}</td>" for c in cells[1:]) in html  # report.html
    assert [web[0][c.column] for c in LEVEL_TABLE] == cells  # the Stress levels tab
    assert stress_section.render_stress_terminal(result).startswith("Stress: capacity per vendor\nVendor")


@pytest.mark.integration  # draws report.html's figures: seconds
def test_success_rate_prints_alike_in_every_output():
    result = result_of_two_vendors()
    rate = result.scores.set_index("vendor").loc["<b>v</b>", "success_rate"]
    shown = fmt(rate, metric("success_rate").fmt)
    assert rate == 0.75 and shown == "0.7500"
    assert f"| {shown} |" in render_markdown(result) and f">{shown}<" in render_html(result)
    assert f" {shown} " in render_tables(result)
