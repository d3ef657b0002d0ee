"""Input layer: find records.csv / run.json, read and de-duplicate rows, load the request tools.

Nothing here computes a metric. Everything a user can get wrong (a missing file, a missing column, a
sample file that changed since the run) is raised as :class:`avv_core.errors.InputError` with a
message that names the file and the field.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_core.items import ItemKey
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.manifest import RunManifest, read_manifest
from avv_core.record_file import read_records_checked
from avv_core.records import STATUS_SUCCESS
from avv_core.samples import Gold, SampleSet, file_sha256, load_samples
from avv_scoring.probes import Probe, probes_of

log = logging.getLogger(__name__)

RECORDS_NAME = "records.csv"
RUN_JSON_NAME = "run.json"

#: Identity of a work item: the fields of :class:`avv_core.items.ItemKey`.
ITEM_KEY: tuple[str, ...] = ItemKey._fields
#: Columns without which a row cannot be scored.
REQUIRED_COLUMNS = ("model", "vendor", "sample_id", "status")
#: Record columns the metrics read: a file without one of them cannot be scored (older files that lack a
#: column added later, such as ``request_hash``, still can).
METRIC_INPUT_COLUMNS = ("error_kind", "attempts", "finish_reason", "tool_calls", "ttft_ms", "total_tokens", "tps",
                        "content", "reasoning_chars")

#: Helper columns added by :func:`load_records` (not part of the record schema).
SOURCE_COL = "_source"
FILE_ORDER_COL = "_file_index"
ROW_ORDER_COL = "_row_index"

ToolsBySample = Mapping[str, Sequence[JSONMapping]]
GoldBySample = Mapping[str, Gold]


@dataclass
class RunInput:
    """One input: a records.csv and, when found next to it, its run.json."""

    csv_path: str
    run_dir: str | None  # set when the user named a folder
    manifest: RunManifest | None = None
    run_json_path: str | None = None


@dataclass
class ToolSource:
    """Where the request tool definitions (and the samples' gold labels) came from."""

    tools_by_sample: dict[str, list[JSONObject]] | None
    sample_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    gold_by_sample: dict[str, Gold] = field(default_factory=dict)  # labelled samples and agent tasks only
    #: sample id → the sample set it is marked as (metadata ``_sample_set``, e.g. ``minimax``); marked samples only
    sample_sets: dict[str, str] = field(default_factory=dict)
    #: sample id → its conformance probe (a conformance run's probe file); probes only
    probes: dict[str, Probe] = field(default_factory=dict)


def resolve_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[RunInput]:
    """Turn the user's arguments (run folders or records.csv files) into :class:`RunInput` objects.

    A folder must contain ``records.csv``; its ``run.json`` is read when present. For a CSV file, a
    ``run.json`` in the same folder is read too.
    """
    inputs: list[RunInput] = []
    for raw in paths:
        path = os.fspath(raw)
        if os.path.isdir(path):
            csv_path = os.path.join(path, RECORDS_NAME)
            if not os.path.isfile(csv_path):
                raise InputError(f"{path}: run folder has no {RECORDS_NAME}")
            run_dir: str | None = path
        elif os.path.isfile(path):
            csv_path = path
            run_dir = None
        else:
            raise InputError(f"{path}: no such run folder or records file")
        json_path = os.path.join(os.path.dirname(os.path.abspath(csv_path)), RUN_JSON_NAME)
        manifest = read_manifest(json_path) if os.path.isfile(json_path) else None  # the one definition of run.json
        inputs.append(
            RunInput(
                csv_path=csv_path,
                run_dir=run_dir,
                manifest=manifest,
                run_json_path=json_path if manifest is not None else None,
            )
        )
    if not inputs:
        raise InputError("no input: name at least one run folder or records.csv")
    return inputs


def _check_columns(frame: pd.DataFrame, path: str) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (is this a records.csv?)")
    missing = [c for c in METRIC_INPUT_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}, which the metrics need; "
                         "a records.csv written by avv-locust has them")
    for col in ("model", "vendor", "sample_id"):
        empty = frame[col].isna()
        if empty.any():
            line = int(empty.to_numpy().nonzero()[0][0]) + 2  # header is line 1
            raise InputError(f"{path}:{line}: field {col!r} is empty")


def read_one(path: str, excluded: list[str] | None = None) -> pd.DataFrame:
    """Read one records.csv with the schema's dtypes and check the fields scoring relies on. Rows holding a
    number no record can hold are left out; each is named in ``excluded`` (else logged)."""
    try:
        frame, left_out = read_records_checked(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path}: cannot parse records ({exc})") from None
    if excluded is not None:
        excluded.extend(left_out)
    else:
        for problem in left_out:
            log.warning("%s", problem)
    _check_columns(frame, path)
    if "repeat" not in frame.columns:
        frame["repeat"] = pd.array([1] * len(frame), dtype="Int64")
    else:
        frame["repeat"] = frame["repeat"].fillna(1)
    return frame


def _in_input_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (its columns shared, not copied: scoring only adds columns) with the order columns, in file
    and row order, as :func:`dedupe_latest` returns it."""
    work = frame.copy(deep=False)
    if FILE_ORDER_COL not in work.columns:
        work[FILE_ORDER_COL] = 0
    if ROW_ORDER_COL not in work.columns:
        work[ROW_ORDER_COL] = range(len(work))
    order = pd.MultiIndex.from_arrays([work[FILE_ORDER_COL], work[ROW_ORDER_COL]])
    if not order.is_monotonic_increasing:
        work = work.sort_values([FILE_ORDER_COL, ROW_ORDER_COL], kind="stable")
    return work.reset_index(drop=True)


def dedupe_latest(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep one row per item (model, vendor, sample_id, repeat): the latest one.

    "Latest" = greatest ``started_at`` (ISO 8601, compared as UTC instants); rows with equal or
    unparseable ``started_at`` are ordered by input order (file order, then row order), the later
    one winning. A row without ``started_at`` sorts before every row that has one. Agent tasks (rows with a
    ``step``) keep every row of their latest trajectory (:func:`dedupe_with_steps`).
    """
    if frame.empty:
        return frame.copy()
    if "step" in frame.columns and frame["step"].notna().any():
        return dedupe_with_steps(frame, dedupe_latest)
    if not frame.duplicated(subset=list(ITEM_KEY)).any():
        return _in_input_order(frame)  # nothing to choose: no copy, no timestamp parsing
    work = frame.copy()
    if FILE_ORDER_COL not in work.columns:
        work[FILE_ORDER_COL] = 0
    if ROW_ORDER_COL not in work.columns:
        work[ROW_ORDER_COL] = range(len(work))
    if "started_at" in work.columns:
        started = pd.to_datetime(
            work["started_at"].astype("object"), utc=True, errors="coerce", format="ISO8601"
        )
    else:
        started = pd.Series(pd.NaT, index=work.index, dtype="datetime64[ns, UTC]")
    work["_started_ts"] = started
    work = work.sort_values(
        ["_started_ts", FILE_ORDER_COL, ROW_ORDER_COL], na_position="first", kind="stable"
    )
    work = work.drop_duplicates(subset=list(ITEM_KEY), keep="last")
    work = work.sort_values([FILE_ORDER_COL, ROW_ORDER_COL], kind="stable").drop(columns="_started_ts")
    return work.reset_index(drop=True)


# ------------------------------------------------------------------------------- agent tasks: rows with a step


#: Dtypes whose cells are numbers or missing: :func:`numeric` converts them without a Python object per cell.
_NUMERIC_DTYPES = frozenset(("int64", "float64", "Int64", "Float64"))


def numeric(series: pd.Series) -> pd.Series:
    """``pd.to_numeric(series.astype("object"), errors="coerce")``: each cell as a number, missing where it holds
    none (int64 when every cell is an int, else float64), same index and name. A column already typed as numbers
    (int64, float64, nullable Int64 / Float64) gives the same values directly: on the small tables scoring reads
    at the end of every run, boxing each cell as a Python object and parsing it back was most of the cost."""
    name = str(series.dtype)
    if name not in _NUMERIC_DTYPES or not len(series):  # (an empty column converts to int64)
        return pd.to_numeric(series.astype("object"), errors="coerce")
    if name in ("Int64", "Float64"):
        values = series.to_numpy(dtype="int64") if name == "Int64" and not series.hasnans \
            else series.to_numpy(dtype="float64", na_value=np.nan)
        return pd.Series(values, index=series.index, name=series.name)
    return series.copy()


def step_numbers(frame: pd.DataFrame) -> pd.Series:
    """The ``step`` column as floats (NaN = a single-request row); all NaN when the column is absent."""
    if "step" not in frame.columns:
        return pd.Series(float("nan"), index=frame.index, dtype=float)
    return numeric(frame["step"]).astype(float)


def dedupe_with_steps(frame: pd.DataFrame, dedupe: Callable[[pd.DataFrame], pd.DataFrame]) -> pd.DataFrame:
    """One trajectory per item: the rows of the latest one. A trajectory is a run of rows of one item in one file,
    in file order, from its step 1 (a single-request row is a trajectory of its own); "latest" is decided by
    ``dedupe`` (:func:`dedupe_latest`) on each trajectory's first row."""
    work = frame.copy()
    if FILE_ORDER_COL not in work.columns:
        work[FILE_ORDER_COL] = 0
    if ROW_ORDER_COL not in work.columns:
        work[ROW_ORDER_COL] = range(len(work))
    work = work.sort_values([FILE_ORDER_COL, ROW_ORDER_COL], kind="stable")
    step = step_numbers(work)
    item = pd.util.hash_pandas_object(work[list(ITEM_KEY)].astype(str), index=False)
    file = work[FILE_ORDER_COL]
    starts = (step.isna() | (step <= 1) | (item != item.shift()) | (file != file.shift())).to_numpy()
    instance = pd.Series(starts.cumsum(), index=work.index)
    firsts = work[starts].drop(columns="step").assign(_instance=instance[starts])
    winners = set(dedupe(firsts)["_instance"])
    return work[instance.isin(winners)].reset_index(drop=True)


def load_records(paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    """Read records from run folders and/or records.csv files and keep the latest row per item.

    Adds the helper columns ``_source`` (file), ``_file_index`` and ``_row_index`` (input order).
    """
    inputs = resolve_inputs(paths)
    return read_inputs(inputs)


def read_inputs(inputs: Sequence[RunInput], excluded: list[str] | None = None) -> pd.DataFrame:
    """Read every input's records.csv (in order) and keep the latest row per item; rows left out as unreadable
    are named in ``excluded`` (see :func:`read_one`)."""
    frames = []
    for index, item in enumerate(inputs):
        frame = read_one(item.csv_path, excluded)
        frame[SOURCE_COL] = item.csv_path
        frame[FILE_ORDER_COL] = index
        frame[ROW_ORDER_COL] = range(len(frame))
        frames.append(frame)
    frames = [f for f in frames if not f.empty] or frames[:1]
    merged = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return dedupe_latest(merged)


def tools_from_sample_set(sample_set: SampleSet) -> dict[str, list[JSONObject]]:
    """``sample_id → body["tools"]`` for every sample of a :class:`avv_core.samples.SampleSet`. Samples with equal
    tool lists share one list object (read-only): a sample file repeats its tool sets, parsed line by line into
    copies (~600 MB for 33 k samples at 1 M records), and the call annotation reads each distinct list once."""
    shared: dict[str, list[JSONObject]] = {}
    out: dict[str, list[JSONObject]] = {}
    for s in sample_set.samples:
        tools = list(s.body.get("tools") or [])
        out[s.sample_id] = shared.setdefault(repr(tools), tools)  # repr: equal text for equal JSON values
    return out


def gold_from_sample_set(sample_set) -> dict[str, Gold]:
    """``sample_id → Gold`` for the samples of a :class:`avv_core.samples.SampleSet` that carry labels or an
    agent task."""
    return {s.sample_id: s.gold for s in sample_set.samples if s.gold.known}


#: The sample metadata key that marks a sample as one of a published sample set (``"_sample_set": "minimax"``): a
#: bound tuned to that set (``sample_set`` in a thresholds file) is judged only when every scored sample has it.
SAMPLE_SET_KEY = "_sample_set"


def sample_sets_of(sample_set) -> dict[str, str]:
    """``sample_id → its _sample_set mark`` for the marked samples of a :class:`avv_core.samples.SampleSet`."""
    return {s.sample_id: s.metadata[SAMPLE_SET_KEY].strip() for s in sample_set.samples
            if isinstance(s.metadata.get(SAMPLE_SET_KEY), str) and s.metadata[SAMPLE_SET_KEY].strip()}


def _samples_info(run: RunInput) -> tuple[str | None, str | None]:
    info = run.manifest.samples if run.manifest is not None else None
    if not isinstance(info, dict):
        return None, None
    path = info.get("path")
    sha = info.get("sha256")
    return (path if isinstance(path, str) and path else None, sha if isinstance(sha, str) and sha else None)


def run_sample_set(run: RunInput, samples: str | os.PathLike[str] | None = None,
                   warnings: list[str] | None = None) -> SampleSet:
    """The sample file of one run: ``samples`` when given (a warning in ``warnings`` when its sha256 differs from
    the one recorded), else run.json's ``samples.path``, whose sha256 must equal ``samples.sha256``.
    Raises InputError when no sample file is known, it is gone, or it changed since the run."""
    warnings = warnings if warnings is not None else []
    path, sha = _samples_info(run)
    if samples is not None:
        sample_set = load_samples(os.fspath(samples), skip_bad_lines=True)
        if sha and sha != sample_set.sha256:
            warnings.append(f"{sample_set.path}: sha256 differs from the sample file recorded in {run.run_json_path}")
        return sample_set
    if path is None:
        where = run.run_json_path or f"{run.csv_path} (no {RUN_JSON_NAME} next to it)"
        raise InputError(f"{where}: no sample file recorded (field 'samples.path'); pass --samples FILE")
    if not os.path.isfile(path):
        raise InputError(f"{run.run_json_path}: samples.path {path} does not exist; pass --samples FILE")
    actual = file_sha256(path)
    if sha is None:
        warnings.append(f"{run.run_json_path}: no samples.sha256 recorded; {path} used unchecked")
    elif actual != sha:
        raise InputError(
            f"{path}: sha256 {actual[:12]}… differs from samples.sha256 {sha[:12]}… "
            f"in {run.run_json_path} (the sample file changed since the run); "
            "pass --samples FILE to score against it anyway"
        )
    return load_samples(path, skip_bad_lines=True)


def load_tools(inputs: Sequence[RunInput], samples: str | os.PathLike[str] | None = None) -> ToolSource:
    """Load the request tool definitions and the gold labels (``expected_tool_call``, ``expected_calls``,
    ``tool_names``), keyed by sample id.

    With ``samples`` that file is used for every run (a warning notes a run whose recorded sha256
    differs). Otherwise each run.json's ``samples.path`` is loaded and its sha256 must equal
    ``samples.sha256``. Raises InputError when no sample file is known or one changed since the run.
    """
    warnings: list[str] = []
    if samples is not None:
        path = os.fspath(samples)
        sample_set = load_samples(path, skip_bad_lines=True)
        for run in inputs:
            _, sha = _samples_info(run)
            if sha and sha != sample_set.sha256:
                warnings.append(
                    f"{path}: sha256 differs from the sample file recorded in {run.run_json_path}"
                )
        return ToolSource(tools_from_sample_set(sample_set), [path], warnings, gold_from_sample_set(sample_set),
                          sample_sets_of(sample_set), probes_of(sample_set.samples))

    tools: dict[str, list[JSONObject]] = {}
    gold: dict[str, Gold] = {}
    marks: dict[str, str] = {}
    probes: dict[str, Probe] = {}
    loaded: dict[str, str] = {}  # path -> sha256
    for run in inputs:
        recorded, _ = _samples_info(run)
        if recorded is not None and recorded in loaded:
            continue
        sample_set = run_sample_set(run, warnings=warnings)
        if loaded:
            warnings.append(f"runs use different sample files: {', '.join([*loaded, sample_set.path])}")
        loaded[sample_set.path] = sample_set.sha256
        tools.update(tools_from_sample_set(sample_set))
        gold.update(gold_from_sample_set(sample_set))
        marks.update(sample_sets_of(sample_set))
        probes.update(probes_of(sample_set.samples))
    return ToolSource(tools, list(loaded), warnings, gold, marks, probes)


#: Helper column holding :func:`is_success` once computed (added by the call annotation).
OK_COL = "_ok"
#: Helper column: the item succeeded for every vendor of its model (see ``score.comparable_items``).
COMPARABLE_COL = "_comparable"


def rows_where(frame: pd.DataFrame, mask: object) -> pd.DataFrame:
    """``frame[mask]``, without copying every column when the mask keeps every row (one model: the whole run):
    then a shallow copy, which copy-on-write keeps separate from ``frame``."""
    keep = np.asarray(mask, dtype=bool)
    return frame.copy(deep=False) if keep.all() else frame[keep]


def distinct_text(column: pd.Series) -> set[str]:
    """The distinct values of ``column`` as text (``set(column.astype(str))`` without walking every row in
    Python: a million-row column holds a few thousand sample ids)."""
    return set(column.astype(str).unique().tolist())


def is_success(frame: pd.DataFrame) -> pd.Series:
    """Boolean mask of successful rows: ``status == "success"``; anything else (or empty) is a failure.
    Read from the ``_ok`` helper column when the rows carry it (every metric asks, many times)."""
    if OK_COL in frame.columns:
        return frame[OK_COL]
    return (frame["status"].astype("object") == STATUS_SUCCESS).fillna(False).astype(bool)
