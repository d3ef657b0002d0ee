"""Deterministic draws (simulator, pure): uniform numbers and coin flips derived from hashes of their parts.

Every choice the simulator makes is one of these draws, so it can be recomputed from (profile, body, attempt).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

_T = TypeVar("_T")


def unit(*parts: object) -> float:
    """A uniform number in [0, 1) derived from ``parts``."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def chance(rate: float, *parts: object) -> bool:
    """True for a ``rate`` fraction of distinct ``parts`` (exactly never at 0, always at 1)."""
    return rate > 0.0 and unit(*parts) < rate


def pick(options: Sequence[_T], *parts: object) -> _T:
    """One of ``options`` (non-empty), chosen by the draw of ``parts``."""
    return options[int(unit(*parts) * len(options))]
