"""Formatting for everything a person reads (scoring layer, report; the report's sections, the stress tables and
the harness's web UI use it): numbers (:func:`fmt`), table columns (:class:`Column`), tables for Markdown, HTML and
the terminal (Markdown tables are :func:`.escape.markdown_table`), and the figures of report.html.

How a number prints is decided once, by its format (:data:`CellFormat`): a metric's format is the registry's
``Metric.fmt`` (:mod:`avv_scoring.metrics.registry`), so a metric prints the same in report.md, report.html, the
terminal and the web UI. Escaping follows the rules of :mod:`.escape` (Markdown cells, HTML text, terminal text).

The figure helpers draw with matplotlib's object API (no pyplot: no global figure state, no backend switch); it is
imported only when a figure is drawn.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
import pandas as pd

from avv_core.json_types import JSONMapping
from avv_core.measures import is_missing
from avv_scoring.metrics.declaration import MISSING, Fmt
from avv_scoring.metrics.declaration import fmt as format_value
from avv_scoring.metrics.registry import metric
from avv_scoring.report.escape import html_text, terminal_text

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: How a cell prints: a registry format (:data:`~avv_scoring.metrics.registry.Fmt`) or ``yes_no`` (a flag).
CellFormat = Fmt | Literal["yes_no"]


def fmt(value: object, kind: CellFormat) -> str:
    """A cell as every output prints it (:func:`avv_scoring.metrics.declaration.fmt`, where the formats are
    declared): rates with 4 decimals (0 and 1 as ``0`` / ``1``), IRF with 4 decimals, integers in full, other numbers
    with 4 significant digits (≥ 1000 in full), flags as yes / no; text as is; missing as ``n/a``."""
    if is_missing(value):
        return MISSING
    return format_value(value, kind)


def metric_cell(row: JSONMapping, column: str) -> str:
    """``row``'s value of the registered metric ``column``, in its registry format (``Metric.fmt``)."""
    return fmt(row.get(column), metric(column).fmt)


class Column(NamedTuple):
    """One column of a table: its header, the row key it shows and its format (None: the registry's format of the
    metric ``column``, so that a metric prints alike in every table)."""

    header: str
    column: str
    fmt: CellFormat | None = None

    @property
    def kind(self) -> CellFormat:
        """The format: :attr:`fmt`, or the registered metric's when it is None."""
        return self.fmt if self.fmt is not None else metric(self.column).fmt

    def cell(self, row: JSONMapping) -> str:
        """The column's cell of ``row`` (a missing key prints as missing)."""
        return fmt(row.get(self.column), self.kind)


def metric_column(column: str) -> Column:
    """The column of a registered metric: its registry header and format."""
    m = metric(column)
    return Column(m.header, m.column, m.fmt)


def vendor_label(row: JSONMapping) -> str:
    """``vendor`` or ``vendor (baseline)``."""
    return f"{row['vendor']} (baseline)" if row.get("is_baseline") else str(row["vendor"])


def one_line(text: object, chars: int) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``chars`` with ``…``; missing as empty."""
    if text is None or is_missing(text):
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


# ------------------------------------------------------------------------------------------------- tables


def rows_of(columns: Sequence[Column], rows: Sequence[JSONMapping]) -> list[list[str]]:
    """The cells of ``rows`` under ``columns``, formatted."""
    return [[c.cell(row) for c in columns] for row in rows]


def headers_of(columns: Sequence[Column]) -> list[str]:
    return [c.header for c in columns]


def html_table(headers: Sequence[str], body: Sequence[Sequence[str]], left: int = 1) -> str:
    """A report.html table, every header and cell escaped; the first ``left`` columns left-aligned."""
    def cls(i: int) -> str:
        return ' class="l"' if i < left else ""

    head = "".join(f"<th{cls(i)}>{html_text(h)}</th>" for i, h in enumerate(headers))
    rows = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{html_text(c)}</td>" for i, c in enumerate(row)) + "</tr>" for row in body
    )
    return f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def terminal_table(headers: Sequence[str], body: Sequence[Sequence[str]], left: Collection[int] = (0,)) -> list[str]:
    """A plain-text table: the header, a rule of dashes, the rows; each column as wide as its widest cell, the
    columns in ``left`` left-aligned and the others right-aligned, two spaces apart, no trailing spaces. Cells show
    control characters escaped (:func:`~avv_scoring.report.escape.terminal_text`) before they are measured."""
    rows = [[terminal_text(c) for c in cells] for cells in [headers, *body]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    rows.insert(1, ["-" * w for w in widths])
    return ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                      for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip() for cells in rows]


# ------------------------------------------------------------------------------------------------ figures

#: vendor → its colour, the same in every figure of a page.
Palette = dict[str, tuple[float, float, float, float]]


def figure(rows: int = 1, cols: int = 1, height: float = 3.2, width: float = 10.0) -> tuple[Figure, np.ndarray]:
    """A matplotlib figure of ``rows`` × ``cols`` axes (``height`` inches per row) and the axes as a 2-D array."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), dpi=90)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def png(fig: Figure, alt: str, caption: str = "") -> str:
    """The figure as a PNG embedded in a ``<figure>`` (a ``data:`` URI: the page fetches nothing)."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{html_text(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html_text(alt)}" src="data:image/png;base64,{data}">{cap}</figure>'


def note(ax: Axes, text: str) -> None:
    """Axes without data: ``text`` in their middle, no ticks."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#5f6368")
    ax.set_xticks([])
    ax.set_yticks([])


def plain_figure_text() -> AbstractContextManager[None]:
    """A context in which matplotlib draws figure text as written: by default it reads ``$…$`` as TeX math, so a
    tool or vendor name such as ``get$\\undefinedcmd$`` in a label raised inside its parser and lost the report."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False})


def palette_for(vendors: Sequence[str]) -> Palette:
    """One colour per vendor, the same in every figure."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {vendor: cmap(i % 10) for i, vendor in enumerate(dict.fromkeys(vendors))}


def numbers(series: pd.Series) -> np.ndarray:
    """The numeric values of ``series`` (text and missing values left out)."""
    values = pd.to_numeric(series.astype("object"), errors="coerce").to_numpy(dtype=float)
    return values[~np.isnan(values)]


__all__ = [
    "MISSING",
    "CellFormat",
    "Column",
    "Palette",
    "figure",
    "fmt",
    "headers_of",
    "metric_cell",
    "metric_column",
    "html_table",
    "note",
    "numbers",
    "one_line",
    "palette_for",
    "plain_figure_text",
    "png",
    "rows_of",
    "terminal_table",
    "vendor_label",
]
