"""The agent loop (wire-client layer, beside :mod:`.execute`): one work item whose sample has an ``agent`` task is
a trajectory of several requests, each a record row with its ``step``.

For each (vendor, sample, repeat) the loop sends the sample's request (step 1); while the reply has tool calls
and steps remain, it appends the assistant turn — content and ``tool_calls`` as the vendor sent them (ids kept, a
missing id made up as ``call_<step>_<i>``) — and one ``tool`` message per call with the answer the task gives
(:meth:`avv_core.agent_task.AgentTask.answers`: the first matching recorded result not used yet, else the
default, or the injected error at its step), then sends the whole conversation again. Every request is built like
a single request (:func:`avv_harness.wire.execute.build_request`), so the vendor's adapter and transforms apply to the
history too, and each step has its own retries. The loop stops at

- a final answer: a successful reply without tool calls;
- ``max_steps``: the reply of the last allowed step still has tool calls;
- a failed step (after its retries).

The trajectory is the unit of work: the rows of all its steps are returned together, submitted together and
written in one append, so it is recorded exactly once or not at all (a lost worker's trajectory restarts at step
1 elsewhere). Reasoning is not sent back (vendors differ on whether they accept it; the ``kimi`` adapter injects
the ``reasoning_content`` its deployments require).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import requests

from avv_core.agent_task import AgentTask
from avv_core.items import WorkItem
from avv_core.records import Record
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import ExecContext, client_error_record, execute_item
from avv_harness.wire.stream import Attempt

log = logging.getLogger("avv")


def assistant_turn(final: Attempt, calls: list[dict[str, str]], step: int) -> dict[str, Any]:
    """The assistant message of a reply with tool calls, as the next request carries it."""
    content = "".join(final.content)
    return {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": call["id"] or f"call_{step}_{i}", "type": "function",
         "function": {"name": call["name"], "arguments": call["arguments"]}}
        for i, call in enumerate(calls)]}


def run_trajectory(
    session: requests.Session,
    vendor: Vendor,
    url: str,
    item: WorkItem,
    ctx: ExecContext,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[Attempt], None] | None = None,
    rng: random.Random | None = None,
    steps_done: list[Record] | None = None,
) -> list[Record]:
    """Follow the item's agent task to its end (module docstring); the records of its steps, in order.
    ``steps_done`` (optional) receives each step's record as soon as it exists."""
    task: AgentTask = item.sample.agent
    body = item.sample.body
    messages = list(body["messages"])
    records: list[Record] = steps_done if steps_done is not None else []
    used: set[int] = set()  # recorded results already played back in this trajectory
    for step in range(1, task.max_steps + 1):
        sample = replace(item.sample, body={**body, "messages": messages})
        outcome = execute_item(session, vendor, url, replace(item, sample=sample), ctx, sleep=sleep,
                               on_attempt=on_attempt, rng=rng, step=step)
        record = outcome.record
        # the sample's, as for a single request (resume compares them with the file's)
        record.update(request_hash=item.sample.request_hash, expected_language=item.sample.language_check)
        final = outcome.final
        calls = [final.tool_calls[i].as_dict() for i in sorted(final.tool_calls)]
        if not final.ok or not calls or step == task.max_steps:
            records.append(record)
            break
        turn = assistant_turn(final, calls, step)
        ids = [c["id"] for c in turn["tool_calls"]]
        answers = task.answers(step, [{**c, "id": i} for c, i in zip(calls, ids, strict=True)], used)
        record["tool_results"] = json.dumps([a.as_dict() for a in answers], ensure_ascii=False)
        records.append(record)
        messages = [*messages, turn, *({"role": "tool", "tool_call_id": a.tool_call_id, "content": a.content}
                                       for a in answers)]
    return records


def run_trajectory_safely(
    session: requests.Session,
    vendor: Vendor,
    url: str,
    item: WorkItem,
    ctx: ExecContext,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> list[Record]:
    """:func:`run_trajectory`, but a failure inside the client ends the trajectory with a ``client_error`` row
    for the step it happened in (the steps before it are kept), as :func:`avv_harness.wire.execute.run_item_safely`
    does for a single request. Only BaseExceptions that are not Exceptions (the user is stopped) propagate."""
    records: list[Record] = []
    attempts: list[Attempt] = []

    def counted(att: Attempt) -> None:
        attempts.append(att)
        if on_attempt is not None:
            on_attempt(att)

    try:
        run_trajectory(session, vendor, url, item, ctx, sleep=sleep, on_attempt=counted, steps_done=records)
    except Exception as exc:  # a bug or a local problem, never the vendor's fault
        log.exception("item %s failed inside the client at step %d", item.key, len(records) + 1)
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        row = client_error_record(item, vendor, ctx, exc, started, 1)
        row["step"] = len(records) + 1
        records.append(row)
    if item.level is not None and records and records[-1].get("error_kind") == "http_429" and attempts:
        # Stress mode has no retries; a polite client still waits as told before its next request.
        sleep(ctx.policy.delay(1, attempts[-1].retry_after_s, random.Random()))
    return records


__all__ = ["assistant_turn", "run_trajectory", "run_trajectory_safely"]
