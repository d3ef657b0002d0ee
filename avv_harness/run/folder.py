"""The run folder: opening it (new or resumed), filling the manifest, scoring it at the end and the
closing line. Plain functions over explicit inputs; the controller calls them in its named steps.

With the web UI a process makes one run per START: :func:`check_out_folder` refuses bad input when the
process starts, and :func:`ui_run_options` gives the n-th run its own folder.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import locust

from avv_core.errors import InputError
from avv_core.items import ItemKey, VendorId
from avv_core.json_types import JSONObject
from avv_core.manifest import RECORDS_CSV, RunManifest, utc_now
from avv_core.record_file import RecordWriteError, RecordWriter, upgrade_columns
from avv_core.samples import SampleSet
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import Redactor
from avv_harness.run.breaker import CircuitBreaker
from avv_harness.run.budget import Budget
from avv_harness.run.ledger import Ledger
from avv_harness.run.options import DecisionSettings, RunOptions
from avv_harness.run.resume import ResumePoint, check_resumable, resume_point, sample_ids_hash
from avv_harness.run.role import Role
from avv_harness.run.settle_policy import hand_out_order, new_seed
from avv_harness.run.state import RunState
from avv_harness.run.stress_policy import StressPolicy
from avv_harness.wire.execute import ExecContext, RetryPolicy

if TYPE_CHECKING:
    from avv_scoring.score import ScoreResult

log = logging.getLogger("avv")


@dataclass
class OpenedRun:
    run_id: str
    run_dir: Path
    writer: RecordWriter
    before: ResumePoint = field(default_factory=ResumePoint)  # what earlier sessions recorded (resume)
    started_at: str = ""  # the first start of a resumed run
    previous: RunManifest | None = None  # a resumed run's run.json


def new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()


def open_run_folder(options: RunOptions, samples: SampleSet, config_identity: str) -> OpenedRun:
    """Create the run folder (or check and reopen the one to resume) and open records.csv for appending.
    InputError when the folder cannot be written or does not belong to this run."""
    before = ResumePoint()
    started_at = ""
    previous = None
    if options.resume:
        run_dir = Path(options.resume)
        previous = check_resumable(run_dir, config_identity, options.mode, samples)
        if (run_dir / RECORDS_CSV).is_file():
            upgrade_columns(run_dir / RECORDS_CSV)  # appended rows must have the header's width
        before = resume_point(run_dir, samples)
        started_at = previous.started_at
    else:
        run_dir = Path(options.out) / (options.run_id or new_run_id())
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        writer = RecordWriter(run_dir / RECORDS_CSV)
    except (OSError, RecordWriteError) as exc:
        raise InputError(f"{run_dir}: cannot write the run folder ({exc.strerror or exc})") from None
    return OpenedRun(run_dir.name, run_dir, writer, before, started_at, previous)


def check_out_folder(options: RunOptions, samples: SampleSet, config_identity: str) -> None:
    """What :func:`open_run_folder` would refuse, checked without opening a run: the folder to resume belongs
    to this run, and the output folder can be written. InputError otherwise."""
    if options.resume:
        check_resumable(Path(options.resume), config_identity, options.mode, samples)
        return
    out = Path(options.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise InputError(f"{out}: cannot write the run folder ({exc.strerror or exc})") from None


def ui_run_options(options: RunOptions, runs_before: int) -> RunOptions:
    """The options of a process's next run in the web UI: the first run resumes ``--avv-resume`` (when given)
    and is named ``--avv-run-id``; later runs are new folders, a fixed run id getting ``-2``, ``-3`` …"""
    if runs_before == 0:
        return options
    run_id = f"{options.run_id}-{runs_before + 1}" if options.run_id else ""
    return dataclasses.replace(options, resume="", run_id=run_id)


@dataclass(frozen=True)
class RunSetup:
    """What every run of a process is made from, fixed for the process (held by
    :class:`~avv_harness.run.lifecycle.RunLifecycle`): the parsed options (a web-UI run gets its own copy,
    :func:`ui_run_options`), the vendors (User class name → vendor, keys resolved), the process's role, the
    config's identity, this process's worker id and the redactor of the config's secrets."""

    options: RunOptions
    vendors: dict[str, Vendor]
    role: Role
    config_identity: str
    worker_id: str
    redact: Redactor


def retry_policy(options: RunOptions) -> RetryPolicy:
    """How items are retried; none in stress mode (each request is one observation at its level)."""
    return RetryPolicy(retries=0 if options.is_stress else options.retries, backoff_base_s=options.backoff_s,
                       retry_after_cap_s=options.retry_after_cap_s)


def exec_context(options: RunOptions, run_id: str, worker_id: str) -> ExecContext:
    """How this process runs the items of run ``run_id`` (sent to the workers): retries, timeouts, overrides."""
    return ExecContext(run_id=run_id, worker=worker_id, policy=retry_policy(options), timeout_s=options.timeout_s,
                       max_request_s=options.max_request_s, overrides=options.overrides,
                       max_event_bytes=options.max_event_bytes)


def new_run(options: RunOptions, samples: SampleSet, setup: RunSetup,
            not_sent: Mapping[VendorId, Mapping[str, str]] | None = None) -> RunState:
    """Open the run folder (:func:`open_run_folder`) and build the run's ledger (stress mode: round robin and
    the ladder's policy) and execution context; ``not_sent``: per vendor the samples it is not sent (a conformance
    run's probes its wire format cannot carry), left out of its items. InputError as :func:`open_run_folder`."""
    opened = open_run_folder(options, samples, setup.config_identity)
    vendor_ids = [VendorId(v.model, v.name) for v in setup.vendors.values()]
    sample_ids = [s.sample_id for s in samples.samples]
    settle_seed = None
    if options.settle is not None:  # a seeded random hand-out order; a resumed run keeps its seed
        earlier = (opened.previous.extra.get("settle") or {}) if opened.previous is not None else {}
        settle_seed = earlier.get("seed") or options.settle.seed or new_seed()
        sample_ids = hand_out_order(sample_ids, settle_seed)
    stress = None
    if options.stress is not None:  # stress mode
        stress = StressPolicy(options.stress, tuple(setup.vendors))
        ledger = Ledger.round_robin(vendor_ids, sample_ids)
    else:
        left_out = {ItemKey.of(v, sid, rep) for v, sids in (not_sent or {}).items() for sid in sids
                    for rep in range(1, options.repeats + 1)}
        ledger = Ledger.for_items(vendor_ids, sample_ids, options.repeats, set(opened.before.done) | left_out)
    exec_ctx = exec_context(options, opened.run_id, setup.worker_id)
    run = RunState(opened.run_id, opened.run_dir, opened.writer, ledger, exec_ctx, stress=stress,
                   vendor_totals={v: len(q) for v, q in ledger.pending.items()},
                   items_done_before=0 if stress else len(opened.before.done),
                   budget=Budget(options.max_total_tokens, options.max_cost),
                   breaker=CircuitBreaker(options.breaker_items))
    run.manifest.started_at = opened.started_at
    if settle_seed is not None:
        run.manifest.extra["settle"] = {"seed": settle_seed}
        run.settle_before = (opened.previous.extra.get("settle") or {}) if opened.previous is not None else {}
    # run.json counts what records.csv holds: the rows of earlier sessions, then this session's
    run.manifest.records_written = run.manifest.records_before_resume = opened.before.rows
    return run


def fill_manifest(run: RunState, setup: RunSetup, options: RunOptions, samples: SampleSet, *, sim_url: str | None,
                  sim_truth_log: str | None = None) -> None:
    """The parts of run.json (``run.manifest``) known when the run starts: the run's ``options`` (a web-UI run's
    own, :func:`ui_run_options`) and ``samples``, the process's ``setup``, where the simulator is (``sim_url``) and
    the web UI's simulator's truth log (``sim_truth_log``)."""
    m = run.manifest
    redact = setup.redact
    vendors = [v.redacted() for v in setup.vendors.values()]
    m.run_id, m.mode = run.run_id, options.mode
    m.config_path, m.config_identity = os.path.abspath(options.config), setup.config_identity
    # a ${VAR} secret may sit in a URL, header or extra_body; the names stay (see Redactor.record)
    m.vendors = [{**redact.value(v), **{k: v[k] for k in ("model", "name", "model_id") if k in v}} for v in vendors]
    picked = {f"{v['model']}/{v['name']}": {"adapter": v.get("adapter"), "why": v.get("adapter_source")}
              for v in vendors if str(v.get("adapter_source", "")).startswith("auto")}
    if picked:  # adapter: auto — what it picked and why (each vendor's entry says so too)
        m.extra["adapters_auto"] = picked
    m.samples = {"path": os.path.abspath(samples.path), "sha256": samples.sha256, "count": len(samples.samples),
                 "ids_sha256": sample_ids_hash(samples),
                 "skipped_lines": [[line, msg] for line, msg in samples.skipped_lines]}
    m.options = {k: redact.value(v) for k, v in options.raw.items()}
    m.locust = {"version": locust.__version__, "role": setup.role.name, "workers": setup.role.expected_workers()}
    m.simulator = {"url": sim_url} if sim_url else None
    if m.simulator is not None and sim_truth_log:  # the web UI's simulator serves every run of the process
        m.simulator["truth_log"] = os.path.abspath(sim_truth_log)
    m.started_at = m.started_at or utc_now()  # a resumed run keeps its first start
    m.items_total = run.items_done_before + run.ledger.total  # a resumed run's items done before, too
    m.budget = {"max_total_tokens": options.max_total_tokens or None, "exhausted": False}
    if options.max_cost:
        m.budget["max_cost"] = options.max_cost


def score_run(run_dir: Path, *, no_score: bool, stress: bool, html: bool = True,
              decision: DecisionSettings | None = None) -> tuple[ScoreResult | None, str | None]:
    """Score the run folder as ``avv-score`` would with the run's ``--avv-thresholds`` / ``--avv-verdict`` /
    ``--avv-confidence`` (``decision``; default: the avv preset at 95 %) and print the tables (stress runs with
    --avv-no-score: the stress outputs only). The decision block and where report.md and report.html are is the
    caller's to print, last (:func:`avv_harness.run.console.decision_lines`). Returns (the ScoreResult or None, the
    problem: why the scores are missing or leave rows out, else None). Never raises an Exception: the records are
    safe on disk and ``avv-score RUN`` can score them later (a stop signal, a KeyboardInterrupt, passes)."""
    if no_score and not stress:
        return None, None
    try:
        import avv_scoring

        print(f"avv-locust: scoring {run_dir} (Ctrl-C or SIGTERM stops the scoring; the records are complete)",
              flush=True)
        if no_score:  # stress.csv, capacity.csv, plots and the report's stress section
            result = avv_scoring.stress_only(run_dir)
        else:
            settings = decision if decision is not None else DecisionSettings()
            result = avv_scoring.score(settings.score_request(run_dir, html))
        # the client-bound advice is printed once, by the caller, after the tables (even unscored); the decision
        # block and the paths of report.md and report.html come last (avv_harness.run.console)
        print("\n" + avv_scoring.render_tables(result, client_advice=False, decision=False), flush=True)
        left_out = result.excluded_rows
        return result, (f"{len(left_out)} row(s) left out of the scores (named in report.md)" if left_out else None)
    except Exception as exc:
        log.error("scoring failed (%s); re-run: avv-score %s", exc, run_dir)
        return None, f"scoring failed ({type(exc).__name__}: {str(exc)[:200]})"


def decision_status(result: ScoreResult | None, decision: DecisionSettings) -> int:
    """The exit status the scored run's decision asks for (:func:`avv_scoring.decision_exit_status`: 6 a vendor is
    a broken setup, 7 / 8 with --avv-strict); 0 when the run was not scored."""
    if result is None or not getattr(result, "scored", False):
        return 0
    import avv_scoring

    return int(avv_scoring.decision_exit_status(result, decision.strict, decision.allow_inconclusive))


def append_to_history(history: str, run_dir: Path, manifest: RunManifest, result: ScoreResult) -> str | None:
    """Add the scored run to the history database ``history`` (``--avv-history``; a run id already there adds
    nothing). Returns None, or the problem (the closing line names it, exit status 4: the run is complete but the
    history lacks it). Never raises an Exception, like :func:`score_run`."""
    try:
        from avv_scoring.history import add_result, open_history

        # waits for another writer (db.BUSY_TIMEOUT_S); a SQLite error is an InputError saying what is wrong
        with open_history(history) as conn:
            added = add_result(conn, result, manifest, str(run_dir))
        print(f"history: run {added.run_id} {'added to' if added.added else 'was already in'} {history}", flush=True)
        return None
    except Exception as exc:
        log.error("cannot add the run to the history %s (%s); add it with: avv-score history add %s --db %s",
                  history, exc, run_dir, history)
        return f"not added to the history {history} ({type(exc).__name__}: {str(exc)[:200]})"


def vendor_down_line(down: JSONObject, run_dir: Path) -> str:
    """A vendor the circuit breaker stopped (run.json ``vendor_down``), as one line."""
    example = f' ("{str(down.get("example"))[:200]}")' if down.get("example") else ""
    return (f"avv-locust: {down.get('vendor')} ({down.get('model')}) was stopped by the circuit breaker: its last "
            f"{down.get('after_items')} items ended with {down.get('what')}{example}; {down.get('skipped')} items "
            f"skipped (vendor_down) — check {down.get('check')}; --avv-resume {run_dir} sends them once it is fixed")


def summary_line(run: RunState, completed: bool, vendors_down: list[str] | None = None) -> str:
    """The closing line of ``run``: how many records records.csv holds (after a resume: also how many this session
    wrote), where, whether (and how) to resume, whether the scores are whole (``completed``: whether every item was
    recorded, taken before the run was closed), and the vendors the circuit breaker stopped (``vendors_down``)."""
    manifest, run_dir, stop_reason, scoring_problem = run.manifest, run.run_dir, run.stop_reason, run.scoring_problem
    budget_text = run.budget.caps_text()
    down = f"; stopped by the circuit breaker: {', '.join(vendors_down)}" if vendors_down else ""
    if completed and scoring_problem:
        state = f"run complete{down}, but {scoring_problem}: score it with avv-score {run_dir}"
    elif completed:
        state = f"run complete{down}"
    elif stop_reason == "budget":
        state = f"stopped by the budget ({budget_text})" if budget_text else \
            f"stopped by the token budget ({manifest.tokens_used} ≥ {run.budget.max_tokens} tokens)"
    elif stop_reason == "disk":
        state = ("STOPPED: records could not be written (disk full or folder not writable); "
                 f"free space, then resume with --avv-resume {run_dir}")
    elif stop_reason == "store_failed":
        state = ("STOPPED: an item's records could not be stored (the error above says why); fix it, then resume "
                 f"with --avv-resume {run_dir}")
    else:
        why = {"run_time": "--run-time reached", "interrupted": "interrupted"}.get(stop_reason or "", "stopped")
        state = f"run INCOMPLETE ({why}): resume with --avv-resume {run_dir}"
    records = f"{manifest.records_written} records"
    if manifest.records_before_resume:
        records += f" ({manifest.records_written - manifest.records_before_resume} this session)"
    return f"\navv-locust: {records} in {run_dir / RECORDS_CSV} ({state})"
