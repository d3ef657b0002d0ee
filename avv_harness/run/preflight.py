"""The pre-flight check (run-controller layer): before any load, one small request per vendor, all at once and
bounded in time, through the run's own wire client and the vendor's own wire format, dialect and headers — so a
wrong port, a URL without ``/v1``, a refused key or an unknown model is found in seconds, by one request, instead of
by a whole run of failures.

``--avv-preflight``: ``strict`` (the default) refuses the run before any load, exit status 2, when a vendor's answer
is a hard fault (:data:`avv_harness.run.hard_faults.HARD_FAULTS`: connect refused, DNS, TLS, 401 / 403, 404, unknown
model), with one line per refused vendor naming it, the URL called (redacted) and what to check, the vendor's own
message quoted (redacted: no key is ever shown); ``warn`` runs anyway and prints the same lines as warnings; ``off``
sends nothing. What is not a hard fault (a 429, a 5xx, a timeout, a 400, an answer that was not streamed) is printed
as a warning and the run goes on: scoring judges it.

The request (:func:`preflight_sample`): one user message and the tools of the first sample that has tools (so a
vendor that refuses ``tools`` says so), with ``max_tokens`` :data:`PREFLIGHT_MAX_TOKENS`, built by the same steps as
every item (:func:`~avv_harness.wire.execute.build_request`: the vendor's transforms, ``extra_body``, the global
overrides, its wire format). It carries the item tag ``RUN/MODEL/VENDOR/preflight/0/1`` (repeat 0: no item has it),
so the simulator's truth log and a vendor's logs can tell it apart. Its tokens and cost are charged to the budget and
written to run.json (``preflight``).

A vendor costs at most one pre-flight request: no retry. The checks run in parallel greenlets; a vendor that has not
answered after :data:`PREFLIGHT_TIMEOUT_S` is a ``timeout`` warning.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import gevent
import requests

from avv_core.items import ItemKey
from avv_core.json_types import JSONObject
from avv_core.samples import Sample, SampleSet
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import redact_url
from avv_harness.run.budget import Spend
from avv_harness.run.hard_faults import FAULTS, Fault, classify
from avv_harness.wire.execute import (
    ExecContext,
    attempt_record,
    build_headers,
    build_request,
    endpoint_url,
    vendor_session,
)
from avv_harness.wire.formats import FORMATS
from avv_harness.wire.stream import stream_chat

_FAULTS: Mapping[str, Fault] = {f.key: f for f in FAULTS}
#: What the pre-flight notes about an answer that did not fail.
NOTES = {"buffered": "the answer came in one piece, not streamed"}
#: Completion tokens the pre-flight request asks for: enough for a short answer or a tool call's start.
PREFLIGHT_MAX_TOKENS = 16
#: The longest the whole pre-flight may take (each request is capped a little below it).
PREFLIGHT_TIMEOUT_S = 20.0
#: The sample id in the pre-flight request's item tag (with repeat 0, which no item has).
PREFLIGHT_SAMPLE_ID = "preflight"
#: The user message of the pre-flight request.
PREFLIGHT_PROMPT = "This is a connectivity check. Reply with the single word OK."


@dataclass(frozen=True)
class VendorCheck:
    """One vendor's pre-flight answer."""

    name: str  # the vendor's User class name (its name; model.name when two models share it)
    model: str
    vendor: str
    url: str  # the URL called (redacted)
    ok: bool  # it answered with a stream
    fault: str | None  # faults.FAULTS key, or "not_streamed" / "timeout"; None: fine
    hard: bool  # the fault is a hard one (strict mode refuses the vendor)
    message: str  # the vendor's own message (or what the client saw), redacted
    check: str  # what to check
    seconds: float  # how long the request took
    spent: Spend = Spend()  # tokens and cost it reported

    status: int | None = None  # the HTTP status of the answer (None: no answer)

    def line(self) -> str:
        """``NAME (MODEL): POST URL → what: "the vendor's message" — check …`` (one line; a success:
        ``NAME: answered in 0.2 s``)."""
        if self.fault is None:
            return f"{self.name}: answered in {self.seconds:.1f} s"
        known = _FAULTS.get(self.fault)
        what = known.what if known is not None else NOTES.get(self.fault, str(self.fault))
        if self.status is not None and not what.startswith("HTTP"):
            what = f"HTTP {self.status}, {what}"
        message = self.message
        if self.status is not None and message.startswith(f"HTTP {self.status}: "):
            message = message[len(f"HTTP {self.status}: "):]  # the status is said once
        quoted = f' "{message}"' if message else ""
        return f"{self.name} ({self.model}): POST {self.url} → {what}:{quoted} — check {self.check}"

    def to_manifest(self) -> JSONObject:
        return {"model": self.model, "vendor": self.vendor, "url": self.url, "ok": self.ok, "fault": self.fault,
                "hard": self.hard, "status": self.status, "message": self.message, "seconds": round(self.seconds, 3),
                **self.spent.to_dict()}


@dataclass(frozen=True)
class Preflight:
    """Every vendor's pre-flight answer, and what the mode makes of them."""

    mode: str  # strict | warn (off: no Preflight at all)
    checks: tuple[VendorCheck, ...]
    seconds: float  # the whole check, wall time

    @property
    def refused(self) -> tuple[VendorCheck, ...]:
        """The vendors the run is refused for (strict mode, a hard fault)."""
        return tuple(c for c in self.checks if c.hard) if self.mode == "strict" else ()

    @property
    def warnings(self) -> tuple[VendorCheck, ...]:
        """The vendors with a fault that does not refuse the run."""
        refused = set(self.refused)
        return tuple(c for c in self.checks if c.fault is not None and c not in refused)

    @property
    def spent(self) -> Spend:
        return sum((c.spent for c in self.checks), Spend())

    def summary(self) -> str:
        """The one line printed when the run goes on."""
        answered = sum(c.ok for c in self.checks)
        tokens = f"; {self.spent.tokens:,} tokens" if self.spent.tokens else ""
        return (f"pre-flight: {answered} of {len(self.checks)} vendor{'s' if len(self.checks) != 1 else ''} answered "
                f"in {self.seconds:.1f} s{tokens}")

    def refusal(self) -> str:
        """The InputError text of a refused run: one line per refused vendor."""
        count = len(self.refused)
        return (f"pre-flight: {count} of {len(self.checks)} vendor{'s' if len(self.checks) != 1 else ''} cannot "
                f"answer, so nothing else was sent (--avv-preflight warn runs anyway; a URL, key or model fix is "
                "checked again by the next run):\n  " + "\n  ".join(c.line() for c in self.refused))

    def to_manifest(self) -> JSONObject:
        """run.json's ``preflight``."""
        return {"mode": self.mode, "seconds": round(self.seconds, 3), "spent": self.spent.to_dict(),
                "vendors": [c.to_manifest() for c in self.checks]}


def is_preflight_tag(tag: str | None) -> bool:
    """Whether an item tag (the ``X-AVV-Item`` header, a truth log's ``client_tag``) is a pre-flight request's."""
    if not tag:
        return False
    try:
        _, key, _ = ItemKey.parse_tag(tag)
    except ValueError:
        return False
    return key.repeat == 0 and key.sample_id == PREFLIGHT_SAMPLE_ID


def preflight_sample(samples: SampleSet | None) -> Sample:
    """The pre-flight request as a sample (module docstring): one user message, the first tools found."""
    tools = next((s.tools for s in samples.samples if s.tools), []) if samples is not None else []
    body: JSONObject = {"messages": [{"role": "user", "content": PREFLIGHT_PROMPT}],
                            "max_tokens": PREFLIGHT_MAX_TOKENS}
    if tools:
        body["tools"] = tools
    return Sample(PREFLIGHT_SAMPLE_ID, 0, body)


def check_vendor(session: requests.Session, target: Target, sample: Sample, ctx: ExecContext,
                 redact: Callable[[str], str], timeout_s: float = PREFLIGHT_TIMEOUT_S) -> VendorCheck:
    """Send the pre-flight request to one vendor (``target``; no retry) and say what its answer means."""
    name, vendor, url = target.name, target.vendor, target.url
    overrides = dataclasses.replace(ctx.overrides, max_tokens=PREFLIGHT_MAX_TOKENS)
    path, request_body = build_request(sample, vendor, overrides)
    endpoint = endpoint_url(url, path)
    key = ItemKey(vendor.model, vendor.name, PREFLIGHT_SAMPLE_ID, 0)
    headers = build_headers(vendor, key.tag(ctx.run_id, 1), 1, overrides)
    request_s = max(1.0, timeout_s - 2.0)
    read_timeout = min(ctx.timeout_s or vendor.timeout_s, request_s)
    started = time.monotonic()
    att = stream_chat(session, endpoint, json.dumps(request_body, ensure_ascii=False).encode("utf-8"), headers,
                      min(10.0, read_timeout), read_timeout, request_s, ctx.max_event_bytes,
                      FORMATS[vendor.dialect.endpoint].reader(vendor.dialect))
    seconds = time.monotonic() - started
    record = attempt_record(att, vendor.include_usage, sample.tools)
    cost = vendor.price.record_cost(record) if vendor.price is not None else None
    spent = Spend(int(record.get("total_tokens") or 0), float(cost or 0.0))
    answered = VendorCheck(name=name, model=vendor.model, vendor=vendor.name, url=redact(redact_url(endpoint)),
                           ok=att.ok, fault=None, hard=False, message="", check="", seconds=seconds, spent=spent,
                           status=att.http_status)
    if att.ok:
        if "buffered_stream" in (record.get("anomalies") or ""):
            return dataclasses.replace(answered, fault="buffered", message="every token arrived in one read",
                                       check="that the vendor streams (stream: true): a buffered answer's TTFT is "
                                       "its latency")
        return answered
    found = classify(att.error_kind, att.http_status, att.error_detail)
    if found is None:
        return dataclasses.replace(answered, fault=att.error_kind, message=redact(att.error_detail),
                                   check="the vendor's answer")
    return dataclasses.replace(answered, fault=found.key, hard=found.hard, message=redact(att.error_detail),
                               check=found.check)


@dataclass(frozen=True)
class Target:
    """A vendor to check: its User class name, its config and the URL its requests go to."""

    name: str
    vendor: Vendor
    url: str


def run_preflight(targets: Sequence[Target], samples: SampleSet | None, ctx: ExecContext, mode: str,
                  session_factory: Callable[[], requests.Session], redact: Callable[[str], str],
                  timeout_s: float = PREFLIGHT_TIMEOUT_S) -> Preflight:
    """Check every vendor at once (one greenlet each; at most ``timeout_s`` in all) and collect the answers.

    Why so many parameters: each is a separate input of a different owner — what to check (``targets``), what to
    send (``samples``), the run's execution context, ``--avv-preflight``'s mode, the users' own HTTP client
    (``session_factory``) and the secrets' redactor — and ``timeout_s`` has a default; no two travel together
    elsewhere (the controller gathers them from five of its parts)."""
    sample = preflight_sample(samples)
    started = time.monotonic()

    def one(target: Target) -> VendorCheck:
        session = vendor_session(session_factory, target.vendor)
        try:
            return check_vendor(session, target, sample, ctx, redact, timeout_s)
        finally:
            session.close()

    greenlets = [gevent.spawn(one, target) for target in targets]
    gevent.joinall(greenlets, timeout=timeout_s)
    checks = []
    for target, greenlet in zip(targets, greenlets, strict=True):
        if greenlet.successful():
            checks.append(greenlet.value)
            continue
        greenlet.kill(block=False)
        why = (f"no answer within {timeout_s:g} s" if not greenlet.ready()
               else f"the check failed inside the client ({type(greenlet.exception).__name__}: "
                    f"{redact(str(greenlet.exception))[:200]})")
        checks.append(VendorCheck(name=target.name, model=target.vendor.model, vendor=target.vendor.name,
                                  url=redact(redact_url(target.url)), ok=False, fault="timeout", hard=False,
                                  message=why, check="the vendor's load, timeout_s and max_request_s",
                                  seconds=time.monotonic() - started))
    return Preflight(mode, tuple(checks), time.monotonic() - started)


def targets_of(vendors: Mapping[str, Vendor], url_of: Callable[[str], str]) -> list[Target]:
    """A :class:`Target` per vendor (User class name → config), its URL from ``url_of`` (``{sim}`` resolved)."""
    return [Target(name, vendor, url_of(name)) for name, vendor in vendors.items()]


__all__ = ["PREFLIGHT_MAX_TOKENS", "PREFLIGHT_SAMPLE_ID", "PREFLIGHT_TIMEOUT_S", "Preflight", "Target", "VendorCheck",
           "check_vendor", "is_preflight_tag", "preflight_sample", "run_preflight", "targets_of"]
