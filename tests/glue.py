"""Helpers for in-process Locust tests: an Environment with our User classes and shape, the controller
installed on it, and an in-process vendor (tests/fake_vendor.py) instead of sockets. The inputs come from
tests/builders.py (``write_inputs``). A run takes a second or more (Locust's shape ticks once a second), so a
test that calls :func:`run_to_end` belongs to the ``integration`` tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from locust.env import Environment
from locust.event import Events

from avv_harness.locust.plugin import RunShape, user_classes
from avv_harness.run.controller import RunController, install
from avv_harness.run.options import preparse_options
from tests.fake_vendor import ScriptedAdapter, fake_session_factory, stream_reply
from tests.wire_clients import client_session


class Shape(RunShape):
    abstract = False


def options(work: Path, config: Path, samples: Path, *extra: str) -> list[str]:
    """A headless run's options for in-process tests: no start jitter, fast back-off, no scoring, and no pre-flight
    request (the tests' scripted vendors count and script every request an item makes; tests/test_preflight.py
    checks the pre-flight itself: ``--avv-preflight strict`` later in ``extra`` wins)."""
    return ["--headless", "--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
            str(work / "out"), "--avv-start-jitter-s", "0", "--avv-backoff-s", "0.01", "--avv-no-score",
            "--avv-preflight", "off", *extra]


def make_env(args: list[str], runner: str = "local", adapter: ScriptedAdapter | None = None,
             master_port: int = 0, real_http: bool = False) -> tuple[Environment, RunController]:
    """An environment with our classes and shape, its runner, and the controller installed. The users talk
    to the in-process ``adapter`` (default: a fixed answer), or over real HTTP with ``real_http``."""
    parsed = preparse_options(args)
    classes = list(user_classes(args).values())
    env = Environment(user_classes=classes, shape_class=Shape(), events=Events(), parsed_options=parsed)
    if runner == "local":
        env.create_local_runner()
    elif runner == "master":
        env.create_master_runner("127.0.0.1", master_port)
    else:
        env.create_worker_runner("127.0.0.1", master_port)
    adapter = adapter or ScriptedAdapter(lambda request: stream_reply("hello there"))
    ctl = install(env, session_factory=client_session if real_http else fake_session_factory(adapter))
    return env, ctl


def run_to_end(env: Environment, timeout: float = 30.0) -> Any:
    """Start the shape and wait until it stops (every item recorded, or a stop rule)."""
    env.runner.start_shape()
    shape = env.runner.shape_greenlet
    shape.join(timeout=timeout)
    if not shape.dead:
        raise AssertionError("the run did not stop by itself")
    return env.avv.finish()
