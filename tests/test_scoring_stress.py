"""Stress-mode scoring from a hand-written run folder: level table with measured durations, capacity,
the SLO rule shared with the harness, run.json checks, outputs and `avv-score stress`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from avv_core.errors import InputError
from avv_core.measures import meets_slo
from avv_scoring import render_tables, score_paths, stress_only, write_stress_outputs
from avv_scoring.cli import main
from avv_scoring.report.sections.stress import render_stress_markdown
from avv_scoring.stress import StressSettings, capacity_table, level_table, settings_from_run_json, stress_tables
from tests.builders import write_jsonl, write_run
from tests.test_scoring_paths import SAMPLE_LINES

STRESS = {
    "levels": [1, 2, 4],
    "step_s": 3.0,
    "slo_ttft_p95_ms": 350.0,
    "slo_error_rate": 0.01,
    "level_durations_s": {"1": 2.0, "2": 4.0},  # level 4 was not measured: it lasted step_s
    "stopped_after": {"limited": 4},
}


def _ok(vendor, level, n, ttft, tokens=10, **extra):
    return [dict(vendor=vendor, level=level, sample_id=str(i % 4 + 1), repeat=level * 100 + i, ttft_ms=ttft,
                 latency_ms=ttft * 2, completion_tokens=tokens, tps=50.0, is_baseline=vendor == "fast", **extra)
            for i in range(n)]


def _failed(vendor, level, n, kind="http_429"):
    return [dict(vendor=vendor, level=level, sample_id=str(i % 4 + 1), repeat=level * 100 + 50 + i,
                 status="failed", error_kind=kind, latency_ms=5.0) for i in range(n)]


ROWS = (
    _ok("fast", 1, 4, 100.0) + _ok("fast", 2, 8, 100.0) + _ok("fast", 4, 8, 400.0)  # TTFT breaks the SLO at 4
    + _ok("limited", 1, 4, 100.0) + _ok("limited", 2, 4, 100.0) + _failed("limited", 2, 4)
    + _ok("limited", 4, 2, 100.0) + _failed("limited", 4, 6)
)


def write_stress_run(folder: Path, rows=ROWS, stress=STRESS, mode="stress", samples: Path | None = None) -> Path:
    return write_run(folder, rows, samples, mode=mode, stress=stress)


def test_level_table_divides_tokens_by_each_levels_measured_duration(tmp_path):
    result = stress_tables(write_stress_run(tmp_path / "run"))
    levels = result.levels.set_index(["vendor", "level"])
    assert levels.loc[("fast", 1), "tokens_per_s"] == 40 / 2.0  # measured 2.0 s (nominal 3 s)
    assert levels.loc[("fast", 2), "tokens_per_s"] == 80 / 4.0
    assert levels.loc[("fast", 4), "tokens_per_s"] == pytest.approx(80 / 3.0)  # not measured: step_s
    assert levels.loc[("limited", 2), "tokens_per_s"] == 40 / 4.0  # successes only
    assert levels.loc[("limited", 2), "requests"] == 8
    assert levels.loc[("limited", 2), "success_rate"] == 0.5
    assert levels.loc[("limited", 2), "rate_429"] == 0.5
    assert levels.loc[("fast", 4), "ttft_p95_ms"] == 400.0
    assert levels.loc[("fast", 1), "latency_p50_ms"] == 200.0


def test_capacity_first_429_and_stopped_after(tmp_path):
    result = stress_tables(write_stress_run(tmp_path / "run"))
    cap = result.capacity.set_index("vendor")
    assert cap.loc["fast", "capacity"] == 2 and pd.isna(cap.loc["fast", "first_429_level"])
    assert cap.loc["limited", "capacity"] == 1 and cap.loc["limited", "first_429_level"] == 2
    assert cap.loc["fast", "peak_tokens_per_s"] == pytest.approx(80 / 3.0)
    assert cap.loc["limited", "stopped_after_level"] == 4 and pd.isna(cap.loc["fast", "stopped_after_level"])


def test_meets_slo_is_the_harness_rule_on_each_levels_records(tmp_path):
    run = write_stress_run(tmp_path / "run")
    result = stress_tables(run)
    records = pd.read_csv(run / "records.csv")
    for row in result.levels.itertuples(index=False):
        group = records[(records["vendor"] == row.vendor) & (records["level"] == row.level)]
        outcomes = [(s == "success", None if pd.isna(t) else float(t))
                    for s, t in zip(group["status"], group["ttft_ms"], strict=True)]
        assert row.meets_slo == meets_slo(outcomes, STRESS["slo_ttft_p95_ms"], STRESS["slo_error_rate"])
    # capacity is the highest level meeting that rule, so it cannot disagree with the run's stop decision
    for vendor, group in result.levels.groupby("vendor"):
        meeting = group.loc[group["meets_slo"], "level"]
        assert result.capacity.set_index("vendor").loc[vendor, "capacity"] == meeting.max()


def test_slo_edges_error_share_at_the_limit_and_no_ttft():
    settings = StressSettings(levels=(1,), step_s=1.0, slo_ttft_p95_ms=100.0, slo_error_rate=0.25)
    rows = [dict(vendor="v", level=1, status="success", error_kind=None, ttft_ms=90.0, latency_ms=1.0,
                 completion_tokens=1, tps=1.0)] * 3
    rows += [dict(vendor="v", level=1, status="failed", error_kind="timeout", ttft_ms=None, latency_ms=1.0,
                  completion_tokens=None, tps=None)]
    assert level_table(pd.DataFrame(rows), settings)["meets_slo"].tolist() == [True]  # 1/4 ≤ 0.25
    no_ttft = [{**r, "ttft_ms": None} for r in rows]
    levels = level_table(pd.DataFrame(no_ttft), settings)
    assert levels["meets_slo"].tolist() == [False] and capacity_table(levels)["capacity"].isna().all()


def test_run_json_contract_is_checked():
    settings, notes = settings_from_run_json({"mode": "stress", "stress": STRESS})
    assert settings.levels == (1, 2, 4) and settings.duration_s(1) == 2.0 and settings.duration_s(4) == 3.0
    assert settings.stopped_after == {"limited": 4} and notes == []
    for bad, message in (({**STRESS, "extra": 1}, "unknown key"), ({**STRESS, "step_s": "3"}, "step_s"),
                         ({**STRESS, "levels": [2, 1]}, "increasing"),
                         ({**STRESS, "level_durations_s": {"x": 1.0}}, "level_durations_s"),
                         ({k: v for k, v in STRESS.items() if k != "slo_error_rate"}, "missing key")):
        with pytest.raises(InputError, match=message):
            settings_from_run_json({"mode": "stress", "stress": bad}, "run.json")
    # a run.json from before the "stress" object: settings from the options, with a note
    options = {"avv_stress_levels": "1,2", "avv_stress_step_s": 5.0, "avv_slo_ttft_p95_ms": 200.0,
               "avv_slo_error_rate": 0.02}
    settings, notes = settings_from_run_json({"mode": "stress", "options": options})
    assert (settings.levels, settings.duration_s(2), settings.slo_error_rate) == ((1, 2), 5.0, 0.02) and notes
    with pytest.raises(InputError, match="no \"stress\" object"):
        settings_from_run_json({"mode": "stress", "options": {}})


def test_not_a_stress_run(tmp_path):
    run = write_stress_run(tmp_path / "verify", mode="verify", stress=None)
    assert stress_tables(run) is None
    with pytest.raises(InputError, match="not a stress run"):
        write_stress_outputs(run)


def test_write_stress_outputs_leaves_the_report_alone(tmp_path):
    run = write_stress_run(tmp_path / "run")
    text = write_stress_outputs(run)
    assert text.startswith("Stress: capacity per vendor")
    for name in ("stress.csv", "capacity.csv", "stress_ttft_p95.png", "stress_tokens_per_s.png"):
        assert (run / name).stat().st_size > 0, name
    assert not (run / "report.md").exists()
    assert pd.read_csv(run / "capacity.csv").set_index("vendor").loc["limited", "capacity"] == 1


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_score_paths_on_a_stress_run_writes_one_report_with_the_stress_section(tmp_path):
    samples = write_jsonl(tmp_path / "samples.jsonl", SAMPLE_LINES)
    run = write_stress_run(tmp_path / "run", samples=samples)
    result = score_paths([run], html=False)  # report.html's stress section: tests/test_report_html.py
    assert result.stress is not None and not result.scores.empty
    assert {"stress.csv", "capacity.csv", "report.md", "scores.csv"} <= set(result.outputs)
    report = (run / "report.md").read_text(encoding="utf-8")
    assert report.count("## Stress: capacity per vendor") == 1
    assert report.index("## m") < report.index("## Stress")  # one writer, sections in order
    assert "Stress: capacity per vendor" in render_tables(result)
    assert json.loads((run / "scores.json").read_text())["stress"]["capacity"][0]["vendor"] == "fast"
    # several inputs: no stress tables
    assert score_paths([run, run / "records.csv"], write=False).stress is None


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_stress_only_and_the_cli(tmp_path, capsys):
    run = write_stress_run(tmp_path / "run")
    result = stress_only(run)
    assert not result.scored and set(result.outputs) >= {"report.md", "stress.csv"}
    assert "scores.csv" not in result.outputs and not (run / "scores.csv").exists()
    assert render_stress_markdown(result.stress) in (run / "report.md").read_text(encoding="utf-8")

    out = tmp_path / "out"
    assert main(["stress", str(run), "--no-score", "--out", str(out)]) == 0
    assert "Stress: capacity per vendor" in capsys.readouterr().out and (out / "capacity.csv").is_file()
    verify = write_stress_run(tmp_path / "verify", mode="verify", stress=None)
    assert main(["stress", str(verify)]) == 2
    assert "not a stress run" in capsys.readouterr().err
    assert not (verify / "report.md").exists()  # checked before anything was written
