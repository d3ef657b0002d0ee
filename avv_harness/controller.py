"""The run controller: all of a run's state, kept on Locust's ``Environment`` as ``environment.avv``.

``install(environment)`` builds it in Locust's ``init`` event (tests call it on their own environment);
``controller_of(environment)`` is the only way to reach it. The controller reads the inputs, owns the
ledger, the record writer, the run folder and the simulator process, applies the stress policy's
decisions, and ends the run as named steps in a visible order (:meth:`RunController.finish`). Which
process does what is decided by the runner type: see :mod:`avv_harness.distribution`.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import requests
from locust.event import EventHook
from locust.runners import MasterRunner, WorkerRunner

from .config import Vendor, environment_with_dotenv, load_config
from .distribution import LocalWork, MasterWork, WorkerWork
from .execute import ExecContext, RetryPolicy, run_item_safely
from .items import ItemKey, VendorId, WorkItem
from .lag import LagMonitor, client_bound_advice, client_load
from .manifest import RECORDS_CSV, RunManifest, utc_now
from .options import RunOptions
from .records import Record, RecordWriteError, RecordWriter
from .run_folder import fill_manifest, open_run_folder, score_run, summary_line
from .samples import SampleSet, load_samples
from .secrets import Redactor, install_log_redaction
from .stress import StressPolicy
from .work import Ledger

log = logging.getLogger("avv")

EXIT_OK, EXIT_INCOMPLETE, EXIT_INPUT, EXIT_WRITE = 0, 1, 2, 3
SessionFactory = Callable[[], requests.Session]


def default_session() -> requests.Session:
    """One session per user: a small pool, no urllib3 retries (retries are ours, and counted)."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=4, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@dataclass(frozen=True)
class LoadDecision:
    """What the run's shape returns to Locust: ``None`` (stop) or (users, spawn rate[, classes])."""

    users: int = 0
    spawn_rate: float = 1.0
    classes: tuple[Any, ...] | None = None  # User classes (stress mode); None = all
    stop: bool = False

    def as_tick(self) -> tuple | None:
        if self.stop:
            return None
        if self.classes is None:
            return self.users, self.spawn_rate
        return self.users, self.spawn_rate, list(self.classes)


def install(environment: Any, *, session_factory: SessionFactory | None = None) -> RunController:
    """Build the controller for this environment and its runner, and attach it (listeners, messages)."""
    if getattr(environment, "avv", None) is not None:
        raise RuntimeError("avv is already installed on this environment")
    ctl = RunController.for_environment(environment, session_factory=session_factory)
    environment.avv = ctl
    ctl.attach()
    return ctl


def controller_of(environment: Any) -> RunController:
    ctl = getattr(environment, "avv", None)
    if ctl is None:
        raise RuntimeError("avv is not installed on this environment (call avv_harness.install)")
    return ctl


class RunController:
    def __init__(self, environment: Any, options: RunOptions, vendors: dict[str, Vendor], *,
                 session_factory: SessionFactory | None = None, config_identity: str = "",
                 secrets: list[str] | None = None):
        self.env = environment
        self.options = options
        self.vendors = vendors  # User class name → vendor (keys resolved)
        self._ids = {name: VendorId(v.model, v.name) for name, v in vendors.items()}
        self._names = {vid: name for name, vid in self._ids.items()}
        self.session_factory = session_factory or default_session
        self.config_identity = config_identity
        self.redact = Redactor(secrets or [])
        runner = environment.runner
        work_class = (WorkerWork if isinstance(runner, WorkerRunner)
                      else MasterWork if isinstance(runner, MasterRunner) else LocalWork)
        self.work = work_class(self)
        self.role = self.work.role
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.exec = ExecContext(run_id="", worker=self.worker_id, policy=self._retry_policy(),
                                timeout_s=options.timeout_s, max_request_s=options.max_request_s,
                                overrides=options.overrides)
        self.sim_url: str | None = os.environ.get("AVV_SIM_URL", "").rstrip("/") or None
        # the ledger side (local runner or master); stays empty on workers
        self.samples: SampleSet | None = None
        self.ledger: Ledger | None = None
        self.writer: RecordWriter | None = None
        self.run_dir: Path | None = None
        self.manifest = RunManifest()
        self.stress: StressPolicy | None = None
        self.sim: Any = None
        self.stop_reason: str | None = None
        self.exit_code: int | None = None
        self.finished = False
        self.stopping = False  # a stop signal arrived or the run is finishing: later signals are ignored
        self._last_run_time_s = 0.0
        self._announced_level: int | None = None
        self.lag: LagMonitor | None = None
        self.load_rows: list[dict[str, Any]] = []  # (worker, vendor, lag, cpu) per stored record
        self.record_hook = EventHook()  # fired with records=[…] after an item's rows are stored
        environment.events.avv_record = self.record_hook

    # ---------------------------------------------------------------------------------- construction

    @classmethod
    def for_environment(cls, environment: Any, *, session_factory: SessionFactory | None = None) -> RunController:
        """Options from ``environment.parsed_options``; vendors for ``environment.user_classes`` (each
        carries ``avv_vendor_id``); keys from the environment and ``.env``. InputError on bad input."""
        from .options import preparse_options

        options = RunOptions.from_parsed(environment.parsed_options or preparse_options([]))
        config = load_config(options.config, env=environment_with_dotenv()).select(list(options.models))
        by_id = {VendorId(v.model, v.name): v for v in config.vendors}
        vendors = {}
        for user_class in environment.user_classes:
            vendor_id = getattr(user_class, "avv_vendor_id", None)
            if vendor_id is not None:
                vendors[user_class.__name__] = by_id[VendorId(*vendor_id)]
        return cls(environment, options, vendors, session_factory=session_factory,
                   config_identity=config.identity(), secrets=config.secrets() + options.overrides.secrets())

    def attach(self) -> None:
        """Listeners on this environment's events and messages for this role; then, on the ledger side,
        the run itself is prepared."""
        install_log_redaction(self.redact)
        self.work.attach(self.env.runner)
        if self.role != "master":  # the processes that run users watch their own event-loop lag
            self.lag = LagMonitor().start(spawn=self.env.runner.greenlet.spawn)  # ends with the runner
        if self.role == "worker":
            return
        self.env.events.quitting.add_listener(self._on_quitting)
        if self.role == "master" and self.env.parsed_options is not None:
            # Without rebalancing, Locust moves a lost worker's users to the others only once it drops
            # the worker for good (60 s of missed heartbeats); with it, as soon as it is marked missing.
            self.env.parsed_options.enable_rebalancing = True
        self.begin()

    def _retry_policy(self) -> RetryPolicy:
        o = self.options
        return RetryPolicy(retries=0 if o.is_stress else o.retries, backoff_base_s=o.backoff_s,
                           retry_after_cap_s=o.retry_after_cap_s)

    def begin(self) -> None:
        """Read the samples, open (or resume) the run folder, build the ledger, start the simulator."""
        o = self.options
        self.samples = load_samples(o.samples, skip_bad_lines=o.skip_bad_lines)
        run = open_run_folder(o, self.samples, self.config_identity)
        self.run_dir, self.writer = run.run_dir, run.writer
        sample_ids = [s.sample_id for s in self.samples.samples]
        vendor_ids = list(self._ids.values())
        if o.is_stress:
            self.stress = StressPolicy(o.stress, tuple(self.vendors))
            self.ledger = Ledger.round_robin(vendor_ids, sample_ids)
        else:
            self.ledger = Ledger.for_items(vendor_ids, sample_ids, o.repeats, run.skip)
        self.exec = ExecContext(run_id=run.run_id, worker=self.worker_id, policy=self._retry_policy(),
                                timeout_s=o.timeout_s, max_request_s=o.max_request_s, overrides=o.overrides)
        if not self.sim_url and any(v.uses_simulator for v in self.vendors.values()):
            from avv_sim import start_simulator

            # the simulator reads the samples' gold labels from the file itself: no vendor is ever sent them
            self.sim = start_simulator(o.sim_config, truth_log=str(self.run_dir / "sim_truth.jsonl"),
                                       gold=o.samples)
            self.sim_url = self.sim.url
            log.info("started the simulated vendors at %s", self.sim_url)
        workers = getattr(self.env.parsed_options, "expect_workers", None) if self.role == "master" else None
        fill_manifest(self.manifest, run=run, options=o, samples=self.samples, config_identity=self.config_identity,
                      vendors=[v.redacted() for v in self.vendors.values()], role=self.role, workers=workers,
                      sim_url=self.sim_url, items_total=self.ledger.total, redact=self.redact)
        self.save_manifest()
        items = "the stress ladder" if o.is_stress else f"{self.ledger.total} items"
        log.info("avv run %s: %s for %d vendors; records → %s", run.run_id, items, len(self.vendors),
                 self.run_dir / RECORDS_CSV)

    def save_manifest(self) -> None:
        if self.run_dir is None:
            return
        self.manifest.items_recorded = len(self.ledger.done) if self.ledger else 0
        if self.stress is not None:
            self.manifest.stress = self.stress_summary()
        try:
            self.manifest.write(self.run_dir)
        except OSError as exc:
            log.error("cannot write %s/run.json: %s", self.run_dir, exc.strerror or exc)

    # ------------------------------------------------------------------------------ vendors and users

    def vendor_id(self, class_name: str) -> VendorId:
        return self._ids[class_name]

    def class_name(self, vendor_id: VendorId) -> str:
        return self._names[VendorId(*vendor_id)]

    def vendor_url(self, class_name: str) -> str:
        return self.vendors[class_name].resolved_url(self.sim_url)

    def next_item(self, class_name: str) -> WorkItem | None:
        return self.work.next_item(class_name)

    def give_back(self, item: WorkItem) -> None:
        self.work.give_back(item)

    def run_item(self, session: requests.Session, class_name: str, item: WorkItem,
                 on_attempt: Callable[[Any], None] | None = None) -> list[Record]:
        """Run one item and return its records (redacted). Never raises for the item's own failures;
        only ``GreenletExit`` (the user is stopped) propagates, and then the caller gives the item back."""
        records = run_item_safely(session, self.vendors[class_name], self.vendor_url(class_name), item, self.exec,
                                  sleep=gevent.sleep, on_attempt=on_attempt)
        for record in records:
            self._stamp_client_load(record)
        return [self.redact.record(r) for r in records]

    def _stamp_client_load(self, record: Record) -> None:
        """client_lag_ms over [t0, first token (else end)] and this process's CPU, from the lag monitor."""
        if self.lag is None or record.get("t0_monotonic") is None:
            return
        t0 = float(record["t0_monotonic"])
        until = record.get("ttft_ms") if record.get("ttft_ms") is not None else record.get("latency_ms")
        end = t0 + (float(until) / 1000.0 if until is not None else 0.0)
        record["client_lag_ms"] = self.lag.max_lag_ms(t0, end)
        record["client_cpu_pct"] = self.lag.cpu_pct

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        self.work.submit(item, records)

    # -------------------------------------------------------------------- worker context (master → worker)

    def worker_context(self) -> dict[str, Any]:
        """How workers run items (the run id, retries, timeouts, the global overrides) and where the
        simulator is: the master's options win over a worker's own."""
        return {"exec": self.exec.to_message(), "sim_url": self.sim_url}

    def apply_worker_context(self, context: dict[str, Any]) -> None:
        if context:
            self.sim_url = context.get("sim_url") or self.sim_url
            self.exec = ExecContext.from_message(context["exec"], worker=self.worker_id)
            self.redact.extend(self.exec.overrides.secrets())

    # ------------------------------------------------------------------------- the ledger side

    def take_items(self, vendor: VendorId, taker: str, limit: int = 1) -> list[WorkItem]:
        if self.ledger is None or self.samples is None:
            return []
        by_id = self.samples.by_id()
        level = self.stress.level if self.stress is not None else None
        return [WorkItem(key, by_id[key.sample_id], level) for key in self.ledger.take(vendor, taker, limit)]

    def take_item(self, vendor: VendorId, taker: str) -> WorkItem | None:
        items = self.take_items(vendor, taker, 1)
        return items[0] if items else None

    def release_item(self, key: ItemKey) -> None:
        if self.ledger is not None:
            self.ledger.release(key)

    def takers(self) -> set[str]:
        return self.ledger.takers() if self.ledger is not None else set()

    def requeue_taker(self, taker: str) -> int:
        lost = self.ledger.requeue_taker(taker) if self.ledger is not None else []
        if lost:
            self.manifest.items_requeued += len(lost)
            log.warning("worker %s is gone: %d in-flight items handed out again", taker, len(lost))
        return len(lost)

    def store(self, key: ItemKey, records: list[Record]) -> bool:
        """Record a finished item (once). False for a duplicate (a worker presumed lost came back)."""
        if self.ledger is None or not self.ledger.complete(key):
            self.manifest.duplicates_dropped += 1
            log.info("dropping a duplicate record for %s", key)
            return False
        records = [self.redact.record(r) for r in records]
        if self.writer is not None and self.stop_reason != "disk":
            try:
                self.writer.write_many(records)
                self.manifest.records_written += len(records)
            except RecordWriteError as exc:
                self._stop_run("disk", f"cannot write records: {exc.strerror}; no new items are started")
        m = self.manifest
        for record in records:
            self.load_rows.append({k: record.get(k) for k in ("worker", "vendor", "client_lag_ms", "client_cpu_pct")})
            if record.get("error_kind") == "client_error":
                m.items_failed_client += 1
            if self.stress is not None:
                name = self.class_name(VendorId(record["model"], record["vendor"]))
                self.stress.observe(name, record.get("level"), record.get("status") == "success",
                                    record.get("ttft_ms"))
            if record.get("total_tokens") is not None:
                m.tokens_used += int(record["total_tokens"])
        cap = self.options.max_total_tokens
        if cap and m.tokens_used >= cap and not m.budget["exhausted"]:
            m.budget["exhausted"] = True
            self._stop_run("budget", f"token budget reached ({m.tokens_used} ≥ {cap}): no new items are started")
        self.record_hook.fire(records=records)
        return True

    def _stop_run(self, reason: str, message: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            dropped = self.ledger.drop_pending() if self.ledger is not None else 0
            log.warning("%s; %d items not run", message, dropped) if reason != "disk" else log.error(
                "%s (%d items not run)", message, dropped)

    # ------------------------------------------------------------------------------------ the load

    def next_load(self, run_time_s: float) -> LoadDecision:
        """What the shape returns at ``run_time_s``: every vendor's users until each item is recorded,
        or the stress ladder; stop at -t/--run-time."""
        self._last_run_time_s = run_time_s
        limit = self.options.run_time_s
        if limit and run_time_s >= limit and self.stop_reason is None:
            if self.stress is not None:
                self.stress.stop_now(run_time_s)
            self._stop_run("run_time", f"--run-time {limit:g}s reached: the run stops")
        if self.stop_reason == "run_time" or self.ledger is None:
            return LoadDecision(stop=True)
        if self.stress is not None:
            return self._stress_load(run_time_s)
        if self.ledger.finished:
            return LoadDecision(stop=True)
        total = sum(v.concurrency for v in self.vendors.values())
        rate = self.options.spawn_rate
        return LoadDecision(total, float(rate if rate > 0 else max(total, 1)))

    def _stress_load(self, run_time_s: float) -> LoadDecision:
        decision = self.stress.tick(run_time_s)
        for name in decision.newly_stopped:
            log.info("stress: %s broke the SLO at two consecutive levels; not escalated past %d", name,
                     self.stress.stopped_after[name])
        if decision.stop:
            self.ledger.drop_pending()
            log.info("stress: %s", decision.reason)
            return LoadDecision(stop=True)
        if decision.level != self._announced_level:
            self._announced_level = decision.level
            log.info("stress: level %d", decision.level)
        classes = {cls.__name__: cls for cls in self.env.user_classes}
        # Every stress User class has weight 1 and no fixed_count (see locust_plugin.user_classes), so
        # level × vendors users split evenly: Locust's dispatcher re-reads weights on every start().
        return LoadDecision(decision.users, float(decision.users), tuple(classes[n] for n in decision.classes))

    def stress_summary(self) -> dict[str, Any]:
        summary = self.stress.summary()
        summary["stopped_after"] = {self.vendors[n].name: lvl for n, lvl in summary["stopped_after"].items()}
        return summary

    @property
    def completed(self) -> bool:
        if self.ledger is None or self.stop_reason is not None:
            return False
        return self.stress.done if self.stress is not None else self.ledger.finished

    # ------------------------------------------------------------------------------------ the end

    def _on_quitting(self, environment: Any, **_: Any) -> None:
        environment.process_exit_code = self.finish()

    def finish(self) -> int:
        """End the run, in this order: close the writer → write the manifest → stop the simulator →
        score → print → exit code. Idempotent; signals during it are ignored (see _stop_on_signals)."""
        if self.finished:
            return self.exit_code or 0
        self.finished = self.stopping = True
        if self.lag is not None:
            self.lag.stop()
        if self.role == "worker":
            self.exit_code = EXIT_OK
            return self.exit_code
        if isinstance(self.work, MasterWork):
            self.work.close()
        if self.stress is not None and not self.stress.done:
            self.stress.stop_now(self._last_run_time_s)
        completed = self.completed
        if not completed and self.stop_reason is None:
            self.stop_reason = "interrupted"
        self._close_writer()
        self._write_final_manifest(completed)
        self._stop_simulator()
        self._score()
        self.exit_code = self._exit_code(completed)
        self._print_summary(completed)
        return self.exit_code

    def _close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def _write_final_manifest(self, completed: bool) -> None:
        m = self.manifest
        m.ended_at, m.completed, m.stop_reason = utc_now(), completed, self.stop_reason
        m.extra["client_load"] = client_load(self.load_rows)
        self.save_manifest()

    def _stop_simulator(self) -> None:
        if self.sim is not None:
            self.sim.stop()

    def _score(self) -> None:
        if self.run_dir is not None and self.manifest.records_written and self.stop_reason != "disk":
            score_run(self.run_dir, no_score=self.options.no_score, stress=self.stress is not None)

    def _exit_code(self, completed: bool) -> int:
        if self.stop_reason == "disk":
            return EXIT_WRITE
        return EXIT_OK if completed else EXIT_INCOMPLETE

    def _print_summary(self, completed: bool) -> None:
        for line in client_bound_advice(self.manifest.extra.get("client_load") or {}):
            print(f"avv-locust: warning: {line}", flush=True)
        if self.run_dir is not None:
            print(summary_line(self.manifest, self.run_dir, completed, self.stop_reason,
                               self.options.max_total_tokens), flush=True)
