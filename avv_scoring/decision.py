"""The decision (scoring layer, pure; between :mod:`.verdict` and :mod:`.score`): a three-way verdict per bound and
per vendor, with the confidence it was reached at — one rule for the report, the terminal, scores.csv, the web UI,
Prometheus, the history, ``trend``, ``--avv-settle`` and the exit status. docs/explanation/decision.md says it
for a buyer; the formulas are in :mod:`avv_scoring.stats.intervals`.

**Per bound** (each bound in force after :func:`~avv_scoring.verdict.judged_thresholds`), at confidence ``level``
(default 95 %, ``--confidence``):

- a **defect check** (a ``≤ 0`` bound on a metric declared ``Metric(defect=…)``: a call written as text, a call cut
  mid-arguments, a call that is not JSON, a reasoning-only answer): FAIL on any occurrence, naming its samples;
  none seen is PASS, read "0 in n (rate < 3/n at 95 %)" — the exact one-sided upper bound. It rests on no interval:
  one occurrence proves the defect exists;
- a **proportion** (a metric with a :class:`~avv_scoring.metrics.declaration.Ratio` form: success rate, F1 through
  its Jaccard share, schema accuracy…): PASS when its whole Wilson interval (effective trials over sample ids) lies
  inside the bound, FAIL when it lies wholly outside, INCONCLUSIVE when it straddles the limit, with "about N more
  samples would decide it" (the project's power estimate);
- another metric with a **bootstrap** interval (``interval=True``: TPS, TTFT p50…): the same, on its interval;
- any other metric: judged on its **point** value (no interval exists for it);
- a checked metric that is **missing** FAILs (a vendor cannot pass a check by producing no data for it).

**Per vendor**: FAIL if any bound FAILs, PASS if every bound PASSes, else INCONCLUSIVE.

**Modes** (``--verdict``): ``interval`` (the above; default); ``point`` — the peers' rule, every bound on its point
value, PASS or FAIL (K2VV and MiniMax tables reproduce); ``statistical`` — the bounds on agreement with the
baseline are replaced by the noise-floor tests (:mod:`avv_scoring.statistical_verdict`), the others judged as
in ``interval``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.decision_options import DEFAULT_CONFIDENCE, FAIL, INCONCLUSIVE, PASS, VERDICT_MODES, VERDICTS
from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.metrics.declaration import Metric, fmt
from avv_scoring.metrics.registry import METRICS, function_of, is_metric, metric
from avv_scoring.metrics.vendor_table import FeatureFrames
from avv_scoring.statistical_verdict import statistical_reasons
from avv_scoring.stats.intervals import Proportion, defect_upper, dice, jaccard, more_samples, newcombe, z_two_sided
from avv_scoring.verdict import Thresholds

#: ``--avv-settle``: a defect check with none seen counts as met once its upper bound (3/n at 95 %) is below this,
#: so a clean vendor can settle (about 300 clean responses at 95 %). At the end of a run, none seen is met whatever n.
DEFECT_TOLERANCE = 0.01
#: Defect occurrences named in a reason (all of them are counted).
SAMPLES_NAMED = 3
#: How a bound was judged.
DEFECT, WILSON, BOOTSTRAP, POINT, ABSENT = "defect", "wilson", "bootstrap", "point", "missing"
SELF = "baseline"  # a margin on the baseline itself: met by definition
SEQUENTIAL = "sequential"  # settled early by --avv-settle: the anytime-valid confidence sequence at that point
#: run.json's settle states of a bound → the decision's.
SETTLE_STATES = {"passed": PASS, "broken": FAIL, None: INCONCLUSIVE}


def verdict_of(value: object) -> str:
    """A stored verdict in today's spelling: ``pass`` / ``fail`` (scores before the three-way rule) → PASS / FAIL."""
    text = "" if value is None or is_missing(value) else str(value).strip().upper()
    return text if text in VERDICTS else ""


# --------------------------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Evidence:
    """What one vendor's rows say of one metric with a ratio form, beyond its point value: the proportion it is
    per sample id, and for a defect check the items where it occurred."""

    proportion: Proportion  # hits / trials per sample id (a Dice form: its Jaccard share's)
    dice: bool = False  # the metric is the Dice coefficient of the proportion (F1)
    found: int = 0  # items with an occurrence (defect checks)
    items: tuple[str, ...] = ()  # the first of them, as "sample_id" (or "sample_id#repeat" with repeats)
    units: int = 0  # the vendor's sample ids (those without a trial too): "more samples" counts these


def vendor_evidence(frames: FeatureFrames) -> dict[str, Evidence]:
    """:class:`Evidence` of every metric with a ratio form, from the per-item features its point value was computed
    from (``frames``: one vendor's rows and its baseline's)."""
    rows = frames.rows
    codes = frames.samples()[0]
    n = int(codes.max(initial=-1)) + 1
    repeats = rows["repeat"].astype("object") if "repeat" in rows.columns else pd.Series(1, index=rows.index)
    several = len(set(repeats.dropna().tolist())) > 1
    out: dict[str, Evidence] = {}
    for m in METRICS:
        ratio = m.ratio
        if ratio is None:
            continue
        function = function_of(m.column)
        form = function.additive
        if form is None:
            continue
        features = frames.features(function, form)
        at = frames.sample_codes(features.index)
        hits, trials = ratio.share_parts(features)
        proportion = Proportion.of(np.bincount(at, weights=hits, minlength=n), np.bincount(at, weights=trials,
                                                                                       minlength=n))
        found = 0
        items: tuple[str, ...] = ()
        if m.defect:
            a, _ = ratio.parts(features)
            where = features.index[a > 0]
            found = len(where)
            named = sorted(((str(s), r) for s, r in zip(rows.loc[where, "sample_id"], repeats.loc[where], strict=True)),
                           key=lambda sr: (_natural(sr[0]), str(sr[1])))[:SAMPLES_NAMED]
            items = tuple(f"{s}#{r}" if several else s for s, r in named)
        out[m.column] = Evidence(proportion, ratio.dice, found, items, n)
    return out


def _natural(sample_id: str) -> tuple[int, int, str]:
    """Sample ids in reading order: numbers by value (2 before 10), then the others by text."""
    return (0, int(sample_id), "") if sample_id.isdigit() else (1, 0, sample_id)


# --------------------------------------------------------------------------------------------- one bound


@dataclass(frozen=True)
class BoundDecision:
    """One bound of one vendor, judged."""

    column: str  # the metric
    kind: str  # "min" (≥ limit) or "max" (≤ limit)
    limit: float
    state: str  # PASS, FAIL or INCONCLUSIVE
    method: str  # DEFECT, WILSON, BOOTSTRAP, POINT or ABSENT
    value: float = math.nan  # the point value
    low: float = math.nan  # the interval (NaN: none)
    high: float = math.nan
    n: float = 0.0  # trials the interval rests on (a defect check: responses checked)
    more: int | None = None  # INCONCLUSIVE: about how many more samples would decide it (None: cannot say)
    found: int = 0  # a defect check: occurrences
    items: tuple[str, ...] = ()  # a defect check: the first samples it occurred in
    level: float = DEFAULT_CONFIDENCE
    #: A non-inferiority margin: the baseline's value. Then ``value``, ``low``, ``high`` are the difference
    #: vendor − baseline and its interval, and the bound is ``difference ≥ −δ`` (``min``) or ``≤ δ`` (``max``).
    baseline: float | None = None

    @property
    def is_margin(self) -> bool:
        return self.baseline is not None

    @property
    def bound_text(self) -> str:
        """``success_rate ≥ 0.99``, or a margin's ``schema_accuracy ≥ baseline − 0.02``."""
        if self.is_margin:
            above = self.kind == "min"
            return f"{self.column} {'≥' if above else '≤'} baseline {'−' if above else '+'} {abs(self.limit):g}"
        return f"{self.column} {'≥' if self.kind == 'min' else '≤'} {self.limit:g}"

    @property
    def is_defect(self) -> bool:
        return self.method == DEFECT

    @property
    def leans_fail(self) -> bool:
        """The point value is on the failing side of the limit (a FAIL, or an INCONCLUSIVE that leans to it)."""
        if math.isnan(self.value):
            return True
        return self.value < self.limit if self.kind == "min" else self.value > self.limit

    def state_text(self) -> str:
        """``success_rate≥0.99:PASS`` (scores.csv ``verdict_bounds``)."""
        return f"{self.bound_text.replace(' ', '')}:{self.state}"

    def text(self) -> str:
        """The bound's reason in the metric's own format, e.g. ``success_rate 1 [0.9891, 1] ≥ 0.99``,
        ``tool_call_as_text_rate: 2 in 330 responses (a tool call written …; samples 17, 203)`` or
        ``f1 0.8400 [0.7700, 0.8900] vs ≥ 0.8: about 240 more samples would decide it``."""
        kind = metric(self.column).fmt if is_metric(self.column) else "num"
        pct = f"{self.level * 100:g} %"
        if self.method == ABSENT and not self.is_margin:
            return f"{self.column} missing"
        if self.method == DEFECT:
            what = metric(self.column).defect
            if self.found:
                named = ", ".join(self.items) + (" …" if self.found > len(self.items) else "")
                return (f"{what}: {self.found} in {self.n:.0f} responses "
                        f"(sample{'s' if self.found > 1 else ''} {named})")
            upper = defect_upper(self.n, self.level)
            return f"{self.column} 0 in {self.n:.0f} (rate < {fmt(upper, 'rate')} at {pct})"
        if self.is_margin:
            return self._margin_text(kind)
        value = fmt(self.value, kind)
        interval = f" [{fmt(self.low, kind)}, {fmt(self.high, kind)}]" if not math.isnan(self.low) else ""
        if self.state == INCONCLUSIVE:
            more = (f"about {plural(self.more, 'more sample')} would decide it" if self.more is not None
                    else "it sits on its bound: no sample size decides it")
            return f"{self.column} {value}{interval} vs {'≥' if self.kind == 'min' else '≤'} {self.limit:g}: {more}"
        holds = self.state == PASS
        sign = ("≥" if holds else "<") if self.kind == "min" else ("≤" if holds else ">")
        return f"{self.column} {value}{interval} {sign} {self.limit:g}"


    def _margin_text(self, kind: str) -> str:
        """``schema_accuracy 0.9700 vs the baseline's 0.9800: −0.0100 [−0.0412, 0.0180] ≥ −0.02``."""
        def signed(x: float) -> str:
            return ("+" if x > 0 else "−" if x < 0 else "") + fmt(abs(x), "num" if kind != "rate" else kind)

        if self.method == SELF:
            return f"{self.bound_text}: the baseline itself"
        if self.method == ABSENT:
            return f"{self.column} missing (or the baseline's)"
        head = f"{self.column} {fmt(self.value + (self.baseline or 0.0), kind)} vs the baseline's " \
               f"{fmt(self.baseline, kind)}: {signed(self.value)}"
        interval = f" [{signed(self.low)}, {signed(self.high)}]" if not math.isnan(self.low) else ""
        limit = f"{'−' if self.limit < 0 else '+'}{abs(self.limit):g}" if self.limit else "0"
        edge = f"{'≥' if self.kind == 'min' else '≤'} {limit}"
        if self.state == INCONCLUSIVE:
            more = (f"about {plural(self.more, 'more sample')} would decide it" if self.more is not None
                    else "no sample size decides it")
            return f"{head}{interval} vs {edge}: {more}"
        holds = self.state == PASS
        sign = ("≥" if holds else "<") if self.kind == "min" else ("≤" if holds else ">")
        return f"{head}{interval} {sign} {limit}"


def plural(n: int, noun: str) -> str:
    """``1 more sample``, ``2,400 more samples``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _side(low: float, high: float, kind: str, limit: float) -> str:
    """PASS when the interval lies inside the bound, FAIL when wholly outside, else INCONCLUSIVE."""
    if kind == "min":
        return PASS if low >= limit else FAIL if high < limit else INCONCLUSIVE
    return PASS if high <= limit else FAIL if low > limit else INCONCLUSIVE


def judge_bound(column: str, kind: str, limit: float, row: JSONMapping, evidence: Mapping[str, Evidence],
                mode: str = "interval", level: float = DEFAULT_CONFIDENCE) -> BoundDecision:
    """One bound of one vendor (module docstring): ``row`` = its scores (point values, ``<m>_ci_low`` /
    ``_ci_high``), ``evidence`` = :func:`vendor_evidence` of its rows.

    Why so many parameters: ``column``, ``kind`` and ``limit`` are one bound as
    :meth:`~avv_scoring.verdict.Thresholds.checks` yields it, ``row`` and ``evidence`` the vendor's scores and the
    evidence under them, and ``mode`` / ``level`` keyword options with defaults; :func:`decide` and the tests judge
    single bounds from plain values this way.
    """
    m: Metric | None = metric(column) if is_metric(column) else None
    raw = row.get(column)
    value = math.nan if raw is None or is_missing(raw) else float(raw)
    found = evidence.get(column)
    if m is not None and m.defect and kind == "max" and limit <= 0 and found is not None and mode != "point":
        n = found.proportion.n
        if found.found:
            return BoundDecision(column, kind, limit, FAIL, DEFECT, value, n=n, found=found.found, items=found.items,
                                 level=level)
        if n > 0:
            return BoundDecision(column, kind, limit, PASS, DEFECT, value, n=n, level=level)
    if math.isnan(value):
        return BoundDecision(column, kind, limit, FAIL, ABSENT, level=level)
    if mode == "point":
        holds = value >= limit if kind == "min" else value <= limit
        return BoundDecision(column, kind, limit, PASS if holds else FAIL, POINT, value, level=level)
    if found is not None and found.proportion.n > 0:
        share = found.proportion
        low, high = share.interval(level)
        if found.dice:
            low, high = dice(low), dice(high)
        state = _side(low, high, kind, limit)
        more = None
        if state == INCONCLUSIVE:  # in samples with a trial, then in all samples (those without one come along)
            more = share.more_samples(jaccard(limit) if found.dice else limit, level)
            if more is not None and found.units > share.samples:
                more = math.ceil(more * found.units / share.samples)
        return BoundDecision(column, kind, limit, state, WILSON, value, low, high, share.n, more, level=level)
    low, high = (float(row.get(f"{column}_ci_{end}", math.nan) or math.nan) for end in ("low", "high"))
    if m is not None and m.interval and not (math.isnan(low) or math.isnan(high)):
        state = _side(low, high, kind, limit)
        more = None
        if state == INCONCLUSIVE:
            se = (high - low) / (2.0 * z_two_sided(level))
            samples = int(row.get("items") or 0) // max(int(row.get("n_repeats") or 1), 1)
            more = more_samples(samples, se, value, limit, level)
        return BoundDecision(column, kind, limit, state, BOOTSTRAP, value, low, high, more=more, level=level)
    holds = value >= limit if kind == "min" else value <= limit
    return BoundDecision(column, kind, limit, PASS if holds else FAIL, POINT, value, level=level)


def judge_margin(column: str, margin: float, row: JSONMapping, evidence: Mapping[str, Evidence],
                 baseline: tuple[JSONMapping, Mapping[str, Evidence]] | None, mode: str = "interval",
                 level: float = DEFAULT_CONFIDENCE) -> BoundDecision:
    """A non-inferiority bound: the vendor at most ``margin`` worse than the baseline on ``column`` (a proportion of
    its own behaviour). The difference vendor − baseline gets Newcombe's interval from the two Wilson intervals;
    PASS when it lies wholly above −δ (below +δ for a lower-is-better metric), FAIL when wholly below, else
    INCONCLUSIVE. The baseline itself meets it. ``baseline`` = its scores row and evidence (None: the vendor is
    the baseline).

    Why so many parameters: as :func:`judge_bound`'s: ``column`` and ``margin`` are one margin as
    :meth:`~avv_scoring.verdict.Thresholds.margins` yields it, ``row`` / ``evidence`` the vendor's scores, ``baseline``
    the baseline's, and ``mode`` / ``level`` keyword options with defaults.
    """
    kind = "min" if metric(column).better == "higher" else "max"
    limit = -margin if kind == "min" else margin
    if baseline is None:
        value = row.get(column)
        base = math.nan if value is None or is_missing(value) else float(value)
        return BoundDecision(column, kind, limit, PASS, SELF, 0.0, n=0.0, level=level, baseline=base)
    base_row, base_evidence = baseline
    mine, theirs = row.get(column), base_row.get(column)
    if mine is None or is_missing(mine) or theirs is None or is_missing(theirs):
        return BoundDecision(column, kind, limit, FAIL, ABSENT, level=level, baseline=math.nan)
    diff = float(mine) - float(theirs)
    a, b = evidence.get(column), base_evidence.get(column)
    if mode == "point" or a is None or b is None or a.proportion.n <= 0 or b.proportion.n <= 0:
        holds = diff >= limit if kind == "min" else diff <= limit
        return BoundDecision(column, kind, limit, PASS if holds else FAIL, POINT, diff, level=level,
                             baseline=float(theirs))
    low, high = newcombe((a.proportion.value, *a.proportion.interval(level)),
                         (b.proportion.value, *b.proportion.interval(level)))
    state = _side(low, high, kind, limit)
    more = None
    if state == INCONCLUSIVE:
        more = more_samples(a.units or a.proportion.samples, (high - low) / (2.0 * z_two_sided(level)), diff, limit,
                            level)
    return BoundDecision(column, kind, limit, state, WILSON, diff, low, high, a.proportion.n, more, level=level,
                         baseline=float(theirs))


# --------------------------------------------------------------------------------------------- one vendor


@dataclass(frozen=True)
class VendorDecision:
    """One vendor's verdict: its bounds judged, and what else decided it (the noise tests of ``--verdict
    statistical``, an early settle)."""

    verdict: str  # PASS, FAIL or INCONCLUSIVE
    bounds: tuple[BoundDecision, ...] = ()
    failing: tuple[str, ...] = ()  # reasons that are not one bound (statistical mode's noise tests)
    undecided: tuple[str, ...] = ()  # idem, INCONCLUSIVE (no noise floor measured)
    settled: str = ""  # "--avv-settle": how the sequential test settled it ("" = it was not settled early)
    level: float = DEFAULT_CONFIDENCE

    @property
    def more(self) -> int | None:
        """INCONCLUSIVE: about how many more samples would decide the vendor — the fewest that settle a bound that
        leans to FAIL, else the most any undecided bound needs (all must hold); None when it cannot be said."""
        if self.verdict != INCONCLUSIVE or self.undecided:
            return None
        open_ = [b for b in self.bounds if b.state == INCONCLUSIVE]
        failing = [b.more for b in open_ if b.leans_fail and b.more is not None]
        if failing:
            return min(failing)
        if any(b.more is None for b in open_):
            return None
        return max((b.more for b in open_ if b.more is not None), default=None)

    def reasons(self) -> list[str]:
        """The reasons of the verdict, in the metric's own format: FAIL — every broken bound (defects first) and
        failing test; INCONCLUSIVE — every undecided bound; PASS — none."""
        if self.verdict == FAIL:
            broken = [b for b in self.bounds if b.state == FAIL]
            ordered = [b for b in broken if b.is_defect] + [b for b in broken if not b.is_defect]
            return [b.text() for b in ordered] + list(self.failing)
        if self.verdict == INCONCLUSIVE:
            return [b.text() for b in self.bounds if b.state == INCONCLUSIVE] + list(self.undecided)
        return []

    def reason(self) -> str:
        """One line: why this verdict, each number in its metric's format — FAIL / INCONCLUSIVE: its
        :meth:`reasons`; PASS: how many bounds hold and the one closest to its limit."""
        prefix = f"{self.settled}; " if self.settled else ""
        if self.verdict != PASS:
            return prefix + "; ".join(self.reasons())
        if not self.bounds:
            return prefix + "no bound in force"
        parts = [f"all {len(self.bounds)} bounds hold" if len(self.bounds) > 1 else "its bound holds"]
        closest = self.closest()
        if closest is not None:
            parts.append(f"closest: {closest.text()}")
        defects = [b for b in self.bounds if b.is_defect]
        if defects:
            parts.append(f"no defect in {defects[0].n:.0f} responses")
        return prefix + "; ".join(parts)

    def closest(self) -> BoundDecision | None:
        """The statistical bound whose interval comes nearest its limit (relative to the limit's room)."""
        def room(b: BoundDecision) -> float:
            end = b.low if b.kind == "min" else b.high
            end = b.value if math.isnan(end) else end
            return abs(end - b.limit) / max(abs(b.limit), 1e-9)

        candidates = [b for b in self.bounds if not b.is_defect]
        return min(candidates, key=room) if candidates else None

    def states(self) -> str:
        """Every bound's state, ``success_rate≥0.99:PASS;f1≥0.8:INCONCLUSIVE;…`` (scores.csv ``verdict_bounds``)."""
        return ";".join(b.state_text() for b in self.bounds)


def combine(states: Sequence[str]) -> str:
    """FAIL if any FAILs, PASS if all PASS (or none is in force), else INCONCLUSIVE."""
    if FAIL in states:
        return FAIL
    return PASS if all(s == PASS for s in states) else INCONCLUSIVE


def decide(row: JSONMapping, evidence: Mapping[str, Evidence], thresholds: Thresholds, mode: str = "interval",
           level: float = DEFAULT_CONFIDENCE, alpha: float = 0.05,
           baseline: tuple[JSONMapping, Mapping[str, Evidence]] | None = None) -> VendorDecision:
    """One vendor's verdict under ``thresholds`` (already the bounds judged for its model, agreement bounds removed
    in ``statistical`` mode): each bound (:func:`judge_bound`), each margin against the baseline
    (:func:`judge_margin`; ``baseline`` = its row and evidence, None when this vendor is the baseline), then the
    noise tests in ``statistical`` mode.

    Why so many parameters: after the vendor (``row``, ``evidence``) and its ``thresholds`` come the
    three judging settings (``mode`` = --verdict, ``level`` = --confidence, ``alpha`` = the noise tests' level) and the
    baseline, each with a default, so the tests and ``bench/calibration.py`` decide from a row and thresholds alone;
    the scoring passes its StatsSettings' three.
    """
    judged = "point" if mode == "point" else "interval"
    bounds = tuple(judge_bound(column, kind, limit, row, evidence, judged, level)
                   for column, kind, limit in thresholds.checks())
    bounds += tuple(judge_margin(column, margin, row, evidence, baseline, judged, level)
                    for column, margin in thresholds.margins())
    failing: list[str] = []
    undecided: list[str] = []
    if mode == "statistical":
        for reason in statistical_reasons(row, alpha):
            (undecided if reason.startswith("noise_p missing") else failing).append(reason)
    states = [b.state for b in bounds] + [FAIL] * len(failing) + [INCONCLUSIVE] * len(undecided)
    return VendorDecision(combine(states), bounds, tuple(failing), tuple(undecided), level=level)


def settled_decision(decision: VendorDecision, entry: JSONMapping) -> VendorDecision:
    """A vendor settled early by ``--avv-settle`` keeps the verdict of the sequential test (run.json's
    ``settle.vendors.<name>``, the only test still valid after stopping early): each bound it tested takes the
    test's state and its confidence sequence at that point; a defect check, and a bound it did not test, keep their
    decision on the records. Not settled (``verdict`` None): unchanged."""
    said = str(entry.get("verdict") or "").upper()
    if said not in (PASS, FAIL):
        return decision
    tested = {(str(b.get("metric")), str(b.get("kind")), float(b.get("limit", math.nan))): b
              for b in entry.get("bounds") or () if isinstance(b, Mapping)}
    bounds = []
    for bound in decision.bounds:
        found = tested.get((bound.column, bound.kind, bound.limit))
        if found is None or bound.is_defect:
            bounds.append(bound)
            continue
        low, high = (list(found.get("interval") or ()) + [math.nan, math.nan])[:2]
        value = found.get("value")
        bounds.append(BoundDecision(bound.column, bound.kind, bound.limit, SETTLE_STATES.get(found.get("state"),
                                                                                            INCONCLUSIVE),
                                    SEQUENTIAL, bound.value if value is None else float(value), float(low),
                                    float(high), bound.n, level=decision.level))
    how = (f"settled {said} early by --avv-settle after {entry.get('settled_after')} of {entry.get('of')} samples "
           f"(anytime-valid test, α {float(entry.get('alpha', 0.05)):g})")
    verdict = combine([b.state for b in bounds] + [FAIL] * len(decision.failing))
    return VendorDecision(said if verdict != INCONCLUSIVE else verdict, tuple(bounds), decision.failing,
                          decision.undecided, how, decision.level)


@dataclass(frozen=True)
class Decisions:
    """Every vendor's decision of one scoring: (model, vendor) → :class:`VendorDecision`."""

    by_vendor: Mapping[tuple[str, str], VendorDecision] = field(default_factory=dict)

    def of(self, model: str, vendor: str) -> VendorDecision | None:
        return self.by_vendor.get((model, vendor))


__all__ = ["ABSENT", "BOOTSTRAP", "DEFAULT_CONFIDENCE", "DEFECT", "DEFECT_TOLERANCE", "FAIL", "INCONCLUSIVE", "PASS",
           "POINT", "SAMPLES_NAMED", "SELF", "SEQUENTIAL", "SETTLE_STATES", "VERDICTS", "VERDICT_MODES", "WILSON",
           "BoundDecision", "Decisions", "Evidence", "VendorDecision", "combine", "decide", "judge_bound",
           "judge_margin", "plural", "settled_decision", "vendor_evidence", "verdict_of"]
