"""The identity test ("is it the same model?", issue 38): its false-alarm rate on twins, its power against a known
shift, and what it costs inside scoring.

    python bench/identity.py                      # everything: calibration, power curve, CPU
    python bench/identity.py --runs 50 --quick    # a smaller grid (checks the script runs)
    python bench/identity.py --only cpu --cpu-prompts 1000 --cpu-repeats 10 --cpu-vendors 5

No HTTP: each run draws its answers in-process from the simulator's pure decisions (avv_sim: ``behaviour.decide``
for the call decision and ``reference_calls`` for the calls, ``behaviour.answer_words`` for the content), for
prompts that alternate between a request with two tools and one without. The baseline and the vendor are two
profiles of the same knobs (:data:`BASE_KNOBS`) under different seeds — twins: one distribution, independent draws
— and the shifted vendor adds ``answer_shift_rate`` (a known share of its content answers drawn around another
most likely word sequence). Each run has its own prompts and seeds; the test is
:func:`avv_scoring.stats.identity.two_sample_test` (what ``identity_p`` is), flagged when p < α = 0.05.

Printed: (1) the twins' false-alarm rate over ``--calibration-runs`` seeded runs, with its 95 % Clopper–Pearson
interval; (2) the power curve, share of runs flagged per prompts × repeats for each shift; (3) the CPU of the
identity columns at ``--cpu-prompts`` × ``--cpu-repeats`` × ``--cpu-vendors`` (the baseline, a twin and shifted
vendors) against the whole of ``score_frame`` on the same records (process CPU seconds; measure on a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from avv_scoring.stats.identity import Answers, answer_lengths, encode_text, two_sample_test  # noqa: E402
from avv_sim import behaviour  # noqa: E402
from avv_sim.calls import reference_calls  # noqa: E402
from avv_sim.identity import decision_key  # noqa: E402
from avv_sim.profiles import Profile, make_profile  # noqa: E402
from avv_sim.request import Tool  # noqa: E402
from avv_sim.writing_systems import WORDS  # noqa: E402

ALPHA = 0.05
TEMPERATURE = 0.7
#: The baseline's knobs (and every vendor's): a little sampling noise in words and in the call decision.
BASE_KNOBS: dict[str, Any] = {"sampling_rate": 0.1, "self_flip_rate": 0.05, "output_tokens": 32}
SHIFTS = (0.1, 0.2, 0.3, 0.5)
PROMPTS = (10, 25, 50, 100)
REPEATS = (2, 5, 10)
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
]


@dataclass(frozen=True)
class Prompt:
    body: dict[str, Any]
    key: str  # the simulator's decision key


@dataclass(frozen=True)
class Answer:
    """What the record of one answer holds, as far as the identity test reads it."""

    prompt: int
    repeat: int
    content: str
    called: bool
    tools: tuple[str, ...]  # sorted names called
    calls: tuple[tuple[str, str], ...]  # sorted (name, canonical arguments)
    finish: str
    argument_chars: int


def prompts_of(run: int, count: int, temperature: float | None = TEMPERATURE) -> list[Prompt]:
    """``count`` prompts of one run (its own texts): even ones with the two tools, odd ones without."""
    out = []
    for i in range(count):
        body: dict[str, Any] = {"messages": [{"role": "user", "content": f"run {run} question {i}"}]}
        if i % 2 == 0:
            body["tools"] = TOOLS
        if temperature is not None:
            body["temperature"] = temperature
        out.append(Prompt(body, decision_key(body)))
    return out


_CALLS: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, str], ...]] = {}


def _calls(key: str, tools: tuple[Tool, ...]) -> tuple[tuple[str, str], ...]:
    """The reference's calls of a calling answer (the same for every profile and repeat: kept once)."""
    wanted = (key, tuple(t.name for t in tools))
    if wanted not in _CALLS:
        planned = reference_calls(tools, key, None)
        _CALLS[wanted] = tuple(sorted((c.tool.name, json.dumps(c.args, sort_keys=True)) for c in planned))
    return _CALLS[wanted]


def draw_answers(profile: Profile, prompts: Sequence[Prompt], repeats: int) -> Iterator[Answer]:
    """Every answer of one profile: what ``make_plan`` decides for each (prompt, repeat), without the wire."""
    words = WORDS["Latin"]
    for index, prompt in enumerate(prompts):
        greedy = prompt.body.get("temperature") == 0
        for repeat in range(1, repeats + 1):
            decision = behaviour.decide(profile, prompt.body, prompt.key, None, repeat)
            if decision.decision:
                calls = _calls(prompt.key, decision.calls)
                yield Answer(index, repeat, "", True, tuple(sorted(name for name, _ in calls)), calls, "tool_calls",
                             sum(len(args) for _, args in calls))
            else:
                drawn = behaviour.answer_words(profile, prompt.key, profile.output_tokens, words, repeat, greedy)
                yield Answer(index, repeat, " ".join(drawn.words), False, (), (), "stop", 0)


def as_answers(answers: Sequence[Answer]) -> Answers:
    """The arrays of :class:`avv_scoring.stats.identity.Answers` (labels coded as ``answers_of`` codes them)."""
    codes: dict[Any, int] = {}
    labels = np.array([[int(a.called), codes.setdefault(("tools", a.tools), len(codes)),
                        codes.setdefault(("calls", a.calls), len(codes)), codes.setdefault(("finish", a.finish),
                                                                                           len(codes))]
                       for a in answers], dtype=np.int64).reshape(len(answers), 4)
    contents = [a.content for a in answers]
    return Answers(np.array([a.prompt for a in answers], dtype=np.int64), encode_text(contents), labels,
                   answer_lengths([len(c) for c in contents], [a.argument_chars for a in answers]))


def one_run(run: int, prompts: int, repeats: int, vendor_knobs: Mapping[str, Any],
            base_knobs: Mapping[str, Any] = BASE_KNOBS) -> float:
    """The identity p of one seeded run: the baseline (seed 2·run + 1) against a vendor (seed 2·run + 2)."""
    shown = prompts_of(run, prompts)
    base = make_profile("base", {**base_knobs, "seed": 2 * run + 1})
    vendor = make_profile("vendor", {**base_knobs, **vendor_knobs, "seed": 2 * run + 2})
    first = list(draw_answers(base, shown, repeats))
    second = list(draw_answers(vendor, shown, repeats))
    side = np.r_[np.zeros(len(first), dtype=bool), np.ones(len(second), dtype=bool)]
    outcome = two_sample_test(as_answers(first + second), side, np.random.default_rng(run))
    return float("nan") if outcome is None else outcome.p


def flagged_share(runs: int, prompts: int, repeats: int, vendor_knobs: Mapping[str, Any], alpha: float = ALPHA,
                  first_run: int = 0) -> tuple[int, int]:
    """(runs flagged, runs) over ``runs`` seeded runs."""
    ps = [one_run(first_run + k, prompts, repeats, vendor_knobs) for k in range(runs)]
    return sum(p < alpha for p in ps), runs


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a binomial share k / n, by bisection on its tails (no scipy)."""

    def at_most(j: int, p: float) -> float:  # P(X ≤ j) for X ~ Binomial(n, p), 0 < p < 1
        return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
                            + (n - i) * math.log1p(-p)) for i in range(j + 1))

    def bisect(decreasing: Any, target: float) -> float:
        lo, hi = 1e-12, 1 - 1e-12
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if decreasing(mid) > target else (lo, mid)
        return (lo + hi) / 2

    tail = (1 - level) / 2
    low = 0.0 if k == 0 else bisect(lambda p: at_most(k - 1, p), 1 - tail)  # P(X ≥ k) = tail
    high = 1.0 if k == n else bisect(lambda p: at_most(k, p), tail)  # P(X ≤ k) = tail
    return low, high


def calibration(runs: int, prompts: int, repeats: int) -> None:
    flagged, total = flagged_share(runs, prompts, repeats, {}, first_run=10_000)
    low, high = clopper_pearson(flagged, total)
    print(f"twins ({prompts} prompts × {repeats} repeats, {total} seeded runs): flagged {flagged} "
          f"= {flagged / total:.1%} (95 % interval {low:.1%}–{high:.1%}) at α = {ALPHA}")


def power_curve(runs: int, prompts: Sequence[int], repeats: Sequence[int], shifts: Sequence[float]) -> None:
    header = "answer_shift_rate  " + "  ".join(f"{p:>4}×{r:<2}" for p in prompts for r in repeats)
    print(header)
    print("-" * len(header))
    for shift in (0.0, *shifts):
        cells = []
        for p in prompts:
            for r in repeats:
                flagged, total = flagged_share(runs, p, r, {"answer_shift_rate": shift} if shift else {},
                                               first_run=20_000 + int(shift * 1000))
                cells.append(f"{flagged / total:>7.0%}")
        print(f"{shift:>17}  " + "  ".join(cells))
    print(f"(share of {runs} seeded runs flagged at α = {ALPHA}; columns prompts × repeats; 0.0 = twins)")


def cpu_share(prompts: int, repeats: int, vendors: int, shift: float) -> None:
    """CPU of the identity columns against the whole score_frame on one synthetic run."""
    from avv_scoring.load import rows_where
    from avv_scoring.metrics.identity import identity
    from avv_scoring.score import score_frame
    from avv_scoring.stats.uncertainty import ModelTable
    from avv_scoring.testing import call, records_frame

    shown = prompts_of(0, prompts)
    knobs = [{}, {}] + [{"answer_shift_rate": shift}] * max(0, vendors - 2)
    rows = []
    for v, extra in enumerate(knobs[:vendors]):
        name = "base" if v == 0 else f"v{v}"
        profile = make_profile(name, {**BASE_KNOBS, **extra, "seed": v + 1})
        rows += [{"vendor": name, "is_baseline": v == 0, "sample_id": str(a.prompt), "repeat": a.repeat,
                  "finish_reason": a.finish, "content": a.content, "temperature": TEMPERATURE,
                  "tool_calls": [call(n, args, f"call_{k}") for k, (n, args) in enumerate(a.calls)]}
                 for a in draw_answers(profile, shown, repeats)]
    frame = records_frame(rows)
    tools = {str(i): (TOOLS if i % 2 == 0 else []) for i in range(prompts)}
    start = time.process_time()
    result = score_frame(frame, tools)
    scoring = time.process_time() - start
    records = result.records
    assert records is not None
    table = ModelTable("m", "base", rows_where(records, records["model"].astype(str) == "m"),
                       {r["vendor"]: r for r in result.scores.to_dict("records")}, result.stats)
    start = time.process_time()
    identity(table)
    alone = time.process_time() - start
    print(f"{len(frame):,} records ({prompts} prompts × {repeats} repeats × {vendors} vendors; the baseline, a twin "
          f"and {max(0, vendors - 2)} vendors with answer_shift_rate {shift}): score_frame {scoring:.2f} CPU s, "
          f"of which the identity columns {alone:.2f} CPU s = {alone / scoring:.1%}")
    print(result.scores[["vendor", "identity", "identity_p", "identity_prompts"]].to_string(index=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="seeded runs per power-curve cell")
    parser.add_argument("--calibration-runs", type=int, default=1000, help="seeded twin runs for the false-alarm rate")
    parser.add_argument("--calibration-size", default="20x5", help="prompts×repeats of the calibration runs")
    parser.add_argument("--quick", action="store_true", help="a small grid: 10 and 25 prompts, 2 and 5 repeats")
    parser.add_argument("--only", choices=("calibration", "power", "cpu"), help="one part only")
    parser.add_argument("--cpu-prompts", type=int, default=1000)
    parser.add_argument("--cpu-repeats", type=int, default=10)
    parser.add_argument("--cpu-vendors", type=int, default=5)
    parser.add_argument("--cpu-shift", type=float, default=0.3, help="answer_shift_rate of the shifted vendors")
    args = parser.parse_args(argv)
    print("$ " + benchlib.command_line())
    print(benchlib.machine_line())
    prompts, repeats = ((10, 25), (2, 5)) if args.quick else (PROMPTS, REPEATS)
    if args.only in (None, "calibration"):
        p, r = (int(x) for x in args.calibration_size.split("x"))
        calibration(args.calibration_runs, p, r)
    if args.only in (None, "power"):
        power_curve(args.runs, prompts, repeats, SHIFTS)
    if args.only in (None, "cpu"):
        cpu_share(args.cpu_prompts, args.cpu_repeats, args.cpu_vendors, args.cpu_shift)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
