"""The answer's side of the Messages and Responses formats, mapped onto chat completions' (core, pure).

:func:`finish_from_messages` and :func:`finish_from_responses` map the formats' stop reasons onto chat's
``finish_reason`` (a record's ``finish_reason`` is comparable whatever the format; the vendor's own word is kept in
the ``stop_reason`` column); :func:`usage_from_messages` / :func:`usage_from_responses` map their usage onto chat's
``prompt_tokens`` / ``completion_tokens`` / ``total_tokens`` (cache reads as ``prompt_tokens_details.cached_tokens``);
the ``*_stop_reason`` / ``*_status`` / ``*_usage`` functions are the simulator's inverse. The request side is
:mod:`avv_core.api_formats`.
"""

from __future__ import annotations

from collections.abc import Mapping

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.records import PROMPT_PARTS

# ------------------------------------------------------------------------------------------- Messages

#: Messages ``stop_reason`` → chat ``finish_reason`` (``refusal``, ``pause_turn`` and unknown reasons keep their word;
#: ``model_context_window_exceeded`` is a cut at the context window, as ``max_tokens`` is at the request's limit)
MESSAGES_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                   "model_context_window_exceeded": "length"}


def finish_from_messages(stop_reason: str | None) -> str | None:
    return None if stop_reason is None else MESSAGES_FINISH.get(stop_reason, stop_reason)


def messages_stop_reason(finish_reason: str | None) -> str | None:
    """The simulator's inverse: chat ``finish_reason`` → Messages ``stop_reason``."""
    back = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
    return None if finish_reason is None else back.get(finish_reason, finish_reason)


#: the input-side counts of a Messages usage, all of them prompt tokens in chat's terms
_MESSAGES_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def usage_from_messages(start: JSONMapping | None, delta: JSONMapping | None) -> JSONObject | None:
    """Chat usage from a Messages stream: ``message_start``'s ``usage`` (input tokens, cache creation and reads) and
    ``message_delta``'s (output tokens so far; the last one counts). None when neither arrived.

    ``prompt_tokens`` is the sum of the input-side counts, which are also kept one by one under
    :data:`~avv_core.records.PROMPT_PARTS`: the record's usage check (:func:`~avv_core.records.usage_counts`) checks
    each of them, so a negative ``input_tokens`` cannot hide in a believable sum. A count that is not a whole number
    is passed on as it is, for that check to refuse."""
    if not start and not delta:
        return None
    merged = {**(start or {}), **{k: v for k, v in (delta or {}).items() if v is not None}}
    parts = {k: merged[k] for k in _MESSAGES_INPUT if merged.get(k) is not None}
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in parts.values())
    usage: JSONObject = {"prompt_tokens": sum(parts.values()) if parts and numbers else None,
                             "completion_tokens": merged.get("output_tokens")}
    if parts:
        usage[PROMPT_PARTS] = parts
    if merged.get("cache_read_input_tokens") is not None:  # the prompt tokens billed at the cache price
        usage["prompt_tokens_details"] = {"cached_tokens": merged["cache_read_input_tokens"]}
    return {k: v for k, v in usage.items() if v is not None}


def messages_usage(prompt_tokens: int, completion_tokens: int) -> tuple[dict[str, int], dict[str, int]]:
    """The simulator's inverse: (``message_start`` usage, final ``message_delta`` usage)."""
    return {"input_tokens": prompt_tokens, "output_tokens": 1}, {"output_tokens": completion_tokens}


# ------------------------------------------------------------------------------------------ Responses


def finish_from_responses(status: str | None, incomplete_reason: str | None, has_calls: bool) -> str | None:
    """Chat ``finish_reason`` of a Responses answer: ``completed`` → ``tool_calls`` when it made calls, else
    ``stop``; ``incomplete`` for ``max_output_tokens`` → ``length``, for ``content_filter`` → ``content_filter``;
    anything else (``failed``, ``cancelled``, an unknown status) is no finish (the answer is not whole)."""
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    if status == "incomplete":
        return {"max_output_tokens": "length", "content_filter": "content_filter"}.get(str(incomplete_reason),
                                                                                      incomplete_reason or "length")
    return None


def responses_status(finish_reason: str | None) -> tuple[str, str | None]:
    """The simulator's inverse: chat ``finish_reason`` → (Responses ``status``, ``incomplete_details.reason``)."""
    if finish_reason == "length":
        return "incomplete", "max_output_tokens"
    if finish_reason == "content_filter":
        return "incomplete", "content_filter"
    return "completed", None


def usage_from_responses(usage: JSONMapping | None) -> JSONObject | None:
    """Chat usage from ``response.completed``'s ``usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``)."""
    if not usage:
        return None
    details = usage.get("input_tokens_details")
    out = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
           "total_tokens": usage.get("total_tokens"),
           "prompt_tokens_details": ({"cached_tokens": details.get("cached_tokens")}
                                     if isinstance(details, Mapping) and details.get("cached_tokens") is not None
                                     else None)}
    return {k: v for k, v in out.items() if v is not None}


def responses_usage(prompt_tokens: int, completion_tokens: int, reasoning_tokens: int = 0) -> JSONObject:
    """The simulator's inverse: ``response.completed``'s ``usage``."""
    return {"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": prompt_tokens + completion_tokens}
