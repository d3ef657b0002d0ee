"""``avv-sim``: serve simulated vendors from a YAML config or from flags.

Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 2 for a bad config or bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from avv_core.command_line import command_parser
from avv_sim.profiles import Profile, ProfileError, apply_sets, load_profiles, make_profile, parse_set, split_set
from avv_sim.sample_file import GoldError, load_gold
from avv_sim.tls import server_context


def build_parser() -> argparse.ArgumentParser:
    p = command_parser(
        "avv-sim", "Simulated OpenAI-compatible chat-completions vendors, one per /<profile>/v1 prefix.",
    )
    p.add_argument("--config", help="YAML file with a top-level 'profiles' mapping (name -> knobs)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free port (default 0)")
    p.add_argument("--truth-log", help="append one JSON line of ground truth per request to this file")
    p.add_argument("--gold", metavar="FILE",
                   help="sample JSONL whose gold labels (expected_tool_call, expected_calls, tool_names) the "
                   "reference follows, found by each request's messages and tools; its agent tasks (lines with "
                   "'agent') are followed step by step")
    p.add_argument("--tls-cert", metavar="PEM",
                   help="serve HTTPS with this certificate chain (the benchmarks' TLS server; needs --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    p.add_argument("--profile", help="define (or, with --config, override) the profile NAME from --set flags")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="[PROFILE:]KNOB=VALUE",
        help="a knob for --profile (or for every profile without --profile); PROFILE:KNOB=VALUE sets it for that "
        "profile of --config only (e.g. to degrade one vendor between runs); VALUE is YAML",
    )
    return p


def resolve_profiles(args: argparse.Namespace) -> dict[str, Profile]:
    """Profiles from --config, then --profile/--set applied on top (``PROFILE:KNOB=VALUE`` items last, on their
    profile only)."""
    scoped = [item for item in args.sets if split_set(item)[0] is not None]
    overrides = parse_set([item for item in args.sets if split_set(item)[0] is None])
    profiles = load_profiles(args.config) if args.config else {}
    if args.profile:
        base = profiles[args.profile].to_knobs() if args.profile in profiles else {}
        profiles[args.profile] = make_profile(args.profile, {**base, **overrides})
    elif overrides:
        if not profiles:
            raise ProfileError("--set needs --profile NAME (or --config)")
        profiles = {n: make_profile(n, {**p.to_knobs(), **overrides}) for n, p in profiles.items()}
    if not profiles:
        raise ProfileError("no profiles: give --config FILE or --profile NAME [--set KNOB=VALUE ...]")
    return apply_sets(profiles, scoped) if scoped else profiles


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        profiles = resolve_profiles(args)
        book = load_gold(args.gold) if args.gold else None
    except (ProfileError, GoldError) as exc:
        print(f"avv-sim: error: {exc}", file=sys.stderr)
        return 2
    gold = book.entries if book is not None else None
    if book is not None and book.skipped:
        print(f"avv-sim: note: {args.gold}: {len(book.skipped)} line(s) without usable gold skipped "
              f"({'; '.join(book.skipped[:3])})", file=sys.stderr)
    if bool(args.tls_cert) != bool(args.tls_key):
        print("avv-sim: error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = None
    if args.tls_cert:
        try:
            tls = server_context(args.tls_cert, args.tls_key)
        except OSError as exc:  # a missing or unreadable file, or one that is not PEM (ssl.SSLError)
            print(f"avv-sim: error: --tls-cert {args.tls_cert} / --tls-key {args.tls_key}: cannot load the "
                  f"certificate and its key ({exc.strerror or exc})", file=sys.stderr)
            return 2
    from avv_sim.server import serve  # aiohttp is imported only once the config is known to be good

    try:
        asyncio.run(serve(profiles, host=args.host, port=args.port, truth_log=args.truth_log, gold=gold,
                          agents=book.agents if book is not None else None, tls=tls))
    except OSError as exc:
        print(f"avv-sim: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
