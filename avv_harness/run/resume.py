"""Resume: which items of an earlier run folder are done, and whether that folder belongs to this run.

A run folder may only be resumed with the same config (models, vendors, model ids, URLs), the same mode
and the same set of sample ids; anything else is refused (exit status 2) rather than mixing two runs
in one records.csv. Within that, an item counts as done when its latest row succeeded *and* was made
from the sample body the file holds now (``request_hash``) with the language check it asks for now
(``expected_language``): an edited sample is run again.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from avv_core.errors import InputError
from avv_core.items import ItemKey
from avv_core.manifest import RECORDS_CSV, RUN_JSON, RunManifest, read_manifest
from avv_core.record_file import iter_csv_rows
from avv_core.records import STATUS_SUCCESS
from avv_core.samples import SampleSet


def sample_ids_hash(samples: SampleSet) -> str:
    return hashlib.sha256("\n".join(s.sample_id for s in samples.samples).encode("utf-8")).hexdigest()


def check_resumable(run_dir: Path, config_identity: str, mode: str, samples: SampleSet) -> RunManifest:
    """The run folder's manifest, after checking that it belongs to this config, mode and sample set."""
    if not (run_dir / RUN_JSON).is_file():
        raise InputError(f"{run_dir}: --avv-resume needs a run folder with {RUN_JSON}")
    previous = read_manifest(run_dir)
    problems = []
    if previous.config_identity and previous.config_identity != config_identity:
        before = ", ".join(f"{v.get('model')}/{v.get('name')}" for v in previous.vendors)
        problems.append(f"the vendor config differs from the one the run was made with (it had: {before}; "
                        f"config {previous.config_path})")
    if previous.mode != mode:
        problems.append(f"the run was made in {previous.mode} mode, not {mode}")
    ids_before = (previous.samples or {}).get("ids_sha256")
    if ids_before and ids_before != sample_ids_hash(samples):
        problems.append(f"the sample file holds other sample ids than the run's "
                        f"({(previous.samples or {}).get('path')}, {(previous.samples or {}).get('count')} samples)")
    if problems:
        raise InputError(f"{run_dir}: cannot resume: " + "; ".join(problems)
                         + ". Start a new run, or resume with the same --avv-config, --avv-samples and mode.")
    return previous


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run folder stands: what not to run again, and what records.csv already holds."""

    done: frozenset[ItemKey] = frozenset()  # items whose latest row is a success of the current sample
    rows: int = 0  # rows records.csv holds, written by earlier sessions (after a torn last row is cut)


def resume_point(run_dir: Path, samples: SampleSet) -> ResumePoint:
    """Items whose latest row succeeded with the sample body (and language check) the file holds now, and the
    file's row count. For an agent task the latest row is the last step of its latest trajectory: a trajectory
    that ended with a failed step is run again from step 1 (scoring then keeps that newer trajectory whole)."""
    path = run_dir / RECORDS_CSV
    if not path.is_file() or os.path.getsize(path) == 0:
        return ResumePoint()
    current = {s.sample_id: (s.request_hash, s.language_check) for s in samples.samples}
    latest: dict[ItemKey, tuple[str, str | None, str | None]] = {}
    rows = 0
    for row in iter_csv_rows(path):
        rows += 1
        latest[ItemKey.from_record(row)] = (row.get("status") or "", row.get("request_hash"),
                                            row.get("expected_language"))
    done = set()
    for key, (status, digest, language) in latest.items():
        digest_now, language_now = current.get(key.sample_id, (None, None))
        if status == STATUS_SUCCESS and (digest is None or digest == digest_now) and language == language_now:
            done.add(key)
    return ResumePoint(frozenset(done), rows)


def done_items(run_dir: Path, samples: SampleSet) -> set[ItemKey]:
    """The items of :func:`resume_point` that are done."""
    return set(resume_point(run_dir, samples).done)
