"""The agent loop (wire-client layer, beside :mod:`.execute`): one work item whose sample has an ``agent`` task is
a trajectory of several requests, each a record row with its ``step``.

For each (vendor, sample, repeat) the loop sends the sample's request (step 1); while the reply has tool calls
and steps remain, it appends the assistant turn — content and ``tool_calls`` as the vendor sent them (ids kept, a
missing id made up as ``call_<step>_<i>``) — and one ``tool`` message per call with the answer the task gives
(:meth:`avv_core.agent_task.AgentTask.answers`: the first matching recorded result not used yet, else the
default, or the injected error at its step), then sends the whole conversation again. Every request is built like
a single request (:func:`avv_harness.wire.execute.build_request`), so the vendor's adapter and transforms apply to the
history too, and each step has its own retries. The history is kept as chat messages; a vendor on another wire format
gets the whole of it converted at each step (Messages: the calls as ``tool_use`` blocks, the answers as
``tool_result`` blocks; Responses: ``function_call`` and ``function_call_output`` items). The loop stops at

- a final answer: a successful reply without tool calls;
- ``max_steps``: the reply of the last allowed step still has tool calls;
- a failed step (after its retries);
- a reply whose calls cannot be sent back in the vendor's format (Messages: arguments that are not a JSON object
  cannot be a ``tool_use`` input): that step's row is the last, its ``error_detail`` says why.

The trajectory is the unit of work: the rows of all its steps are returned together, submitted together and
written in one append, so it is recorded exactly once or not at all (a lost worker's trajectory restarts at step
1 elsewhere). Reasoning is not sent back (vendors differ on whether they accept it; the ``kimi`` adapter injects
the ``reasoning_content`` its deployments require).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace

from avv_core.api_formats import ConversionError
from avv_core.json_types import JSONObject
from avv_core.records import Record
from avv_core.samples import Sample
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.execute import ItemRun, build_request, execute_item

log = logging.getLogger("avv")


def assistant_turn(final: Attempt, calls: list[dict[str, str]], step: int) -> JSONObject:
    """The assistant message of a reply with tool calls, as the next request carries it."""
    content = "".join(final.content)
    return {"role": "assistant", "content": content or None, "tool_calls": [
        {"id": call["id"] or f"call_{step}_{i}", "type": "function",
         "function": {"name": call["name"], "arguments": call["arguments"]}}
        for i, call in enumerate(calls)]}


def run_trajectory(run: ItemRun, *, on_step: Callable[[Record], None] | None = None) -> list[Record]:
    """Follow the item's agent task to its end (module docstring); the records of its steps, in order.
    ``on_step`` (optional) receives each step's record as soon as it exists (see
    :func:`avv_harness.wire.run_item.run_item_safely`, which runs an item so that a failure inside the client
    is recorded)."""
    item, vendor, ctx = run.item, run.vendor, run.ctx
    task = item.sample.agent
    if task is None:
        raise ValueError(f"item {item.key} has no agent task")
    body = item.sample.body
    sample: Sample = item.sample
    request = build_request(sample, vendor, ctx.overrides)  # the sample's: checked when the run began
    records: list[Record] = []
    used: set[int] = set()  # recorded results already played back in this trajectory
    for step in range(1, task.max_steps + 1):
        outcome = execute_item(replace(run, item=replace(item, sample=sample)), step=step, request=request)
        record = outcome.record
        # the sample's, as for a single request (resume compares them with the file's)
        record.update(request_hash=item.sample.request_hash, expected_language=item.sample.language_check)
        final = outcome.final
        calls = [final.tool_calls[i].as_dict() for i in sorted(final.tool_calls)]
        if not final.ok or not calls or step == task.max_steps:
            records.append(record)
            if on_step is not None:
                on_step(record)
            break
        turn = assistant_turn(final, calls, step)
        ids = [c["id"] for c in turn["tool_calls"]]
        answers = task.answers(step, [{**c, "id": i} for c, i in zip(calls, ids, strict=True)], used)
        messages = [*sample.body["messages"], turn,
                    *({"role": "tool", "tool_call_id": a.tool_call_id, "content": a.content} for a in answers)]
        sample = replace(item.sample, body={**body, "messages": messages})
        failure: Exception | None = None
        try:
            request = build_request(sample, vendor, ctx.overrides)
        except ConversionError as exc:  # the reply cannot be sent back in the vendor's format: the end
            record["error_detail"] = (f"the trajectory ends here: the next request cannot be sent as "
                                      f"endpoint {vendor.dialect.endpoint} ({exc})")[:500]
            records.append(record)
            if on_step is not None:
                on_step(record)
            break
        except Exception as exc:  # the next step's failure (a chat template's): raised once this step is recorded
            failure = exc
        record["tool_results"] = json.dumps([a.as_dict() for a in answers], ensure_ascii=False)
        records.append(record)
        if on_step is not None:
            on_step(record)
        if failure is not None:
            raise failure
    return records


__all__ = ["assistant_turn", "run_trajectory"]
