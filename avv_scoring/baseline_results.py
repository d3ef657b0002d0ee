"""Read K2-Vendor-Verifier / MiniMax-Provider-Verifier ``results.jsonl`` files as a baseline vendor (scoring
layer, input: called by :func:`avv_scoring.entrypoints.score_paths` for ``--baseline-results``).

Each row becomes a record of the baseline vendor (default name ``official``): joined on ``data_index`` = the
request's 1-based line in the run's sample file (K2VV numbers requests so), a row whose ``status`` is not
``success`` is a failed record (``imported_failure``) that counts as a failure everywhere and is never read as an
answer. Field sources: docs/scoring.md, "Interoperability".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from avv_core.errors import InputError
from avv_core.items import ItemKey
from avv_core.json_input import parse_json
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.language import last_user_text
from avv_core.record_file import coerce_frame
from avv_core.records import COLUMN_NAMES, STATUS_FAILED, STATUS_SUCCESS, Record, to_csv_row, usage_counts
from avv_core.samples import SampleSet
from avv_scoring.load import FILE_ORDER_COL, ROW_ORDER_COL, SOURCE_COL, RunInput, run_sample_set

DEFAULT_BASELINE_NAME = "official"


def read_results(path: str | os.PathLike[str]) -> list[JSONObject]:
    """A K2VV / MiniMax results.jsonl: one JSON object per line with an integer ``data_index`` and a ``status``.
    Blank lines are skipped; anything else is an InputError naming the file and line."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row = parse_json(line, f"{path}:{number}")
        if not isinstance(row, dict):
            raise InputError(f"{path}:{number}: a results row must be a JSON object")
        index = row.get("data_index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise InputError(f"{path}:{number}: field 'data_index' must be an integer, got {index!r}")
        if not isinstance(row.get("status"), str):
            raise InputError(f"{path}:{number}: field 'status' is missing (success / failed)")
        if row.get("response") is not None and not isinstance(row["response"], dict):
            raise InputError(f"{path}:{number}: field 'response' must be an object")
        rows.append(row)
    if not rows:
        raise InputError(f"{path}: no results rows")
    return rows


def _message(row: JSONMapping) -> tuple[JSONMapping, JSONValue]:
    """(choices[0].message, choices[0].finish_reason) of a row's response, or ({}, None)."""
    choices = (row.get("response") or {}).get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return {}, None
    return (choices[0].get("message") or {}), choices[0].get("finish_reason")


def _calls(message: JSONMapping) -> list[JSONObject]:
    out = []
    for tc in message.get("tool_calls") or []:
        if not isinstance(tc, Mapping):
            continue
        function = tc.get("function")
        fn: JSONMapping = function if isinstance(function, Mapping) else {}
        args = fn.get("arguments")
        out.append({"id": str(tc.get("id") or ""), "name": fn.get("name"),
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})
    return out


def baseline_record(row: JSONMapping, key: ItemKey, run_id: str, expected_language: str | None) -> Record:
    """One results row as the record of the baseline vendor's item ``key``. A row whose ``status`` is not
    ``success`` is a failed record (``imported_failure``): it counts as a failure everywhere, never as an answer."""
    ok = row.get("status") == STATUS_SUCCESS
    message, finish = _message(row)
    calls = _calls(message) if ok else []
    usage = (row.get("response") or {}).get("usage") if ok else None
    usage = usage if isinstance(usage, Mapping) else None
    tokens, _ = usage_counts(usage)  # counts a results file cannot vouch for are missing, as from the wire
    reasoning = (message.get("reasoning_content") or message.get("reasoning")) if ok else None
    reasoning = reasoning if isinstance(reasoning, str) else None
    content = message.get("content") if ok else None
    duration = row.get("duration_ms")
    error = (row.get("response") or {}).get("error") if not ok else None
    return Record({
        "run_id": run_id, "model": key.model, "vendor": key.vendor, "is_baseline": True, "sample_id": key.sample_id,
        "repeat": key.repeat, "started_at": row.get("last_run_at") if isinstance(row.get("last_run_at"), str) else None,
        "status": STATUS_SUCCESS if ok else STATUS_FAILED,
        "error_kind": None if ok else "imported_failure",
        "error_detail": None if ok else str(error or row.get("status"))[:500],
        "wall_ms": float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        **tokens, "usage_reported": usage is not None,
        "finish_reason": (row.get("finish_reason") or finish) if ok else None,
        "saw_tool_call_delta": bool(calls), "tool_calls": json.dumps(calls, ensure_ascii=False),
        "tool_call_count": len(calls), "content": content if isinstance(content, str) else None,
        "reasoning_chars": len(reasoning or ""), "reasoning": reasoning, "expected_language": expected_language,
    })


@dataclass(frozen=True)
class BaselineResults:
    """``--baseline-results [MODEL=]FILE``: the file, and the model it is the baseline of (None: every model)."""

    path: str
    model: str | None = None

    @classmethod
    def parse(cls, text: str) -> BaselineResults:
        model, sep, path = text.partition("=")
        if sep and model and path and not os.path.exists(text):
            return cls(path, model)
        return cls(text)


def add_baseline_results(records: pd.DataFrame, inputs: Sequence[RunInput], specs: Sequence[BaselineResults],
                         name: str = DEFAULT_BASELINE_NAME, samples: str | os.PathLike[str] | None = None,
                         ) -> tuple[pd.DataFrame, dict[str, str], list[str]]:
    """``records`` plus the rows of K2VV / MiniMax results files as the baseline vendor ``name`` of their model;
    returns (records, ``{model: name}`` for the baseline override, warnings).

    Rows are joined by ``data_index`` = the request's line in the sample file (K2VV numbers requests so), mapped
    to sample ids through the run's sample file. Several files for one model are its repeats 1, 2, …; one file
    serves every repeat of the run (a warning says so when there are several).
    """
    warnings: list[str] = []
    models = list(dict.fromkeys(records["model"].astype(str)))
    sample_set: SampleSet | None = None
    try:
        sample_set = run_sample_set(inputs[0], samples, warnings)
    except InputError as exc:
        warnings.append(f"baseline results joined on data_index = sample id ({exc})")
    line_to_id = {s.line: s.sample_id for s in sample_set.samples} if sample_set else {}
    prompts = {s.sample_id: last_user_text(s.body.get("messages") or []) for s in sample_set.samples} \
        if sample_set else {}
    files: dict[str, list[str]] = {}
    for spec in specs:
        if spec.model is not None and spec.model not in models:
            raise InputError(f"--baseline-results {spec.model}={spec.path}: no records for model {spec.model!r} "
                             f"(models: {', '.join(models)})")
        for model in [spec.model] if spec.model else models:
            files.setdefault(model, []).append(spec.path)
    frames = [records]
    for model, paths in files.items():
        mine = records[records["model"].astype(str) == model]
        if name in set(mine["vendor"].astype(str)):
            raise InputError(f"--baseline-name {name}: model {model!r} already has a vendor of that name; "
                             "pick another name")
        languages: dict[str, str] = {}  # the run's language check per sample, for the baseline's rows too
        if "expected_language" in mine.columns:
            for sid, spec in zip(mine["sample_id"].astype(str), mine["expected_language"].astype("object"),
                                 strict=True):
                if isinstance(spec, str) and spec:
                    languages.setdefault(sid, spec)
        run_repeats = sorted(set(pd.to_numeric(mine["repeat"], errors="coerce").fillna(1).astype(int)))
        if len(paths) == 1 and len(run_repeats) > 1:
            warnings.append(f"{model}: one baseline results file ({paths[0]}) serves all {len(run_repeats)} repeats")
            plan = [(paths[0], r) for r in run_repeats]
        else:
            plan = [(p, i) for i, p in enumerate(paths, start=1)]
        rows: list[Record] = []
        for path, repeat in plan:
            mismatched = 0
            for row in read_results(path):
                sample_id = line_to_id.get(row["data_index"], str(row["data_index"]))
                if prompts and _user_text_differs(row, prompts.get(sample_id)):
                    mismatched += 1
                rows.append(baseline_record(row, ItemKey(model, name, sample_id, repeat),
                                            f"baseline:{os.path.basename(path)}", languages.get(sample_id)))
            if mismatched:
                warnings.append(f"{path}: {mismatched} row(s) whose request's last user message differs from the "
                                "sample with the same data_index (is the results file from another sample set?)")
        frame = coerce_frame(pd.DataFrame([to_csv_row(r) for r in rows], columns=list(COLUMN_NAMES)))
        frame[SOURCE_COL] = ";".join(dict.fromkeys(paths))
        frame[FILE_ORDER_COL] = len(inputs) + len(frames)
        frame[ROW_ORDER_COL] = range(len(frame))
        frames.append(frame)
    merged = pd.concat(frames, ignore_index=True) if len(frames) > 1 else records
    return merged, {model: name for model in files}, warnings


def _user_text_differs(row: JSONMapping, prompt: str | None) -> bool:
    request = row.get("request")
    if prompt is None or not isinstance(request, Mapping) or not isinstance(request.get("messages"), list):
        return False  # nothing to compare (a row without its request)
    return last_user_text(request["messages"]) != prompt
