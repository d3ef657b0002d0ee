"""The run controller: all of a process's avv state, kept on Locust's ``Environment`` as ``environment.avv``.

``install(environment, role_for=...)`` builds it in Locust's ``init`` event (tests call it on their own environment);
``controller_of(environment)`` is the only way to reach it. The controller reads the inputs, runs items for
its users and, on the ledger side, hands items out and takes records in. It composes two objects and asks them
instead of testing which process it is: its role (``ctl.role``: local, master or worker, picked from the runner
type; :mod:`avv_harness.locust.distribution`) and its lifecycle (``ctl.lifecycle``,
:class:`~avv_harness.run.lifecycle.RunLifecycle`: the samples, the simulator process and the runs —
:class:`~avv_harness.run.state.RunState`: run folder, ledger, record writer, manifest, stress policy — begun and
ended as named steps in a visible order, :meth:`RunLifecycle.end_run`). What the shape returns at each tick is
:func:`avv_harness.run.load_shape.next_load`.

Headless, a process makes one run: it begins at ``init`` and ends at ``quitting``. With the web UI, the
inputs are checked (and the simulator started) at ``init``; each START begins a new run folder (the shape's
first tick) and each STOP ends it (Locust's ``test_stop``: records closed, run scored, report.md and
report.html written) while the process keeps running; ``quitting`` ends a run still open and stops the
simulator.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import gevent
import requests
from locust.env import Environment
from locust.event import EventHook

from avv_core.errors import InputError
from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.json_types import JSONObject
from avv_core.manifest import RunManifest
from avv_core.records import Record
from avv_core.samples import Sample, SampleSet
from avv_harness.inputs.config import Vendor, load_config
from avv_harness.inputs.secrets import Redactor, environment_with_dotenv, install_log_redaction
from avv_harness.run.budget import WorstCases
from avv_harness.run.folder import RunSetup, exec_context
from avv_harness.run.intake import RecordIntake
from avv_harness.run.lag_monitor import LagMonitor, quiet_gc_for_load
from avv_harness.run.ledger import Ledger
from avv_harness.run.lifecycle import RunLifecycle
from avv_harness.run.load_shape import LoadDecision, next_load
from avv_harness.run.node_identity import NodeIdentity
from avv_harness.run.options import RunOptions, preparse_options
from avv_harness.run.preflight import Preflight, run_preflight, targets_of
from avv_harness.run.record_event import EVENT_NAME, RecordsCsv
from avv_harness.run.role import Role, RoleFactory
from avv_harness.run.state import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_OK, EXIT_SCORING, EXIT_WRITE, RunState
from avv_harness.wire.execute import ExecContext, ItemRun, vendor_session
from avv_harness.wire.lean import LeanAdapter
from avv_harness.wire.requests_transport import EnvSettingsCache, StrictAdapter
from avv_harness.wire.run_item import run_item_safely

if TYPE_CHECKING:
    from avv_harness.wire.attempt import Attempt

log = logging.getLogger("avv")

__all__ = ["EXIT_INCOMPLETE", "EXIT_INPUT", "EXIT_OK", "EXIT_SCORING", "EXIT_WRITE", "RunController", "controller_of",
           "default_session", "install"]
#: Seconds between progress lines in a headless run.
PROGRESS_INTERVAL_S = 5.0
SessionFactory = Callable[[], requests.Session]
V = TypeVar("V")


def default_session(client: str = "lean") -> requests.Session:
    """One session per user: a small pool, no urllib3 retries (retries are ours, and counted). ``client`` (the
    ``--avv-client`` option): ``lean`` mounts :class:`~avv_harness.wire.lean.LeanAdapter`, whose streams the lean
    client reads (a proxied URL still goes through requests); ``requests`` requests' adapter reading the response
    head as the lean client does (:class:`~avv_harness.wire.requests_transport.StrictAdapter`)."""
    session = requests.Session()
    adapter_class = LeanAdapter if client == "lean" else StrictAdapter
    adapter = adapter_class(pool_connections=1, pool_maxsize=4, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def install(environment: Environment, *, role_for: RoleFactory,
            session_factory: SessionFactory | None = None) -> RunController:
    """Build the controller for this environment and its runner, and attach it (listeners, messages). ``role_for``
    picks the process's role from the runner (:func:`avv_harness.locust.distribution.role_for`)."""
    if getattr(environment, "avv", None) is not None:
        raise RuntimeError("avv is already installed on this environment")
    ctl = RunController.for_environment(environment, role_for=role_for, session_factory=session_factory)
    environment.avv = ctl  # type: ignore[attr-defined]  # avv's state on Locust's environment (its plugin habit)
    ctl.attach()
    return ctl


def controller_of(environment: Environment) -> RunController:
    ctl = getattr(environment, "avv", None)
    if ctl is None:
        raise RuntimeError("avv is not installed on this environment (call avv_harness.install)")
    return ctl


class RunController:
    """A process's avv state and its Locust glue. It holds its role (``role``) and its lifecycle (``lifecycle``:
    how runs begin and end) and asks them; the current run's parts are read through it (``run``, ``ledger``,
    ``run_dir``, ``manifest``)."""

    def __init__(self, environment: Environment, options: RunOptions, vendors: dict[str, Vendor], *,
                 role_for: RoleFactory,
                 session_factory: SessionFactory | None = None, config_identity: str = "",
                 secrets: list[str] | None = None):
        """Tests build a controller from parts; processes use :meth:`for_environment`.

        Why so many parameters: each is one injected part (the Locust environment, the parsed options, the vendors,
        the role factory, the HTTP session factory, the config's identity and the secrets to redact), and all but
        the first three are keywords with defaults."""
        self.env = environment
        self.options = options
        self.vendors = vendors  # User class name → vendor (keys resolved)
        self._ids = {name: VendorId(v.model, v.name) for name, v in vendors.items()}
        self._names = {vid: name for name, vid in self._ids.items()}
        self.session_factory = session_factory or functools.partial(default_session, options.client)
        # Proxy and CA settings from the environment, per (URL, verify), shared by the run's sessions: requests works
        # them out by scanning the whole environment (~0.2–0.4 ms), which a thousand users starting at once paid each.
        self.env_settings: EnvSettingsCache = {}
        self.config_identity = config_identity
        self.redact = Redactor(secrets or [])
        self.role: Role = role_for(environment.runner, self)
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self._exec = exec_context(options, "", self.worker_id)  # until a run begins; a worker's: the master's
        self.lifecycle = RunLifecycle(
            RunSetup(options, vendors, self.role, config_identity, self.worker_id, self.redact),
            ui_mode=not getattr(environment.parsed_options, "headless", False),
            progress_interval_s=PROGRESS_INTERVAL_S, sim_url=os.environ.get("AVV_SIM_URL", "").rstrip("/") or None,
            before_finish=self._stop_lag)
        self.lifecycle.check_vendors = self.preflight
        self._sample_index: tuple[SampleSet, dict[str, Sample]] | None = None  # samples.by_id(), built once
        self._views: dict[type, object] = {}  # the live board, the Prometheus exporter: see view()
        self.lag: LagMonitor | None = None  # this process's event-loop lag (processes that run users)
        self._undo_gc: Callable[[], None] | None = None  # while users run: see lag.quiet_gc_for_load
        # ``events.avv_record``, the public extension point (avv_harness.run.record_event): fired once per stored
        # item with records=[its rows], vendor=its Vendor, environment. records.csv is its first listener.
        self.record_hook = EventHook()
        self.write_records_csv = RecordsCsv(self.lifecycle)
        self.record_hook.add_listener(self.write_records_csv)
        self.run_hook = self.lifecycle.run_hook  # fired with run=RunState, phase="begin" | "end"
        self._worst = WorstCases(options.overrides)  # each (vendor, sample)'s worst case, for the budgets
        self.intake = RecordIntake(self)  # records in: checked, written through the record event, accounted
        setattr(environment.events, EVENT_NAME, self.record_hook)

    # ----------------------------------------------------------------- the current run's parts (read-only views)

    @property
    def run(self) -> RunState | None:
        """The current (or last) run; None before the first begins, and on workers."""
        return self.lifecycle.run

    @property
    def runs(self) -> list[RunState]:
        """Every run of this process, oldest first."""
        return self.lifecycle.runs

    @property
    def samples(self) -> SampleSet | None:
        """The samples (read on the ledger side; None on workers)."""
        return self.lifecycle.samples

    @property
    def exec(self) -> ExecContext:
        """How this process runs items: the current run's context; on a worker, the master's latest."""
        run = self.lifecycle.run
        return run.exec if run is not None else self._exec

    @property
    def sim_url(self) -> str | None:
        return self.lifecycle.sim_url

    @property
    def ui_mode(self) -> bool:
        """Web UI mode: a run per START/STOP; headless: one run from init to quit."""
        return self.lifecycle.ui_mode

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

    def view(self, kind: type[V], make: Callable[[], V]) -> V:
        """This process's one view of ``kind`` of its runs, made by ``make`` on first use: the web UI's live board
        (:mod:`avv_harness.locust.live_board`) and the Prometheus exporter (:mod:`avv_harness.locust.prometheus`).
        The Locust layer declares them; the controller keeps them, so the web UI and the exporter share one."""
        found = self._views.get(kind)
        if found is None:
            found = self._views[kind] = make()
        if not isinstance(found, kind):
            raise TypeError(f"the view kept for {kind.__name__} is a {type(found).__name__}")
        return found

    def kept_view(self, kind: type[V]) -> V | None:
        """The view of ``kind`` made so far (:meth:`view`), None when there is none."""
        found = self._views.get(kind)
        return found if isinstance(found, kind) else None

    # ---------------------------------------------------------------------------------- construction

    @classmethod
    def for_environment(cls, environment: Environment, *, role_for: RoleFactory,
                        session_factory: SessionFactory | None = None) -> RunController:
        """Options from ``environment.parsed_options``; vendors for ``environment.user_classes`` (each
        carries ``avv_vendor_id``); keys from the environment and ``.env``. InputError on bad input."""
        options = RunOptions.from_parsed(environment.parsed_options or preparse_options([]))
        config = (load_config(options.config, env=environment_with_dotenv()).select(list(options.models))
                  .with_concurrency(options.concurrency))
        by_id = {VendorId(v.model, v.name): v for v in config.vendors}
        vendors = {}
        for user_class in environment.user_classes:
            vendor_id = getattr(user_class, "avv_vendor_id", None)
            if vendor_id is not None:
                vendors[user_class.__name__] = by_id[VendorId(*vendor_id)]
        unpriced = [f"{v.model}/{v.name}" for v in vendors.values() if v.price is None]
        if options.max_cost and unpriced:
            raise InputError(f"--avv-max-cost needs a price for every vendor (price: in {options.config}); "
                             f"none for: {', '.join(unpriced)}")
        return cls(environment, options, vendors, role_for=role_for, session_factory=session_factory,
                   config_identity=config.identity(), secrets=config.secrets() + options.overrides.secrets())

    def attach(self) -> None:
        """The role's messages and listeners; in processes that run users, the lag monitor; then the lifecycle
        (on the ledger side: the inputs are read and, headless, the run begins)."""
        install_log_redaction(self.redact)
        self.role.attach()
        if self.role.runs_users:  # the processes that run users watch their own event-loop lag
            runner = self.env.runner
            if runner is None:
                raise RuntimeError("avv is installed on an environment without a runner (create it first)")
            self.lag = LagMonitor().start(spawn=runner.greenlet.spawn)  # ends with the runner
            self.env.events.test_start.add_listener(self._quiet_gc)
            self.env.events.test_stop.add_listener(self._restore_gc)
        self.lifecycle.attach(self.env.events)

    def _quiet_gc(self, **_: object) -> None:
        if self._undo_gc is None:
            self._undo_gc = quiet_gc_for_load()

    def _restore_gc(self, **_: object) -> None:
        if self._undo_gc is not None:
            self._undo_gc()
            self._undo_gc = None

    def _stop_lag(self) -> None:
        if self.lag is not None:
            self.lag.stop()

    # ------------------------------------------------------------------------------------ the end

    def finish(self) -> int:
        """End the process's part (:meth:`RunLifecycle.finish`); its exit status."""
        return self.lifecycle.finish()

    # ------------------------------------------------------------------------------ vendors and users

    def vendor_id(self, class_name: str) -> VendorId:
        return self._ids[class_name]

    def class_name(self, vendor_id: VendorId) -> str:
        return self._names[VendorId(*vendor_id)]

    def vendor_url(self, class_name: str) -> str:
        return self.vendors[class_name].resolved_url(self.sim_url)

    def preflight(self, run_id: str) -> Preflight:
        """One request per vendor, at once, before any load (:mod:`avv_harness.run.preflight`), through the users'
        own HTTP client (``session_factory``) and this run's execution context."""
        ctx = dataclasses.replace(self.exec, run_id=run_id)
        return run_preflight(targets_of(self.vendors, self.vendor_url), self.lifecycle.samples, ctx,
                             self.options.preflight, self.session_factory, self.redact)

    def session_for(self, class_name: str) -> requests.Session:
        """A new HTTP session for a user of ``class_name``: the session factory's, verifying TLS as its vendor's
        ``tls_verify`` says (:func:`~avv_harness.wire.execute.vendor_session`)."""
        return vendor_session(self.session_factory, self.vendors[class_name], self.env_settings)

    def vendor_closed(self, vendor: VendorId) -> bool:
        """On the ledger side: ``vendor`` gets no more items (the settle policy settled it, or the circuit breaker
        stopped it) and none of its items is pending or in flight, so its users may stop."""
        run = self.run
        if run is None:
            return False
        if run.settle is not None and vendor in run.settle.users_stop(run.ledger):
            return True
        return vendor in run.vendors_down and not run.ledger.busy(vendor)

    def run_item(self, session: requests.Session, class_name: str, item: WorkItem,
                 on_attempt: Callable[[Attempt], None] | None = None) -> list[Record]:
        """Run one item and return its records (redacted): one row, or one per step of an agent task
        (:mod:`avv_harness.wire.run_item`). Never raises for the item's own failures; only ``GreenletExit`` (the
        user is stopped) propagates, and then the caller gives the item back."""
        records = run_item_safely(ItemRun(session, self.vendors[class_name], self.vendor_url(class_name), item,
                                          self.exec, sleep=gevent.sleep, on_attempt=on_attempt))
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

    # -------------------------------------------------------------------- worker context (master → worker)

    def worker_context(self) -> JSONObject:
        """How workers run items (the run id, retries, timeouts, the global overrides) and where the
        simulator is: the master's options win over a worker's own."""
        return {"exec": self.exec.to_message(), "sim_url": self.sim_url}

    def apply_worker_context(self, context: JSONObject) -> None:
        if context:
            self.lifecycle.sim_url = context.get("sim_url") or self.lifecycle.sim_url
            self._exec = ExecContext.from_message(context["exec"], worker=self.worker_id)
            self.redact.extend(self.exec.overrides.secrets())

    # ------------------------------------------------------------------------- the ledger side

    def identity(self) -> NodeIdentity:
        """What this process presents to (worker) or compares with (master) the other side: see
        :mod:`avv_harness.run.node_identity`. Workers read no sample file, so their samples part is None."""
        return NodeIdentity.of(self.worker_id, self.vendors, self.redact.value,
                               self.samples.sha256 if self.samples is not None else None)

    def samples_by_id(self) -> dict[str, Sample]:
        """The current sample set by sample id (built once per sample set)."""
        if self.samples is None:
            return {}
        if self._sample_index is None or self._sample_index[0] is not self.samples:
            self._sample_index = (self.samples, self.samples.by_id())
        return self._sample_index[1]

    def take_items(self, vendor: VendorId, taker: str, limit: int = 1) -> list[WorkItem]:
        """Up to ``limit`` items for ``vendor`` (:meth:`RunState.take`: with a budget, within it)."""
        run = self.run
        if run is None or run.finished or self.samples is None:
            return []
        by_id = self.samples_by_id()
        level = run.stress.level if run.stress is not None else None
        config = self.vendors[self.class_name(vendor)]
        keys = run.take(vendor, taker, limit, lambda key: self._worst.of(config, by_id[key.sample_id]),
                        config.concurrency)
        return [WorkItem(key, by_id[key.sample_id], level) for key in keys]

    def release_item(self, key: ItemKey, taker: str | None = None) -> bool:
        """Put an unfinished item back in the queue (with ``taker``: only when that taker holds it); its budget
        reservation is released."""
        run = self.run
        if run is None:
            return False
        released = run.ledger.release(key, taker)
        if released or key not in run.ledger.in_flight:
            run.budget.release(key)
        return released

    def takers(self) -> set[str]:
        return self.run.ledger.takers() if self.run is not None else set()

    def holder(self, key: ItemKey) -> str | None:
        """The taker holding ``key`` now (None: not handed out, given back or recorded)."""
        return self.run.ledger.in_flight.get(key) if self.run is not None else None

    def requeue_taker(self, taker: str, why: str = "is gone") -> int:
        run = self.run
        lost = run.ledger.requeue_taker(taker) if run is not None else []
        if run is not None and lost:
            for key in lost:
                run.budget.release(key)
            run.manifest.items_requeued += len(lost)
            log.warning("worker %s %s: %d in-flight items handed out again", taker, why, len(lost))
        return len(lost)

    # ------------------------------------------------------------------------------------ the load

    def next_load(self, run_time_s: float) -> LoadDecision:
        """What the shape returns at ``run_time_s`` (:func:`avv_harness.run.load_shape.next_load`)."""
        return next_load(self.lifecycle, run_time_s, self.env.user_classes)
