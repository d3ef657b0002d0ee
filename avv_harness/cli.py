"""The console scripts that need the harness: ``avv-locust`` (Locust with our options registered before it parses
``--help``) and ``avv-score`` (scoring's CLI, plus ``export``, which rebuilds requests with the wire client).

Locust prints ``--help`` before it imports the locustfile (locust issue #2917), so
``locust -f locustfiles/vendors.py --help`` cannot list the ``--avv-*`` options; ``avv-locust --help``
does. Any other arguments go to Locust unchanged; ``-f`` defaults to the packaged locustfile, so an
installed package runs the demo from any directory.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from avv_core.version import version_text

PACKAGED_LOCUSTFILE = Path(__file__).resolve().parent / "locustfile.py"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args or "-V" in args:  # the project's version first, then Locust's (Locust's own prints only its)
        print(version_text("avv-locust"))
        return
    from avv_harness.locust import plugin as locust_plugin  # noqa: F401  (registers the --avv-* options)

    if not any(a in ("-f", "--locustfile") or a.startswith("--locustfile=") for a in args):
        args = ["-f", str(PACKAGED_LOCUSTFILE), *args]
    sys.argv = ["locust", *args]
    from locust.main import main as locust_main

    locust_main()


def score_main(argv: list[str] | None = None) -> int:
    """``avv-score``: :func:`avv_scoring.cli.main` with the ``export`` subcommand (:mod:`avv_harness.exports`)."""
    from avv_scoring.cli import main as scoring_main

    def export(args: Sequence[str]) -> int:
        from avv_harness.exports import main_export

        return main_export(args)

    return scoring_main(argv, commands={"export": export})
