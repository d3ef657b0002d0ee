"""“Did you mean …?” for a misspelt name (core layer, pure): a config key, a knob, a metric column, a subcommand.

One rule for every message that names something unknown: the closest known name by :mod:`difflib`'s ratio (at least
0.6, difflib's own default cut-off), else nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Least similarity (difflib's ratio) for a suggestion.
CUTOFF = 0.6


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, or None when none is close enough."""
    found = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=CUTOFF)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``" (did you mean 'url'?)"`` for a close known name, else ``""``: ready to append to a message."""
    match = closest(word, known)
    return f" (did you mean {match!r}?)" if match is not None else ""


__all__ = ["CUTOFF", "closest", "did_you_mean"]
