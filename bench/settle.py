"""Sequential verification (``--avv-settle``): samples used and wrong verdicts over a grid of true F1 and schema
accuracy around the default bounds (F1 ≥ 0.80, schema accuracy ≥ 0.98).

    python bench/settle.py --runs 400 --samples 2000 --every 20

No HTTP: each run draws its items' outcomes in-process from the simulator's behaviour model (avv_sim profiles),
with known truth: the baseline calls a tool on a share ``tool_call_rate`` of the items; the vendor does the
opposite of the baseline on a share ``flip_rate`` of them (chosen so that its true F1 is the grid value); a
calling item makes 2 calls with probability ``parallel_rate``, else 1, each invalid with probability
``bad_args_rate`` = 1 − the grid's schema accuracy; every request succeeds. The items are independent draws
(the run's random hand-out order makes the file's items exchangeable). Each run applies exactly the rule the
harness applies (:mod:`avv_scoring.stats.sequential`: a look every ``--every`` items, error rate 5 % split over
the two bounds, FAIL once a bound is broken, PASS once both have passed) and is compared with the truth
(F1 ≥ 0.80 and schema accuracy ≥ 0.98: PASS, else FAIL; a vendor exactly at a bound passes it).

Printed per grid point: how many runs settled early, samples used (mean, p95; a run that does not settle uses
all of them) against the full set, and the wrong-verdict rate: runs that stopped early with a verdict other than
the truth, over all runs (a run that reaches the end gets the ordinary full-set verdict, as without settling).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from avv_scoring.stats.sequential import RatioBound, log_capitals, scores, split_alpha  # noqa: E402

F1_BOUND, SCHEMA_BOUND = 0.80, 0.98
F1_GRID = (0.70, 0.78, 0.80, 0.82, 0.90)
SCHEMA_GRID: tuple[float | None, ...] = (None, 0.88, 0.96, 0.98, 0.99, 1.00)  # None: no schema bound
TOOL_CALL_RATE, PARALLEL_RATE, MAX_CALLS = 0.6, 0.2, 2  # avv_sim's default profile knobs


def flip_rate_for(f1: float, q: float) -> float:
    """The flip rate f with 2q(1−f) / (2q(1−f) + f) = f1 (TP = q(1−f), FN = qf, FP = (1−q)f)."""
    return 2 * q * (1 - f1) / (2 * q + f1 - 2 * q * f1)


def draw(rng: np.random.Generator, runs: int, n: int, f1: float, schema: float) -> dict[str, np.ndarray]:
    """Per item of each run: the F1 parts (2·TP, 2·TP + FP + FN) and the schema parts (valid, checked calls)."""
    flip = rng.random((runs, n)) < flip_rate_for(f1, TOOL_CALL_RATE)
    base = rng.random((runs, n)) < TOOL_CALL_RATE
    vend = base ^ flip
    tp, fp, fn = base & vend, vend & ~base, base & ~vend
    calls = np.where(vend, 1 + (rng.random((runs, n)) < PARALLEL_RATE), 0)
    valid = rng.binomial(calls, schema)
    return {"f1_a": 2.0 * tp, "f1_b": 2.0 * tp + fp + fn, "sc_a": valid.astype(float), "sc_b": calls.astype(float)}


def crossings(a: np.ndarray, b: np.ndarray, bound: RatioBound, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the first item at which the pass side, and the break side, reached 1/α (n + 1: never)."""
    lo, hi = bound.z_range
    log_up, log_down = log_capitals(scores(a, b, bound.limit), lo, hi)
    threshold, n = np.log(1 / alpha), a.shape[-1]

    def first(path: np.ndarray) -> np.ndarray:
        hit = path >= threshold
        return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, n + 1)

    return first(log_up), first(log_down)  # both bounds are "min" bounds


def at_look(item: np.ndarray, every: int, n: int) -> np.ndarray:
    """The look (item count) at which a crossing at ``item`` is seen; n + 1 when never (the end is no look)."""
    look = np.ceil(item / every) * every
    return np.where(item <= n, np.minimum(look, n), n + 1)


def grid_point(rng: np.random.Generator, runs: int, n: int, every: int, alpha: float, f1: float,
               schema: float | None) -> dict[str, float]:
    items = draw(rng, runs, n, f1, 1.0 if schema is None else schema)
    alpha_b = split_alpha(alpha, 1 if schema is None else 2)
    f1_pass, f1_fail = crossings(items["f1_a"], items["f1_b"], RatioBound("f1", "min", F1_BOUND, 2, 2), alpha_b)
    if schema is None:  # F1 alone: the schema side never decides
        sc_pass, sc_fail = np.zeros(runs, dtype=int), np.full(runs, n + 1)
    else:
        sc_pass, sc_fail = crossings(items["sc_a"], items["sc_b"],
                                     RatioBound("schema_accuracy", "min", SCHEMA_BOUND, MAX_CALLS, MAX_CALLS), alpha_b)
    fail_at = np.minimum(at_look(f1_fail, every, n), at_look(sc_fail, every, n))
    pass_at = np.maximum(at_look(f1_pass, every, n), at_look(sc_pass, every, n))
    settled_fail = fail_at <= np.minimum(pass_at, n)  # broken wins at the same look
    settled_pass = ~settled_fail & (pass_at <= n)
    used = np.where(settled_fail, fail_at, np.where(settled_pass, pass_at, n))
    truth_pass = f1 >= F1_BOUND - 1e-12 and (schema is None or schema >= SCHEMA_BOUND - 1e-12)
    wrong = settled_fail if truth_pass else settled_pass
    return {"settled": float((settled_fail | settled_pass).mean()), "mean": float(used.mean()),
            "p95": float(np.percentile(used, 95)), "wrong": float(wrong.mean()), "truth": truth_pass}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=400, help="seeded runs per grid point (≥ 200)")
    p.add_argument("--samples", type=int, default=2000, help="items in the full set")
    p.add_argument("--every", type=int, default=20, help="items between looks")
    p.add_argument("--alpha", type=float, default=0.05, help="error rate per vendor")
    p.add_argument("--seed", type=int, default=29)
    args = p.parse_args(argv)
    print("command: python bench/settle.py " + " ".join(sys.argv[1:] if argv is None else argv))
    print(f"{args.runs} runs per point, {args.samples} samples, a look every {args.every}, α = {args.alpha:g} "
          f"(bounds f1 ≥ {F1_BOUND}, schema_accuracy ≥ {SCHEMA_BOUND}); tool_call_rate {TOOL_CALL_RATE}, "
          f"parallel_rate {PARALLEL_RATE}\n")
    print("| true F1 | true schema acc. | truth | settled early | samples used mean | p95 | of the set (mean) "
          "| wrong-verdict rate |")
    print("|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    worst = 0.0
    for f1 in F1_GRID:
        for schema in SCHEMA_GRID:
            rng = np.random.default_rng([args.seed, int(f1 * 1000), int((schema or 0) * 1000)])
            r = grid_point(rng, args.runs, args.samples, args.every, args.alpha, f1, schema)
            worst = max(worst, r["wrong"])
            shown = "— (no bound)" if schema is None else f"{schema:.2f}"
            print(f"| {f1:.2f} | {shown} | {'PASS' if r['truth'] else 'FAIL'} | {r['settled']:.1%} | "
                  f"{r['mean']:.0f} | {r['p95']:.0f} | {r['mean'] / args.samples:.1%} | {r['wrong']:.2%} |")
    print(f"\nworst wrong-verdict rate {worst:.2%} (allowed {args.alpha:.0%}); {time.perf_counter() - started:.1f} s")
    return 0 if worst <= args.alpha else 1


if __name__ == "__main__":
    raise SystemExit(main())
