"""What the run's shape returns to Locust at each tick (run-controller layer): every vendor's users until each
item is recorded, or the stress ladder's level; stop at -t/--run-time. Asked through
:meth:`avv_harness.run.controller.RunController.next_load` by :class:`avv_harness.locust.plugin.RunShape`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from avv_harness.run.lifecycle import RunLifecycle
from avv_harness.run.state import RunState
from avv_harness.run.stress_policy import StressPolicy

if TYPE_CHECKING:
    from locust import User

log = logging.getLogger("avv")

__all__ = ["LoadDecision", "next_load"]


@dataclass(frozen=True)
class LoadDecision:
    """What the run's shape returns to Locust: ``None`` (stop) or (users, spawn rate[, classes])."""

    users: int = 0
    spawn_rate: float = 1.0
    classes: tuple[type[User], ...] | None = None  # User classes (stress mode); None = all
    stop: bool = False

    def as_tick(self) -> tuple | None:
        if self.stop:
            return None
        if self.classes is None:
            return self.users, self.spawn_rate
        return self.users, self.spawn_rate, list(self.classes)


def next_load(lifecycle: RunLifecycle, run_time_s: float, user_classes: list[type[User]]) -> LoadDecision:
    """The load at ``run_time_s`` of the run :meth:`RunLifecycle.run_for_tick` gives (with the web UI, a tick
    after a run has ended is a new START: it begins a new run). ``user_classes``: the environment's."""
    run = lifecycle.run_for_tick()
    if run is None:
        return LoadDecision(stop=True)
    options = lifecycle.options
    run.last_run_time_s = run_time_s
    limit = options.run_time_s
    if limit and run_time_s >= limit and run.stop_reason is None:
        if run.stress is not None:
            run.stress.stop_now(run_time_s)
        lifecycle.stop_run("run_time", f"--run-time {limit:g}s reached: the run stops")
    if run.stop_reason == "run_time" or run.finished:
        return LoadDecision(stop=True)
    if run.stress is not None:
        return _stress_load(run, run.stress, run_time_s, user_classes)
    if run.ledger.finished:
        return LoadDecision(stop=True)
    total = sum(v.concurrency for v in lifecycle.vendors.values())
    rate = options.spawn_rate
    return LoadDecision(total, float(rate if rate > 0 else max(total, 1)))


def _stress_load(run: RunState, stress: StressPolicy, run_time_s: float,
                 user_classes: list[type[User]]) -> LoadDecision:
    decision = stress.tick(run_time_s)
    for name in decision.newly_stopped:
        log.info("stress: %s broke the SLO at two consecutive levels; not escalated past %d", name,
                 stress.stopped_after[name])
    if decision.stop:
        run.ledger.drop_pending()
        log.info("stress: %s", decision.reason)
        return LoadDecision(stop=True)
    if decision.level != run.announced_level:
        run.announced_level = decision.level
        log.info("stress: level %d", decision.level)
    classes = {cls.__name__: cls for cls in user_classes}
    # Every stress User class has weight 1 and no fixed_count (see locust_plugin.user_classes), so
    # level × vendors users split evenly: Locust's dispatcher re-reads weights on every start().
    return LoadDecision(decision.users, float(decision.users), tuple(classes[n] for n in decision.classes))
