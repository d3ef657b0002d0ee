"""File-level scoring: run folders, run.json / sample file, baselines, outputs and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from avv_core.errors import InputError
from avv_scoring import SCORE_COLUMNS, load_records, render_tables, score_paths
from avv_scoring.cli import main
from avv_scoring.testing import call
from tests.builders import numbered_samples, write_jsonl, write_run

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


#: The four samples the rows below answer (sample ids 1 to 4, each with TOOL).
SAMPLE_LINES = numbered_samples(4, [TOOL], index="{i}")


def _tc(city):
    return {"finish_reason": "tool_calls", "tool_calls": [call("get_weather", {"city": city})]}


def baseline_rows(vendor="official"):
    return [
        {
            "vendor": vendor,
            "is_baseline": True,
            "sample_id": "1",
            **_tc("Paris"),
            "ttft_ms": 300,
            "tps": 50,
            "total_tokens": 1000,
        },
        {
            "vendor": vendor,
            "is_baseline": True,
            "sample_id": "2",
            **_tc("Rome"),
            "ttft_ms": 300,
            "tps": 50,
            "total_tokens": 1000,
        },
        {
            "vendor": vendor,
            "is_baseline": True,
            "sample_id": "3",
            "ttft_ms": 300,
            "tps": 50,
            "total_tokens": 1000,
        },
        {
            "vendor": vendor,
            "is_baseline": True,
            "sample_id": "4",
            "ttft_ms": 300,
            "tps": 50,
            "total_tokens": 1000,
        },
    ]


def vendor_rows(vendor="cheap"):
    return [
        {"vendor": vendor, "sample_id": "1", **_tc("Paris"), "ttft_ms": 100, "tps": 80, "total_tokens": 900},
        {
            "vendor": vendor,
            "sample_id": "2",
            "finish_reason": "tool_calls",
            "tool_calls": [call("get_weather", {"city": 7})],
            "ttft_ms": 100,
            "tps": 80,
            "total_tokens": 900,
        },
        {"vendor": vendor, "sample_id": "3", **_tc("Oslo"), "ttft_ms": 100, "tps": 80, "total_tokens": 900},
        {"vendor": vendor, "sample_id": "4", "status": "failed", "error_kind": "http_5xx", "attempts": 3},
    ]


@pytest.fixture()
def samples(tmp_path) -> Path:
    return write_jsonl(tmp_path / "samples.jsonl", SAMPLE_LINES)


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_score_run_folder_writes_outputs(tmp_path, samples):
    run = write_run(tmp_path / "run1", baseline_rows() + vendor_rows(), samples)
    result = score_paths([run])
    assert set(result.outputs) == {"scores.csv", "scores_by_repeat.csv", "scores.json", "disagreements.csv",
                                   "report.md", "report.html"}
    assert all(Path(p).parent == run for p in result.outputs.values())  # default: the run folder

    table = pd.read_csv(run / "scores.csv", keep_default_na=False, dtype=str)
    assert list(table.columns) == list(SCORE_COLUMNS)
    row = table.set_index("vendor").loc["cheap"]
    # pairs 1 (TP), 2 (TP), 3 (FP); 4 excluded (vendor failed)
    assert (row["tp"], row["fp"], row["fn"], row["tn"], row["f1_pairs"], row["f1_excluded"]) == (
        "2",
        "1",
        "0",
        "0",
        "3",
        "1",
    )
    assert float(row["f1"]) == pytest.approx(0.8)
    assert float(row["success_rate"]) == 0.75
    assert float(row["attempt_success_rate"]) == pytest.approx(3 / 6)
    assert float(row["schema_accuracy"]) == pytest.approx(2 / 3)  # sample 2's city is not a string
    assert row["verdict"] == "FAIL"
    assert row["verdict_reasons"] == ("success_rate 0.7500 [0.2561, 0.9632] < 0.99; "
                                      "schema_accuracy 0.6667 [0.1594, 0.9547] < 0.98")  # each interval below its bound
    assert table.set_index("vendor").loc["official", "is_baseline"] == "true"

    data = json.loads((run / "scores.json").read_text())
    assert data["baselines"] == {"m": "official"}
    vendors = {v["vendor"]: v for v in data["models"][0]["vendors"]}
    assert vendors["cheap"]["tp"] == 2 and vendors["official"]["f1"] == 1.0
    assert vendors["cheap"]["success_rate_std"] is None  # NaN → null

    report = (run / "report.md").read_text()
    assert "| Vendor | IRF (ties) | IRF | Success Rate | F1 | TPS | Schema Accuracy | TTFT (ms) | Avg Token |" in report
    assert "- cheap: **FAIL** — success_rate 0.7500 [0.2561, 0.9632] &lt; 0.99" in report  # the decision opens it
    assert report.index("## Decision") < report.index("| Vendor |")
    text = render_tables(result)
    assert "official (baseline)" in text and re.search(r"\n  cheap +FAIL +success_rate 0.7500 ", text)


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_baseline_run_reused_with_a_later_vendor_run(tmp_path, samples):
    base = write_run(tmp_path / "base_run", baseline_rows(), samples)
    later = write_run(tmp_path / "later_run", vendor_rows(), samples)
    out = tmp_path / "out"
    result = score_paths([base, later], out_dir=out, html=False)
    assert (out / "scores.csv").is_file()
    cheap = result.scores.set_index("vendor").loc["cheap"]
    assert cheap["f1"] == pytest.approx(0.8) and cheap["run_ids"] == "later_run"


def test_records_csv_path_and_latest_row_across_files(tmp_path, samples):
    first = write_run(
        tmp_path / "r1",
        [{"vendor": "a", "sample_id": "1", "status": "failed", "started_at": "2025-01-01T00:00:00Z"}],
        samples,
    )
    second = write_run(
        tmp_path / "r2", [{"vendor": "a", "sample_id": "1", "started_at": "2025-01-02T00:00:00Z"}], samples
    )
    frame = load_records([second / "records.csv", first / "records.csv"])
    assert len(frame) == 1 and frame.loc[0, "status"] == "success"


def test_sample_file_changed_since_the_run(tmp_path, samples):
    run = write_run(tmp_path / "run1", baseline_rows() + vendor_rows(), samples, sha="0" * 64)
    with pytest.raises(InputError, match="changed since the run"):
        score_paths([run], write=False)
    result = score_paths([run], samples=samples, write=False)  # explicit --samples wins, with a warning
    assert any("sha256 differs" in w for w in result.warnings)


def test_no_sample_file_known(tmp_path):
    run = write_run(tmp_path / "run1", baseline_rows(), None)
    with pytest.raises(InputError, match="--samples"):
        score_paths([run], write=False)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_baseline_resolution(tmp_path, samples):
    rows = [{**r, "is_baseline": False} for r in baseline_rows()] + vendor_rows()
    none = write_run(tmp_path / "none", rows, samples)
    with pytest.raises(InputError, match="no baseline vendor"):
        score_paths([none], write=False)
    result = score_paths([none], baseline="official", write=False)
    assert result.baselines == {"m": "official"}
    result = score_paths([none], baseline={"m": "cheap"}, write=False)
    assert result.scores.set_index("vendor").loc["cheap", "f1"] == 1.0
    with pytest.raises(InputError, match="no model has a vendor"):
        score_paths([none], baseline="nobody", write=False)

    two = write_run(
        tmp_path / "two", baseline_rows() + [{**r, "is_baseline": True} for r in vendor_rows()], samples
    )
    with pytest.raises(InputError, match="several baseline vendors"):
        score_paths([two], write=False)


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_cli_scores_and_reports_bad_input_with_status_2(tmp_path, samples, capsys):
    run = write_run(tmp_path / "run1", baseline_rows() + vendor_rows(), samples)
    out = tmp_path / "scores"
    assert main([str(run), "--out", str(out), "--min-success", "0.5", "--min-schema", "off", "--verdict",
                 "point", "--no-html"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"\n  cheap +PASS ", printed) and (out / "report.md").is_file()
    # default thresholds: cheap FAILs (before: 1)
    assert main([str(run), "--out", str(out), "--strict", "-q", "--no-html"]) == 7

    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "missing" in err and "Traceback" not in err

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "records.csv").write_text("model,vendor\nm,a\n", encoding="utf-8")
    assert main([str(broken)]) == 2
    assert "missing column(s) sample_id, status" in capsys.readouterr().err


def test_scoring_collects_rarely_and_restores_the_collector_even_on_error():
    import gc

    from avv_scoring.entrypoints import SCORING_GC_THRESHOLD, collect_rarely

    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collect_rarely():
        assert gc.get_threshold() == SCORING_GC_THRESHOLD
        raise RuntimeError("a scoring error")
    assert gc.get_threshold() == before
