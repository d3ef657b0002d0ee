"""Client load (report section): per Locust process the client's own event-loop lag and CPU, and whether it was
client-bound (:mod:`avv_core.client_load`). report.md: the table and the advice; terminal: the advice as
``warning:`` lines under the score tables (``render_tables(..., client_advice=False)`` leaves them out: the harness
prints its own once per run)."""

from __future__ import annotations

from dataclasses import dataclass

from avv_core.client_load import CPU_BOUND_PCT, LAG_P99_BOUND_MS, client_bound_advice
from avv_core.json_types import JSONMapping
from avv_scoring.report.escape import markdown_table
from avv_scoring.report.format import fmt
from avv_scoring.report.section import Section
from avv_scoring.score import ScoreResult

KEY = "client_load"


@dataclass(frozen=True)
class ClientLoad:
    load: JSONMapping  # ScoreResult.client_load: process → its lag per vendor, CPU, client-bound
    advice: tuple[str, ...]  # what to do about a client-bound process
    under_tables: bool  # the terminal shows score tables (so the advice under them)


def client_load(result: ScoreResult) -> ClientLoad | None:
    if not result.client_load:
        return None
    return ClientLoad(result.client_load, tuple(client_bound_advice(result.client_load)),
                      result.scored and not result.scores.empty)


def markdown(content: ClientLoad) -> list[str]:
    body = []
    for worker, entry in content.load.items():
        for vendor, lag in entry["vendors"].items():
            body.append([str(worker), str(vendor), fmt(lag["lag_p50_ms"], "num"), fmt(lag["lag_p99_ms"], "num"),
                         fmt(entry["cpu_mean_pct"], "num"), fmt(entry["cpu_max_pct"], "num"),
                         "**yes**" if entry["client_bound"] else "no"])
    blocks = [f"`client_lag_ms` bounds the client's own delay inside each TTFT; a process is client-bound when its lag "
              f"p99 exceeds {LAG_P99_BOUND_MS:g} ms or its CPU {CPU_BOUND_PCT:g} %.",
              markdown_table(["Process", "Vendor", "Lag p50 (ms)", "Lag p99 (ms)", "CPU mean %", "CPU max %",
                              "Client-bound"], body)]
    if content.advice:
        # our own sentences about our own processes (their ">" is text, not markup): only "|" escaped, as before
        advice = [line.replace("|", "\\|") for line in content.advice]
        blocks.append("\n".join(f"- **{line}**" for line in advice))
    return blocks


def terminal(content: ClientLoad) -> list[str]:
    return [f"warning: {line}" for line in content.advice] if content.under_tables else []


SECTION = Section(KEY, "Client load", 910, client_load, markdown, terminal=terminal)
