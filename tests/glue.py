"""Helpers for in-process Locust tests: an Environment with our User classes and shape, the controller
installed on it, and an in-process vendor (tests/fake_vendor.py) instead of sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from locust.env import Environment
from locust.event import Events

from avv_harness.locust.plugin import RunShape, user_classes
from avv_harness.run.controller import RunController, install
from avv_harness.run.options import preparse_options
from tests.fake_vendor import ScriptedAdapter, fake_session_factory, stream_reply
from tests.locust_runs import write_yaml

VENDOR_URL = "http://vendor.test/{name}/v1"


class Shape(RunShape):
    abstract = False


def write_inputs(work: Path, vendors: list[str] | dict[str, dict], n_samples: int = 4,
                 sample_lines: list[dict] | None = None, model: str = "m",
                 url: str = VENDOR_URL) -> tuple[Path, Path]:
    """vendors.yaml (first vendor is the baseline, URLs on the fake host) and samples.jsonl."""
    specs = vendors if isinstance(vendors, dict) else {name: {} for name in vendors}
    rows = []
    for i, (name, extra) in enumerate(specs.items()):
        rows.append({"name": name, "url": url.format(name=name), "is_baseline": i == 0,
                     "require_key": False, "concurrency": 2, "timeout_s": 5, **extra})
    config = write_yaml(work / "vendors.yaml", {model: {"vendors": rows}})
    lines = sample_lines or [{"data_index": f"s{i}", "messages": [{"role": "user", "content": f"q{i}"}]}
                             for i in range(1, n_samples + 1)]
    samples = work / "samples.jsonl"
    samples.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return config, samples


def options(work: Path, config: Path, samples: Path, *extra: str) -> list[str]:
    return ["--headless", "--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
            str(work / "out"), "--avv-start-jitter-s", "0", "--avv-backoff-s", "0.01", "--avv-no-score", *extra]


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
    ctl = install(env, session_factory=None if real_http else fake_session_factory(adapter))
    return env, ctl


def run_to_end(env: Environment, timeout: float = 30.0) -> Any:
    """Start the shape and wait until it stops (every item recorded, or a stop rule)."""
    env.runner.start_shape()
    shape = env.runner.shape_greenlet
    shape.join(timeout=timeout)
    if not shape.dead:
        raise AssertionError("the run did not stop by itself")
    return env.avv.finish()
