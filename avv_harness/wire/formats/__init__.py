"""The wire formats a vendor may speak (wire-client layer): one module each, behind one small interface
(:class:`~avv_harness.wire.formats.base.WireFormat`: the URL path, the body made from the chat body, the headers,
and a reader of the stream into an :class:`~avv_harness.wire.attempt.Attempt`).

Every module of this package but ``base`` declares ``FORMAT``; :data:`FORMATS` (by name) is derived from those
declarations, one for each name of :data:`avv_core.api_formats.ENDPOINTS` (the vendor config's allowed ``endpoint``
values, in their order; the config is read below this layer, and the format's request conversion is in that module
too). Adding a format is one module here, its name there, plus its test.
"""

from __future__ import annotations

import importlib
import pkgutil

from avv_core.api_formats import ENDPOINTS
from avv_harness.wire.formats.base import WireFormat

INTERFACE_MODULE = "base"


def find_formats() -> dict[str, WireFormat]:
    """Every ``FORMAT`` declared in a module of this package, by name, in the order of :data:`ENDPOINTS`. A module
    without one raises ``TypeError``; two formats of one name, or names other than :data:`ENDPOINTS`,
    ``ValueError``."""
    found: dict[str, WireFormat] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == INTERFACE_MODULE or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        declared = getattr(module, "FORMAT", None)
        if not isinstance(declared, WireFormat) or not declared.name:
            raise TypeError(f"{module.__name__}: declares no FORMAT (a WireFormat with a name)")
        if declared.name in found:
            raise ValueError(f"{module.__name__}: wire format {declared.name!r} is declared twice")
        found[declared.name] = declared
    if set(found) != set(ENDPOINTS):
        raise ValueError(f"wire formats {sorted(found)} are not avv_core.api_formats.ENDPOINTS {sorted(ENDPOINTS)}")
    return {name: found[name] for name in ENDPOINTS}


#: Every wire format, by its ``endpoint`` name (chat first: the default).
FORMATS: dict[str, WireFormat] = find_formats()

__all__ = ["ENDPOINTS", "FORMATS", "WireFormat", "find_formats"]
