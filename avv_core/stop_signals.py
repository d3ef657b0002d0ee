"""SIGINT and SIGTERM that stop a CPU-bound step (a leaf: the standard library only, so ``avv-score`` uses it
too). Layer: process control.

The harness normally handles signals with gevent's handlers, which run only when gevent's hub gets control;
a step that never yields (the end-of-run scoring: pandas in one greenlet) would let them wait until it ends.
While :func:`interrupt_on_signals` is active a Python-level handler runs instead: Python calls it in the main
thread between two bytecodes, whatever greenlet is running, and it raises :class:`Interrupted` there.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived during an interruptible step (a KeyboardInterrupt: ``except Exception`` in the
    step does not swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """As a shell reports a process ended by the signal: 128 + its number (130 Ctrl-C, 143 SIGTERM)."""
        return 128 + self.signum


@contextlib.contextmanager
def interrupt_on_signals(after: Callable[[], None] | None = None) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM raise :class:`Interrupted` in it (in the main thread, whichever
    greenlet runs it; in another thread the block runs unchanged). Then the previous Python-level handlers
    come back, and ``after`` runs: the harness re-arms gevent's handlers there (ours replaced them at the OS
    level)."""

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    try:  # Python asks the OS thread (threading.current_thread() is a greenlet's stand-in under gevent)
        previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    except ValueError:  # not the main thread: no handler can be installed here, the block runs unchanged
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, signal.SIG_DFL if old is None else old)  # None: not installed from Python
        if after is not None:
            after()
