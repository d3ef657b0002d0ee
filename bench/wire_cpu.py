"""CPU per SSE event of the wire client alone, lean against requests (issue 28), in rounds that alternate them.

One process, gevent monkey-patched as a Locust run (``import locust`` first), N greenlets each with its own session
(``default_session(client)``, as a Locust user has), each sending K streaming requests through
``avv_harness.wire.stream.stream_chat`` to the simulator (a separate process: ttft 20 ms, ``--tokens-per-s``,
``--output-tokens``). Per round and client: this process's CPU (``time.process_time``: user + system) over the
round / SSE events read. Rounds alternate the order of the clients, so both see the same machine; the medians and
their ratio are printed. No Locust runner, stats or records: what is left of a Locust process's CPU per event
beyond this is the harness's (``bench/measure.py`` measures the whole).

    python bench/wire_cpu.py --streams 100 --per-stream 3 --rounds 4
"""

from __future__ import annotations

import locust  # noqa: F401  (first: gevent monkey-patching, as in a Locust run)

# isort: split
import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import benchlib as bl  # noqa: E402
import gevent  # noqa: E402

from avv_harness.run.controller import default_session  # noqa: E402
from avv_harness.wire.stream import stream_chat  # noqa: E402
from avv_sim import start_simulator  # noqa: E402

CLIENTS = ("lean", "requests")
HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream", "Accept-Encoding": "identity"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=100, help="Concurrent streams (greenlets).")
    p.add_argument("--per-stream", type=int, default=3, help="Requests per stream and round.")
    p.add_argument("--rounds", type=int, default=4, help="Rounds (each runs both clients, alternating the order).")
    p.add_argument("--tokens-per-s", type=float, default=100.0, help="Simulator tokens_per_s.")
    p.add_argument("--output-tokens", type=int, default=40, help="Simulator output_tokens.")
    return p.parse_args(argv)


def body(n: int) -> bytes:
    return json.dumps({"model": bl.MODEL, "messages": [{"role": "user", "content": f"say something #{n}"}],
                       "stream": True, "stream_options": {"include_usage": True}}).encode()


def run_round(url: str, client: str, streams: int, per_stream: int, offset: int) -> tuple[float, int]:
    """(CPU seconds of this process, SSE events read)."""
    events = [0]

    def user(u: int) -> None:
        with default_session(client) as session:
            for k in range(per_stream):
                att = stream_chat(session, url, body(offset + u * per_stream + k), HEADERS, 10.0, 60.0)
                if not att.ok:
                    raise RuntimeError(f"{client}: {att.error_kind}: {att.error_detail}")
                events[0] += att.chunks

    cpu = time.process_time()
    gevent.joinall([gevent.spawn(user, u) for u in range(streams)], raise_error=True)
    return time.process_time() - cpu, events[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"$ {bl.command_line()}")
    print(bl.machine_line(), flush=True)
    profile = bl.sim_profile(20.0, args.tokens_per_s, args.output_tokens,
                             ttft_jitter_ms=bl.spread_jitter_ms(args.tokens_per_s))
    per_event: dict[str, list[float]] = {c: [] for c in CLIENTS}
    with start_simulator(profiles={bl.PROFILE: profile}) as sim:
        url = sim.base_url(bl.PROFILE) + "/chat/completions"
        for r in range(args.rounds):
            for client in (CLIENTS if r % 2 == 0 else CLIENTS[::-1]):
                cpu, events = run_round(url, client, args.streams, args.per_stream, r * 1_000_000)
                per_event[client].append(1e6 * cpu / events)
                print(f"round {r} {client:<8} {events} events  CPU {cpu:.2f} s  {per_event[client][-1]:.1f} µs/event",
                      flush=True)
    lean, req = (statistics.median(per_event[c]) for c in CLIENTS)
    print(f"\nmedian µs/event: lean {lean:.1f}, requests {req:.1f}; ratio requests / lean = {req / lean:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
