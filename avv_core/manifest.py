"""run.json: the run manifest, one dataclass used by the harness (writer, resume) and by scoring (reader).

Written atomically (a temp file renamed over the old one; on failure the temp file is removed), so a
reader sees the old or the new manifest, never half of one. Reading tolerates manifests written by
older versions: a missing field gets its default.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

from avv_core.errors import InputError
from avv_core.json_input import parse_json
from avv_core.json_types import JSONObject

RUN_JSON = "run.json"
RECORDS_CSV = "records.csv"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunManifest:
    run_id: str = ""
    mode: str = "verify"  # verify | stress
    config_path: str = ""  # absolute path of the vendor config
    config_identity: str = ""  # hash of (model, vendor, url) of every vendor: resume refuses another config
    vendors: list[JSONObject] = field(default_factory=list)  # the config, keys redacted
    samples: JSONObject = field(default_factory=dict)  # path, sha256, count, ids_sha256, skipped_lines
    options: JSONObject = field(default_factory=dict)  # every --avv-* option as used
    locust: JSONObject = field(default_factory=dict)  # version, role, workers
    simulator: JSONObject | None = None  # {"url": …} when {sim} vendors ran
    started_at: str = ""
    ended_at: str | None = None
    items_total: int = 0
    items_recorded: int = 0
    records_written: int = 0  # rows records.csv holds: earlier sessions' (resume) and this session's
    records_before_resume: int = 0  # of those, the rows records.csv already held when this session resumed it
    duplicates_dropped: int = 0  # late records of items handed out again and recorded since (a worker presumed lost)
    items_requeued: int = 0
    # records a master would not write: never handed to the sender, held by another worker, already recorded
    # by it, malformed, rows that do not answer the item, or from a refused worker (README: "Scale out")
    records_refused: int = 0
    records_refused_by_reason: dict[str, int] = field(default_factory=dict)
    workers_refused: dict[str, str] = field(default_factory=dict)  # "host:pid (node id)" → what differed
    items_failed_client: int = 0  # items whose attempt raised inside the client (error_kind client_error)
    tokens_used: int = 0
    budget: JSONObject = field(default_factory=lambda: {"max_total_tokens": None, "exhausted": False})
    stop_reason: str | None = None  # why the run ended early: budget, run_time, interrupted, disk, …
    completed: bool = False
    stress: JSONObject | None = None  # levels, step_s, slo, level_durations_s, stopped_after
    extra: JSONObject = field(default_factory=dict)  # later additions (adapters picked, lag, …)

    def to_dict(self) -> JSONObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: JSONObject) -> RunManifest:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def write(self, run_dir: str | os.PathLike[str]) -> None:
        """Replace ``run_dir/run.json`` atomically; leaves no temp file behind, also when it fails."""
        path = os.path.join(os.fspath(run_dir), RUN_JSON)
        tmp = path + ".tmp"
        data = (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def read_manifest(path: str | os.PathLike[str]) -> RunManifest:
    """Read a run.json (a file or the run folder holding it); InputError naming the file when unreadable."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, RUN_JSON)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return RunManifest.from_dict(data)
