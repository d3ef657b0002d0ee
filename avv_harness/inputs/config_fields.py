"""The vendor config's keys, declared once (inputs layer): what each means, its type and default.

:mod:`avv_harness.inputs.config` accepts exactly these keys (``VENDOR_KEYS`` and ``MODEL_KEYS`` are derived from
:data:`VENDOR_FIELDS` and :data:`MODEL_FIELDS`), and the docs' config reference is rendered from them
(``python -m avv_harness.docs``). A default here is the one the validator applies: ``tests/test_config_fields.py``
compares them with :class:`~avv_harness.inputs.config.Vendor` and :class:`~avv_harness.dialects.dialect.Dialect`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigField:
    key: str
    kind: str  # how the docs show its type
    default: str  # how the docs show its default ("" = none)
    meaning: str  # one or two sentences for the docs table
    per_model: bool = False  # also allowed on a model, next to ``vendors``, as its vendors' default


#: Every key of one vendor entry (a model's ``vendors`` list), in the order the docs show them.
VENDOR_FIELDS: tuple[ConfigField, ...] = (
    ConfigField("name", "str", "", "The vendor's name, any text without control characters: records, reports and "
                "the Locust User class (`avv:<name>`; `model.name` when two models share a vendor name). Required; "
                "unique within a model."),
    ConfigField("model_id", "str", "the model key", "The `model` sent in every request."),
    ConfigField("url", "URL", "", "Base URL ending in `/v1` (the wire format adds `/chat/completions`, "
                "`/messages` …). `{sim}` stands for the embedded simulator. Required."),
    ConfigField("is_baseline", "bool", "false", "The reference vendor of this model: every other vendor is "
                "compared with it. Exactly one per model."),
    ConfigField("api_key", "str", "", "The key, written in the file (prefer `api_key_env` or a `.env` file). "
                "Lookup order: `api_key`, `api_key_env`, a variable named after the vendor, `OPENAI_API_KEY`."),
    ConfigField("api_key_env", "str", "", "The environment variable (or `.env` entry) holding the key; an unset "
                "variable is an error, never a fallback to another key."),
    ConfigField("require_key", "bool", "true (false on loopback and `{sim}` URLs)",
                "Whether a missing key is an error."),
    ConfigField("provider", "str or list", "", "OpenRouter provider pinning, sent as `extra_body.provider.only`."),
    ConfigField("extra_body", "mapping", "{}", "Deep-merged into every request body (`temperature`, `thinking`, "
                "`top_k` …); `${VAR}` in its strings is substituted."),
    ConfigField("headers", "mapping", "{}", "Added to every request; values may use `${VAR}`; a header named like "
                "`*auth*`, `*key*`, `*token*` or `*secret*` is a secret (redacted everywhere)."),
    ConfigField("tls_verify", "`true` / `false` / path", "true", "How an `https` vendor's certificate is checked: "
                "`true` against the default CAs (`REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE`, else certifi's bundle); a "
                "path: against that CA file (PEM) or folder instead, relative to the config file (it wins over those "
                "variables); `false`: not at all (said once per run). Both clients (`--avv-client`) honour it."),
    ConfigField("concurrency", "int ≥ 1", "1", "Locust users for this vendor: requests in flight at once "
                "(`--avv-concurrency` overrides every vendor's for one run)."),
    ConfigField("timeout_s", "seconds > 0", "60", "Idle timeout: no byte for this long is `timeout` (connect: at "
                "most 10 s). `--avv-timeout` overrides it."),
    ConfigField("max_request_s", "seconds > 0", "`--avv-max-request-s` (600)", "Total time cap of one attempt, "
                "however the bytes trickle in (`timeout`; an answer already finished is kept)."),
    ConfigField("include_usage", "bool", "true", "Send `stream_options.include_usage` (false for vendors that "
                "reject it; their token columns stay empty)."),
    ConfigField("price", "mapping", "", "`{input, output, cached_input, currency}` per million tokens: gives each "
                "record a `cost` (`cached_input` defaults to `input`, `currency` to USD; one currency per config)."),
    ConfigField("adapter", "`generic` / `kimi` / `none` / `auto`", "generic", "The request adapter: a preset list "
                "of transforms (reference: presets).", per_model=True),
    ConfigField("transforms", "list", "[]", "Request transforms run after the adapter's.", per_model=True),
    ConfigField("endpoint", "`chat` / `completions` / `messages` / `responses`", "chat", "The wire format the "
                "vendor speaks (reference: wire formats).", per_model=True),
    ConfigField("chat_template", "path", "", "Raw mode (`endpoint: completions`): a `.jinja` file, a "
                "`tokenizer_config.json` or a tokenizer folder, relative to the config file; nothing is downloaded."),
    ConfigField("tool_parser", "`hermes` / `kimi` / `json_fenced` / `mistral`", "", "Raw mode: how tool calls are "
                "read back from the completion text."),
    ConfigField("validator", "any", "", "Accepted for AVV compatibility, ignored."),
)

#: Keys of a model section besides its vendors' defaults (the ``per_model`` fields).
MODEL_FIELDS: tuple[ConfigField, ...] = (
    ConfigField("vendors", "list", "", "The model's vendors (the keys above). Required, not empty."),
    ConfigField("prompt_tokens_tolerance", "number 0–1", "0.05", "Billing honesty: the largest relative "
                "difference of a vendor's reported prompt tokens from the baseline's on the same items that is not "
                "flagged (0.05 = ±5 %; `avv-score --prompt-tokens-tolerance` overrides it)."),
)


def render_config_table() -> str:
    """The Markdown table of every config key (docs/reference/config.md)."""
    rows = ["| key | type | default | where | meaning |", "|---|---|---|---|---|"]
    for field in (*MODEL_FIELDS, *VENDOR_FIELDS):
        where = "model" if field in MODEL_FIELDS else ("vendor or model" if field.per_model else "vendor")
        rows.append(f"| `{field.key}` | {field.kind} | {field.default} | {where} | {field.meaning} |")
    return "\n".join(rows)


__all__ = ["MODEL_FIELDS", "VENDOR_FIELDS", "ConfigField", "render_config_table"]
