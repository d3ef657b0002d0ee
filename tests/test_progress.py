"""The headless progress line: its text and ETA (pure), and a run that prints it every few seconds and ends
with the path of report.html."""

from __future__ import annotations

import re

import gevent
import pytest

from avv_harness.run import controller
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.progress import duration_text, eta_s, progress_line
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options, run_to_end


def test_progress_line_text_and_eta():
    assert progress_line(812, 2000, 3, 4, 88.0) == "avv: 812/2000 items (40.6 %) · 3 vendors · 4 failed · ETA 2m09s"
    assert progress_line(0, 10, 1, 0, 3.0) == "avv: 0/10 items (0.0 %) · 1 vendor · 0 failed · ETA –"
    assert progress_line(10, 10, 2, 0, 3.0).endswith("(100.0 %) · 2 vendors · 0 failed · ETA 0s")
    assert progress_line(37, 0, 2, 1, 75.0, level=4, stress=True) == (
        "avv: stress level 4 · 37 requests · 2 vendors · 1 failed · 1m15s elapsed")
    assert eta_s(50, 200, 10.0) == 30.0 and eta_s(0, 5, 9.0) is None and eta_s(5, 5, 9.0) == 0.0
    assert [duration_text(s) for s in (0, 59.6, 130, 3725)] == ["0s", "1m00s", "2m10s", "1h02m"]


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_headless_run_prints_progress_and_the_report_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(controller, "PROGRESS_INTERVAL_S", 0.2)
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}, "b": {"concurrency": 1}}, n_samples=8)

    def slow(request):
        gevent.sleep(0.05)
        return stream_reply("fine")

    args = [a for a in options(tmp_path, config, samples) if a != "--avv-no-score"]
    env, ctl = make_env(args, adapter=ScriptedAdapter(slow))
    assert run_to_end(env) == EXIT_OK
    out = capsys.readouterr().out
    lines = re.findall(r"^avv: (\d+)/16 items \(([\d.]+) %\) · 2 vendors · 0 failed · ETA \S+$", out, re.M)
    assert len(lines) >= 2, out
    done = [int(d) for d, _ in lines]
    assert done == sorted(done) and all(float(p) == round(100 * int(d) / 16, 1) for d, p in lines)
    assert f"report: {ctl.run_dir / 'report.html'}" in out and (ctl.run_dir / "report.html").is_file()
