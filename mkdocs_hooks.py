"""MkDocs hooks (mkdocs.yml ``hooks:``): Markdown tables escape a ``|`` inside a code span as ``\\|`` (GitHub shows
``|``; Python-Markdown keeps the backslash), so the generated tables read the same on GitHub and on the site. Only
code inside table cells is touched: elsewhere ``\\|`` is what the text means."""

from __future__ import annotations

import re
from typing import Any

_CELL = re.compile(r"<td([^>]*)>(.*?)</td>", re.S)
_CODE = re.compile(r"<code>(.*?)</code>", re.S)


def _unescape_code(cell: str) -> str:
    return _CODE.sub(lambda match: "<code>" + match.group(1).replace("\\|", "|") + "</code>", cell)


def on_page_content(html: str, **_: Any) -> str:
    return _CELL.sub(lambda match: f"<td{match.group(1)}>{_unescape_code(match.group(2))}</td>", html)
