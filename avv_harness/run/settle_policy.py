"""``--avv-settle``: the hand-out order and the settle policy (run-controller layer; held by the run as
``run.settle``, asked by the controller when records arrive; no Locust, no I/O).

- **Order.** With ``--avv-settle`` the items are handed out in a random order fixed by a seed (run.json
  ``settle.seed``): one permutation of the sample ids, the same for every vendor and every repeat (repeat-major
  as before), so an early stop is not biased by the file's order and a vendor's first n items are the
  baseline's first n. Without it the file's order is kept (outputs unchanged).
- **Looks.** Every ``every`` records stored, each vendor not yet settled is tested on the longest prefix of the
  hand-out order whose items are recorded for it *and* for its model's baseline (so the data looked at never
  depends on which answers came back first). Each bound in force (``--avv-thresholds``) with a ratio form is tested
  (:mod:`avv_scoring.stats.sequential`) at the vendor's error rate split over its bounds; a defect check is met
  once none was seen in enough responses (its upper bound below the documented tolerance).
- **Settled.** A vendor is settled FAIL once a bound is broken, PASS once every bound has passed. Its pending
  items are skipped (the ledger marks them ``skipped: settled``); its users stop (the shape leaves its class
  out). The baseline is never settled on its own: once every other vendor of its model is settled, its pending
  items that no other vendor has taken are skipped too, so it always covers every item another vendor used.
- **Resume.** Vendors settled in an earlier session stay settled (their items are not sent again); a resumed
  session does not settle further (a new test over what is left would spend the error rate a second time).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from avv_core.items import ItemKey, VendorId
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.records import Record
from avv_core.samples import SampleSet
from avv_harness.run.ledger import Ledger

if TYPE_CHECKING:
    import pandas as pd

    from avv_harness.run.options import RunOptions
    from avv_scoring import BoundTest, RatioBound, Thresholds
    from avv_scoring.load import ToolsBySample

#: A settled vendor is warned about when a tool offered in the sample set had fewer items than this in the
#: prefix it was settled on (the interval says nothing about that tool).
FLOOR_PER_TOOL = 5
SETTLED = "settled"

__all__ = ["FLOOR_PER_TOOL", "SETTLED", "SettlePolicy", "VendorSettle", "hand_out_order", "new_seed"]


class _Scoring(Protocol):
    """What a settle policy uses of :mod:`avv_scoring` (the module is one; imported lazily, see :func:`_scoring`)."""

    def settle_bounds(self, thresholds: Thresholds | None = None) -> tuple[list[RatioBound], list[str]]: ...

    def split_alpha(self, alpha: float, bounds: int) -> float: ...

    def records_frame(self, records: Iterable[JSONMapping]) -> pd.DataFrame: ...

    def item_parts(self, column: str, rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                   tools_by_sample: ToolsBySample | None) -> tuple[np.ndarray, np.ndarray]: ...

    def check_bound(self, a: np.ndarray, b: np.ndarray, bound: RatioBound, alpha: float,
                    looks: np.ndarray | None = None) -> BoundTest: ...

    def confidence_interval(self, a: np.ndarray, b: np.ndarray, bound: RatioBound, alpha: float,
                            grid_step: float = ...) -> tuple[float, float]: ...

    def settle_verdict(self, tests: list[BoundTest]) -> str | None: ...


def _scoring() -> _Scoring:
    """avv_scoring, imported when a settle policy is built (pandas is not loaded by runs without --avv-settle)."""
    import avv_scoring

    return avv_scoring


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


def hand_out_order(sample_ids: Sequence[str], seed: int | None) -> list[str]:
    """The sample ids in the order items are handed out: shuffled by ``seed``, or the file's order (None)."""
    ids = list(sample_ids)
    if seed is not None:
        random.Random(seed).shuffle(ids)
    return ids


@dataclass
class VendorSettle:
    """One vendor's sequential test: the per-item parts of the prefix tested so far, and its outcome."""

    name: str  # the vendor's name (run.json, report)
    total: int  # items of this vendor in the run
    tested: int = 0  # items of the prefix whose parts are known
    parts: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # column → (a, b) per item
    looks: int = 0  # looks at which it was tested
    verdict: str | None = None  # "pass" / "fail" once settled
    settled_after: int | None = None  # items in the prefix when it settled
    resumed: bool = False  # settled in an earlier session
    summary: JSONObject = field(default_factory=dict)  # what run.json says of it


class SettlePolicy:
    """Per run: which vendors are settled, from the records as they arrive (see the module docstring)."""

    def __init__(self, options: RunOptions, *, vendors: Sequence[VendorId], baselines: Mapping[str, VendorId],
                 samples: SampleSet, totals: Mapping[VendorId, int], seed: int):
        """``options``: the run's (``--avv-settle``'s settings, ``--avv-repeats``, ``--avv-resume`` and
        ``--avv-thresholds``); ``baselines``: model → its baseline vendor; ``totals``: items per vendor in the run;
        ``seed``: the run's hand-out order (a resumed run keeps its own)."""
        settings = options.settle
        assert settings is not None
        alpha, repeats = settings.alpha, options.repeats
        order = hand_out_order([s.sample_id for s in samples.samples], seed)
        self.vendors = {vendor: vendor.vendor for vendor in vendors}  # vendor → its name
        self.baselines = dict(baselines)  # model → its baseline vendor
        self.positions = [(sid, rep) for rep in range(1, repeats + 1) for sid in order]
        self.tools_by_sample = {s.sample_id: s.tools for s in samples.samples}
        self.tool_names = {s.sample_id: sorted({str((t.get("function") or {}).get("name", "")) for t in s.tools})
                           for s in samples.samples}
        self.alpha, self.every, self.seed = alpha, settings.every, seed
        self.resumed = bool(options.resume)  # a resumed session settles no further
        self.scoring = _scoring()
        # --avv-thresholds (None: avv)
        self.bounds, self.untested = self.scoring.settle_bounds(options.decision.thresholds_object())
        self.alpha_bound = self.scoring.split_alpha(alpha, len(self.bounds))
        self.rows: dict[VendorId, dict[tuple[str, int], Record]] = {v: {} for v in self.vendors}
        self.reach: dict[VendorId, int] = {v: 0 for v in self.vendors}  # prefix of positions recorded
        self.state = {v: VendorSettle(name, totals.get(v, 0)) for v, name in self.vendors.items()}
        self.since_look = 0
        self.total_looks = 0
        self.applied: set[VendorId] = set()  # vendors whose pending items were skipped
        self.skipped: dict[VendorId, int] = {}  # items skipped per vendor (this session)

    # ------------------------------------------------------------------------------------ records in

    def observe(self, records: Sequence[Record]) -> bool:
        """Keep an item's rows; True when this is a look (every ``every`` records)."""
        for record in records:
            vendor = VendorId(record["model"], record["vendor"])
            if vendor in self.rows:
                key = ItemKey.from_record(record)
                self.rows[vendor][(key.sample_id, key.repeat)] = record
        self.since_look += len(records)
        if self.since_look >= self.every:
            self.since_look = 0
            return True
        return False

    def _advance(self, vendor: VendorId) -> int:
        rows, reach = self.rows[vendor], self.reach[vendor]
        while reach < len(self.positions) and self.positions[reach] in rows:
            reach += 1
        self.reach[vendor] = reach
        return reach

    # ------------------------------------------------------------------------------------- a look

    def look(self) -> list[VendorId]:
        """Test every open vendor on its recorded prefix; the vendors settled at this look."""
        self.total_looks += 1
        for vendor in self.vendors:
            self._advance(vendor)
        newly = []
        for vendor, st in self.state.items():
            if st.verdict is not None or self.resumed or vendor in self.baselines.values():
                continue
            baseline = self.baselines.get(vendor.model)
            if baseline is None:
                continue
            prefix = min(self.reach[vendor], self.reach[baseline])
            if prefix <= st.tested:
                continue
            self._add_parts(vendor, baseline, st, prefix)
            st.looks += 1
            tests = [self.scoring.check_bound(np.asarray(st.parts[b.column][0]), np.asarray(st.parts[b.column][1]), b,
                                 self.alpha_bound) for b in self.bounds]
            verdict = self.scoring.settle_verdict(tests)
            if verdict == "pass" and self.untested:  # a bound without a test keeps PASS open
                verdict = None
            if verdict is not None:
                st.verdict, st.settled_after = verdict, prefix
                st.summary = self._summary(vendor, st, tests)
                newly.append(vendor)
        return newly

    def _add_parts(self, vendor: VendorId, baseline: VendorId, st: VendorSettle, prefix: int) -> None:
        new = self.positions[st.tested:prefix]
        rows = self.scoring.records_frame(self.rows[vendor][p] for p in new)
        base = self.scoring.records_frame(self.rows[baseline][p] for p in new)
        for bound in self.bounds:
            a, b = self.scoring.item_parts(bound.column, rows, base, self.tools_by_sample)
            kept = st.parts.setdefault(bound.column, ([], []))
            kept[0].extend(a.tolist())
            kept[1].extend(b.tolist())
        st.tested = prefix

    def _summary(self, vendor: VendorId, st: VendorSettle, tests: list[BoundTest]) -> JSONObject:
        bounds = []
        for test in tests:
            bound: RatioBound = test.bound
            a, b = (np.asarray(x) for x in st.parts[bound.column])
            low, high = self.scoring.confidence_interval(a, b, bound, self.alpha_bound)
            value = float(a.sum() / b.sum()) if b.sum() > 0 else None
            bounds.append({"metric": bound.column, "kind": bound.kind, "limit": bound.limit, "state": test.state,
                           "value": value, "interval": [low, high], "p_value": test.p_value})
        settling = [t for t in tests if t.state == ("broken" if st.verdict == "fail" else "passed")]
        seen = Counter(name for sid, _ in self.positions[:st.settled_after or 0] for name in self.tool_names[sid])
        offered = {name for names in self.tool_names.values() for name in names if name}
        thin = {name: seen.get(name, 0) for name in sorted(offered) if seen.get(name, 0) < FLOOR_PER_TOOL}
        return {"verdict": st.verdict, "settled_after": st.settled_after, "of": st.total, "looks": st.looks,
                "alpha": self.alpha, "alpha_per_bound": self.alpha_bound,
                "alpha_spent": sum(t.p_value for t in settling), "bounds": bounds,
                "floor_per_tool": FLOOR_PER_TOOL, "thin_tools": thin}

    # ------------------------------------------------------------------------------------- the ledger side

    def closed(self) -> set[VendorId]:
        """Vendors whose users stop: the settled ones, and a baseline whose every other vendor is settled."""
        out = {v for v, st in self.state.items() if st.verdict is not None}
        for model, baseline in self.baselines.items():
            others = [v for v in self.vendors if v.model == model and v != baseline]
            if others and all(v in out for v in others):
                out.add(baseline)
        return out

    def apply(self, ledger: Ledger) -> dict[VendorId, int]:
        """Skip the pending items of the vendors :meth:`closed` names that the ledger has not closed yet; a
        baseline keeps every item another vendor of its model took (recorded or in flight). Returns the items
        skipped per vendor."""
        skipped: dict[VendorId, int] = {}
        for vendor in self.closed():
            if vendor in ledger.closed or vendor in self.applied:
                continue
            self.applied.add(vendor)
            if vendor in self.baselines.values():
                others = {v for v in self.vendors if v.model == vendor.model and v != vendor}
                taken = {(k.sample_id, k.repeat) for k in (*ledger.done, *ledger.in_flight) if k.vendor_id in others}
                skipped[vendor] = ledger.skip_pending(vendor, SETTLED, keep=taken, close=False)
            else:
                skipped[vendor] = ledger.skip_pending(vendor, SETTLED)
            self.skipped[vendor] = self.skipped.get(vendor, 0) + skipped[vendor]
        return skipped

    def step(self, ledger: Ledger) -> list[str]:
        """A look, then :meth:`apply`: what to log (empty when nothing was settled or skipped)."""
        lines = []
        for vendor in self.look():
            st = self.state[vendor]
            lines.append(f"--avv-settle: {st.name} settled {str(st.verdict).upper()} after {st.settled_after} of "
                         f"{st.total} samples ({self.describe(st)})")
        for vendor, count in self.apply(ledger).items():
            lines.append(f"--avv-settle: {self.vendors[vendor]}: {count} items skipped (settled)")
        return lines

    @staticmethod
    def describe(st: VendorSettle) -> str:
        """``f1 0.71 [0.62, 0.78] broken; …`` for the bounds that settled it."""
        state = "broken" if st.verdict == "fail" else "passed"
        parts = [f"{b['metric']} [{b['interval'][0]:.3f}, {b['interval'][1]:.3f}] {state}"
                 for b in st.summary.get("bounds", []) if b.get("state") == state]
        return "; ".join(parts)

    def users_stop(self, ledger: Ledger) -> set[VendorId]:
        """Vendors whose users the shape stops: closed by this policy, and nothing of theirs pending or in flight
        (a baseline first runs the items it keeps)."""
        return {v for v in self.applied if not ledger.busy(v)}

    def mark_resumed(self, settled: JSONMapping) -> None:
        """Vendors settled in an earlier session (run.json), by name: they stay settled."""
        by_name = {name: v for v, name in self.vendors.items()}
        for name, summary in settled.items():
            vendor = by_name.get(name)
            if vendor is not None and isinstance(summary, dict) and summary.get("verdict") in ("pass", "fail"):
                st = self.state[vendor]
                st.verdict, st.settled_after = summary["verdict"], summary.get("settled_after")
                st.summary, st.resumed = dict(summary), True

    def to_manifest(self) -> JSONObject:
        """run.json's ``settle``: the seed, the rule's settings and each vendor's outcome."""
        vendors: JSONObject = {}
        for vendor, st in self.state.items():
            skipped = {"skipped": self.skipped.get(vendor, 0)}
            if st.verdict is not None:
                vendors[st.name] = {**st.summary, "resumed": st.resumed, **skipped}
            elif vendor in self.baselines.values():
                vendors[st.name] = {"verdict": None, "baseline": True, **skipped}
            else:
                vendors[st.name] = {"verdict": None, "tested": st.tested, "of": st.total, "looks": st.looks, **skipped}
        return {"seed": self.seed, "alpha": self.alpha, "every": self.every, "looks": self.total_looks,
                "bounds": [f"{b.column} {'≥' if b.kind == 'min' else '≤'} {b.limit:g}" for b in self.bounds],
                "untested_bounds": list(self.untested), "resumed_session": self.resumed, "vendors": vendors}
