"""Escaping rules for text that reaches a person (scoring layer, pure; the report writers, the CLI and the
harness's web UI and config checks use it): spreadsheet cells, Markdown tables and the terminal.

Vendor names, model names, sample ids, tool names and answer text come from configs, sample files and vendors,
so any of them can hold ``=HYPERLINK(…)``, ``<img onerror=…>``, ``|``, a line break or an ANSI escape. Each
output escapes them by one rule, kept here:

- **CSV cells** (every CSV a person opens: scores.csv, scores_by_repeat.csv, disagreements.csv, stress.csv,
  capacity.csv, ``avv-score irf``'s output): OWASP's CSV-injection guidance. A text cell beginning with ``=``,
  ``+``, ``-``, ``@``, tab or carriage return gets a single quote in front, which a spreadsheet reads as "this
  is text". A plain number (``-0.25``, ``-3``, ``+1e-3``) is left as it is: it is read as a number, not a
  formula. To keep the rule reversible a text cell already beginning with ``'`` gets one more ``'``; so
  :func:`restore_cell` drops one leading ``'`` when the next character is one of ``= + - @ \\t \\r '``.
  records.csv is the data file and keeps raw text (the README says how to open it).
- **Markdown** (report.md): :func:`markdown_cell` escapes ``&``, ``<`` and ``>`` as HTML entities, ``|`` as
  ``\\|``, turns line breaks and tabs into spaces and shows other control characters escaped;
  :func:`markdown_table` builds every table from such cells; :func:`markdown_text` (names in headings and
  bullets) does the same but leaves ``|`` alone.
- **HTML** (report.html): :func:`html_text` escapes ``&``, ``<``, ``>`` and both quotes, everywhere (text and
  attribute values alike).
- **Terminal**: :func:`terminal_text` shows control characters (C0, DEL, C1, line and paragraph separators,
  bidirectional overrides) as escapes such as the literal text ``\\x1b``, so an ANSI / OSC sequence from a
  vendor is shown, never run. :func:`control_characters` lists them, for the config's own check.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

#: First characters that make a spreadsheet read a cell as a formula (OWASP: CSV injection).
FORMULA_LEADING = ("=", "+", "-", "@", "\t", "\r")
#: What :func:`neutralise_cell` prefixes, and what :func:`restore_cell` removes again.
CSV_TEXT_MARK = "'"
_NEEDS_MARK = re.compile(r"^[=+\-@\t\r']")
_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_MARK_FIRST = frozenset((*FORMULA_LEADING, CSV_TEXT_MARK))

# Bidirectional embeddings, overrides and isolates (they reorder what a terminal shows: "Trojan Source").
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


# ---------------------------------------------------------------------------------------------------- CSV


def neutralise_cell(value: object) -> object:
    """A CSV cell made safe to open in a spreadsheet (see the module docstring); non-text values unchanged."""
    if isinstance(value, str) and _NEEDS_MARK.match(value) and not _PLAIN_NUMBER.match(value):
        return CSV_TEXT_MARK + value
    return value


def restore_cell(value: object) -> object:
    """The cell :func:`neutralise_cell` was given: one leading ``'`` dropped before a marked character."""
    if isinstance(value, str) and len(value) > 1 and value[0] == CSV_TEXT_MARK and _NEEDS_MARK.match(value[1:]):
        return value[1:]
    return value


def _map_text_cells(frame: pd.DataFrame, first: frozenset[str], change: Callable[[object], object]) -> pd.DataFrame:
    """A copy of ``frame`` with ``change`` applied to each text cell whose first character is in ``first``
    (found vectorised; only those few cells go through Python)."""
    out = frame.copy()
    for position, column in enumerate(out.columns):
        series = out.iloc[:, position]
        if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
            continue
        try:
            heads = series.str[:1]  # NaN for a cell that is not text
        except AttributeError:  # no text in the column at all
            continue
        candidates = np.flatnonzero(heads.isin(first).to_numpy(dtype=bool))
        if not len(candidates):
            continue
        values = series.to_numpy(dtype=object, copy=True)
        for i in candidates:
            values[i] = change(values[i])
        out[column] = pd.Series(values, index=series.index, dtype=series.dtype)
    return out


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells are :func:`neutralise_cell`'d (numeric columns untouched)."""
    return _map_text_cells(frame, _MARK_FIRST, neutralise_cell)


def restore_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The inverse of :func:`neutralise_frame` for a CSV read back as text (``dtype=str``)."""
    return _map_text_cells(frame, frozenset(CSV_TEXT_MARK), restore_cell)


# ---------------------------------------------------------------------------------------------- Markdown


def markdown_text(value: object) -> str:
    """Text for a Markdown heading or bullet: HTML escaped (``&``, ``<``, ``>``), line breaks and tabs as
    spaces, any other control character shown escaped (``cat report.md`` runs no terminal escape)."""
    text = " ".join(html.escape(str(value), quote=False).replace("\t", " ").splitlines())
    return terminal_text(text)


def markdown_cell(value: object) -> str:
    """Text for a Markdown table cell: :func:`markdown_text` plus ``|`` escaped as ``\\|``."""
    return markdown_text(value).replace("|", "\\|")


def markdown_table(headers: Sequence[object], body: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; every header and cell goes through :func:`markdown_cell`."""
    lines = ["| " + " | ".join(markdown_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(markdown_cell(c) for c in cells) + " |" for cells in body]
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------------- HTML


def html_text(value: object) -> str:
    """``value`` as HTML text or attribute value: ``&``, ``<``, ``>``, ``"`` and ``'`` escaped."""
    return html.escape(str(value), quote=True)


# ---------------------------------------------------------------------------------------------- terminal


def is_control(char: str) -> bool:
    """A character a terminal acts on instead of showing: C0 / DEL / C1 controls (ESC, CR, the CSI byte…),
    line and paragraph separators, and bidirectional overrides; also a lone surrogate (from a ``\\ud800`` escape),
    which is no character at all and cannot be encoded for a terminal."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs") or char in _BIDI


def control_characters(text: str) -> list[str]:
    """The distinct control characters in ``text``, shown escaped (``["\\\\x1b", "\\\\x07"]``), in order."""
    return list(dict.fromkeys(_escape_char(c) for c in text if is_control(c)))


def _escape_char(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(value: object, keep_newlines: bool = False) -> str:
    """``value`` as text for a terminal: every control character shown as an escape (``\\x1b``, ``\\r``,
    ``\\u202e``); with ``keep_newlines`` a ``\\n`` stays a line break (multi-line messages)."""
    text = str(value)
    if not any(is_control(c) for c in text):
        return text
    return "".join(c if (keep_newlines and c == "\n") or not is_control(c) else _escape_char(c) for c in text)


__all__ = [
    "CSV_TEXT_MARK",
    "FORMULA_LEADING",
    "control_characters",
    "html_text",
    "is_control",
    "markdown_cell",
    "markdown_table",
    "markdown_text",
    "neutralise_cell",
    "neutralise_frame",
    "restore_cell",
    "restore_frame",
    "terminal_text",
]
