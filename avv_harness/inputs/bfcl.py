"""Berkeley Function Calling Leaderboard (BFCL v4) questions → avv sample lines with gold labels (inputs layer).

Reads ``DIR/BFCL_v4_<category>.json`` (JSON Lines: ``id``, ``question`` = turns of messages, ``function`` =
tool definitions) and ``DIR/possible_answer/BFCL_v4_<category>.json`` (``id``, ``ground_truth`` = a list of
``{function name: {parameter: [acceptable values]}}``) and writes one request body per question:

- ``messages``: the question's turns, flattened in order;
- ``tools``: OpenAI ``{"type": "function", "function": {name, description, parameters}}``. BFCL's parameter
  types are not JSON Schema: ``dict`` → ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` →
  no ``type``; the non-standard ``optional`` key is dropped. Names outside ``^[A-Za-z0-9_-]{1,64}$`` (BFCL's
  dotted ``math.factorial``) get every other character replaced by ``_`` (``math_factorial``; a clash within one
  request gets ``_2``, ``_3``…) and the line's ``tool_names`` maps each wire name back to the original;
- gold: ``expected_tool_call`` false for the irrelevance categories, true otherwise; ``expected_calls`` =
  the ground truth with the original names (BFCL's possible answers, ``""`` = may be left out);
- ``data_index`` = the BFCL id; ``_category`` = the category (a note; never sent).

Questions whose ground truth cannot be met (a parameter with no acceptable value, a function that is not
among the question's tools) are skipped and listed. The data is Apache-2.0 (see samples/README.md).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from avv_core.errors import InputError
from avv_core.json_input import parse_json
from avv_core.json_types import JSONObject, JSONValue

#: Categories whose correct answer is no tool call at all (no possible_answer file upstream).
NO_CALL_CATEGORIES = frozenset({"irrelevance", "live_irrelevance"})
#: Categories whose correct answer is some tool call, without a ground truth to grade the call itself.
ANY_CALL_CATEGORIES = frozenset({"live_relevance"})
TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array"}
_WIRE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FILE_RE = re.compile(r"^BFCL_v4_(?P<category>[a-z_]+)\.json$")


@dataclass
class Conversion:
    """What :func:`convert` produced: the lines, and per category the counts written and skipped."""

    lines: list[JSONObject] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # category → "id: reason"


def available_categories(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError as exc:
        raise InputError(f"{folder}: cannot read the BFCL folder ({exc.strerror})") from None
    return sorted(m.group("category") for n in names if (m := _FILE_RE.match(n)))


def convert_schema(node: object) -> JSONValue:
    """A BFCL parameter schema as JSON Schema (see the module docstring); other keys are kept as they are."""
    if isinstance(node, list):
        return [convert_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: JSONObject = {}
    for key, value in node.items():
        if key == "optional":
            continue
        if key == "type":
            if value == "any":
                continue
            out[key] = TYPE_MAP.get(value, value) if isinstance(value, str) else value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: convert_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = convert_schema(value)
        else:
            out[key] = value
    return out


def wire_names(names: Sequence[str]) -> dict[str, str]:
    """original → wire name for one request's tools: valid OpenAI names, unique within the request."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = name if _WIRE_NAME_RE.match(name) else (re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool")
        wire, k = base, 1
        while wire in taken:
            k += 1
            wire = f"{base[:60]}_{k}"
        taken.add(wire)
        out[name] = wire
    return out


def _read_jsonl(path: str) -> Iterator[tuple[int, JSONObject]]:
    try:
        with open(path, encoding="utf-8") as fh:
            for line_no, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                obj = parse_json(text, f"{path}:{line_no}")
                if not isinstance(obj, dict) or "id" not in obj:
                    raise InputError(f"{path}:{line_no}: expected an object with an 'id'")
                yield line_no, obj
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


def spread(n: int, k: int | None) -> list[int]:
    """``k`` indices spread evenly over ``range(n)`` (all of them when ``k`` is None or ≥ n)."""
    if k is None or k >= n:
        return list(range(n))
    return [i * n // k for i in range(k)]


def _expected_calls(truth: list[JSONValue], originals: set[str]) -> tuple[list[JSONObject] | None, str]:
    calls = []
    for entry in truth:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None, "a ground-truth entry is not {function: arguments}"
        (name, args), = entry.items()
        if name not in originals:
            return None, f"ground truth calls {name!r}, which is not among the question's functions"
        if not isinstance(args, dict) or any(isinstance(v, list) and not v for v in args.values()):
            return None, "a parameter has no acceptable value"
        calls.append({"name": name, "arguments": args})
    return calls, ""


def convert_question(record: JSONObject, category: str, truth: list[JSONValue] | None) -> tuple[dict | None, str]:
    """One BFCL question → a sample line (or None and why it was skipped)."""
    messages = [m for turn in record.get("question") or [] for m in (turn if isinstance(turn, list) else [turn])]
    if not messages:
        return None, "no messages"
    functions = [f for f in record.get("function") or [] if isinstance(f, dict) and isinstance(f.get("name"), str)]
    names = wire_names([f["name"] for f in functions])
    line: JSONObject = {"data_index": str(record["id"]), "messages": messages}
    if functions:
        line["tools"] = [{"type": "function", "function": {
            "name": names[f["name"]], "description": f.get("description", ""),
            "parameters": convert_schema(f.get("parameters") or {"type": "dict", "properties": {}})}}
            for f in functions]
    if category in NO_CALL_CATEGORIES:
        line["expected_tool_call"] = False
    elif category in ANY_CALL_CATEGORIES or truth is None:
        line["expected_tool_call"] = True
    else:
        calls, why = _expected_calls(truth, {f["name"] for f in functions})
        if calls is None:
            return None, why
        line["expected_tool_call"] = True
        line["expected_calls"] = calls
    renamed = {wire: orig for orig, wire in names.items() if wire != orig}
    if renamed:
        line["tool_names"] = renamed
    line["_category"] = category
    return line, ""


def convert(folder: str, categories: Sequence[str], per_category: int | None = None) -> Conversion:
    """Convert the given categories of a BFCL v4 data folder (see the module docstring).

    ``per_category`` = at most this many questions per category, spread evenly over the convertible ones in
    file order (the same selection every time; every skipped question is listed). Unknown categories,
    unreadable files and a missing possible_answer file for a category that needs one raise :class:`InputError`.
    """
    known = available_categories(folder)
    unknown = [c for c in categories if c not in known]
    if unknown:
        raise InputError(f"{folder}: no BFCL_v4_<category>.json for {', '.join(unknown)} "
                         f"(available: {', '.join(known) or 'none'})")
    out = Conversion()
    for category in categories:
        questions = [obj for _, obj in _read_jsonl(os.path.join(folder, f"BFCL_v4_{category}.json"))]
        answers: dict[str, list[JSONValue] | None] | None = None
        if category not in NO_CALL_CATEGORIES | ANY_CALL_CATEGORIES:
            path = os.path.join(folder, "possible_answer", f"BFCL_v4_{category}.json")
            if not os.path.isfile(path):
                raise InputError(f"{path}: missing (category {category} needs its possible answers)")
            answers = {str(obj["id"]): obj.get("ground_truth") for _, obj in _read_jsonl(path)}
        converted, skipped = [], []
        for record in questions:
            truth = None if answers is None else answers.get(str(record["id"]))
            line, why = (None, "no possible answer") if answers is not None and truth is None else \
                convert_question(record, category, truth)
            if line is None:
                skipped.append(f"{record['id']}: {why}")
            else:
                converted.append(line)
        picked = [converted[i] for i in spread(len(converted), per_category)]
        out.lines += picked
        out.written[category], out.skipped[category] = len(picked), skipped
    return out


def write_lines(lines: Sequence[JSONObject], path: str) -> None:
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror})") from None
