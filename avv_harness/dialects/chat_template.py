"""Raw-completions mode, the prompt: a model's chat template read from local files and rendered the way
transformers' ``apply_chat_template`` renders it — never downloaded.

Layer: inputs (a template is checked when the config is loaded, read once per process on first use, and
rendered per request; rendering is pure).

Sources: a Jinja file (special tokens from a ``tokenizer_config.json`` beside it, if any), a
``tokenizer_config.json`` whose ``chat_template`` is a string or a list of named templates (``tool_use`` is
used when the request has tools, as transformers does, else ``default``), or a tokenizer folder holding
``chat_template.jinja`` and/or ``tokenizer_config.json``.

Rendering, as transformers: ``jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True)`` with ``loopcontrols`` and the ``{% generation %}`` tag, the ``tojson`` filter that keeps
key order and non-ASCII text, ``raise_exception`` and ``strftime_now``; variables ``messages``, ``tools``,
``add_generation_prompt=True`` and the special tokens (``bos_token``, ``eos_token``, …). Before rendering,
tool-call ``arguments`` given as JSON strings become objects, as vLLM does for templates.

Limits (a template is the user's input, and the rendering runs in the process that times every vendor): one
rendering may take :data:`MAX_STEPS` steps (loop iterations and calls, macros and ``loop()`` included),
produce :data:`MAX_OUTPUT_CHARS` characters (every piece written, also into a macro's or ``set`` block's
buffer), build no string past that size, no list past :data:`MAX_ITEMS` items and no integer past 100,000 bits
(``*``, ``+``, ``~``, ``%``, ``**``, method calls and filters; size arguments
of ``center``/``indent``/``wordwrap``/``truncate``/``slice``/``batch``) and run :data:`MAX_RENDER_S`. Over a
limit it stops with :class:`TemplateLimitError` naming the template: at config load (each template is
rendered once for a one-message conversation) that is an input error; during a run the item is recorded
``client_error`` with the reason. How: the compiled tree is rewritten so each ``for`` iterates through a
counting wrapper and template text and ``~`` go through checked functions; the sandbox's ``call``,
``call_binop`` and ``finalize`` hooks count and check the rest.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import jinja2
from jinja2 import nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from avv_core.canonical import JSON_ERRORS
from avv_core.errors import InputError
from avv_core.json_input import parse_json
from avv_core.json_types import JSONObject

TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"


#: Steps (loop iterations and calls) one rendering may take.
MAX_STEPS = 1_000_000
#: Characters one rendering may produce, and the largest string or list it may build.
MAX_OUTPUT_CHARS = 32_000_000
#: Items of the largest list, tuple or mapping one rendering may build.
MAX_ITEMS = 1_000_000
#: Seconds one rendering may run (checked at every step).
MAX_RENDER_S = 2.0
_MAX_INT_BITS = 100_000  # the largest integer ``**`` or ``*`` may build
_MAX_SIZE_ARGUMENT = 100_000  # as Jinja's own MAX_RANGE: widths and counts given to the size filters
_SIZE_FILTERS = ("center", "indent", "wordwrap", "truncate", "slice", "batch")
_BUDGET = "__avv_budget"  # the render variable holding this rendering's _Budget
_T = TypeVar("_T")


class TemplateRenderError(RuntimeError):
    """The template refused a request (``raise_exception``) or failed on it: a client-side failure."""


class TemplateLimitError(TemplateRenderError):
    """A rendering went past one of the module's limits (the message names the template and the limit)."""


class _OverLimit(jinja2.exceptions.TemplateError):
    """Raised inside the rendering (a TemplateError, so Jinja passes it through); becomes TemplateLimitError."""


class _Budget:
    """What one rendering has spent; raises TemplateLimitError past a limit."""

    def __init__(self) -> None:
        self.steps = 0
        self.chars = 0
        self.deadline = time.monotonic() + MAX_RENDER_S

    def step(self) -> None:
        self.steps += 1
        if self.steps & 255 == 0:  # the clock every 256 steps: a step is well under a microsecond
            if self.steps > MAX_STEPS:
                raise _OverLimit(f"more than {MAX_STEPS:,} steps (loop iterations and calls)")
            if time.monotonic() > self.deadline:
                raise _OverLimit(f"rendering took more than {MAX_RENDER_S:g} s")

    def wrote(self, count: int) -> None:
        self.chars += count
        if self.chars > MAX_OUTPUT_CHARS:
            raise _OverLimit(f"more than {MAX_OUTPUT_CHARS:,} characters of output")

    def loop(self, iterable: Iterable[_T]) -> Iterator[_T]:
        """The iterable of a ``for``: each item is a step."""
        for item in iterable:
            self.step()
            yield item


def _check_size(size: int, limit: int = MAX_OUTPUT_CHARS) -> None:
    if size > limit:
        raise _OverLimit(f"a value of {size:,} {'characters' if limit == MAX_OUTPUT_CHARS else 'items'} "
                         f"(limit {limit:,})")


def _check_value(value: _T) -> _T:
    if isinstance(value, str):
        _check_size(len(value))
    elif isinstance(value, (list, tuple, dict)):
        _check_size(len(value), MAX_ITEMS)
    elif isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise _OverLimit(f"an integer of more than {_MAX_INT_BITS:,} bits")
    return value


def _budget_of(context: Context) -> _Budget | None:
    budget = context.get(_BUDGET)
    return budget if isinstance(budget, _Budget) else None


class _LimitedCodeGenerator(CodeGenerator):
    """Rewrites the template's tree before compiling it: every ``for`` iterates through ``_Budget.loop``,
    template text goes through ``_Budget.text`` and ``~`` through ``_Budget.concat`` (the sandbox has no hook
    for any of them). They are called as filters: filters bypass the sandbox's ``call`` hook, so normal
    templates pay little (a rendering of the shipped hermes template with 20 messages: ~0.5 ms)."""

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        for loop in node.find_all(nodes.For):
            loop.iter = _budget_filter("loop", loop.iter)
        for output in node.find_all(nodes.Output):
            output.nodes = [_budget_filter("text", nodes.Const(child.data)) if isinstance(child, nodes.TemplateData)
                            else child for child in output.nodes]
        for parent in node.find_all(nodes.Node):
            for field_name, value in parent.iter_fields():
                if isinstance(value, nodes.Concat):
                    setattr(parent, field_name, _budget_concat(value))
                elif isinstance(value, list) and any(isinstance(v, nodes.Concat) for v in value):
                    setattr(parent, field_name, [_budget_concat(v) if isinstance(v, nodes.Concat) else v
                                                 for v in value])
        super().visit_Template(node, frame)


def _budget_filter(method: str, value: nodes.Node) -> nodes.Filter:
    """``value | __avv_<method>`` as a tree node: the rendering's ``_Budget.<method>(value)``."""
    return nodes.Filter(value, f"__avv_{method}", [], [], None, None)


def _budget_concat(node: nodes.Concat) -> nodes.Filter:
    return _budget_filter("concat", nodes.Tuple(node.nodes, "load"))


def _budget_filters() -> dict[str, Callable[..., object]]:
    """The filters the rewritten tree calls (each finds the rendering's budget in its context)."""

    @pass_context
    def loop(context: Context, iterable: Iterable[object]) -> Iterable[object]:
        budget = _budget_of(context)
        return iterable if budget is None else budget.loop(iterable)

    @pass_context
    def text(context: Context, data: str) -> str:
        budget = _budget_of(context)
        if budget is not None:
            budget.wrote(len(data))
        return data

    @pass_context
    def concat(context: Context, parts: tuple[object, ...]) -> str:
        _check_size(sum(len(p) if isinstance(p, str) else len(str(p)) for p in parts))
        return "".join(map(str, parts))

    return {"__avv_loop": loop, "__avv_text": text, "__avv_concat": concat}


class _GenerationTag(Extension):
    """``{% generation %}…{% endgeneration %}`` (transformers marks assistant text with it): renders its body."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _render_body(caller: Callable[[], str]) -> str:
        return caller()


def _tojson(value: object, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@pass_context
def _count_output(context: Context, value: _T) -> _T:
    """``finalize``: every ``{{ … }}`` written counts towards the output limit."""
    budget = _budget_of(context)
    if budget is not None:
        budget.wrote(len(value) if isinstance(value, str) else len(str(value)))
    return value


class _LimitedSandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox with this module's limits (module docstring)."""

    code_generator_class = _LimitedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call(__self, __context: Context, __obj: object, *args: object, **kwargs: object) -> object:  # noqa: N805 - Jinja's names
        budget = _budget_of(__context)
        if budget is not None:
            budget.step()
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, int) and abs(arg) > MAX_OUTPUT_CHARS:  # str.center(10**9), "x".zfill(…)
                raise _OverLimit(f"a call with the argument {arg:,} (limit {MAX_OUTPUT_CHARS:,})")
        return _check_value(super().call(__context, __obj, *args, **kwargs))

    def call_binop(self, context: Context, operator: str, left: object, right: object) -> object:
        budget = _budget_of(context)
        if budget is not None:
            budget.step()
        sized = (str, list, tuple)
        limit = MAX_OUTPUT_CHARS if isinstance(left, str) or isinstance(right, str) else MAX_ITEMS
        if operator == "*" and isinstance(right, int) and isinstance(left, sized):
            _check_size(len(left) * right, limit)
        elif operator == "*" and isinstance(left, int) and isinstance(right, sized):
            _check_size(len(right) * left, limit)
        elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
            _check_size(len(left) + len(right), limit)
        elif (operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1
              and right * max(1, abs(left).bit_length() - 1) > _MAX_INT_BITS):
            raise _OverLimit(f"{left} ** {right}: an integer of more than {_MAX_INT_BITS:,} bits")
        return _check_value(super().call_binop(context, operator, left, right))


def _size_limited(name: str, fn: Callable[..., object]) -> Callable[..., object]:
    """A size filter (``center(width)``, ``slice(n)`` …) refusing a width or count past _MAX_SIZE_ARGUMENT."""

    @functools.wraps(fn)
    def limited(*args: object, **kwargs: object) -> object:
        for arg in (*args[1:], *kwargs.values()):
            if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > _MAX_SIZE_ARGUMENT:
                raise _OverLimit(f"filter {name} with {arg:,} (limit {_MAX_SIZE_ARGUMENT:,})")
        return _check_value(fn(*args, **kwargs))

    return limited


def _environment() -> ImmutableSandboxedEnvironment:
    env = _LimitedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols],
                          finalize=_count_output)
    env.filters["tojson"] = _tojson
    env.filters.update(_budget_filters())
    for name in _SIZE_FILTERS:
        env.filters[name] = _size_limited(name, env.filters[name])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _token_text(value: object) -> str | None:
    """A special token as tokenizer configs store it: a string or an AddedToken dict with ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # the file or folder it came from
    templates: dict[str, str]  # name → Jinja source ("default", and "tool_use" when the tokenizer has one)
    special_tokens: dict[str, str] = field(default_factory=dict)  # bos_token, eos_token, …

    @cached_property
    def _compiled(self) -> dict[str, jinja2.Template]:
        env = _environment()
        return {name: env.from_string(text) for name, text in self.templates.items()}

    def render(self, messages: list[JSONObject], tools: list[JSONObject] | None = None) -> str:
        """The prompt for ``messages`` and ``tools`` with the generation prompt added."""
        name = "tool_use" if tools and "tool_use" in self.templates else "default"
        if name not in self.templates:
            raise TemplateRenderError(f"{self.source}: no default chat template (has: {', '.join(self.templates)})")
        variables = {"bos_token": "", "eos_token": "", **self.special_tokens, _BUDGET: _Budget()}
        try:
            return self._compiled[name].render(messages=prepare_messages(messages), tools=tools or None,
                                               documents=None, add_generation_prompt=True, **variables)
        except _OverLimit as exc:
            raise TemplateLimitError(f"chat template {self.source}: {exc}") from None
        except RecursionError:  # a macro or recursive loop that calls itself without end
            raise TemplateLimitError(f"chat template {self.source}: recursion too deep") from None
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateRenderError(f"chat template {Path(self.source).name}: {exc}") from None


def prepare_messages(messages: list[JSONObject]) -> list[JSONObject]:
    """Messages as templates expect them: tool-call ``arguments`` that are JSON strings become objects
    (vLLM does the same before rendering); anything else is passed on unchanged."""
    out = []
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    try:
                        call = {**call, "function": {**function, "arguments": json.loads(function["arguments"])}}
                    except JSON_ERRORS:
                        pass  # not JSON we can read: the template gets the string
                calls.append(call)
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def _read_json(path: Path) -> JSONObject:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError:
        raise InputError(f"{path}: not UTF-8 text") from None
    data = parse_json(text, str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _special_tokens(config: JSONObject) -> dict[str, str]:
    out = {}
    for key, value in config.items():
        text = _token_text(value)
        if key.endswith("_token") and text is not None:
            out[key] = text
    return out


def _templates_of(config: JSONObject, path: Path) -> dict[str, str]:
    value = config.get("chat_template")
    if isinstance(value, str) and value.strip():
        return {"default": value}
    if isinstance(value, list):
        pairs = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        named = {str(k): v for k, v in pairs.items() if k and isinstance(v, str)}
        if named:
            return named
    raise InputError(f"{path}: has no chat_template")


def load_chat_template(path: str | os.PathLike[str]) -> ChatTemplate:
    """Read a template file, tokenizer_config.json or tokenizer folder; InputError naming the file."""
    path = Path(path)
    if path.is_dir():
        config_path = path / TOKENIZER_CONFIG
        config = _read_json(config_path) if config_path.is_file() else {}
        if (path / TEMPLATE_FILE).is_file():
            return ChatTemplate(str(path), {"default": _read_text(path / TEMPLATE_FILE)}, _special_tokens(config))
        if not config_path.is_file():
            raise InputError(f"{path}: neither {TEMPLATE_FILE} nor {TOKENIZER_CONFIG} in this folder")
        return ChatTemplate(str(path), _templates_of(config, config_path), _special_tokens(config))
    if path.suffix == ".json":
        config = _read_json(path)
        return ChatTemplate(str(path), _templates_of(config, path), _special_tokens(config))
    beside = path.parent / TOKENIZER_CONFIG
    tokens = _special_tokens(_read_json(beside)) if beside.is_file() else {}
    return ChatTemplate(str(path), {"default": _read_text(path)}, tokens)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


#: The conversation every template is rendered for once at config load (limits are checked, refusals are not).
TRIAL_MESSAGES = ({"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hello"})
TRIAL_TOOLS = ({"type": "function", "function": {"name": "ping", "description": "Ping.",
                                                 "parameters": {"type": "object", "properties": {}}}},)


def check_chat_template(path: str) -> str | None:
    """None when the template loads, compiles and renders a small conversation within the limits, else the
    problem (for the config's error list). A template that refuses the trial (``raise_exception``) or fails
    on it is not an error here: it may want other messages."""
    try:
        template = load_chat_template(path)
        template._compiled  # noqa: B018 - compiling is part of the check
    except InputError as exc:
        return str(exc)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        return f"{path}: line {exc.lineno}: not a valid Jinja template ({exc.message})"
    for tools in (None, list(TRIAL_TOOLS)):
        try:
            template.render([dict(m) for m in TRIAL_MESSAGES], tools)
        except TemplateLimitError as exc:
            return f"{exc} (rendering a two-message trial conversation)"
        except Exception:  # noqa: S112 - the template's own failure on the trial: the run will say if it matters
            continue
    return None
