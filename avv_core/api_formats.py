"""The three request formats a vendor may speak, converted from the one the samples are written in (core, pure).

Samples are OpenAI chat-completions bodies. A vendor with ``endpoint: messages`` (Anthropic Messages,
``POST /v1/messages``) or ``endpoint: responses`` (OpenAI Responses, ``POST /v1/responses``) gets the same request
converted: :func:`to_messages` / :func:`to_responses`. The simulator reads such a request back into the chat body
it came from (:func:`from_messages` / :func:`from_responses`) so that it meets the decisions the chat request meets.
What cannot be converted is a :class:`ConversionError` naming the field. Each field's conversion is declared once
in :data:`FIELDS` (the README's conversion table is rendered from it).

The answer's side (stop reasons and usage mapped onto chat's) is :mod:`avv_core.api_outcomes`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from avv_core.canonical import UNPARSED, parse_json_text
from avv_core.errors import InputError
from avv_core.json_types import JSONMapping, JSONObject, JSONValue

CHAT, COMPLETIONS, MESSAGES, RESPONSES = "chat", "completions", "messages", "responses"
#: The wire formats a vendor may speak (a vendor config's ``endpoint`` values), in the order they are listed; chat
#: first, the default. Each is one module of :mod:`avv_harness.wire.formats`, which checks it has one per name.
ENDPOINTS: tuple[str, ...] = (CHAT, COMPLETIONS, MESSAGES, RESPONSES)
#: ``max_tokens`` sent to the Messages API (which requires it) when the request has none: a documented default,
#: overridden by ``--avv-max-tokens`` or a vendor's ``extra_body``.
DEFAULT_MESSAGES_MAX_TOKENS = 4096
#: ``anthropic-version`` header sent with Messages requests unless the vendor's ``headers`` set one.
ANTHROPIC_VERSION = "2023-06-01"


class ConversionError(InputError):
    """A chat request that cannot be expressed in the vendor's format (an input error: exit status 2)."""


@dataclass(frozen=True)
class Field:
    """How one chat-completions field is sent in the other formats (one row of the README's conversion table)."""

    chat: str  # the chat-completions field
    messages: str  # what the Messages API gets
    responses: str  # what the Responses API gets


FIELDS: tuple[Field, ...] = (
    Field("`messages` with role `system` / `developer` (before the first other message)", "`system` (texts joined "
          "by a blank line)", "`instructions` (likewise)"),
    Field("a `system` message after another message", "input error", "input error"),
    Field("`user` message (string, or `text` parts)", "`user` message (the same string, or `text` blocks)",
          "`input` message item, role `user`"),
    Field("`user` content parts other than `text` (images, audio)", "input error", "input error"),
    Field("`assistant` message: `content`", "`assistant` message: a `text` block (the string when it has no "
          "calls)", "`input` message item, role `assistant`, one `output_text` part"),
    Field("`assistant` message: `tool_calls`", "`tool_use` blocks (`id`, `name`, `input` = the arguments parsed; "
          "arguments that are not a JSON object: input error)", "`function_call` items (`call_id`, `name`, "
          "`arguments` as written)"),
    Field("`assistant` reasoning (`reasoning_content`, `reasoning`)", "dropped (a `thinking` block needs the "
          "vendor's signature)", "dropped"),
    Field("`tool` message (`tool_call_id`, `content`)", "`tool_result` block (`tool_use_id`, `content`) in a `user` "
          "message; consecutive results share one", "`function_call_output` item (`call_id`, `output`)"),
    Field("`tools[].function` (`name`, `description`, `parameters`)", "`tools[]` (`name`, `description`, "
          "`input_schema`; none: `{\"type\": \"object\"}`)", "`tools[]` function entries (`type: function`, "
          "`name`, `description`, `parameters`, `strict`)"),
    Field("`tool_choice` `auto` / `none` / `required` / a named function", "`{type: auto}` / `{type: none}` / "
          "`{type: any}` / `{type: tool, name}`", "`auto` / `none` / `required` / `{type: function, name}`"),
    Field("`parallel_tool_calls: false`", "`tool_choice.disable_parallel_tool_use: true`", "`parallel_tool_calls`"),
    Field("`max_tokens` / `max_completion_tokens`", f"`max_tokens` (required: {DEFAULT_MESSAGES_MAX_TOKENS} when "
          "the request has none)", "`max_output_tokens`"),
    Field("`stop` (a string or a list)", "`stop_sequences` (a list)", "input error (the Responses API has none)"),
    Field("`temperature`, `top_p`", "as is", "as is"),
    Field("`reasoning_effort`", "as is (set `thinking` through `extra_body`)", "`reasoning: {effort}`"),
    Field("`response_format` (`json_object`, `json_schema`)", "input error", "`text.format` (`{type: "
          "json_object}`, `{type: json_schema, name, schema, strict}`)"),
    Field("`logprobs`, `top_logprobs`, `logit_bias`, `seed`, `frequency_penalty`, `presence_penalty`",
          "input error", "input error"),
    Field("`stream_options`", "dropped (usage always streams)", "dropped (usage always streams)"),
    Field("any other key (a vendor's `extra_body`: `thinking`, `metadata`, `top_k`, …)", "as is", "as is"),
)

#: chat fields with no counterpart in the other formats: refused rather than silently dropped
_REFUSED = ("logprobs", "top_logprobs", "logit_bias", "seed", "frequency_penalty", "presence_penalty")
_MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens")
_DROPPED = ("stream_options",)


def _text(content: object, where: str, api: str) -> str:
    """A message's text: a string, or its ``text`` parts joined; other part types cannot be converted."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not (isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ConversionError(f"{where}.content[{i}]: a {kind!r} part cannot be sent to the {api} API "
                                      "(only text is converted)")
            texts.append(part["text"])
        return "".join(texts)
    raise ConversionError(f"{where}.content: {type(content).__name__} is not text")


def _system_and_turns(messages: object, api: str) -> tuple[list[str], list[tuple[int, JSONMapping]]]:
    if not isinstance(messages, list):
        raise ConversionError(f"messages: {type(messages).__name__}, not a list")
    system: list[str] = []
    turns: list[tuple[int, JSONMapping]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ConversionError(f"messages[{i}]: {type(message).__name__}, not an object")
        if message.get("role") in ("system", "developer"):
            if turns:
                raise ConversionError(f"messages[{i}]: a {message.get('role')} message after the conversation began "
                                      f"cannot be sent to the {api} API (only a leading one: its system prompt)")
            system.append(_text(message.get("content"), f"messages[{i}]", api))
        else:
            turns.append((i, message))
    return system, turns


def _arguments(raw: object, where: str) -> JSONObject:
    if isinstance(raw, Mapping):
        return dict(raw)
    value = parse_json_text(raw) if isinstance(raw, str) and raw.strip() else {}
    if value is UNPARSED:
        raise ConversionError(f"{where}: arguments are not JSON, so they cannot be a tool_use input") from None
    if not isinstance(value, dict):
        raise ConversionError(f"{where}: arguments are {type(value).__name__}, not a JSON object (a tool_use input)")
    return value


def _calls(message: JSONMapping, where: str) -> list[tuple[str, str, JSONValue]]:
    """(id, name, arguments as written) of an assistant message's tool calls."""
    out = []
    listed = message.get("tool_calls") or []
    if not isinstance(listed, list):
        raise ConversionError(f"{where}.tool_calls: {type(listed).__name__}, not a list")
    for j, call in enumerate(listed):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConversionError(f"{where}.tool_calls[{j}]: no function name")
        out.append((str(call.get("id") or f"call_{j}"), function["name"], function.get("arguments")))
    return out


def _refuse(body: JSONMapping, api: str, also: tuple[str, ...] = ()) -> None:
    for key in (*_REFUSED, *also):
        if body.get(key) is not None:
            raise ConversionError(f"{key}: has no counterpart in the {api} API (remove it with a transform, or use "
                                  "endpoint: chat)")


def _tools(tools: JSONValue, api: str) -> list[tuple[JSONMapping, JSONMapping]]:
    """(tool entry, its function) of a chat ``tools`` list."""
    out = []
    if not isinstance(tools or [], list):
        raise ConversionError(f"tools: {type(tools).__name__}, not a list")
    for i, tool in enumerate(tools or []):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConversionError(f"tools[{i}]: not a function tool with a name ({api} API)")
        out.append((tool, function))
    return out


def _named_choice(choice: object) -> str | None:
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return function["name"]
    return None


# ------------------------------------------------------------------------------------------- Messages


def to_messages(chat: JSONMapping, default_max_tokens: int = DEFAULT_MESSAGES_MAX_TOKENS) -> JSONObject:
    """The Anthropic Messages request for a chat-completions request (see :data:`FIELDS`)."""
    api = "Messages"
    _refuse(chat, api, also=("response_format",))
    system, turns = _system_and_turns(chat.get("messages"), api)
    out: JSONObject = {}
    for key, value in chat.items():
        if key in ("messages", "tools", "tool_choice", "parallel_tool_calls", "stop", *_MAX_TOKENS_KEYS, *_DROPPED):
            continue
        out[key] = value
    if system:
        out["system"] = "\n\n".join(system)
    messages: list[JSONObject] = []
    for i, message in turns:
        where, role = f"messages[{i}]", message.get("role")
        if role == "user":
            content = message.get("content")
            messages.append({"role": "user", "content": content if isinstance(content, str) else
                             [{"type": "text", "text": _text(content, where, api)}]})
        elif role == "assistant":
            text = _text(message.get("content"), where, api)
            calls = _calls(message, where)
            if not calls:
                messages.append({"role": "assistant", "content": text})
                continue
            blocks: list[JSONObject] = [{"type": "text", "text": text}] if text else []
            blocks += [{"type": "tool_use", "id": cid, "name": name, "input": _arguments(args, f"{where}.tool_calls")}
                       for cid, name, args in calls]
            messages.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
                      "content": _text(message.get("content"), where, api)}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "user" and isinstance(last["content"], list) and all(
                    b.get("type") == "tool_result" for b in last["content"]):
                last["content"].append(result)  # one user message holds the results of one assistant turn
            else:
                messages.append({"role": "user", "content": [result]})
        else:
            raise ConversionError(f"{where}.role: {role!r} cannot be sent to the {api} API")
    out["messages"] = messages
    tools = _tools(chat.get("tools"), api)
    if tools:
        out["tools"] = [{"name": f["name"], **({"description": f["description"]} if "description" in f else {}),
                         "input_schema": f.get("parameters") or {"type": "object"}} for _, f in tools]
    choice = _messages_choice(chat.get("tool_choice"), chat.get("parallel_tool_calls"))
    if choice is not None:
        out["tool_choice"] = choice
    limit = next((chat[k] for k in _MAX_TOKENS_KEYS if chat.get(k) is not None), None)
    out["max_tokens"] = limit if limit is not None else default_max_tokens
    stop = chat.get("stop")
    if stop is not None:
        out["stop_sequences"] = _stop_sequences(stop, api)
    return out


def _stop_sequences(stop: object, api: str) -> list[str]:
    """``stop`` (a string or a list of strings) as a list; anything else cannot be converted (a number, an object:
    ``list()`` of it would raise, or silently keep a mapping's keys)."""
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return list(stop)
    shown = type(stop).__name__ if not isinstance(stop, list) else "a list holding " + ", ".join(
        sorted({type(s).__name__ for s in stop if not isinstance(s, str)}))
    raise ConversionError(f"stop: must be a string or a list of strings to be sent to the {api} API, got {shown}")


def _messages_choice(choice: object, parallel: object) -> JSONObject | None:
    if choice is None and parallel is not False:
        return None
    name = _named_choice(choice)
    if name is not None:
        out: JSONObject = {"type": "tool", "name": name}
    elif choice in (None, "auto"):
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    else:
        raise ConversionError(f"tool_choice: {choice!r} cannot be sent to the Messages API")
    if parallel is False:
        out["disable_parallel_tool_use"] = True
    return out


def from_messages(body: JSONMapping) -> JSONObject:
    """The chat-completions request a Messages request was converted from (:func:`to_messages`'s inverse, for the
    simulator). Not lossless where :data:`FIELDS` drops or defaults something (a default ``max_tokens``, a tool
    without parameters, a single ``stop`` string)."""
    out: JSONObject = {}
    messages: list[JSONObject] = []
    system = body.get("system")
    if isinstance(system, list):
        system = "".join(b.get("text", "") for b in system if isinstance(b, Mapping))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if message.get("role") == "user":
            if isinstance(content, str):
                messages.append({"role": "user", "content": content})
                continue
            texts = [b.get("text", "") for b in content or [] if isinstance(b, Mapping) and b.get("type") == "text"]
            for block in content or []:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                     "content": _block_text(block.get("content"))})
            if texts:
                messages.append({"role": "user", "content": [{"type": "text", "text": "".join(texts)}]})
        elif message.get("role") == "assistant":
            if isinstance(content, str):
                messages.append({"role": "assistant", "content": content})
                continue
            text = _block_text(content)
            calls = [{"id": b.get("id"), "type": "function", "function": {
                "name": b.get("name"), "arguments": json.dumps(b.get("input") or {}, ensure_ascii=False)}}
                for b in content or [] if isinstance(b, Mapping) and b.get("type") == "tool_use"]
            assistant: JSONObject = {"role": "assistant", "content": text or None}
            if calls:
                assistant["tool_calls"] = calls
            messages.append(assistant)
    for key, value in body.items():
        if key in ("system", "messages", "tools", "tool_choice", "stop_sequences"):
            continue
        out[key] = value
    out["messages"] = messages
    if body.get("tools"):
        out["tools"] = [{"type": "function", "function": {
            "name": t.get("name"), **({"description": t["description"]} if "description" in t else {}),
            "parameters": t.get("input_schema")}} for t in body["tools"] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        kind = choice.get("type")
        out["tool_choice"] = ({"type": "function", "function": {"name": choice.get("name")}} if kind == "tool" else
                              {"auto": "auto", "any": "required", "none": "none"}.get(str(kind), "auto"))
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    return out


def _block_text(content: JSONValue) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, Mapping) and b.get("type") == "text")


# ------------------------------------------------------------------------------------------ Responses


def to_responses(chat: JSONMapping) -> JSONObject:
    """The OpenAI Responses request for a chat-completions request (see :data:`FIELDS`)."""
    api = "Responses"
    _refuse(chat, api, also=("stop",))
    system, turns = _system_and_turns(chat.get("messages"), api)
    out: JSONObject = {}
    for key, value in chat.items():
        if key in ("messages", "tools", "tool_choice", "reasoning_effort", "response_format", *_MAX_TOKENS_KEYS,
                   *_DROPPED):
            continue
        out[key] = value
    if system:
        out["instructions"] = "\n\n".join(system)
    if chat.get("response_format") is not None:
        out["text"] = {**(chat.get("text") or {}), "format": _text_format(chat["response_format"])}
    items: list[JSONObject] = []
    for i, message in turns:
        where, role = f"messages[{i}]", message.get("role")
        if role == "user":
            items.append({"role": "user", "content": _text(message.get("content"), where, api)})
        elif role == "assistant":
            text = _text(message.get("content"), where, api)
            if text:  # an output message: servers that refuse an assistant item with string content accept this
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": text}]})
            for cid, name, args in _calls(message, where):
                written = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
                items.append({"type": "function_call", "call_id": cid, "name": name, "arguments": written})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": str(message.get("tool_call_id") or ""),
                          "output": _text(message.get("content"), where, api)})
        else:
            raise ConversionError(f"{where}.role: {role!r} cannot be sent to the {api} API")
    out["input"] = items
    tools = _tools(chat.get("tools"), api)
    if tools:
        out["tools"] = [{"type": "function", "name": f["name"],
                         **{k: f[k] for k in ("description", "parameters", "strict") if k in f}} for _, f in tools]
    choice = chat.get("tool_choice")
    if choice is not None:
        named = _named_choice(choice)
        if named is None and choice not in ("auto", "none", "required"):
            raise ConversionError(f"tool_choice: {choice!r} cannot be sent to the {api} API")
        out["tool_choice"] = {"type": "function", "name": named} if named is not None else choice
    limit = next((chat[k] for k in _MAX_TOKENS_KEYS if chat.get(k) is not None), None)
    if limit is not None:
        out["max_output_tokens"] = limit
    if chat.get("reasoning_effort") is not None:
        reasoning = chat.get("reasoning") or {}
        if not isinstance(reasoning, Mapping):
            raise ConversionError(f"reasoning: {type(reasoning).__name__}, not an object (reasoning_effort goes into "
                                  "it)")
        out["reasoning"] = {**reasoning, "effort": chat["reasoning_effort"]}
    return out


def _text_format(response_format: JSONValue) -> JSONObject:
    """A chat ``response_format`` as the Responses API's ``text.format``."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    spec = response_format.get("json_schema") if kind == "json_schema" else None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        raise ConversionError(f"response_format: {response_format!r} cannot be sent to the Responses API "
                              "(text, json_object, or json_schema with a schema object)")
    return {"type": "json_schema", "name": spec.get("name") or "response",
            **{k: spec[k] for k in ("schema", "strict", "description") if k in spec}}


def _response_format(text_format: JSONValue) -> JSONObject | None:
    """A Responses ``text.format`` as chat's ``response_format`` (:func:`_text_format`'s inverse)."""
    kind = text_format.get("type") if isinstance(text_format, Mapping) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {k: text_format[k] for k in
                                                       ("name", "schema", "strict", "description")
                                                       if k in text_format}}
    return None


def from_responses(body: JSONMapping) -> JSONObject:
    """The chat-completions request a Responses request was converted from (:func:`to_responses`'s inverse, for
    the simulator)."""
    messages: list[JSONObject] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "message" or "role" in item and kind not in ("function_call", "function_call_output"):
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
            if item.get("role") in ("system", "developer"):
                messages.append({"role": "system", "content": content})
            else:
                messages.append({"role": item.get("role"), "content": content})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant" and (last.get("tool_calls") or
                                                                         last.get("content")):
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
    out: JSONObject = {k: v for k, v in body.items()
                           if k not in ("instructions", "input", "tools", "tool_choice", "max_output_tokens",
                                        "reasoning", "text")}
    out["messages"] = messages
    if body.get("tools"):
        out["tools"] = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters",
                                                                               "strict") if k in t}}
                        for t in body["tools"] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        out["tool_choice"] = choice
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping) and reasoning.get("effort") is not None:
        out["reasoning_effort"] = reasoning["effort"]
    text = body.get("text")
    response_format = _response_format(text.get("format")) if isinstance(text, Mapping) else None
    if response_format is not None:
        out["response_format"] = response_format
    return out
