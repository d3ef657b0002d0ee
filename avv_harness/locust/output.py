"""Locust's own terminal output in an avv run (Locust layer): its stats tables and its INFO log lines.

A headless avv run ends with the answer (:mod:`avv_harness.run.console`), so by default Locust prints **no** stats
table and none of its INFO log lines (``Starting Locust…``, ``Ramping to…``, ``Shutting down…``); its warnings and
errors always show. Locust's own options bring them back, with Locust's meanings:

- ``--print-stats``: Locust's periodic tables during the run (Locust: "Enable periodic printing of request stats"),
  its final tables and its INFO log lines;
- ``--only-summary``: only Locust's final tables (Locust: "Disable periodic printing of request stats").

When they appear, the final tables come *before* the decision block: the run prints them itself when it ends
(:meth:`LocustOutput.print_summary`) and Locust's own copy, which it prints after every ``quitting`` listener, is
silenced (:meth:`LocustOutput.after_finish`). ``-L DEBUG`` shows every log line. Locust counts attempts: its
``attempt`` rows' ``# fails`` include the failures that were retried; avv's *items failed* are what is left after
the retries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from locust.env import Environment

#: Locust's loggers whose INFO lines a headless avv run leaves out (``logging.getLogger(__name__)`` in its modules).
QUIET_LOGGERS = ("locust.main", "locust.runners", "locust.env", "locust.shape", "locust.argument_parser")
#: Locust's logger of its stats tables (``locust.stats.console_logger``).
STATS_LOGGER = "locust.stats_logger"


def shows_locust_output(parsed: object) -> tuple[bool, bool]:
    """(Locust's INFO lines and periodic tables, Locust's final tables) for these parsed options."""
    periodic = bool(getattr(parsed, "print_stats", False))
    summary = periodic or bool(getattr(parsed, "only_summary", False))
    debug = str(getattr(parsed, "loglevel", "INFO")).upper() == "DEBUG"
    return periodic or debug, summary


class LocustInfoFilter(logging.Filter):
    """Drops Locust's INFO (and DEBUG) records unless they are wanted (:func:`shows_locust_output`). Installed once per
    process on :data:`QUIET_LOGGERS` (:func:`install_log_filter`); until the run's ``init`` decides, the command line
    decides (Locust logs ``Starting Locust…`` before ``init``)."""

    def __init__(self) -> None:
        super().__init__()
        self.show: bool | None = None  # None: not decided yet

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        if self.show is None:
            from avv_harness.run.options import preparse_options

            self.show = shows_locust_output(preparse_options())[0]
        return self.show


#: The process's filter (logging is configured per process, as Locust's own setup_logging does).
LOG_FILTER = LocustInfoFilter()


def install_log_filter() -> None:
    """Put :data:`LOG_FILTER` on Locust's loggers (once; Locust's logging setup keeps filters of loggers it does not
    configure itself)."""
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if LOG_FILTER not in logger.filters:
            logger.addFilter(LOG_FILTER)


class LocustOutput:
    """This environment's Locust output: decided at ``init`` from its parsed options."""

    def __init__(self, environment: Environment):
        self.env = environment
        parsed = environment.parsed_options
        self.show_info, self.summary = shows_locust_output(parsed)
        LOG_FILTER.show = self.show_info
        if parsed is not None and not getattr(parsed, "print_stats", False):
            parsed.only_summary = True  # read by Locust after init: no periodic tables
        self.printed = False

    def failed_attempts(self) -> int | None:
        """Attempts that failed so far, retries included (Locust's failures; on a master, its workers' reports)."""
        runner = getattr(self.env, "runner", None)
        stats = getattr(runner, "stats", None)
        return int(stats.total.num_failures) if stats is not None else None

    def print_summary(self) -> None:
        """Locust's final tables, now (before the decision block), when ``--print-stats`` or ``--only-summary``."""
        runner = getattr(self.env, "runner", None)
        if not self.summary or runner is None or getattr(runner, "stats", None) is None:
            return
        from locust import stats

        stats.print_stats(runner.stats, current=False)
        stats.print_percentile_stats(runner.stats)
        stats.print_error_report(runner.stats)
        for handler in logging.getLogger(STATS_LOGGER).handlers:
            handler.flush()
        self.printed = True

    def after_finish(self) -> None:
        """The run's last line is printed: Locust's own final tables (printed after every ``quitting`` listener) and
        its INFO lines (``Shutting down…``) would come after it, so they are left out from now on."""
        logging.getLogger(STATS_LOGGER).disabled = True
        LOG_FILTER.show = False


__all__ = ["LOG_FILTER", "LocustInfoFilter", "LocustOutput", "QUIET_LOGGERS", "install_log_filter",
           "shows_locust_output"]
