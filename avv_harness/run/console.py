"""What a headless run prints, in order (run-controller layer; the only writer of the run's terminal output):

1. the **start line** — vendors, samples and items, the run folder (:func:`start_line`);
2. the pre-flight's line (:mod:`avv_harness.run.preflight`);
3. **one progress line** (:mod:`avv_harness.run.progress`): on a terminal it is rewritten in place every second; in a
   log (stdout not a TTY: CI, a file, a pipe) a plain line every few seconds;
4. Locust's final tables, only with ``--print-stats`` or ``--only-summary`` (:mod:`avv_harness.locust.output`);
5. the score tables, warnings and the closing line (records, run folder, how to resume);
6. last, the **decision block** — one line per vendor: its verdict, the reason, key numbers — and the paths of
   report.html and report.md (:meth:`Console.decision`).

Not on a terminal, every line is plain text: no carriage return, no escape sequence. On a terminal the verdict
words are coloured unless ``NO_COLOR`` is set (https://no-color.org) or ``TERM`` is ``dumb``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from avv_scoring.score import ScoreResult

#: Verdict words coloured on a terminal: ANSI SGR colour of each.
VERDICT_COLOURS = {"PASS": "32", "FAIL": "31", "INCONCLUSIVE": "33", "STOPPED": "31"}
_VERDICT_WORD = re.compile(r"\b(" + "|".join(VERDICT_COLOURS) + r")\b")
#: The longest progress line in a log (a terminal's own width on a terminal): past it, vendors are counted, not named.
LOG_WIDTH = 160
#: Vendors named in the start line before "+N more".
START_LINE_VENDORS = 8


def wants_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour only on a terminal, never with ``NO_COLOR`` set (any non-empty value) or ``TERM=dumb``."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


def is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Console:
    """The run's terminal output (module docstring): plain lines, one progress line that a terminal rewrites in
    place, and the decision block. ``stream`` defaults to the current ``sys.stdout`` at each write (so tests that
    capture stdout see it)."""

    def __init__(self, stream: TextIO | None = None, *, terminal: bool | None = None, colour: bool | None = None):
        self._stream = stream
        self._terminal = terminal
        self._colour = colour
        self._progress_shown = False  # a progress line is on screen without its newline (terminal only)
        self._last_progress: str | None = None

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    @property
    def terminal(self) -> bool:
        return self._terminal if self._terminal is not None else is_terminal(self.stream)

    @property
    def colour(self) -> bool:
        return self._colour if self._colour is not None else wants_colour(self.stream)

    def width(self) -> int:
        """The longest progress line: the terminal's width, or :data:`LOG_WIDTH` in a log."""
        return shutil.get_terminal_size((100, 24)).columns - 1 if self.terminal else LOG_WIDTH

    def line(self, text: str = "") -> None:
        """A line of its own (a progress line on screen is ended first, so nothing is written over)."""
        self._end_progress()
        self.stream.write(text + "\n")
        self.stream.flush()

    def lines(self, texts: Sequence[str]) -> None:
        for text in texts:
            self.line(text)

    def progress(self, text: str) -> None:
        """The progress line: rewritten in place on a terminal, a plain line in a log."""
        self._last_progress = text
        if not self.terminal:
            self.line(text)
            return
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._progress_shown = True

    def end_progress(self, text: str | None = None) -> None:
        """The last progress line, ``text``, stays: on a terminal rewritten once more, in a log a line of its own
        unless the last one said the same."""
        if text is not None and (self.terminal or text != self._last_progress):
            self.progress(text)
        self._end_progress()

    def _end_progress(self) -> None:
        if self._progress_shown:
            self.stream.write("\n")
            self._progress_shown = False

    def end_progress_before_logs(self) -> None:
        """On a terminal, a log line (a warning on stderr) would be written after the unfinished progress line: end
        that line first. A filter on the root logger's handlers (it lets every record through)."""
        if not self.terminal:
            return
        console = self

        class _EndProgress(logging.Filter):
            ends_progress = True

            def filter(self, record: logging.LogRecord) -> bool:
                console._end_progress()
                return True

        for handler in logging.getLogger().handlers:
            if not any(getattr(f, "ends_progress", False) for f in handler.filters):
                handler.addFilter(_EndProgress())

    def decision(self, lines: Sequence[str], reports: Sequence[tuple[str, str]]) -> None:
        """The decision block, then ``label: path`` of each report (the run's last lines)."""
        self._end_progress()
        for text in lines:
            self.line(_VERDICT_WORD.sub(lambda m: f"\x1b[{VERDICT_COLOURS[m.group(1)]}m{m.group(1)}\x1b[0m", text)
                      if self.colour else text)
        width = max((len(label) for label, _ in reports), default=0)
        for label, path in reports:
            self.line(f"{label + ':':<{width + 1}} {path}")


def start_line(vendors: Sequence[tuple[str, str, bool]], samples: int, repeats: int, run_dir: str, *,
               left: int | None = None, stress: str | None = None) -> str:
    """``avv-locust: 3 vendors of demo-model (reference = baseline, faithful, flaky) · 32 samples × 1 repeat = 96 items
    → results/RUN``. ``vendors`` = (model, name, is baseline) in order; ``left`` = a resumed run's items this session
    runs (None: a new run); ``stress`` = the ladder's text in stress mode."""
    models = list(dict.fromkeys(model for model, _, _ in vendors))
    names = [f"{name} = baseline" if baseline else name for _, name, baseline in vendors]
    if len(models) > 1:
        names = [f"{model}/{name}" for (model, _, _), name in zip(vendors, names, strict=True)]
    shown = ", ".join(names[:START_LINE_VENDORS]) + (
        f", +{len(names) - START_LINE_VENDORS} more" if len(names) > START_LINE_VENDORS else "")
    of = f" of {models[0]}" if len(models) == 1 else f" of {len(models)} models"
    count = f"{len(vendors)} vendor{'s' if len(vendors) != 1 else ''}{of} ({shown})"
    if stress is not None:
        work = f"{samples} samples, {stress}"
    else:
        total = samples * repeats * len(vendors)
        work = f"{samples} samples × {repeats} repeat{'s' if repeats != 1 else ''} = {total} items"
        if left is not None:
            work += f", {left} left to run"
    return f"avv-locust: {count} · {work} → {run_dir}"


def decision_lines(result: ScoreResult | None, run_dir: Path | str, no_score: bool = False) -> list[str]:
    """The decision block: per model, one line per vendor — verdict, reason, key numbers
    (:func:`avv_scoring.decision_lines`, the same text report.md opens with) — then each broken vendor's line. A
    run without scores says why and how to score it. Every line goes through the scoring's escaping."""
    if result is None or not getattr(result, "scored", False) or result.scores.empty:
        why = "--avv-no-score" if no_score else "no scores"
        return [f"no decision ({why}): avv-score {run_dir} scores the run"]
    import avv_scoring

    lines = [avv_scoring.terminal_text(line) for line in avv_scoring.decision_lines(result)]
    lines += [f"avv-locust: {avv_scoring.terminal_text(b.line())}" for b in avv_scoring.broken_vendors(result)]
    return [line for line in "\n".join(lines).rstrip("\n").split("\n")]


def report_paths(result: ScoreResult | None, run_dir: Path | str) -> list[tuple[str, str]]:
    """(label, path) of report.html and report.md when they were written."""
    outputs = getattr(result, "outputs", None) or {}
    return [(name, str(outputs[name])) for name in ("report.html", "report.md") if name in outputs]


__all__ = ["Console", "START_LINE_VENDORS", "decision_lines", "is_terminal", "report_paths", "start_line",
           "wants_colour"]
