"""Run one work item safely (wire-client layer, above :mod:`.execute` and :mod:`.agent_loop`): the one way a
Locust user runs an item, a single request or an agent trajectory alike.

An item is run as steps: a single request is one step (:func:`avv_harness.wire.execute.execute_item`), an agent
task one step per request (:func:`avv_harness.wire.agent_loop.run_trajectory`). Every exception inside the
client ends the item with a ``client_error`` row for the step it happened in (the steps before it are kept): no
path leaves an item neither recorded nor given back. Only BaseExceptions that are not Exceptions propagate
(``GreenletExit``: the user is being stopped, and its caller gives the item back). In stress mode (no retries),
an item whose last row is a 429 waits as the vendor told before the user's next request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Protocol

from avv_core.items import WorkItem
from avv_core.records import STATUS_FAILED, Record
from avv_harness.inputs.config import Vendor
from avv_harness.wire.agent_loop import run_trajectory
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.execute import BACKOFF_RANDOM, ExecContext, ItemRun, execute_item, item_identity

log = logging.getLogger("avv")

__all__ = ["ItemSteps", "client_error_record", "run_item_safely"]


class ItemSteps(Protocol):
    """How an item's requests are made: ``on_step`` receives each step's record as soon as it exists."""

    def __call__(self, run: ItemRun, *, on_step: Callable[[Record], None]) -> object: ...


def _single_request(run: ItemRun, *, on_step: Callable[[Record], None]) -> None:
    """A single-request item: one step, its record."""
    on_step(execute_item(run).record)


def client_error_record(item: WorkItem, vendor: Vendor, ctx: ExecContext, exc: BaseException,
                        started_at: str, attempts: int) -> Record:
    """The record of an item whose run raised inside the client: recorded, never left in flight."""
    return Record({
        **item_identity(item, ctx, started_at, vendor), "is_baseline": vendor.is_baseline, "status": STATUS_FAILED,
        "error_kind": "client_error", "error_detail": f"{type(exc).__name__}: {str(exc)[:300]}",
        "attempts": max(1, attempts), "usage_reported": False, "saw_tool_call_delta": False,
        "tool_call_count": 0,
    })


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def run_item_safely(run: ItemRun) -> list[Record]:
    """The item's records (module docstring): one row, or one per step of an agent task. A failure inside the
    client becomes a ``client_error`` row naming the step it happened in (agent tasks), when that step began and
    how many attempts it made."""
    item, vendor, ctx, on_attempt = run.item, run.vendor, run.ctx, run.on_attempt
    trajectory = item.sample.agent is not None
    steps: ItemSteps = run_trajectory if trajectory else _single_request
    records: list[Record] = []
    attempts: list[Attempt] = []
    step_began = _now()
    attempts_before_step = 0

    def counted(att: Attempt) -> None:
        attempts.append(att)
        if on_attempt is not None:
            on_attempt(att)

    def step_done(record: Record) -> None:
        nonlocal step_began, attempts_before_step
        records.append(record)
        step_began, attempts_before_step = _now(), len(attempts)

    try:
        steps(run.reporting_to(counted), on_step=step_done)
    except Exception as exc:  # a bug or a local problem, never the vendor's fault
        step = len(records) + 1
        if trajectory:
            log.exception("item %s failed inside the client at step %d", item.key, step)
        else:
            log.exception("item %s failed inside the client", item.key)
        row = client_error_record(item, vendor, ctx, exc, step_began, len(attempts) - attempts_before_step)
        if trajectory:
            row["step"] = step
        records.append(row)
    if item.level is not None and records and records[-1].get("error_kind") == "http_429" and attempts:
        # Stress mode has no retries; a polite client still waits as told before its next request.
        run.sleep(ctx.policy.delay(1, attempts[-1].retry_after_s, run.rng or BACKOFF_RANDOM))
    return records
