"""CPU per SSE event of the wire client alone (no Locust runner), plain TCP against TLS and lean against requests,
in rounds that alternate them, next to the floor: one ``json.loads`` of the same events, measured in the same run.

One process, gevent monkey-patched as a Locust run (``import locust`` first), N greenlets each with its own session
(``default_session(client)``, as a Locust user has), each sending K streaming requests through
``avv_harness.wire.stream.stream_chat`` to the simulator (a separate process; with TLS a second one serving HTTPS
with a self-signed certificate made at start, trusted through ``REQUESTS_CA_BUNDLE``). Every greenlet first sends
one request outside the timed part (its session and connection are made there: ``connect`` reports that CPU per
stream, a TLS handshake included), then per round and configuration: this process's CPU (``time.process_time``:
user + system) over the round / SSE events read. Each round also times ``json.loads`` of one answer's events (the
floor of reading an event). Rounds rotate the order of the configurations, so all see the same machine; medians
and ratios are printed. What is left of a Locust process's CPU per event beyond this is the harness's
(``bench/measure.py`` measures the whole).

    python bench/wire_cpu.py --streams 100 --per-stream 5 --rounds 6                      # paced: 100 tokens/s
    python bench/wire_cpu.py --instant --streams 20 --per-stream 20 --rounds 6             # all events at once
"""

from __future__ import annotations

import locust  # noqa: F401  (first: gevent monkey-patching, as in a Locust run)

# isort: split
import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import benchlib as bl  # noqa: E402
import gevent  # noqa: E402

from avv_harness.run.controller import default_session  # noqa: E402
from avv_harness.wire.stream import stream_chat  # noqa: E402
from avv_sim import start_simulator  # noqa: E402

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream", "Accept-Encoding": "identity"}
#: "Instant" answers: the first token at once and every token as fast as the simulator writes them.
INSTANT_TOKENS_PER_S = 1e6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=100, help="Concurrent streams (greenlets).")
    p.add_argument("--per-stream", type=int, default=5, help="Requests per stream and round.")
    p.add_argument("--rounds", type=int, default=6, help="Rounds (each runs every configuration, order rotated).")
    p.add_argument("--ttft-ms", type=float, default=20.0, help="Simulator ttft_ms.")
    p.add_argument("--tokens-per-s", type=float, default=100.0, help="Simulator tokens_per_s.")
    p.add_argument("--output-tokens", type=int, default=40, help="Simulator output_tokens.")
    p.add_argument("--instant", action="store_true",
                   help=f"ttft 0 and {INSTANT_TOKENS_PER_S:g} tokens/s: every event of an answer written at once.")
    p.add_argument("--clients", default="lean,requests", help="Comma-separated --avv-client values.")
    p.add_argument("--transports", default="plain,tls", help="Comma-separated: plain, tls.")
    p.add_argument("--json", default="", help="Also write the results to this JSON file.")
    args = p.parse_args(argv)
    if args.instant:
        args.ttft_ms, args.tokens_per_s = 0.0, INSTANT_TOKENS_PER_S
    return args


def body(n: int) -> bytes:
    return json.dumps({"model": bl.MODEL, "messages": [{"role": "user", "content": f"say something #{n}"}],
                       "stream": True, "stream_options": {"include_usage": True}}).encode()


class Streams:
    """One configuration's greenlets' sessions (kept from round to round, as a Locust user keeps its own)."""

    def __init__(self, client: str, url: str, streams: int):
        self.client, self.url = client, url
        self.sessions = [default_session(client) for _ in range(streams)]

    def run(self, per_stream: int, offset: int) -> tuple[float, int]:
        """(CPU seconds of this process, SSE events read) for ``per_stream`` requests on every session."""
        events = [0]

        def user(u: int) -> None:
            for k in range(per_stream):
                att = stream_chat(self.sessions[u], self.url, body(offset + u * per_stream + k), HEADERS, 10.0, 60.0)
                if not att.ok:
                    raise RuntimeError(f"{self.client}: {att.error_kind}: {att.error_detail}")
                events[0] += att.chunks

        cpu = time.process_time()
        gevent.joinall([gevent.spawn(user, u) for u in range(len(self.sessions))], raise_error=True)
        return time.process_time() - cpu, events[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"$ {bl.command_line()}")
    print(bl.machine_line(), flush=True)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    profile = bl.sim_profile(args.ttft_ms, args.tokens_per_s, args.output_tokens,
                             ttft_jitter_ms=0.0 if args.instant else bl.spread_jitter_ms(args.tokens_per_s))
    print(f"simulator: ttft_ms={args.ttft_ms:g} tokens_per_s={args.tokens_per_s:g} output_tokens="
          f"{args.output_tokens}; {args.streams} streams × {args.per_stream} requests per round", flush=True)
    work = Path(tempfile.mkdtemp(prefix="avv-wire-cpu-"))
    cert, key = bl.make_certificate(work) if "tls" in transports else (None, None)
    if cert is not None:
        os.environ["REQUESTS_CA_BUNDLE"] = str(cert)  # read once per session and URL by the client
    sims: dict[str, Any] = {}
    try:
        for transport in transports:
            tls = (str(cert), str(key)) if transport == "tls" else None
            sims[transport] = start_simulator(profiles={bl.PROFILE: profile}, tls=tls)
        urls = {t: sim.base_url(bl.PROFILE) + "/chat/completions" for t, sim in sims.items()}
        events = bl.fetch_events(urls[transports[0]], body(-1), verify=str(cert) if cert else True)
        configs = [(c, t) for t in transports for c in clients]
        streams: dict[tuple[str, str], Streams] = {}
        connect_us: dict[tuple[str, str], float] = {}
        for config in configs:  # sessions made and connected outside the timed rounds
            streams[config] = Streams(config[0], urls[config[1]], args.streams)
            cpu, _ = streams[config].run(1, -1_000_000)
            connect_us[config] = 1e6 * cpu / args.streams
        per_event: dict[tuple[str, str], list[float]] = {c: [] for c in configs}
        floor: list[float] = []
        for r in range(args.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for config in order:
                cpu, n = streams[config].run(args.per_stream, (r + 1) * 1_000_000)
                per_event[config].append(1e6 * cpu / n)
                print(f"round {r} {config[0]:<8} {config[1]:<5} {n} events  CPU {cpu:.2f} s  "
                      f"{per_event[config][-1]:.2f} µs/event", flush=True)
            floor.append(bl.json_loads_us(events))
            print(f"round {r} json.loads of one event: {floor[-1]:.2f} µs", flush=True)
    finally:
        for sim in sims.values():
            sim.stop()
    loads = statistics.median(floor)
    rows, results = [], []
    for config in configs:
        median = statistics.median(per_event[config])
        plain = statistics.median(per_event[(config[0], "plain")]) if (config[0], "plain") in per_event else None
        results.append({"client": config[0], "transport": config[1], "us_per_event": per_event[config],
                        "median_us_per_event": median, "connect_us_per_stream": connect_us[config]})
        rows.append([config[0], config[1], bl.fmt(median, 2), bl.fmt(min(per_event[config]), 2),
                     bl.fmt(max(per_event[config]), 2), bl.fmt(median / loads, 2),
                     bl.fmt(median / plain if plain else None, 2), bl.fmt(connect_us[config], 0)])
    print(f"\njson.loads of one event (the floor): median {loads:.2f} µs over {args.rounds} rounds "
          f"({len(events)} events of {sum(map(len, events)) // max(1, len(events))} bytes on average)")
    print(bl.table(["client", "transport", "µs/event", "min", "max", "× json.loads", "× plain", "connect µs"], rows))
    print("µs/event: median over rounds of this process's CPU / SSE events (requests included, connections kept "
          "from the warm-up); × json.loads: that over the floor; × plain: over the same client on plain TCP; "
          "connect µs: CPU per stream of the warm-up request (session, connection, TLS handshake).")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"command": bl.command_line(), "machine": bl.machine_line(),
                                               "options": vars(args), "json_loads_us": floor, "results": results},
                                              indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
