"""Vendor configuration: AVV-compatible YAML, validated as a whole before any request is sent.

Top-level keys are model names; each has a ``vendors`` list. Per vendor: ``name``, ``model_id``, ``url``
(base URL ending in ``/v1``), ``api_key``, ``provider`` (OpenRouter provider pinning, sent as
``extra_body.provider.only``), ``is_baseline``, ``validator`` (accepted for AVV compatibility, unused),
and our additions ``api_key_env``, ``extra_body``, ``headers``, ``concurrency``, ``timeout_s``,
``include_usage``, ``require_key``, ``tls_verify`` (the certificate check: on, off, or a CA file or folder),
``price`` (per million tokens: ``input``, ``output``, ``cached_input``, ``currency``; one currency per config);
the dialect keys ``adapter``, ``transforms``, ``endpoint``, ``chat_template``, ``tool_parser`` and ``${VAR}``
substitution (:mod:`avv_harness.dialects.dialect`; a model section may set ``adapter`` and ``transforms`` for its
vendors).

API key lookup, first hit wins: ``api_key`` in the YAML; the variable named by ``api_key_env``; an
environment variable named after the vendor (the AVV convention: exactly the name, then the name
upper-cased with non-alphanumerics as ``_``); last, ``OPENAI_API_KEY`` for a vendor that needs a key (never for
one on loopback, on ``{sim}`` or with ``require_key: false``, and never instead of an unset ``api_key_env``). A ``.env``
file in the working directory is loaded first (it never overrides variables already set). A vendor on a loopback
URL or on the embedded simulator (``{sim}`` in its URL) may have no key; any other vendor without a key is an error
unless it sets ``require_key: false``. A vendor that names ``api_key_env`` needs that variable set, whatever its URL
(loopback and ``{sim}`` too), unless it sets ``require_key: false``.

Messages never show a secret: not a key, not a value put in by ``${VAR}`` (they name the key and the variable,
and show the value as written in the file), not a secret header. Model names and vendor names must not hold
control characters (they are printed in terminals, logs and reports; an ANSI escape in one would run).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from avv_core.errors import InputError
from avv_core.json_types import JSONObject, JSONValue
from avv_core.pricing import Price
from avv_core.suggest import did_you_mean
from avv_core.yaml_io import load_yaml
from avv_harness.dialects import dialect as dia
from avv_harness.inputs.config_fields import MODEL_FIELDS, VENDOR_FIELDS
from avv_harness.inputs.field_checks import (
    SIM_PLACEHOLDER,
    Problems,
    check_headers,
    check_key,
    check_url,
    control_problem,
    parse_price,
    parse_tls_verify,
    positive_seconds,
    printable_name,
    surrogate_problem,
    typed,
)
from avv_harness.inputs.secrets import (
    environment_with_dotenv,
    redact_url,
    resolve_key,
    secret_header,
    url_secrets,
)

VENDOR_KEYS = frozenset(field.key for field in VENDOR_FIELDS)  # declared once, with the docs: config_fields.py
MODEL_KEYS = frozenset(field.key for field in MODEL_FIELDS) | frozenset(f.key for f in VENDOR_FIELDS if f.per_model)
LOOPBACK_HOSTS = ("localhost", "::1")
#: Most vendors in one run (after --avv-model). Locust's runner.stop_users rebuilds its class table for every user
#: of every class it stops: with one User class per vendor that is cubic in the vendors. Measured in-process (local
#: runner, in-process vendor, one item each, 2 shared cores): stopping 500 took 3–5 s, 700 13 s, 1,000 48 s;
#: 2,000 had not stopped after 3 minutes (issue 22).
MAX_VENDORS_PER_RUN = 500


@dataclass(frozen=True)
class Vendor:
    model: str
    name: str
    model_id: str
    url: str
    is_baseline: bool = False
    api_key: str | None = field(default=None, repr=False)
    key_source: str = "none"
    provider: list[str] | None = None
    extra_body: JSONObject = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    concurrency: int = 1
    timeout_s: float = 60.0
    max_request_s: float | None = None  # total time cap per attempt (None: --avv-max-request-s)
    include_usage: bool = True
    tls_verify: bool | str = True  # https: True the default CAs, False no check, a str the CA file or folder
    dialect: dia.Dialect = field(default_factory=dia.Dialect)  # adapter, transforms, endpoint, template, parser
    substituted: tuple[str, ...] = field(default=(), repr=False)  # values put in by ${VAR}: secrets
    price: Price | None = None  # per million tokens (None: no cost column, no cost budget)
    prompt_tokens_tolerance: float | None = None  # its model's billing tolerance (None: scoring's default)

    @property
    def uses_simulator(self) -> bool:
        return SIM_PLACEHOLDER in self.url

    def resolved_url(self, sim_url: str | None) -> str:
        if self.uses_simulator:
            if not sim_url:
                raise InputError(f"vendor {self.name!r}: url uses {SIM_PLACEHOLDER} but no simulator is running")
            return self.url.replace(SIM_PLACEHOLDER, sim_url.rstrip("/"))
        return self.url

    def redacted(self) -> JSONObject:
        """Config as written to run.json: the key never appears, only where it came from."""
        return {
            "model": self.model, "name": self.name, "model_id": self.model_id, "url": redact_url(self.url),
            "is_baseline": self.is_baseline, "api_key": "***" if self.api_key else None,
            "key_source": self.key_source, "provider": self.provider, "extra_body": self.extra_body,
            "headers": {k: ("***" if secret_header(k) else v) for k, v in self.headers.items()},
            "concurrency": self.concurrency, "timeout_s": self.timeout_s, "max_request_s": self.max_request_s,
            "include_usage": self.include_usage, **self.dialect.describe(),
            **({"tls_verify": self.tls_verify} if self.tls_verify is not True else {}),
            **({"price": self.price.to_dict()} if self.price is not None else {}),
            **({"prompt_tokens_tolerance": self.prompt_tokens_tolerance}
               if self.prompt_tokens_tolerance is not None else {}),
        }


@dataclass
class VendorConfig:
    path: str
    vendors: list[Vendor]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(v.model for v in self.vendors))

    def select(self, models: list[str] | None) -> VendorConfig:
        """The vendors of ``models`` (all when empty): the vendors of one run. InputError for an unknown model,
        or for more than :data:`MAX_VENDORS_PER_RUN` vendors."""
        if models:
            unknown = [m for m in models if m not in self.models]
            if unknown:
                known = ", ".join(self.models)
                raise InputError(f"{self.path}: --avv-model {', '.join(unknown)} not in config (has: {known})")
        selected = VendorConfig(self.path, [v for v in self.vendors if v.model in models]) if models else self
        if len(selected.vendors) > MAX_VENDORS_PER_RUN:
            per_model = Counter(v.model for v in selected.vendors)
            raise InputError(
                f"{self.path}: {len(selected.vendors)} vendors: at most {MAX_VENDORS_PER_RUN} vendors per run, "
                "because Locust runs one User class per vendor and its time to stop them grows with the cube of "
                "their number (1,000 vendors: 48 s; 2,000: not within 3 minutes); split the config with "
                "--avv-model (models: "
                + ", ".join(f"{m} {n}" for m, n in per_model.items())
                + "), or a model's vendors into several config files")
        return selected

    def with_concurrency(self, users: int | None) -> VendorConfig:
        """Every vendor with ``users`` users (``--avv-concurrency``); unchanged when None."""
        if users is None:
            return self
        return VendorConfig(self.path, [dataclasses.replace(v, concurrency=users) for v in self.vendors])

    @property
    def currency(self) -> str | None:
        """The currency of the vendors' prices (one per config); None when no vendor has a price."""
        return next((v.price.currency for v in self.vendors if v.price is not None), None)

    def secrets(self) -> list[str]:
        """Every secret this config knows: API keys, secret header values, URL passwords and key
        query parameters. The redactor removes each of them from anything the run writes."""
        out: list[str] = []
        for v in self.vendors:
            if v.api_key:
                out.append(v.api_key)
            out += [value for name, value in v.headers.items() if secret_header(name) and value]
            out += url_secrets(v.url)
            out += v.substituted
        return sorted({s for s in out if s}, key=len, reverse=True)

    def identity(self) -> str:
        """A hash of what makes two configs the same run: models, vendor names, model ids and URLs
        (keys redacted). Resume refuses a run folder made with another identity."""
        rows = sorted((v.model, v.name, v.model_id, redact_url(v.url))
                      + (() if v.dialect.is_default else v.dialect.identity()) for v in self.vendors)
        return hashlib.sha256(json.dumps(rows).encode("utf-8")).hexdigest()


def _is_local(url: str) -> bool:
    if SIM_PLACEHOLDER in url:
        return True
    host = urlsplit(url).hostname or ""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def _parse_vendor(problems: Problems, model: str, index: int, raw: object, env: dict[str, str],
                  check_keys: bool, defaults: JSONObject, config_dir: str) -> Vendor | None:
    where = f"{printable_name(model)}.vendors[{index}]"
    if not isinstance(raw, dict):
        problems.add(where, "must be a mapping")
        return None
    name = raw.get("name")
    if isinstance(name, str) and name:
        where = f"{printable_name(model)}.vendors[{index}] ({printable_name(name)})"
        control = control_problem(name)
        if control:
            problems.add(f"{where}.name", control)
    else:
        problems.add(f"{where}.name", "missing")
        name = f"vendor{index}"
    for key in sorted(set(raw) - VENDOR_KEYS):
        problems.add(f"{where}.{printable_name(str(key))}", f"unknown key{did_you_mean(str(key), VENDOR_KEYS)} "
                     f"(known: {', '.join(sorted(VENDOR_KEYS))})")
    # ${VAR} is replaced when the run starts; naming the User classes (check_keys=False) keeps the placeholders
    written = raw
    substitution = dia.substitute(raw, env, problems, where) if check_keys else None
    if substitution:
        problems.hide(substitution.secrets)
    raw = substitution.raw if substitution else raw
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        problems.add(f"{where}.url", "missing")
        url = ""
    elif not (substitution is None and dia.has_placeholder(url)):
        check_url(problems, where, url, str(written.get("url")), substitution.named("url") if substitution else None)
    model_id = raw.get("model_id") or model
    lone = surrogate_problem(model_id) if isinstance(model_id, str) else None
    if lone:
        problems.add(f"{where}.model_id", lone)
    provider = raw.get("provider")
    if provider is not None and not isinstance(provider, (str, list)):
        problems.add(f"{where}.provider", "must be a string or a list of strings")
        provider = None
    providers = [provider] if isinstance(provider, str) else provider
    concurrency = typed(problems, where, raw, "concurrency", int, 1)
    if concurrency < 1:
        problems.add(f"{where}.concurrency", "must be ≥ 1")
    timeout_s = positive_seconds(problems, where, raw, "timeout_s", 60.0)
    max_request_s = positive_seconds(problems, where, raw, "max_request_s", None)
    require_key = typed(problems, where, raw, "require_key", bool, not _is_local(url))
    api_key, source = resolve_key(raw, name, env, fallback=require_key) if check_keys else (None, "none")
    api_key = check_key(problems, where, api_key, source)
    # A vendor that names api_key_env wants that key, whatever its URL (a loopback or {sim} one too): an unset
    # variable is an error unless the vendor says it needs no key (require_key: false)
    named_unset = bool(raw.get("api_key_env")) and raw.get("require_key") is not False
    if check_keys and (require_key or named_unset) and not api_key:
        hint = f"api_key_env {raw['api_key_env']!r} is not set" if raw.get("api_key_env") else (
            f"set api_key, api_key_env, the environment variable {name!r} or OPENAI_API_KEY (a .env file works)"
        )
        problems.add(f"{where}.api_key", f"no API key: {hint}")
    return Vendor(
        model=model, name=name, model_id=str(model_id), url=url,
        is_baseline=typed(problems, where, raw, "is_baseline", bool, False),
        api_key=api_key, key_source=source, provider=providers,
        extra_body=typed(problems, where, raw, "extra_body", dict, {}),
        headers=check_headers(problems, where, typed(problems, where, raw, "headers", dict, {}), substitution),
        concurrency=max(1, concurrency), timeout_s=timeout_s or 60.0, max_request_s=max_request_s,
        include_usage=typed(problems, where, raw, "include_usage", bool, True),
        tls_verify=parse_tls_verify(problems, where, raw.get("tls_verify"), config_dir),
        dialect=dia.parse_dialect(problems, where, raw, defaults, str(model_id), config_dir),
        substituted=tuple(substitution.secrets) if substitution else (),
        price=parse_price(problems, where, raw.get("price")),
    )


def _tolerance(problems: Problems, where: str, value: object) -> float | None:
    """A model's ``prompt_tokens_tolerance``: a number from 0 to 1 (0.05 = ±5 %), or absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        problems.add(f"{where}.prompt_tokens_tolerance", f"must be a number from 0 to 1 (0.05 = ±5 %), got {value!r}")
        return None
    return float(value)


def parse_config(data: JSONValue, path: str,
                 env: dict[str, str] | None = None, check_keys: bool = True) -> VendorConfig:
    """Validate a parsed config. ``check_keys=False`` skips key lookup (naming the User classes at import
    needs only names and URLs; keys are resolved when the run starts)."""
    env = dict(os.environ) if env is None else env
    problems = Problems(path)
    if not isinstance(data, dict) or not data:
        problems.add("top level", "must be a mapping of model name → {vendors: [...]}")
        problems.raise_if_any()
    vendors: list[Vendor] = []
    for model, section in data.items():
        shown = printable_name(str(model))  # messages show control characters escaped
        control = control_problem(str(model))
        if control:
            problems.add(f"{shown} (the model name)", control)
        if not isinstance(section, dict):
            problems.add(shown, "must be a mapping with a 'vendors' list")
            continue
        for key in sorted(set(section) - MODEL_KEYS):
            problems.add(f"{shown}.{printable_name(str(key))}",
                         f"unknown key{did_you_mean(str(key), MODEL_KEYS)} (a model has "
                         f"{', '.join(sorted(MODEL_KEYS))})")
        defaults = dia.model_defaults(problems, shown, section)
        listed = section.get("vendors")
        if not isinstance(listed, list) or not listed:
            problems.add(f"{shown}.vendors", "missing or empty")
            continue
        found = [_parse_vendor(problems, str(model), i, raw, env, check_keys, defaults,
                               os.path.dirname(os.path.abspath(path))) for i, raw in enumerate(listed)]
        tolerance = _tolerance(problems, shown, section.get("prompt_tokens_tolerance"))
        parsed = [v if tolerance is None else dataclasses.replace(v, prompt_tokens_tolerance=tolerance)
                  for v in found if v is not None]
        names = [v.name for v in parsed]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.add(f"{shown}.vendors", f"vendor name {dup!r} appears twice")
        baselines = [v.name for v in parsed if v.is_baseline]
        if not baselines:
            problems.add(f"{shown}.vendors", "no vendor has is_baseline: true (exactly one is needed)")
        elif len(baselines) > 1:
            listed = ", ".join(map(printable_name, baselines))
            problems.add(f"{shown}.vendors", f"several baselines ({listed}); exactly one is needed")
        vendors.extend(parsed)
    currencies = {v.price.currency: v for v in reversed(vendors) if v.price is not None}
    if len(currencies) > 1:  # costs are summed and compared across vendors: one currency
        problems.add("price.currency", "one currency per config, found " + ", ".join(
            f"{c} ({printable_name(v.model)}/{printable_name(v.name)})" for c, v in sorted(currencies.items())))
    problems.raise_if_any()
    return VendorConfig(path=path, vendors=vendors)


def load_config(path: str | os.PathLike[str], env: dict[str, str] | None = None,
                check_keys: bool = True) -> VendorConfig:
    """Read and validate a vendor config; every problem is reported in one InputError (exit status 2).

    Keys are looked up in ``env`` (default: the environment plus ``.env`` of the working directory)."""
    path = os.fspath(path)
    if env is None:
        env = environment_with_dotenv() if check_keys else {}
    return parse_config(load_yaml(path, "config"), path, env, check_keys)
