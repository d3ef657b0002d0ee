"""Gold argument F1 (scoring layer, pure): the token-level eval article's argument F1 of a response's calls against
its gold calls, over weighted leaves, on values the run's normalisers already rewrote
(:mod:`avv_scoring.metrics.normalisers` builds the :class:`ExpectedCall` objects and the normalised calls).

Each top-level argument weighs: a key the tool's schema lists in ``required`` counts :data:`REQUIRED_WEIGHT` (2×)
per leaf, any other key :data:`OPTIONAL_WEIGHT` (1×). BFCL's possible answers hold: an argument's acceptable values
are alternatives, ``""`` among them lets it be left out, object alternatives are scored key by key and array
alternatives element by element. Definition in :func:`gold_args_f1` and docs/scoring.md ("Gold labels").
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from avv_core.json_types import JSONValue
from avv_scoring.metrics.correctness import EXACT_PAIRING_LIMIT, Call, acceptable, value_leaves

#: Weight of each leaf of a required argument (listed in the tool schema's ``required``) in gold argument F1.
REQUIRED_WEIGHT = 2.0
#: Weight of each leaf of any other argument.
OPTIONAL_WEIGHT = 1.0


@dataclass(frozen=True)
class ExpectedCall:
    """One gold call, normalised: the name gold uses, each argument's acceptable values, the tool's required keys."""

    name: str
    arguments: Mapping[str, tuple[JSONValue, ...]]
    required: frozenset[str]

    def weight(self, key: str) -> float:
        return REQUIRED_WEIGHT if key in self.required else OPTIONAL_WEIGHT


def _is_optional_marker(option: object) -> bool:
    return isinstance(option, str) and option == ""


def _size(value: object) -> int:
    return sum(value_leaves(value, "").values())


def _gold_size(option: object) -> float:
    """Leaves an acceptable value asks for: an object alternative's required (non-optional) keys, by their first
    acceptable value; an array alternative element by element."""
    if isinstance(option, Mapping):
        return sum(_gold_size(next(o for o in acceptable(v) if not _is_optional_marker(o)))
                   for v in option.values()
                   if acceptable(v) and not any(_is_optional_marker(o) for o in acceptable(v)))
    if isinstance(option, list) and any(isinstance(x, Mapping) for x in option):
        return sum(_gold_size(x) if isinstance(x, Mapping) else 1 for x in option)
    return _size(option)


Score = tuple[float, float, float]  # (matched, gold, predicted) weighted leaves


def _score_key(present: bool, value: object, options: Sequence[JSONValue], path: str, w: float) -> Score:
    """One argument (``present`` in the call or not) against its acceptable values (module docstring)."""
    optional = any(_is_optional_marker(o) for o in options)
    values = [o for o in options if not _is_optional_marker(o)]
    if not present:
        return 0.0, 0.0 if optional or not values else w * _gold_size(values[0]), 0.0
    if not values:
        return 0.0, 0.0, w * _size(value)
    scored = [_score_alternative(value, o, path, w) for o in values]
    return max(scored, key=lambda s: (s[0], -s[1]))


def _score_alternative(value: object, option: object, path: str, w: float) -> Score:
    if isinstance(option, Mapping):
        if not isinstance(value, Mapping):
            return 0.0, w * _gold_size(option), w * _size(value)
        m = g = p = 0.0
        for k, v in option.items():
            sm, sg, sp = _score_key(k in value, value.get(k), acceptable(v), f"{path}/{k}", w)
            m, g, p = m + sm, g + sg, p + sp
        p += sum(w * _size(v) for k, v in value.items() if k not in option)
        return m, g, p
    if isinstance(option, list) and any(isinstance(x, Mapping) for x in option):
        if not isinstance(value, list) or len(value) != len(option):
            return 0.0, w * _gold_size(option), w * _size(value)
        parts = [_score_alternative(v, o, f"{path}/{i}", w) for i, (v, o) in enumerate(zip(value, option, strict=True))]
        return sum(x[0] for x in parts), sum(x[1] for x in parts), sum(x[2] for x in parts)
    mine, theirs = value_leaves(value, path), value_leaves(option, path)
    return w * sum((mine & theirs).values()), w * sum(theirs.values()), w * sum(mine.values())


def _pair_score(call: Call, expected: ExpectedCall) -> Score:
    """(matched, gold, predicted) weighted leaves of one call against one gold call of the same tool."""
    if not call.parsed or not isinstance(call.args, Mapping):
        return 0.0, _expected_alone(expected), 1.0
    args = call.args
    m = g = p = 0.0
    for key, options in expected.arguments.items():
        sm, sg, sp = _score_key(key in args, args.get(key), options, key, expected.weight(key))
        m, g, p = m + sm, g + sg, p + sp
    p += sum(expected.weight(k) * _size(v) for k, v in args.items() if k not in expected.arguments)
    return m, g, p


def _alone(call: Call, required: frozenset[str]) -> float:
    if not call.parsed or not isinstance(call.args, Mapping):
        return 1.0
    return sum((REQUIRED_WEIGHT if k in required else OPTIONAL_WEIGHT) * _size(v) for k, v in call.args.items())


def _expected_alone(expected: ExpectedCall) -> float:
    return sum(_score_key(False, None, options, key, expected.weight(key))[1]
               for key, options in expected.arguments.items())


def gold_args_f1(calls: Sequence[Call], expected: Sequence[ExpectedCall],
                 name_of: Callable[[str], str | None]) -> float:
    """Weighted argument F1 of one response against its gold calls: ``2·matched / (gold + predicted)`` over weighted
    leaves (module docstring). Calls pair one to one with gold calls of the same tool (the name mapped by
    ``name_of``) by the largest matched weight; an unpaired call counts all its leaves as predicted, an unpaired gold
    call its leaves as gold (an argument whose acceptable values include ``""`` may be absent: it counts only when
    given). With no leaf on either side: 1 when the called tools equal the gold tools, else 0."""
    required_of = {e.name: e.required for e in expected}
    matched = gold = predicted = 0.0
    named = [(name_of(c.name), c) for c in calls]
    for tool in {n for n, _ in named if n is not None} | {e.name for e in expected}:
        mine = [c for n, c in named if n == tool]
        theirs = [e for e in expected if e.name == tool]
        m, g, p = _best(mine, theirs, required_of.get(tool, frozenset()))
        matched, gold, predicted = matched + m, gold + g, predicted + p
    predicted += sum(_alone(c, frozenset()) for n, c in named if n is None)
    total = gold + predicted
    if total == 0:
        return 1.0 if Counter(n for n, _ in named) == Counter(e.name for e in expected) else 0.0
    return 2.0 * matched / total


def _best(mine: Sequence[Call], theirs: Sequence[ExpectedCall], required: frozenset[str]) -> tuple[float, float, float]:
    """(matched, gold, predicted) of the one-to-one pairing of ``mine`` with ``theirs`` with the most matched weight
    (greedy past :data:`EXACT_PAIRING_LIMIT` candidate pairings)."""
    scores = [[_pair_score(c, e) for e in theirs] for c in mine]
    alone_c = [_alone(c, required) for c in mine]
    alone_e = [_expected_alone(e) for e in theirs]

    def total(pairs: Sequence[tuple[int, int]]) -> tuple[float, float, float]:
        used_c, used_e = {i for i, _ in pairs}, {j for _, j in pairs}
        m = sum(scores[i][j][0] for i, j in pairs)
        g = sum(scores[i][j][1] for i, j in pairs) + sum(a for j, a in enumerate(alone_e) if j not in used_e)
        p = sum(scores[i][j][2] for i, j in pairs) + sum(a for i, a in enumerate(alone_c) if i not in used_c)
        return m, g, p

    n = min(len(mine), len(theirs))
    if n == 0:
        return total(())
    if len(mine) <= len(theirs) and math.perm(len(theirs), n) <= EXACT_PAIRING_LIMIT:
        candidates = [tuple(zip(range(n), p, strict=True)) for p in itertools.permutations(range(len(theirs)), n)]
    elif len(mine) > len(theirs) and math.perm(len(mine), n) <= EXACT_PAIRING_LIMIT:
        candidates = [tuple(zip(p, range(n), strict=True)) for p in itertools.permutations(range(len(mine)), n)]
    else:
        pairs: list[tuple[int, int]] = []
        free_c, free_e = set(range(len(mine))), set(range(len(theirs)))
        for _, i, j in sorted(((scores[i][j][0], i, j) for i in free_c for j in free_e), reverse=True):
            if i in free_c and j in free_e:
                pairs.append((i, j))
                free_c.discard(i)
                free_e.discard(j)
        return total(pairs)
    results = [total(c) for c in candidates]
    return max(results, key=lambda r: (2 * r[0] / (r[1] + r[2]) if r[1] + r[2] else 1.0, r[0]))


__all__ = ["OPTIONAL_WEIGHT", "REQUIRED_WEIGHT", "ExpectedCall", "gold_args_f1"]
