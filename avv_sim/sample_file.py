"""The sample file the simulator follows (``avv-sim --gold FILE``; the harness passes its ``--avv-samples``
file): its gold labels (:mod:`avv_sim.gold`) and its agent tasks (:mod:`avv_sim.agent`).

Simulator layer; the one module of the simulator's decisions that reads a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from avv_sim.agent import AgentBook
from avv_sim.gold import GoldEntry, gold_entry, gold_key


class GoldError(ValueError):
    """A gold file that cannot be read (names the file and line)."""


@dataclass
class GoldBook:
    """The gold of a sample file: entries by :func:`~avv_sim.gold.gold_key`, the agent tasks and the lines that
    could not be used."""

    entries: dict[str, GoldEntry] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "line N: why"
    agents: AgentBook = field(default_factory=AgentBook)


def load_gold(path: str | os.PathLike[str]) -> GoldBook:
    """The gold labels and agent tasks of a sample JSONL file. Lines without gold keys (or ``agent``) are
    ignored; lines that are not JSON or whose gold keys are malformed are skipped and listed (the harness rejects
    or skips such lines itself, so the two agree with ``--avv-skip-bad-lines``). An unreadable file raises
    :class:`GoldError`."""
    path = os.fspath(path)
    book = GoldBook()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
    except OSError as exc:
        raise GoldError(f"{path}: cannot read the gold file ({exc.strerror})") from None
    for line_no, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
            entry = gold_entry(obj)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError too; the harness refuses over-deep lines
            book.skipped.append(f"line {line_no}: {exc}")
            continue
        if entry is not None:
            book.entries.setdefault(gold_key(obj), entry)
        if isinstance(obj, dict) and "agent" in obj:
            book.agents.add(obj)
    return book
