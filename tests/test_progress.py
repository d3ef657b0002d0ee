"""The headless terminal: the progress line's text and its ETA (pure), the console's plain lines in a log and the
in-place line on a terminal, NO_COLOR, and a run that prints its progress and ends with the decision block and the
report paths."""

from __future__ import annotations

import io
import re

import gevent
import pytest

from avv_harness.run import controller
from avv_harness.run.console import Console, decision_lines, start_line, wants_colour
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.progress import (
    EtaEstimator,
    Progress,
    VendorProgress,
    duration_text,
    eta_s,
    progress_line,
    rounded_eta,
)
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options, run_to_end

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def test_progress_line_text_and_eta():
    assert progress_line(Progress(812, 2000, 3, 4, 88.0)) == (
        "avv: 812/2000 items (40.6 %) · 3 vendors · 4 items failed · ETA 2m10s")
    assert progress_line(Progress(0, 10, 1, 0, 3.0)) == "avv: 0/10 items (0.0 %) · 1 vendor · 0 items failed · ETA –"
    assert progress_line(Progress(10, 10, 2, 1, 3.0)).endswith("(100.0 %) · 2 vendors · 1 item failed · ETA 0s")
    assert progress_line(Progress(37, 0, 2, 1, 75.0, level=4, stress=True)) == (
        "avv: stress level 4 · 37 requests · 2 vendors · 1 failed · 1m15s elapsed")
    assert eta_s(50, 200, 10.0) == 30.0 and eta_s(0, 5, 9.0) is None and eta_s(5, 5, 9.0) == 0.0
    assert [duration_text(s) for s in (0, 59.6, 130, 3725)] == ["0s", "1m00s", "2m10s", "1h02m"]
    assert [rounded_eta(s) for s in (8.2, 61, 599, 601)] == [9, 65, 600, 660]


def test_items_failed_and_failed_attempts_are_named_apart_and_vendors_fit_the_width():
    per_vendor = (VendorProgress("reference", 19, 32), VendorProgress("faithful", 20, 32),
                  VendorProgress("flaky", 13, 32))
    line = progress_line(Progress(52, 96, 3, 0, 10.0, per_vendor=per_vendor, failed_attempts=2, eta=8.0), None)
    assert line == ("avv: 52/96 items (54.2 %) · reference 19/32 · faithful 20/32 · flaky 13/32 · 0 items failed · "
                    "2 failed attempts · ETA 8s")
    assert progress_line(Progress(52, 96, 3, 1, 10.0, per_vendor=per_vendor, failed_attempts=1, eta=8.0)).endswith(
        "· 1 item failed · 1 failed attempt · ETA 8s")
    narrow = progress_line(Progress(52, 96, 3, 0, 10.0, per_vendor=per_vendor, failed_attempts=2, eta=8.0), 120)
    assert narrow.endswith("· +1 more · 0 items failed · 2 failed attempts · ETA 8s") and len(narrow) <= 120
    assert " 3 vendors " in progress_line(Progress(52, 96, 3, 0, 10.0, per_vendor=per_vendor, eta=8.0), 70)
    # the layout is measured at its widest, so it does not change while the counts grow
    layouts = {progress_line(Progress(d, 96, 3, 0, 10.0, per_vendor=tuple(VendorProgress(v.name, d // 3, 32)
                                                                           for v in per_vendor), failed_attempts=0,
                                      eta=100.0 - d), 110).count(" · ") for d in range(0, 97, 3)}
    assert len(layouts) == 1


def test_eta_comes_from_the_recent_rate_of_the_slowest_vendor_and_counts_down_steadily():
    eta = EtaEstimator()
    done = {"fast": 0, "slow": 0}
    shown = {}
    for second in range(1, 121):
        if second > 4:  # start-up: nothing done for four seconds, then bursts: 4 items/s and 1 item/s on average
            done["fast"] = min(400, done["fast"] + (4, 0, 8, 4)[second % 4])
            done["slow"] = min(200, done["slow"] + (0, 2, 1, 1)[second % 4])
        eta.observe(float(second), done)
        value = eta.eta({"fast": 400 - done["fast"], "slow": 200 - done["slow"]})
        if second <= 7:
            assert value is None, second  # no rate yet: measured from each vendor's first item, for at least 3 s
        elif second >= 15:
            shown[second] = value
    assert all(v is not None for v in shown.values())
    for second, value in shown.items():  # the slow vendor decides: its items left at 1 item/s
        truth = 200 - (second - 4)
        assert abs(value - truth) <= 0.15 * truth + 2, (second, value, truth)
    steps = [shown[s + 1] - shown[s] for s in range(20, 120)]
    assert all(-5 < step < 2 for step in steps), steps  # counts down about a second per second, no jumps
def test_console_in_a_log_writes_plain_lines_and_on_a_terminal_rewrites_one_line():
    log = io.StringIO()
    console = Console(log, terminal=False, colour=False)
    console.line("start")
    console.progress("avv: 1/2 items")
    console.progress("avv: 2/2 items")
    console.end_progress("avv: 2/2 items")  # the same as the last: not written twice
    console.decision(["  a  PASS", "  b  FAIL  f1 0.5 < 0.8"], [("report.html", "r/report.html"),
                                                              ("report.md", "r/report.md")])
    text = log.getvalue()
    assert not CONTROL.search(text.replace("\n", "")), repr(text)
    assert text.splitlines() == ["start", "avv: 1/2 items", "avv: 2/2 items", "  a  PASS", "  b  FAIL  f1 0.5 < 0.8",
                                 "report.html: r/report.html", "report.md:   r/report.md"]
    tty = io.StringIO()
    console = Console(tty, terminal=True, colour=True)
    console.progress("avv: 1/2 items")
    console.progress("avv: 2/2 items")
    console.line("done")
    console.decision(["  a  PASS"], [])
    assert tty.getvalue() == ("\ravv: 1/2 items\x1b[K\ravv: 2/2 items\x1b[K\ndone\n  a  \x1b[32mPASS\x1b[0m\n")


def test_colour_only_on_a_terminal_and_never_with_no_color():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert wants_colour(Tty(), {}) and not wants_colour(io.StringIO(), {})
    assert not wants_colour(Tty(), {"NO_COLOR": "1"}) and not wants_colour(Tty(), {"TERM": "dumb"})
    assert wants_colour(Tty(), {"NO_COLOR": ""})  # no-color.org: set *and not empty*


def test_start_line_names_vendors_samples_and_the_run_folder():
    assert start_line([("m", "ref", True), ("m", "b", False)], 32, 2, "out/run1") == (
        "avv-locust: 2 vendors of m (ref = baseline, b) · 32 samples × 2 repeats = 128 items → out/run1")
    many = start_line([("m", f"v{i}", i == 0) for i in range(12)], 4, 1, "o")
    assert "v7, +4 more)" in many and "12 vendors of m" in many
    assert "2 models" in start_line([("m", "a", True), ("n", "a", True)], 1, 1, "o")
    assert start_line([("m", "a", True)], 4, 1, "o", stress="stress ladder 1,2 users per vendor, 3 s each") == (
        "avv-locust: 1 vendor of m (a = baseline) · 4 samples, stress ladder 1,2 users per vendor, 3 s each → o")
    assert start_line([("m", "a", True)], 4, 2, "o", left=3) == (  # a resumed run: what this session runs
        "avv-locust: 1 vendor of m (a = baseline) · 4 samples × 2 repeats = 8 items, 3 left to run → o")
    assert decision_lines(None, "out/r", no_score=True) == ["no decision (--avv-no-score): avv-score out/r scores "
                                                            "the run"]


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_headless_run_prints_progress_and_ends_with_the_decision_and_the_report_paths(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(controller, "PROGRESS_INTERVAL_S", 0.2)
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}, "b": {"concurrency": 1}}, n_samples=8)

    def slow(request):
        gevent.sleep(0.05)
        return stream_reply("fine")

    args = [a for a in options(tmp_path, config, samples) if a != "--avv-no-score"]
    env, ctl = make_env(args, adapter=ScriptedAdapter(slow))
    assert run_to_end(env) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("avv-locust: 2 vendors of m (a = baseline, b) · 8 samples × 1 repeat = "
                                          "16 items → ")
    lines = re.findall(r"^avv: (\d+)/16 items \(([\d.]+) %\) · a (\d+)/8 · b (\d+)/8 · 0 items failed · ETA \S+$",
                       out, re.M)
    assert len(lines) >= 2, out
    done = [int(d) for d, _, _, _ in lines]
    assert done == sorted(done) and all(float(p) == round(100 * int(d) / 16, 1) for d, p, _, _ in lines)
    assert all(int(a) + int(b) == int(d) for d, _, a, b in lines)
    assert not CONTROL.search(out.replace("\n", ""))  # captured stdout is not a terminal: plain lines
    tail = out.rstrip("\n").splitlines()
    assert tail[-2:] == [f"report.html: {ctl.run_dir / 'report.html'}", f"report.md:   {ctl.run_dir / 'report.md'}"]
    assert tail[-5] == "Decision (95 % confidence, thresholds avv):"  # the decision block, then the report paths
    # one line per vendor, in IRF order (measured times decide it: either may come first)
    assert {line.split()[0] for line in tail[-4:-2]} == {"a", "b"}, tail[-4:-2]
    assert any(re.match(r"  a \(baseline\) +(PASS|FAIL|INCONCLUSIVE) ", line) for line in tail[-4:-2]), tail[-4:-2]
    assert any(re.match(r"  b +(PASS|FAIL|INCONCLUSIVE) ", line) for line in tail[-4:-2]), tail[-4:-2]
    assert (ctl.run_dir / "report.html").is_file()
