"""One item's bytes never reach another item (issue 33, F1): a property test that drives both clients through 1,000
random sequences of items each on one session (its connection pool) against a keep-alive server whose answers and
idle connections misbehave at random — a stray CRLF, a whole second response or garbage after a complete answer,
the same or an idle ``408`` or close while the connection sits idle, a reused connection closed unanswered or
answered ``408``, truncated heads, bodies cut short, ``Connection: close``, HTTP/1.0 — and asserts that every item's
record is its own: an item whose own answer was whole is a success holding exactly its own content (a stale
connection resent once), every other item fails, and no record ever holds another response's bytes.

Before: the lean client reused a connection holding unread bytes, and the next item read them (a stray CRLF →
``bad_sse``, a second response → its content, an idle 408 → ``http_4xx``). Seeded (``AVV_REUSE_SEED`` picks another
seed); a failure names the seed, the sequence and its plan.
"""

from __future__ import annotations

import os
import random
import ssl
from dataclasses import dataclass, field

import pytest
import requests

from avv_harness.wire.stream import stream_chat
from tests.wire_clients import client_session
from tests.wire_server import KeepAliveServer, Step, chunk, header_value, sse

pytestmark = pytest.mark.usefixtures("wire_client")  # every test on both clients (tests/wire_clients.py)

SEQUENCES = 1000
SEED = int(os.environ.get("AVV_REUSE_SEED", "33"))
ROLE = sse(chunk({"role": "assistant", "content": ""}))
STOP = sse(chunk({}, "stop"))
DONE = b"data: [DONE]\n\n"

# What an answer looks like (whole ones first), what follows it in the same write, what a reused connection does
# with the request, and what happens to a connection while it sits idle between two items.
WHOLE = ("length", "chunked", "length_close", "http10")
BROKEN = ("head_cut", "bad_status", "body_cut", "http_500")
TAILS = ("", "", "crlf", "stray_response", "garbage", "stray_408")
ON_REUSE = ("answer", "answer", "answer", "close", "408")
WHILE_IDLE = ("", "", "crlf", "stray_response", "408_close", "close", "garbage")


def sse_body(text: str) -> bytes:
    return ROLE + sse(chunk({"content": text})) + STOP + DONE


def response(text: str, shape: str = "length") -> bytes:
    body = sse_body(text)
    head = b"HTTP/1.0 200 OK\r\n" if shape == "http10" else b"HTTP/1.1 200 OK\r\n"
    head += b"Content-Type: text/event-stream\r\n"
    if shape == "chunked":
        return head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    if shape == "length_close":
        head += b"Connection: close\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
STRAY = {"crlf": [b"\r\n"], "stray_response": [response("STRAY")], "garbage": [b"\x00garbage\r\n\r\n"],
         "stray_408": [TIMEOUT_408], "408_close": [TIMEOUT_408, "close"], "close": ["close"], "": []}


def answer_steps(tag: str, shape: str) -> list[Step]:
    if shape == "head_cut":
        return [b"HTTP/1.1 200 OK\r\nContent-Ty", "close"]
    if shape == "bad_status":
        return [b"HTTP/1.1 099 Nope\r\nContent-Length: 0\r\n\r\n", "close"]
    if shape == "body_cut":
        return [response(tag)[:-20], "close"]
    if shape == "http_500":
        return [b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"
                b'{"error": "boom"}']
    steps: list[Step] = [response(tag, shape)]
    return steps + ["close"] if shape in ("length_close", "http10") else steps


@dataclass
class Item:
    tag: str
    shape: str  # how its own answer looks
    tail: str  # what follows the answer in the same write
    on_reuse: str  # what a reused connection does with its request
    idle: str  # what happens to the idle connection after it

    @property
    def whole(self) -> bool:
        return self.shape in WHOLE


@dataclass
class Sequence:
    items: list[Item] = field(default_factory=list)


def sequences(rng: random.Random, count: int) -> list[Sequence]:
    out = []
    for number in range(count):
        seq = Sequence()
        for index in range(rng.randint(2, 3)):
            shape = rng.choice(WHOLE) if rng.random() < 0.8 else rng.choice(BROKEN)
            seq.items.append(Item(f"s{number}i{index}", shape, rng.choice(TAILS), rng.choice(ON_REUSE),
                                  rng.choice(WHILE_IDLE)))
        out.append(seq)
    return out


class Vendor:
    """The keep-alive server's answers: each request by its X-Tag, as the current sequence's plan says. ``tls``:
    over HTTPS with this server context (tests/test_lean_tls.py)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.items: dict[str, Item] = {}
        self.server = KeepAliveServer(self.answer, tls)

    def answer(self, head: bytes, connection: int, number: int) -> list[Step]:
        item = self.items.get(header_value(head, "X-Tag") or "")
        if item is None:
            return ["close"]
        if number > 1 and item.on_reuse == "close":
            return ["close"]  # the server's idle timeout fired as the request came in
        if number > 1 and item.on_reuse == "408":
            return [TIMEOUT_408, "close"]
        steps = answer_steps(item.tag, item.shape)
        if steps and isinstance(steps[0], bytes) and item.tail:
            # the tail in the same write as the answer's last bytes
            steps[0] = steps[0] + b"".join(s for s in STRAY[item.tail] if isinstance(s, bytes))
        return steps


@pytest.mark.integration  # 2,500 requests over real sockets: seconds of work
def test_no_record_ever_holds_another_responses_bytes():
    assert each_record_holds_its_own_bytes(Vendor(), client_session(), SEQUENCES) > SEQUENCES


def each_record_holds_its_own_bytes(vendor: Vendor, session: requests.Session, count: int) -> int:
    """Play ``count`` random sequences (seed :data:`SEED`) on ``session`` against ``vendor`` and check every
    record; how many items read their own whole answer (most are whole: more than ``count``). Stops the server."""
    rng = random.Random(SEED)
    url = vendor.server.url() + "/chat/completions"
    tags_seen = 0
    try:
        for number, seq in enumerate(sequences(rng, count)):
            session.close()  # each sequence starts with an empty pool (the session stays usable)
            for item in seq.items:
                vendor.items[item.tag] = item
                att = stream_chat(session, url, b"{}", {"X-Tag": item.tag}, 2.0, 2.0, 5.0)
                content = "".join(att.content)
                where = f"seed {SEED}, sequence {number}, item {item.tag}: {seq}"
                assert "STRAY" not in content and all(t not in content for t in vendor.items if t != item.tag), \
                    (where, content)
                if item.whole:
                    assert att.ok and content == item.tag, (where, att.error_kind, att.error_detail)
                    tags_seen += 1
                else:
                    assert not att.ok, (where, content)
                vendor.server.while_idle(STRAY[item.idle])
            vendor.items.clear()
    finally:
        session.close()
        vendor.server.stop()
    return tags_seen
