"""Stress mode as a policy: step every vendor through a concurrency ladder and find its capacity.

Pure (no Locust, no I/O, no clock): the controller feeds it records (:meth:`StressPolicy.observe`) and
the run time (:meth:`StressPolicy.tick`), and applies the :class:`StressDecision` it returns — the
users, spawn rate and User classes that Locust's ``LoadTestShape.tick`` may return — without this
module touching a class.

Each level is held ``step_s`` seconds while samples are replayed round-robin. Every request is a record
with the level it *started* in. At each level end the SLO (:func:`avv_core.measures.meets_slo`, the
same function the report uses) is checked per vendor over that level's records so far; a vendor that
breaks it at two consecutive levels is not escalated further. The run ends when every vendor has
stopped or the ladder is done. Retries are off in stress mode (a retry would hide the throttling being
measured); after a 429 the user waits as ``Retry-After`` says (capped).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from avv_core.measures import meets_slo
from avv_harness.run.options import StressSettings

BREACHES_TO_STOP = 2


@dataclass(frozen=True)
class StressDecision:
    level: int | None  # the level now in force (None once the ladder is over)
    users: int  # total users: level × active vendors
    classes: tuple[str, ...]  # User classes of the vendors still escalated
    closed_level: int | None = None  # a level that ended at this tick (its SLO was checked)
    newly_stopped: tuple[str, ...] = ()  # vendors that broke the SLO twice in a row at this tick
    stop: bool = False  # the ladder is over: stop the test
    reason: str = ""


@dataclass
class StressPolicy:
    settings: StressSettings
    vendors: tuple[str, ...]  # User class names
    index: int = -1  # position in the ladder (-1: not started)
    active: dict[str, bool] = field(default_factory=dict)
    breaches: dict[str, int] = field(default_factory=dict)
    stopped_after: dict[str, int] = field(default_factory=dict)  # vendor → last level it was escalated to
    level_started_s: dict[int, float] = field(default_factory=dict)
    level_durations_s: dict[int, float] = field(default_factory=dict)
    done: bool = False
    # (vendor, level) → (success, ttft_ms) of every request recorded so far, for the SLO at level end
    seen: dict[tuple[str, int], list[tuple[bool, float | None]]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        self.active = self.active or {name: True for name in self.vendors}

    @property
    def level(self) -> int | None:
        levels = self.settings.levels
        return levels[self.index] if 0 <= self.index < len(levels) else None

    def observe(self, vendor: str, level: int | None, ok: bool, ttft_ms: float | None) -> None:
        if level is not None:
            self.seen[(vendor, int(level))].append((ok, ttft_ms if ok else None))

    def _close(self, level: int, run_time_s: float) -> tuple[str, ...]:
        self.level_durations_s[level] = run_time_s - self.level_started_s.get(level, run_time_s)
        stopped = []
        for vendor, active in self.active.items():
            if not active:
                continue
            outcomes = self.seen.get((vendor, level), [])
            if meets_slo(outcomes, self.settings.slo_ttft_p95_ms, self.settings.slo_error_rate):
                self.breaches[vendor] = 0
                continue
            self.breaches[vendor] = self.breaches.get(vendor, 0) + 1
            if self.breaches[vendor] >= BREACHES_TO_STOP:
                self.active[vendor] = False
                self.stopped_after[vendor] = level
                stopped.append(vendor)
        return tuple(stopped)

    def tick(self, run_time_s: float) -> StressDecision:
        """What Locust should run now. Called about once a second with the test's run time."""
        if self.done:
            return StressDecision(None, 0, (), stop=True, reason="the ladder is over")
        index = int(run_time_s // self.settings.step_s)
        closed: int | None = None
        stopped: tuple[str, ...] = ()
        if index != self.index:
            if self.index >= 0 and self.level is not None:
                closed = self.level
                stopped = self._close(closed, run_time_s)
            self.index = index
            if self.level is None or not any(self.active.values()):
                self.done = True
                reason = "every vendor stopped" if self.level is not None else "the ladder is done"
                return StressDecision(None, 0, (), closed, stopped, stop=True, reason=reason)
            self.level_started_s[self.level] = run_time_s
        level = self.level
        if level is None:  # before the first tick's level (a negative run time): nothing to run
            raise ValueError(f"no stress level at run time {run_time_s:g} s")
        classes = tuple(name for name in self.vendors if self.active.get(name))
        return StressDecision(level, level * len(classes), classes, closed, stopped)

    def stop_now(self, run_time_s: float) -> None:
        """The run ends early (run time, Ctrl-C): close the level in progress for its measured duration."""
        if not self.done and self.level is not None:
            self._close(self.level, run_time_s)
        self.done = True

    def summary(self) -> dict:
        """run.json's ``stress`` entry, read by ``avv_scoring.stress``."""
        settings = self.settings
        return {
            "levels": list(settings.levels), "step_s": settings.step_s,
            "slo_ttft_p95_ms": settings.slo_ttft_p95_ms, "slo_error_rate": settings.slo_error_rate,
            "level_durations_s": {str(k): round(v, 3) for k, v in self.level_durations_s.items()},
            "stopped_after": dict(self.stopped_after),
        }
