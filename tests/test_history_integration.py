"""The run history at full size (avv_scoring/history): the six-run history with two known changes at run 5,
flagged exactly, over one seed through the database and over twenty seeds in-process (at most one false flag);
``--fail-on-regression`` both ways; trend.html with a figure per metric and in headless Chromium; and one real
history of six simulator runs (``--avv-history``, ``--avv-sim-set``) whose changes match the truth log.
Integration tier: statistical sweeps, figures and real Locust runs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from avv_scoring.cli import main as score_main
from avv_scoring.history import EXIT_REGRESSION, add_result, compare, compute_trend, connect, outcomes
from tests import history_records as hr
from tests.builders import numbered_samples, sim_config, sim_vendors, write_jsonl, write_yaml
from tests.headless_chromium import find_chromium
from tests.locust_runs import clean_env, run_locust
from tests.sim_records import TOOLS, truth_by_tag

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """Six runs of history seed 0 (the changes from run 5 on), added to one database."""
    path = tmp_path_factory.mktemp("history") / "h.sqlite"
    conn = connect(path)
    for run in range(1, 7):
        assert add_result(conn, *hr.scored_run(0, run)).added
    conn.close()
    return path


def _flagged(trend) -> set[tuple[int, str, str]]:
    return {(int(r["run_index"]), r["vendor"], r["test"]) for r in trend.flagged().to_dict("records")}


def test_the_six_run_history_flags_exactly_the_two_known_changes_at_run_5(history):
    conn = connect(history, create=False)
    trend = compute_trend(conn)
    assert _flagged(trend) == {(5, v, t) for v, t in hr.TRUE_CHANGES}
    assert set(trend.flagged()["direction"]) == {"regression"}
    assert set(trend.changes["compared_on"]) == {"same sample set"}
    flip = trend.flagged().set_index("vendor").loc["flipper"]
    assert flip["effect"] == pytest.approx(-hr.FLIP_RATE, abs=0.08)  # the known flip rate, within noise
    delay = trend.flagged().set_index("vendor").loc["slow"]
    assert delay["effect"] == pytest.approx(hr.DELAY_MS, rel=0.15)  # the known delay
    assert trend.latest_regressions().empty  # run 6 keeps the change: nothing new


def test_twenty_seeds_give_at_most_one_false_flag_and_always_find_both_changes():
    false, missed = [], []
    for seed in range(20):
        before = None
        for run in range(1, 7):
            items = hr.quick_items(seed, run)
            groups = dict(tuple(items.groupby("vendor")))
            now = {v: outcomes(groups[v], None if v == "official" else groups["official"]) for v in groups}
            if before is not None:
                for vendor in groups:
                    for change in compare(before[vendor], now[vendor], vendor == "official", resamples=100):
                        truth = run == hr.DEGRADED_FROM and (vendor, change.test) in hr.TRUE_CHANGES
                        if change.flagged and not truth:
                            false.append((seed, run, vendor, change.test, change.effect, change.p_holm))
                        if truth and not change.flagged:
                            missed.append((seed, vendor, change.test))
            before = now
    assert len(false) <= 1, false
    assert missed == []


def test_fail_on_regression_exit_status_both_ways(history, tmp_path, capsys):
    five = tmp_path / "h5.sqlite"  # the history without run 6: its latest run is the one with the changes
    five.write_bytes(history.read_bytes())
    with sqlite3.connect(five) as raw:
        for table in ("items", "metrics", "vendors", "runs"):
            raw.execute(f"DELETE FROM {table} WHERE run_id = 's0-r6'")
    out = tmp_path / "trend"
    assert score_main(["trend", "--db", str(five), "--out", str(out), "--fail-on-regression", "--no-html"]) \
        == EXIT_REGRESSION == 5
    assert "REGRESSION in the latest run: flipper trigger_agreement, slow ttft_p50_ms" in capsys.readouterr().out
    assert (out / "trend.md").exists()
    assert score_main(["trend", "--db", str(five), "--out", str(out), "--no-html", "-q"]) == 0  # no gate asked
    assert score_main(["trend", "--db", str(history), "--out", str(out), "--fail-on-regression", "--no-html",
                       "-q"]) == 0  # run 6 keeps the change: nothing new
    assert score_main(["trend", "--db", str(five), "--vendor", "steady", "--out", str(out), "--no-html", "-q",
                       "--fail-on-regression"]) == 0
    assert score_main(["trend", "--db", str(five), "--metric", "nope", "--out", str(out)]) == 2
    assert score_main(["trend", "--db", str(tmp_path / "none.sqlite"), "--out", str(out)]) == 2
    assert score_main(["trend", "--db", str(five), "--since", "2027-01-01", "--out", str(out)]) == 2


def test_trend_html_has_a_figure_per_metric(history, tmp_path):
    assert score_main(["trend", "--db", str(history), "--out", str(tmp_path), "-q",
                       "--metric", "f1,ttft_p50_ms", "--metric", "success_rate"]) == 0
    page = (tmp_path / "trend.html").read_text()
    assert page.count("<figure><img") == 3 and "src=\"http" not in page and "Flagged changes" in page




def _render(url: str, png: Path) -> dict:
    """tests/headless_chromium.py in its own process, as tests/test_web_ui_e2e.py renders report.html."""
    proc = subprocess.run([sys.executable, "-m", "tests.headless_chromium", url, str(png), "--full-page"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_trend_html_renders_in_headless_chromium(history, tmp_path):
    if find_chromium() is None:
        pytest.skip("no Chromium binary on PATH (apt-get install chromium, or set $CHROMIUM) — not rendered")
    assert score_main(["trend", "--db", str(history), "--out", str(tmp_path), "-q"]) == 0
    page = _render((tmp_path / "trend.html").as_uri(), tmp_path / "trend.png")
    assert page["errors"] == [], page["errors"]
    assert all(v in page["text"] for v in hr.VENDORS) and "Flagged changes" in page["text"]
    assert (tmp_path / "trend.png").stat().st_size > 10_000


# --------------------------------------------------------------------- one real history of simulator runs

SIM_BASE = {"ttft_ms": 40, "tokens_per_s": 100, "output_tokens": 16, "tool_call_rate": 0.5, "follow_gold": False,
            "self_flip_rate": 0.02}
SIM_VENDORS = ["official", "flipper", "slow"]
SIM_FLIP, SIM_TTFT_MS = 0.5, 400


def _truth_agreement(run_dir: Path) -> float:
    """The flipper's trigger agreement with the official vendor that the truth log implies (every item)."""
    decisions: dict[str, dict[tuple[str, str], bool]] = {}
    for tag, line in truth_by_tag(run_dir / "sim_truth.jsonl").items():
        _, _, vendor, sample, repeat, _ = tag.split("/")
        decisions.setdefault(vendor, {})[(sample, repeat)] = bool(line["decision"])
    pairs = [(d, decisions["official"][key]) for key, d in decisions["flipper"].items()]
    return sum(a == b for a, b in pairs) / len(pairs)


def test_six_simulator_runs_flag_the_two_changes_made_at_run_5(tmp_path):
    write_yaml(tmp_path / "sim.yaml", sim_config({name: SIM_BASE for name in SIM_VENDORS}))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", SIM_VENDORS, "official",
                                                      **{n: {"concurrency": 4} for n in SIM_VENDORS}))
    write_jsonl(tmp_path / "samples.jsonl", numbered_samples(40, TOOLS))
    for run in range(1, 7):
        sets = [f"{name}:seed={10 * run + j}" for j, name in enumerate(SIM_VENDORS)]  # sampling noise per run
        if run >= 5:
            sets += [f"flipper:flip_rate={SIM_FLIP}", f"slow:ttft_ms={SIM_TTFT_MS}"]
        proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                           "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-run-id", f"r{run}",
                           "--avv-retries", "0", "--avv-start-jitter-s", "0", "--avv-history", "h.sqlite",
                           *(arg for item in sets for arg in ("--avv-sim-set", item))],
                          cwd=tmp_path, env=clean_env())
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"history: run r{run} added to h.sqlite" in proc.stdout
        run_json = json.loads((tmp_path / "out" / f"r{run}" / "run.json").read_text())
        assert run_json["options"]["avv_sim_set"] == sets  # run.json says what the simulator was told
    trend = compute_trend(connect(tmp_path / "h.sqlite", create=False))
    assert _flagged(trend) == {(5, "flipper", "trigger_agreement"), (5, "slow", "ttft_p50_ms")}, \
        trend.flagged().to_string()
    flagged = trend.flagged().set_index("vendor")
    flip = flagged.loc["flipper"]
    # the measured agreement before and after is what the truth log implies, item by item
    assert flip["before"] == pytest.approx(_truth_agreement(tmp_path / "out" / "r4"))
    assert flip["after"] == pytest.approx(_truth_agreement(tmp_path / "out" / "r5"))
    truth5 = [line for line in truth_by_tag(tmp_path / "out" / "r5" / "sim_truth.jsonl").values()
              if line["profile"] == "flipper"]
    assert sum(line["flipped"] for line in truth5) / len(truth5) == pytest.approx(SIM_FLIP, abs=0.2)
    assert flagged.loc["slow", "effect"] == pytest.approx(SIM_TTFT_MS - SIM_BASE["ttft_ms"], abs=60)
    assert score_main(["trend", "--db", str(tmp_path / "h.sqlite"), "--out", str(tmp_path), "-q", "--no-html",
                       "--fail-on-regression"]) == 0  # run 6 is like run 5 (trend.html: the tests above)
