"""Tool-call correctness, pure (scoring layer, no pandas, no I/O): canonical arguments, agreement of two
responses' calls, and matching calls against gold labels (BFCL's possible-answer convention).

**Canonical arguments.** A call's ``arguments`` string is parsed as JSON and compared as a value: object key
order is ignored, numbers compare by value (``1 == 1.0``, ``-0.0 == 0``), ``true`` is not ``1``, strings
compare exactly after JSON decoding (``"\\u00e9" == "é"``, but no Unicode normalisation and no case folding),
arrays keep their order. Arguments that do not parse as JSON compare by their raw text (stripped), so two
identical broken strings are equal and a broken string never equals a parsed value. The canonical form is
defined once in :mod:`avv_core.canonical` (agent tasks match recorded tool results with it) and re-exported here.

**Agreement of two responses** (vendor vs baseline), each a list of calls:

- tool match: the multisets of called names are equal;
- call match: the multisets of (name, canonical arguments) are equal;
- argument F1: over flattened leaves (name, JSON path, canonical value) — an empty object or array is a
  leaf itself, unparseable arguments are one leaf — calls of the same name paired one to one by the largest
  total overlap; ``F1 = 2·matched leaves / (vendor leaves + baseline leaves)``;
- call count match: the same number of calls.

**Gold** (``expected_calls``; see :mod:`avv_core.samples`): an argument's expected value is its list of
acceptable values (a non-list is one acceptable value). A call matches an expected call when the names are
equal, every expected argument is present with an acceptable value — or absent when ``""`` is among its
acceptable values — and no other argument is present. An acceptable value that is an object is matched key
by key the same way (its values are again acceptable-value lists); one that is an array must have the same
length and match element by element (object elements key by key, others canonically). A response matches
the gold calls when its calls can be paired one to one with them, in any order.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from avv_core.canonical import UNPARSED, canonical, canonical_key, parse_arguments  # noqa: F401 (re-exported)
from avv_core.json_types import JSONMapping, JSONValue

#: Past this many candidate pairings of same-name calls the F1 pairing is greedy (largest overlap first).
EXACT_PAIRING_LIMIT = 5040


@dataclass(frozen=True)
class Call:
    """One tool call as recorded: the name sent, the raw arguments and their parsed value. Its canonical
    key and leaves are computed once, on first use (scoring compares the same call many times: against the
    baseline, against gold, per tool, per repeat)."""

    name: str
    raw: str
    args: JSONValue  # parsed JSON, or UNPARSED

    @classmethod
    def of(cls, name: object, raw: object) -> Call:
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
        return cls(name if isinstance(name, str) else "", text, parse_arguments(raw))

    @property
    def parsed(self) -> bool:
        return self.args is not UNPARSED

    @cached_property
    def key(self) -> str:
        """Canonical arguments (the raw text, marked, when they do not parse)."""
        return canonical_key(self.args) if self.parsed else "\x00raw:" + self.raw.strip()

    @cached_property
    def leaf_counts(self) -> Counter[tuple[str, str, str]]:
        return _leaves(self)

    def show(self) -> str:
        """``name({...})`` with the arguments as sent."""
        return f"{self.name}({self.raw})"


class CallBook:
    """Interns calls by (name, raw arguments): equal calls in many rows are parsed and canonicalised once.
    One per scoring pass; holds no run state beyond it."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], Call] = {}

    def call(self, name: object, raw: object) -> Call:
        key = (name if isinstance(name, str) else "", raw if isinstance(raw, str) else json.dumps(raw))
        found = self._calls.get(key)
        if found is None:
            found = self._calls[key] = Call.of(name, raw)
        return found


# ------------------------------------------------------------------------------------ agreement of two sides


def tools_equal(a: Sequence[Call], b: Sequence[Call]) -> bool:
    """The multisets of called names are equal."""
    return Counter(c.name for c in a) == Counter(c.name for c in b)


def calls_equal(a: Sequence[Call], b: Sequence[Call]) -> bool:
    """The multisets of (name, canonical arguments) are equal."""
    return Counter((c.name, c.key) for c in a) == Counter((c.name, c.key) for c in b)


def leaves(call: Call) -> Counter[tuple[str, str, str]]:
    """(name, JSON path, canonical value) of every leaf of the arguments (see the module docstring)."""
    return call.leaf_counts


def value_leaves(value: object, path: str = "") -> Counter[tuple[str, str]]:
    """(JSON path, canonical value) of every leaf of an argument value: objects and arrays are walked (keys escaped
    as in a JSON pointer), anything else — an empty object or array too — is a leaf. The one walk behind
    :func:`leaves` (against the baseline) and the gold argument F1 (:mod:`.gold_f1`)."""
    out: Counter[tuple[str, str]] = Counter()

    def walk(v: object, p: str) -> None:
        if isinstance(v, Mapping) and v:
            for k, x in v.items():
                walk(x, f"{p}/{_escape(str(k))}")
        elif isinstance(v, list) and v:
            for i, x in enumerate(v):
                walk(x, f"{p}/{i}")
        else:
            out[(p, canonical_key(v))] += 1

    walk(value, path)
    return out


def _leaves(call: Call) -> Counter[tuple[str, str, str]]:
    if not call.parsed:
        return Counter({(call.name, "", call.key): 1})
    return Counter({(call.name, p, v): n for (p, v), n in value_leaves(call.args).items()})


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")  # JSON Pointer (RFC 6901)


def _overlap(a: Call, b: Call) -> int:
    return sum((leaves(a) & leaves(b)).values())


def _best_pairing(a: Sequence[Call], b: Sequence[Call]) -> int:
    """The largest total leaf overlap of a one-to-one pairing of ``a`` with ``b`` (same name)."""
    if not a or not b:
        return 0
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    scores = [[_overlap(s, t) for t in large] for s in small]
    if math.perm(len(large), len(small)) <= EXACT_PAIRING_LIMIT:
        return max(sum(scores[i][j] for i, j in enumerate(p)) for p in itertools.permutations(range(len(large)),
                                                                                            len(small)))
    total, free_s, free_l = 0, set(range(len(small))), set(range(len(large)))
    for score, i, j in sorted(((scores[i][j], i, j) for i in free_s for j in free_l), reverse=True):
        if i in free_s and j in free_l:
            total += score
            free_s.discard(i)
            free_l.discard(j)
    return total


def args_f1(a: Sequence[Call], b: Sequence[Call]) -> float:
    """Argument-level F1 of two responses (see the module docstring); 1.0 when both have no call."""
    total = sum(sum(leaves(c).values()) for c in (*a, *b))
    if total == 0:
        return 1.0
    matched = sum(_best_pairing([c for c in a if c.name == n], [c for c in b if c.name == n])
                  for n in {c.name for c in a} & {c.name for c in b})
    return 2.0 * matched / total


# ---------------------------------------------------------------------------------------------- gold


def acceptable(expected: object) -> list[JSONValue]:
    """The acceptable values of an expected argument: a list is the alternatives, anything else is one."""
    return list(expected) if isinstance(expected, list) else [expected]


def _element_matches(value: object, alternative: object) -> bool:
    if isinstance(alternative, Mapping):
        return isinstance(value, Mapping) and arguments_match(value, alternative)
    return canonical_key(value) == canonical_key(alternative)


def value_matches(value: object, alternative: object) -> bool:
    """One acceptable value against a given value: objects key by key, arrays element by element."""
    if isinstance(alternative, Mapping):
        return isinstance(value, Mapping) and arguments_match(value, alternative)
    if isinstance(alternative, list):
        return (isinstance(value, list) and len(value) == len(alternative)
                and all(_element_matches(v, a) for v, a in zip(value, alternative, strict=True)))
    return canonical_key(value) == canonical_key(alternative)


def arguments_match(args: object, expected: JSONMapping) -> bool:
    """Every expected argument present with an acceptable value (or absent when ``""`` is acceptable), no
    unexpected argument. ``args`` that are not an object never match."""
    if not isinstance(args, Mapping) or set(args) - set(expected):
        return False
    for key, wanted in expected.items():
        options = acceptable(wanted)
        if key not in args:
            if not any(isinstance(o, str) and o == "" for o in options):
                return False
        elif not any(value_matches(args[key], o) for o in options):
            return False
    return True


def call_matches(call: Call, expected: JSONMapping, name_of: Callable[[str], str | None]) -> bool:
    """``call`` matches the expected ``{name, arguments}``; ``name_of`` maps the sent name to the name gold
    uses (None: not one of the request's tools, which never matches)."""
    name = name_of(call.name)
    return (name is not None and name == expected.get("name") and call.parsed
            and arguments_match(call.args, expected.get("arguments") or {}))


def each_gets_its_own(edges: Sequence[Sequence[int]]) -> bool:
    """Whether every left node i can be matched to its own right node among ``edges[i]`` at once (a matching
    that covers the left side; Kuhn's augmenting paths). With as many right nodes as left, a perfect one."""
    n = len(edges)
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(augment(i, set()) for i in range(n))


def calls_match_gold(calls: Sequence[Call], expected: Sequence[JSONMapping],
                     name_of: Callable[[str], str | None]) -> bool:
    """The calls pair one to one with the expected calls, in any order (BFCL parallel: order is free)."""
    if len(calls) != len(expected):
        return False
    edges = [[j for j, e in enumerate(expected) if call_matches(c, e, name_of)] for c in calls]
    return each_gets_its_own(edges)


def tools_match_gold(calls: Sequence[Call], expected: Sequence[JSONMapping],
                     name_of: Callable[[str], str | None]) -> bool:
    """The multiset of called names (mapped by ``name_of``) equals the expected one."""
    return Counter(name_of(c.name) for c in calls) == Counter(e.get("name") for e in expected)


def name_mapper(tool_names: Iterable[str] | None, wire_to_original: Mapping[str, str]) -> Callable[[str], str | None]:
    """``sent name → gold name``: the original name of a request tool, None for a name that is not one of the
    request's tools (``tool_names`` None = unknown: every name maps to itself or its original)."""
    names = None if tool_names is None else set(tool_names)

    def name_of(sent: str) -> str | None:
        if names is not None and sent not in names:
            return None
        return wire_to_original.get(sent, sent)

    return name_of
