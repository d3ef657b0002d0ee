"""Locust integration: the options hook, one User class per vendor, the run's shape, and the ``init``
hook that installs the run controller. No run state lives here (it is on ``environment.avv``).

Importing this module does only what Locust needs before it parses options: it registers the
``--avv-*`` options on Locust's parser. :func:`user_classes` reads the vendor config (names and URLs,
no keys) to name the User classes; everything else is read in ``init``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import random
import signal
import sys
from collections import Counter
from typing import Protocol

import gevent
import greenlet
import locust
from locust import User, constant, events, task
from locust.env import Environment
from locust.exception import StopUser

from avv_core.errors import InputError
from avv_harness.inputs.config import SIM_PLACEHOLDER, Vendor, load_config
from avv_harness.inputs.secrets import Redactor, redact_url
from avv_harness.locust.distribution import role_for
from avv_harness.locust.output import LocustOutput, install_log_filter
from avv_harness.run import options as avv_options
from avv_harness.run.controller import EXIT_INPUT, RunController, controller_of, install
from avv_harness.run.lifecycle import RunLifecycle
from avv_harness.wire.attempt import Attempt

log = logging.getLogger("avv")


install_log_filter()  # Locust's INFO lines only when asked for (avv_harness.locust.output); before its first line


class _SignalWatcher(Protocol):
    """What :func:`gevent.signal_handler` returns, as far as this module uses it (gevent ships no types)."""

    def cancel(self) -> None: ...


@events.init_command_line_parser.add_listener
def add_arguments(parser: argparse.ArgumentParser) -> None:
    avv_options.add_arguments(parser)


@events.init.add_listener
def _on_init(environment: Environment, **_: object) -> None:
    if not any(getattr(cls, "avv_vendor_id", None) for cls in environment.user_classes):
        return  # another locustfile
    _cache_locust_default_args()
    try:
        ctl = install(environment, role_for=role_for)
        attach_locust_output(ctl, LocustOutput(environment))
        if ctl.role.holds_ledger:  # a local or master process: it ends the runs
            _stop_on_signals(ctl.lifecycle)
            if getattr(environment, "web_ui", None) is not None:  # a master or local process with the web UI
                from avv_harness.locust.web_ui import install_web_ui

                install_web_ui(environment, ctl)
        from avv_harness.locust.prometheus import serve_metrics

        serve_metrics(environment, ctl)  # --avv-metrics-port (headless runs too)
    except InputError as error:
        _fail_input(error)
    except Exception as exc:  # e.g. the simulator did not start: nothing can run, say so and stop
        log.exception("avv-locust: cannot start the run")
        sys.stderr.write(f"avv-locust: error: cannot start the run: {exc}\n")
        sys.exit(1)


def attach_locust_output(ctl: RunController, output: LocustOutput) -> None:
    """What the run's lifecycle asks of Locust's output: failed attempts for the progress line, Locust's final tables
    before the decision block, and nothing of Locust's after it (:mod:`avv_harness.locust.output`)."""
    ctl.lifecycle.failed_attempts = output.failed_attempts
    ctl.lifecycle.before_report = output.print_summary
    ctl.lifecycle.after_finish = output.after_finish


def _fail_input(error: InputError) -> None:
    sys.stderr.write(f"avv-locust: error: {error}\n")
    sys.stderr.flush()
    sys.exit(EXIT_INPUT)


def _cache_locust_default_args() -> None:
    """Work around Locust's worker spawn handler (locust/runners.py, ``custom_args_from_master``), which
    calls ``argument_parser.default_args_dict()`` — a rebuild of the whole parser — once per option on
    every spawn message. That froze our workers ~250 ms at each stress level change, seen as TTFT.
    Those defaults never change during a process, so cache them on the Locust versions known to do it."""
    from locust import argument_parser

    version = tuple(int(p) for p in locust.__version__.split(".")[:2] if p.isdigit())
    if (2, 20) <= version < (3, 0) and not hasattr(argument_parser.default_args_dict, "cache_info"):
        argument_parser.default_args_dict = functools.lru_cache(maxsize=1)(argument_parser.default_args_dict)


# -------------------------------------------------------------------------------------------- users


class VendorUser(User):
    """Replays work items against one vendor. Subclassed per vendor by :func:`user_classes`."""

    abstract = True
    wait_time = constant(0)
    avv_vendor_id: tuple[str, str]
    idle: list[int] | None = None  # the process's idle-user count (idle_users) while this user is one of them

    def on_start(self) -> None:
        ctl = controller_of(self.environment)
        self.session = ctl.session_for(type(self).__name__)
        # Users are spawned in batches; starting their streams in one burst would queue the requests
        # in this process and show up as TTFT. Spread the first requests instead.
        if ctl.options.start_jitter_s > 0:
            gevent.sleep(random.uniform(0.0, ctl.options.start_jitter_s))

    def on_stop(self) -> None:
        self._busy()
        self.session.close()

    def _busy(self) -> None:
        if self.idle is not None:
            self.idle[0] -= 1
            self.idle = None

    @task
    def run_item(self) -> None:
        ctl = controller_of(self.environment)
        name = type(self).__name__
        item = ctl.role.next_item(name)
        if item is None:
            if ctl.role.closed(name):  # --avv-settle: its verdict is settled, nothing of it is left
                self._busy()
                raise StopUser()
            if self.idle is None:
                self.idle = idle_users(self.environment)
                self.idle[0] += 1
            gevent.sleep(idle_wait_s(self.idle[0]))
            return
        self._busy()
        try:
            records = ctl.run_item(self.session, name, item, lambda att: _request_events(self.environment, name,
                                                                                           att, ctl.redact))
        except BaseException:  # the user is stopped (GreenletExit): the item goes back, unrecorded
            ctl.role.give_back(item)
            raise
        ctl.role.submit(item, records)


#: A user with no item asks again after IDLE_WAIT_S, or later when many are idle: together they ask about
#: IDLE_ASKS_PER_S times a second (at most IDLE_WAIT_MAX_S apart each).
IDLE_WAIT_S = 0.25
IDLE_ASKS_PER_S = 400.0
IDLE_WAIT_MAX_S = 2.0


def idle_wait_s(idle: int) -> float:
    """The wait of one of ``idle`` users that found no item. Idle users are a run's tail (their vendor has no item
    left while the others still stream) or a vendor held in step under a budget. A fixed 0.25 s was ``idle`` × 4
    asks a second — 4,000 at 1,000 users, work per second that no event needs; spread over the idle users' waits
    the asks stay ~400 a second, and an item that turns up is still taken within about 1 / 400 s (a few idle
    users wait 0.25 s each, as before)."""
    return min(max(IDLE_WAIT_S, idle / IDLE_ASKS_PER_S), IDLE_WAIT_MAX_S)


def idle_users(environment: Environment) -> list[int]:
    """The count of this Locust environment's idle users (one mutable cell per environment)."""
    return environment.__dict__.setdefault("avv_idle_users", [0])


def _request_events(environment: Environment, name: str, att: Attempt, redact: Redactor) -> None:
    """Locust stats, per attempt (retries are attempts of their own, so Locust's ``# fails`` counts failed attempts;
    avv's items failed are what is left after the retries): the whole request as an ``attempt`` entry (response time
    = end-to-end latency) and TTFT as its own entry."""
    latency = ((att.t_end or att.t0) - att.t0) * 1000.0
    exception = None if att.ok else Exception(redact(f"{att.error_kind}: {att.error_detail}"))
    environment.events.request.fire(
        request_type=ATTEMPT_REQUEST_TYPE, name=name, response_time=latency, response_length=att.bytes_read,
        exception=exception, context={}, response=None,
    )
    if att.t_first_token is not None:
        environment.events.request.fire(
            request_type="TTFT", name=name, response_time=(att.t_first_token - att.t0) * 1000.0,
            response_length=0, exception=None, context={}, response=None,
        )


#: Locust's request type of one attempt of an item (its stats tables and web UI show it in the Type column).
ATTEMPT_REQUEST_TYPE = "attempt"

#: Prefix of the locustfile globals that hold the User classes. Locust collects every User class among a
#: locustfile's globals (``vars(module)``, whatever the key), so the classes must be globals; under their bare
#: names a vendor called ``AvvShape`` or ``locust_plugin`` overwrote the locustfile's own names (a crash, or the
#: vendor silently dropped), ``__builtins__`` broke the module, and ``_hidden`` was dropped by
#: ``from … import *``, which skips names starting with ``_``. No Python source can define a name with ``:``,
#: so these keys collide with nothing. Locust shows the key only in ``--list`` and ``--class-picker``; its stats,
#: its web UI and our records use the class ``__name__``, the vendor's name.
EXPORT_PREFIX = "avv:"


def class_names(vendors: list[Vendor]) -> list[str]:
    """One distinct User class name per vendor, in order: its name; ``model.name`` when two models share the
    vendor name; a name that is still taken (a vendor literally named ``m.a`` next to model ``m``'s ``a``) gets
    `` #2``, `` #3`` …. A NUL character, which a class name cannot hold, is shown as ``\\0``. Locust tells
    classes apart by ``__name__``, so two equal names would merge two vendors."""
    uses = Counter(v.name for v in vendors)
    taken: set[str] = set()
    out = []
    for vendor in vendors:
        base = f"{vendor.model}.{vendor.name}" if uses[vendor.name] > 1 else vendor.name
        base = base.replace("\0", "\\0")
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base} #{k}"
        taken.add(name)
        out.append(name)
    return out


def user_classes(args: list[str] | None = None) -> dict[str, type[User]]:
    """One User class per selected vendor, named after it (:func:`class_names`), by class name. Reads only the
    config's names and URLs (keys are resolved when the run starts); a config error exits with status 2 naming
    file and field."""
    parsed = avv_options.preparse_options(args)
    try:
        config = load_config(parsed.avv_config, check_keys=False)
        config = config.select([m.strip() for m in str(parsed.avv_model).split(",") if m.strip()])
        config = config.with_concurrency(avv_options.concurrency_override(parsed))
    except InputError as error:
        _fail_input(error)
    stress = parsed.avv_mode == "stress"
    classes: dict[str, type[User]] = {}
    for vendor, name in zip(config.vendors, class_names(list(config.vendors)), strict=True):
        classes[name] = type(name, (VendorUser,), {
            "avv_vendor_id": (vendor.model, vendor.name),
            # Stress mode splits users by weight (Locust reads fixed_count only once); verify mode runs
            # each vendor's configured concurrency (or --avv-concurrency).
            "fixed_count": 0 if stress else vendor.concurrency, "weight": 1,
            "host": redact_url(vendor.url.replace(SIM_PLACEHOLDER, "http://avv-sim")),  # shown in the web UI
            "__module__": __name__,
        })
    return classes


def locustfile_globals(args: list[str] | None = None) -> dict[str, type[User]]:
    """The User classes as a locustfile exposes them: under collision-free keys (:data:`EXPORT_PREFIX`)."""
    return {EXPORT_PREFIX + name: cls for name, cls in user_classes(args).items()}


# -------------------------------------------------------------------------------------------- shape


class RunShape(locust.LoadTestShape):
    """Every vendor's users until each item is recorded (stress mode: the ladder); honours -t."""

    abstract = True
    use_common_options = True  # we read --run-time ourselves (Locust ignores it for shapes)

    def tick(self) -> tuple | None:
        assert self.runner is not None  # Locust sets the shape's runner before its first tick
        return controller_of(self.runner.environment).next_load(self.get_run_time()).as_tick()


# ---------------------------------------------------------------------------------------- signals


def _stop_on_signals(lifecycle: RunLifecycle) -> None:
    """SIGTERM stops the run exactly like Ctrl-C: Locust installs its own SIGTERM handler only after a
    shape run returns, so until then SIGTERM would kill the process without finishing the run. The first
    signal raises KeyboardInterrupt in the main greenlet (Locust's Ctrl-C path: stop, then quit, then our
    finish); any later one, or one while the run is already finishing, is only acknowledged — except during
    the scoring, which a signal stops (:func:`~avv_core.stop_signals.interrupt_on_signals`: the records are
    complete by then). These are gevent handlers; the scoring step replaces them with Python-level ones and
    re-arms them after (``lifecycle.rearm_signals``)."""
    main = greenlet.getcurrent()
    watchers: list[_SignalWatcher] = []

    def on_signal() -> None:
        if lifecycle.stopping:
            sys.stderr.write("avv-locust: already stopping; records are being saved (a signal during the scoring "
                             "stops it)\n")
            return
        lifecycle.stopping = True
        gevent.get_hub().loop.run_callback(main.throw, KeyboardInterrupt)

    def arm() -> None:
        for watcher in watchers:
            watcher.cancel()
        watchers[:] = [gevent.signal_handler(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)]

    arm()
    lifecycle.rearm_signals = arm
