"""Stress mode: step every vendor through a concurrency ladder and find its capacity.

Each level holds for ``--avv-stress-step-s`` seconds; samples are replayed round-robin meanwhile.
Every request is still a record, with the level it *started* in (``level`` column). At each level end
the SLO is checked per vendor (TTFT p95 and error rate over the records of that level so far); a
vendor that breaks it at two consecutive levels stops being escalated (its users are stopped). The
run ends when every vendor has stopped or the ladder is done.

Definitions (per vendor and level, over records that started in the level):
- ``success_rate`` = successes / requests; ``rate_429`` = requests whose error_kind is http_429 / requests.
- ``tokens_per_s`` = Σ completion_tokens of successful requests / level duration (aggregate output).
- ``capacity`` = the highest level that meets the SLO; ``first_429_level`` = the lowest level whose
  rate_429 exceeds 1 %; ``peak_tokens_per_s`` = max tokens_per_s over levels.
Retries are off in stress mode (a retry would hide the throttling being measured); after a 429 the user
waits as ``Retry-After`` says (capped) before its next request, like a well-behaved client.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError

log = logging.getLogger("avv.stress")

DEFAULT_LADDER_CAP = 32


def add_arguments(group: Any) -> None:
    group.add_argument("--avv-mode", default="verify", choices=["verify", "stress"], help="verify (default) or stress.")
    group.add_argument(
        "--avv-stress-levels", default="",
        help="Concurrency ladder, e.g. 1,2,4,8 (default doubling to 32).",
    )
    group.add_argument("--avv-stress-step-s", type=float, default=30.0, help="Seconds each level is held.")
    group.add_argument("--avv-slo-ttft-p95-ms", type=float, default=5000.0, help="SLO: TTFT p95 at most this.")
    group.add_argument(
        "--avv-slo-error-rate", type=float, default=0.01,
        help="SLO: share of failed requests at most this.",
    )


def enabled(options: Any) -> bool:
    return options is not None and getattr(options, "avv_mode", "verify") == "stress"


def parse_levels(text: str) -> list[int]:
    if not text.strip():
        return [2**i for i in range(int(math.log2(DEFAULT_LADDER_CAP)) + 1)]
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--avv-stress-levels: expected comma-separated integers, got {text!r}") from None
    if not levels or any(level < 1 for level in levels) or levels != sorted(set(levels)):
        raise InputError(f"--avv-stress-levels: levels must be increasing positive integers, got {text!r}")
    return levels


def validate_options(options: Any) -> None:
    if enabled(options):
        parse_levels(options.avv_stress_levels)
        if options.avv_stress_step_s <= 0:
            raise InputError("--avv-stress-step-s must be > 0")


@dataclass
class Plan:
    levels: list[int]
    step_s: float
    slo_ttft_p95_ms: float
    slo_error_rate: float
    index: int = -1
    active: dict[str, bool] = field(default_factory=dict)
    breaches: dict[str, int] = field(default_factory=dict)
    stopped_after: dict[str, int] = field(default_factory=dict)
    done: bool = False
    # (vendor class, level) → list of (success, ttft_ms) seen so far, for the SLO check at level end
    seen: dict[tuple[str, int], list[tuple[bool, float | None]]] = field(default_factory=lambda: defaultdict(list))

    @property
    def level(self) -> int | None:
        return self.levels[self.index] if 0 <= self.index < len(self.levels) else None


def make_ledger(state: Any, sample_ids: list[str]) -> Any:
    from .execute import RetryPolicy
    from .work import Ledger

    options = state.options
    state.stress_plan = Plan(
        levels=parse_levels(options.avv_stress_levels), step_s=options.avv_stress_step_s,
        slo_ttft_p95_ms=options.avv_slo_ttft_p95_ms, slo_error_rate=options.avv_slo_error_rate,
        active={name: True for name in state.vendors},
    )
    state.policy = RetryPolicy(retries=0, backoff_base_s=options.avv_backoff_s,
                               retry_after_cap_s=options.avv_retry_after_cap_s)
    return Ledger.round_robin(state.vendors, sample_ids)


def current_level(state: Any, vendor: str) -> int | None:
    plan = state.stress_plan
    return plan.level if plan is not None else None


def observe(state: Any, record: dict[str, Any]) -> None:
    plan = state.stress_plan
    if plan is None or record.get("level") is None:
        return
    from .locust_plugin import _class_of

    ok = record.get("status") == "success"
    plan.seen[(_class_of(record), int(record["level"]))].append((ok, record.get("ttft_ms") if ok else None))


def meets_slo(outcomes: list[tuple[bool, float | None]], slo_ttft_p95_ms: float, slo_error_rate: float) -> bool:
    """A level meets the SLO when error share ≤ slo_error_rate and TTFT p95 (successes) ≤ slo_ttft_p95_ms.
    A level with no finished request does not meet it."""
    if not outcomes:
        return False
    errors = sum(1 for ok, _ in outcomes if not ok) / len(outcomes)
    ttfts = sorted(t for ok, t in outcomes if ok and t is not None)
    if errors > slo_error_rate or not ttfts:
        return False
    return percentile(ttfts, 95) <= slo_ttft_p95_ms


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of an already sorted list."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    low = int(math.floor(pos))
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def _close_level(plan: Plan) -> None:
    level = plan.level
    for vendor, active in plan.active.items():
        if not active:
            continue
        if meets_slo(plan.seen.get((vendor, level), []), plan.slo_ttft_p95_ms, plan.slo_error_rate):
            plan.breaches[vendor] = 0
        else:
            plan.breaches[vendor] = plan.breaches.get(vendor, 0) + 1
            if plan.breaches[vendor] >= 2:
                plan.active[vendor] = False
                plan.stopped_after[vendor] = level
                log.info("stress: %s broke the SLO at two consecutive levels; not escalated past %d", vendor, level)


def tick(state: Any, shape: Any) -> tuple[int, float, list] | None:
    plan: Plan = state.stress_plan
    if plan is None or plan.done:
        return None
    index = int(shape.get_run_time() // plan.step_s)
    if index != plan.index:
        if plan.index >= 0:
            _close_level(plan)
        plan.index = index
        if index >= len(plan.levels) or not any(plan.active.values()):
            plan.done = True
            state.ledger.drop_pending()
            return None
        log.info("stress: level %d (%d of %d)", plan.level, index + 1, len(plan.levels))
    runner = shape.runner
    classes = [cls for cls in runner.environment.user_classes if plan.active.get(cls.__name__)]
    for cls in runner.environment.user_classes:
        # Equal weights, no fixed counts: Locust's dispatcher re-reads weights on every start() but
        # fixed_count only once, and level × vendors users split evenly by weight.
        cls.fixed_count, cls.weight = 0, 1
    total = plan.level * len(classes)
    return total, float(total), classes


def finished(state: Any) -> bool:
    plan = state.stress_plan
    return bool(plan and plan.done)


def write_outputs(state: Any) -> None:
    """stress.csv, capacity.csv, plots and the capacity table (report and terminal)."""
    from . import stress_report

    try:
        text = stress_report.write_stress_outputs(state.run_dir, state.stress_plan)
        print("\n" + text, flush=True)
    except Exception as exc:  # records stay on disk; the report can be rebuilt with avv-score stress
        log.error("stress report failed: %s", exc)
