"""The aiohttp app: one or more simulated vendors under ``/<profile>/v1`` (simulator layer; the only module that does
network I/O).

Per request: parse → auth → admission (max_concurrency) → plan (pure, see plan.py) → respond on an
absolute-deadline schedule (loop.time() == time.monotonic()) → one truth-log line (truth.py), built once from the
plan and the request's :class:`~avv_sim.truth.Exchange`. Four endpoints answer the same plans
(:mod:`avv_sim.endpoints`): ``/v1/chat/completions``, ``/v1/completions`` (in text, dialects.py), ``/v1/messages``
(Anthropic Messages) and ``/v1/responses`` (OpenAI Responses).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import ssl
import sys
import time
from collections.abc import Callable, Mapping

from aiohttp import web

from avv_core.api_formats import CHAT, COMPLETIONS, MESSAGES, RESPONSES
from avv_core.json_types import JSONObject
from avv_sim.agent import AgentBook
from avv_sim.endpoints import (
    KEY_HEADERS,
    authorized,
    error_payload,
    over_limit_status,
    plan_request,
    writer_for,
)
from avv_sim.gold import GoldEntry
from avv_sim.item_tag import repeat_of
from avv_sim.pacer import Pacer
from avv_sim.plan import Plan
from avv_sim.profiles import Profile
from avv_sim.quirks import Quirk, body_quirk
from avv_sim.request import RequestError, request_hash
from avv_sim.truth import Exchange, TruthLog, build_truth
from avv_sim.wire import Wire

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
ATTEMPT_HEADER = "X-AVV-Attempt"
ITEM_HEADER = "X-AVV-Item"


class ProfileState:
    """Per-profile runtime state: in-flight count, queue, arrival counters for attempt numbers."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.inflight = 0
        limit = profile.max_concurrency
        self.queue = asyncio.Semaphore(limit) if limit and profile.over_limit == "queue" else None
        self.arrivals: dict[str, int] = {}

    def arrive(self, h: str | None) -> int:
        """Count one more arrival of this body at this profile; the count (1-based)."""
        key = h or ""
        count = self.arrivals.get(key, 0) + 1
        self.arrivals[key] = count
        return count

    def attempt_for(self, h: str | None, header: str | None) -> int:
        """X-AVV-Attempt if given, else the count of arrivals of this body at this profile."""
        return attempt_of(header, self.arrive(h))


def attempt_of(header: str | None, arrival: int) -> int:
    """The X-AVV-Attempt header when it is a positive integer, else ``arrival``."""
    if header:
        try:
            value = int(header)
            if value >= 1:
                return value
        except ValueError:
            pass
    return arrival


class Simulator:
    """Holds the profiles and the truth log; its handlers are the aiohttp routes."""

    def __init__(self, profiles: Mapping[str, Profile], truth_log: TruthLog | None = None,
                 gold: Mapping[str, GoldEntry] | None = None, agents: AgentBook | None = None):
        self.states = {name: ProfileState(p) for name, p in profiles.items()}
        self.truth = truth_log or TruthLog(None)
        self.gold = dict(gold or {})  # gold_key → the reference's gold labels (see gold.py)
        self.agents = agents or AgentBook()  # the agent tasks of the gold file (see agent.py)
        self.loop_time: Callable[[], float] = time.monotonic

    # ------------------------------------------------------------------------------------------ routing

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{profile}/v1/chat/completions", self.chat_completions)
        app.router.add_post("/{profile}/v1/completions", self.completions)
        app.router.add_post("/{profile}/v1/messages", self.messages)
        app.router.add_post("/{profile}/v1/responses", self.responses)
        app.router.add_get("/{profile}/v1/models", self.models)
        app.router.add_get("/health", self.health)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "profiles": list(self.states)})

    async def models(self, request: web.Request) -> web.Response:
        state = self.states.get(request.match_info["profile"])
        if state is None:
            return _json_error(CHAT, 404, f"unknown profile {request.match_info['profile']!r}",
                               "invalid_request_error", "not_found")
        if not authorized(state.profile, CHAT, request.headers):
            return _json_error(CHAT, 401, *_AUTH_ERROR)
        model = state.profile.served_model
        return web.json_response(
            {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "avv-sim"}]})

    # ----------------------------------------------------------------------------------- chat handler

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, CHAT)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, COMPLETIONS)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, MESSAGES)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, RESPONSES)

    async def _serve(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        t_arrival = loop.time()
        name = request.match_info["profile"]
        state = self.states.get(name)
        if state is None:
            return _json_error(endpoint, 404, f"unknown profile {name!r}; known: {', '.join(self.states)}",
                               "invalid_request_error", "not_found")
        ex = Exchange(name, endpoint, request.headers.get(ITEM_HEADER), t_arrival)
        try:
            return await self._handle(request, state, ex)
        except ConnectionError:
            if not ex.committed:
                ex.client_disconnected = True
            # aiohttp quietly drops a response it cannot send; raising would log a traceback instead
            return web.Response(status=499)
        finally:
            self._commit(ex)  # also on cancellation (server shutdown)

    def _commit(self, ex: Exchange) -> None:
        """Write the truth line once, stamping t_last_byte. Called just BEFORE the final bytes go out, so
        a client that has seen the end of a response always finds its truth line already in the file."""
        if ex.committed:
            return
        ex.committed = True
        ex.t_last_byte = asyncio.get_running_loop().time()
        self.truth.write(build_truth(ex))

    async def _handle(self, request: web.Request, state: ProfileState, ex: Exchange) -> web.StreamResponse:
        profile = state.profile
        body, h = await _read_body(request)
        ex.request_hash = h
        arrival = state.arrive(h)
        ex.attempt = attempt = attempt_of(request.headers.get(ATTEMPT_HEADER), arrival)
        repeat, ex.repeat_source = repeat_of(ex.client_tag, arrival)
        ex.repeat = repeat
        if body is None:
            return await self._send_error(request, ex, 400, "could not parse the JSON body of your request",
                                          "invalid_request_error", None)
        ex.stream = bool(body.get("stream"))
        if profile.log_request:
            ex.request = {"body": body, "headers": {k: v for k, v in request.headers.items()
                                                    if k.lower() not in KEY_HEADERS}}
        try:
            ex.plan = plan_request(profile, body, ex, attempt, repeat, self.gold, self.agents)
        except RequestError as exc:
            ex.rejection = exc
        if not authorized(profile, ex.endpoint, request.headers):
            ex.refused = "auth"
            return await self._send_error(request, ex, 401, *_AUTH_ERROR)
        plan = ex.plan
        if plan is None:
            bad = ex.rejection or RequestError("invalid request")
            return await self._send_error(request, ex, bad.status, bad.message, "invalid_request_error", None,
                                          param=bad.param)
        limit = profile.max_concurrency
        if limit and state.queue is None and state.inflight >= limit:
            status = over_limit_status(profile, ex.endpoint)
            ex.refused = f"over_limit_{status}"
            return await self._send_error(request, ex, status, f"too many concurrent requests (limit {limit})",
                                          "requests", "rate_limit_exceeded", retry_after=profile.retry_after_s)
        if plan.fault == "error_status":
            return await self._send_error(request, ex, profile.error_status, "simulated upstream failure",
                                          "server_error", None)
        if plan.fault == "rate_limit":
            return await self._send_error(request, ex, 429, "Rate limit reached for requests", "requests",
                                          "rate_limit_exceeded", retry_after=profile.retry_after_s)
        return await self._admit_and_respond(request, state, plan, ex)

    async def _admit_and_respond(
        self, request: web.Request, state: ProfileState, plan: Plan, ex: Exchange
    ) -> web.StreamResponse:
        """Count the request in flight (queueing for a slot in "queue" mode) while it is answered."""
        loop = asyncio.get_running_loop()
        state.inflight += 1
        queue = state.queue
        acquired = False
        try:
            if queue is not None:
                t_wait = loop.time()
                await queue.acquire()
                acquired = True
                ex.queued_ms = (loop.time() - t_wait) * 1000.0
            return await self._respond(request, state.profile, plan, ex)
        finally:
            state.inflight -= 1
            if queue is not None and acquired:
                queue.release()

    async def _respond(
        self, request: web.Request, profile: Profile, plan: Plan, ex: Exchange
    ) -> web.StreamResponse:
        # the schedule counts from arrival (plus any queueing), not from when planning finished
        t0 = ex.t_arrival + (ex.queued_ms + profile.ttft_ms + plan.jitter_ms) / 1000.0
        wire = writer_for(ex.endpoint, profile, plan, int(time.time()), _completion_id(plan))
        if profile.header_delay_ms:
            await asyncio.sleep(profile.header_delay_ms / 1000.0)
        if not plan.stream:
            return await self._respond_json(request, profile, plan, ex, wire, t0)
        quirk = body_quirk(plan.quirks)
        if quirk is not None:
            return await self._respond_body_quirk(request, profile, plan, ex, wire, t0, quirk)
        return await self._stream(request, profile, plan, ex, wire, t0)

    # ------------------------------------------------------------------------------------------ stream

    def _deadline(self, profile: Profile, t0: float, plan: Plan, position: int) -> float:
        chunk = plan.chunks[position]
        stall = 0.0
        if profile.stall_after_tokens is not None and chunk.first_token >= profile.stall_after_tokens:
            stall = profile.stall_ms / 1000.0
        return t0 + chunk.last_token / profile.tokens_per_s + stall

    async def _stream(
        self, request: web.Request, profile: Profile, plan: Plan, ex: Exchange, wire: Wire, t0: float
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        ex.http_status = 200
        await resp.write(wire.role_event())
        n_chunks = wire.chunks_to_send()
        if n_chunks:
            deadlines = [self._deadline(profile, t0, plan, j) for j in range(n_chunks)]
            pacer = Pacer(loop, request.transport, deadlines, wire.token_events(n_chunks), ex)
            try:
                await pacer.start()
            finally:
                pacer.cancel()
        elif t0 > loop.time():  # nothing to generate (output_tokens 0): still answer after the TTFT
            await asyncio.sleep(t0 - loop.time())
        if plan.fault == "truncate":
            return self._abort(request, resp, ex)
        if plan.fault == "stream_error":
            tail = wire.tail(error=True, usage=False)
        else:
            tail = wire.tail(error=False, usage=plan.include_usage and not profile.omit_usage)
        ex.finish_reason, ex.usage_sent = wire.sent_finish, wire.sent_usage
        self._commit(ex)
        await resp.write_eof(tail)  # the tail and the chunked terminator in one write
        return resp

    def _abort(self, request: web.Request, resp: web.StreamResponse, ex: Exchange) -> web.StreamResponse:
        """Close the TCP connection mid-body: no finish_reason, no [DONE], no chunked terminator."""
        resp.force_close()
        self._commit(ex)
        transport = request.transport
        if transport is not None:
            transport.close()
        return resp

    # ------------------------------------------------------------------------------------- non-stream

    async def _respond_json(
        self, request: web.Request, profile: Profile, plan: Plan, ex: Exchange, wire: Wire, t0: float
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        if plan.chunks:
            delay = self._deadline(profile, t0, plan, len(plan.chunks) - 1) - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        if plan.fault == "truncate":
            return await self._truncate_json(request, plan, ex, wire)
        if plan.fault == "stream_error":
            return await self._send_error(request, ex, 500, "The server had an error while processing your request.",
                                          "server_error", None, delay=False)
        quirk = body_quirk(plan.quirks)
        replaced = quirk.body(plan.stream) if quirk is not None and quirk.body is not None else None
        if replaced is not None:
            return await self._send_bytes(request, ex, 200, *replaced)
        body = wire.completion_body()
        if profile.omit_usage:
            body.pop("usage")
        ex.chunks_sent = len(plan.chunks)
        ex.finish_reason = wire.finish_reason()
        ex.usage_sent = "usage" in body
        return await self._send_bytes(
            request, ex, 200, json.dumps(body, ensure_ascii=False).encode("utf-8"), "application/json"
        )

    async def _truncate_json(
        self, request: web.Request, plan: Plan, ex: Exchange, wire: Wire
    ) -> web.StreamResponse:
        """Non-stream truncate: headers with the full Content-Length, part of the body, then close."""
        payload = json.dumps(wire.completion_body(), ensure_ascii=False).encode("utf-8")
        frac = (plan.fault_after_chunks or 0) / max(1, len(plan.chunks))
        cut = min(len(payload) - 1, max(1, int(len(payload) * max(frac, 0.25))))
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.content_length = len(payload)
        await resp.prepare(request)
        ex.http_status = 200
        await resp.write(payload[:cut])
        return self._abort(request, resp, ex)

    async def _respond_body_quirk(self, request: web.Request, profile: Profile, plan: Plan, ex: Exchange,
                                  wire: Wire, t0: float, quirk: Quirk) -> web.StreamResponse:
        """A body quirk on a stream: HTTP 200 but not an SSE stream (its body, or the chat.completion JSON)."""
        replaced = quirk.body(plan.stream) if quirk.body is not None else None
        if replaced is None:
            return await self._respond_json(request, profile, plan, ex, wire, t0)
        return await self._send_bytes(request, ex, 200, *replaced)

    # ----------------------------------------------------------------------------------------- errors

    async def _send_error(self, request: web.Request, ex: Exchange, status: int, message: str, etype: str,
                          code: str | None, *, param: str | None = None, retry_after: float | None = None,
                          delay: bool = True) -> web.StreamResponse:
        headers = {}
        if status == 429 and retry_after is not None:
            headers["Retry-After"] = _fmt_seconds(retry_after)
        state = self.states.get(ex.profile)
        if delay and state is not None and state.profile.header_delay_ms:
            await asyncio.sleep(state.profile.header_delay_ms / 1000.0)
        payload = error_payload(ex.endpoint, status, message, etype, code, param)
        return await self._send_bytes(request, ex, status, payload, "application/json", headers)

    async def _send_bytes(self, request: web.Request, ex: Exchange, status: int, payload: bytes, content_type: str,
                          headers: Mapping[str, str] | None = None) -> web.StreamResponse:
        resp = web.Response(status=status, body=payload, headers={"Content-Type": content_type, **(headers or {})})
        ex.http_status = status
        self._commit(ex)
        await resp.prepare(request)
        await resp.write_eof()  # headers and body go out together here
        return resp


# ---------------------------------------------------------------------------------------------- helpers

_AUTH_ERROR = (
    "Incorrect API key provided. You can find your API key in your vendor dashboard.",
    "invalid_request_error",
    "invalid_api_key",
)


def _json_error(endpoint: str, status: int, message: str, etype: str, code: str | None) -> web.Response:
    return web.json_response(text=error_payload(endpoint, status, message, etype, code).decode("utf-8"),
                             status=status)


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


async def _read_body(request: web.Request) -> tuple[JSONObject | None, str | None]:
    """The parsed JSON object body and its request hash; (None, None) when it is not a JSON object."""
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    return body, request_hash(body)


def _completion_id(plan: Plan) -> str:
    digest = hashlib.sha256(f"{plan.profile}:{plan.request_hash}:{plan.attempt}".encode()).hexdigest()
    return "chatcmpl-" + digest[:24]


# ------------------------------------------------------------------------------------------------ serve


def ready_line(host: str, port: int, names: list[str], scheme: str = "http") -> str:
    return f"avv-sim listening on {scheme}://{host}:{port} (profiles: {', '.join(names)})"


async def serve(
    profiles: Mapping[str, Profile],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    truth_log: str | os.PathLike[str] | None = None,
    on_ready: Callable[[str, int], None] | None = None,
    stop: asyncio.Event | None = None,
    gold: Mapping[str, GoldEntry] | None = None,
    agents: AgentBook | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Run until ``stop`` is set (or SIGTERM/SIGINT); announce readiness on stdout. ``tls``: serve HTTPS with it
    (``--tls-cert``; the benchmarks' TLS server).

    Why so many parameters: after ``profiles`` every one is keyword-only with a default: where to listen
    (``host``, ``port``, ``tls``), the simulator's inputs (``truth_log``, ``gold``, ``agents``) and the embedding
    hooks (``on_ready``, ``stop``); the command line and the tests name the few they set.
    """
    truth = TruthLog(truth_log)
    sim = Simulator(profiles, truth, gold, agents)
    runner = web.AppRunner(sim.app(), access_log=None, handle_signals=False, shutdown_timeout=0.25)
    await runner.setup()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
            pass
    try:
        site = web.TCPSite(runner, host, port, backlog=2048, reuse_address=True, ssl_context=tls)
        await site.start()
        bound = runner.addresses[0][1]
        if on_ready is not None:
            on_ready(host, bound)
        else:
            sys.stdout.write(ready_line(host, bound, list(profiles), "https" if tls else "http") + "\n")
            sys.stdout.flush()
        await stop.wait()
    finally:
        await runner.cleanup()
        truth.close()
