"""K2-Vendor-Verifier / MiniMax-Provider-Verifier file formats (scoring report layer, pure): one results row of
a record, the summary and the compare output. Writing a run as these files needs the requests as they were sent,
which only the harness can rebuild: :mod:`avv_harness.exports` does it and calls these functions. Reading their
``results.jsonl`` back as a baseline vendor is :mod:`avv_scoring.baseline_results`.

Field names and definitions follow the tools' code (docs/scoring.md, "Interoperability", cites each):

- results row (K2VV ``ValidationResult``): ``data_index`` (the request's 1-based line in the sample file),
  ``request`` (the chat-completions body as built; for a Messages or Responses vendor the chat body its request
  was converted from, :mod:`avv_core.api_formats` holding the conversion and its inverse), ``response`` (a
  ``chat.completion`` dict, or ``{"error": …}`` when the request failed), ``status`` (``success`` / ``failed``),
  ``finish_reason``, ``tool_calls_valid`` (None unless the response finished with ``tool_calls``),
  ``last_run_at``, ``duration_ms``, ``hash``; MiniMax's per-row fields (``tool_calls_finish_reason``,
  ``tool_calls_count``, ``error_only_reasoning_checked`` / ``error_only_reasoning``,
  ``language_following_checked`` / ``_valid``) and ours under ``avv`` (sample id, repeat, error kind, attempts);
- ``hash`` = K2VV's ``compute_hash``: md5 hex of ``json.dumps(request, sort_keys=True, ensure_ascii=False)``;
- summary = K2VV's ``compute_summary`` keys plus MiniMax's (``all_count``, ``tool_calls_*``,
  ``language_following_*``, ``error_only_reasoning_*``, ``success_rate``);
- compare = K2VV ``compare.compute_comparison`` (pairs joined on ``data_index``, a pair with a failed side
  skipped) plus MiniMax's ``multi_tool_call_trigger_similarity``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from avv_core.frame_rows import Cell
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.language import check_language
from avv_core.measures import is_missing
from avv_core.records import STATUS_FAILED, STATUS_SUCCESS
from avv_core.samples import Sample
from avv_scoring.metrics.schema import VALID, check_call, parse_tool_calls, tool_schemas
from avv_scoring.metrics.verifiers import cosine_similarity

FORMAT = "k2vv"
TOOL_CALLS = "tool_calls"


def k2vv_hash(request: JSONMapping) -> str:
    """K2VV's ``compute_hash`` of a prepared request: md5 of ``json.dumps(sort_keys=True, ensure_ascii=False)``."""
    return hashlib.md5(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _value(v: object) -> JSONValue:
    """A frame cell as plain JSON (missing → None, numpy scalars → Python)."""
    if is_missing(v):
        return None
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def _int(v: Cell) -> int | None:
    v = _value(v)
    return None if v is None else int(v)


def _response(record: JSONMapping, request: JSONMapping, calls: list[JSONObject]) -> JSONObject:
    """The ``chat.completion`` dict K2VV assembles from a stream (or ``{"error": …}`` for a failed request)."""
    if record.get("status") != STATUS_SUCCESS:
        return {"error": _value(record.get("error_detail")) or _value(record.get("error_kind")) or "failed"}
    message: JSONObject = {
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


def result_row(record: JSONMapping, sample: Sample, request: JSONMapping) -> JSONObject:
    """One results.jsonl row for one record: its sample, and ``request`` = the body as it was sent."""
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
    row: JSONObject = {
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


def summarize(rows: Sequence[JSONMapping], model: str, all_count: int | None = None) -> JSONObject:
    """summary.json of results rows: K2VV's ``compute_summary`` keys, then MiniMax's.

    ``all_count`` = every HTTP attempt (MiniMax counts retries; default: one per row);
    ``success_rate = round(success_count / all_count, 2)`` as MiniMax writes it.
    """
    out: JSONObject = {
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


def compare(baseline: Sequence[JSONMapping], vendor: Sequence[JSONMapping]) -> JSONObject:
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


def _distribution(rows: Sequence[JSONMapping]) -> Counter[int]:
    return Counter(int(r.get("tool_calls_count") or 0) for r in rows
                   if r.get("status") == STATUS_SUCCESS and r.get("finish_reason") == TOOL_CALLS)
