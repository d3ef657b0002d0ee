"""The ``X-AVV-Item`` tag as the simulator reads it (pure): which repeat of which sample a request is.

The harness tags every attempt with ``run/model/vendor/sample/repeat/attempt`` (an agent step adds
``/step``), each part percent-encoded (:meth:`avv_core.items.ItemKey.tag`). The simulator must not import
the harness, so the parse is written again here, with the same rules as
:meth:`avv_core.items.ItemKey.parse_tag` (six or seven ``/``-separated parts, each
``urllib.parse.unquote``-d, repeat, attempt and step integers); a test checks that both agree on every tag.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote


class ItemTag(NamedTuple):
    """The parts of an ``X-AVV-Item`` tag."""

    run_id: str
    model: str
    vendor: str
    sample_id: str
    repeat: int
    attempt: int
    step: int | None = None  # the agent step (None: a single-request item)


def parse_item_tag(tag: str) -> ItemTag:
    """``ItemTag`` of a tag made by the harness; ValueError for anything else (as ``ItemKey.parse_tag``)."""
    parts = tag.split("/")
    if len(parts) not in (6, 7):
        raise ValueError(f"not an avv item tag: {tag!r}")
    run_id, model, vendor, sample_id, repeat, attempt = (unquote(p) for p in parts[:6])
    step = int(unquote(parts[6])) if len(parts) == 7 else None
    return ItemTag(run_id, model, vendor, sample_id, int(repeat), int(attempt), step)


def repeat_of(tag: str | None, arrival: int) -> tuple[int, str]:
    """``(repeat, source)`` a request's per-repeat draws use: the tag's repeat (``"tag"``), or — without a
    tag, or with one that does not parse — the count of arrivals of this body at this profile (``"arrival"``)."""
    if tag:
        try:
            return parse_item_tag(tag).repeat, "tag"
        except ValueError:
            pass
    return arrival, "arrival"
