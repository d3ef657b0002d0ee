"""Stress-mode scoring (scoring layer): per vendor × level table, capacity per vendor, their CSV files and plots.

Input is a run folder: ``records.csv`` (each request with the ``level`` it *started* in) and ``run.json``,
whose ``"stress"`` object holds the settings the harness ran with::

    "stress": {"levels": [1, 2, 4], "step_s": 3.0, "slo_ttft_p95_ms": 350.0, "slo_error_rate": 0.01,
               "level_durations_s": {"1": 3.02, "2": 2.98}, "stopped_after": {"<vendor>": 8}}

``level_durations_s`` = measured seconds each level was held (key: the level as a string; a level missing
there lasted ``step_s``); ``stopped_after`` = vendor → the last level it was escalated to. Unknown keys are
an error. A run.json written before the ``"stress"`` object existed falls back to its ``options``
(``avv_stress_levels``, ``avv_stress_step_s``, ``avv_slo_ttft_p95_ms``, ``avv_slo_error_rate``), with a note.

Formulas (per vendor and level, over the records that started in the level):

- ``requests`` = records; ``success_rate`` = successes / requests;
- ``rate_429`` = records with error_kind http_429 / requests; ``rate_<kind>`` likewise for every other kind;
- ``ttft_p50_ms``/``ttft_p95_ms``/``ttft_p99_ms`` and ``latency_p50_ms``/``latency_p95_ms`` over successes
  (:func:`avv_core.measures.percentile`, linear interpolation);
- ``tokens_per_s`` = Σ completion_tokens of successes / the level's **measured** duration (aggregate output);
- ``tps_p50`` = median per-request TPS over successes;
- ``meets_slo`` = :func:`avv_core.measures.meets_slo` over (success, ttft_ms) of the level's records: the
  same rule the harness applies at each level end (error share ≤ slo_error_rate and TTFT p95 of successes
  ≤ slo_ttft_p95_ms; a level without a successful TTFT does not meet it).

Per vendor: ``capacity`` = the highest level that meets the SLO; ``first_429_level`` = the lowest level with
rate_429 > 1 %; ``peak_tokens_per_s`` = max tokens_per_s; ``stopped_after_level`` from run.json.

:func:`level_table`, :func:`capacity_table` and :func:`settings_from_run_json` are pure; :func:`stress_tables` reads
a run folder. How every output shows the two tables is declared once in the report's stress section
(:mod:`avv_scoring.report.sections.stress`); :func:`avv_scoring.report.outputs.write_stress_files` writes the files.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.manifest import read_manifest
from avv_core.measures import meets_slo, percentile
from avv_core.records import ERROR_KINDS
from avv_scoring.load import RECORDS_NAME, RUN_JSON_NAME, is_success, read_one

STRESS_MODE = "stress"
STRESS_CSV = "stress.csv"
CAPACITY_CSV = "capacity.csv"
TTFT_PLOT = "stress_ttft_p95.png"
TOKENS_PLOT = "stress_tokens_per_s.png"
#: first_429_level = the lowest level whose rate_429 exceeds this share.
RATE_429_LIMIT = 0.01

STRESS_COLUMNS: list[str] = [
    "vendor", "level", "requests", "success_rate", "rate_429", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms",
    "latency_p50_ms", "latency_p95_ms", "tokens_per_s", "tps_p50",
    *[f"rate_{k}" for k in ERROR_KINDS if k != "http_429"], "meets_slo",
]
CAPACITY_COLUMNS: list[str] = ["vendor", "capacity", "first_429_level", "peak_tokens_per_s", "stopped_after_level"]

#: Keys of run.json's "stress" object (all others are rejected).
STRESS_KEYS = ("levels", "step_s", "slo_ttft_p95_ms", "slo_error_rate", "level_durations_s", "stopped_after")
_REQUIRED_KEYS = ("levels", "step_s", "slo_ttft_p95_ms", "slo_error_rate")


@dataclass(frozen=True)
class StressSettings:
    """What the harness ran with (run.json ``"stress"``)."""

    levels: tuple[int, ...]  # the ladder (users per vendor), increasing
    step_s: float  # nominal seconds per level
    slo_ttft_p95_ms: float  # SLO: TTFT p95 of successes at most this
    slo_error_rate: float  # SLO: share of failed requests at most this
    level_durations_s: Mapping[int, float] = field(default_factory=dict)  # measured seconds per level
    stopped_after: Mapping[str, int] = field(default_factory=dict)  # vendor → last level it was escalated to

    def duration_s(self, level: int) -> float:
        """Measured duration of ``level``; ``step_s`` when it was not measured."""
        return float(self.level_durations_s.get(int(level), self.step_s))


@dataclass(frozen=True, eq=False)
class StressResult:
    """Stress tables of one run folder."""

    settings: StressSettings
    levels: pd.DataFrame  # STRESS_COLUMNS, one row per (vendor, level)
    capacity: pd.DataFrame  # CAPACITY_COLUMNS, one row per vendor
    source: str = ""  # the run folder
    notes: tuple[str, ...] = ()  # what the reader must know (e.g. settings taken from options)


# ------------------------------------------------------------------------------------------------ settings


def _number(value: object, where: str, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InputError(f"{where}: expected a number, got {value!r}")
    if positive and value <= 0:
        raise InputError(f"{where}: must be > 0, got {value!r}")
    return float(value)


def _level(value: object, where: str) -> int:
    level: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        level = value
    elif isinstance(value, str) and value.strip().isdigit():
        level = int(value)
    if level is None or level < 1:
        raise InputError(f"{where}: a level is a positive integer, got {value!r}")
    return level


def _levels(value: object, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list of levels, got {value!r}")
    levels = tuple(_level(v, where) for v in value)
    if list(levels) != sorted(set(levels)):
        raise InputError(f"{where}: levels must be increasing, got {value!r}")
    return levels


def _stress_block(block: object, where: str) -> StressSettings:
    if not isinstance(block, dict):
        raise InputError(f"{where}: expected an object, got {type(block).__name__}")
    unknown = sorted(set(block) - set(STRESS_KEYS))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(STRESS_KEYS)})")
    missing = [k for k in _REQUIRED_KEYS if k not in block]
    if missing:
        raise InputError(f"{where}: missing key(s) {', '.join(missing)}")
    error_rate = _number(block["slo_error_rate"], f"{where}.slo_error_rate", positive=False)
    if not 0 <= error_rate <= 1:
        raise InputError(f"{where}.slo_error_rate: must be between 0 and 1, got {error_rate!r}")
    durations = block.get("level_durations_s") or {}
    stopped = block.get("stopped_after") or {}
    for key, value in (("level_durations_s", durations), ("stopped_after", stopped)):
        if not isinstance(value, dict):
            raise InputError(f"{where}.{key}: expected an object, got {type(value).__name__}")
    return StressSettings(
        levels=_levels(block["levels"], f"{where}.levels"),
        step_s=_number(block["step_s"], f"{where}.step_s"),
        slo_ttft_p95_ms=_number(block["slo_ttft_p95_ms"], f"{where}.slo_ttft_p95_ms"),
        slo_error_rate=error_rate,
        level_durations_s={
            _level(k, f"{where}.level_durations_s"): _number(v, f"{where}.level_durations_s.{k}")
            for k, v in durations.items()
        },
        stopped_after={str(k): _level(v, f"{where}.stopped_after.{k}") for k, v in stopped.items()},
    )


def _from_options(options: object, where: str) -> StressSettings:
    names = ("avv_stress_step_s", "avv_slo_ttft_p95_ms", "avv_slo_error_rate")
    if not isinstance(options, dict) or any(n not in options for n in names):
        raise InputError(f"{where}: mode is 'stress' but there is no \"stress\" object")
    text = str(options.get("avv_stress_levels") or "")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return StressSettings(
        levels=tuple(_level(p, f"{where}: options.avv_stress_levels") for p in parts),
        step_s=_number(options["avv_stress_step_s"], f"{where}: options.avv_stress_step_s"),
        slo_ttft_p95_ms=_number(options["avv_slo_ttft_p95_ms"], f"{where}: options.avv_slo_ttft_p95_ms"),
        slo_error_rate=_number(options["avv_slo_error_rate"], f"{where}: options.avv_slo_error_rate", False),
    )


def settings_from_run_json(run: JSONMapping, where: str = RUN_JSON_NAME) -> tuple[StressSettings, list[str]]:
    """The stress settings of a run.json (see the module docstring) and notes for the reader.

    Raises :class:`~avv_core.errors.InputError` naming ``where`` and the field when the object is malformed.
    """
    if "stress" in run and run["stress"] is not None:
        return _stress_block(run["stress"], f"{where}: stress"), []
    settings = _from_options(run.get("options"), where)
    return settings, [
        f"{where} has no \"stress\" object (written by an older harness): settings taken from its options; "
        "level durations are the nominal step and stopped_after_level is unknown"
    ]


# -------------------------------------------------------------------------------------------------- tables


def _numbers(series: pd.Series) -> np.ndarray:
    """Float array, missing values as NaN."""
    return pd.to_numeric(series.astype("object"), errors="coerce").to_numpy(dtype=float)


def level_table(records: pd.DataFrame, settings: StressSettings) -> pd.DataFrame:
    """One row per (vendor, level) with the formulas in the module docstring (pure).

    ``records`` needs ``vendor, level, status, error_kind, ttft_ms, latency_ms, completion_tokens, tps``;
    rows without a level (verify-mode records) are ignored.
    """
    rows: list[JSONObject] = []
    level = pd.to_numeric(records["level"].astype("object"), errors="coerce")
    staged = records[level.notna()].assign(_level=level[level.notna()].astype(int))
    for (vendor, lvl), group in staged.groupby([staged["vendor"].astype(str), "_level"], sort=True):
        ok = is_success(group).to_numpy()
        n = len(group)
        kinds = group["error_kind"].astype("object").fillna("")
        ttft = _numbers(group["ttft_ms"])
        latency = _numbers(group["latency_ms"])
        tokens = _numbers(group["completion_tokens"])[ok]
        outcomes = [(bool(s), float(t) if s and not math.isnan(t) else None) for s, t in zip(ok, ttft, strict=True)]
        row: JSONObject = {
            "vendor": vendor,
            "level": int(lvl),
            "requests": n,
            "success_rate": float(ok.sum()) / n,
            "rate_429": float((kinds == "http_429").mean()),
            "ttft_p50_ms": percentile(ttft[ok], 50),
            "ttft_p95_ms": percentile(ttft[ok], 95),
            "ttft_p99_ms": percentile(ttft[ok], 99),
            "latency_p50_ms": percentile(latency[ok], 50),
            "latency_p95_ms": percentile(latency[ok], 95),
            "tokens_per_s": float(np.nansum(tokens)) / settings.duration_s(int(lvl)),
            "tps_p50": percentile(_numbers(group["tps"])[ok], 50),
        }
        for kind in ERROR_KINDS:
            if kind != "http_429":
                row[f"rate_{kind}"] = float((kinds == kind).mean())
        row["meets_slo"] = meets_slo(outcomes, settings.slo_ttft_p95_ms, settings.slo_error_rate)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=STRESS_COLUMNS)
    frame["meets_slo"] = frame["meets_slo"].astype(bool)
    return frame


def capacity_table(levels: pd.DataFrame, stopped_after: Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per vendor: capacity, first_429_level, peak_tokens_per_s, stopped_after_level (pure)."""
    rows = []
    for vendor, group in levels.groupby("vendor", sort=True):
        meeting = group[group["meets_slo"].astype(bool)]
        over_429 = group[group["rate_429"] > RATE_429_LIMIT]
        rows.append({
            "vendor": vendor,
            "capacity": int(meeting["level"].max()) if len(meeting) else None,
            "first_429_level": int(over_429["level"].min()) if len(over_429) else None,
            "peak_tokens_per_s": float(group["tokens_per_s"].max()),
            "stopped_after_level": (stopped_after or {}).get(str(vendor)),
        })
    frame = pd.DataFrame(rows, columns=CAPACITY_COLUMNS)
    for col in ("capacity", "first_429_level", "stopped_after_level"):
        frame[col] = frame[col].astype("Int64")
    return frame


def stress_result(
    records: pd.DataFrame, settings: StressSettings, source: str = "", notes: Sequence[str] = ()
) -> StressResult:
    """Both tables from records and settings (pure)."""
    levels = level_table(records, settings)
    return StressResult(settings, levels, capacity_table(levels, settings.stopped_after), source, tuple(notes))


# ---------------------------------------------------------------------------------------------------- I/O


def _read_run(run_dir: str | os.PathLike[str]) -> JSONObject:
    """run.json of a run folder; InputError when it is missing or not a JSON object."""
    path = os.path.join(os.fspath(run_dir), RUN_JSON_NAME)
    if not os.path.isfile(path):
        raise InputError(f"{os.fspath(run_dir)}: no {RUN_JSON_NAME} (is this a run folder?)")
    return read_manifest(path).to_dict()


def stress_tables(run_dir: str | os.PathLike[str]) -> StressResult | None:
    """The stress tables of a run folder; None when its run.json's mode is not ``"stress"``.

    Raises :class:`~avv_core.errors.InputError` for a missing run.json / records.csv, a malformed
    ``"stress"`` object or records without a ``level`` column.
    """
    folder = os.fspath(run_dir)
    run = _read_run(folder)
    if run.get("mode") != STRESS_MODE:
        return None
    settings, notes = settings_from_run_json(run, os.path.join(folder, RUN_JSON_NAME))
    csv_path = os.path.join(folder, RECORDS_NAME)
    if not os.path.isfile(csv_path):
        raise InputError(f"{folder}: run folder has no {RECORDS_NAME}")
    records = read_one(csv_path)
    if "level" not in records.columns:
        raise InputError(f"{csv_path}: no 'level' column (not written by a stress run)")
    return stress_result(records, settings, folder, notes)


__all__ = [
    "CAPACITY_COLUMNS",
    "STRESS_COLUMNS",
    "StressResult",
    "StressSettings",
    "capacity_table",
    "level_table",
    "settings_from_run_json",
    "stress_result",
    "stress_tables",
]
