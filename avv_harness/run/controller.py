"""The run controller: all of a process's avv state, kept on Locust's ``Environment`` as ``environment.avv``.

``install(environment)`` builds it in Locust's ``init`` event (tests call it on their own environment);
``controller_of(environment)`` is the only way to reach it. The controller reads the inputs, owns the
simulator process and the current run (:class:`~avv_harness.run.state.RunState`: run folder, ledger, record
writer, manifest, stress policy), applies the stress policy's decisions, and ends a run as named steps in a
visible order (:meth:`RunController.end_run`). Which process does what is decided by the runner type: see
:mod:`avv_harness.locust.distribution`.

Headless, a process makes one run: it begins at ``init`` and ends at ``quitting``. With the web UI, the
inputs are checked (and the simulator started) at ``init``; each START begins a new run folder (the shape's
first tick) and each STOP ends it (Locust's ``test_stop``: records closed, run scored, report.md and
report.html written) while the process keeps running; ``quitting`` ends a run still open and stops the
simulator.
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

from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.manifest import RunManifest
from avv_core.record_file import RecordWriteError
from avv_core.records import Record
from avv_core.samples import Sample, SampleSet
from avv_harness.inputs.config import Vendor, environment_with_dotenv, load_config
from avv_harness.inputs.secrets import Redactor, install_log_redaction
from avv_harness.locust.distribution import LocalWork, MasterWork, WorkerWork
from avv_harness.run.lag_monitor import LagMonitor, quiet_gc_for_load
from avv_harness.run.ledger import ACCEPT, DUPLICATE, Ledger
from avv_harness.run.lifecycle import RunLifecycle
from avv_harness.run.node_identity import NodeIdentity
from avv_harness.run.options import RunOptions
from avv_harness.run.state import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_OK, EXIT_SCORING, EXIT_WRITE, RunState
from avv_harness.wire.execute import ExecContext, RetryPolicy
from avv_harness.wire.run_item import run_item_safely

log = logging.getLogger("avv")

__all__ = ["EXIT_INCOMPLETE", "EXIT_INPUT", "EXIT_OK", "EXIT_SCORING", "EXIT_WRITE", "LoadDecision", "RunController",
           "controller_of", "default_session", "install"]
#: Seconds between progress lines in a headless run.
PROGRESS_INTERVAL_S = 5.0
#: Refused records logged per reason and run; after that they are only counted (run.json).
LOGGED_REFUSALS = 20
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


class RunController(RunLifecycle):
    """A process's avv state and its Locust glue; how runs begin and end is in :class:`RunLifecycle`."""

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
                                overrides=options.overrides, max_event_bytes=options.max_event_bytes)
        self.sim_url: str | None = os.environ.get("AVV_SIM_URL", "").rstrip("/") or None
        # web UI mode: a run per START/STOP; headless: one run from init to quit
        self.ui_mode = not getattr(environment.parsed_options, "headless", False)
        # the ledger side (local runner or master); stays empty on workers
        self.samples: SampleSet | None = None
        self._sample_index: tuple[SampleSet, dict[str, Sample]] | None = None  # samples.by_id(), built once
        self.run: RunState | None = None  # the current (or last) run
        self.runs: list[RunState] = []  # every run of this process, oldest first
        self.sim: Any = None
        self.sim_truth_log: str | None = None
        self.exit_code: int | None = None  # the process's exit status, set by finish()
        self.quit_done = False
        self.finishing: Any = None  # (greenlet, event) while finish() runs: a second caller waits for it
        self.stopping = False  # a stop signal arrived or the process is finishing: later signals are ignored
        self.rearm_signals: Callable[[], None] | None = None  # the plugin's gevent signal handlers, set again
        self.live: Any = None  # the web UI's live board (avv_harness.locust.live_board), when there is a web UI
        self.progress_interval_s = PROGRESS_INTERVAL_S
        self.lag: LagMonitor | None = None  # this process's event-loop lag (processes that run users)
        self._undo_gc: Callable[[], None] | None = None  # while users run: see lag.quiet_gc_for_load
        self._progress: Any = None
        self.record_hook = EventHook()  # fired with records=[…] after an item's rows are stored
        self.run_hook = EventHook()  # fired with run=RunState, phase="begin" | "end"
        self._refusals_before_run: dict[str, str] = {}  # workers refused while no run was open
        self.run_hook.add_listener(self._on_run_begin)
        environment.events.avv_record = self.record_hook

    # ----------------------------------------------------------------- the current run's parts (read-only views)

    @property
    def ledger(self) -> Ledger | None:
        return self.run.ledger if self.run is not None else None

    @property
    def run_dir(self) -> Path | None:
        return self.run.run_dir if self.run is not None else None

    @property
    def manifest(self) -> RunManifest | None:
        return self.run.manifest if self.run is not None else None

    @property
    def finished(self) -> bool:
        """The current run has ended (records after this are dropped)."""
        return self.run is not None and self.run.finished

    @finished.setter
    def finished(self, value: bool) -> None:
        if self.run is not None:
            self.run.finished = value

    # ---------------------------------------------------------------------------------- construction

    @classmethod
    def for_environment(cls, environment: Any, *, session_factory: SessionFactory | None = None) -> RunController:
        """Options from ``environment.parsed_options``; vendors for ``environment.user_classes`` (each
        carries ``avv_vendor_id``); keys from the environment and ``.env``. InputError on bad input."""
        from avv_harness.run.options import preparse_options

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
        """Listeners on this environment's events and messages for this role; then, on the ledger side, the
        inputs are read and (headless) the run begins."""
        install_log_redaction(self.redact)
        self.work.attach(self.env.runner)
        if self.role != "master":  # the processes that run users watch their own event-loop lag
            self.lag = LagMonitor().start(spawn=self.env.runner.greenlet.spawn)  # ends with the runner
            self.env.events.test_start.add_listener(self._quiet_gc)
            self.env.events.test_stop.add_listener(self._restore_gc)
        if self.role == "worker":
            return
        self.env.events.quitting.add_listener(self._on_quitting)
        if self.role == "master" and self.env.parsed_options is not None:
            # Without rebalancing, Locust moves a lost worker's users to the others only once it drops
            # the worker for good (60 s of missed heartbeats); with it, as soon as it is marked missing.
            self.env.parsed_options.enable_rebalancing = True
        if self.ui_mode:
            self.prepare_ui()
            self.env.events.test_stop.add_listener(self._on_test_stop)
        else:
            self.begin()

    def _quiet_gc(self, **_: Any) -> None:
        if self._undo_gc is None:
            self._undo_gc = quiet_gc_for_load()

    def _restore_gc(self, **_: Any) -> None:
        if self._undo_gc is not None:
            self._undo_gc()
            self._undo_gc = None

    def _retry_policy(self) -> RetryPolicy:
        o = self.options
        return RetryPolicy(retries=0 if o.is_stress else o.retries, backoff_base_s=o.backoff_s,
                           retry_after_cap_s=o.retry_after_cap_s)

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
        """Run one item and return its records (redacted): one row, or one per step of an agent task
        (:mod:`avv_harness.wire.run_item`). Never raises for the item's own failures; only ``GreenletExit`` (the
        user is stopped) propagates, and then the caller gives the item back."""
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

    def identity(self) -> NodeIdentity:
        """What this process presents to (worker) or compares with (master) the other side: see
        :mod:`avv_harness.run.node_identity`. Workers read no sample file, so their samples part is None."""
        return NodeIdentity.of(self.worker_id, self.vendors, self.redact.value,
                               self.samples.sha256 if self.samples is not None else None)

    def _samples_by_id(self) -> dict[str, Sample]:
        if self.samples is None:
            return {}
        if self._sample_index is None or self._sample_index[0] is not self.samples:
            self._sample_index = (self.samples, self.samples.by_id())
        return self._sample_index[1]

    def take_items(self, vendor: VendorId, taker: str, limit: int = 1) -> list[WorkItem]:
        run = self.run
        if run is None or run.finished or self.samples is None:
            return []
        by_id = self._samples_by_id()
        level = run.stress.level if run.stress is not None else None
        return [WorkItem(key, by_id[key.sample_id], level) for key in run.ledger.take(vendor, taker, limit)]

    def take_item(self, vendor: VendorId, taker: str) -> WorkItem | None:
        items = self.take_items(vendor, taker, 1)
        return items[0] if items else None

    def release_item(self, key: ItemKey, taker: str | None = None) -> bool:
        """Put an unfinished item back in the queue (with ``taker``: only when that taker holds it)."""
        return self.run.ledger.release(key, taker) if self.run is not None else False

    def takers(self) -> set[str]:
        return self.run.ledger.takers() if self.run is not None else set()

    def requeue_taker(self, taker: str, why: str = "is gone") -> int:
        lost = self.run.ledger.requeue_taker(taker) if self.run is not None else []
        if lost:
            self.run.manifest.items_requeued += len(lost)
            log.warning("worker %s %s: %d in-flight items handed out again", taker, why, len(lost))
        return len(lost)

    def _late(self, key: ItemKey, records: list[Record]) -> bool:
        run = self.run
        if run is None or run.finished or any(r.get("run_id") not in (None, run.run_id) for r in records):
            log.info("dropping a late record for %s (its run has ended)", key)
            return True
        return False

    def _duplicate(self, key: ItemKey) -> None:
        self.run.manifest.duplicates_dropped += 1
        log.info("dropping a duplicate record for %s", key)

    def store(self, key: ItemKey, records: list[Record]) -> bool:
        """Record a finished item of this process (once). False for a duplicate and for a late record: one of
        a run that has ended, or of an earlier run (another run id). Records from workers go through
        :meth:`store_from`."""
        if self._late(key, records):
            return False
        if not self.run.ledger.complete(key):
            self._duplicate(key)
            return False
        self._write_item(records)
        return True

    def store_from(self, taker: str, key: ItemKey, records: list[Record]) -> tuple[str, str]:
        """Record an item a worker sent, if this master handed it to that worker and it is not recorded yet
        (:meth:`~avv_harness.run.ledger.Ledger.verdict`) and its rows answer that item: they name its key, and their
        ``request_hash`` is the hash of the body handed out. ``("", "")`` when stored, dropped as late or as
        a duplicate; else ``(reason, detail)`` of the refusal, for :meth:`refuse_record`."""
        if self._late(key, records):
            return "", ""
        verdict = self.run.ledger.verdict(key, taker)
        if verdict == DUPLICATE:
            self._duplicate(key)
            return "", ""
        if verdict != ACCEPT:
            return verdict, f"{key} was {verdict.replace('_', ' ')}"
        problem = self._rows_problem(key, records)
        if problem is not None:
            return problem
        self.run.ledger.complete_from(key, taker)
        self._write_item(records)
        return "", ""

    def _rows_problem(self, key: ItemKey, records: list[Record]) -> tuple[str, str] | None:
        sample = self._samples_by_id().get(key.sample_id)
        for number, record in enumerate(records, 1):
            named = ItemKey.from_record(record)
            if named != key:
                return "wrong_rows", f"row {number} names {named}, the message names {key}"
            if sample is not None and record["request_hash"] != sample.request_hash:
                return "request_hash", (f"row {number} of {key} answers another request body than the one "
                                        "handed out")
        if sample is not None and sample.agent is None and len(records) != 1:
            return "wrong_rows", f"{len(records)} rows for {key}, a single-request item"
        return None

    def refuse_record(self, worker: str, key: ItemKey | None, reason: str, detail: str,
                      taker: str | None = None) -> None:
        """Count and log a record that is not written; when ``taker`` holds the item, hand it out again so
        the run still ends."""
        run = self.run
        released = key is not None and taker is not None and self.release_item(key, taker)
        again = "; the item is handed out again" if released else ""
        if run is None or run.finished:
            log.warning("refused a record from worker %s (%s: %s)%s", worker, reason, detail, again)
            return
        m = run.manifest
        m.records_refused += 1
        count = m.records_refused_by_reason[reason] = m.records_refused_by_reason.get(reason, 0) + 1
        if count <= LOGGED_REFUSALS:
            more = (f" (further refusals for {reason} are counted in run.json, not logged)"
                    if count == LOGGED_REFUSALS else "")
            log.warning("refused a record from worker %s (%s: %s)%s%s", worker, reason, detail, again, more)

    def note_refused_worker(self, worker: str, reason: str) -> None:
        """Into the current run's run.json; a refusal while no run is open (a worker connecting while the
        master starts, or between web-UI runs) goes into the next run's."""
        if self.run is not None and not self.run.finished:
            self.run.manifest.workers_refused[worker] = reason
        else:
            self._refusals_before_run[worker] = reason

    def _on_run_begin(self, run: RunState, phase: str, **_: Any) -> None:
        if phase == "begin" and self._refusals_before_run:
            run.manifest.workers_refused.update(self._refusals_before_run)
            self._refusals_before_run.clear()

    def _write_item(self, records: list[Record]) -> None:
        """Write an accepted item's rows, account its tokens, tell the listeners."""
        run = self.run
        records = [self.redact.record(r) for r in records]
        if run.stop_reason != "disk":
            try:
                run.write(records)
            except RecordWriteError as exc:
                self._stop_run("disk", f"cannot write records: {exc.strerror}; no new items are started")
        if run.account(records, lambda r: self.class_name(VendorId(r["model"], r["vendor"]))):
            m = run.manifest
            self._stop_run("budget", f"token budget reached ({m.tokens_used} ≥ {self.options.max_total_tokens}): "
                                     "no new items are started")
        self.record_hook.fire(records=records)

    def _stop_run(self, reason: str, message: str) -> None:
        dropped = self.run.stop(reason) if self.run is not None else None
        if dropped is not None:
            log.warning("%s; %d items not run", message, dropped) if reason != "disk" else log.error(
                "%s (%d items not run)", message, dropped)

    # ------------------------------------------------------------------------------------ the load

    def next_load(self, run_time_s: float) -> LoadDecision:
        """What the shape returns at ``run_time_s``: every vendor's users until each item is recorded,
        or the stress ladder; stop at -t/--run-time. With the web UI, a tick after a run has ended is a new
        START: it begins a new run."""
        if self.ui_mode and (self.run is None or self.run.finished) and (self.stopping or not self._begin_from_ui()):
            return LoadDecision(stop=True)  # no new run once the process is stopping (a SIGTERM while scoring)
        run = self.run
        if run is None:
            return LoadDecision(stop=True)
        run.last_run_time_s = run_time_s
        limit = self.options.run_time_s
        if limit and run_time_s >= limit and run.stop_reason is None:
            if run.stress is not None:
                run.stress.stop_now(run_time_s)
            self._stop_run("run_time", f"--run-time {limit:g}s reached: the run stops")
        if run.stop_reason == "run_time" or run.finished:
            return LoadDecision(stop=True)
        if run.stress is not None:
            return self._stress_load(run, run_time_s)
        if run.ledger.finished:
            return LoadDecision(stop=True)
        total = sum(v.concurrency for v in self.vendors.values())
        rate = self.options.spawn_rate
        return LoadDecision(total, float(rate if rate > 0 else max(total, 1)))

    def _stress_load(self, run: RunState, run_time_s: float) -> LoadDecision:
        decision = run.stress.tick(run_time_s)
        for name in decision.newly_stopped:
            log.info("stress: %s broke the SLO at two consecutive levels; not escalated past %d", name,
                     run.stress.stopped_after[name])
        if decision.stop:
            run.ledger.drop_pending()
            log.info("stress: %s", decision.reason)
            return LoadDecision(stop=True)
        if decision.level != run.announced_level:
            run.announced_level = decision.level
            log.info("stress: level %d", decision.level)
        classes = {cls.__name__: cls for cls in self.env.user_classes}
        # Every stress User class has weight 1 and no fixed_count (see locust_plugin.user_classes), so
        # level × vendors users split evenly: Locust's dispatcher re-reads weights on every start().
        return LoadDecision(decision.users, float(decision.users), tuple(classes[n] for n in decision.classes))
