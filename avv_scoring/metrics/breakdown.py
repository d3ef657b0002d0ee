"""Per-tool breakdown and the disagreement list (scoring layer, pure over pandas; called by :mod:`.score`).

Both read records annotated by :func:`avv_scoring.metrics.calls.annotate_calls`. A tool is named as gold names
it (the original name, mapped back through the sample's ``tool_names``); a called name that is not one of the
request's tools keeps the name the vendor sent.

**Per tool** (one row per model, vendor and tool the vendor or the baseline called, or gold expects):

- ``calls`` = the vendor's calls of the tool in successful responses;
- ``schema_valid`` = valid / (valid + invalid) of those calls (uncheckable ones left out);
- ``pairs`` = call pairs (see :func:`~avv_scoring.metrics.calls.call_pairs`) in which the baseline called the
  tool; ``tool_match`` = share of them where the vendor called it as many times; ``args_match`` = share where
  the vendor's calls of the tool equal the baseline's as (canonical arguments) multisets;
- ``gold_items`` = successful items whose ``expected_calls`` name the tool; ``gold_accuracy`` = share of them
  where the vendor's calls of the tool pair one to one with the expected calls of the tool.

**Disagreements**: one row per successful (vendor, sample, repeat) that differs from the baseline (only one
side called a tool, or both did and their calls differ) or from gold (the trigger, or the calls when
``expected_calls`` is given), the baseline compared with gold only. ``kind`` is the first that applies of
:data:`KINDS`; ``against`` says what it differs from.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.samples import Gold
from avv_scoring.load import OK_COL
from avv_scoring.metrics.calls import (
    AS_TEXT,
    CALLED,
    CALLS,
    GOLD,
    NAMES,
    ROW_FIELDS,
    SIG_CALLS,
    VERDICTS,
    call_pairs,
    name_of_row,
    positive,
)
from avv_scoring.metrics.correctness import Call, calls_equal, calls_match_gold, name_mapper, tools_match_gold
from avv_scoring.metrics.frame_memo import item_keys, per_frame
from avv_scoring.metrics.row_codes import distinct_rows, item_codes, last_rows, positions_in, row_dicts
from avv_scoring.metrics.schema import INVALID, VALID

_T = TypeVar("_T")

#: Disagreement kinds, in the order they are tried (the first that applies names the row).
KINDS: dict[str, str] = {
    "as_text": "the vendor wrote a call of a request tool into the content instead of calling it",
    "truncated": "finish_reason length with a call whose arguments do not parse (cut off mid-call)",
    "trigger_flip": "one side called a tool, the other did not (gold: against expected_tool_call)",
    "unknown_tool": "a call names a function that is not among the request's tools",
    "empty_tool_calls": "finish_reason tool_calls without any call",
    "invalid_arguments": "a call's arguments break the tool's schema",
    "call_count": "both called, with a different number of calls (parallel calls dropped or added)",
    "other_tool": "the same number of calls, other functions",
    "other_arguments": "the same functions, other arguments",
    "trajectory_end": "an agent task's trajectory ended otherwise than the baseline's "
                      "(avv_scoring/metrics/trajectories.py)",
}
PER_TOOL_COLUMNS = ("model", "vendor", "tool", "calls", "schema_valid", "pairs", "tool_match", "args_match",
                    "gold_items", "gold_accuracy")
DISAGREEMENT_COLUMNS = ("model", "vendor", "sample_id", "repeat", "kind", "against", "baseline_finish",
                        "baseline_calls", "vendor_finish", "vendor_calls", "expected", "vendor_content")
CONTENT_CHARS = 300  # vendor_content is cut to this many characters


def _ratio(num: int, den: int) -> float:
    return num / den if den else float("nan")


def _tool(call: Call, name_of: Callable[[str], str | None]) -> str:
    return name_of(call.name) or call.name


# -------------------------------------------------------------------------------------------- per tool


class _ToolStats:
    """What :func:`per_tool` counts of one tool (weighted by how many rows hold each distinct row)."""

    __slots__ = ("args_ok", "calls", "checked", "gold_items", "gold_ok", "pairs", "tool_ok", "valid")

    def __init__(self) -> None:
        self.calls = self.valid = self.checked = self.gold_items = self.gold_ok = 0
        self.pairs = self.tool_ok = self.args_ok = 0


def per_tool(vendor_rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> list[JSONObject]:
    """The per-tool rows of one vendor (without model / vendor), by calls (descending), then tool name."""
    stats: dict[str, _ToolStats] = {}
    mappers: dict[tuple[int, int], Callable[[str], str | None]] = {}  # rows share their names and gold objects

    def tool_stats(tool: str) -> _ToolStats:
        found = stats.get(tool)
        if found is None:
            found = stats[tool] = _ToolStats()
        return found

    def mapper(names: Iterable[str] | None, gold: Gold | None) -> Callable[[str], str | None]:
        key = (id(names), id(gold))
        found = mappers.get(key)
        if found is None:
            found = mappers[key] = name_mapper(names, gold.tool_names if gold is not None else {})
        return found

    ok = _successful(vendor_rows)
    columns = [vendor_rows[c].to_numpy(dtype=object)[ok] for c in (CALLS, VERDICTS, NAMES, GOLD)]
    for (calls, verdicts, names, gold), w in distinct_rows(*columns, by=(0, 2, 3)):
        name_of = mapper(names, gold)
        for call, verdict in zip(calls, verdicts, strict=False):
            s = tool_stats(_tool(call, name_of))
            s.calls += w
            s.valid += w * (verdict == VALID)
            s.checked += w * (verdict in (VALID, INVALID))
        if gold is not None and gold.expected_calls is not None:
            for tool in {e["name"] for e in gold.expected_calls}:
                s = tool_stats(tool)
                s.gold_items += w
                mine = [c for c in calls if name_of(c.name) == tool]
                s.gold_ok += w * calls_match_gold(mine, [e for e in gold.expected_calls if e["name"] == tool], name_of)
    pairs = call_pairs(vendor_rows, baseline_rows)
    for (calls_v, calls_b, sig_v, sig_b, names, gold), w in distinct_rows(
            pairs["calls_v"], pairs["calls_b"], pairs["sig_calls_v"], pairs["sig_calls_b"], pairs["names_b"],
            pairs["gold_b"], by=(0, 1, 4, 5)):
        name_of = mapper(names, gold)
        for tool in {_tool(c, name_of) for c in calls_b}:
            s = tool_stats(tool)
            s.pairs += w
            if sig_v == sig_b:  # the same calls: every tool's subset matches
                s.tool_ok += w
                s.args_ok += w
                continue
            mine = [c for c in calls_v if _tool(c, name_of) == tool]
            theirs = [c for c in calls_b if _tool(c, name_of) == tool]
            s.tool_ok += w * (len(mine) == len(theirs))
            s.args_ok += w * calls_equal(mine, theirs)
    out = [{
        "tool": tool, "calls": s.calls, "schema_valid": _ratio(s.valid, s.checked), "pairs": s.pairs,
        "tool_match": _ratio(s.tool_ok, s.pairs), "args_match": _ratio(s.args_ok, s.pairs),
        "gold_items": s.gold_items, "gold_accuracy": _ratio(s.gold_ok, s.gold_items),
    } for tool, s in stats.items()]
    return sorted(out, key=lambda r: (-r["calls"], -r["pairs"], -r["gold_items"], r["tool"]))


# ----------------------------------------------------------------------------------------- disagreements


def _defect(row: JSONMapping) -> str | None:
    """The vendor-side fault of a response, if any (the first of as_text … invalid_arguments)."""
    calls: Sequence[Call] = row[CALLS]
    if row[AS_TEXT]:
        return "as_text"
    if row.get("finish_reason") == "length" and any(not c.parsed for c in calls):
        return "truncated"
    return None


def _call_defect(row: JSONMapping) -> str | None:
    calls: Sequence[Call] = row[CALLS]
    names = row[NAMES]
    if names is not None and any(c.name not in names for c in calls):
        return "unknown_tool"
    if row.get("finish_reason") == "tool_calls" and not calls:
        return "empty_tool_calls"
    if any(v == INVALID for v in row[VERDICTS]):
        return "invalid_arguments"
    return None


def _kind_vs_baseline(row: JSONMapping, base: JSONMapping) -> str:
    if row[CALLED] != base[CALLED]:
        return "trigger_flip"
    return _call_defect(row) or _calls_kind(row[CALLS], base[CALLS], lambda c: c.name)


def _calls_kind(mine: Sequence[Call], theirs: Sequence[_T], name: Callable[[_T], object]) -> str:
    if len(mine) != len(theirs):
        return "call_count"
    if Counter(c.name for c in mine) != Counter(name(t) for t in theirs):
        return "other_tool"
    return "other_arguments"


def _kind_vs_gold(row: JSONMapping, is_positive: bool) -> str:
    gold = row[GOLD]
    if is_positive != gold.expected_tool_call:
        return "trigger_flip"
    name_of = name_of_row(row)
    defect = _call_defect(row)
    if defect is not None:
        return defect
    mapped = [Call(name_of(c.name) or "\x00" + c.name, c.raw, c.args) for c in row[CALLS]]
    return _calls_kind(mapped, gold.expected_calls, lambda e: e["name"])


def _differs_from_gold(gold: Gold | None, calls: Sequence[Call], names: Iterable[str] | None, is_positive: bool
                       ) -> bool:
    if gold is None or not gold.labelled:
        return False
    if is_positive != gold.expected_tool_call:
        return True
    if gold.expected_calls is None or not is_positive:
        return False
    name_of = name_mapper(names, gold.tool_names)
    return not (tools_match_gold(calls, gold.expected_calls, name_of)
                and calls_match_gold(calls, gold.expected_calls, name_of))


def _show_calls(calls: Sequence[Call]) -> str:
    return "; ".join(c.show() for c in calls)


def _show_expected(row: JSONMapping) -> str:
    gold = row[GOLD]
    if gold is None or not gold.labelled:
        return ""
    if gold.expected_calls is None:
        return "a tool call" if gold.expected_tool_call else "no tool call"
    return "; ".join(f"{e['name']}({json.dumps(e.get('arguments') or {}, ensure_ascii=False)})"
                     for e in gold.expected_calls)


def disagreements(model: str, vendor: str, vendor_rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                  is_baseline: bool) -> list[JSONObject]:
    """The disagreement rows of one vendor (see the module docstring), in the vendor's row order."""
    fast = _on_arrays(vendor_rows, baseline_rows, is_baseline)
    if fast is not None:
        ok_index, ok_at, positives, vs_base, base_label, golds, calls_of, names_of = fast
        n = len(ok_index)
        ok: pd.DataFrame | None = None
    else:
        ok, positives, vs_base, base_label = _against_baseline(vendor_rows, baseline_rows, is_baseline)
        ok_index, ok_at, n = ok.index, None, len(ok)
        golds, calls_of, names_of = (ok[c].to_numpy(dtype=object) for c in (GOLD, CALLS, NAMES))
    vs_gold = np.zeros(n, dtype=bool)
    labelled = np.flatnonzero([g is not None for g in golds]) if n else np.zeros(0, dtype=np.int64)
    if len(labelled):
        vs_gold[labelled] = [_differs_from_gold(golds[i], calls_of[i], names_of[i], bool(positives[i]))
                             for i in labelled]
    # (row index, vs baseline, vs gold, baseline row index, positive)
    chosen = np.flatnonzero(vs_base | vs_gold)
    differing = [(ok_index[i], bool(vs_base[i]), bool(vs_gold[i]), base_label[i], bool(positives[i])) for i in chosen]
    out = []
    # the few fields each differing row needs, taken in one selection (not one .loc per row)
    if ok is not None:
        picked = ok.loc[[d[0] for d in differing]]
    else:
        assert ok_at is not None  # the array path set it
        picked = vendor_rows.iloc[ok_at[chosen]]
    mine = row_dicts(picked, ROW_FIELDS)
    base_ids = [d[3] for d in differing if d[3] is not None]
    theirs = dict(zip(base_ids, row_dicts(baseline_rows.loc[base_ids], ROW_FIELDS), strict=True))
    # rows share their calls lists (annotate_calls): each list shown, and each pair of lists told apart, once
    shown: dict[int, str] = {}
    kinds: dict[tuple[object, ...], str] = {}

    def show(calls: Sequence[Call]) -> str:
        found = shown.get(id(calls))
        if found is None:
            found = shown[id(calls)] = _show_calls(calls)
        return found

    def kind_vs_baseline(row: JSONMapping, base: JSONMapping) -> str:
        key = (row[CALLED], base[CALLED], row.get("finish_reason") == "tool_calls",  # all _kind_vs_baseline reads
               *map(id, (row[CALLS], row[NAMES], row[VERDICTS], base[CALLS])))
        found = kinds.get(key)
        if found is None:
            found = kinds[key] = _kind_vs_baseline(row, base)
        return found

    for (_, against_base, against_gold, b, is_p), row in zip(differing, mine, strict=True):
        base = theirs[b] if b is not None else None  # a difference from the baseline has a baseline row
        kind = _defect(row) or (kind_vs_baseline(row, base) if against_base and base is not None
                                else _kind_vs_gold(row, is_p))
        text = row.get("content")
        content = text if isinstance(text, str) else ""
        out.append({
            "model": model, "vendor": vendor, "sample_id": str(row["sample_id"]), "repeat": int(row["repeat"]),
            "kind": kind, "against": "+".join(w for w, d in (("baseline", against_base), ("gold", against_gold)) if d),
            "baseline_finish": None if base is None else base.get("finish_reason"),
            "baseline_calls": None if base is None else show(base[CALLS]),
            "vendor_finish": row.get("finish_reason"), "vendor_calls": show(row[CALLS]),
            "expected": _show_expected(row),
            "vendor_content": content[:CONTENT_CHARS] if kind == "as_text" else "",
        })
    return out


@per_frame
def _successful(frame: pd.DataFrame) -> np.ndarray:
    """The positions of the rows whose status is "success"."""
    return np.flatnonzero((frame["status"].astype("object") == "success").to_numpy(dtype=bool))


#: What :func:`_on_arrays` returns: the successful rows' index, then seven arrays over those rows.
_ArrayRows = tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _on_arrays(vendor_rows: pd.DataFrame, baseline_rows: pd.DataFrame,
               is_baseline: bool) -> _ArrayRows | None:
    """What :func:`_against_baseline` computes, on column arrays and integer item codes (no copy of the frames):
    the successful rows' index and positions, positive, differs from the baseline, the baseline row's label, and
    their gold, calls and tool names. None when the vendor's index repeats a label or a sample id is missing (the
    frame path decides those)."""
    if not vendor_rows.index.is_unique:
        return None
    mine, theirs = _successful(vendor_rows), _successful(baseline_rows)
    (ids_v, reps_v), (ids_b, reps_b) = item_keys(vendor_rows), item_keys(baseline_rows)
    codes = item_codes(np.concatenate([ids_v[mine], ids_b[theirs]]), np.concatenate([reps_v[mine], reps_b[theirs]]),
                       len(mine))
    if codes is None:
        return None
    n = len(mine)
    called = vendor_rows[CALLED].to_numpy(dtype=bool)[mine]
    vs_base = np.zeros(n, dtype=bool)
    base_label = np.full(n, None, dtype=object)
    if not is_baseline and n:
        last = theirs[last_rows(codes[1])]  # a repeated item: its last row, as a dict would keep
        at = positions_in(codes[0], codes[1][last_rows(codes[1])])  # -1: the baseline has no success for the item
        found = at >= 0
        take = last[np.where(found, at, 0)] if len(last) else np.zeros(n, dtype=np.int64)
        base_called = baseline_rows[CALLED].to_numpy(dtype=bool)[take] if len(last) else np.zeros(n, dtype=bool)
        sig_differs = np.zeros(n, dtype=bool)
        both = np.flatnonzero(found & called & base_called)
        if len(both):
            sigs, base_sigs = vendor_rows[SIG_CALLS].to_numpy(dtype=object), baseline_rows[SIG_CALLS].to_numpy(
                dtype=object)
            sig_differs[both] = [sigs[mine[i]] != base_sigs[take[i]] for i in both]
        vs_base = found & ((called != base_called) | sig_differs)
        base_label[found] = baseline_rows.index.to_numpy(dtype=object)[take[found]]
    gold, calls, names = (vendor_rows[c].to_numpy(dtype=object)[mine] for c in (GOLD, CALLS, NAMES))
    return (vendor_rows.index[mine], mine, positive(vendor_rows).to_numpy(dtype=bool)[mine], vs_base, base_label,
            gold, calls, names)


def _against_baseline(vendor_rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                      is_baseline: bool) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The successful rows (a few columns), positive, differs from the baseline, the baseline row's label."""
    needed = [c for c in (*ROW_FIELDS, SIG_CALLS, OK_COL, "status") if c in vendor_rows.columns]
    ok = vendor_rows.loc[vendor_rows["status"].astype("object") == "success", needed]  # not every column
    is_pos = positive(ok)
    n = len(ok)
    called = ok[CALLED].to_numpy(dtype=bool)
    vs_base = np.zeros(n, dtype=bool)
    base_label = np.full(n, None, dtype=object)
    if not is_baseline and n:
        base_ok = baseline_rows.loc[baseline_rows["status"].astype("object") == "success",
                                    ["sample_id", "repeat", CALLED, SIG_CALLS]]
        base_keys = _item_keys(base_ok)
        last = ~base_keys.duplicated(keep="last")  # a repeated item: its last row, as a dict would keep
        at = base_keys[last].get_indexer(_item_keys(ok))  # -1: the baseline has no success for the item
        found = at >= 0
        base_sel = base_ok[last]
        take = np.where(found, at, 0)
        base_called = base_sel[CALLED].to_numpy(dtype=bool)[take] if len(base_sel) else np.zeros(n, dtype=bool)
        sig_differs = np.zeros(n, dtype=bool)
        both = np.flatnonzero(found & called & base_called)
        if len(both):
            mine, theirs = ok[SIG_CALLS].to_numpy(dtype=object), base_sel[SIG_CALLS].to_numpy(dtype=object)
            sig_differs[both] = [mine[i] != theirs[take[i]] for i in both]
        vs_base = found & ((called != base_called) | sig_differs)
        base_label[found] = base_sel.index.to_numpy(dtype=object)[at[found]]
    return ok, is_pos.to_numpy(dtype=bool), vs_base, base_label


def _item_keys(rows: pd.DataFrame) -> pd.MultiIndex:
    """(sample_id, repeat) of each row; a missing repeat is 1."""
    return pd.MultiIndex.from_arrays([rows["sample_id"].astype(str).to_numpy(dtype=object),
                                      pd.to_numeric(rows["repeat"], errors="coerce").fillna(1).astype(int).to_numpy()])


def frame(rows: list[JSONObject], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(columns))
