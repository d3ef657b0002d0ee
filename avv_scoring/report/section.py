"""A part of the report, declared once (scoring layer, report): its key, its title, its place, how it computes its
content from the :class:`~avv_scoring.score.ScoreResult`, and how that content renders as Markdown (report.md),
HTML (report.html) and terminal lines. Each rendering is optional (a section may have no terminal lines, or exist
only in report.html); figures are an HTML-only addition.

Two kinds:

- :class:`Section`: one content for the whole result (warnings, client load, stress). report.md shows it under a
  ``## <title>`` heading after the models.
- :class:`ModelSection`: one content per model (scores, intervals, agent trajectories, tools…). report.md shows
  each model's part inside that model's chapter; report.html and the terminal get every model's part at once.

Every module of :mod:`avv_scoring.report.sections` declares one, as ``SECTION``; :func:`sections` finds them (a new
section is one new module there, plus its test). report.md (:mod:`.markdown`), report.html (:mod:`.html`) and the
terminal tables (:mod:`.terminal`) each render every section in ``order`` (report.html in ``html_order`` when
given); titles come from the declarations.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import pandas as pd

from avv_scoring.load import rows_where
from avv_scoring.report.escape import html_text, markdown_table
from avv_scoring.report.format import Palette, html_table, terminal_table
from avv_scoring.score import ScoreResult

C = TypeVar("C")
#: One model's part of a :class:`ModelSection`: (model, its content), in the result's model order.
Parts = Sequence[tuple[str, C]]
#: The package whose modules declare the sections.
SECTIONS_PACKAGE = "avv_scoring.report.sections"


@dataclass(frozen=True)
class Section(Generic[C]):
    """A section with one content for the whole result."""

    key: str  # unique; report.html's anchor and section id
    title: str  # report.html's heading and link, report.md's "## " heading, the terminal's when it has one
    order: int  # place in report.md, report.html and the terminal (lower first; ties by key)
    content: Callable[[ScoreResult], C | None]  # computed once per rendering; None leaves the section out
    markdown: Callable[[C], list[str]] | None = None  # report.md blocks under the heading ([]: left out)
    html: Callable[[C, Palette], str | None] | None = None  # the body of its <section> (None: left out)
    terminal: Callable[[C], list[str]] | None = None  # lines (see :mod:`.terminal` for blank lines)
    html_order: int | None = None  # place in report.html when it differs from ``order``
    terminal_order: int | None = None  # place on the terminal when it differs from ``order`` (the decision: last)
    leads: bool = False  # report.md shows it before the model chapters (the decision opens the report)


@dataclass(frozen=True)
class ModelSection(Generic[C]):
    """A section with one part per model."""

    key: str  # unique; report.html's anchor and section id
    title: str  # report.html's heading and link; the terminal's and report.md's when they show one
    order: int  # place in each model's chapter of report.md, in report.html and the terminal (lower first)
    content: Callable[[ScoreResult, str], C | None]  # one model's part; None: nothing for that model
    markdown: Callable[[C], list[str]] | None = None  # report.md blocks inside the model's chapter
    html: Callable[[Parts[C], Palette], str | None] | None = None  # every model's part → its <section>'s body
    terminal: Callable[[Parts[C]], list[str]] | None = None  # every model's part → lines
    html_order: int | None = None  # place in report.html when it differs from ``order``

    def parts(self, result: ScoreResult) -> list[tuple[str, C]] | None:
        """(model, part) of every model that has one; None when no model has."""
        found = [(model, part) for model in result.models if (part := self.content(result, model)) is not None]
        return found or None


AnySection = Section | ModelSection


def find_sections(package_name: str) -> tuple[AnySection, ...]:
    """Every ``SECTION`` declared in a module of the package ``package_name``, by ``order`` (ties by key). A module
    without one, or two sections with one key, raise ``TypeError`` / ``ValueError``."""
    package = importlib.import_module(package_name)
    found: dict[str, AnySection] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package_name}.{info.name}")
        section = getattr(module, "SECTION", None)
        if not isinstance(section, (Section, ModelSection)):
            raise TypeError(f"{module.__name__}: declares no SECTION (a Section or a ModelSection)")
        if section.key in found:
            raise ValueError(f"{module.__name__}: section key {section.key!r} is declared twice")
        found[section.key] = section
    return tuple(sorted(found.values(), key=lambda s: (s.order, s.key)))


@functools.cache
def sections() -> tuple[AnySection, ...]:
    """The report's sections: those of :data:`SECTIONS_PACKAGE` (:func:`find_sections`, imported on first use)."""
    return find_sections(SECTIONS_PACKAGE)


def html_sections() -> tuple[AnySection, ...]:
    """The sections in report.html's order (``html_order`` where given, else ``order``)."""
    return tuple(sorted(sections(), key=lambda s: (s.order if s.html_order is None else s.html_order, s.key)))


def terminal_sections() -> tuple[AnySection, ...]:
    """The sections in the terminal's order (a :class:`Section`'s ``terminal_order`` where given, else ``order``)."""
    def place(s: AnySection) -> tuple[int, str]:
        order = s.terminal_order if isinstance(s, Section) and s.terminal_order is not None else s.order
        return order, s.key

    return tuple(sorted(sections(), key=place))


def of_model(frame: object, model: str) -> pd.DataFrame:
    """The rows of ``model`` in a table the result carries (``per_tool``, ``disagreements``, ``records``…): all its
    rows when it has no ``model`` column, none when it is not a table."""
    if not isinstance(frame, pd.DataFrame):
        return pd.DataFrame()
    return rows_where(frame, frame["model"].astype(str) == model) if "model" in frame.columns else frame


# ------------------------------------------------------------------------------- the plain table section


@dataclass(frozen=True)
class Table:
    """A table of plain-text cells (formatted, not escaped: each rendering escapes for its output)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def table_section(key: str, title: str, order: int, table: Callable[[ScoreResult, str], Table | None],
                  intro: str = "", on_terminal: bool = True) -> ModelSection[Table]:
    """A section that shows one table per model (``table`` returns None for a model without one): in report.md
    ``<intro or title>:`` and the table, in report.html the table under each model's name, on the terminal (unless
    ``on_terminal`` is False: the terminal ends with the decision, and keeps only what it needs) each model's table
    under ``<model>  <title>``."""

    def md(part: Table) -> list[str]:
        return [f"{intro or title}:", markdown_table(part.headers, part.rows)]

    def html(parts: Parts[Table], palette: Palette) -> str:
        prose = f"<p class=meta>{html_text(intro)}</p>" if intro else ""
        return prose + "".join(f"<h3>{html_text(model)}</h3>" + html_table(part.headers, part.rows)
                               for model, part in parts)

    def terminal(parts: Parts[Table]) -> list[str]:
        return [line for model, part in parts
                for line in [f"{model}  {title.lower()}", *terminal_table(part.headers, part.rows), ""]]

    return ModelSection(key, title, order, table, md, html, terminal if on_terminal else None)


__all__ = ["SECTIONS_PACKAGE", "ModelSection", "Parts", "Section", "Table", "find_sections", "html_sections",
           "of_model", "sections", "table_section", "terminal_sections"]
