"""One work item = (vendor, sample, repeat): build the request, run attempts with retries, make the record.

Retries: on ``connect``, ``timeout``, ``http_429``, ``http_5xx``, ``overloaded`` and ``truncated``; exponential back-off
with full jitter (``base · 2^(n−1) · U(0.5, 1)``, capped), ``Retry-After`` honoured up to
``retry_after_cap_s``. The record's timings are those of the final attempt; ``wall_ms`` covers all.

The request body, in order: the sample body → the vendor's transforms (its adapter's, then its own) →
``model``, ``stream``, usage, provider pinning → the vendor's ``extra_body`` → the global overrides. The vendor's
wire format (:mod:`avv_harness.wire.formats`) then makes the body it sends from that chat body: as is (chat), a
``prompt`` (raw completions), or converted (Messages, Responses: :mod:`avv_core.api_formats`; every sample is
converted for every such vendor once at start-up, :func:`check_requests`, so a sample that cannot be is an input
error before any request).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

import requests
from urllib3.exceptions import InsecureRequestWarning

from avv_core.api_formats import ConversionError
from avv_core.canonical import parses_as_json
from avv_core.errors import InputError
from avv_core.items import ATTEMPT_HEADER, ITEM_HEADER, VendorId, WorkItem
from avv_core.json_types import JSONObject, JSONValue
from avv_core.records import STATUS_FAILED, STATUS_SUCCESS, Record, cached_tokens, usage_counts
from avv_core.samples import Sample, SampleSet
from avv_core.tool_formats import find_text_calls, request_tool_names
from avv_harness.dialects.overrides import Overrides, deep_merge
from avv_harness.dialects.transforms import apply_transforms
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import redact_url
from avv_harness.wire.attempt import Attempt
from avv_harness.wire.faults import RETRYABLE
from avv_harness.wire.formats import FORMATS
from avv_harness.wire.headers import basic_auth, merge_headers
from avv_harness.wire.requests_transport import EnvSettingsCache, share_environment_settings
from avv_harness.wire.sse import DEFAULT_MAX_EVENT_BYTES
from avv_harness.wire.stream import stream_chat

__all__ = ["RETRYABLE", "ExecContext", "ItemOutcome", "ItemRun", "RetryPolicy", "attempt_record", "build_body",
           "build_headers", "build_request", "check_requests", "endpoint_url", "execute_item", "item_identity",
           "vendor_session"]


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    retry_after_cap_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after_s is not None:
            return min(retry_after_s, self.retry_after_cap_s)
        backoff = self.backoff_base_s * (2 ** (attempt - 1)) * rng.uniform(0.5, 1.0)
        return min(backoff, self.backoff_cap_s)


def build_body(sample: Sample, vendor: Vendor, overrides: Overrides | None = None) -> JSONObject:
    """The chat request body: sample body after the vendor's transforms, ``model`` = vendor model_id,
    ``stream: true`` (``false`` for a sample marked ``_stream: false``: then no ``stream_options``), usage requested
    unless the vendor disables it, provider pinning, vendor ``extra_body`` merged (deeply), then the global
    overrides. The sample itself is never changed."""
    body: JSONObject = apply_transforms(sample.body, vendor.dialect.transforms)
    body["model"] = vendor.model_id
    body["stream"] = sample.streamed
    if vendor.include_usage and sample.streamed:
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    else:
        body.pop("stream_options", None)
    if vendor.provider:
        body = deep_merge(body, {"provider": {"only": list(vendor.provider)}})
    if vendor.extra_body:
        body = deep_merge(body, vendor.extra_body)
    return overrides.apply_body(body) if overrides is not None else body


def build_request(sample: Sample, vendor: Vendor, overrides: Overrides | None = None) -> tuple[str, JSONObject]:
    """(endpoint path, body): the chat body in the vendor's wire format (as is, its ``/v1/completions`` form, or
    converted to Messages / Responses). :class:`~avv_core.api_formats.ConversionError` when it cannot be."""
    wire = FORMATS[vendor.dialect.endpoint]
    return wire.path, wire.body(build_body(sample, vendor, overrides), vendor.dialect)


#: Requests already built and encoded, by (the sample body's hash, streamed, vendor, overrides): every repeat of a
#: sample to a vendor sends the same bytes, and building and encoding them again cost ~0.1 ms per request. The
#: entry holds the vendor and overrides themselves, so their ids cannot be taken by other objects while it lives.
_REQUESTS: dict[tuple[str, bool, int, int], tuple[Vendor, Overrides | None, str, JSONObject, bytes]] = {}
MAX_CACHED_REQUESTS = 4096  # a few MB at most; emptied when full (a run cycles through its samples per repeat)


def encoded_request(sample: Sample, vendor: Vendor, overrides: Overrides | None = None) -> tuple[str, JSONObject,
                                                                                                bytes]:
    """(path, body, the body's JSON bytes) of :func:`build_request`, built once per sample, vendor and overrides.
    The body is shared: readers only."""
    key = (sample.request_hash, sample.streamed, id(vendor), id(overrides))
    hit = _REQUESTS.get(key)
    if hit is not None and hit[0] is vendor and hit[1] is overrides:
        return hit[2], hit[3], hit[4]
    path, request_body = build_request(sample, vendor, overrides)
    body = json.dumps(request_body, ensure_ascii=False).encode("utf-8")
    if len(_REQUESTS) >= MAX_CACHED_REQUESTS:
        _REQUESTS.clear()
    _REQUESTS[key] = (vendor, overrides, path, request_body, body)
    return path, request_body, body


#: The client's own headers, the lowest layer of :func:`build_headers`.
CLIENT_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "text/event-stream",
    "Accept-Encoding": "identity",  # a compressed stream is buffered by the vendor's encoder (decoded if sent)
}


def build_headers(vendor: Vendor, item_tag: str, attempt: int,
                  overrides: Overrides | None = None) -> dict[str, str]:
    """The request's headers, by the one rule of :mod:`avv_harness.wire.headers` (later layers win, names compared
    case-insensitively): the client's and the format's defaults (``anthropic-version``), the key as the format
    sends it, the URL's ``user:password@`` as Basic auth, the vendor's ``headers``, ``--avv-header``; the item
    tags last (config cannot name them)."""
    wire = FORMATS[vendor.dialect.endpoint]
    url_auth = basic_auth(vendor.url)
    return merge_headers(
        CLIENT_HEADERS, wire.default_headers(),
        wire.auth_headers(vendor.api_key) if vendor.api_key else {},
        {"Authorization": url_auth} if url_auth else {},
        vendor.headers, dict(overrides.headers if overrides is not None else ()),
        {ITEM_HEADER: item_tag, ATTEMPT_HEADER: str(attempt)})


def unsendable(samples: SampleSet, vendors: Iterable[Vendor], overrides: Overrides | None = None,
               also: Callable[[JSONObject, str], str | None] | None = None) -> dict[VendorId, dict[str, str]]:
    """Vendor → {sample id: why} for the samples its wire format cannot carry (the conversion's error, or what
    ``also(sample body, endpoint)`` says): a conformance run does not send them to that vendor (the Responses API has
    no ``stop``, the Messages API no ``response_format``), where a verify run refuses them (:func:`check_requests`)."""
    out: dict[VendorId, dict[str, str]] = {}
    for vendor in vendors:
        wire = FORMATS[vendor.dialect.endpoint]
        for sample in samples.samples:
            why = also(sample.body, wire.name) if also is not None else None
            if why is None and wire.converts:
                try:
                    build_request(sample, vendor, overrides)
                except ConversionError as exc:
                    why = f"not sent ({wire.name}: {exc})"
            if why is not None:
                out.setdefault(VendorId(vendor.model, vendor.name), {})[sample.sample_id] = why
    return out


#: How many requests that cannot be converted :func:`check_requests` lists before it stops looking.
MAX_LISTED_CONVERSIONS = 20


def check_requests(samples: SampleSet, vendors: Iterable[Vendor], overrides: Overrides | None = None) -> None:
    """Every sample's request built once for every vendor whose wire format converts it (Messages, Responses):
    an :class:`~avv_core.errors.InputError` listing each that cannot be, with the sample's file and line, the
    vendor and the field, before any request is sent. Vendors that build the same chat body are checked once."""
    problems: list[str] = []
    seen: set[str] = set()
    for vendor in vendors:
        wire = FORMATS[vendor.dialect.endpoint]
        if not wire.converts:
            continue
        shape = json.dumps([wire.name, vendor.dialect.transforms, vendor.extra_body, vendor.include_usage],
                           sort_keys=True, default=str)
        if shape in seen:
            continue
        seen.add(shape)
        for sample in samples.samples:
            try:
                build_request(sample, vendor, overrides)
            except ConversionError as exc:
                problems.append(f"{samples.path}:{sample.line}: vendor {vendor.name} (endpoint: {wire.name}): {exc}")
                if len(problems) >= MAX_LISTED_CONVERSIONS:
                    break
        if len(problems) >= MAX_LISTED_CONVERSIONS:
            break
    if problems:
        more = " (the first 20 listed)" if len(problems) >= MAX_LISTED_CONVERSIONS else ""
        raise InputError(f"requests that cannot be sent in the vendor's wire format{more}:\n  "
                         + "\n  ".join(problems))


@functools.lru_cache(maxsize=256)  # a handful of (vendor URL, path) pairs per run, asked at every request
def endpoint_url(base_url: str, path: str = "chat/completions") -> str:
    """``base/…/v1`` + ``/chat/completions``, keeping a query string after the path
    (``…/v1?api-version=2024-06-01`` → ``…/v1/chat/completions?api-version=2024-06-01``)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + path))


#: Statuses whose message names the URL called: the path is what is wrong (a base URL without ``/v1``, a typo).
PATH_STATUSES = frozenset({404, 405})


def name_the_url(att: Attempt, endpoint: str) -> None:
    """A 404 / 405 says nothing a person can act on (``HTTP 404: 404: Not Found``) without the URL that was called:
    add it, redacted (:func:`~avv_harness.inputs.secrets.redact_url`: no key in a query string)."""
    if att.error_kind == "http_4xx" and att.http_status in PATH_STATUSES:
        att.error_detail = f"{att.error_detail} (POST {redact_url(endpoint)})"


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return (end - start) * 1000.0


#: A stream is *buffered* when its tokens were not streamed: every token event arrived in one socket read
#: (at least BUFFERED_MIN_EVENTS of them), or the decode phase implies more than BUFFERED_MAX_TPS tokens/s,
#: faster than any model decodes. Its per-request TPS (tokens / a decode time of ~0) would be near-infinite
#: and inflate the TPS mean, so it is left empty; the row keeps its TTFT and latency.
BUFFERED_MIN_EVENTS = 3
BUFFERED_MAX_TPS = 10_000.0


def is_buffered(att: Attempt, completion_tokens: int | None, decode_ms: float | None) -> bool:
    if not att.ok or att.token_events < 2 or not att.streamed:  # a JSON body was never meant to stream
        return False
    if att.token_events >= BUFFERED_MIN_EVENTS and att.first_token_read == att.last_token_read:
        return True
    if completion_tokens is not None and completion_tokens >= 2 and decode_ms is not None:
        return decode_ms <= 0 or (completion_tokens - 1) / (decode_ms / 1000.0) > BUFFERED_MAX_TPS
    return False


def call_anomalies(att: Attempt, calls: list[dict[str, str]], tools: list[JSONValue] | None) -> list[str]:
    """The tool-call anomalies of a response (README "Anomalies"): ``tool_call_as_text``,
    ``tool_call_truncated``, ``unknown_tool`` and ``empty_tool_calls``. ``tools`` = the request's tools;
    None (unknown) skips the two checks that need them."""
    out = []
    names = request_tool_names(tools) if tools is not None else None
    if names is not None and find_text_calls("".join(att.content), names):
        out.append("tool_call_as_text")
    if att.finish_reason == "length" and any(not parses_as_json(c["arguments"]) for c in calls):
        out.append("tool_call_truncated")
    if names is not None and any(c["name"] not in names for c in calls):
        out.append("unknown_tool")
    if att.finish_reason == "tool_calls" and not calls:
        out.append("empty_tool_calls")
    return out


def attempt_record(att: Attempt, include_usage: bool, tools: list[JSONValue] | None = None,
                   completion_limit: int | None = None) -> JSONObject:
    """Record fields derived from one attempt (the final one); ``tools`` = the request's tools (for the
    tool-call anomalies, see :func:`call_anomalies`); ``completion_limit`` = the request's cap on completion tokens
    (anomaly ``completion_over_max_tokens``)."""
    tokens, usage_problem = usage_counts(att.usage)
    prompt, completion, total = tokens["prompt_tokens"], tokens["completion_tokens"], tokens["total_tokens"]
    decode_ms = _ms(att.t_first_token, att.t_last_token)
    buffered = is_buffered(att, completion, decode_ms)
    tps = None
    if completion is not None and completion >= 2 and decode_ms and not buffered and att.streamed:
        tps = (completion - 1) / (decode_ms / 1000.0)
    calls = [att.tool_calls[i].as_dict() for i in sorted(att.tool_calls)]
    anomalies = []
    if att.http_status == 200 and att.t_headers is not None and att.chunks and not att.saw_done:
        anomalies.append("no_done")
    if att.saw_tool_call_delta and att.finish_reason not in (None, "tool_calls"):
        anomalies.append("tool_calls_under_stop")
    if include_usage and att.ok and att.usage is None:
        anomalies.append("usage_missing")
    if usage_problem is not None:
        anomalies.append("usage_invalid")
    if completion is not None and completion_limit is not None and completion > completion_limit:
        anomalies.append("completion_over_max_tokens")
    anomalies += call_anomalies(att, calls, tools)
    if buffered:
        anomalies.append("buffered_stream")
    return {
        "status": STATUS_SUCCESS if att.ok else STATUS_FAILED,
        "error_kind": att.error_kind,
        "error_detail": att.error_detail or usage_problem,
        "anomalies": ";".join(anomalies) or None,
        "http_status": att.http_status,
        "t0_monotonic": att.t0,
        "ttfb_ms": _ms(att.t0, att.t_headers),
        "ttft_ms": _ms(att.t0, att.t_first_token),
        "ttft_kind": att.first_token_kind,
        "latency_ms": _ms(att.t0, att.t_end),
        "decode_ms": decode_ms,
        "chunks": att.chunks,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
        "cached_tokens": cached_tokens(att.usage, prompt),
        "usage_reported": att.usage is not None,
        "tps": tps,
        "finish_reason": att.finish_reason,
        "stop_reason": att.stop_reason,
        "saw_tool_call_delta": att.saw_tool_call_delta,
        "tool_calls": json.dumps(calls, ensure_ascii=False),
        "tool_call_count": len(calls),
        "content": "".join(att.content),
        "reasoning_chars": att.reasoning_chars,
        "reasoning": "".join(att.reasoning),
        "stale_conn_retries": att.stale_conn_retries,
        "reasoning_field": ";".join(att.reasoning_fields) or None,
    }


@dataclass
class ItemOutcome:
    record: Record
    final: Attempt
    attempts: list[Attempt]


@dataclass(frozen=True)
class ExecContext:
    """How a process runs items, decided by the process that holds the ledger (sent to workers)."""

    run_id: str
    worker: str
    policy: RetryPolicy
    timeout_s: float | None = None  # idle timeout override (None: the vendor's timeout_s)
    max_request_s: float = 600.0  # total cap per attempt unless the vendor sets its own
    overrides: Overrides = Overrides()  # --avv-temperature / --avv-max-tokens / --avv-extra-body / --avv-header
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES  # largest SSE event or line read from a vendor

    def to_message(self) -> JSONObject:
        p = self.policy
        return {"run_id": self.run_id, "retries": p.retries, "backoff_s": p.backoff_base_s,
                "retry_after_cap_s": p.retry_after_cap_s, "timeout_s": self.timeout_s,
                "max_request_s": self.max_request_s, "overrides": self.overrides.to_message(),
                "max_event_bytes": self.max_event_bytes}

    @classmethod
    def from_message(cls, data: JSONObject, worker: str) -> ExecContext:
        policy = RetryPolicy(retries=int(data["retries"]), backoff_base_s=float(data["backoff_s"]),
                             retry_after_cap_s=float(data["retry_after_cap_s"]))
        return cls(run_id=str(data["run_id"]), worker=worker, policy=policy, timeout_s=data.get("timeout_s"),
                   max_request_s=float(data["max_request_s"]), overrides=Overrides.from_message(data.get("overrides")),
                   max_event_bytes=int(data.get("max_event_bytes", DEFAULT_MAX_EVENT_BYTES)))


def request_temperature(body: object) -> float | None:
    """The ``temperature`` a request body carries, when it is a number ≥ 0 (else None: the record cell stays empty)."""
    value = body.get("temperature") if isinstance(body, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def item_identity(item: WorkItem, ctx: ExecContext, started_at: str, vendor: Vendor | None = None) -> JSONObject:
    key = item.key
    out = {
        "run_id": ctx.run_id, "model": key.model, "vendor": key.vendor, "sample_id": key.sample_id,
        "repeat": key.repeat, "level": item.level, "worker": ctx.worker, "started_at": started_at,
        "request_hash": item.sample.request_hash, "expected_language": item.sample.language_check,
    }
    if vendor is not None:
        out.update(endpoint=vendor.dialect.endpoint, transforms=";".join(vendor.dialect.transforms) or None)
    return out


@dataclass(frozen=True)
class ItemRun:
    """An item to run: the item, the vendor it goes to (its config and resolved ``url``), the user's HTTP
    ``session``, how this process runs items (``ctx``), and the injected ``sleep`` (between retries), ``rng``
    (their jitter; None: the process's :data:`BACKOFF_RANDOM`) and ``on_attempt`` (each attempt as it ends). The
    three wire paths take it: :func:`execute_item` (one request), :func:`avv_harness.wire.agent_loop.run_trajectory` (an
    agent task) and :func:`avv_harness.wire.run_item.run_item_safely` (either, with no exception escaping)."""

    session: requests.Session
    vendor: Vendor
    url: str
    item: WorkItem
    ctx: ExecContext
    sleep: Callable[[float], None] = time.sleep
    on_attempt: Callable[[Attempt], None] | None = None
    rng: random.Random | None = None

    def reporting_to(self, on_attempt: Callable[[Attempt], None]) -> ItemRun:
        """This run with ``on_attempt`` in place of its own (a shallow copy: ``dataclasses.replace`` re-runs the
        constructor over every field, ~10–40 µs, once per item)."""
        run = copy.copy(self)
        object.__setattr__(run, "on_attempt", on_attempt)
        return run


#: Back-off jitter of items without their own generator: one per process (a new ``random.Random()`` per item seeds
#: itself from the OS, ~80 µs, at every request).
BACKOFF_RANDOM = random.Random()


def vendor_session(make_session: Callable[[], requests.Session], vendor: Vendor,
                   env_settings: EnvSettingsCache | None = None) -> requests.Session:
    """A new HTTP session (``make_session``'s) for ``vendor``'s requests: its ``verify`` is the vendor's
    ``tls_verify`` when that is set (False, or a CA file or folder), which both clients then use instead of
    ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` (:func:`~avv_harness.wire.requests_transport.environment_settings`);
    left as it is otherwise. Each user, and each pre-flight check, has its own session, of one vendor.

    ``tls_verify: false`` is said once per run (:class:`~avv_harness.run.lifecycle.RunLifecycle`); urllib3's
    ``InsecureRequestWarning``, which it prints on every request (its filter is "always"), is silenced then.
    ``env_settings``: the environment's proxy and CA settings, shared with other sessions of the same run
    (:func:`~avv_harness.wire.requests_transport.environment_settings`); each session works them out once otherwise."""
    session = make_session()
    if env_settings is not None:
        share_environment_settings(session, env_settings)
    if vendor.tls_verify is not True:
        session.verify = vendor.tls_verify
    if vendor.tls_verify is False:
        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    return session


def execute_item(run: ItemRun, *, step: int | None = None,
                 request: tuple[str, JSONObject] | None = None) -> ItemOutcome:
    """Run one item to completion (retries inside) and return its record. ``step`` = the agent step this request
    is (:mod:`avv_harness.wire.agent_loop`): it is part of the ``X-AVV-Item`` tag and the record's ``step``;
    ``request`` = the (path, body) :func:`build_request` made for it, when the caller built it already."""
    session, vendor, url, item, ctx = run.session, run.vendor, run.url, run.item, run.ctx
    sleep, on_attempt = run.sleep, run.on_attempt
    rng = run.rng or BACKOFF_RANDOM
    policy = ctx.policy
    wire = FORMATS[vendor.dialect.endpoint]
    if request is None:
        path, request_body, body = encoded_request(item.sample, vendor, ctx.overrides)
    else:
        path, request_body = request
        body = json.dumps(request_body, ensure_ascii=False).encode("utf-8")
    endpoint = endpoint_url(url, path)
    read_timeout = ctx.timeout_s or vendor.timeout_s
    max_request_s = vendor.max_request_s or ctx.max_request_s
    connect_timeout = min(10.0, read_timeout)
    started_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    attempts: list[Attempt] = []
    for number in range(1, policy.retries + 2):
        headers = build_headers(vendor, item.key.tag(ctx.run_id, number, step), number, ctx.overrides)
        reader = wire.reader(vendor.dialect) if item.sample.streamed else wire.whole_reader(vendor.dialect)
        att = stream_chat(session, endpoint, body, headers, connect_timeout, read_timeout, max_request_s,
                          ctx.max_event_bytes, reader)
        name_the_url(att, endpoint)
        attempts.append(att)
        if on_attempt is not None:
            on_attempt(att)
        if att.ok or att.error_kind not in RETRYABLE or number > policy.retries:
            break
        sleep(policy.delay(number, att.retry_after_s, rng))
    final = attempts[-1]
    record = Record({
        **item_identity(item, ctx, started_at, vendor),
        "step": step,
        "temperature": request_temperature(request_body),
        "is_baseline": vendor.is_baseline,
        "attempts": len(attempts),
        **attempt_record(final, vendor.include_usage, item.sample.tools, wire.completion_limit(request_body)),
        "stale_conn_retries": sum(a.stale_conn_retries for a in attempts),
        "wall_ms": (time.monotonic() - attempts[0].t0) * 1000.0,
    })
    return ItemOutcome(record=record, final=final, attempts=attempts)
