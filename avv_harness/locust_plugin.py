"""Locust integration: options, one User class per vendor, the work ledger, records and run folder.

Roles (decided in the ``init`` event from the runner type):

- local runner: holds the ledger, runs the items, writes ``records.csv``.
- master: holds the ledger, hands items to workers (custom message ``avv_items``), receives records
  (``avv_record``), writes ``records.csv``, re-hands items of lost workers.
- worker: asks for items (``avv_want``), runs them, sends each record to the master at once.

Every finished item fires the ``avv_record`` event; its listener writes the row (local) or forwards it
(worker). The run ends when every item is recorded: the shape returns None and Locust exits.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import socket
import sys
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import locust
import requests
from locust import User, constant, events, task
from locust.event import EventHook
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from . import stress
from .config import Vendor, VendorConfig, load_config
from .errors import InputError
from .execute import RetryPolicy, execute_item
from .records import RecordWriter, iter_csv_rows
from .samples import Sample, SampleSet, load_samples
from .stream import Attempt

log = logging.getLogger("avv")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "configs" / "demo.yaml"
DEFAULT_SAMPLES = REPO_ROOT / "samples" / "demo.jsonl"
DEFAULT_SIM_CONFIG = REPO_ROOT / "configs" / "sim.yaml"

def _cache_locust_default_args() -> None:
    """Locust's worker rebuilds its whole argument parser once per option on every spawn message
    (``default_args_dict()`` inside a comprehension, locust 2.47 runners.py), which blocked our workers
    for ~250 ms at each stress level change and showed up as TTFT. The defaults never change: cache them."""
    from locust import argument_parser

    if not hasattr(argument_parser.default_args_dict, "cache_info"):
        argument_parser.default_args_dict = functools.lru_cache(maxsize=1)(argument_parser.default_args_dict)


_cache_locust_default_args()

if not hasattr(events, "avv_record"):
    events.avv_record = EventHook()  # fired with record=dict once per finished item


# --------------------------------------------------------------------------------------------- options


@events.init_command_line_parser.add_listener
def add_arguments(parser: Any) -> None:
    group = _EnvGroup(parser.add_argument_group(
        "avv-locust", "Vendor verification options (also from locust.conf / LOCUST_AVV_*)"
    ))
    group.add_argument("--avv-config", default=str(DEFAULT_CONFIG), help="Vendor config YAML (AVV layout).")
    group.add_argument("--avv-samples", default=str(DEFAULT_SAMPLES), help="Sample JSONL (one request body per line).")
    group.add_argument("--avv-model", default="", help="Comma-separated models of the config to run (default all).")
    group.add_argument("--avv-repeats", type=int, default=1, help="Times each sample is sent to each vendor.")
    group.add_argument("--avv-out", default="results", help="Folder for run folders (records.csv, run.json, scores).")
    group.add_argument("--avv-run-id", default="", help="Run folder name (default: timestamp).")
    group.add_argument(
        "--avv-retries", type=int, default=3,
        help="Retries per item (connect, timeout, 429, 5xx, truncated).",
    )
    group.add_argument("--avv-backoff-s", type=float, default=0.5, help="Base of the exponential back-off, seconds.")
    group.add_argument(
        "--avv-retry-after-cap-s", type=float, default=30.0,
        help="Longest Retry-After honoured, seconds.",
    )
    group.add_argument(
        "--avv-timeout", type=float, default=0.0,
        help="Read timeout in seconds (default: vendor timeout_s).",
    )
    group.add_argument(
        "--avv-sim-config", default=str(DEFAULT_SIM_CONFIG),
        help="Simulator profiles for {sim} vendors.",
    )
    group.add_argument("--avv-skip-bad-lines", action="store_true", default=False, help="Skip malformed sample lines.")
    group.add_argument("--avv-resume", default="", help="Run folder to resume: runs only its missing or failed items.")
    group.add_argument(
        "--avv-max-total-tokens", type=int, default=0,
        help="Stop starting items once reported tokens reach N.",
    )
    group.add_argument(
        "--avv-spawn-rate", type=float, default=0.0,
        help="Users spawned per second (default 0: all at once; --avv-start-jitter-s spreads their starts).",
    )
    group.add_argument(
        "--avv-start-jitter-s", type=float, default=1.0,
        help="Each user waits U(0, this) before its first request, so new streams do not start in one burst.",
    )
    group.add_argument("--avv-no-score", action="store_true", default=False, help="Do not score the run at the end.")
    stress.add_arguments(group)


class _EnvGroup:
    """An argument group that gives every option its ``LOCUST_AVV_*`` environment variable (Locust's
    configargparse reads custom options from the environment only when ``env_var`` is set)."""

    def __init__(self, group: Any):
        self._group = group

    def add_argument(self, *names: str, **kwargs: Any) -> Any:
        kwargs.setdefault("env_var", "LOCUST_" + names[0][2:].replace("-", "_").upper())
        try:
            return self._group.add_argument(*names, **kwargs)
        except TypeError:  # a plain argparse parser (tests, docs): no env_var support
            kwargs.pop("env_var", None)
            return self._group.add_argument(*names, **kwargs)


def preparse_options(args: list[str] | None = None) -> Any:
    """Our options as Locust will parse them (command line, LOCUST_* env, locust.conf), read early:
    the User classes are named after the configured vendors, so the config is needed at import time."""
    from locust.argument_parser import get_parser

    options, _ = get_parser().parse_known_args(args=args)
    return options


# ----------------------------------------------------------------------------------------- run state


@dataclass
class RunState:
    options: Any = None
    config: VendorConfig | None = None
    vendors: dict[str, Vendor] = field(default_factory=dict)  # by User class name
    samples: SampleSet | None = None
    sample_by_id: dict[str, Sample] = field(default_factory=dict)
    role: str = "local"
    run_id: str = ""
    run_dir: Path | None = None
    sim_url: str | None = None
    sim: Any = None
    ledger: Any = None
    writer: RecordWriter | None = None
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    started_at: str = ""
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    tokens_used: int = 0
    budget_hit: bool = False
    records_written: int = 0
    duplicates_dropped: int = 0
    requeued: int = 0
    # worker side
    inbox: dict[str, deque] = field(default_factory=dict)
    inbox_ready: dict[str, gevent.event.Event] = field(default_factory=dict)
    asked: dict[str, float] = field(default_factory=dict)
    stress_plan: Any = None


STATE = RunState()


def class_name_for(vendor: Vendor, clash: bool) -> str:
    return f"{vendor.model}.{vendor.name}" if clash else vendor.name


def _fail_input(error: InputError) -> None:
    sys.stderr.write(f"avv-locust: error: {error}\n")
    sys.stderr.flush()
    sys.exit(error.exit_status)


def user_classes(args: list[str] | None = None) -> dict[str, type[User]]:
    """Validate config (and samples, off workers) and build one User class per selected vendor."""
    options = preparse_options(args)
    STATE.options = options
    try:
        config = load_config(options.avv_config)
        models = [m.strip() for m in options.avv_model.split(",") if m.strip()]
        config = config.select(models)
        if not options.worker:
            STATE.samples = load_samples(options.avv_samples, skip_bad_lines=options.avv_skip_bad_lines)
            STATE.sample_by_id = STATE.samples.by_id()
        stress.validate_options(options)
    except InputError as error:
        _fail_input(error)
    STATE.config = config
    names = [v.name for v in config.vendors]
    classes: dict[str, type[User]] = {}
    for vendor in config.vendors:
        name = class_name_for(vendor, names.count(vendor.name) > 1)
        STATE.vendors[name] = vendor
        classes[name] = type(name, (VendorUser,), {
            "fixed_count": vendor.concurrency, "avv_vendor": vendor, "__module__": __name__,
        })
    return classes


# --------------------------------------------------------------------------------------------- users


class VendorUser(User):
    """Replays work items against one vendor. Subclassed per vendor by :func:`user_classes`."""

    abstract = True
    wait_time = constant(0)
    avv_vendor: Vendor

    def on_start(self) -> None:
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=4, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        # Users are spawned in batches; starting their streams in one burst would queue the requests
        # in this process and show up as TTFT. Spread the first requests instead.
        jitter = STATE.options.avv_start_jitter_s if STATE.options is not None else 0.0
        if jitter > 0:
            gevent.sleep(random.uniform(0.0, jitter))

    def on_stop(self) -> None:
        self.session.close()

    @task
    def run_item(self) -> None:
        name = type(self).__name__
        item = next_item(name)
        if item is None:
            gevent.sleep(0.25)
            return
        sample, repeat, level = item
        try:
            outcome = execute_item(
                self.session, self.avv_vendor, self.avv_vendor.resolved_url(STATE.sim_url), sample, repeat,
                STATE.policy, run_id=STATE.run_id, worker=STATE.worker_id,
                timeout_s=STATE.options.avv_timeout or None, sleep=gevent.sleep,
                on_attempt=lambda att: _fire_request_events(self.environment, name, att),
            )
        except gevent.GreenletExit:
            give_back(name, sample.sample_id, repeat)
            raise
        outcome.record["level"] = level
        events.avv_record.fire(record=outcome.record)
        if level is not None and outcome.final.error_kind == "http_429":
            # Stress mode has no retries; a polite client still waits as told before its next request.
            gevent.sleep(STATE.policy.delay(1, outcome.final.retry_after_s, random.Random()))


def _fire_request_events(environment: Any, name: str, att: Attempt) -> None:
    """Locust stats: the whole request (response time = end-to-end latency) and TTFT as its own entry."""
    latency = ((att.t_end or att.t0) - att.t0) * 1000.0
    exception = None if att.ok else Exception(f"{att.error_kind}: {att.error_detail}")
    environment.events.request.fire(
        request_type="SSE", name=name, response_time=latency, response_length=att.bytes_read,
        exception=exception, context={}, response=None,
    )
    if att.t_first_token is not None:
        environment.events.request.fire(
            request_type="TTFT", name=name, response_time=(att.t_first_token - att.t0) * 1000.0,
            response_length=0, exception=None, context={}, response=None,
        )


# ---------------------------------------------------------------------------------------- work flow


def next_item(class_name: str) -> tuple[Sample, int, int | None] | None:
    """The next (sample, repeat, level) for this vendor, or None when there is none right now."""
    if STATE.role == "worker":
        return _worker_next(class_name)
    taken = STATE.ledger.take(class_name, "local") if STATE.ledger else []
    if not taken:
        return None
    sample_id, repeat = taken[0]
    return STATE.sample_by_id[sample_id], repeat, stress.current_level(STATE, class_name)


def give_back(class_name: str, sample_id: str, repeat: int) -> None:
    if STATE.role != "worker" and STATE.ledger is not None:
        STATE.ledger.release((class_name, sample_id, repeat))


def _worker_next(class_name: str) -> tuple[Sample, int, int | None] | None:
    inbox = STATE.inbox.setdefault(class_name, deque())
    ready = STATE.inbox_ready.setdefault(class_name, gevent.event.Event())
    if not inbox:
        ready.clear()
        runner = locust_runner()
        if runner is not None:
            runner.send_message("avv_want", {"vendor": class_name, "n": 1})
        ready.wait(timeout=2.0)
    if not inbox:
        return None
    data = inbox.popleft()
    body = data["body"]
    sample = Sample(sample_id=data["sample_id"], line=data.get("line", 0), body=body)
    return sample, data["repeat"], data.get("level")


_RUNNER: list[Any] = []


def locust_runner() -> Any:
    return _RUNNER[0] if _RUNNER else None


def _on_items(environment: Any, msg: Any, **_: Any) -> None:
    data = msg.data
    STATE.run_id = data.get("run_id", STATE.run_id)
    STATE.sim_url = data.get("sim_url") or STATE.sim_url
    inbox = STATE.inbox.setdefault(data["vendor"], deque())
    inbox.extend(data["items"])
    STATE.inbox_ready.setdefault(data["vendor"], gevent.event.Event()).set()


def _on_want(environment: Any, msg: Any, **_: Any) -> None:
    vendor, taker = msg.data["vendor"], msg.node_id
    taken = STATE.ledger.take(vendor, taker, int(msg.data.get("n", 1))) if STATE.ledger else []
    items = [
        {"sample_id": sid, "repeat": rep, "line": STATE.sample_by_id[sid].line,
         "body": STATE.sample_by_id[sid].body, "level": stress.current_level(STATE, vendor)}
        for sid, rep in taken
    ]
    environment.runner.send_message(
        "avv_items", {"vendor": vendor, "items": items, "run_id": STATE.run_id, "sim_url": STATE.sim_url},
        client_id=taker,
    )


def _on_remote_record(environment: Any, msg: Any, **_: Any) -> None:
    _store_record(msg.data["record"], environment)


@events.avv_record.add_listener
def _on_record(record: dict[str, Any]) -> None:
    if STATE.role == "worker":
        runner = locust_runner()
        runner.send_message("avv_record", {"record": record})
        return
    _store_record(record, None)


def _store_record(record: dict[str, Any], environment: Any) -> None:
    key = (_class_of(record), str(record["sample_id"]), int(record["repeat"]))
    if STATE.ledger is None or not STATE.ledger.complete(key):
        STATE.duplicates_dropped += 1
        log.info("dropping a duplicate record for %s", key)
        return
    if STATE.writer is not None:
        STATE.writer.write(record)
        STATE.records_written += 1
    stress.observe(STATE, record)
    if record.get("total_tokens") is not None:
        STATE.tokens_used += int(record["total_tokens"])
    cap = STATE.options.avv_max_total_tokens
    if cap and STATE.tokens_used >= cap and not STATE.budget_hit:
        STATE.budget_hit = True
        dropped = STATE.ledger.drop_pending()
        log.warning("token budget reached (%d ≥ %d): no new items are started; %d items not run",
                    STATE.tokens_used, cap, dropped)


def _class_of(record: dict[str, Any]) -> str:
    for name, vendor in STATE.vendors.items():
        if vendor.name == record["vendor"] and vendor.model == record["model"]:
            return name
    return str(record["vendor"])


def _requeue_lost_workers(runner: MasterRunner) -> None:
    while True:
        gevent.sleep(1.0)
        if STATE.ledger is None:
            continue
        takers = set(STATE.ledger.in_flight.values())
        for taker in takers:
            client = runner.clients.get(taker)
            if client is None or client.state == STATE_MISSING:
                lost = STATE.ledger.requeue_taker(taker)
                if lost:
                    STATE.requeued += len(lost)
                    log.warning("worker %s is gone: %d in-flight items handed out again", taker, len(lost))


# ------------------------------------------------------------------------------------ run lifecycle


def _new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()


def _resume_skip(run_dir: Path) -> set[tuple[str, str, int]]:
    """Items already successful in a run folder (latest row per item wins)."""
    latest: dict[tuple[str, str, int], str] = {}
    records = run_dir / "records.csv"
    if records.exists():
        for row in iter_csv_rows(records):
            key = (_class_of(row), str(row["sample_id"]), int(row["repeat"]))
            latest[key] = row["status"]
    return {key for key, status in latest.items() if status == "success"}


def _prepare_run(environment: Any) -> None:
    options = STATE.options
    if options.avv_resume:
        run_dir = Path(options.avv_resume)
        if not (run_dir / "run.json").exists():
            _fail_input(InputError(f"{run_dir}: --avv-resume needs a run folder with run.json"))
        STATE.run_id = run_dir.name
        skip = _resume_skip(run_dir)
    else:
        STATE.run_id = options.avv_run_id or _new_run_id()
        run_dir = Path(options.avv_out) / STATE.run_id
        skip = set()
    run_dir.mkdir(parents=True, exist_ok=True)
    STATE.run_dir = run_dir
    STATE.policy = RetryPolicy(retries=max(0, options.avv_retries), backoff_base_s=options.avv_backoff_s,
                               retry_after_cap_s=options.avv_retry_after_cap_s)
    STATE.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    sample_ids = [s.sample_id for s in STATE.samples.samples]
    if stress.enabled(options):
        STATE.ledger = stress.make_ledger(STATE, sample_ids)
    else:
        from .work import Ledger

        STATE.ledger = Ledger.for_items(STATE.vendors, sample_ids, max(1, options.avv_repeats), skip)
    _start_simulator_if_needed()
    STATE.writer = RecordWriter(run_dir / "records.csv")
    _write_run_json(completed=False)
    log.info("avv run %s: %d items for %d vendors; records → %s", STATE.run_id, STATE.ledger.total,
             len(STATE.vendors), run_dir / "records.csv")


def _start_simulator_if_needed() -> None:
    if not any(v.uses_simulator for v in STATE.vendors.values()):
        return
    if os.environ.get("AVV_SIM_URL"):
        STATE.sim_url = os.environ["AVV_SIM_URL"].rstrip("/")
        return
    from avv_sim import start_simulator

    STATE.sim = start_simulator(STATE.options.avv_sim_config, truth_log=str(STATE.run_dir / "sim_truth.jsonl"))
    STATE.sim_url = STATE.sim.url
    log.info("started the simulated vendors at %s", STATE.sim_url)


def _write_run_json(completed: bool, ended: bool = False) -> None:
    options = STATE.options
    samples = STATE.samples
    data = {
        "run_id": STATE.run_id,
        "mode": options.avv_mode,
        "config_path": os.path.abspath(options.avv_config),
        "vendors": [v.redacted() for v in STATE.vendors.values()],
        "samples": {
            "path": os.path.abspath(samples.path), "sha256": samples.sha256, "count": len(samples.samples),
            "skipped_lines": [[line, msg] for line, msg in samples.skipped_lines],
        },
        "options": {k: v for k, v in sorted(vars(options).items()) if k.startswith("avv_")},
        "locust": {"version": locust.__version__, "role": STATE.role,
                   "workers": getattr(options, "expect_workers", None) if STATE.role == "master" else None},
        "simulator": {"url": STATE.sim_url} if STATE.sim_url else None,
        "started_at": STATE.started_at,
        "ended_at": datetime.now(timezone.utc).isoformat(timespec="seconds") if ended else None,
        "items_total": STATE.ledger.total if STATE.ledger else 0,
        "items_recorded": len(STATE.ledger.done) if STATE.ledger else 0,
        "records_written": STATE.records_written,
        "duplicates_dropped": STATE.duplicates_dropped,
        "items_requeued": STATE.requeued,
        "tokens_used": STATE.tokens_used,
        "budget": {"max_total_tokens": options.avv_max_total_tokens or None, "exhausted": STATE.budget_hit},
        "completed": completed,
    }
    path = STATE.run_dir / "run.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@events.init.add_listener
def _on_init(environment: Any, runner: Any = None, **_: Any) -> None:
    if STATE.options is None or not STATE.vendors:
        return  # not our locustfile
    runner = runner or environment.runner
    _RUNNER[:] = [runner]
    STATE.worker_id = f"{socket.gethostname()}:{os.getpid()}"  # --processes forks after import
    STATE.options = environment.parsed_options or STATE.options
    if isinstance(runner, WorkerRunner):
        STATE.role = "worker"
        runner.register_message("avv_items", _on_items)
        return
    STATE.role = "master" if isinstance(runner, MasterRunner) else "local"
    try:
        _prepare_run(environment)
    except InputError as error:
        _fail_input(error)
    except Exception as exc:  # e.g. the simulator did not start: nothing can run, say so and stop
        log.exception("avv-locust: cannot start the run")
        sys.stderr.write(f"avv-locust: error: cannot start the run: {exc}\n")
        sys.exit(1)
    if STATE.role == "master":
        runner.register_message("avv_want", _on_want)
        runner.register_message("avv_record", _on_remote_record)
        gevent.spawn(_requeue_lost_workers, runner)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    if STATE.role == "worker" or STATE.run_dir is None:
        return
    completed = bool(STATE.ledger and STATE.ledger.finished and not STATE.budget_hit) or (
        stress.enabled(STATE.options) and stress.finished(STATE)
    )
    if STATE.writer is not None:
        STATE.writer.close()
    _write_run_json(completed=completed, ended=True)
    if STATE.sim is not None:
        STATE.sim.stop()
    if not STATE.options.avv_no_score and STATE.records_written:
        _score_run()
    if stress.enabled(STATE.options) and STATE.records_written:
        stress.write_outputs(STATE)  # after scoring: it appends its section to report.md
    if completed:
        state = "run complete"
    elif STATE.budget_hit:
        state = f"stopped by the token budget ({STATE.tokens_used} ≥ {STATE.options.avv_max_total_tokens} tokens)"
    else:
        state = f"run INCOMPLETE: resume with --avv-resume {STATE.run_dir}"
    print(f"\navv-locust: {STATE.records_written} records in {STATE.run_dir / 'records.csv'} ({state})", flush=True)
    environment.process_exit_code = 0 if completed else 1


def _score_run() -> None:
    try:
        import avv_scoring

        result = avv_scoring.score_paths([STATE.run_dir], out_dir=STATE.run_dir)
        print("\n" + avv_scoring.render_tables(result), flush=True)
        print(f"scores: {STATE.run_dir / 'report.md'}", flush=True)
    except Exception as exc:  # the records are safe on disk; scoring can be re-run with avv-score
        log.error("scoring failed (%s); re-run: avv-score %s", exc, STATE.run_dir)


# --------------------------------------------------------------------------------------------- shape


class RunShape(locust.LoadTestShape):
    """Spawns every vendor's users at once (their ``fixed_count``) and ends the test when every item
    is recorded. In stress mode, steps through the concurrency ladder instead."""

    abstract = True

    def tick(self) -> tuple[int, float, None] | tuple[int, float] | None:
        if stress.enabled(STATE.options):
            return stress.tick(STATE, self)
        if STATE.ledger is not None and STATE.ledger.finished:
            return None
        total = sum(v.concurrency for v in STATE.vendors.values())
        rate = STATE.options.avv_spawn_rate
        return total, float(rate if rate > 0 else max(total, 1))
