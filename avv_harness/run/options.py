"""The ``--avv-*`` options: registration on Locust's parser, and :class:`RunOptions`, their checked,
typed view (every count and duration range-checked: a bad value is an InputError naming the option).

Options come from the command line, ``locust.conf`` and ``LOCUST_AVV_*`` environment variables, exactly
as Locust reads its own. Defaults point at the demo that ships inside the package (``avv_harness/data``),
so an installed package runs the demo from any directory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avv_core.decision_options import DEFAULT_CONFIDENCE, VERDICT_MODES, parse_confidence, parse_verdict_mode
from avv_core.errors import InputError
from avv_core.json_types import JSONObject
from avv_harness.dialects.overrides import Overrides, parse_overrides
from avv_harness.wire.sse import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:  # scoring is imported when a run is scored
    from argparse import Action, ArgumentParser, Namespace, _ArgumentGroup

    from avv_scoring import ScoreRequest
    from avv_scoring.verdict import Thresholds

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEFAULT_CONFIG = DATA_DIR / "demo.yaml"
DEFAULT_SAMPLES = DATA_DIR / "demo.jsonl"
DEFAULT_SIM_CONFIG = DATA_DIR / "sim.yaml"
DEFAULT_LADDER_CAP = 32
MIN_MAX_EVENT_BYTES = 1024
# Rows the live view keeps to score a run so far (bench/README.md "master_ingest.py": its re-scoring runs in a
# thread that shares the GIL with the master's event loop; at 2,000 records/s the send → row p99 passed 1 s
# once it held ~50 k rows, and stayed at 0.6 s with 20 k)
DEFAULT_LIVE_ROWS = 20_000
#: Where --avv-metrics-port listens unless --avv-metrics-host says otherwise: loopback, since the endpoint has
#: no authentication (a container that Prometheus scrapes sets 0.0.0.0 and a NetworkPolicy).
DEFAULT_METRICS_HOST = "127.0.0.1"
#: --avv-mode values: replay the samples and score them (verify), ramp the load (stress), or send the conformance
#: suite's probes and check what each vendor honours (conformance: docs/how-to/conformance.md).
MODES = ("verify", "stress", "conformance")
#: ``--avv-preflight``: off (no request), warn (print what it found), strict (refuse the run on a hard fault).
PREFLIGHT_MODES = ("strict", "warn", "off")
DEFAULT_PREFLIGHT = "strict"
#: ``--avv-breaker``: items in a row ending with the same hard fault that stop a vendor (docs/how-to/broken-vendors.md:
#: enough that one bad moment does not stop a vendor — with retries each item is up to 4 attempts — few enough that a
#: dead vendor costs seconds, not its share of the run).
DEFAULT_BREAKER_ITEMS = 5
#: Largest --avv-concurrency: users per vendor in one process (a Locust process runs a few hundred streams well;
#: more belongs on workers, and the value is a typo long before it is a plan).
MAX_CONCURRENCY = 1000


class _EnvGroup:
    """An argument group that gives every option its ``LOCUST_AVV_*`` environment variable (Locust's
    configargparse reads custom options from the environment only when ``env_var`` is set)."""

    def __init__(self, group: _ArgumentGroup):
        self._group = group

    def add_argument(self, *names: str, **kwargs: Any) -> Action:
        kwargs.setdefault("env_var", "LOCUST_" + names[0][2:].replace("-", "_").upper())
        try:
            return self._group.add_argument(*names, **kwargs)
        except TypeError:  # a plain argparse parser (tests, docs): no env_var support
            kwargs.pop("env_var", None)
            return self._group.add_argument(*names, **kwargs)


#: The prefix of every option of ours on Locust's parser.
OPTION_PREFIX = "--avv-"


def no_abbreviations_of_ours(parser: ArgumentParser) -> None:
    """Locust's parser (configargparse, an :class:`argparse.ArgumentParser` built with ``allow_abbrev`` on, which Locust
    does not let a plugin change) takes a prefix of an option for the option: ``--avv-sample x`` silently set
    ``--avv-samples``. Abbreviations are looked up in the parser's ``_get_option_tuples``; this parser's own drops
    every match that is one of ours, so a prefix of our options is an unknown argument, which Locust's parser answers
    with "Did you mean '--avv-samples'?". Locust's own options keep their abbreviations, as Locust documents them."""
    lookup = parser._get_option_tuples

    def without_ours(option_string: str) -> list[Any]:
        return [match for match in lookup(option_string) if not str(match[1]).startswith(OPTION_PREFIX)]

    parser._get_option_tuples = without_ours  # type: ignore[method-assign]  # this parser's lookup only


def add_arguments(parser: ArgumentParser) -> None:
    """Register every ``--avv-*`` option on Locust's (or a plain argparse) parser, and turn off abbreviations of them
    (:func:`no_abbreviations_of_ours`)."""
    no_abbreviations_of_ours(parser)
    group = _EnvGroup(parser.add_argument_group(
        "avv-locust", "Vendor verification options (also from locust.conf / LOCUST_AVV_*)"
    ))
    add = group.add_argument
    add("--avv-config", default=str(DEFAULT_CONFIG), help="Vendor config YAML (AVV layout).")
    add("--avv-samples", default=str(DEFAULT_SAMPLES), help="Sample JSONL (one request body per line).")
    add("--avv-model", default="", help="Comma-separated models of the config to run (default all).")
    add("--avv-repeats", type=int, default=1, help="Times each sample is sent to each vendor (≥ 1).")
    add("--avv-out", default="results", help="Folder for run folders (records.csv, run.json, scores).")
    add("--avv-run-id", default="", help="Run folder name (default: timestamp).")
    add("--avv-retries", type=int, default=3,
        help="Retries per item (connect, timeout, 429, 5xx, overloaded, truncated).")
    add("--avv-backoff-s", type=float, default=0.5, help="Base of the exponential back-off, seconds.")
    add("--avv-retry-after-cap-s", type=float, default=30.0, help="Longest Retry-After honoured, seconds.")
    add("--avv-timeout", type=float, default=0.0, help="Idle read timeout in seconds (default: vendor timeout_s).")
    add("--avv-max-request-s", type=float, default=600.0,
        help="Total time cap per attempt, seconds (default 600; a vendor's max_request_s wins).")
    add("--avv-max-event-bytes", type=int, default=DEFAULT_MAX_EVENT_BYTES,
        help="Largest SSE event or line accepted from a vendor, bytes (default 4 MiB; ≥ 1024); a larger one "
        "fails the attempt as bad_sse.")
    add("--avv-client", default="lean", choices=["lean", "requests"],
        help="HTTP client of the streams: lean (default; its own HTTP/1.1 reader on gevent sockets, less CPU per event "
        "than requests) or requests (requests + urllib3, the earlier client; proxied URLs always use it).")
    add("--avv-sim-config", default=str(DEFAULT_SIM_CONFIG), help="Simulator profiles for {sim} vendors.")
    add("--avv-sim-set", action="append", default=None, metavar="[PROFILE:]KNOB=VALUE",
        help="A simulator knob for this run on top of --avv-sim-config (repeatable; PROFILE: sets it for one "
        "profile, e.g. to degrade one vendor; run.json and the truth log show it).")
    add("--avv-history", default="", metavar="PATH",
        help="Append the finished, scored run to this history database (SQLite; avv-score history trend reads it).")
    add("--avv-skip-bad-lines", action="store_true", default=False, help="Skip malformed sample lines.")
    add("--avv-resume", default="", help="Run folder to resume: runs only its missing, failed or changed items.")
    add("--avv-max-total-tokens", type=int, default=0,
        help="Token budget: an item starts only while spent + reserved tokens are below N (each item reserves its "
        "worst case first).")
    add("--avv-max-cost", type=float, default=0.0,
        help="Cost budget in the vendors' price currency, reserved like --avv-max-total-tokens (every vendor needs "
        "a price).")
    add("--avv-concurrency", type=int, default=None,
        help=f"Users per vendor for this run, overriding every vendor's concurrency (1–{MAX_CONCURRENCY}; verify "
        "mode).")
    add("--avv-spawn-rate", type=float, default=0.0,
        help="Users spawned per second (default 0: all at once; --avv-start-jitter-s spreads their starts).")
    add("--avv-start-jitter-s", type=float, default=1.0,
        help="Each user waits U(0, this) before its first request, so new streams do not start in one burst.")
    add("--avv-no-score", action="store_true", default=False, help="Do not score the run at the end.")
    add("--avv-no-html", action="store_true", default=False,
        help="Score the run but do not write report.html (its figures take ~2 s per run).")
    add("--avv-mode", default="verify", choices=list(MODES),
        help="verify (default), stress, or conformance: the conformance suite's probes, built from the samples with "
        "tools and the project's fixed requests (docs/how-to/conformance.md).")
    add("--avv-stress-levels", default="", help="Concurrency ladder, e.g. 1,2,4,8 (default doubling to 32).")
    add("--avv-stress-step-s", type=float, default=30.0, help="Seconds each level is held.")
    add("--avv-slo-ttft-p95-ms", type=float, default=5000.0, help="SLO: TTFT p95 at most this.")
    add("--avv-slo-error-rate", type=float, default=0.01, help="SLO: share of failed requests at most this.")
    add("--avv-thresholds", default=DEFAULT_THRESHOLDS, metavar="PRESET|FILE.yaml",
        help="Verdict thresholds of the end-of-run scoring and of --avv-settle: a preset (avv, k2vv, k2vv-thinking, "
        "minimax, none) or a thresholds YAML file, as avv-score --thresholds (default avv).")
    add("--avv-verdict", default="interval", metavar="|".join(VERDICT_MODES),
        help="How bounds are judged, as avv-score --verdict: interval (default; PASS / FAIL / INCONCLUSIVE at "
        "--avv-confidence), point (the peers' point-estimate rule) or statistical.")
    add("--avv-confidence", default="0.95", metavar="P",
        help="Confidence of the verdicts and intervals (default 0.95; 95 also works); --avv-settle's error rate is "
        "1 − P unless --avv-settle-alpha is given.")
    add("--avv-strict", action="store_true", default=False,
        help="Exit with status 7 when a vendor FAILs its verdict, 8 when one is INCONCLUSIVE (a vendor whose every "
        "item failed exits 6 with or without it).")
    add("--avv-allow-inconclusive", action="store_true", default=False,
        help="With --avv-strict: an INCONCLUSIVE vendor does not change the exit status.")
    add("--avv-settle", action="store_true", default=False,
        help="Stop sending a vendor's items once its verdict is decided (the sequential form of the verdict: an "
        "anytime-valid test of each bound; items handed out in a seeded random order; docs/scoring.md).")
    add("--avv-settle-alpha", type=float, default=None,
        help="--avv-settle: error rate per vendor, split over its bounds (default 1 − --avv-confidence; > 0, ≤ 0.5).")
    add("--avv-settle-every", type=int, default=20, help="--avv-settle: records between looks (default 20; ≥ 1).")
    add("--avv-settle-seed", type=int, default=0,
        help="--avv-settle: seed of the hand-out order (default 0: a new random seed, written to run.json).")
    add("--avv-temperature", type=float, default=None, help="Override every request's temperature (0–2).")
    add("--avv-max-tokens", type=int, default=None,
        help="Override every request's max_tokens (and max_completion_tokens where a sample has it).")
    add("--avv-extra-body", default="", help="JSON object deep-merged over every request (after the vendor's "
        "extra_body).")
    add("--avv-live-rows", type=int, default=DEFAULT_LIVE_ROWS,
        help="Rows the live view (web UI, /avv/metrics) keeps in memory to score the run so far; past them it "
        "keeps counting but scores no more rows, so a long run's memory stays bounded (0: no limit).")
    add("--avv-metrics-port", type=int, default=0,
        help="Serve Prometheus metrics on this port (/metrics; the master or a local run; with the web UI they are "
        "also at /avv/metrics). 0: off.")
    add("--avv-metrics-host", default=DEFAULT_METRICS_HOST, metavar="ADDRESS",
        help=f"Interface the --avv-metrics-port server listens on (default {DEFAULT_METRICS_HOST}: this machine "
        "only; 0.0.0.0 for every interface, e.g. in a container Prometheus scrapes). It has no authentication.")
    add("--avv-cors-origin", action="append", default=None, metavar="ORIGIN",
        help="A web origin (scheme://host[:port]) allowed to read the web UI and call it from a browser (repeatable; "
        "default none: other web sites get no CORS headers and their POSTs are refused; docs/how-to/security.md).")
    add("--avv-header", action="append", default=None, metavar="NAME:VALUE",
        help="Header added to every request (repeatable; in locust.conf: avv-header = [A:1, B:2]).")
    add("--avv-preflight", default=DEFAULT_PREFLIGHT, choices=PREFLIGHT_MODES,
        help="Before any load, one small request per vendor (at once, at most ~20 s): strict (default) refuses the "
        "run, exit status 2, when a vendor cannot answer (connect, DNS, TLS, 401/403, 404, unknown model), naming "
        "the vendor, the URL called and what to check; warn only prints what it found; off sends nothing.")
    add("--avv-breaker", type=int, default=DEFAULT_BREAKER_ITEMS, metavar="K",
        help=f"Circuit breaker: stop a vendor whose last K items (default {DEFAULT_BREAKER_ITEMS}) all ended with the "
        "same hard fault (connection refused, DNS, TLS, 401/403, 404, unknown model); its other items are skipped "
        "(vendor_down: a resume sends them) and the exit status is 6. 0: off.")


def preparse_options(args: list[str] | None = None) -> Namespace:
    """Our options as Locust will parse them (command line, LOCUST_* env, locust.conf), read early:
    the User classes are named after the configured vendors, so the config is needed at import time."""
    from locust.argument_parser import get_parser

    options, _ = get_parser().parse_known_args(args=args)
    return options


def parse_levels(text: str) -> tuple[int, ...]:
    if not text.strip():
        return tuple(2**i for i in range(int(math.log2(DEFAULT_LADDER_CAP)) + 1))
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--avv-stress-levels: expected comma-separated integers, got {text!r}") from None
    if not levels or any(level < 1 for level in levels) or levels != sorted(set(levels)):
        raise InputError(f"--avv-stress-levels: levels must be increasing positive integers, got {text!r}")
    return tuple(levels)


def parse_origins(value: object) -> tuple[str, ...]:
    """``--avv-cors-origin`` values (repeated flags, commas, or ``[a, b]`` from locust.conf) as the browser sends
    them in ``Origin``: lower-case ``scheme://host[:port]``, the default port dropped. InputError for anything
    else, ``*`` included (it would let every web site read the UI and start runs)."""
    items = value if isinstance(value, list) else [value] if value else []
    origins: list[str] = []
    for item in items:
        for part in str(item).strip().strip("[]").split(","):
            text = part.strip().strip("'\"")
            if text:
                origins.append(_origin(text))
    return tuple(dict.fromkeys(origins))


def _origin(text: str) -> str:
    from urllib.parse import urlsplit

    if text == "*":
        raise InputError("--avv-cors-origin: '*' would let every web site read the web UI and start runs; list "
                         "the origins that need it (scheme://host[:port])")
    parts = urlsplit(text.rstrip("/"))
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.path or parts.query
            or parts.fragment or parts.username is not None or port == -1):
        raise InputError(f"--avv-cors-origin: {text!r} is not a web origin (scheme://host[:port], e.g. "
                         f"https://dashboard.example.com)")
    scheme = parts.scheme.lower()
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def concurrency_override(parsed: Namespace) -> int | None:
    """``--avv-concurrency`` checked (1 … :data:`MAX_CONCURRENCY`), or None when not given."""
    value = getattr(parsed, "avv_concurrency", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise InputError(f"--avv-concurrency: must be a whole number from 1 to {MAX_CONCURRENCY}, got {value!r}")
    return value


@dataclass(frozen=True)
class StressSettings:
    levels: tuple[int, ...]  # users per vendor at each level
    step_s: float  # seconds each level is held
    slo_ttft_p95_ms: float  # a level meets the SLO when TTFT p95 ≤ this …
    slo_error_rate: float  # … and the failed share ≤ this


#: --avv-thresholds' default: the registry's bounds (avv_scoring is not imported for it).
DEFAULT_THRESHOLDS = "avv"


@dataclass(frozen=True)
class DecisionSettings:
    """How the end-of-run scoring (and --avv-settle) decides, and how strict the exit status is."""

    thresholds: str = DEFAULT_THRESHOLDS  # --avv-thresholds: a preset name or a YAML file
    verdict: str = "interval"  # interval | point | statistical
    confidence: float = DEFAULT_CONFIDENCE  # the verdicts' and intervals' confidence
    strict: bool = False  # --avv-strict: exit 7 on a FAIL, 8 on an INCONCLUSIVE
    allow_inconclusive: bool = False  # with --avv-strict, INCONCLUSIVE exits 0
    resolved: Thresholds | None = None  # of a non-default --avv-thresholds (read and checked when options are)

    def score_request(self, run_dir: Path, html: bool) -> ScoreRequest:
        """The :class:`avv_scoring.ScoreRequest` of the run's end: its folder, scored as ``avv-score`` would with
        these options."""
        import avv_scoring

        return avv_scoring.ScoreRequest(
            (str(run_dir),), out_dir=str(run_dir), html=html, thresholds=self.thresholds_object(),
            stats=avv_scoring.StatsSettings(verdict=self.verdict, level=self.confidence), strict=self.strict,
            allow_inconclusive=self.allow_inconclusive)

    def thresholds_object(self) -> Thresholds:
        """The Thresholds in force (imports avv_scoring)."""
        if self.resolved is not None:
            return self.resolved
        from avv_scoring.presets import resolve_thresholds

        return resolve_thresholds(self.thresholds)


def decision_settings(parsed: Namespace) -> DecisionSettings:
    """--avv-thresholds / --avv-verdict / --avv-confidence / --avv-strict / --avv-allow-inconclusive, checked: a bad
    value (an unknown preset, an unreadable thresholds file, a confidence outside 50–100 %) is an InputError."""
    spec = str(getattr(parsed, "avv_thresholds", None) or DEFAULT_THRESHOLDS)
    try:
        verdict = parse_verdict_mode(str(getattr(parsed, "avv_verdict", None) or "interval"))
    except ValueError as exc:
        raise InputError(f"--avv-verdict: {exc}") from None
    try:
        level = parse_confidence(getattr(parsed, "avv_confidence", None) or DEFAULT_CONFIDENCE)
    except ValueError as exc:
        raise InputError(f"--avv-confidence: {exc}") from None
    resolved = None
    if spec != DEFAULT_THRESHOLDS:
        from avv_scoring.presets import resolve_thresholds

        try:
            resolved = resolve_thresholds(spec)
        except InputError as exc:
            raise InputError(f"--avv-thresholds: {exc}") from None
    return DecisionSettings(spec, verdict, level, bool(getattr(parsed, "avv_strict", False)),
                            bool(getattr(parsed, "avv_allow_inconclusive", False)), resolved)


@dataclass(frozen=True)
class SettleSettings:
    alpha: float  # error rate per vendor, split over its bounds
    every: int  # records between looks
    seed: int | None  # seed of the hand-out order (None: a new one per run; a resumed run keeps its own)


@dataclass(frozen=True)
class RunOptions:
    """The ``--avv-*`` options after checking. Built once per process from Locust's parsed options."""

    config: str  # vendor config path
    samples: str  # sample JSONL path
    models: tuple[str, ...]  # models to run (empty: all)
    repeats: int  # times each sample goes to each vendor
    out: str  # folder holding run folders
    run_id: str  # run folder name ("" = a timestamp)
    retries: int  # retries per item
    backoff_s: float  # exponential back-off base
    retry_after_cap_s: float  # longest Retry-After honoured
    timeout_s: float | None  # idle read timeout override (None: each vendor's timeout_s)
    max_request_s: float  # total time cap per attempt (a vendor's own max_request_s wins)
    max_event_bytes: int  # largest SSE event or line read from a vendor
    client: str  # HTTP client of the streams: lean | requests
    sim_config: str  # simulator profiles
    sim_sets: tuple[str, ...]  # --avv-sim-set knobs applied on top of them
    history: str  # history database the run is appended to ("" = none)
    skip_bad_lines: bool  # skip malformed sample lines instead of failing
    resume: str  # run folder to resume ("" = a new run)
    max_total_tokens: int  # token budget (0 = none)
    max_cost: float  # cost budget in the price currency (0 = none)
    concurrency: int | None  # users per vendor for this run (None: each vendor's own)
    spawn_rate: float  # users per second (0 = all at once)
    start_jitter_s: float  # random delay before each user's first request
    no_score: bool  # skip scoring at the end
    no_html: bool  # score, but without report.html
    mode: str  # verify | stress | conformance
    stress: StressSettings | None  # set in stress mode
    settle: SettleSettings | None  # --avv-settle
    decision: DecisionSettings  # --avv-thresholds, --avv-verdict, --avv-confidence, --avv-strict
    run_time_s: float | None  # Locust's -t/--run-time (honoured by the run's shape)
    metrics_port: int  # Prometheus metrics server port (0 = none)
    metrics_host: str  # interface the metrics server listens on
    cors_origins: tuple[str, ...]  # web origins allowed to read / call the web UI from a browser
    live_rows: int  # rows the live board keeps to score (0 = no limit)
    overrides: Overrides  # --avv-temperature / --avv-max-tokens / --avv-extra-body / --avv-header
    raw: JSONObject  # every avv_* option as parsed, for run.json
    preflight: str = DEFAULT_PREFLIGHT  # strict | warn | off: the check of every vendor before the load
    breaker_items: int = DEFAULT_BREAKER_ITEMS  # items in a row with one hard fault that stop a vendor (0: off)

    @property
    def is_stress(self) -> bool:
        return self.mode == "stress"

    @property
    def is_conformance(self) -> bool:
        return self.mode == "conformance"

    @classmethod
    def from_parsed(cls, parsed: Namespace) -> RunOptions:
        """Check and type the parsed options; InputError names the first bad option."""
        def number(name: str, minimum: float, *, strict: bool = False, maximum: float | None = None) -> float:
            value = getattr(parsed, name)
            flag = "--" + name.replace("_", "-")
            if value is None or not math.isfinite(float(value)):
                raise InputError(f"{flag}: must be a finite number, got {value!r}")
            if (value <= minimum) if strict else (value < minimum):
                raise InputError(f"{flag}: must be {'>' if strict else '≥'} {minimum:g}, got {value!r}")
            if maximum is not None and value > maximum:
                raise InputError(f"{flag}: must be ≤ {maximum:g}, got {value!r}")
            return value

        stress = None
        if parsed.avv_mode == "stress":
            stress = StressSettings(
                levels=parse_levels(parsed.avv_stress_levels),
                step_s=number("avv_stress_step_s", 0, strict=True),
                slo_ttft_p95_ms=number("avv_slo_ttft_p95_ms", 0, strict=True),
                slo_error_rate=number("avv_slo_error_rate", 0, maximum=1),
            )
        decision = decision_settings(parsed)
        settle = None
        if getattr(parsed, "avv_settle", False):
            if parsed.avv_mode != "verify":
                raise InputError(f"--avv-settle: only in verify mode (a {parsed.avv_mode} run has no verdict bound "
                                 "to settle)")
            if decision.verdict != "interval":
                raise InputError("--avv-settle is the sequential form of --avv-verdict interval: it cannot be "
                                 f"combined with --avv-verdict {decision.verdict}")
            if getattr(parsed, "avv_settle_alpha", None) is None:
                parsed.avv_settle_alpha = round(1.0 - decision.confidence, 12)
            settle = SettleSettings(
                alpha=number("avv_settle_alpha", 0, strict=True, maximum=0.5),
                every=int(number("avv_settle_every", 1)),
                seed=int(number("avv_settle_seed", 0)) or None,
            )
        if parsed.avv_mode == "conformance":
            if int(number("avv_repeats", 1)) != 1:
                raise InputError("--avv-repeats: a conformance run sends each probe once (leave it at 1)")
            for flag in ("avv_temperature", "avv_max_tokens"):
                if getattr(parsed, flag, None) is not None:
                    raise InputError(f"--{flag.replace('_', '-')}: a conformance run sends each probe's own "
                                     "parameters (its probes set temperature and max_tokens)")
        run_time = getattr(parsed, "run_time", None)
        timeout = number("avv_timeout", 0)
        return cls(
            config=str(parsed.avv_config),
            samples=str(parsed.avv_samples),
            models=tuple(m.strip() for m in str(parsed.avv_model).split(",") if m.strip()),
            repeats=int(number("avv_repeats", 1)),
            out=str(parsed.avv_out),
            run_id=str(parsed.avv_run_id),
            retries=int(number("avv_retries", 0)),
            backoff_s=number("avv_backoff_s", 0),
            retry_after_cap_s=number("avv_retry_after_cap_s", 0),
            timeout_s=timeout or None,
            max_request_s=number("avv_max_request_s", 0, strict=True),
            max_event_bytes=int(number("avv_max_event_bytes", MIN_MAX_EVENT_BYTES)),
            client=str(getattr(parsed, "avv_client", None) or "lean"),
            sim_config=str(parsed.avv_sim_config),
            sim_sets=tuple(str(item) for item in (getattr(parsed, "avv_sim_set", None) or ())),
            history=str(getattr(parsed, "avv_history", "") or ""),
            skip_bad_lines=bool(parsed.avv_skip_bad_lines),
            resume=str(parsed.avv_resume),
            max_total_tokens=int(number("avv_max_total_tokens", 0)),
            max_cost=float(number("avv_max_cost", 0)) if getattr(parsed, "avv_max_cost", None) is not None else 0.0,
            concurrency=concurrency_override(parsed),
            spawn_rate=number("avv_spawn_rate", 0),
            start_jitter_s=number("avv_start_jitter_s", 0),
            no_score=bool(parsed.avv_no_score),
            no_html=bool(getattr(parsed, "avv_no_html", False)),
            mode=str(parsed.avv_mode),
            stress=stress,
            settle=settle,
            decision=decision,
            run_time_s=float(run_time) if run_time else None,
            metrics_port=int(number("avv_metrics_port", 0, maximum=65535)) if hasattr(parsed, "avv_metrics_port")
            else 0,
            metrics_host=str(getattr(parsed, "avv_metrics_host", None) or DEFAULT_METRICS_HOST),
            cors_origins=parse_origins(getattr(parsed, "avv_cors_origin", None)),
            live_rows=int(number("avv_live_rows", 0)) if hasattr(parsed, "avv_live_rows")
            else DEFAULT_LIVE_ROWS,
            overrides=parse_overrides(getattr(parsed, "avv_temperature", None), getattr(parsed, "avv_max_tokens", None),
                                      getattr(parsed, "avv_extra_body", ""), getattr(parsed, "avv_header", None)),
            raw={k: v for k, v in sorted(vars(parsed).items()) if k.startswith("avv_")},
            preflight=_preflight_mode(getattr(parsed, "avv_preflight", None)),
            breaker_items=int(number("avv_breaker", 0)) if getattr(parsed, "avv_breaker", None) is not None
            else DEFAULT_BREAKER_ITEMS,
        )


def _preflight_mode(value: object) -> str:
    if value is None:
        return DEFAULT_PREFLIGHT
    if value not in PREFLIGHT_MODES:
        raise InputError(f"--avv-preflight: one of {', '.join(PREFLIGHT_MODES)}, got {value!r}")
    return str(value)
