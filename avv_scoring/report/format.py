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
    from matplotlib.backend_bases import RendererBase
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
    """A matplotlib figure of ``rows`` × ``cols`` axes (``height`` inches per row) and the axes as a 2-D array.

    Titles sit at the top of their axes (``axes.titley`` 1): matplotlib otherwise measures every axes' tick labels at
    each draw to move its title above any top labels, and no figure here has labels at the top."""
    import matplotlib
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), dpi=90)
    with matplotlib.rc_context({"axes.titley": 1.0}):
        axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


#: Space (inches) kept between the texts around an axes and the figure's edge or the next axes.
PAD_INCHES = 0.1


def png(fig: Figure, alt: str, caption: str = "") -> str:
    """The figure as a PNG embedded in a ``<figure>`` (a ``data:`` URI: the page fetches nothing), its margins fitted
    to its texts (:func:`fit_margins`): drawn once."""
    fit_margins(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = f"<figcaption>{html_text(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html_text(alt)}" src="data:image/png;base64,{data}">{cap}</figure>'


class _Room(NamedTuple):
    """The inches the texts of one axes take outside it, on each side."""

    left: float
    right: float
    bottom: float
    top: float


def _room(ax: Axes, renderer: RendererBase, dpi: float) -> _Room:
    """What the tick labels, axis labels, offset texts and title of ``ax`` take outside its frame (inches): the
    extents of the texts the draw will show (ticks are located and labelled as the draw does; nothing is drawn)."""
    import matplotlib

    sides = {"left": 0.0, "right": 0.0, "bottom": 0.0, "top": 0.0}
    frame = ax.get_window_extent(renderer)
    for axis, across, pad in ((ax.xaxis, False, matplotlib.rcParams["xtick.major.pad"]),
                              (ax.yaxis, True, matplotlib.rcParams["ytick.major.pad"])):
        axis.get_majorticklabels()  # locates and labels the ticks (and the offset text) as the draw will
        low, high = sorted(axis.get_view_interval())
        slack = (high - low) * 1e-9
        labels = [tick.label1 for tick, at in zip(axis.get_major_ticks(), axis.get_majorticklocs(), strict=False)
                  if low - slack <= at <= high + slack and tick.label1.get_visible() and tick.label1.get_text()]
        boxes = [label.get_window_extent(renderer) for label in labels]
        ticks = (axis.get_tick_padding() + float(pad)) / 72 if labels else 0.0  # tick and gap, in points
        depth = max((b.width if across else b.height for b in boxes), default=0.0) / dpi  # away from the axes
        name = axis.label.get_window_extent(renderer) if axis.label.get_text() else None
        named = (name.width if across else name.height) / dpi + axis.labelpad / 72 if name is not None else 0.0
        offset = axis.get_offset_text()
        shift = offset.get_window_extent(renderer).height / dpi if offset.get_text() else 0.0
        # how far the labels reach past the ends of the axis (a slanted label ends left of its tick); measured with
        # the default margins, where the axes are narrower than once fitted: it errs on the side of room
        if across:  # the y axis: labels on the left, the offset text above
            sides["left"] = max(sides["left"], ticks + depth + named)
            sides["top"] = max(sides["top"], max((b.y1 - frame.y1 for b in boxes), default=0.0) / dpi + shift)
            sides["bottom"] = max(sides["bottom"], max((frame.y0 - b.y0 for b in boxes), default=0.0) / dpi)
        else:  # the x axis: labels below, the offset text below them on the right
            sides["bottom"] = max(sides["bottom"], ticks + depth + named + shift)
            sides["left"] = max(sides["left"], max((frame.x0 - b.x0 for b in boxes), default=0.0) / dpi)
            sides["right"] = max(sides["right"], max((b.x1 - frame.x1 for b in boxes), default=0.0) / dpi)
    if ax.title.get_text():
        pad = float(matplotlib.rcParams["axes.titlepad"]) / 72  # the figures keep the default title pad
        sides["top"] = max(sides["top"], ax.title.get_window_extent(renderer).height / dpi + pad)
    return _Room(**sides)


def fit_margins(fig: Figure) -> None:
    """Place the figure's grid of axes so that every tick label, axis label and title shows, without overlapping
    its neighbour: the room each axes' texts take is measured once (their extents, not a draw) and the outer margins
    and the gaps between columns and rows set from the largest (``subplots_adjust``). A title wider than its axes
    widens the gaps beside it. Replaces ``tight_layout``, which drew the figure to measure it and left a layout engine
    that made ``savefig`` draw it twice more."""
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.get_subplotspec() is not None]
    if not shown:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # the canvas savefig draws the PNG on: its renderer measures the texts, and keeps their metrics for the draw
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    dpi = fig.dpi
    grid = shown[0].get_subplotspec().get_gridspec()  # type: ignore[union-attr]
    rows, cols = grid.get_geometry()
    width, height = fig.get_size_inches()
    place = {id(ax): (spec.rowspan.start, spec.colspan.start)
             for ax in shown if (spec := ax.get_subplotspec()) is not None}
    rooms = {id(ax): _room(ax, renderer, dpi) for ax in shown}
    titles = {id(ax): ax.title.get_window_extent(renderer).width / dpi if ax.title.get_text() else 0.0 for ax in shown}

    def need(side: str, row: int | None = None, col: int | None = None) -> float:
        """The most room ``side`` takes over the axes of ``row`` (or of ``col``)."""
        return max((getattr(rooms[id(ax)], side) for ax in shown
                    if (row is None or place[id(ax)][0] == row) and (col is None or place[id(ax)][1] == col)),
                   default=0.0)

    left = need("left", col=0) + PAD_INCHES
    right = need("right", col=cols - 1) + PAD_INCHES
    gap_w = max((need("right", col=k) + need("left", col=k + 1) for k in range(cols - 1)), default=0.0) + PAD_INCHES
    axes_w = (width - left - right - gap_w * (cols - 1)) / cols
    over = max((t - axes_w) / 2 for t in titles.values())  # a title wider than its axes: room on both sides
    if over > 0:
        left, right = max(left, over + PAD_INCHES), max(right, over + PAD_INCHES)
        gap_w = max(gap_w, 2 * over + PAD_INCHES)
        axes_w = (width - left - right - gap_w * (cols - 1)) / cols
    top = need("top", row=0) + PAD_INCHES
    bottom = need("bottom", row=rows - 1) + PAD_INCHES
    gap_h = max((need("bottom", row=k) + need("top", row=k + 1) for k in range(rows - 1)), default=0.0) + PAD_INCHES
    axes_h = (height - top - bottom - gap_h * (rows - 1)) / rows
    if axes_w <= 0 or axes_h <= 0:  # texts larger than the figure: keep matplotlib's default margins
        return
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=gap_w / axes_w, hspace=gap_h / axes_h)


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
    "fit_margins",
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
