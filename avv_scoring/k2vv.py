"""K2-Vendor-Verifier / MiniMax-Provider-Verifier files (scoring layer, between :mod:`.score` and :mod:`.cli`):
write a run as their ``results.jsonl`` / ``summary.json`` / compare output. Reading their ``results.jsonl`` back
as a baseline vendor is :mod:`.baseline_results`.

Field names and definitions follow the tools' code (docs/scoring.md, "Interoperability", cites each):

- results row (K2VV ``ValidationResult``): ``data_index`` (the request's 1-based line in the sample file),
  ``request`` (the body as sent), ``response`` (a ``chat.completion`` dict, or ``{"error": …}`` when the request
  failed), ``status`` (``success`` / ``failed``), ``finish_reason``, ``tool_calls_valid`` (None unless the
  response finished with ``tool_calls``), ``last_run_at``, ``duration_ms``, ``hash``; MiniMax's per-row fields
  (``tool_calls_finish_reason``, ``tool_calls_count``, ``error_only_reasoning_checked`` / ``error_only_reasoning``,
  ``language_following_checked`` / ``_valid``) and ours under ``avv`` (sample id, repeat, error kind, attempts);
- ``hash`` = K2VV's ``compute_hash``: md5 hex of ``json.dumps(request, sort_keys=True, ensure_ascii=False)``;
- summary = K2VV's ``compute_summary`` keys plus MiniMax's (``all_count``, ``tool_calls_*``,
  ``language_following_*``, ``error_only_reasoning_*``, ``success_rate``);
- compare = K2VV ``compare.compute_comparison`` (pairs joined on ``data_index``, a pair with a failed side
  skipped) plus MiniMax's ``multi_tool_call_trigger_similarity``.

An API key never reaches these files: the request is rebuilt from the sample and run.json's redacted vendor
config (:func:`avv_harness.wire.execute.build_body`, the harness's own function), and no header is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from avv_core.errors import InputError
from avv_core.language import check_language
from avv_core.measures import is_missing
from avv_core.records import STATUS_FAILED, STATUS_SUCCESS
from avv_core.samples import Sample
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import build_body
from avv_scoring.load import RunInput, read_inputs, resolve_inputs, run_sample_set
from avv_scoring.metrics.schema import VALID, check_call, parse_tool_calls, tool_schemas
from avv_scoring.metrics.trajectories import first_steps
from avv_scoring.metrics.verifiers import cosine_similarity
from avv_scoring.score import BaselineSpec, resolve_baselines

FORMAT = "k2vv"
TOOL_CALLS = "tool_calls"
EXPORT_DIR = "k2vv"


def k2vv_hash(request: Mapping[str, Any]) -> str:
    """K2VV's ``compute_hash`` of a prepared request: md5 of ``json.dumps(sort_keys=True, ensure_ascii=False)``."""
    return hashlib.md5(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _value(v: Any) -> Any:
    """A frame cell as plain JSON (missing → None, numpy scalars → Python)."""
    if is_missing(v):
        return None
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def _int(v: Any) -> int | None:
    v = _value(v)
    return None if v is None else int(v)


# ------------------------------------------------------------------------------------------ export: one row


def vendor_from_manifest(entry: Mapping[str, Any]) -> Vendor:
    """The vendor as run.json records it (keys redacted): enough for :func:`build_body` (model id, usage,
    provider pinning, extra_body)."""
    return Vendor(
        model=str(entry["model"]), name=str(entry["name"]), model_id=str(entry.get("model_id") or entry["model"]),
        url=str(entry.get("url") or ""), include_usage=bool(entry.get("include_usage", True)),
        provider=entry.get("provider"), extra_body=dict(entry.get("extra_body") or {}),
    )


def _response(record: Mapping[str, Any], request: Mapping[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``chat.completion`` dict K2VV assembles from a stream (or ``{"error": …}`` for a failed request)."""
    if record.get("status") != STATUS_SUCCESS:
        return {"error": _value(record.get("error_detail")) or _value(record.get("error_kind")) or "failed"}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": _value(record.get("content")) or "",
        "tool_calls": [{"id": c.get("id"), "type": "function",
                        "function": {"name": c.get("name"), "arguments": c.get("arguments")}} for c in calls] or None,
    }
    reasoning = _value(record.get("reasoning"))
    if reasoning:
        message["reasoning_content"] = reasoning
    usage = None
    if _value(record.get("usage_reported")):
        usage = {k: _int(record.get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return {
        "id": None, "object": "chat.completion", "created": None, "model": request.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": _value(record.get("finish_reason"))}],
        "usage": usage,
    }


def result_row(record: Mapping[str, Any], sample: Sample, vendor: Vendor) -> dict[str, Any]:
    """One results.jsonl row for one record (its sample and vendor give the request as sent)."""
    request = build_body(sample, vendor)
    ok = record.get("status") == STATUS_SUCCESS
    calls = (parse_tool_calls(_value(record.get("tool_calls"))) or []) if ok else []
    finish = _value(record.get("finish_reason")) if ok else None
    valid = None
    if finish == TOOL_CALLS:  # K2VV validates only tool_calls finishes; a finish without calls is invalid (MiniMax)
        schemas = tool_schemas(sample.tools)
        valid = bool(calls) and all(check_call(c, schemas) == VALID for c in calls)
    content = _value(record.get("content")) or ""
    reasoning = _value(record.get("reasoning")) or ""
    has_reasoning = bool(reasoning) or (_int(record.get("reasoning_chars")) or 0) > 0
    wall = _value(record.get("wall_ms"))
    wall = wall if wall is not None else _value(record.get("latency_ms"))
    row: dict[str, Any] = {
        "data_index": sample.line,
        "request": request,
        "response": _response(record, request, calls),
        "status": STATUS_SUCCESS if ok else STATUS_FAILED,
        "finish_reason": finish,
        "tool_calls_valid": valid,
        "last_run_at": _value(record.get("started_at")),
        "duration_ms": int(round(wall)) if wall is not None else 0,
        "hash": k2vv_hash(request),
        # MiniMax-Provider-Verifier's per-row fields
        "tool_calls_finish_reason": finish,
        "tool_calls_count": len(calls) if finish == TOOL_CALLS else 0,
        "error_only_reasoning_checked": 1,
        "error_only_reasoning": ok and has_reasoning and not content and not calls,
    }
    spec = _value(record.get("expected_language"))
    if spec:
        checked = ok and bool(content)
        row["language_following_checked"] = checked
        row["language_following_valid"] = check_language(content, spec).valid if checked else None
    row["avv"] = {
        "model": _value(record.get("model")), "vendor": _value(record.get("vendor")), "sample_id": sample.sample_id,
        "repeat": _int(record.get("repeat")) or 1, "error_kind": _value(record.get("error_kind")),
        "attempts": _int(record.get("attempts")) or 1, "ttft_ms": _value(record.get("ttft_ms")),
        "expected_language": spec,
    }
    return row


# ------------------------------------------------------------------------------------ export: summary, compare


def summarize(rows: Sequence[Mapping[str, Any]], model: str, all_count: int | None = None) -> dict[str, Any]:
    """summary.json of results rows: K2VV's ``compute_summary`` keys, then MiniMax's.

    ``all_count`` = every HTTP attempt (MiniMax counts retries; default: one per row);
    ``success_rate = round(success_count / all_count, 2)`` as MiniMax writes it.
    """
    out: dict[str, Any] = {
        "model": model, "success_count": 0, "failure_count": 0, "finish_stop": 0, "finish_tool_calls": 0,
        "finish_others": 0, "finish_others_detail": {}, "schema_validation_error_count": 0,
        "successful_tool_call_count": 0, "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
    distribution: Counter[str] = Counter()
    calls_total = lang_checked = lang_valid = only_reasoning = 0
    for r in rows:
        out["success_count" if r.get("status") == STATUS_SUCCESS else "failure_count"] += 1
        finish = r.get("finish_reason")
        if finish == "stop":
            out["finish_stop"] += 1
        elif finish == TOOL_CALLS:
            out["finish_tool_calls"] += 1
            out["successful_tool_call_count" if r.get("tool_calls_valid") else "schema_validation_error_count"] += 1
            distribution[str(r.get("tool_calls_count", 0))] += 1
        elif finish:
            out["finish_others"] += 1
            out["finish_others_detail"][finish] = out["finish_others_detail"].get(finish, 0) + 1
        calls_total += int(r.get("tool_calls_count") or 0)
        usage = (r.get("response") or {}).get("usage")
        if isinstance(usage, Mapping):
            for key in out["usage"]:
                if isinstance(usage.get(key), int):
                    out["usage"][key] += usage[key]
        if r.get("language_following_checked"):
            lang_checked += 1
            lang_valid += bool(r.get("language_following_valid"))
        only_reasoning += bool(r.get("error_only_reasoning"))
    all_count = len(rows) if all_count is None else all_count
    out.update({
        "all_count": all_count,
        "tool_calls_finish_stop": out["finish_stop"],
        "tool_calls_finish_tool_calls": out["finish_tool_calls"],
        "tool_calls_finish_others": out["finish_others"],
        "tool_calls_finish_others_detail": dict(out["finish_others_detail"]),
        "tool_calls_schema_validation_error_count": out["schema_validation_error_count"],
        "tool_calls_successful_count": out["successful_tool_call_count"],
        "tool_calls_total_count": calls_total,
        "tool_calls_count_distribution": dict(sorted(distribution.items(), key=lambda kv: int(kv[0]))),
        "language_following_checked_count": lang_checked,
        "language_following_valid_count": lang_valid,
        "language_following_invalid_count": lang_checked - lang_valid,
        "error_only_reasoning_checked_count": len(rows),
        "error_only_reasoning_count": only_reasoning,
        "error_only_reasoning_rate": only_reasoning / len(rows) if rows else 0.0,
        "success_rate": round(out["success_count"] / all_count, 2) if all_count else 0.0,
    })
    return out


def compare(baseline: Sequence[Mapping[str, Any]], vendor: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """K2VV's compare output of a vendor's results rows against a baseline's (pairs joined on ``data_index``;
    a pair where either side failed is skipped), plus MiniMax's multi-call trigger similarity."""
    base = {r["data_index"]: r for r in baseline}
    vend = {r["data_index"]: r for r in vendor}
    common = sorted(set(base) & set(vend))
    tp = fp = fn = tn = skipped = matched = finish_tc = valid_tc = 0
    for idx in common:
        b, v = base[idx], vend[idx]
        if b.get("status") != STATUS_SUCCESS or v.get("status") != STATUS_SUCCESS:
            skipped += 1
            continue
        matched += 1
        b_tc, v_tc = b.get("finish_reason") == TOOL_CALLS, v.get("finish_reason") == TOOL_CALLS
        tp += v_tc and b_tc
        fp += v_tc and not b_tc
        fn += b_tc and not v_tc
        tn += not v_tc and not b_tc
        if v_tc:
            finish_tc += 1
            valid_tc += bool(v.get("tool_calls_valid"))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    similarity = cosine_similarity(_distribution(baseline), _distribution(vendor))
    return {
        "total_baseline": len(base), "total_vendor": len(vend), "common_indices": len(common),
        "matched_success": matched, "skipped_failures": skipped,
        "tool_call_trigger_similarity": {"TP": tp, "FP": fp, "FN": fn, "TN": tn, "precision": round(precision, 4),
                                         "recall": round(recall, 4), "f1": round(f1, 4)},
        "tool_call_schema_accuracy": {"count_finish_reason_tool_calls": finish_tc,
                                      "count_successful_tool_call": valid_tc,
                                      "schema_accuracy": f"{(valid_tc / finish_tc if finish_tc else 0.0):.2%}"},
        "multi_tool_call_trigger_similarity": None if math.isnan(similarity) else round(similarity, 4),
    }


def _distribution(rows: Sequence[Mapping[str, Any]]) -> Counter[int]:
    return Counter(int(r.get("tool_calls_count") or 0) for r in rows
                   if r.get("status") == STATUS_SUCCESS and r.get("finish_reason") == TOOL_CALLS)


# -------------------------------------------------------------------------------------------- export: files


@dataclass
class ExportResult:
    out_dir: str
    files: list[str] = field(default_factory=list)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)  # file → summary
    warnings: list[str] = field(default_factory=list)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name) or "_"


def _write_json(path: str, data: Any, lines: bool = False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        if lines:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in data)
        else:
            json.dump(data, fh, ensure_ascii=False, indent=4)
            fh.write("\n")


def export_run(run: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None,
               samples: str | os.PathLike[str] | None = None, baseline: BaselineSpec = None) -> ExportResult:
    """Write a run folder as K2VV / MiniMax files: per model and vendor ``<vendor>_results.jsonl`` and
    ``<vendor>_summary.json``, and for every other vendor ``<vendor>_compare.json`` against the baseline.

    Default ``out_dir``: ``RUN/k2vv``. With several models each gets a sub-folder; with several repeats each
    repeat gets ``repeat_NN/`` (one K2VV file holds one row per request). InputError for a folder without
    run.json (the vendor config the requests are rebuilt from) or whose sample file changed.
    """
    inputs = resolve_inputs([run])
    item: RunInput = inputs[0]
    if item.run_dir is None or item.manifest is None:
        raise InputError(f"{os.fspath(run)}: export needs a run folder with run.json (the vendor config)")
    result = ExportResult(os.fspath(out_dir) if out_dir is not None else os.path.join(item.run_dir, EXPORT_DIR))
    sample_set = run_sample_set(item, samples, result.warnings)
    by_id = sample_set.by_id()
    vendors = {(str(v.get("model")), str(v.get("name"))): vendor_from_manifest(v) for v in item.manifest.vendors}
    records = first_steps(read_inputs(inputs))  # an agent task's first step: the sample's request as written
    if records.empty:
        raise InputError(f"{item.csv_path}: no records to export")
    try:
        baselines = resolve_baselines(records, baseline)
    except InputError as exc:
        if baseline is not None:
            raise
        baselines = {}  # no baseline vendor in the run: results and summaries only
        result.warnings.append(f"no compare files: {exc}")
    records = records.assign(repeat=pd.to_numeric(records["repeat"], errors="coerce").fillna(1).astype(int))
    models = list(dict.fromkeys(records["model"].astype(str)))
    repeats = sorted(set(records["repeat"].tolist()))
    for model in models:
        for repeat in repeats:
            folder = result.out_dir
            folder = os.path.join(folder, _safe(model)) if len(models) > 1 else folder
            folder = os.path.join(folder, f"repeat_{repeat:02d}") if len(repeats) > 1 else folder
            part = records[(records["model"].astype(str) == model) & (records["repeat"] == repeat)]
            rows_by_vendor = _export_rows(part, model, by_id, vendors, result.warnings)
            base_name = baselines.get(model)
            base_rows = rows_by_vendor.get(base_name) if base_name else None
            for vendor, (rows, attempts) in rows_by_vendor.items():
                stem = os.path.join(folder, _safe(vendor))
                _write_json(f"{stem}_results.jsonl", rows, lines=True)
                summary = summarize(rows, vendors[(model, vendor)].model_id, attempts)
                _write_json(f"{stem}_summary.json", summary)
                result.files += [f"{stem}_results.jsonl", f"{stem}_summary.json"]
                result.summaries[f"{stem}_summary.json"] = summary
                if base_rows is not None and vendor != base_name:
                    _write_json(f"{stem}_compare.json", {"baseline": base_name, "vendor": vendor,
                                                         **compare(base_rows[0], rows)})
                    result.files.append(f"{stem}_compare.json")
    return result


def _export_rows(part: pd.DataFrame, model: str, by_id: Mapping[str, Sample], vendors: Mapping[tuple[str, str], Vendor],
                 warnings: list[str]) -> dict[str, tuple[list[dict[str, Any]], int]]:
    """vendor → (its results rows sorted by data_index, Σ attempts)."""
    out: dict[str, tuple[list[dict[str, Any]], int]] = {}
    for vendor, rows in part.groupby(part["vendor"].astype(str), sort=False):
        if (model, vendor) not in vendors:
            raise InputError(f"run.json: no vendor {model}/{vendor} in field 'vendors' (the records name it)")
        exported, attempts, unknown = [], 0, 0
        for record in rows.to_dict("records"):
            sample = by_id.get(str(record["sample_id"]))
            if sample is None:
                unknown += 1
                continue
            exported.append(result_row(record, sample, vendors[(model, vendor)]))
            attempts += _int(record.get("attempts")) or 1
        if unknown:
            warnings.append(f"{model}/{vendor}: {unknown} record(s) whose sample id is not in the sample file "
                            "were not exported")
        out[vendor] = (sorted(exported, key=lambda r: r["data_index"]), attempts)
    return out
