"""The decision key: what the simulated model's choices depend on, the same for a chat request and for the
raw ``/v1/completions`` request rendered from it.

Pure. Every draw of a profile (the reference decision, flips, which tools, arguments, faults, jitter,
quirks) is made from the decision key instead of the bare request hash, so that a prompt rendered with the
shipped hermes template and parsed back (:mod:`avv_sim.prompt`) meets the very decisions its chat request
met. The key is the sha256 of the canonical JSON of the body without ``model``, ``stream``,
``stream_options`` and ``prompt`` (an empty ``tools`` list dropped), whose ``messages`` are reduced to what a
chat template renders (see :func:`conversation`). Consequences, all intended: tool-call ids, ``tool_call_id``,
``name`` and reasoning fields of a history do not change the decisions (a request transform that only
renumbers ids or injects ``reasoning_content`` meets the same model behaviour), and a body without such
fields has exactly the request hash's draws as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from avv_core.canonical import canonical_sha256
from avv_core.json_types import JSONMapping, JSONObject, JSONValue

KEY_EXCLUDED = ("model", "stream", "stream_options", "prompt", "messages")


def content_text(content: object) -> str:
    """A message's text: a string as is; a list of parts as its ``text`` parts joined; else ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def arguments_text(arguments: object) -> str:
    """Tool-call arguments as the template shows them: JSON re-serialised (``json.dumps``, key order and
    non-ASCII kept), or the raw text when it is not JSON."""
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), ensure_ascii=False)
        except ValueError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


def conversation(messages: object) -> list[JSONValue]:
    """Each message as ``{"role", "content"?, "tool_calls"?: [{"name", "arguments"}]}``: content as text
    (absent when empty), calls by name and arguments only."""
    if not isinstance(messages, list):
        return []
    out: list[JSONValue] = []
    for message in messages:
        if not isinstance(message, Mapping):
            out.append(message)
            continue
        normal: JSONObject = {"role": message.get("role")}
        text = content_text(message.get("content"))
        if text:
            normal["content"] = text
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function", call) if isinstance(call, Mapping) else {}
            if isinstance(function, Mapping):
                calls.append({"name": function.get("name"), "arguments": arguments_text(function.get("arguments"))})
        if calls:
            normal["tool_calls"] = calls
        out.append(normal)
    return out


def decision_key(body: JSONMapping) -> str:
    """sha256 hex of the body's decision view (see the module docstring)."""
    view = {k: v for k, v in body.items() if k not in KEY_EXCLUDED}
    if not view.get("tools"):
        view.pop("tools", None)
    view["messages"] = conversation(body.get("messages"))
    return canonical_sha256(view)
