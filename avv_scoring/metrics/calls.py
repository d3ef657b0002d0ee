"""Tool-call correctness metrics (scoring layer, pure over pandas): the per-row call annotation every call
metric reads, agreement with the baseline, accuracy against gold labels, and anomaly counts.

:func:`annotate_calls` parses each row's recorded calls once (:class:`~avv_scoring.metrics.correctness.Call`),
checks each against the request's schema (:mod:`avv_scoring.metrics.schema`) and attaches the sample's gold labels.
The metric functions below are registered with ``@produces``; their definitions are in their docstrings and in
docs/scoring.md.

Rule: a vendor's failure never improves its score. Failed items are left out of agreement and gold
metrics (their cost is in success_rate, as for trigger F1) and counted; a broken call never matches; a
call that names a tool the request does not have never matches gold, whatever its name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

from avv_core.frame_rows import Cell
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.samples import Gold
from avv_core.tool_formats import find_text_calls, request_tool_names
from avv_scoring.load import OK_COL, ToolsBySample, is_success, numeric
from avv_scoring.metrics.additive import Columns, Sums, additive, count, rate
from avv_scoring.metrics.correctness import Call, CallBook, args_f1, calls_match_gold, name_mapper, tools_match_gold
from avv_scoring.metrics.declaration import Metric, NoiseFloor, Ratio, Regression
from avv_scoring.metrics.frame_memo import item_keys, per_frame, shared, store_for
from avv_scoring.metrics.gold_f1 import gold_args_f1
from avv_scoring.metrics.normalisers import ArgNormalisation, CallNormaliser
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import (
    first_rows,
    identity_codes,
    item_codes,
    last_rows,
    positions_in,
    row_codes,
    row_dicts,
)
from avv_scoring.metrics.schema import INVALID, UNCHECKABLE, VALID, CallChecker, parse_tool_calls

_T = TypeVar("_T")

TOOL_CALLS = "tool_calls"

# Helper columns written by annotate_calls (not part of the record schema).
TC_N = "_tc_n"  # calls of the row (an unparseable tool_calls cell counts its tool_call_count, at least 1)
TC_VALID = "_tc_valid"
TC_INVALID = "_tc_invalid"
TC_UNCHECKABLE = "_tc_uncheckable"
TC_PARSE_ERROR = "_tc_parse_error"  # the tool_calls cell is not a JSON list: every call counts as invalid
CALLS = "_calls"  # list[Call]
VERDICTS = "_verdicts"  # valid / invalid / uncheckable per call
NAMES = "_tool_names"  # the request's tool names (frozenset), None when the sample is unknown
CALLED = "_called"  # successful and (finish tool_calls or at least one call)
AS_TEXT = "_as_text"  # successful, no call, and the content holds a call of a request tool
GOLD = "_gold"  # the sample's Gold, None without labels
SIG_TOOLS = "_sig_tools"  # sorted called names: equal signatures = tool match
SIG_CALLS = "_sig_calls"  # sorted (name, canonical normalised arguments): equal signatures = args match
NCALLS = "_ncalls"  # list[Call]: the calls with their arguments normalised (metrics/normalisers.py); CALLS as sent
NGOLD = "_ngold"  # the sample's expected calls, normalised (tuple[ExpectedCall]), None without expected_calls
SCHEMAS = "_schemas"  # the request's tools: name → (schema key, parameters) (CallChecker.schemas), None when unknown
#: The columns :func:`_annotate_cell` fills, in the order of its tuple.
CELL_COLUMNS = (CALLS, VERDICTS, TC_VALID, TC_INVALID, TC_UNCHECKABLE, TC_PARSE_ERROR, SIG_TOOLS, SIG_CALLS, NCALLS)

PAIR_KEYS = ["sample_id", "repeat"]


def annotate_calls(
    rows: pd.DataFrame,
    tools_by_sample: ToolsBySample | None,
    gold_by_sample: Mapping[str, Gold] | None = None,
    normalise: ArgNormalisation | None = None,
) -> pd.DataFrame:
    """Copy of ``rows`` with the call helper columns above. A sample missing from ``tools_by_sample`` (or
    ``tools_by_sample=None``) makes its calls uncheckable and its tool names unknown. ``normalise`` = the argument
    normalisers behind ``NCALLS``, ``SIG_CALLS`` and ``NGOLD`` (default: all of them; ``ArgNormalisation.none()``:
    exact values).

    Work that repeats is done once: each sample's tools are read and their validators compiled once; equal
    ``tool_calls`` cells are parsed once; equal calls are one :class:`~avv_scoring.metrics.correctness.Call` (its
    canonical key computed once); a call is validated once per (tool schema, raw arguments)."""
    book = CallBook()
    checker = CallChecker()
    norm = CallNormaliser(normalise if normalise is not None else ArgNormalisation())
    cells: dict[str, list[JSONObject] | None] = {}
    n = len(rows)
    ok_mask = is_success(rows)
    sids = rows["sample_id"].astype("object").map(str, na_action=None).to_numpy(dtype=object)
    sid_codes, sid_names = pd.factorize(sids)
    tools_of = [None if tools_by_sample is None else tools_by_sample.get(s) for s in sid_names]
    schemas_of = [None if tools is None else checker.schemas(tools) for tools in tools_of]
    interned: dict[frozenset[str], frozenset[str]] = {}  # one object per distinct name set (see breakdown)
    names_of = _objects([None if tools is None else _intern(interned, request_tool_names(tools))
                         for tools in tools_of])
    gold_of = _objects([None if gold_by_sample is None else gold_by_sample.get(s) for s in sid_names])
    ngold_of = _objects([None if g is None else norm.expected(g.expected_calls, g.wire_name, schemas_of[k])
                         for k, g in enumerate(gold_of)])
    # Rows repeat (vendors, repeats, samples sharing one tool set): each distinct (tool set, tool_calls cell)
    # is annotated once. A missing cell is code -1 (no calls); a cell neither text nor missing is done row by row.
    toolsets: dict[tuple[tuple[str, str], ...] | None, int] = {}
    toolset_of = np.array([toolsets.setdefault(None if s is None else tuple(sorted((k, e[0]) for k, e in s.items())),
                                               len(toolsets)) for s in schemas_of], dtype=np.int64)
    raw_cells = rows["tool_calls"].astype("object").to_numpy(dtype=object)
    text_cell = np.fromiter((isinstance(c, str) for c in raw_cells), dtype=bool, count=n)
    missing_cell = rows["tool_calls"].isna().to_numpy(dtype=bool)
    cell_codes, _ = pd.factorize(np.where(text_cell, raw_cells, None))
    combo_codes, combo_firsts = _combos(toolset_of[sid_codes] if n else sid_codes, cell_codes)
    counts = rows["tool_call_count"].astype("object").to_numpy(dtype=object) if "tool_call_count" in rows.columns \
        else np.full(n, None, dtype=object)
    entries = [_annotate_cell(raw_cells[i] if text_cell[i] else None, counts[i], schemas_of[sid_codes[i]], book,
                              checker, cells, norm) for i in combo_firsts]
    parse_error = np.array([bool(e[5]) for e in entries] + [False], dtype=bool)[combo_codes]
    # done row by row: cells handed in as lists (tests, tools), and parse errors (they count the row's calls)
    per_row = np.flatnonzero((~text_cell & ~missing_cell) | (text_cell & parse_error))
    table = {c: _objects([e[k] for e in entries]) for k, c in enumerate(CELL_COLUMNS)}
    table[TC_N] = _objects([len(e[1]) for e in entries])
    cols = {c: values[combo_codes] for c, values in table.items()}
    for i in per_row:
        entry = _annotate_cell(raw_cells[i], counts[i], schemas_of[sid_codes[i]], book, checker, cells, norm)
        for k, c in enumerate(CELL_COLUMNS):
            cols[c][i] = entry[k]
        cols[TC_N][i] = len(entry[1])
    cols[NAMES], cols[GOLD], cols[NGOLD] = names_of[sid_codes], gold_of[sid_codes], ngold_of[sid_codes]
    cols[SCHEMAS] = _objects(schemas_of)[sid_codes] if n else _objects([])
    has_names = np.array([bool(names) for names in names_of] + [False], dtype=bool)[sid_codes]
    no_calls = np.array([not e[0] for e in entries] + [True], dtype=bool)[combo_codes]
    no_calls[per_row] = [not cols[CALLS][i] for i in per_row]
    cols[AS_TEXT] = _as_text(rows, ok_mask.to_numpy(dtype=bool) & no_calls & has_names, sid_codes, names_of)
    out = rows.copy(deep=False)  # new columns only: the record columns are shared, never written
    out[OK_COL] = ok_mask
    for name in (TC_N, TC_VALID, TC_INVALID, TC_UNCHECKABLE, TC_PARSE_ERROR, CALLS, VERDICTS, NAMES, AS_TEXT, GOLD,
                 SIG_TOOLS, SIG_CALLS, NCALLS, NGOLD, SCHEMAS):
        values = cols[name]
        out[name] = pd.Series(values, index=rows.index, dtype="object") if name in OBJECT_COLUMNS \
            else pd.Series(values.astype(FLAG_COLUMNS.get(name, np.int64)), index=rows.index) if n \
            else pd.Series(values.tolist(), index=rows.index)  # no rows: the dtype pandas gives an empty list
    finish = (out["finish_reason"].astype("object") == TOOL_CALLS).fillna(False).astype(bool)
    out[CALLED] = is_success(out) & (finish | pd.Series(~no_calls, index=rows.index))  # no walk over the lists
    return out


OBJECT_COLUMNS = frozenset((CALLS, VERDICTS, NAMES, GOLD, SIG_TOOLS, SIG_CALLS, NCALLS, NGOLD, SCHEMAS))
#: The helper columns of flags (the others not in OBJECT_COLUMNS count calls: int64, as pandas reads Python ints).
FLAG_COLUMNS = {TC_PARSE_ERROR: bool, AS_TEXT: bool}


def _intern(table: dict[_T, _T], value: _T) -> _T:
    return table.setdefault(value, value)


def _objects(values: Sequence[object]) -> np.ndarray:
    """A 1-d object array holding ``values`` as they are (numpy would turn a list of lists into 2-d)."""
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def _combos(set_codes: np.ndarray, cell_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row the code of its (tool set, cell) combination, and per combination its first row."""
    pair = set_codes.astype(np.int64) * (int(cell_codes.max(initial=-1)) + 2) + (cell_codes.astype(np.int64) + 1)
    codes, _ = pd.factorize(pair)
    return codes, first_rows(codes)


def _as_text(rows: pd.DataFrame, candidates: np.ndarray, sid_codes: np.ndarray, names_of: np.ndarray) -> np.ndarray:
    """Per row: a candidate (successful, no call, the request has tools) whose content holds a call of a
    request tool (checked once per distinct (tool names, content))."""
    out = np.zeros(len(rows), dtype=bool)
    if "content" not in rows.columns:
        return out
    at = np.flatnonzero(candidates)
    contents = rows["content"].astype("object").to_numpy(dtype=object)[at]
    names = names_of[sid_codes[at]]
    text_codes, _ = pd.factorize(contents)  # missing content: -1
    name_codes = np.fromiter(map(id, names), dtype=np.int64, count=len(at))
    combos = row_codes(text_codes, name_codes)
    firsts = first_rows(combos)
    found = np.zeros(len(firsts), dtype=bool)
    for combo, i in enumerate(firsts):
        text = contents[i]
        found[combo] = isinstance(text, str) and bool(text) and bool(find_text_calls(text, names[i]))
    out[at] = found[combos]
    return out


#: What one tool_calls cell is annotated with (:data:`CELL_COLUMNS`, in order): calls, verdicts, valid, invalid,
#: uncheckable, parse error, tool signature, call signature, normalised calls.
CellAnnotation = tuple[list[Call], list[str], int, int, int, bool, tuple[str, ...], tuple[tuple[str, str], ...],
                       list[Call]]


def _annotate_cell(cell: Cell, count: Cell, schemas: Mapping[str, tuple[str, JSONValue]] | None, book: CallBook,
                   checker: CallChecker, cells: dict[str, list[JSONObject] | None], norm: CallNormaliser
                   ) -> CellAnnotation:
    """(calls, verdicts, valid, invalid, uncheckable, parse error, tool signature, call signature, normalised
    calls) of one tool_calls cell against one sample's schemas (:data:`CELL_COLUMNS`). The lists are shared by
    every row with the same sample and cell: read-only."""
    if isinstance(cell, str):
        if cell not in cells:
            cells[cell] = parse_tool_calls(cell)
        parsed = cells[cell]
    else:
        parsed = parse_tool_calls(cell)
    if parsed is None:
        k = int(count) if isinstance(count, (int, float)) and count == count and count > 0 else 1
        calls, verdicts = [book.call("", str(cell))], [INVALID] * k
    else:
        calls = [book.call(c.get("name"), c.get("arguments")) for c in parsed]
        verdicts = [checker.verdict(call, schemas) for call in calls]
    counts = (verdicts.count(VALID), verdicts.count(INVALID), verdicts.count(UNCHECKABLE))
    normalised = norm.calls(calls, schemas)
    return (calls, verdicts, *counts, parsed is None,
            tuple(sorted(c.name for c in calls)), tuple(sorted((c.name, c.key) for c in normalised)), normalised)


ROW_FIELDS = ("sample_id", "repeat", "finish_reason", "content", CALLS, VERDICTS, NAMES, AS_TEXT, GOLD, CALLED,
              NCALLS, NGOLD)


def ensure_annotated(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the helper columns (computed without tools or gold when they are missing)."""
    return rows if CALLS in rows.columns else annotate_calls(rows, None, None)


def name_of_row(row: JSONMapping):
    """The sent-name → gold-name mapper of an annotated row (see
    :func:`~avv_scoring.metrics.correctness.name_mapper`)."""
    gold = row.get(GOLD)
    return name_mapper(row.get(NAMES), gold.tool_names if gold is not None else {})


def call_pairs(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> pd.DataFrame:
    """The call pairs of a vendor with the baseline: joined on (sample_id, repeat), both sides successful
    and both called a tool (finished with tool_calls or emitted a call). Columns ``sample_id``, ``repeat``,
    ``calls`` (normalised: ``NCALLS``), ``sig_tools``, ``sig_calls``, ``names``, ``gold`` and the row's index, each
    for the vendor (``_v``) and the baseline (``_b``). Do not modify the result: within an open
    :class:`~avv_scoring.metrics.frame_memo.FrameMemo` it is handed out again for the same two frames (a vendor's
    agreement features and its per-tool table both read it), and the baseline's side is kept for the model's next
    vendor."""
    if store_for(baseline_rows) is None:  # the pairs are kept with the vendor's rows only when both are known
        return _pairs_of(rows, baseline_rows)
    return shared(rows, (call_pairs, id(baseline_rows)), lambda: _pairs_of(rows, baseline_rows))


def _pairs_of(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> pd.DataFrame:
    """The pairs, as the merge of the two :func:`_pair_side` frames on the item (inner join, the vendor's order);
    on arrays when every sample id is present."""
    rows, baseline_rows = ensure_annotated(rows), ensure_annotated(baseline_rows)
    mine, theirs = _called_rows(rows), _called_rows(baseline_rows)
    (ids_v, reps_v), (ids_b, reps_b) = item_keys(rows), item_keys(baseline_rows)
    codes = item_codes(np.concatenate([ids_v[mine], ids_b[theirs]]), np.concatenate([reps_v[mine], reps_b[theirs]]),
                       len(mine))
    if codes is None:
        return _pair_side(rows).merge(_pair_side(baseline_rows), on=PAIR_KEYS, how="inner", suffixes=("_v", "_b"))
    last_v, last_b = last_rows(codes[0]), last_rows(codes[1])
    at = positions_in(codes[0][last_v], codes[1][last_b])
    v, b = mine[last_v[at >= 0]], theirs[last_b[at[at >= 0]]]  # positions in the frames of each pair's rows
    data: dict[str, object] = {"sample_id": rows["sample_id"].astype("object").astype(str).array.take(v),
                            "repeat": reps_v[v]}
    for side, frame, at_rows in (("_v", rows, v), ("_b", baseline_rows, b)):
        for name, column in PAIR_COLUMNS:
            data[name + side] = frame[column].to_numpy(dtype=object)[at_rows]
        data["index" + side] = frame.index.to_numpy()[at_rows]
    return pd.DataFrame(data)


#: The columns of each side of :func:`call_pairs` (before its suffix) and the annotation column each is read from.
PAIR_COLUMNS = (("calls", NCALLS), ("sig_tools", SIG_TOOLS), ("sig_calls", SIG_CALLS), ("names", NAMES),
                ("gold", GOLD))


@per_frame
def _called_rows(frame: pd.DataFrame) -> np.ndarray:
    """The positions of the rows of an annotated frame that called a tool."""
    return np.flatnonzero(frame[CALLED].to_numpy(dtype=bool))


@per_frame
def _pair_side(frame: pd.DataFrame) -> pd.DataFrame:
    """One side of :func:`call_pairs`: the rows that called a tool, the last per (sample_id, repeat)."""
    frame = ensure_annotated(frame)
    frame = frame.loc[frame[CALLED], ["sample_id", "repeat", NCALLS, SIG_TOOLS, SIG_CALLS, NAMES, GOLD]]
    return pd.DataFrame({
        "sample_id": frame["sample_id"].astype("object").astype(str),
        "repeat": numeric(frame["repeat"]).fillna(1).astype(int),
        "calls": frame[NCALLS], "sig_tools": frame[SIG_TOOLS], "sig_calls": frame[SIG_CALLS],
        "names": frame[NAMES], "gold": frame[GOLD], "index": frame.index,
    }).drop_duplicates(subset=PAIR_KEYS, keep="last")


# --------------------------------------------------------------------------------------------------
# Agreement with the baseline


def _agreement_features(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> pd.DataFrame:
    """Per call pair (:func:`call_pairs`, indexed by the vendor's row): equal called names, equal calls, equal
    number of calls, argument F1 (1 where the calls are equal). Equal signatures = equal multisets
    (``tools_equal`` / ``calls_equal``). Computed once per distinct pair of call lists: :func:`annotate_calls` hands
    every row with the same calls the same list objects, and a row's signatures come with its list."""
    pairs = call_pairs(rows, baseline_rows)
    calls_v, calls_b = pairs["calls_v"].to_numpy(dtype=object), pairs["calls_b"].to_numpy(dtype=object)
    codes = row_codes(identity_codes(calls_v), identity_codes(calls_b)) if len(pairs) else np.zeros(0, np.int64)
    firsts = first_rows(codes)
    tools_v, tools_b = pairs["sig_tools_v"].to_numpy(dtype=object)[firsts], pairs["sig_tools_b"].to_numpy(
        dtype=object)[firsts]
    sigs_v, sigs_b = pairs["sig_calls_v"].to_numpy(dtype=object)[firsts], pairs["sig_calls_b"].to_numpy(
        dtype=object)[firsts]
    same_calls = [a == b for a, b in zip(sigs_v, sigs_b, strict=True)]
    return pd.DataFrame({
        "pairs": np.ones(len(pairs), dtype=np.int64),
        "tool_eq": np.array([a == b for a, b in zip(tools_v, tools_b, strict=True)], dtype=np.int64)[codes],
        "args_eq": np.array(same_calls, dtype=np.int64)[codes],
        "count_eq": np.array([len(a) == len(b) for a, b in zip(tools_v, tools_b, strict=True)], dtype=np.int64)[codes],
        # argument F1 only where the calls differ
        "f1": np.array([1.0 if same else args_f1(v, b)
                        for same, v, b in zip(same_calls, calls_v[firsts], calls_b[firsts], strict=True)],
                       dtype=float)[codes],
    }, index=pd.Index(pairs["index_v"]))


@produces(
    Metric("tool_match", "Tool Match", "rate", "higher", order=600, group="correctness", interval=True,
           interval_order=5, ratio=Ratio((("tool_eq", 1.0),), (("pairs", 1.0),)), web=1,
           noise_floor=NoiseFloor("baseline_self_tool_match", test="tool_match_noise_p", what="tool mismatch"),
           regression=Regression("mcnemar", "tools_sig", 0.05),
           prometheus="Share of paired calls naming the baseline's tool so far (`tool_match`).",
           doc="call pairs whose multisets of called names are equal / call_pairs; missing with no pair"),
    Metric("args_match", "Args Match", "rate", "higher", order=610, group="correctness", interval=True,
           interval_order=6, ratio=Ratio((("args_eq", 1.0),), (("pairs", 1.0),)),
           noise_floor=NoiseFloor("baseline_self_args_match", test="args_match_noise_p", what="argument mismatch"),
           doc="call pairs whose calls are equal as (name, canonical arguments) multisets / call_pairs "
               "(values normalised by --arg-normalise, default on)"),
    Metric("args_f1", "Args F1", "rate", "higher", order=620, group="correctness",
           doc="mean over call pairs of 2·matched leaves / all leaves, leaves = (tool, JSON path, value) "
               "(values normalised by --arg-normalise)"),
    Metric("call_count_match", "Call Count Match", "rate", "higher", order=630, group="correctness",
           doc="call pairs with the same number of calls / call_pairs"),
    Metric("call_pairs", "Call pairs", "int", "none", count=True, order=640, group="correctness",
           doc="items joined with a baseline item where both succeeded and both called a tool"),
)
@additive(_agreement_features, resampled=("pairs", "tool_eq", "args_eq"), sequential=("f1",))
def baseline_agreement(sums: Sums) -> Columns:
    """Which tool and which arguments, compared with the baseline, per (sample_id, repeat) pair.

    Over the ``call_pairs`` pairs where both sides succeeded and both called a tool (finished with
    ``tool_calls`` or emitted at least one call), with the definitions of :mod:`avv_scoring.metrics.correctness`,
    on argument values normalised by the run's ``--arg-normalise`` (:mod:`avv_scoring.metrics.normalisers`;
    default: every normaliser; ``none``: the exact values)::

        tool_match       = pairs whose multisets of called names are equal / call_pairs
        args_match       = pairs whose multisets of (name, canonical arguments) are equal / call_pairs
        args_f1          = mean over pairs of 2·matched leaves / (vendor leaves + baseline leaves)
        call_count_match = pairs with the same number of calls / call_pairs

    A pair where only one side called a tool is a trigger disagreement (trigger F1), not counted here.
    Missing with no pair. The baseline against itself scores 1.0 wherever it has a pair.
    """
    n = count(sums["pairs"])
    return {
        "tool_match": rate(count(sums["tool_eq"]), n),
        "args_match": rate(count(sums["args_eq"]), n),
        "args_f1": rate(sums["f1"], n),
        "call_count_match": rate(count(sums["count_eq"]), n),
        "call_pairs": n,
    }


# --------------------------------------------------------------------------------------------------
# Gold labels


@per_frame
def positive(rows: pd.DataFrame) -> pd.Series:
    """Successful rows finishing with ``tool_calls`` (the trigger positive of F1 and of the gold trigger)."""
    finish = (rows["finish_reason"].astype("object") == TOOL_CALLS).fillna(False).astype(bool)
    return is_success(rows) & finish


@produces(
    Metric("gold_trigger_accuracy", "Gold Trigger Acc", "rate", "higher", order=650, group="correctness", needs="gold",
           doc="(TP + TN) / gold_labelled against expected_tool_call (MiniMax ToolCalls-Match-Rate)"),
    Metric("gold_tool_accuracy", "Gold Tool Acc", "rate", "higher", order=660, group="correctness", needs="gold_calls",
           doc="gold_call_items whose called names equal expected_calls' (as multisets) / gold_call_items"),
    Metric("gold_args_accuracy", "Gold Args Acc", "rate", "higher", order=670, group="correctness", needs="gold_calls",
           doc="gold_call_items whose calls pair one to one with expected_calls (possible answers, any order; "
               "exact values)"),
    Metric("gold_args_f1", "Gold Args F1", "rate", "higher", order=675, group="correctness", needs="gold_calls",
           doc="mean over gold_call_items of the weighted leaf F1 of the calls against expected_calls (values "
               "normalised by --arg-normalise; required keys 2×, optional 1×)"),
    Metric("gold_labelled", "Gold labelled", "int", "none", count=True, order=680, group="correctness",
           doc="successful items whose sample has expected_tool_call"),
    Metric("gold_call_items", "Gold call items", "int", "none", order=690, group="correctness",
           doc="successful items whose sample has expected_calls"),
    Metric("gold_failed", "Gold failed", "int", "none", count=True, order=700,
           doc="labelled items that failed (left out of the gold metrics; their cost is in success_rate)"),
)
def gold_accuracy(rows: pd.DataFrame) -> Columns:
    """Accuracy against the samples' gold labels, for every vendor (the baseline can be wrong too).

    Over successful items whose sample has ``expected_tool_call`` (``gold_labelled``), positive = finished
    with ``tool_calls`` (as in trigger F1)::

        gold_trigger_accuracy = (TP + TN) / gold_labelled        (MiniMax ToolCalls-Match-Rate)

    Over successful items whose sample has ``expected_calls`` (``gold_call_items``), with the calls the
    vendor emitted (whatever the finish_reason; a call content written as text is no call)::

        gold_tool_accuracy = items whose multiset of called names equals the expected one / gold_call_items
        gold_args_accuracy = items whose calls pair one to one with the expected calls / gold_call_items
        gold_args_f1       = mean over gold_call_items of the item's weighted argument F1 (below)

    where a call matches an expected call when its name (mapped back through ``tool_names``; a name that is
    not one of the request's tools never matches) is the expected one, every expected argument is present
    with an acceptable value (or absent when ``""`` is acceptable) and no other argument is present (BFCL
    AST-style; :mod:`avv_scoring.metrics.correctness`) — exact values. ``gold_args_f1`` credits a call that is
    partly right and compares values by meaning: the calls and the acceptable values are normalised
    (``--arg-normalise``), each leaf of a required argument weighs 2, of an optional one 1, and an item's F1 is
    ``2·matched / (gold + predicted)`` (:func:`avv_scoring.metrics.gold_f1.gold_args_f1`). Failed labelled items
    are counted in ``gold_failed``. Each is missing when its denominator is 0.
    """
    rows = ensure_annotated(rows)
    golds = rows[GOLD].to_numpy(dtype=object)  # masks over single columns: the wide frame is taken only if needed
    labelled = np.fromiter((g is not None and bool(g.labelled) for g in golds), dtype=bool, count=len(golds))
    ok = is_success(rows).to_numpy(dtype=bool)
    scored = labelled & ok
    scored_golds = golds[scored]
    expected = np.fromiter((bool(g.expected_tool_call) for g in scored_golds), dtype=bool, count=len(scored_golds))
    right_trigger = int((positive(rows).to_numpy(dtype=bool)[scored] == expected).sum())
    with_calls = scored.copy()
    with_calls[scored] = [g.expected_calls is not None for g in scored_golds]
    tool_ok = args_ok = n_calls = 0
    f1_sum = 0.0
    f1_of: dict[tuple[int, int, int], float] = {}  # rows share their calls and gold objects: each pair scored once
    for row in row_dicts(rows[with_calls], ROW_FIELDS) if with_calls.any() else ():
        gold, calls, name_of = row[GOLD], row[CALLS], name_of_row(row)
        n_calls += 1
        tool_ok += tools_match_gold(calls, gold.expected_calls, name_of)
        args_ok += calls_match_gold(calls, gold.expected_calls, name_of)
        memo = (id(row[NCALLS]), id(row[NGOLD]), id(row[NAMES]))
        if memo not in f1_of:
            f1_of[memo] = gold_args_f1(row[NCALLS], row[NGOLD] or (), name_of)
        f1_sum += f1_of[memo]
    return {
        "gold_trigger_accuracy": rate(right_trigger, int(scored.sum())),
        "gold_tool_accuracy": rate(tool_ok, n_calls),
        "gold_args_accuracy": rate(args_ok, n_calls),
        "gold_args_f1": rate(f1_sum, n_calls),
        "gold_labelled": int(scored.sum()),
        "gold_call_items": n_calls,
        "gold_failed": int((labelled & ~ok).sum()),
    }


# --------------------------------------------------------------------------------------------------
# Anomalies


@produces(
    Metric("anomaly_counts", "Anomalies", "text", "none", count=True, order=710,
           doc="items per anomaly (records' anomalies column) as anomaly:count;… (most frequent first)"),
)
def anomaly_counts(rows: pd.DataFrame) -> Columns:
    """Items per anomaly flag (README "Anomalies"), as ``anomaly:count`` joined by ``;``, most frequent
    first; empty when no item has one. Counted over every item, successful or not."""
    counts: Counter[str] = Counter()
    cells = rows["anomalies"].astype("object") if "anomalies" in rows.columns else pd.Series([], dtype=object)
    for cell in cells:
        if isinstance(cell, str) and cell:
            counts.update(dict.fromkeys(cell.split(";"), 1))
    return {"anomaly_counts": ";".join(f"{k}:{n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))}
