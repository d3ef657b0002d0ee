"""What differs between the simulator's four endpoints (simulator layer, pure): how each reads its request into the
chat body it was made from and plans it (:func:`plan_request`: the same decision key, gold and agent task as that chat
body, hence the same decisions, tokens and timing), how a client authenticates (:func:`authorized`), the shape of its
errors (:func:`error_payload`) and the writer that puts its plan on the wire (:func:`writer_for`).

- ``chat`` — ``/v1/chat/completions``: the chat body itself; :class:`~avv_sim.wire.Wire`;
- ``completions`` — ``/v1/completions``: the prompt parsed back (:mod:`avv_sim.dialects`), answered as text
  (:class:`~avv_sim.wire.TextWire`);
- ``messages`` — ``/v1/messages`` (Anthropic): read back with :func:`avv_core.api_formats.from_messages`, ``x-api-key``,
  errors ``{"type": "error", "error": {"type", "message"}}`` (:func:`messages_error_type`), Anthropic's events
  (:class:`~avv_sim.messages_wire.MessagesWire`);
- ``responses`` — ``/v1/responses`` (OpenAI Responses): read back with :func:`avv_core.api_formats.from_responses`,
  ``Authorization: Bearer``, OpenAI errors, the Responses events (:class:`~avv_sim.responses_wire.ResponsesWire`).

Messages and Responses always stream usage, so their chat body asks for it (``stream_options.include_usage``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import avv_sim.dialects as dialects
from avv_core.api_formats import CHAT, COMPLETIONS, MESSAGES, RESPONSES, from_messages, from_responses
from avv_core.json_types import JSONMapping, JSONObject
from avv_sim.agent import AgentBook
from avv_sim.decision_key import decision_key
from avv_sim.gold import GoldEntry, gold_key
from avv_sim.messages_wire import MessagesWire
from avv_sim.plan import Plan, make_plan
from avv_sim.profiles import Profile
from avv_sim.request import RequestError
from avv_sim.responses_wire import ResponsesWire
from avv_sim.truth import Exchange
from avv_sim.wire import TextWire, Wire, error_body

ENDPOINTS = (CHAT, COMPLETIONS, MESSAGES, RESPONSES)
#: request headers that carry an API key: never written to the truth log (``log_request``)
KEY_HEADERS = ("authorization", "x-api-key")
#: Messages: HTTP status → Anthropic's error ``type`` (any other 4xx: ``invalid_request_error``, 5xx: ``api_error``)
MESSAGES_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                        404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                        529: "overloaded_error"}
OVERLOADED_STATUS = 529  # Anthropic's "overloaded" answer (messages_over_limit: 529)


# ---------------------------------------------------------------------------------------------- requests


def chat_view(endpoint: str, body: JSONMapping) -> JSONObject:
    """The chat body a Messages / Responses request was converted from; :class:`RequestError` (HTTP 400, naming the
    format's own field) for a body the format does not accept."""
    if endpoint == MESSAGES:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
            raise RequestError("messages: a non-empty array of message objects is required", "messages")
        limit = body.get("max_tokens")
        if limit is None:
            raise RequestError("max_tokens: Field required", "max_tokens")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestError("max_tokens: must be a positive integer", "max_tokens")
        read_back = from_messages
    else:
        items = body.get("input")
        if not (isinstance(items, str) and items) and not (isinstance(items, list) and items):
            raise RequestError("input: a non-empty string or array of input items is required", "input")
        limit = body.get("max_output_tokens")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise RequestError("max_output_tokens: must be a positive integer", "max_output_tokens")
        read_back = from_responses
    try:
        view = read_back(body)
    except (TypeError, AttributeError, ValueError) as exc:
        raise RequestError(f"could not read the {endpoint} request: {exc}") from None
    if view.get("stream"):
        view["stream_options"] = {"include_usage": True}  # both formats always stream usage
    return view


def plan_request(profile: Profile, body: JSONObject, ex: Exchange, attempt: int, repeat: int,
                 gold: Mapping[str, GoldEntry] | None, agents: AgentBook | None = None) -> Plan:
    """The plan for a chat body, or for the chat body a completions prompt / Messages / Responses request was made
    from (the same decision key, gold and agent task, hence the same decisions), with the dialects applied: a
    completions answer in text, the ``require_reasoning_content`` check (chat) and the ``broken_template``
    quirk's fenced calls (``ex.text_tool_calls``). Messages' tool-call ids are spelled ``toolu_…``.

    Why so many parameters: it is the server's one call per request: the vendor's ``profile``, the
    request (``body``, its :class:`Exchange` ``ex``, ``attempt``, ``repeat``) and the simulator's two books (``gold``,
    ``agents``), each held by a different part of the server.
    """
    if ex.endpoint == COMPLETIONS:
        view, prompt = dialects.completion_view(body)
        ex.decision_key = key = decision_key(view)
        entry = gold.get(gold_key(view)) if gold else None
        task = agents.find(view) if agents else None
        plan = make_plan(profile, view, attempt, key, entry, repeat=repeat, agent=task, endpoint=COMPLETIONS)
        ex.text_tool_calls = dialects.as_completion(plan, prompt, profile.tokens_per_chunk, profile.tool_parser)
        return plan
    view = body if ex.endpoint == CHAT else chat_view(ex.endpoint, body)
    ex.decision_key = key = decision_key(view)
    if ex.endpoint == CHAT:
        dialects.check_reasoning_content(profile, view, key, attempt)
    plan = make_plan(profile, view, attempt, key, gold.get(gold_key(view)) if gold else None,
                     repeat=repeat, agent=agents.find(view) if agents else None, endpoint=ex.endpoint)
    if plan.has(dialects.BROKEN_TEMPLATE):
        ex.text_tool_calls = dialects.text_calls(plan, profile.tool_parser, profile.tokens_per_chunk)
    if ex.endpoint == MESSAGES:
        for call in plan.tool_calls:
            call.id = MessagesWire.tool_use_id(call.id)
    return plan


# ---------------------------------------------------------------------------------------- auth, errors


def authorized(profile: Profile, endpoint: str, headers: Mapping[str, str]) -> bool:
    """No ``api_key``, or the key in the endpoint's header: ``x-api-key`` on Messages, else ``Authorization:
    Bearer``."""
    if profile.api_key is None:
        return True
    if endpoint == MESSAGES:
        return headers.get("x-api-key", "").strip() == profile.api_key
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and token.strip() == profile.api_key


def messages_error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    return MESSAGES_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_payload(endpoint: str, status: int, message: str, etype: str, code: str | None,
                  param: str | None = None) -> bytes:
    """An error body in the endpoint's API shape: Anthropic's on Messages, OpenAI's elsewhere."""
    if endpoint == MESSAGES:
        error = {"type": messages_error_type(status), "message": message}
        return json.dumps({"type": "error", "error": error}).encode("utf-8")
    return json.dumps(error_body(message, etype, code, param)).encode("utf-8")


def over_limit_status(profile: Profile, endpoint: str) -> int:
    """Beyond ``max_concurrency`` (not queueing): 429, or on Messages the ``messages_over_limit`` status."""
    return OVERLOADED_STATUS if endpoint == MESSAGES and profile.messages_over_limit == "529" else 429


# ------------------------------------------------------------------------------------------------ writers


def writer_for(endpoint: str, profile: Profile, plan: Plan, created: int, completion_id: str) -> Wire:
    """The writer of the endpoint's events and JSON body for ``plan``."""
    if endpoint == COMPLETIONS:
        return TextWire(plan, created, completion_id)
    if endpoint == MESSAGES:
        return MessagesWire(plan, created, completion_id, usage=not profile.omit_usage)
    if endpoint == RESPONSES:
        return ResponsesWire(plan, created, completion_id, usage=not profile.omit_usage)
    return Wire(plan, created, completion_id, profile.reasoning_field)
