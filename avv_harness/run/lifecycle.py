"""How a process's runs begin and end (run-controller layer; held by
:class:`~avv_harness.run.controller.RunController` as ``ctl.lifecycle``).

Headless, a process makes one run: :meth:`RunLifecycle.begin` at ``init``, :meth:`RunLifecycle.finish` at
``quitting``. With the web UI, :meth:`RunLifecycle.prepare_ui` checks the inputs and starts the simulator
at ``init``; the shape's first tick after START begins a run (:meth:`RunLifecycle.run_for_tick`), Locust's
``test_stop`` ends it (:meth:`RunLifecycle.end_run`: records closed, manifest written, run scored) and
``quitting`` ends a run still open, then stops the simulator. The lifecycle owns the runs (the current one and
the earlier ones of the process), the samples, the simulator and the process's stop state; it asks the
process's role (:class:`~avv_harness.run.role.Role`) what its part is, never which role it is.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import gevent
import gevent.event
from locust.env import Environment
from locust.event import EventHook, Events

from avv_core.client_load import client_bound_advice, client_load
from avv_core.errors import InputError
from avv_core.exit_status import most_serious
from avv_core.items import VendorId
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.manifest import RECORDS_CSV
from avv_core.samples import SampleSet, load_samples
from avv_core.stop_signals import Interrupted, interrupt_on_signals
from avv_harness.run.console import Console, decision_lines, report_paths, start_line
from avv_harness.run.folder import (
    RunSetup,
    append_to_history,
    check_out_folder,
    decision_status,
    fill_manifest,
    new_run,
    score_run,
    summary_line,
    ui_run_options,
    vendor_down_line,
)
from avv_harness.run.options import RunOptions
from avv_harness.run.progress import EtaEstimator, Progress, VendorProgress, progress_line
from avv_harness.run.settle_policy import SettlePolicy
from avv_harness.run.state import EXIT_OK, STORE_STOPS, RunState
from avv_harness.wire.execute import check_requests, unsendable

if TYPE_CHECKING:
    from avv_harness.run.preflight import Preflight
    from avv_sim import SimProcess

log = logging.getLogger("avv")

__all__ = ["RunLifecycle", "skipped_lines_warning"]


def skipped_lines_warning(samples: SampleSet, listed: int = 20) -> str:
    """--avv-skip-bad-lines: how many sample lines were skipped, which, and why the first one was."""
    skipped = samples.skipped_lines
    lines = ", ".join(str(line) for line, _ in skipped[:listed]) + (" …" if len(skipped) > listed else "")
    return (f"{len(skipped)} malformed sample line(s) skipped (lines {lines}; run.json lists why); "
            f"first: {skipped[0][1]}")


class RunLifecycle:
    """Beginning and ending runs, and ending the process's part, as named steps."""

    def __init__(self, setup: RunSetup, *, ui_mode: bool, progress_interval_s: float, sim_url: str | None,
                 before_finish: Callable[[], None] | None = None, console: Console | None = None):
        self.setup = setup  # what every run of the process is made from
        self.options = setup.options
        self.vendors = setup.vendors  # User class name → vendor (keys resolved)
        self.role = setup.role
        self.config_identity = setup.config_identity
        self.ui_mode = ui_mode  # web UI mode: a run per START/STOP; headless: one run from init to quit
        self.progress_interval_s = progress_interval_s  # seconds between progress lines (headless); 0: none
        self.before_finish = before_finish  # stops what the controller runs (its lag monitor) at finish
        self.samples: SampleSet | None = None  # read once, on the ledger side; stays None on workers
        self.not_sent: dict[VendorId, dict[str, str]] = {}  # conformance: probes a vendor's wire format cannot carry
        self.run: RunState | None = None  # the current (or last) run
        self.runs: list[RunState] = []  # every run of this process, oldest first
        self.sim: SimProcess | None = None  # the simulator this process started
        self.sim_url = sim_url  # where the simulated vendors are (AVV_SIM_URL, ours, or the master's)
        self.sim_truth_log: str | None = None  # the web UI's simulator's truth log (one for every run)
        self.exit_code: int | None = None  # the process's exit status, set by finish()
        self.quit_done = False
        self.finishing: tuple[gevent.Greenlet, gevent.event.Event] | None = None  # (greenlet, done) while finish() runs
        self.stopping = False  # a stop signal arrived or the process is finishing: later signals are ignored
        self.rearm_signals: Callable[[], None] | None = None  # the plugin's gevent signal handlers, set again
        self.run_hook = EventHook()  # fired with run=RunState, phase="begin" | "end"
        self._progress: gevent.Greenlet | None = None
        self.console = console or Console()  # the run's terminal output (start line, progress, decision block)
        # set by the controller (they need Locust's runner or the users' HTTP sessions):
        self.check_vendors: Callable[[str], Preflight] | None = None  # the pre-flight check (run id → its answers)
        self.failed_attempts: Callable[[], int | None] = lambda: None  # attempts failed so far, retries included
        self.before_report: Callable[[], None] = lambda: None  # Locust's final tables, when asked for
        self.after_finish: Callable[[], None] = lambda: None  # after the run's last line: Locust prints nothing more
        self.preflight: Preflight | None = None  # the web UI's pre-flight (at start-up), for its first run's run.json

    def attach(self, events: Events) -> None:
        """On the ledger side: end the process's part at ``quitting``; then, headless, begin the run; with the web
        UI, check the inputs now and end each run at ``test_stop``."""
        if not self.role.holds_ledger:
            return
        events.quitting.add_listener(self._on_quitting)
        if self.ui_mode:
            self.prepare_ui()
            events.test_stop.add_listener(self._on_test_stop)
        else:
            self.begin()

    # ---------------------------------------------------------------------------------- the beginning

    def _load_samples(self) -> SampleSet:
        """The sample file, read once (InputError on bad input, and for a sample that cannot be sent in a
        vendor's wire format: :func:`~avv_harness.wire.execute.check_requests`). A conformance run's samples are the
        suite's probes, built from the sample file and written next to the run folders
        (:func:`avv_scoring.conformance.suite.write_probe_file`); a probe a vendor's wire format cannot carry is not
        sent to it (:attr:`not_sent`)."""
        if self.samples is None:
            samples = load_samples(self.options.samples, skip_bad_lines=self.options.skip_bad_lines)
            if samples.skipped_lines:
                print(f"avv-locust: warning: {skipped_lines_warning(samples)}", flush=True)
            if self.options.is_conformance:
                from avv_scoring.conformance.suite import not_sent_reason, write_probe_file

                try:
                    samples = write_probe_file(samples, self.options.out)
                except OSError as exc:
                    raise InputError(f"{self.options.out}: cannot write the conformance probes "
                                     f"({exc.strerror or exc})") from None
                self.not_sent = unsendable(samples, self.vendors.values(), self.options.overrides, not_sent_reason)
                log.info("conformance suite: %d probes in %s", len(samples.samples), samples.path)
            else:
                check_requests(samples, self.vendors.values(), self.options.overrides)
            self.samples = samples
        return self.samples

    def prepare_ui(self) -> None:
        """Web UI mode, at ``init``: refuse bad input now (InputError → exit 2) — samples, the folder to resume,
        the output folder — and start the simulator once for every run of this process."""
        samples = self._load_samples()
        check_out_folder(self.options, samples, self.config_identity)
        if self._needs_simulator():
            self.sim_truth_log = str(Path(self.options.out) / f"sim_truth-{os.getpid()}.jsonl")
            self._start_simulator(self.sim_truth_log)
        if self.check_vendors is not None and self.options.preflight != "off":
            self.preflight = self.check_vendors("")
            self._report_preflight(self.preflight)
            if self.preflight.refused:
                self._stop_simulator()
                raise InputError(self.preflight.refusal())

    def _start_simulator(self, truth_log: str) -> None:
        from avv_sim import start_simulator

        # the simulator reads the samples' gold labels from the file itself (a conformance run's: the probe file): no
        # vendor is ever sent them
        gold = self.samples.path if self.samples is not None else self.options.samples
        self.sim = start_simulator(self.options.sim_config, truth_log=truth_log, gold=gold,
                                   sets=self.options.sim_sets)
        self.sim_url = self.sim.url
        log.debug("started the simulated vendors at %s", self.sim_url)

    def _needs_simulator(self) -> bool:
        return self.sim is None and not self.sim_url and any(v.uses_simulator for v in self.vendors.values())

    def begin(self) -> RunState:
        """Begin a run: open (or resume) its folder, build its ledger and manifest; headless, start the
        simulator (its truth log in the run folder)."""
        options = ui_run_options(self.options, len(self.runs)) if self.ui_mode else self.options
        samples = self._load_samples()
        if options.settle is not None and any(s.agent is not None for s in samples.samples):
            raise InputError(f"{samples.path}: --avv-settle does not settle agent tasks (their trajectory bounds "
                             "have no per-item ratio form); run without it")
        run = new_run(options, samples, self.setup, self.not_sent)
        if options.settle is not None:
            self._settle_policy(run, options, samples)
        if self._needs_simulator():
            self._start_simulator(str(run.run_dir / "sim_truth.jsonl"))
        fill_manifest(run, self.setup, options, samples, sim_url=self.sim_url, sim_truth_log=self.sim_truth_log)
        if self.not_sent:  # conformance: what was not sent to whom, and why (the report says it too)
            run.manifest.extra["not_sent"] = {f"{vid.model}/{vid.vendor}": dict(why)
                                              for vid, why in self.not_sent.items()}
        for earlier in self.runs:  # keep what a download needs (the folder), not the scored frames
            earlier.result = None
        self.run = run
        self.runs.append(run)
        self.save_manifest()
        items = "the stress ladder" if options.is_stress else f"{run.ledger.total} items"
        log.debug("avv run %s: %s for %d vendors; records → %s", run.run_id, items, len(self.vendors),
                  run.run_dir / RECORDS_CSV)
        if not self.ui_mode:
            self.console.end_progress_before_logs()
            self.console.line(self._start_line(run, options, samples))
        unchecked = self._unchecked_certificates()
        if unchecked:
            log.warning("tls_verify: false: the TLS certificate of %s is not checked (anyone between this machine "
                        "and the vendor can pose as it)", ", ".join(unchecked))
        self._preflight(run, options)
        self.run_hook.fire(run=run, phase="begin")
        if not self.ui_mode and self.progress_interval_s > 0:
            self._progress = gevent.spawn(self._print_progress, run)
        return run

    def _unchecked_certificates(self) -> list[str]:
        """The vendors (model/name) reached over TLS whose certificate is not checked (``tls_verify: false``)."""
        return [f"{v.model}/{v.name}" for v in self.vendors.values() if v.tls_verify is False
                and not (v.url if v.uses_simulator and not self.sim_url
                         else v.resolved_url(self.sim_url)).startswith("http://")]

    def _start_line(self, run: RunState, options: RunOptions, samples: SampleSet) -> str:
        stress = None
        if options.stress is not None:
            levels = ",".join(map(str, options.stress.levels))
            stress = f"stress ladder {levels} users per vendor, {options.stress.step_s:g} s each"
        return start_line([(v.model, v.name, v.is_baseline) for v in self.vendors.values()], len(samples.samples),
                          options.repeats, str(run.run_dir), left=run.ledger.total if options.resume else None,
                          stress=stress)

    def _preflight(self, run: RunState, options: RunOptions) -> None:
        """The pre-flight check (:mod:`avv_harness.run.preflight`), before any load: headless at each run's start;
        with the web UI once, when the process starts (:meth:`prepare_ui`), written to its first run. Its tokens and
        cost go to the budget and run.json; refused vendors end the run here (InputError: exit status 2)."""
        result = self.preflight
        if result is None and not self.ui_mode and self.check_vendors is not None and options.preflight != "off":
            result = self.check_vendors(run.run_id)
            self._report_preflight(result)
        self.preflight = None  # a web UI's: only its first run got it
        if result is None:
            return
        run.budget.charge(result.spent)  # run.json: budget.charged includes it; tokens_used stays the records'
        run.manifest.extra["preflight"] = result.to_manifest()
        if result.refused:
            run.stop_reason = "preflight"
            run.finished = True
            run.close(False)
            self.save_manifest()
            self._stop_simulator()
            raise InputError(result.refusal())
        self.save_manifest()
        if run.budget.exhausted:
            self.stop_run("budget", f"budget reached by the pre-flight requests ({run.budget.caps_text()})")

    def _report_preflight(self, result: Preflight) -> None:
        if not result.refused:
            self.console.line(result.summary())
        for check in result.warnings:
            hard = " (a hard fault; --avv-preflight warn runs anyway)" if check.hard else ""
            self.console.line(f"avv-locust: warning: pre-flight{hard}: {check.line()}")

    def _settle_policy(self, run: RunState, options: RunOptions, samples: SampleSet) -> None:
        """--avv-settle: the run's settle policy (see :mod:`avv_harness.run.settle_policy`); on resume, the vendors
        settled before stay settled and their items are skipped again."""
        ids = [VendorId(v.model, v.name) for v in self.vendors.values()]
        baselines = {vid.model: vid for vid, v in zip(ids, self.vendors.values(), strict=True) if v.is_baseline}
        run.settle = SettlePolicy(options, vendors=ids, baselines=baselines, samples=samples, totals=run.vendor_totals,
                                  seed=int(run.manifest.extra["settle"]["seed"]))
        run.settle.mark_resumed((run.settle_before or {}).get("vendors") or {})
        for vendor, count in run.settle.apply(run.ledger).items():
            log.info("--avv-settle: %s was settled in an earlier session: %d items skipped", vendor.vendor, count)
        run.manifest.extra["settle"] = run.settle.to_manifest()

    def run_for_tick(self) -> RunState | None:
        """The run a shape tick works on. With the web UI, a tick after a run has ended is a new START: it
        begins a new run — none once the process is stopping (a SIGTERM while scoring), none when the run
        cannot begin (e.g. the output folder became unwritable: this START does nothing)."""
        if self.ui_mode and (self.run is None or self.run.finished):
            if self.stopping:
                return None
            try:
                self.begin()
            except Exception as exc:
                log.error("cannot begin a new run: %s", exc)
                return None
        return self.run

    def save_manifest(self) -> None:
        run = self.run
        if run is None:
            return
        try:
            run.save_manifest(self.stress_summary())
        except OSError as exc:
            log.error("cannot write %s/run.json: %s", run.run_dir, exc.strerror or exc)

    def stop_run(self, reason: str, message: str) -> None:
        """Stop the current run early for ``reason`` (budget, run_time, disk): no new items are started; the
        items not run are counted in ``message``'s log line (once: a run stops for its first reason only)."""
        dropped = self.run.stop(reason) if self.run is not None else None
        if dropped is not None:
            log.warning("%s; %d items not run", message, dropped) if reason not in STORE_STOPS else log.error(
                "%s (%d items not run)", message, dropped)

    def stress_summary(self) -> JSONObject | None:
        """The current run's stress ladder so far, vendors by name; None outside stress mode."""
        stress = self.run.stress if self.run is not None else None
        if stress is None:
            return None
        summary = stress.summary()
        summary["stopped_after"] = {self.vendors[n].name: lvl for n, lvl in summary["stopped_after"].items()}
        return summary

    def _print_progress(self, run: RunState) -> None:
        """The progress line (:mod:`avv_harness.run.progress`): every second in place on a terminal, every
        ``progress_interval_s`` as a plain line in a log."""
        eta = EtaEstimator()
        interval = min(1.0, self.progress_interval_s) if self.console.terminal else self.progress_interval_s
        last_line = 0.0
        while not run.finished:
            gevent.sleep(min(1.0, interval))
            now = time.monotonic()
            eta.observe(now, dict(run.vendor_done))
            if run.finished or now - last_line < interval - 0.01:
                continue
            last_line = now
            self.console.progress(self.progress_text(run, eta))

    def progress_text(self, run: RunState, eta: EtaEstimator | None = None) -> str:
        """The run's progress line now (:func:`~avv_harness.run.progress.progress_line`)."""
        level = run.stress.level if run.stress is not None else None
        per_vendor, left = [], {}
        in_flight = Counter(key.vendor_id for key in run.ledger.in_flight)
        for vendor in self.vendors.values():
            vid = VendorId(vendor.model, vendor.name)
            down = " stopped" if vid in run.vendors_down else ""
            per_vendor.append(VendorProgress(f"{vendor.name}{down}", run.vendor_done[vid],
                                             run.vendor_totals.get(vid, 0)))
            left[vid] = len(run.ledger.pending.get(vid, ())) + in_flight[vid]
        return progress_line(Progress(run.items_done, run.ledger.total, len(self.vendors),
                                      sum(run.vendor_failed.values()), time.monotonic() - run.started_monotonic,
                                      level, run.stress is not None, per_vendor=tuple(per_vendor),
                                      failed_attempts=self.failed_attempts(),
                                      eta=eta.eta(left) if eta is not None else None), self.console.width())

    # ------------------------------------------------------------------------------------ the end

    def _on_test_stop(self, environment: Environment, **_: object) -> None:
        self.end_run()

    def _on_quitting(self, environment: Environment, **_: object) -> None:
        second = self.quit_done  # another shutdown() is (or was) already finishing the process
        environment.process_exit_code = self.finish()
        if second:
            # Locust runs shutdown() (quitting → stats → sys.exit) once per stop request: in web-UI mode its own
            # SIGTERM handler does, in a greenlet, beside the main greenlet's (ours: SIGTERM → KeyboardInterrupt),
            # and a later SIGTERM adds one more. The first one exits the process. A second one must not reach its
            # sys.exit: after the main greenlet has exited it is raised into the exiting interpreter (the atexit
            # traceback), and before, it ends the process mid-way through the first. So it waits here until the
            # process ends: the first one's sys.exit (in the main greenlet or thrown into it) ends both.
            gevent.event.Event().wait()

    def finish(self) -> int:
        """End the process's part, in this order: end the open run (close the writer → write the manifest →
        stop the simulator → score → print) → stop the simulator → exit status (the last run's; 0 when no run
        began). Idempotent; signals during it are ignored (see the plugin's signal handlers), except during the
        scoring.

        Two shutdowns can overlap (see :meth:`_on_quitting`): a second caller waits for the first to end and gets
        the same exit status (before: it got 0 at once, while the first was still scoring)."""
        if self.quit_done:
            if self.finishing is not None and self.finishing[0] is not gevent.getcurrent():
                self.finishing[1].wait()
            return self.exit_code if self.exit_code is not None else EXIT_OK
        self.quit_done = self.stopping = True
        done = gevent.event.Event()
        self.finishing = (gevent.getcurrent(), done)
        try:
            return self._finish()
        finally:
            done.set()

    def _finish(self) -> int:
        if self.before_finish is not None:
            self.before_finish()
        self.role.close()
        if not self.role.holds_ledger:
            self.exit_code = EXIT_OK
            return self.exit_code
        if self.run is not None and not self.run.finished:
            self.end_run(stop_simulator=True)
        self._stop_simulator()
        self.exit_code = self.run.exit_code if self.run is not None and self.run.exit_code is not None else EXIT_OK
        self.after_finish()  # the decision block was the last line: Locust's own tables and INFO lines stay out
        return self.exit_code

    def end_run(self, stop_simulator: bool = False) -> int | None:
        """End the current run, in this order: close the writer → write the manifest → (at quit: stop the
        simulator) → score (report.md, report.html) → exit status → the closing line. Idempotent. SIGINT or
        SIGTERM during the scoring stops it: exit status 128 + the signal, and the closing lines say the
        records are complete and how to score them (``avv-score RUN``)."""
        run = self.run
        if run is None or run.finished:
            return run.exit_code if run is not None else None
        run.finished = True
        if self._progress is not None:
            self._progress.kill(block=False)
            self.console.end_progress(self.progress_text(run))
        if run.stress is not None and not run.stress.done:
            run.stress.stop_now(run.last_run_time_s)
        completed = run.completed
        if not completed and run.stop_reason is None:
            run.stop_reason = "interrupted"
        run.close(completed)
        run.manifest.extra["client_load"] = client_load(run.load_rows)
        self.save_manifest()
        if stop_simulator:
            self._stop_simulator()
        interrupted = None
        self.before_report()  # Locust's final tables, when asked for: before the scores and the decision
        if run.manifest.records_written and run.stop_reason != "disk":
            try:  # the records are complete on disk: a signal now stops the scoring, not the saving
                with interrupt_on_signals(after=self.rearm_signals):
                    run.result, run.scoring_problem = score_run(
                        run.run_dir, no_score=self.options.no_score, stress=run.stress is not None,
                        html=not self.options.no_html, decision=self.options.decision)
            except Interrupted as exc:
                interrupted = exc
        self._append_history(run, interrupted is not None)
        run.exit_code = most_serious([run.exit_status(), decision_status(run.result, self.options.decision)])
        if interrupted is not None:  # as a shell reports a process ended by the signal
            run.exit_code = interrupted.exit_status
        for line in client_bound_advice(run.manifest.extra["client_load"]):  # once per run (scoring leaves it out)
            self.console.line(f"avv-locust: warning: {line}")
        if interrupted is not None:
            self.console.line(f"\navv-locust: scoring stopped by {interrupted.name}; the records and run.json are "
                              f"complete: score them with avv-score {run.run_dir}")
        if run.result is None or not getattr(run.result, "scored", False):  # else the score tables' warnings say it
            for down in run.manifest.extra.get("vendor_down") or []:
                self.console.line(vendor_down_line(down, run.run_dir))
        down = _in_config_order([d["vendor"] for d in run.manifest.extra.get("vendor_down") or []],
                                run.manifest.vendors)
        self.console.line(summary_line(run, completed, down))
        self.console.decision(decision_lines(run.result, run.run_dir, self.options.no_score),
                              report_paths(run.result, run.run_dir))
        self.run_hook.fire(run=run, phase="end")
        return run.exit_code

    def _append_history(self, run: RunState, interrupted: bool) -> None:
        """``--avv-history``: the scored run into the history database (after scoring; a failure is the run's
        scoring problem: exit status 4, the closing line says how to add it later)."""
        history = self.options.history
        if not history or interrupted:
            return
        result = run.result
        if result is None or not getattr(result, "scored", False):
            if not self.options.no_score and run.manifest.records_written:
                log.warning("the run was not scored, so it is not added to the history %s", history)
            elif self.options.no_score:
                log.warning("--avv-no-score: the run is not added to the history %s; add it with avv-score history "
                            "add %s --db %s", history, run.run_dir, history)
            return
        problem = append_to_history(history, run.run_dir, run.manifest, result)
        if problem is not None and run.scoring_problem is None:
            run.scoring_problem = problem

    def _stop_simulator(self) -> None:
        if self.sim is not None:
            self.sim.stop()


def _in_config_order(names: list[str], vendors: Sequence[JSONMapping]) -> list[str]:
    """Vendor names in the config's order (the breaker trips them in whatever order their items end)."""
    order = {v.get("name"): i for i, v in enumerate(vendors)}
    return sorted(names, key=lambda name: order.get(name, len(order)))
