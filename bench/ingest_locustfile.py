"""The locustfile of ``bench/master_ingest.py``: the real plugin (User classes, shape, item protocol), with each
worker's users replaying one canned record per item instead of calling a vendor.

A worker user asks the master for an item (``avv_want`` → ``avv_items``, timed: the hand-out latency), waits
``AVV_BENCH_ANSWER_S`` seconds (the answer a vendor would stream), stamps ``t0_monotonic`` with the send time and
sends the record (``avv_record``). The master stores it as any record (checks, ledger, records.csv, live board);
a listener on its record hook notes, per row, when it was written and how long after its send (one monotonic
clock: the processes share the machine). Each process writes what it measured to ``AVV_BENCH_OUT/<role>-<pid>.json``
when it stops.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust import events

# the checkout whose harness is measured: AVV_BENCH_CODE (master_ingest.py --code, e.g. an export of main for a
# before/after), else this one
sys.path.insert(0, os.environ.get("AVV_BENCH_CODE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from avv_core.records import Record  # noqa: E402
from avv_harness.locustfile import *  # noqa: E402,F403  (the User classes and the shape)

ANSWER_S = float(os.environ.get("AVV_BENCH_ANSWER_S", "1.0"))
OUT = Path(os.environ.get("AVV_BENCH_OUT", "."))

#: A successful tool-call answer as the harness records it (the sizes of a demo run's row: ~1 KB of CSV).
TEMPLATE: dict[str, Any] = {
    "is_baseline": False, "endpoint": "chat", "transforms": "", "status": "success", "http_status": 200,
    "attempts": 1, "ttfb_ms": 3.1, "ttft_ms": 121.2, "ttft_kind": "tool_call", "latency_ms": 269.7, "decode_ms": 148.4,
    "wall_ms": 270.0, "chunks": 26, "prompt_tokens": 1265, "completion_tokens": 23, "total_tokens": 1288,
    "usage_reported": True, "tps": 148.3, "finish_reason": "tool_calls", "stop_reason": "tool_calls",
    "saw_tool_call_delta": True, "tool_call_count": 1,
    "tool_calls": json.dumps([{"id": "call_54714acbdaf79b37dfdbcb20", "name": "read_file",
                               "arguments": json.dumps({"path": "src/shopcart/pricing.py", "start_line": 36,
                                                        "end_line": 50})}]),
    "content": "I'll read the pricing module first. " * 4, "reasoning_chars": 0, "client_lag_ms": 0.9,
    "stale_conn_retries": 0,
}


def _dump(role: str, data: dict[str, Any]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{role}-{os.getpid()}.json").write_text(json.dumps(data))


@events.init.add_listener
def _bench(environment: Any, **_: Any) -> None:
    ctl = getattr(environment, "avv", None)
    if ctl is None:
        return
    if ctl.role.name == "worker":
        _replay_on_worker(environment, ctl)
    elif ctl.role.holds_ledger:
        _measure_on_master(environment, ctl)


def _replay_on_worker(environment: Any, ctl: Any) -> None:
    handout: list[float] = []
    empty: list[int] = [0]  # asks that came back without an item (another user of the class took it)
    role = ctl.role
    ask = role.next_item

    def timed_next_item(class_name: str) -> Any:
        asked = not role.inbox.get(class_name)
        t = time.monotonic()
        item = ask(class_name)
        if asked and item is not None:
            handout.append(time.monotonic() - t)
        elif item is None:
            empty[0] += 1
        return item

    def replay(session: Any, class_name: str, item: Any, on_attempt: Any = None) -> list[Record]:
        gevent.sleep(ANSWER_S)
        key = item.key
        return [Record({**TEMPLATE, "run_id": ctl.exec.run_id, "model": key.model, "vendor": key.vendor,
                        "sample_id": key.sample_id, "repeat": key.repeat, "request_hash": item.sample.request_hash,
                        "worker": ctl.worker_id, "t0_monotonic": time.monotonic(),
                        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())})]

    role.next_item = timed_next_item
    ctl.run_item = replay
    dump = lambda **_: _dump("worker", {"handout_s": handout, "empty_asks": empty[0]})  # noqa: E731
    environment.events.test_stop.add_listener(dump)
    environment.events.quitting.add_listener(dump)


def _measure_on_master(environment: Any, ctl: Any) -> None:
    rows: list[tuple[float, float]] = []  # (written at, written − sent), monotonic seconds

    def on_records(records: list[Any], **_: Any) -> None:
        now = time.monotonic()
        rows.extend((now, now - float(r["t0_monotonic"])) for r in records)

    ctl.record_hook.add_listener(on_records)
    from avv_harness.locust.live_board import LiveBoard

    def board() -> int | None:
        live = ctl.kept_view(LiveBoard)
        return live._records.count if live is not None and live._records is not None else None
    dump = lambda **_: _dump("master", {"rows": rows, "live_board_rows": board()})  # noqa: E731
    environment.events.test_stop.add_listener(dump)
    environment.events.quitting.add_listener(dump)
