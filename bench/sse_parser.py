"""SSE parsing: sseclient-py (the reader used before issue 22) against the wire client's own SSEParser, on the
same bytes fed in the same reads. Prints CPU per event for ordinary streams and the time one large event takes,
the case that blocked a Locust process (every user of the process waits while one event is parsed).

    python bench/sse_parser.py [--events 20000] [--repeats 5]

Both parsers get identical input (an iterator of byte blocks, as urllib3's read1 returns them) and must
produce identical (type, data) events; the script checks that before timing. Figures are process CPU time
(time.process_time), best of --repeats, so a busy machine inflates both sides alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sseclient  # noqa: E402  (the test extra: the independent reader)

from avv_harness.wire.sse import SSEParser  # noqa: E402


def chunk_event(i: int) -> bytes:
    delta = {"content": f" token{i}"}
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def blocks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def with_sseclient(reads: list[bytes]) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in sseclient.SSEClient(iter(reads)).events()]


def with_parser(reads: list[bytes]) -> list[tuple[str, str]]:
    parser = SSEParser(max_event_bytes=1 << 30)
    out = []
    for block in reads:
        out.extend(parser.feed(block))
    out.extend(parser.close())
    return [((kind or b"message").decode(), data.decode()) for kind, data in out]


def best_cpu(fn: Callable[[list[bytes]], object], reads: list[bytes], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn(reads)
        best = min(best, time.process_time() - start)
    return best


def cases(n_events: int) -> Iterator[tuple[str, list[bytes], int]]:
    stream = b"".join(chunk_event(i) for i in range(n_events))
    per_event = [chunk_event(i) for i in range(n_events)]
    yield "ordinary stream, one event per read", per_event, n_events
    yield "ordinary stream, 64 KiB reads", blocks(stream, 65536), n_events
    for kib in (64, 256, 1024):
        lines = b"".join(b"data: " + b"x" * 30 + b"\n" for _ in range(kib * 1024 // 37)) + b"\n"
        yield f"one {kib} KiB event of short data lines, 64 KiB reads", blocks(lines, 65536), 1
    one_line = b"data: " + b"y" * (4 << 20) + b"\n\n"
    yield "one 4 MiB single-line event, 64 KiB reads", blocks(one_line, 65536), 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'case':<55} {'sseclient-py':>14} {'SSEParser':>12} {'ratio':>7}")
    for name, reads, events in cases(args.events):
        if with_sseclient(reads) != with_parser(reads):
            print(f"{name}: the two parsers disagree", file=sys.stderr)
            return 1
        repeats = args.repeats if events > 1 else max(1, args.repeats // 2)
        old, new = best_cpu(with_sseclient, reads, repeats), best_cpu(with_parser, reads, repeats)
        unit, scale = ("µs/event", 1e6 / events) if events > 1 else ("ms", 1e3)
        print(f"{name:<55} {old * scale:>9.1f} {unit:<4} {new * scale:>7.1f} {unit:<4} {old / new:>6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
