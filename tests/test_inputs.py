"""Bad input, in-process: every case is an exit status 2 with one message naming the file and the line or
field, before anything is started or sent. (tests/test_inputs_resume_secrets_e2e.py proves the status
of a real process once.)"""

from __future__ import annotations

import pytest
from locust.env import Environment
from locust.event import Events

from avv_harness.locust import plugin as locust_plugin
from avv_harness.run.options import preparse_options
from tests.builders import write_inputs, write_jsonl
from tests.glue import Shape, options

GOOD = {"messages": [{"role": "user", "content": "hi"}]}


def init_exit(args: list[str]) -> SystemExit:
    """Build the classes (as importing the locustfile does) and fire our init hook; return its SystemExit."""
    with pytest.raises(SystemExit) as stopped:
        classes = list(locust_plugin.user_classes(args).values())
        env = Environment(user_classes=classes, shape_class=Shape(), events=Events(),
                          parsed_options=preparse_options(args))
        env.create_local_runner()
        try:
            locust_plugin._on_init(env)
        finally:
            env.runner.quit()
    return stopped.value


@pytest.mark.parametrize(
    "lines, message",
    [
        ([GOOD, GOOD, '{"messages": [oops'], "samples.jsonl:3: not valid JSON"),
        ([GOOD, '"just a string"'], "samples.jsonl:2: a sample must be a JSON object, got str"),
        ([GOOD, {"model": "x", "tools": []}], "samples.jsonl:2: field 'messages' is missing"),
        (None, "samples.jsonl: cannot read sample file"),
    ],
)
def test_bad_samples_exit_2_before_any_request(tmp_path, capsys, lines, message):
    config, samples = write_inputs(tmp_path, ["a", "b"])
    if lines is None:
        samples.unlink()
    else:
        write_jsonl(samples, lines)
    stopped = init_exit(options(tmp_path, config, samples))
    err = capsys.readouterr().err
    assert stopped.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()  # nothing started, nothing sent


@pytest.mark.parametrize(
    "vendor_patch, message",
    [
        ({"colour": "red"}, "m.vendors[1] (b).colour: unknown key"),
        ({"url": None}, "m.vendors[1] (b).url: missing"),
        ({"is_baseline": True}, "several baselines (a, b)"),
        ({"url": "https://vendor.invalid/v1", "require_key": True}, "m.vendors[1] (b).api_key: no API key"),
    ],
)
def test_config_errors_exit_2_naming_file_and_field(tmp_path, capsys, vendor_patch, message):
    config, samples = write_inputs(tmp_path, {"a": {}, "b": vendor_patch})
    stopped = init_exit(options(tmp_path, config, samples))
    err = capsys.readouterr().err
    assert stopped.code == 2 and "vendors.yaml" in err and message in err, err
    assert not (tmp_path / "out").exists()
