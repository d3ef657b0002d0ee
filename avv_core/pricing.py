"""Prices and cost (pure core): what one request cost from its usage and its vendor's price, and what it could cost
at most (the budgets reserve that before a request is sent).

A price is per million tokens, in one currency::

    cost = ((prompt_tokens − cached_tokens) · input + cached_tokens · cached_input + completion_tokens · output) / 10⁶

``cached_tokens`` missing counts as 0 (every prompt token at the input price: never cheaper than the vendor said);
no price, or no believed prompt / completion count → no cost (missing, never 0).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.records import MAX_TOKENS

PER_TOKENS = 1_000_000
DEFAULT_CURRENCY = "USD"
#: The most requests a run's costs are ever summed over (records, budgets, scores), for :data:`MAX_PRICE`.
MAX_PRICED_REQUESTS = 10**12
#: The largest price per million tokens a config may set: with every price at it, :data:`MAX_PRICED_REQUESTS`
#: requests of ``MAX_TOKENS`` prompt and ``MAX_TOKENS`` completion tokens (the most a row may hold) still cost a
#: finite amount, with room to spare. A larger price would make a believable request's cost, or a run's sum of
#: costs, overflow to infinity (a row no file can hold). About 4.5e293: no real price comes near it.
MAX_PRICE = sys.float_info.max / (MAX_PRICED_REQUESTS * 2 * MAX_TOKENS / PER_TOKENS) / 2


@dataclass(frozen=True)
class Price:
    input: float  # per million prompt tokens not read from the vendor's cache
    output: float  # per million completion tokens (reasoning included, as vendors bill it)
    cached_input: float  # per million prompt tokens read from the vendor's cache (default: the input price)
    currency: str = DEFAULT_CURRENCY  # ISO 4217 code; one per config

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, cached_tokens: int | None = None
             ) -> float | None:
        """The formula of the module docstring; None without both counts."""
        if prompt_tokens is None or completion_tokens is None:
            return None
        cached = min(max(cached_tokens or 0, 0), prompt_tokens)
        return ((prompt_tokens - cached) * self.input + cached * self.cached_input
                + completion_tokens * self.output) / PER_TOKENS

    def record_cost(self, record: JSONMapping) -> float | None:
        """The cost of a records.csv row from its usage columns."""
        return self.cost(record.get("prompt_tokens"), record.get("completion_tokens"), record.get("cached_tokens"))

    def worst(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The most ``prompt_tokens`` + ``completion_tokens`` can cost: no prompt token from the cache (or all of
        them, if the cache is the dearer one)."""
        return (prompt_tokens * max(self.input, self.cached_input) + completion_tokens * self.output) / PER_TOKENS

    def to_dict(self) -> JSONObject:
        return {"input": self.input, "output": self.output, "cached_input": self.cached_input,
                "currency": self.currency}


__all__ = ["DEFAULT_CURRENCY", "MAX_PRICE", "MAX_PRICED_REQUESTS", "PER_TOKENS", "Price"]
