"""Argument normalisers (scoring layer, pure, no I/O): compare tool-call arguments by meaning, not by spelling.

Each normaliser is declared once in :data:`NORMALISERS` — its name, what it does, the schema condition that enables
it and its examples — and docs/scoring.md shows the table :func:`render_normaliser_table` renders from it. Before two
argument values are compared (``args_match`` / ``args_f1`` against the baseline, ``gold_args_f1`` against gold),
each value is rewritten by the enabled normalisers, guided by the JSON schema of its property in the request's tool
definition (``properties`` of objects, ``items`` of arrays, the types of ``anyOf`` / ``oneOf`` branches):

- ``dates``: a string that is a whole date or date-time in one of the accepted forms becomes one canonical form;
- ``numbers``: a string holding a number where the schema says ``number`` / ``integer`` becomes that number;
- ``booleans``: ``"true"`` / ``"false"`` where the schema says ``boolean`` becomes the boolean;
- ``case``: an enum value, or a string the schema marks as an ID, loses its surrounding whitespace and its case.

A value no normaliser applies to is compared as before (:mod:`avv_core.canonical`). :class:`ArgNormalisation` says
which normalisers a run uses (``--arg-normalise none|default|FILE``, read by :mod:`avv_scoring.arg_normalise`).
Normalisation never makes a broken call whole: arguments that do not parse stay unparsed, and schema accuracy is
always judged on the arguments as sent.

Gold argument F1 over the normalised values is :mod:`avv_scoring.metrics.gold_f1`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from avv_core.canonical import canonical_key
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_scoring.metrics.correctness import Call, acceptable
from avv_scoring.metrics.gold_f1 import ExpectedCall

#: A property name that marks an ID (``case`` applies): ``id``, ``*_id``, ``*Id``, ``*_code``, ``*Code`` (and
#: their plurals), e.g. ``airport_code``, ``userId``, ``order_ids``.
DEFAULT_ID_KEYS = r"(?:^|_)(?:id|code)s?$|[a-z0-9](?:Id|Code)s?$|^(?:ID|Id|Code|CODE)s?$"
#: Schema ``format`` values that mark an ID.
ID_FORMATS = frozenset({"uuid"})


@dataclass(frozen=True)
class Where:
    """What a normaliser may look at besides the value: the property's name and its JSON schema (None: unknown)."""

    key: str
    schema: JSONMapping | None
    id_keys: re.Pattern[str]

    @property
    def types(self) -> frozenset[str]:
        """The JSON types the schema allows (``type``, and the ``type`` of each ``anyOf`` / ``oneOf`` branch)."""
        return frozenset(_types(self.schema))

    @property
    def enum_strings(self) -> bool:
        return any(isinstance(v, str) for v in _enum(self.schema))

    @property
    def is_id(self) -> bool:
        schema = self.schema or {}
        return bool(self.id_keys.search(self.key)) or schema.get("format") in ID_FORMATS


def _branches(schema: JSONMapping | None) -> list[JSONMapping]:
    if not isinstance(schema, Mapping):
        return []
    out = [schema]
    for word in ("anyOf", "oneOf"):
        out += [b for b in schema.get(word) or [] if isinstance(b, Mapping)]
    return out


def _types(schema: JSONMapping | None) -> set[str]:
    out: set[str] = set()
    for branch in _branches(schema):
        t = branch.get("type")
        out.update([t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else [])
    return out


def _enum(schema: JSONMapping | None) -> list[JSONValue]:
    return [v for b in _branches(schema) for v in (b.get("enum") or [])]


# ------------------------------------------------------------------------------------------------ dates

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december"))}
_MONTHS.update({name[:3]: i for name, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>[A-Za-z]{3,9})\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_WEEKDAY = r"(?:[A-Za-z]{3,9},?\s+)?"
_ISO_DATE = re.compile(r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})")
_SLASH_DATE = re.compile(r"(?P<year>\d{4})/(?P<month>\d{1,2})/(?P<day>\d{1,2})")
_ISO_DATETIME = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[T ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d{1,6}))?)?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<tzh>\d{2}):?(?P<tzm>\d{2}))?")
_WRITTEN = (re.compile(_WEEKDAY + _MONTH + r"\s+" + _DAY + r",?\s+(?P<year>\d{4})"),  # May 26, 2026
            re.compile(_WEEKDAY + _DAY + r"\s+" + _MONTH + r",?\s+(?P<year>\d{4})"))  # 26 May 2026


def _date(year: str, month: str, day: str) -> dt.date | None:
    number = int(month) if month.isdigit() else _MONTHS.get(month.lower())
    try:
        return dt.date(int(year), number, int(day)) if number else None
    except ValueError:
        return None


def canonical_date(text: str) -> str | None:
    """``text`` as a canonical date or date-time, or None when it is not wholly one of the accepted forms:

    - a date (``2026-05-26``, ``2026/05/26``, ``May 26, 2026``, ``26 May 2026``, ``Tue, May 26th 2026``; month names
      in English, full or three letters) → ``2026-05-26``;
    - an ISO 8601 date-time (``T`` or a space; seconds and fraction optional) without an offset →
      ``2026-05-26T10:00:00`` (local time, as given); with ``Z`` or an offset (``+02:00``, ``+0200``) → that
      instant in UTC, ``2026-05-26T08:00:00Z``.

    Numeric day/month orders (``05/26/2026``, ``26/05/2026``) are ambiguous and left as they are; so is a date-time
    written in words. A date and a date-time are never equal (``2026-05-26`` ≠ ``2026-05-26T00:00:00``)."""
    text = text.strip()
    match = _ISO_DATETIME.fullmatch(text)
    if match:
        g = match.groupdict()
        day = _date(g["year"], g["month"], g["day"])
        if day is None or int(g["hour"]) > 23 or int(g["minute"]) > 59 or int(g["second"] or 0) > 59:
            return None
        micro = int((g["fraction"] or "0").ljust(6, "0"))
        moment = dt.datetime(day.year, day.month, day.day, int(g["hour"]), int(g["minute"]), int(g["second"] or 0),
                             micro)
        if g["utc"] or g["sign"]:
            offset = dt.timedelta(hours=int(g["tzh"] or 0), minutes=int(g["tzm"] or 0))
            moment = (moment - (offset if g["sign"] != "-" else -offset))
            return moment.isoformat() + "Z"
        return moment.isoformat()
    for pattern in (_ISO_DATE, _SLASH_DATE, *_WRITTEN):
        match = pattern.fullmatch(text)
        if match:
            day = _date(match["year"], match["month"], match["day"])
            return day.isoformat() if day else None
    return None


def _is_date(value: object, where: Where) -> TypeGuard[str]:
    types = where.types
    return isinstance(value, str) and (not types or "string" in types) and canonical_date(value) is not None


def _to_date(value: str) -> str:
    return canonical_date(value) or value


# ---------------------------------------------------------------------------------------------- numbers

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _is_number_text(value: object, where: Where) -> TypeGuard[str]:
    return (isinstance(value, str) and bool(where.types & {"number", "integer"})
            and _NUMBER.fullmatch(value.strip()) is not None and math.isfinite(float(value)))


def _to_number(value: str) -> int | float:
    number = float(value)
    return int(number) if number.is_integer() and abs(number) < 2 ** 53 else number


def _is_bool_text(value: object, where: Where) -> TypeGuard[str]:
    return isinstance(value, str) and "boolean" in where.types and value.strip().lower() in ("true", "false")


def _to_bool(value: str) -> bool:
    return value.strip().lower() == "true"


def _is_enum_or_id(value: object, where: Where) -> TypeGuard[str]:
    return isinstance(value, str) and (where.enum_strings or where.is_id)


def _to_folded(value: str) -> str:
    return value.strip().casefold()


@dataclass(frozen=True)
class Example:
    """One case of a normaliser: two values of a property with ``schema`` (named ``key``) that differ in spelling."""

    first: JSONValue
    second: JSONValue
    schema: JSONMapping | None = None
    key: str = "value"


@dataclass(frozen=True)
class Normaliser:
    """One argument normaliser: where it applies and what it makes of a value (see the module docstring)."""

    name: str
    does: str  # one line: what the value becomes
    when: str  # one line: the schema condition that enables it
    applies: Callable[[object, Where], TypeGuard[str]]  # only strings are rewritten
    rewrite: Callable[[str], str | int | float | bool]
    examples: tuple[Example, ...] = ()


NORMALISERS: tuple[Normaliser, ...] = (
    Normaliser("dates", "a whole date → YYYY-MM-DD; an ISO date-time → YYYY-MM-DDTHH:MM:SS, with Z / an offset → "
               "the UTC instant …Z", "a string value (the schema allows a string, or is unknown)",
               _is_date, _to_date,
               (Example("2026-05-26", "May 26, 2026", {"type": "string"}, "date"),
                Example("26 May 2026", "2026/05/26", {"type": "string"}, "date"),
                Example("2026-05-26T10:00:00+02:00", "2026-05-26T08:00Z", {"type": "string"}, "start"),
                Example("05/26/2026", "2026-05-26", {"type": "string"}, "date"))),
    Normaliser("numbers", "a string holding a decimal number → that number (5, 5.0 and \"5\" are one value)",
               "the schema's type is number or integer", _is_number_text, _to_number,
               (Example("5", 5, {"type": "integer"}, "nights"), Example("5.0", 5, {"type": "number"}, "amount"))),
    Normaliser("booleans", "\"true\" / \"false\" (any case, surrounding spaces) → true / false",
               "the schema's type is boolean", _is_bool_text, _to_bool,
               (Example("true", True, {"type": "boolean"}, "refundable"),)),
    Normaliser("case", "surrounding whitespace dropped, case folded (\"FRA\" = \"fra\" = \" Fra \")",
               "a string of a property with a string enum, or marked as an ID: its name is id, *_id, *Id, *_code, "
               "*Code (or plural), or its format is uuid", _is_enum_or_id, _to_folded,
               (Example("FRA", "fra", {"type": "string", "enum": ["FRA", "JFK"]}, "origin"),
                Example(" FRA", "fra", {"type": "string"}, "airport_code"),
                Example("Berlin", "berlin", {"type": "string"}, "city"))),
)
NORMALISER_NAMES: tuple[str, ...] = tuple(n.name for n in NORMALISERS)
_BY_NAME = {n.name: n for n in NORMALISERS}


@dataclass(frozen=True)
class ArgNormalisation:
    """Which normalisers a run applies (``--arg-normalise``): ``source`` names where the choice came from."""

    names: tuple[str, ...] = NORMALISER_NAMES  # enabled normalisers, in NORMALISERS order
    id_keys: str = DEFAULT_ID_KEYS  # regex a property name matches when it is an ID
    source: str = "default"  # "default", "none" or the file

    def __post_init__(self) -> None:
        unknown = [n for n in self.names if n not in _BY_NAME]
        if unknown:
            raise ValueError(f"unknown normaliser(s) {', '.join(unknown)} (known: {', '.join(NORMALISER_NAMES)})")
        object.__setattr__(self, "names", tuple(n for n in NORMALISER_NAMES if n in self.names))
        re.compile(self.id_keys)

    @classmethod
    def none(cls) -> ArgNormalisation:
        return cls((), source="none")

    @property
    def active(self) -> bool:
        return bool(self.names)

    def text(self) -> str:
        """One line for reports: ``dates, numbers, booleans, case (--arg-normalise default)``."""
        return f"{', '.join(self.names) or 'none (exact values)'} (--arg-normalise {self.source})"

    def to_dict(self) -> JSONObject:
        return {"normalisers": list(self.names), "id_keys": self.id_keys, "source": self.source}


#: Normalised leaves already seen: (key, id of the schema, the value's type, the value) → (the schema, the leaf
#: normalised). The schema is kept to tell a reused id apart; the type and a float's repr tell apart values that
#: compare equal (``1``, ``1.0``, ``True``; ``0.0``, ``-0.0``).
LeafMemo = dict[tuple[object, ...], tuple[object, JSONValue]]


def normalise_value(value: object, schema: JSONMapping | None, settings: ArgNormalisation, key: str = "",
                    leaves: LeafMemo | None = None) -> JSONValue:
    """``value`` (a property ``key`` with ``schema``) with every enabled normaliser applied, objects property by
    property and arrays element by element (see the module docstring). ``leaves``: a memo of the leaves normalised
    with the same ``settings`` (each distinct (key, schema, value) normalised once)."""
    pattern = re.compile(settings.id_keys)
    return _walk(value, schema, key, [_BY_NAME[n] for n in settings.names], pattern, leaves)


def _sub_schema(schema: JSONMapping | None, word: str, key: str | None = None) -> JSONMapping | None:
    for branch in _branches(schema):
        found = branch.get(word)
        if key is not None:
            found = found.get(key) if isinstance(found, Mapping) else None
        if isinstance(found, Mapping):
            return found
    return None


def _walk(value: object, schema: JSONMapping | None, key: str, enabled: Sequence[Normaliser],
          pattern: re.Pattern[str], leaves: LeafMemo | None = None) -> JSONValue:
    if isinstance(value, Mapping):
        return {k: _walk(v, _sub_schema(schema, "properties", str(k)), str(k), enabled, pattern, leaves)
                for k, v in value.items()}
    if isinstance(value, list):
        items = _sub_schema(schema, "items")
        return [_walk(v, items, key, enabled, pattern, leaves) for v in value]
    memo = None
    if leaves is not None and isinstance(value, (str, int, float, type(None))):  # bool is an int
        memo = (key, id(schema), type(value), repr(value) if isinstance(value, float) else value)
        found = leaves.get(memo)
        if found is not None and found[0] is schema:
            return found[1]
    where = Where(key, schema if isinstance(schema, Mapping) else None, pattern)
    for normaliser in enabled:
        if normaliser.applies(value, where):
            value = normaliser.rewrite(value)
    if memo is not None and leaves is not None:
        leaves[memo] = (schema, value)  # type: ignore[assignment]  # a JSON leaf
    return value


def example_outcome(example: Example, settings: ArgNormalisation | None = None) -> tuple[bool, bool]:
    """(equal exactly, equal after normalisation) of an :class:`Example`."""
    settings = settings if settings is not None else ArgNormalisation()
    exact = canonical_key(example.first) == canonical_key(example.second)
    normal = canonical_key(normalise_value(example.first, example.schema, settings, example.key)) == \
        canonical_key(normalise_value(example.second, example.schema, settings, example.key))
    return exact, normal


def render_normaliser_table() -> str:
    """The docs/scoring.md table (Markdown): normaliser, what it does, when it applies, its examples as
    ``a`` vs ``b`` → exact / normalised."""
    import json

    rows = ["| Normaliser | What it does | Enabled when | Example (schema) | Exact | Normalised |",
            "|---|---|---|---|---|---|"]
    for n in NORMALISERS:
        for i, ex in enumerate(n.examples):
            exact, normal = example_outcome(ex, ArgNormalisation((n.name,), source=n.name))
            pair = (f"`{ex.key}`: `{json.dumps(ex.first)}` vs `{json.dumps(ex.second)}` "
                    f"(`{json.dumps(ex.schema, separators=(',', ':'))}`)")
            head = (f"`{n.name}`", n.does, n.when) if i == 0 else ("", "", "")
            cells = (*head, pair, "match" if exact else "differ", "match" if normal else "differ")
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


# --------------------------------------------------------------------------------------- calls, normalised


@dataclass
class CallNormaliser:
    """Normalised calls and gold expectations for one scoring pass (caches by schema and raw arguments; holds no
    run state beyond the pass)."""

    settings: ArgNormalisation = field(default_factory=ArgNormalisation)
    _calls: dict[tuple[str, str, str], Call] = field(default_factory=dict)
    _leaves: LeafMemo = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = None

    def call(self, call: Call, schemas: Mapping[str, tuple[str, JSONValue]] | None) -> Call:
        """``call`` with its arguments normalised against its tool's schema (``schemas`` = name → (key,
        parameters), None: unknown); the same object when nothing changes or it did not parse."""
        if not self.settings.active or not call.parsed:
            return call
        entry = (schemas or {}).get(call.name)
        memo = (entry[0] if entry else "", call.name, call.raw)
        found = self._calls.get(memo)
        if found is None:
            args = normalise_value(call.args, entry[1] if entry else None, self.settings, leaves=self._leaves)
            found = call if canonical_key(args) == call.key else Call(call.name, call.raw, args)
            self._calls[memo] = found
        return found

    def calls(self, calls: Sequence[Call], schemas: Mapping[str, tuple[str, JSONValue]] | None) -> list[Call]:
        return [self.call(c, schemas) for c in calls]

    def expected(self, expected: Sequence[JSONMapping] | None, wire_name: Callable[[str], str],
                 schemas: Mapping[str, tuple[str, JSONValue]] | None) -> tuple[ExpectedCall, ...] | None:
        """The gold calls with each acceptable value normalised like a call of that tool, and the tool's required
        keys (``wire_name`` maps a gold name to the name the request's tools use)."""
        if expected is None:
            return None
        out = []
        for e in expected:
            name = str(e.get("name"))
            entry = (schemas or {}).get(wire_name(name))
            params = entry[1] if entry and isinstance(entry[1], Mapping) else None
            required = frozenset(k for k in (params or {}).get("required") or [] if isinstance(k, str))
            args = {str(key): self._options(acceptable(wanted), _sub_schema(params, "properties", str(key)), str(key))
                    for key, wanted in (e.get("arguments") or {}).items()}
            out.append(ExpectedCall(name, args, required))
        return tuple(out)

    def _options(self, options: Sequence[JSONValue], schema: JSONMapping | None, key: str) -> tuple[JSONValue, ...]:
        """Acceptable values normalised: an object alternative key by key (its values are acceptable-value lists
        again), an array alternative element by element, the optional marker ``""`` kept."""
        return tuple(self._alternative(o, schema, key) for o in options)

    def _alternative(self, option: object, schema: JSONMapping | None, key: str) -> JSONValue:
        if isinstance(option, str) and option == "":
            return option
        if isinstance(option, Mapping):
            return {str(k): list(self._options(acceptable(v), _sub_schema(schema, "properties", str(k)), str(k)))
                    for k, v in option.items()}
        if isinstance(option, list):
            items = _sub_schema(schema, "items")
            return [self._alternative(x, items, key) if isinstance(x, Mapping)
                    else normalise_value(x, items, self.settings, key) for x in option]
        return normalise_value(option, schema, self.settings, key)


__all__ = ["DEFAULT_ID_KEYS", "NORMALISERS", "NORMALISER_NAMES", "ArgNormalisation", "CallNormaliser", "Example",
           "Normaliser", "Where", "canonical_date", "example_outcome", "normalise_value", "render_normaliser_table"]
