"""The client's own delay, measured: a lag monitor per Locust process (harness run layer; the summary of what it
measured is :mod:`avv_core.client_load`).

A greenlet sleeps a short fixed interval and measures how late it wakes. When it wakes ``lag`` seconds
late, the process could not run greenlets for that long (CPU saturated, a blocking call, a GC pause),
so any stream event that arrived meanwhile was read late by up to that much. For one record,
``client_lag_ms`` = the largest lag whose blocked span overlaps [t0, first token]: an upper bound on how
much of its TTFT is the client's own delay. The monitor also samples the process CPU once a second
(``client_cpu_pct`` on each record).
"""

from __future__ import annotations

import gc
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import gevent

INTERVAL_S = 0.005  # how often the monitor wakes
HORIZON_S = 300.0  # how far back lag samples are kept (longer than any TTFT we care about)
# Collector thresholds while users run (bench/README.md "500 streams": p99 TTFT error ~4x lower at 500 streams)
LOAD_GC_THRESHOLD = (5000, 50, 1000)


class LagMonitor:
    """Wake-up lag samples of this process (gevent). ``start()`` spawns the greenlet; pure queries."""

    def __init__(self, interval_s: float = INTERVAL_S, horizon_s: float = HORIZON_S):
        self.interval_s = interval_s
        self._keep = int(horizon_s / interval_s)
        self._wakes: list[float] = []  # plain lists (bisect is O(log n)); trimmed in halves
        self._lags: list[float] = []
        self.cpu_pct: float | None = None
        self._started: float | None = None
        self._greenlets: list[gevent.Greenlet] = []

    def start(self, spawn: Callable[[Callable[[], None]], gevent.Greenlet] | None = None) -> LagMonitor:
        """Spawn the watcher greenlets (with ``spawn``, e.g. a runner's greenlet group, so they end with it)."""
        import gevent

        spawn = spawn or gevent.spawn
        self._started = time.monotonic()
        self._greenlets = [spawn(self._watch), spawn(self._cpu)]
        return self

    def stop(self) -> None:
        for greenlet in self._greenlets:
            greenlet.kill(block=False)
        self._greenlets = []

    def _watch(self) -> None:
        import gevent

        while True:
            expected = time.monotonic() + self.interval_s
            gevent.sleep(self.interval_s)
            now = time.monotonic()
            self.add(now, max(0.0, now - expected))

    def _cpu(self) -> None:
        import gevent
        import psutil

        process = psutil.Process()
        process.cpu_percent(None)
        while True:
            gevent.sleep(1.0)
            self.cpu_pct = process.cpu_percent(None)

    def add(self, wake_s: float, lag_s: float) -> None:
        self._wakes.append(wake_s)
        self._lags.append(lag_s)
        if len(self._wakes) > 2 * self._keep:
            del self._wakes[: self._keep], self._lags[: self._keep]

    def max_lag_ms(self, start_s: float, end_s: float, now_s: float | None = None) -> float:
        """Largest lag (ms) whose blocked span [wake − lag, wake] overlaps [start, end]; 0 when none did.

        A stall still in progress counts too: when the monitor is overdue (it has not woken since
        ``interval`` before now, because the caller itself kept the loop busy), that pending lag is taken
        as a sample waking now."""
        last = self._wakes[-1] if self._wakes else self._started
        if last is None or end_s < start_s:
            return 0.0
        wakes, lags = self._wakes, self._lags
        now = time.monotonic() if now_s is None else now_s
        pending = now - (last + self.interval_s)
        worst = pending if pending > 0 and now - pending <= end_s and now >= start_s else 0.0
        # Slices and C max, not a loop: a 2 s request spans ~400 wakes, and this runs once per record.
        i = bisect_left(wakes, start_s)
        j = bisect_right(wakes, end_s, i)
        if j > i:  # a wake inside [start, end]: its blocked span ends inside, so it overlaps
            worst = max(worst, max(lags[i:j]))
        k = bisect_right(wakes, end_s + 1.0, j)  # a stall that began before `end` shows at the next wake: 1 s past it
        if k > j and max(lags[j:k]) > worst:
            for wake, lag in zip(wakes[j:k], lags[j:k], strict=True):
                if lag > worst and wake - lag <= end_s:
                    worst = lag
        return worst * 1000.0


def quiet_gc_for_load() -> Callable[[], None]:
    """Make the cyclic garbage collector pause the event loop less while users stream; returns the undo.

    Every collection stops all greenlets. With Python's defaults (700, 10, 10) a process streaming 500
    answers collects the young generation ~20 times a second, and the objects of in-flight requests, which
    live for seconds, are rescanned by older-generation collections that also walk every object made at
    start-up (modules, the sample file): pauses of 20–60 ms, seen as TTFT error. So: collect once, move
    everything alive now into the permanent generation (``gc.freeze``: never scanned again), and raise the
    young threshold so most request objects are freed by reference counting before any collection runs.
    Memory is still freed by reference counting; only cycles wait longer."""
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*LOAD_GC_THRESHOLD)

    def undo() -> None:
        gc.unfreeze()
        gc.set_threshold(*previous)

    return undo
