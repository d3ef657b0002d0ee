"""Token and cost budgets that reserve before they spend (run-controller layer; pure bookkeeping: no Locust, no I/O).

``--avv-max-total-tokens`` and ``--avv-max-cost`` are held by the process that holds the ledger (the local runner or
the master). An item is handed out only while *spent + reserved* is below every cap, and handing it out reserves its
worst case (:func:`worst_case`); when its records arrive the reservation is replaced by what it actually spent
(:meth:`Budget.settle`), and an item given back unrecorded releases it. Counting only finished requests, as before,
let every request in flight run past the cap (2.3× a cap of 8,000 tokens on the demo).

**The bound.** Admission needs *spent + reserved < cap*, and settling never raises that sum while an item spends no
more than it reserved, so *spent + reserved* never passes *cap + the largest single reservation*: a run spends less
than the cap plus one item's worst case (:attr:`Budget.largest`) — below what is in flight with one request per user.
It holds while vendors honour ``max_tokens`` and count no more prompt tokens than the estimate; what an item spends
beyond its reservation is added on top (run.json ``budget.over_reservation``).

**What an item is charged**: the ``total_tokens`` (``cost``) its rows report; a successful row that reports no usage
(or usage not believed) is charged as if it had spent the item's whole reservation — a vendor that hides its usage
cannot spend past a cap. A failed row without usage is charged nothing (no answer came).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from avv_core.canonical import canonical_json
from avv_core.items import ItemKey
from avv_core.json_types import JSONMapping, JSONObject
from avv_core.pricing import Price
from avv_core.records import STATUS_SUCCESS
from avv_core.samples import Sample
from avv_harness.dialects.overrides import Overrides
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import build_body

#: Completion tokens reserved for a request whose body sets neither ``max_tokens`` nor ``max_completion_tokens``.
DEFAULT_MAX_TOKENS = 4096
#: Characters of the request's messages and tools (canonical JSON) per estimated prompt token: three, below the
#: four characters per token of English and code, so the estimate is above what vendors count for such text.
CHARS_PER_TOKEN = 3


@dataclass(frozen=True)
class Spend:
    """Tokens and money (in the price currency; 0.0 without a price)."""

    tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.cost + other.cost)

    def to_dict(self) -> JSONObject:
        return {"tokens": self.tokens, "cost": round(self.cost, 9)}


def prompt_estimate(body: JSONMapping) -> int:
    """Estimated prompt tokens of a chat body: its messages and tools as canonical JSON / :data:`CHARS_PER_TOKEN`."""
    shown: JSONObject = {"messages": body.get("messages")}
    if body.get("tools") is not None:
        shown["tools"] = body.get("tools")
    return max(1, math.ceil(len(canonical_json(shown)) / CHARS_PER_TOKEN))


def max_tokens_of(body: JSONMapping) -> int:
    """The completion tokens a body allows: ``max_completion_tokens``, else ``max_tokens``, else
    :data:`DEFAULT_MAX_TOKENS` (also for a value that is not a positive whole number)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def worst_case(sample: Sample, body: JSONMapping, price: Price | None) -> Spend:
    """The most an item can spend, from the chat body the vendor gets (sample, transforms, ``extra_body`` and the
    global overrides applied): prompt estimate + allowed completion tokens. An agent task makes up to ``max_steps``
    requests, and each step's prompt holds the earlier steps: their replies (``max_tokens`` each) and one answer
    per request tool (the longest of the task's tool answers)."""
    prompt, completion = prompt_estimate(body), max_tokens_of(body)
    prompts, completions = prompt, completion
    task = sample.agent
    if task is not None:
        answers = [len(r.content) for r in task.tool_results] + [len(task.default_result)]
        if task.inject_error is not None:
            answers.append(len(task.inject_error.content))
        answer = math.ceil(max(answers) / CHARS_PER_TOKEN) + 16  # + the tool message's own JSON
        growth = completion + max(1, len(sample.tools)) * answer
        steps = task.max_steps
        prompts = steps * prompt + growth * steps * (steps - 1) // 2
        completions = steps * completion
    return Spend(prompts + completions, price.worst(prompts, completions) if price is not None else 0.0)


class WorstCases:
    """Each (vendor, sample)'s worst case (:func:`worst_case` of the body :func:`build_body` makes for that vendor),
    computed once: the bodies do not change during a run."""

    def __init__(self, overrides: Overrides):
        self.overrides = overrides
        self._known: dict[tuple[str, str, str], Spend] = {}

    def of(self, vendor: Vendor, sample: Sample) -> Spend:
        key = (vendor.model, vendor.name, sample.sample_id)
        if key not in self._known:
            self._known[key] = worst_case(sample, build_body(sample, vendor, self.overrides), vendor.price)
        return self._known[key]


def charged(records: Sequence[JSONMapping], reservation: Spend) -> Spend:
    """What an item's rows spent, as the budget counts it (module docstring)."""
    tokens, cost = 0, 0.0
    for row in records:
        ok = row.get("status") == STATUS_SUCCESS
        if row.get("total_tokens") is not None:
            tokens += int(row["total_tokens"])
        elif ok:
            return Spend(max(tokens, reservation.tokens), max(cost, reservation.cost))
        if row.get("cost") is not None:
            cost += float(row["cost"])
        elif ok and reservation.cost:
            return Spend(max(tokens, reservation.tokens), max(cost, reservation.cost))
    return Spend(tokens, cost)


@dataclass
class Budget:
    """The caps, what was spent and what is reserved by the items in flight."""

    max_tokens: int = 0  # --avv-max-total-tokens (0: no cap)
    max_cost: float = 0.0  # --avv-max-cost (0: no cap)
    spent: Spend = Spend()  # charged for the items recorded
    reserved: dict[ItemKey, Spend] = field(default_factory=dict)  # the worst case of each item in flight
    largest: Spend = Spend()  # the largest reservation made (tokens and cost each): the overshoot bound
    over_reservation: Spend = Spend()  # what items spent beyond their reservation (0 while the estimates hold)

    @property
    def active(self) -> bool:
        return bool(self.max_tokens or self.max_cost)

    def in_reserve(self) -> Spend:
        return sum(self.reserved.values(), Spend())

    def admits(self) -> bool:
        """May another item start: spent + reserved below every cap."""
        if not self.active:
            return True
        held = self.spent + self.in_reserve()
        return not ((self.max_tokens and held.tokens >= self.max_tokens)
                    or (self.max_cost and held.cost >= self.max_cost))

    @property
    def exhausted(self) -> bool:
        """What was spent reached a cap: no further item can start."""
        return bool((self.max_tokens and self.spent.tokens >= self.max_tokens)
                    or (self.max_cost and self.spent.cost >= self.max_cost))

    def reserve(self, key: ItemKey, worst: Spend) -> None:
        self.reserved[key] = worst
        self.largest = Spend(max(self.largest.tokens, worst.tokens), max(self.largest.cost, worst.cost))

    def release(self, key: ItemKey) -> None:
        """An item given back unrecorded (its user stopped, its worker was lost): nothing charged."""
        self.reserved.pop(key, None)

    def charge(self, spend: Spend) -> None:
        """Spending that belongs to no item (the pre-flight requests, :mod:`avv_harness.run.preflight`): counted as
        spent, so the caps hold for it too."""
        self.spent = self.spent + spend

    def settle(self, key: ItemKey, records: Sequence[JSONMapping]) -> Spend:
        """Replace the item's reservation by what its records spent (:func:`charged`); returns that."""
        reservation = self.reserved.pop(key, Spend())
        actual = charged(records, reservation)
        self.spent = self.spent + actual
        self.over_reservation = self.over_reservation + Spend(max(0, actual.tokens - reservation.tokens),
                                                              max(0.0, actual.cost - reservation.cost))
        return actual

    def caps_text(self) -> str:
        """The cap(s) reached, for messages: ``18,000 ≥ 8,000 tokens`` / ``0.0123 ≥ 0.01 cost``."""
        parts = []
        if self.max_tokens and self.spent.tokens >= self.max_tokens:
            parts.append(f"{self.spent.tokens:,} ≥ {self.max_tokens:,} tokens")
        if self.max_cost and self.spent.cost >= self.max_cost:
            parts.append(f"{self.spent.cost:.6g} ≥ {self.max_cost:g} cost")
        return "; ".join(parts)

    def summary(self) -> JSONObject:
        """run.json's ``budget`` beyond the caps."""
        return {"charged": self.spent.to_dict(), "largest_reservation": self.largest.to_dict(),
                "over_reservation": self.over_reservation.to_dict()}


__all__ = ["CHARS_PER_TOKEN", "DEFAULT_MAX_TOKENS", "Budget", "Spend", "WorstCases", "charged", "max_tokens_of",
           "prompt_estimate", "worst_case"]
