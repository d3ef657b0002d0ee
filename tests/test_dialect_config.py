"""The dialect keys of the vendor config (adapter, transforms, endpoint, chat_template, tool_parser), per model
and per vendor, and ${VAR} substitution: values, errors naming file and key, and secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avv_core.errors import InputError
from avv_core.tool_formats import TOOL_PARSERS
from avv_harness.inputs.config import load_config, parse_config
from avv_harness.inputs.secrets import Redactor, environment_with_dotenv
from tests.builders import baseline_first, vendor_entry, vendors_config, write_yaml

HERMES = "hermes.jinja"


def load(tmp_path: Path, vendors: list[dict], env: dict | None = None, **model_keys):
    """vendors.yaml of ``vendors`` (the first the baseline) loaded as a run loads it."""
    path = write_yaml(tmp_path / "vendors.yaml", vendors_config(baseline_first(vendors), **model_keys))
    return load_config(path, env=env or {})


def test_defaults_adapters_and_model_level_keys(tmp_path):
    cfg = load(tmp_path, [vendor_entry("a"), vendor_entry("b", adapter="none"),
                          vendor_entry("c", transforms=["strip_reasoning_content"]),
                          vendor_entry("d", model_id="moonshotai/kimi-k2-0905", adapter="auto")],
               adapter="kimi")
    by = {v.name: v.dialect for v in cfg.vendors}
    kimi = ("input_role_to_system", "rename_reasoning_fields", "inject_reasoning_content", "renumber_tool_call_ids")
    assert by["a"].transforms == kimi and by["a"].adapter_source == "config"  # the model's adapter
    assert by["b"].transforms == ()  # the vendor's own adapter wins
    assert by["c"].transforms == (*kimi, "strip_reasoning_content")  # adapter's transforms, then the vendor's
    assert by["d"].adapter == "kimi" and by["d"].adapter_source.startswith("auto: model_id 'moonshotai/kimi-k2-0905'")
    plain = load(tmp_path, [vendor_entry("a")]).vendors[0].dialect
    assert plain.is_default and plain.transforms == ("input_role_to_system",) and plain.endpoint == "chat"


def test_run_json_entry_and_identity(tmp_path):
    cfg = load(tmp_path, [vendor_entry("a"), vendor_entry("b", adapter="auto", model_id="deepseek-chat")])
    entry = cfg.vendors[1].redacted()
    assert entry["adapter"] == "generic" and entry["adapter_source"].startswith("auto: ")
    assert entry["transforms"] == ["input_role_to_system"] and entry["endpoint"] == "chat"
    default_identity = load(tmp_path, [vendor_entry("a"), vendor_entry("b")]).identity()
    # what is sent decides: generic, chosen or picked, is the default; another adapter is another config
    assert load(tmp_path, [vendor_entry("a"), vendor_entry("b", adapter="generic")]).identity() == default_identity
    assert load(tmp_path, [vendor_entry("a"), vendor_entry("b", adapter="auto")]).identity() == default_identity
    assert load(tmp_path, [vendor_entry("a"), vendor_entry("b", adapter="kimi")]).identity() != default_identity


@pytest.mark.parametrize("patch, needle", [
    ({"adapter": "openai"}, "m.vendors[1] (b).adapter: must be one of generic, kimi, none, auto, got 'openai'"),
    ({"transforms": ["nope"]}, "m.vendors[1] (b).transforms: unknown transform(s) nope"),
    ({"transforms": "x"}, "unknown transform(s) x"),
    ({"endpoint": "grpc"},
     "m.vendors[1] (b).endpoint: must be one of chat, completions, messages, responses, got 'grpc'"),
    ({"endpoint": "completions"}, "m.vendors[1] (b).chat_template: endpoint: completions needs a chat_template"),
    ({"endpoint": "completions", "chat_template": "missing.jinja"}, "chat_template: 'missing.jinja' not found"),
    ({"endpoint": "completions", "chat_template": HERMES, "tool_parser": "xml"},
     f"m.vendors[1] (b).tool_parser: must be one of {', '.join(TOOL_PARSERS)}, got 'xml'"),
    ({"chat_template": HERMES}, "m.vendors[1] (b).chat_template: only used with endpoint: completions"),
])
def test_bad_dialect_keys_name_file_and_key(tmp_path, patch, needle):
    with pytest.raises(InputError) as err:
        load(tmp_path, [vendor_entry("a"), vendor_entry("b", **patch)])
    assert needle in str(err.value) and "vendors.yaml" in str(err.value)


def test_bad_model_level_keys(tmp_path):
    with pytest.raises(InputError, match=r"m.adapter: must be one of"):
        load(tmp_path, [vendor_entry("a")], adapter="x")
    with pytest.raises(InputError, match=r"m.chat_template: unknown key \(a model has adapter, endpoint, "
                       r"prompt_tokens_tolerance, transforms, vendors\)"):
        load(tmp_path, [vendor_entry("a")], chat_template="x.jinja")
    with pytest.raises(InputError, match=r"m.endpoint: must be one of chat, completions, messages, responses"):
        load(tmp_path, [vendor_entry("a")], endpoint="grpc")


def test_raw_mode_template_sources(tmp_path):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ bos_token }}x"}))
    (tmp_path / "bad.jinja").write_text("{% for %}")
    cfg = load(tmp_path, [vendor_entry("a", endpoint="completions", chat_template=HERMES),
                          vendor_entry("b", endpoint="completions", chat_template="tok", tool_parser="kimi")])
    a, b = (v.dialect for v in cfg.vendors)
    assert a.raw and a.tool_parser == "hermes" and a.chat_template.endswith("avv_harness/data/templates/hermes.jinja")
    assert b.chat_template == str((tmp_path / "tok").resolve()) and b.tool_parser == "kimi"
    assert a.describe()["chat_template"] == a.chat_template and "tool_parser" in b.describe()
    with pytest.raises(InputError, match=r"bad.jinja: line 1: not a valid Jinja template"):
        load(tmp_path, [vendor_entry("a", endpoint="completions", chat_template="bad.jinja")])
    (tmp_path / "tok" / "tokenizer_config.json").write_text("{}")
    with pytest.raises(InputError, match=r"tokenizer_config.json: has no chat_template"):
        load(tmp_path, [vendor_entry("a", endpoint="completions", chat_template="tok")])


# ------------------------------------------------------------------------------------------- ${VAR}


def test_variables_are_substituted_in_url_headers_extra_body_and_key(tmp_path):
    env = {"HOST": "10.1.2.3:8000", "ROUTE": "route-secret-77", "NESTED": "nested-secret-88", "KEY": "sk-from-var"}
    cfg = load(tmp_path, [vendor_entry("a", url="http://${HOST}/v1", api_key="${KEY}", headers={"X-Route": "${ROUTE}"},
                                 extra_body={"metadata": {"tags": ["${NESTED}", "plain", "$${LITERAL}"]}})], env)
    v = cfg.vendors[0]
    assert v.url == "http://10.1.2.3:8000/v1" and v.api_key == "sk-from-var"
    assert v.headers == {"X-Route": "route-secret-77"}
    assert v.extra_body == {"metadata": {"tags": ["nested-secret-88", "plain", "${LITERAL}"]}}
    secrets = cfg.secrets()
    for value in ("10.1.2.3:8000", "route-secret-77", "nested-secret-88", "sk-from-var"):
        assert value in secrets
    redact = Redactor(secrets)
    assert "route-secret-77" not in json.dumps(redact.value(v.redacted()))


def test_unset_variable_names_file_and_key(tmp_path):
    with pytest.raises(InputError) as err:
        load(tmp_path, [vendor_entry("a", headers={"X-Route": "${NOT_SET_ANYWHERE}"})], {})
    text = str(err.value)
    assert "vendors.yaml: m.vendors[0] (a).headers.X-Route: ${NOT_SET_ANYWHERE} is not set" in text


def test_variables_come_from_dotenv_and_naming_the_classes_keeps_placeholders(tmp_path):
    (tmp_path / ".env").write_text("ROUTE=from-dotenv-99\n")
    path = write_yaml(tmp_path / "vendors.yaml",
                      vendors_config(baseline_first([vendor_entry("a", url="http://127.0.0.1:9/${ROUTE}/v1")])))
    env = environment_with_dotenv(str(tmp_path))
    assert load_config(path, env=env).vendors[0].url == "http://127.0.0.1:9/from-dotenv-99/v1"
    assert load_config(path, check_keys=False).vendors[0].url == "http://127.0.0.1:9/${ROUTE}/v1"
    placeholder_url = parse_config(vendors_config([vendor_entry("a", url="${BASE}/v1", is_baseline=True)]), "x.yaml",
                                   {}, check_keys=False)
    assert placeholder_url.vendors[0].url == "${BASE}/v1"  # checked once it is substituted


def test_shipped_dialects_demo_config_is_valid():
    from avv_sim import load_profiles
    from tests.locust_runs import ROOT

    cfg = load_config(ROOT / "configs" / "dialects-demo.yaml", env={})
    profiles = load_profiles(ROOT / "configs" / "sim.yaml")
    assert {v.url.split("/")[1] for v in cfg.vendors} <= set(profiles)
    assert {v.name: v.dialect.endpoint for v in cfg.vendors}["llamacpp-raw"] == "completions"
    assert "broken_template" in profiles["llamacpp"].quirks
    assert "require_reasoning_content" in profiles["thinking"].quirks
    example = load_config(ROOT / "configs" / "example.yaml", check_keys=False)
    assert {v.name: v.dialect.adapter for v in example.vendors if v.model == "kimi-k2"} == {
        "moonshot": "kimi", "openrouter-fireworks": "kimi", "openrouter-siliconflow": "kimi"}
