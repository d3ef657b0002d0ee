"""Habits of the peers' users (issue 25, point 6): ``OPENAI_API_KEY`` as the last fallback for a vendor that needs
a key, and ``--avv-concurrency N`` for every vendor of one run."""

from __future__ import annotations

import json

import pytest

from avv_core.errors import InputError
from avv_harness.inputs.config import parse_config
from avv_harness.locust.plugin import user_classes
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.options import MAX_CONCURRENCY, RunOptions, preparse_options
from tests.builders import baseline_first, vendors_config, write_inputs
from tests.fake_vendor import ScriptedAdapter, error_reply, stream_reply
from tests.glue import make_env, options, run_to_end

FALLBACK = "sk-openai-fallback-0123456789"


def _one(vendor: dict, env: dict):
    return parse_config(vendors_config(baseline_first([vendor])), "c.yaml", env).vendors[0]


def test_openai_api_key_is_the_last_fallback_of_a_vendor_that_needs_a_key():
    remote = {"name": "reseller", "url": "https://api.reseller.test/v1"}
    v = _one(remote, {"OPENAI_API_KEY": FALLBACK})
    assert (v.api_key, v.key_source) == (FALLBACK, "env:OPENAI_API_KEY")
    assert v.redacted()["api_key"] == "***" and FALLBACK not in json.dumps(v.redacted())
    # every earlier place wins: the YAML, the vendor's own variable
    assert _one({**remote, "api_key": "sk-yaml-key"}, {"OPENAI_API_KEY": FALLBACK}).api_key == "sk-yaml-key"
    assert _one(remote, {"OPENAI_API_KEY": FALLBACK, "RESELLER_API_KEY": "sk-own"}).key_source == "env:RESELLER_API_KEY"


@pytest.mark.parametrize("vendor", [
    {"name": "sim", "url": "{sim}/reference/v1"},                              # the embedded simulator
    {"name": "local", "url": "http://127.0.0.1:8000/v1"},                      # loopback
    {"name": "open", "url": "https://open.test/v1", "require_key": False},     # says it needs none
])
def test_openai_api_key_is_never_sent_to_a_vendor_that_needs_no_key(vendor):
    v = _one(vendor, {"OPENAI_API_KEY": FALLBACK})
    assert (v.api_key, v.key_source) == (None, "none")


def test_a_named_api_key_env_that_is_unset_stays_an_error_not_the_fallback():
    with pytest.raises(InputError, match=r"api_key: no API key: api_key_env 'MINE' is not set") as err:
        _one({"name": "r", "url": "https://r.test/v1", "api_key_env": "MINE"}, {"OPENAI_API_KEY": FALLBACK})
    assert FALLBACK not in str(err.value)
    with pytest.raises(InputError, match="OPENAI_API_KEY"):  # the hint names the fallback
        _one({"name": "r", "url": "https://r.test/v1"}, {})


@pytest.mark.integration  # an in-process Locust run: a second or more
def test_the_fallback_key_is_sent_and_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FALLBACK)
    config, samples = write_inputs(tmp_path, {"a": {"require_key": True}, "b": {"require_key": True}}, n_samples=2)
    seen = []

    def vendor(request):  # b echoes the key in its 401 message, as some vendors do
        seen.append(request.headers["Authorization"])
        if "/b/" in request.url:
            return error_reply(401, f"invalid api key {request.headers['Authorization']}")
        return stream_reply("fine")

    env, ctl = make_env(options(tmp_path, config, samples, "--avv-retries", "0"), adapter=ScriptedAdapter(vendor))
    assert run_to_end(env) == EXIT_OK
    assert set(seen) == {f"Bearer {FALLBACK}"}
    records, manifest = ((ctl.run_dir / name).read_text(encoding="utf-8") for name in ("records.csv", "run.json"))
    assert FALLBACK not in records and "invalid api key Bearer ***" in records
    assert FALLBACK not in manifest and "env:OPENAI_API_KEY" in manifest  # where it came from, never the key


@pytest.mark.parametrize("value", ["0", "-2", str(MAX_CONCURRENCY + 1)])
def test_concurrency_is_range_checked(value):
    with pytest.raises(InputError, match=rf"--avv-concurrency: must be a whole number from 1 to {MAX_CONCURRENCY}"):
        RunOptions.from_parsed(preparse_options(["--avv-concurrency", value]))


def test_concurrency_overrides_every_vendor_for_one_run(tmp_path, monkeypatch):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}, "b": {"concurrency": 7}})
    args = options(tmp_path, config, samples, "--avv-concurrency", "3")
    assert {name: cls.fixed_count for name, cls in user_classes(args).items()} == {"a": 3, "b": 3}
    env, ctl = make_env(args)
    try:
        assert ctl.options.concurrency == 3 and {v.concurrency for v in ctl.vendors.values()} == {3}
        assert {v["concurrency"] for v in ctl.manifest.vendors} == {3}  # run.json says what ran
    finally:
        env.runner.quit()
    # without it, each vendor's own; as LOCUST_AVV_CONCURRENCY like every option
    assert {n: c.fixed_count for n, c in user_classes(options(tmp_path, config, samples)).items()} == {"a": 1, "b": 7}
    monkeypatch.setenv("LOCUST_AVV_CONCURRENCY", "5")
    assert {c.fixed_count for c in user_classes(options(tmp_path, config, samples)).values()} == {5}
