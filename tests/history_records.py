"""Synthetic run histories for the history tests, from the simulator's own decisions (tests/sim_records.py, no
HTTP): run k of seed s has every profile's ``seed`` varied (so repeats of the history differ by sampling noise:
``self_flip_rate``), TTFT and TPS drawn around each profile's values, and from run :data:`DEGRADED_FROM` on two
known changes: ``flipper`` gets ``flip_rate`` :data:`FLIP_RATE` (it does the opposite of the reference on that
share of bodies) and ``slow`` :data:`DELAY_MS` more TTFT."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from avv_core.manifest import RunManifest
from avv_scoring.metrics.headline import annotate_tool_calls
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.score import ScoreResult, score_frame
from avv_scoring.testing import records_frame
from tests.sim_records import sim_rows, tools_by_sample

VENDORS = ("official", "flipper", "slow", "steady")
BASE = {"tool_call_rate": 0.5, "follow_gold": False, "self_flip_rate": 0.03, "ttft_ms": 200.0, "tokens_per_s": 50.0}
DEGRADED_FROM = 5
FLIP_RATE = 0.3
DELAY_MS = 100.0
SAMPLES, REPEATS = 150, 1
#: The two changes the history holds, as (vendor, test) of avv_scoring.history.regression.
TRUE_CHANGES = {("flipper", "trigger_agreement"), ("slow", "ttft_p50_ms")}


def profiles(seed: int, run: int) -> dict[str, dict[str, Any]]:
    out = {}
    for j, name in enumerate(VENDORS):
        knobs: dict[str, Any] = {**BASE, "seed": seed * 1000 + run * 10 + j}
        if run >= DEGRADED_FROM and name == "flipper":
            knobs["flip_rate"] = FLIP_RATE
        if run >= DEGRADED_FROM and name == "slow":
            knobs["ttft_ms"] = BASE["ttft_ms"] + DELAY_MS
        out[name] = knobs
    return out


def run_rows(seed: int, run: int, samples: int = SAMPLES, repeats: int = REPEATS) -> list[dict[str, Any]]:
    """Run ``run`` (1-based) of history ``seed``: the record fields (avv_scoring.testing.record) of every item."""
    rows, _ = sim_rows(profiles(seed, run), "official", samples, repeats, arguments=False)
    rng = np.random.default_rng([seed, run])
    for row in rows:  # timing noise around the profile's values (the simulator's own are constant)
        row["ttft_ms"] = round(row["ttft_ms"] * float(rng.lognormal(0.0, 0.15)), 3)
        row["tps"] = round(row["tps"] * float(rng.lognormal(0.0, 0.10)), 3)
    return rows


def run_records(seed: int, run: int, samples: int = SAMPLES, repeats: int = REPEATS) -> pd.DataFrame:
    """The same as records.csv is read, run id ``s<seed>-r<run>``."""
    return records_frame({**row, "run_id": f"s{seed}-r{run}"} for row in run_rows(seed, run, samples, repeats))


def quick_items(seed: int, run: int, samples: int = SAMPLES, repeats: int = REPEATS) -> pd.DataFrame:
    """The ``items`` rows of the run built straight from the simulator's decisions (what
    :func:`avv_scoring.history.store.item_frame` stores, without the records file and the annotation, for the
    many-seed sweep): every item successful, ``called`` = finished with tool_calls, the called names as the tool
    signature."""
    rows = run_rows(seed, run, samples, repeats)
    called = [row["finish_reason"] == "tool_calls" for row in rows]
    return pd.DataFrame({
        "vendor": [row["vendor"] for row in rows], "sample_id": [row["sample_id"] for row in rows],
        "repeat": [row["repeat"] for row in rows], "success": 1, "called": [int(c) for c in called],
        "tools_sig": ["|".join(sorted(c["name"] for c in row["tool_calls"])) if c else None
                      for row, c in zip(rows, called, strict=True)],
        "schema_valid": [1.0 if c else None for c in called],
        "ttft_ms": [row["ttft_ms"] for row in rows], "tps": [row["tps"] for row in rows],
    })


def annotated(seed: int, run: int, samples: int = SAMPLES) -> pd.DataFrame:
    return annotate_tool_calls(run_records(seed, run, samples), tools_by_sample(samples))


def scored_run(seed: int, run: int, samples: int = SAMPLES, resamples: int = 100) -> tuple[ScoreResult, RunManifest]:
    """The run scored as avv-score scores it, and a run.json for it (one sample file for every run)."""
    result = score_frame(run_records(seed, run, samples), tools_by_sample(samples),
                         stats=StatsSettings(resamples=resamples))
    manifest = RunManifest(run_id=f"s{seed}-r{run}", started_at=f"2026-01-{run:02d}T03:00:00+00:00",
                           ended_at=f"2026-01-{run:02d}T03:05:00+00:00", completed=True,
                           vendors=[{"model": "m", "name": v, "model_id": "m", "url": f"http://sim/{v}/v1",
                                     "api_key": "***", "endpoint": "chat"} for v in VENDORS],
                           samples={"sha256": f"samples-{samples}", "ids_sha256": "ids", "count": samples})
    return result, manifest
