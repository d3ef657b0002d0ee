"""The run folder: opening it (new or resumed), filling the manifest, scoring it at the end and the
closing line. Plain functions over explicit inputs; the controller calls them in its named steps.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import locust

from .errors import InputError
from .items import ItemKey
from .manifest import RECORDS_CSV, RunManifest, utc_now
from .options import RunOptions
from .records import RecordWriteError, RecordWriter, upgrade_columns
from .resume import check_resumable, done_items, sample_ids_hash
from .samples import SampleSet

log = logging.getLogger("avv")


@dataclass
class OpenedRun:
    run_id: str
    run_dir: Path
    writer: RecordWriter
    skip: set[ItemKey] = field(default_factory=set)  # items already done (resume)
    started_at: str = ""  # the first start of a resumed run


def new_run_id() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()


def open_run_folder(options: RunOptions, samples: SampleSet, config_identity: str) -> OpenedRun:
    """Create the run folder (or check and reopen the one to resume) and open records.csv for appending.
    InputError when the folder cannot be written or does not belong to this run."""
    skip: set[ItemKey] = set()
    started_at = ""
    if options.resume:
        run_dir = Path(options.resume)
        previous = check_resumable(run_dir, config_identity, options.mode, samples)
        if (run_dir / RECORDS_CSV).is_file():
            upgrade_columns(run_dir / RECORDS_CSV)  # appended rows must have the header's width
        skip = done_items(run_dir, samples)
        started_at = previous.started_at
    else:
        run_dir = Path(options.out) / (options.run_id or new_run_id())
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        writer = RecordWriter(run_dir / RECORDS_CSV)
    except (OSError, RecordWriteError) as exc:
        raise InputError(f"{run_dir}: cannot write the run folder ({exc.strerror or exc})") from None
    return OpenedRun(run_dir.name, run_dir, writer, skip, started_at)


def fill_manifest(manifest: RunManifest, *, run: OpenedRun, options: RunOptions, samples: SampleSet,
                  config_identity: str, vendors: list[dict[str, Any]], role: str, workers: int | None,
                  sim_url: str | None, items_total: int, redact: Any) -> None:
    """The parts of run.json known when the run starts."""
    m = manifest
    m.run_id, m.mode = run.run_id, options.mode
    m.config_path, m.config_identity = os.path.abspath(options.config), config_identity
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
    m.locust = {"version": locust.__version__, "role": role, "workers": workers}
    m.simulator = {"url": sim_url} if sim_url else None
    m.started_at = run.started_at or utc_now()
    m.items_total = items_total
    m.budget = {"max_total_tokens": options.max_total_tokens or None, "exhausted": False}


def score_run(run_dir: Path, *, no_score: bool, stress: bool) -> None:
    """Score the run folder and print the tables (stress runs with --avv-no-score: the stress outputs only).
    Never raises: the records are safe on disk and ``avv-score RUN`` can score them later."""
    if no_score and not stress:
        return
    try:
        import avv_scoring

        if no_score:  # stress.csv, capacity.csv, plots and the report's stress section
            result = avv_scoring.stress_only(run_dir)
        else:
            result = avv_scoring.score_paths([run_dir], out_dir=run_dir)
        print("\n" + avv_scoring.render_tables(result), flush=True)
        print(f"scores: {run_dir / 'report.md'}", flush=True)
    except Exception as exc:
        log.error("scoring failed (%s); re-run: avv-score %s", exc, run_dir)


def summary_line(manifest: RunManifest, run_dir: Path, completed: bool, stop_reason: str | None,
                 max_total_tokens: int) -> str:
    """The closing line: how many records, where, and whether (and how) to resume."""
    if completed:
        state = "run complete"
    elif stop_reason == "budget":
        state = f"stopped by the token budget ({manifest.tokens_used} ≥ {max_total_tokens} tokens)"
    elif stop_reason == "disk":
        state = ("STOPPED: records could not be written (disk full or folder not writable); "
                 f"free space, then resume with --avv-resume {run_dir}")
    else:
        why = {"run_time": "--run-time reached", "interrupted": "interrupted"}.get(stop_reason or "", "stopped")
        state = f"run INCOMPLETE ({why}): resume with --avv-resume {run_dir}"
    return f"\navv-locust: {manifest.records_written} records in {run_dir / RECORDS_CSV} ({state})"
