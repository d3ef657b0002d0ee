"""The progress line of a headless run (harness layer, pure): how far the run is, printed every few seconds.

    avv: 812/2000 items (40.6 %) · 3 vendors · 4 failed · ETA 2m10s
    avv: stress level 4 · 812 requests · 3 vendors · 4 failed · 1m10s elapsed

ETA = elapsed × (total − done) / done: the rate so far, extrapolated; unknown (``ETA –``) before the first
item. Stress runs have no item total (the ladder sets the length), so they show the level instead.
"""

from __future__ import annotations

import math


def duration_text(seconds: float) -> str:
    """``130`` → ``2m10s``; ``3725`` → ``1h02m``; under a minute: ``42s``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def eta_s(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far; None before the first item, 0 when nothing is left."""
    if total <= done:
        return 0.0
    if done <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s * (total - done) / done


def progress_line(done: int, total: int, vendors: int, failed: int, elapsed_s: float,
                  level: int | None = None, stress: bool = False) -> str:
    """One progress line (see the module docstring)."""
    plural = "s" if vendors != 1 else ""
    if stress:
        where = f"stress level {level}" if level is not None else "stress"
        return (f"avv: {where} · {done} requests · {vendors} vendor{plural} · {failed} failed · "
                f"{duration_text(elapsed_s)} elapsed")
    share = 100.0 * done / total if total else 100.0
    left = eta_s(done, total, elapsed_s)
    eta = "–" if left is None or math.isinf(left) else duration_text(left)
    return f"avv: {done}/{total} items ({share:.1f} %) · {vendors} vendor{plural} · {failed} failed · ETA {eta}"
