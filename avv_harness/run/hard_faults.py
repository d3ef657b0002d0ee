"""What a failed request says about a vendor's setup (run-controller layer, pure: no I/O): the **hard faults** — a
request that cannot succeed however often it is sent (nothing listens at the URL, the host does not resolve, TLS
fails, the key is refused, the path or the model does not exist) — declared once, in :data:`FAULTS`, each with the
words a person reads and what to check.

Two users: the pre-flight check (:mod:`avv_harness.run.preflight`: one request per vendor before any load; a hard
fault refuses the vendor under ``--avv-preflight strict``) and the circuit breaker (:mod:`avv_harness.run.breaker`:
a vendor whose last K items all ended with the same hard fault is stopped). Everything else a request can meet — a
429, a 5xx, a timeout, a stream broken off, a 400 for one request's content — is not hard: it may pass next time,
or it is the vendor's answer to that one request, and scoring judges it.

:func:`classify` reads only a record's (or an attempt's) ``error_kind``, ``http_status`` and ``error_detail``, as the
wire client wrote them (:mod:`avv_harness.wire.outcome`): the same fault gets the same name whichever client (lean or
requests) made the request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from avv_core.json_types import JSONMapping, JSONValue

Match = Callable[[str | None, int | None, str], bool]


@dataclass(frozen=True)
class Fault:
    """One kind of failed request, as a person reads it."""

    key: str  # the name in run.json, the ledger's reason and the docs (connect_refused, http_401 …)
    hard: bool  # cannot succeed by retrying: the pre-flight refuses the vendor, the breaker may stop it
    what: str  # what happened, in a few words ("connection refused")
    check: str  # what to check
    matches: Match  # (error_kind, http_status, error_detail) → whether this fault is the one


_URL = re.compile(r"\bhttps?://\S+")


def _detail_has(*words: str) -> Callable[[str], bool]:
    lowered = tuple(w.lower() for w in words)
    return lambda detail: any(w in detail.lower() for w in lowered)


_REFUSED = _detail_has("refused", "errno 111", "errno 61", "winerror 10061")
_DNS = _detail_has("gaierror", "name or service not known", "nodename nor servname", "name resolution",
                   "failed to resolve", "no address associated", "getaddrinfo")
_TLS = _detail_has("ssl", "certificate", "tls")
_MODEL = _detail_has("model")
_NOT_FOUND = _detail_has("not found", "not_found", "does not exist", "doesn't exist", "unknown", "invalid model",
                         "not available", "not supported", "no such", "unsupported model", "model_not_found")


def _status(*codes: int) -> Match:
    return lambda kind, status, detail: kind == "http_4xx" and status in codes


#: Every classified fault, most specific first (:func:`classify` returns the first that matches). The hard ones are
#: those of the issue: connect (refused), DNS, TLS, 401 / 403, 404 and an unknown model.
FAULTS: tuple[Fault, ...] = (
    Fault("dns", True, "the host name does not resolve", "the URL's host name (a typo? a VPN or proxy needed?)",
          lambda kind, status, detail: kind == "connect" and _DNS(detail)),
    Fault("tls", True, "the TLS handshake failed",
          "https:// against a plain-HTTP port (or the reverse), the port, and the server's certificate "
          "(signed by a private CA? the vendor's tls_verify names its CA file)",
          lambda kind, status, detail: kind == "connect" and _TLS(detail)),
    Fault("connect_refused", True, "connection refused",
          "the URL's host and port, and that the server is running",
          lambda kind, status, detail: kind == "connect" and _REFUSED(detail)),
    Fault("http_401", True, "HTTP 401: the key was refused",
          "the key: api_key / api_key_env in the config (run.json's key_source says where it came from)",
          _status(401)),
    Fault("http_403", True, "HTTP 403: the key may not use this",
          "the key's permissions for this model and endpoint, and the model_id", _status(403)),
    Fault("unknown_model", True, "the vendor does not know the model", "model_id (the vendor's own name for the "
          "model; most vendors list theirs at GET …/v1/models)",
          lambda kind, status, detail: kind == "http_4xx" and status in (400, 404, 422) and _MODEL(detail)
          and _NOT_FOUND(detail)),
    Fault("http_404", True, "HTTP 404: nothing is served at that path", "the URL's path: it is the base URL, "
          "usually ending in /v1 (the endpoint's path, e.g. /chat/completions, is added to it)", _status(404)),
    Fault("connect", False, "cannot connect", "the URL and the network",
          lambda kind, status, detail: kind == "connect"),
    Fault("http_400", False, "HTTP 400: the vendor refused the request",
          "the vendor's message: a field it does not accept (tools, stream_options, a parameter) — the vendor's "
          "transforms or extra_body can change it", _status(400, 422)),
    Fault("http_4xx", False, "the vendor refused the request", "the vendor's message",
          lambda kind, status, detail: kind == "http_4xx"),
    Fault("timeout", False, "no answer in time", "the vendor's load, timeout_s and max_request_s",
          lambda kind, status, detail: kind == "timeout"),
    Fault("rate_limited", False, "rate-limited (HTTP 429)", "the vendor's rate limit and the concurrency",
          lambda kind, status, detail: kind == "http_429"),
    Fault("server_error", False, "the vendor failed (5xx / overloaded)", "the vendor's status",
          lambda kind, status, detail: kind in ("http_5xx", "overloaded")),
    Fault("not_streamed", False, "the answer was not an SSE stream", "that the vendor streams (stream: true)",
          lambda kind, status, detail: kind == "bad_sse" and "instead of an SSE stream" in detail),
)
#: The faults the pre-flight refuses a vendor for and the circuit breaker stops one for.
HARD_FAULTS: tuple[str, ...] = tuple(f.key for f in FAULTS if f.hard)
_BY_KEY: Mapping[str, Fault] = {f.key: f for f in FAULTS}


def fault(key: str) -> Fault:
    return _BY_KEY[key]


def classify(error_kind: str | None, http_status: JSONValue = None, error_detail: JSONValue = "") -> Fault | None:
    """The fault a failed request (its ``error_kind``, ``http_status``, ``error_detail``) is; None for a success or a
    failure no declared fault names (``bad_sse`` in a stream, ``truncated``, ``stream_error`` …)."""
    if not error_kind:
        return None
    try:
        status = int(http_status) if http_status is not None and http_status == http_status else None
    except (TypeError, ValueError):
        status = None
    detail = _URL.sub("<url>", str(error_detail or ""))  # a host named tls.example is not a TLS failure
    return next((f for f in FAULTS if f.matches(error_kind, status, detail)), None)


def hard_fault(record: JSONMapping) -> Fault | None:
    """The hard fault a record (or an attempt's fields) ended with, else None."""
    found = classify(record.get("error_kind"), record.get("http_status"), record.get("error_detail"))
    return found if found is not None and found.hard else None


def render_fault_table() -> str:
    """The docs' table of :data:`FAULTS` (docs/how-to/broken-vendors.md)."""
    lines = ["| fault | hard | what happened | what to check |", "|---|---|---|---|"]
    lines += [f"| `{f.key}` | {'yes' if f.hard else 'no'} | {f.what} | {f.check} |" for f in FAULTS]
    return "\n".join(lines) + "\n"


__all__ = ["FAULTS", "HARD_FAULTS", "Fault", "classify", "fault", "hard_fault", "render_fault_table"]
