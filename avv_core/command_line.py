"""The argument parser every avv command starts from (core layer): no abbreviations (``--avv-sample`` is not taken
for ``--avv-samples``), a misspelt option answered with the closest one (:mod:`avv_core.suggest`, as Locust's own
parser does), and ``-V`` / ``--version`` printing :func:`avv_core.version.version_text` of the command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from avv_core.suggest import closest
from avv_core.version import version_text


class CommandParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` without abbreviations (also for its subcommands' parsers) whose "unrecognized
    arguments" error names the closest option."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if "unrecognized arguments:" in message:
            bad = message.split("unrecognized arguments:", 1)[1].split()
            options = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
            match = closest(bad[0].split("=", 1)[0], options) if bad and bad[0].startswith("--") else None
            if match is not None:
                message += f"\nDid you mean '{match}'?"
        super().error(message)


class _Version(argparse.Action):
    """``--version``: :func:`version_text` as is (argparse's own version action re-wraps it into one line)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        sys.stdout.write(version_text(parser.prog.split()[0]) + "\n")  # on stdout, as argparse's own version action
        parser.exit()


def command_parser(prog: str, description: str = "", **kwargs: object) -> CommandParser:
    """A :class:`CommandParser` with ``-V`` / ``--version`` (the version of the command: ``prog``'s first word, so
    ``avv-score history`` shows ``avv-score``'s)."""
    parser = CommandParser(prog=prog, description=description, **kwargs)
    parser.add_argument("-V", "--version", action=_Version,
                        help="show the version (avv-locust's, then Locust's) and exit")
    return parser


__all__ = ["CommandParser", "command_parser"]
