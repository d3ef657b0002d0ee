"""The project's version and the ``--version`` text of every avv command (core layer: no import of Locust; its
version is read from the installed package's metadata).

    avv-locust 0.1.0
    Locust 2.47.0, Python 3.11.7

    avv-score (avv-locust 0.1.0)
    Locust 2.47.0, Python 3.11.7
"""

from __future__ import annotations

import platform
from importlib import metadata

#: The distribution name in pyproject.toml.
DISTRIBUTION = "avv-locust"


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # a source checkout that was not installed
        return "unknown"


def project_version() -> str:
    """The installed avv-locust's version ("unknown" when run from a checkout that was not installed)."""
    return _installed(DISTRIBUTION)


def version_text(prog: str) -> str:
    """What ``PROG --version`` prints: the project's version, then Locust's (and Python's)."""
    first = f"{prog} {project_version()}" if prog == DISTRIBUTION else f"{prog} ({DISTRIBUTION} {project_version()})"
    return f"{first}\nLocust {_installed('locust')}, Python {platform.python_version()}"


__all__ = ["DISTRIBUTION", "project_version", "version_text"]
