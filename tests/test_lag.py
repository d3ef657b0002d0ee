"""The lag monitor's queries and the client-load summary, on plain data."""

import pytest

from avv_core.client_load import client_bound_advice, client_load
from avv_harness.run.lag_monitor import LagMonitor


def monitor_with(samples):
    mon = LagMonitor(interval_s=0.005)
    mon._started = 0.0
    for wake, lag in samples:
        mon.add(wake, lag)
    return mon


def test_max_lag_is_the_worst_stall_overlapping_the_window():
    mon = monitor_with([(1.000, 0.001), (1.010, 0.002), (1.300, 0.250), (1.310, 0.0)])
    assert mon.max_lag_ms(1.0, 1.02, now_s=1.32) == pytest.approx(2.0)  # the 250 ms stall began at 1.05
    assert mon.max_lag_ms(1.0, 1.06, now_s=1.32) == pytest.approx(250.0)
    assert mon.max_lag_ms(1.2, 1.25, now_s=1.32) == pytest.approx(250.0)  # inside the stall
    assert mon.max_lag_ms(1.305, 1.31, now_s=1.312) == pytest.approx(0.0)


def test_a_stall_still_in_progress_counts():
    mon = monitor_with([(1.000, 0.0)])
    assert mon.max_lag_ms(1.0, 1.2, now_s=1.205) == pytest.approx(200.0)  # overdue by 200 ms right now


def test_client_load_flags_a_client_bound_process():
    rows = [{"worker": "h:1", "vendor": "a", "client_lag_ms": v, "client_cpu_pct": 40.0} for v in (0.2, 0.4, 9.0)]
    rows += [{"worker": "h:2", "vendor": "a", "client_lag_ms": 0.1, "client_cpu_pct": 95.0}]
    rows += [{"worker": "h:3", "vendor": "a", "client_lag_ms": None, "client_cpu_pct": None}]  # no monitor
    load = client_load(rows)
    assert set(load) == {"h:1", "h:2"}
    assert load["h:1"]["vendors"]["a"]["lag_p50_ms"] == 0.4 and load["h:1"]["client_bound"] is True  # p99 > 5
    assert load["h:2"]["client_bound"] is True and load["h:2"]["cpu_max_pct"] == 95.0  # CPU > 85 %
    columns = {k: [r[k] for r in rows] for k in ("worker", "vendor", "client_lag_ms", "client_cpu_pct")}
    assert client_load(columns=columns) == load
    assert len(client_bound_advice(load)) == 2
    rows += [{"worker": "", "vendor": "b", "client_lag_ms": 1.5, "client_cpu_pct": 10.0}]  # unnamed process
    from avv_scoring.score import _client_load  # scoring groups big tables with pandas: the same table
    from avv_scoring.testing import records_frame
    assert _client_load(records_frame(rows)) == client_load(rows) != load


def test_buffered_rows_are_counted_and_left_out_of_the_tps_mean():
    from avv_scoring import score_frame
    from avv_scoring.testing import records_frame

    rows = [{"vendor": "v", "is_baseline": True, "sample_id": "1", "tps": 50.0, "client_lag_ms": 0.5},
            {"vendor": "v", "is_baseline": True, "sample_id": "2", "tps": None, "anomalies": "buffered_stream",
             "ttft_ms": 40.0, "client_lag_ms": 1.5, "stale_conn_retries": 2}]
    (row,) = score_frame(records_frame(rows), None).scores.to_dict("records")
    assert row["tps"] == 50.0 and row["tps_rows"] == 1 and row["buffered_rows"] == 1
    assert row["avg_ttft_ms"] == 40.0  # the buffered row keeps its TTFT
    assert row["stale_conn_retries"] == 2 and row["client_lag_p50_ms"] == pytest.approx(1.0)


def test_quiet_gc_freezes_what_exists_raises_the_young_threshold_and_undoes_it():
    import gc

    from avv_harness.run.lag_monitor import LOAD_GC_THRESHOLD, quiet_gc_for_load

    before = gc.get_threshold()
    undo = quiet_gc_for_load()
    try:
        assert gc.get_threshold() == LOAD_GC_THRESHOLD and LOAD_GC_THRESHOLD[0] > before[0]
        assert gc.get_freeze_count() > 0  # everything alive at the start is out of the collector's scans
    finally:
        undo()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
