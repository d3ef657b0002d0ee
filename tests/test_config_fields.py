"""The vendor config's keys are declared once (avv_harness/inputs/config_fields.py): the validator accepts exactly
them, the dialect's keys are among them, and each documented default is the one a parsed config gets."""

import pytest

from avv_core.errors import InputError
from avv_harness.dialects import dialect as dia
from avv_harness.inputs.config import MODEL_KEYS, VENDOR_KEYS, parse_config
from avv_harness.inputs.config_fields import MODEL_FIELDS, VENDOR_FIELDS, render_config_table


def test_the_validator_accepts_exactly_the_declared_keys():
    assert VENDOR_KEYS == {f.key for f in VENDOR_FIELDS}
    assert dia.VENDOR_DIALECT_KEYS <= VENDOR_KEYS
    assert {f.key for f in VENDOR_FIELDS if f.per_model} == dia.MODEL_DIALECT_KEYS
    assert MODEL_KEYS == {"vendors", "prompt_tokens_tolerance"} | dia.MODEL_DIALECT_KEYS
    assert len({f.key for f in (*VENDOR_FIELDS, *MODEL_FIELDS)}) == len(VENDOR_FIELDS) + len(MODEL_FIELDS)
    with pytest.raises(InputError, match=r"m\.vendors\[0\] \(a\)\.timeout: unknown key"):
        parse_config({"m": {"vendors": [{"name": "a", "url": "{sim}/a/v1", "is_baseline": True, "timeout": 5}]}},
                     "c.yaml", env={})


def test_each_documented_default_is_what_a_parsed_config_gets():
    (vendor,) = parse_config({"m": {"vendors": [{"name": "a", "url": "{sim}/a/v1", "is_baseline": True}]}},
                             "c.yaml", env={}).vendors
    (unmarked,) = parse_config({"m": {"vendors": [{"name": "b", "url": "http://127.0.0.1:9/v1",
                                                   "is_baseline": True}]}}, "c.yaml", env={}).vendors
    shown = {f.key: f.default for f in VENDOR_FIELDS}
    assert (shown["concurrency"], vendor.concurrency) == ("1", 1)
    assert (shown["timeout_s"], vendor.timeout_s) == ("60", 60.0)
    assert shown["max_request_s"].endswith("(600)") and vendor.max_request_s is None
    assert (shown["include_usage"], vendor.include_usage) == ("true", True)
    assert (shown["tls_verify"], vendor.tls_verify) == ("true", True)
    assert (shown["model_id"], vendor.model_id) == ("the model key", "m")
    assert (shown["adapter"], vendor.dialect.adapter) == ("generic", "generic")
    assert (shown["endpoint"], vendor.dialect.endpoint) == ("chat", "chat")
    assert (shown["extra_body"], vendor.extra_body) == ("{}", {}) and (shown["headers"], vendor.headers) == ("{}", {})
    assert vendor.price is None and unmarked.api_key is None  # a loopback vendor needs no key
    assert shown["is_baseline"] == "false"


def test_the_table_has_a_row_per_key_with_where_it_may_be_set():
    table = render_config_table()
    assert table.count("\n| `") == len(VENDOR_FIELDS) + len(MODEL_FIELDS)
    assert "| `adapter` | `generic` / `kimi` / `none` / `auto` | generic | vendor or model |" in table
    assert "| `max_request_s` |" in table and "| `vendors` | list |  | model |" in table
