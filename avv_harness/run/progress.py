"""The progress line of a headless run (harness layer, pure): how far the run is.

    avv: 30/64 items (46.9 %) · reference 16/32 · flaky 14/32 · 1 item failed · 4 failed attempts · ETA 9s
    avv: stress level 4 · 812 requests · 3 vendors · 4 failed · 1m10s elapsed

*Items failed* are items recorded as failed (after their retries: what the scores count); *failed attempts* are
every attempt that failed, retries included (what Locust counts as failures, shown as ``# fails`` of its
``attempt`` rows). The two are named apart wherever both appear.

**ETA** comes from the recent rate, per vendor (:class:`EtaEstimator`): each vendor's items per second over the last
:data:`RATE_WINDOW_S` seconds, counted from its first item (the start-up before it says nothing about the rate),
smoothed (an exponential average with time constant :data:`SMOOTHING_S`), and the run ends when its slowest vendor
does, so ETA = max over vendors of (items left / rate). Unknown (``ETA –``) until every vendor with items left has
been measured for :data:`MIN_SPAN_S` seconds. Shown rounded (seconds under a minute, 5 s under ten minutes, then
minutes), so it counts down steadily instead of jumping with every burst of answers. Stress runs have no item total
(the ladder sets the length): they show the level instead.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

#: Seconds of history each vendor's rate is measured over.
_Key = TypeVar("_Key", bound=Hashable)  # what the rates are kept by (a vendor)

RATE_WINDOW_S = 30.0
#: Time constant of the smoothing of each vendor's rate, seconds.
SMOOTHING_S = 5.0
#: Least seconds a vendor's rate is measured over, counted from its first item, before it gives an ETA.
MIN_SPAN_S = 3.0


def duration_text(seconds: float) -> str:
    """``130`` → ``2m10s``; ``3725`` → ``1h02m``; under a minute: ``42s``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def rounded_eta(seconds: float) -> float:
    """An ETA as shown: whole seconds under a minute, 5 s steps under ten minutes, whole minutes above."""
    step = 1.0 if seconds < 60 else 5.0 if seconds < 600 else 60.0
    return math.ceil(seconds / step) * step


def eta_s(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the average rate so far; None before the first item, 0 when nothing is left (the estimate
    before any recent rate is known)."""
    if total <= done:
        return 0.0
    if done <= 0 or elapsed_s <= 0:
        return None
    return elapsed_s * (total - done) / done


@dataclass
class _Rate:
    points: deque[tuple[float, int]] = field(default_factory=deque)  # (time, done) over the window
    smoothed: float | None = None  # items per second
    at: float | None = None  # when it was last updated


@dataclass
class EtaEstimator:
    """Each vendor's recent rate and the run's ETA from them (see the module docstring). Pure: the caller gives the
    times (monotonic seconds)."""

    window_s: float = RATE_WINDOW_S
    smoothing_s: float = SMOOTHING_S
    min_span_s: float = MIN_SPAN_S
    rates: dict[Hashable, _Rate] = field(default_factory=dict)

    def observe(self, now: float, done: Mapping[_Key, int]) -> None:
        """Each vendor's items done at ``now``."""
        for vendor, count in done.items():
            rate = self.rates.setdefault(vendor, _Rate())
            if count <= 0:  # before its first item the rate says nothing (users spawning, connections opening)
                continue
            rate.points.append((now, count))
            while len(rate.points) > 2 and now - rate.points[1][0] >= self.window_s:
                rate.points.popleft()
            (t0, c0), (t1, c1) = rate.points[0], rate.points[-1]
            if t1 - t0 < self.min_span_s:
                continue
            recent = (c1 - c0) / (t1 - t0)
            if rate.smoothed is None or rate.at is None:
                if recent > 0:  # the first rate is a measured one, not the stillness before the second item
                    rate.smoothed, rate.at = recent, now
                continue
            else:
                weight = 1.0 - math.exp(-(now - rate.at) / self.smoothing_s)
                rate.smoothed += weight * (recent - rate.smoothed)
            rate.at = now

    def eta(self, left: Mapping[_Key, int]) -> float | None:
        """Seconds until every vendor's ``left`` items are done; None while a vendor with items left has no rate."""
        worst = 0.0
        for vendor, count in left.items():
            if count <= 0:
                continue
            rate = self.rates.get(vendor)
            if rate is None or not rate.smoothed or rate.smoothed <= 0:
                return None
            worst = max(worst, count / rate.smoothed)
        return worst


@dataclass(frozen=True)
class VendorProgress:
    name: str  # the vendor as shown
    done: int  # items recorded
    total: int  # items of this run


@dataclass(frozen=True)
class Progress:
    """Where a run stands, as the progress line shows it. ``failed`` = items failed; ``failed_attempts`` = attempts
    failed (retries included; None: not known here); ``eta`` = :meth:`EtaEstimator.eta` (None: from the average rate
    so far, or unknown); ``level`` = the stress level (stress runs)."""

    done: int  # items (stress: requests) recorded
    total: int  # items of this run
    vendors: int
    failed: int
    elapsed_s: float
    level: int | None = None
    stress: bool = False
    per_vendor: tuple[VendorProgress, ...] = ()
    failed_attempts: int | None = None
    eta: float | None = None


def progress_line(progress: Progress, width: int | None = None) -> str:
    """One progress line (module docstring): ``progress``'s ``per_vendor`` parts are shown while the line stays
    within ``width`` characters (None: no limit)."""
    p = progress
    done, total, vendors, failed, per_vendor, eta = p.done, p.total, p.vendors, p.failed, p.per_vendor, p.eta
    failed_attempts, elapsed_s, level = p.failed_attempts, p.elapsed_s, p.level
    plural = "s" if vendors != 1 else ""
    attempts = "" if failed_attempts is None else (
        f" · {failed_attempts} failed attempt{'s' if failed_attempts != 1 else ''}")
    if p.stress:
        where = f"stress level {level}" if level is not None else "stress"
        return (f"avv: {where} · {done} requests · {vendors} vendor{plural} · {failed} failed · "
                f"{duration_text(elapsed_s)} elapsed")
    share = 100.0 * done / total if total else 100.0
    left = eta if eta is not None else eta_s(done, total, elapsed_s)
    if done >= total:
        left = 0.0
    eta_text = "–" if left is None or math.isinf(left) else duration_text(rounded_eta(left))
    head = f"avv: {done}/{total} items ({share:.1f} %)"
    tail = f" · {failed} item{'s' if failed != 1 else ''} failed{attempts} · ETA {eta_text}"
    keep = vendors_that_fit(per_vendor, total, tail, width)
    shown = "".join(f" · {v.name} {v.done}/{v.total}" for v in per_vendor[:keep])
    if keep == 0:
        shown = f" · {vendors} vendor{plural}"
    elif keep < len(per_vendor):
        shown += f" · +{len(per_vendor) - keep} more"
    return head + shown + tail


def vendors_that_fit(per_vendor: tuple[VendorProgress, ...], total: int, tail: str, width: int | None) -> int:
    """How many vendors' ``name done/total`` parts the line shows within ``width``: measured at their widest (every
    count at its total, the ETA at its longest), so the layout does not change from one line to the next."""
    if width is None:
        return len(per_vendor)
    head = len(f"avv: {total}/{total} items (100.0 %)")
    tail_len = len(tail) + max(0, len("1h00m") - len(tail.rsplit("ETA ", 1)[-1]))
    parts = [len(f" · {v.name} {v.total}/{v.total}") for v in per_vendor]
    for keep in range(len(parts), 0, -1):
        more = len(f" · +{len(parts) - keep} more") if keep < len(parts) else 0
        if head + sum(parts[:keep]) + more + tail_len <= width:
            return keep
    return 0


__all__ = ["EtaEstimator", "Progress", "VendorProgress", "duration_text", "eta_s", "progress_line", "rounded_eta",
           "vendors_that_fit"]
