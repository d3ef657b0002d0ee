"""Why the harness does not use Locust's ``FastHttpSession.iter_lines()``: first-token delay versus truth.

At concurrency 1, against one simulator profile with small SSE events, K streaming requests are sent
alternately with

(a) our wire client ``avv_harness.wire.stream.stream_chat``, whatever bytes have arrived parsed at once, with
    each of its clients (``--avv-client``): ``lean`` (its own HTTP/1.1 reader on gevent sockets, the default)
    and ``read1`` (requests + urllib3 ``read1``, ``--avv-client requests``);
(b) ``iter_lines``: Locust's ``FastHttpSession.iter_lines(url, method="POST", ...)`` (geventhttpclient).
    In locust 2.47 ``iter_lines`` is a method of the *session* (the response object has only
    ``iter_content``); it reads the body with ``iter_content(chunk_size=1024)``, and geventhttpclient's
    ``read(1024)`` keeps receiving until 1024 bytes are buffered (or the body ends). A small event is
    therefore only seen once ~1 KiB of later events has piled up behind it.

For each request: delay = client time of the first content-bearing ``data:`` line − the truth log's
``t_first_token`` (server wrote that event), in ms; both are ``time.monotonic()``.

Runs under gevent monkey-patching (``import locust`` patches on import), like the harness itself.

    python bench/iter_lines_vs_read1.py -k 20
"""

from __future__ import annotations

import locust  # noqa: F401  (first: gevent monkey-patching, as in a Locust run)

# isort: split
import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import benchlib as bl  # noqa: E402
import requests  # noqa: E402
from locust.contrib.fasthttp import FastHttpSession  # noqa: E402
from locust.env import Environment  # noqa: E402

from avv_core.items import ATTEMPT_HEADER, ITEM_HEADER  # noqa: E402
from avv_harness.run.controller import default_session  # noqa: E402
from avv_harness.wire.stream import stream_chat  # noqa: E402
from avv_sim import start_simulator  # noqa: E402

ITER_LINES_BLOCK = 1024  # FastHttpSession.iter_lines → iter_content(chunk_size=1024)
CLIENTS = ["lean", "read1", "iter_lines"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-k", "--requests", type=int, default=20, help="Requests per client.")
    p.add_argument("--ttft-ms", type=float, default=100.0, help="Simulator ttft_ms.")
    p.add_argument("--tokens-per-s", type=float, default=20.0, help="Simulator tokens_per_s.")
    p.add_argument("--output-tokens", type=int, default=16, help="Simulator output_tokens.")
    p.add_argument("--json", default="", help="Also write the results to this JSON file.")
    return p.parse_args(argv)


def request_body(i: int) -> bytes:
    """A small chat body, different per request (the simulator plans per body hash)."""
    body = {"model": bl.MODEL, "messages": [{"role": "user", "content": f"say something #{i}"}], "stream": True,
            "stream_options": {"include_usage": True}}
    return json.dumps(body).encode("utf-8")


def headers_for(tag: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Accept": "text/event-stream", "Accept-Encoding": "identity",
            ITEM_HEADER: tag, ATTEMPT_HEADER: "1"}


def read1_first_token(session: requests.Session, url: str, body: bytes, tag: str) -> tuple[float | None, int]:
    """(first token time, bytes per event) with the harness's own wire client."""
    att = stream_chat(session, url, body, headers_for(tag), 10.0, 60.0)
    per_event = att.bytes_read // max(1, att.chunks + 1)
    return (att.t_first_token if att.ok else None), per_event


def is_content_line(line: str) -> bool:
    """A ``data:`` line whose chunk carries non-empty ``delta.content`` (the harness's first-token rule)."""
    if not line.startswith("data:"):
        return False
    payload = line[5:].strip()
    if payload == "[DONE]":
        return False
    try:
        obj = json.loads(payload)
    except ValueError:
        return False
    return any((c.get("delta") or {}).get("content") for c in obj.get("choices") or [] if isinstance(c, dict))


def iter_lines_first_token(session: FastHttpSession, url: str, body: bytes, tag: str) -> tuple[float | None, int]:
    """(first token time, 0) with Locust's FastHttpSession.iter_lines (the whole body is read)."""
    first = None
    for line in session.iter_lines(url, method="POST", data=body, headers=headers_for(tag), name="iter_lines"):
        if first is None and is_content_line(line):
            first = time.monotonic()
    return first, 0


def run_clients(base_url: str, count: int) -> tuple[dict[str, dict[str, float | None]], int]:
    """Alternate the two clients (order swapped every request): (client first-token time by tag per client,
    largest bytes per event seen)."""
    url = base_url + "/chat/completions"
    fast = FastHttpSession(base_url=None, request_event=Environment().events.request, user=None)
    clients: dict[str, Callable[[Any, str, bytes, str], tuple[float | None, int]]] = {
        "lean": read1_first_token, "read1": read1_first_token, "iter_lines": iter_lines_first_token,
    }
    sessions: dict[str, Any] = {"lean": default_session("lean"), "read1": default_session("requests"),
                                "iter_lines": fast}
    seen: dict[str, dict[str, float | None]] = {name: {} for name in CLIENTS}
    event_bytes = 0
    for i in range(count):
        order = CLIENTS[i % 3:] + CLIENTS[:i % 3]  # each client first in turn
        for name in order:
            tag = f"bench/{name}/{i}"
            seen[name][tag], size = clients[name](sessions[name], url, request_body(i), tag)
            event_bytes = max(event_bytes, size)
    return seen, event_bytes


def delays_ms(seen: dict[str, float | None], truth: dict[str, dict[str, Any]]) -> list[float]:
    """client first-token time − truth.t_first_token, ms, for every request with both."""
    out = []
    for tag, t_client in seen.items():
        line = truth.get(tag)
        if t_client is not None and line and line.get("t_first_token") is not None:
            out.append((t_client - line["t_first_token"]) * 1000.0)
    return out


def summary(name: str, values: list[float]) -> dict[str, Any]:
    return {"client": name, "n": len(values), "p50_ms": bl.pct(values, 50), "p99_ms": bl.pct(values, 99),
            "max_ms": max(values) if values else None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"$ {bl.command_line()}")
    print(bl.machine_line())
    profile = bl.sim_profile(args.ttft_ms, args.tokens_per_s, args.output_tokens)
    print(f"simulator: ttft_ms={args.ttft_ms:g} tokens_per_s={args.tokens_per_s:g} "
          f"output_tokens={args.output_tokens}; concurrency 1; {args.requests} requests per client", flush=True)
    with tempfile.TemporaryDirectory(prefix="avv-bench-") as tmp:
        truth_path = Path(tmp) / "truth.jsonl"
        with start_simulator(profiles={bl.PROFILE: profile}, truth_log=truth_path) as sim:
            seen, event_bytes = run_clients(sim.base_url(bl.PROFILE), args.requests)
        truth = bl.load_truth(truth_path)
    results = [summary(name, delays_ms(seen[name], truth)) for name in CLIENTS]
    rows = [[r["client"], str(r["n"]), bl.fmt(r["p50_ms"], 2), bl.fmt(r["p99_ms"], 2), bl.fmt(r["max_ms"], 2)]
            for r in results]
    print("\nfirst-token delay = client saw the first content event − simulator wrote it (ms)")
    print(bl.table(["client", "n", "p50", "p99", "max"], rows))
    gap_ms = 1000.0 / args.tokens_per_s
    print(f"\nevents are ~{event_bytes} bytes on the wire, one every {gap_ms:.0f} ms: iter_lines waits for "
          f"{ITER_LINES_BLOCK} bytes, i.e. ~{ITER_LINES_BLOCK / max(1, event_bytes):.1f} events, before it yields "
          "a line (the role chunk sent at once counts towards the first block).")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": bl.command_line(), "options": vars(args),
                                               "event_bytes": event_bytes, "results": results}, indent=2) + "\n")
        print(f"results: {args.json}")
    return 0 if all(r["n"] == args.requests for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
