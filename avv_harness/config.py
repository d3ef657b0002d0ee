"""Vendor configuration: AVV-compatible YAML, validated as a whole before any request is sent.

Top-level keys are model names; each has a ``vendors`` list. Per vendor: ``name``, ``model_id``, ``url``
(base URL ending in ``/v1``), ``api_key``, ``provider`` (OpenRouter provider pinning, sent as
``extra_body.provider.only``), ``is_baseline``, ``validator`` (accepted for AVV compatibility, unused),
and our additions ``api_key_env``, ``extra_body``, ``headers``, ``concurrency``, ``timeout_s``,
``include_usage``, ``require_key``.

API key lookup, first hit wins: ``api_key`` in the YAML; the variable named by ``api_key_env``; an
environment variable named after the vendor (the AVV convention: exactly the name, then the name
upper-cased with non-alphanumerics as ``_``). A ``.env`` file in the working directory is loaded first
(it never overrides variables already set). A vendor on a loopback URL or on the embedded simulator
(``{sim}`` in its URL) may have no key; any other vendor without a key is an error unless it sets
``require_key: false``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from .errors import InputError

SIM_PLACEHOLDER = "{sim}"

VENDOR_KEYS = frozenset(
    {
        "name", "model_id", "url", "api_key", "api_key_env", "provider", "is_baseline", "validator",
        "extra_body", "headers", "concurrency", "timeout_s", "include_usage", "require_key",
    }
)
MODEL_KEYS = frozenset({"vendors"})
LOOPBACK_HOSTS = ("localhost", "::1")


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
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    concurrency: int = 1
    timeout_s: float = 60.0
    include_usage: bool = True

    @property
    def uses_simulator(self) -> bool:
        return SIM_PLACEHOLDER in self.url

    def resolved_url(self, sim_url: str | None) -> str:
        if self.uses_simulator:
            if not sim_url:
                raise InputError(f"vendor {self.name!r}: url uses {SIM_PLACEHOLDER} but no simulator is running")
            return self.url.replace(SIM_PLACEHOLDER, sim_url.rstrip("/"))
        return self.url

    def redacted(self) -> dict[str, Any]:
        """Config as written to run.json: the key never appears, only where it came from."""
        return {
            "model": self.model, "name": self.name, "model_id": self.model_id, "url": redact_url(self.url),
            "is_baseline": self.is_baseline, "api_key": "***" if self.api_key else None,
            "key_source": self.key_source, "provider": self.provider, "extra_body": self.extra_body,
            "headers": {k: ("***" if _secret_header(k) else v) for k, v in self.headers.items()},
            "concurrency": self.concurrency, "timeout_s": self.timeout_s, "include_usage": self.include_usage,
        }


@dataclass
class VendorConfig:
    path: str
    vendors: list[Vendor]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(v.model for v in self.vendors))

    def select(self, models: list[str] | None) -> VendorConfig:
        if not models:
            return self
        unknown = [m for m in models if m not in self.models]
        if unknown:
            known = ", ".join(self.models)
            raise InputError(f"{self.path}: --avv-model {', '.join(unknown)} not in config (has: {known})")
        return VendorConfig(self.path, [v for v in self.vendors if v.model in models])

    def secrets(self) -> list[str]:
        return [v.api_key for v in self.vendors if v.api_key]


_KEY_PARAM = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth)=)[^&#]*")


def redact_url(url: str) -> str:
    """Replace the values of query parameters named like keys (key, api_key, token, …) with ***."""
    return _KEY_PARAM.sub(r"\1***", url)


def _secret_header(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("auth", "key", "token", "secret"))


def env_names_for(vendor_name: str) -> list[str]:
    upper = re.sub(r"[^A-Za-z0-9]", "_", vendor_name).upper()
    return list(dict.fromkeys([vendor_name, upper, f"{upper}_API_KEY"]))


def load_dotenv_file(directory: str = ".") -> None:
    """Load ``.env`` from the working directory without overriding the environment."""
    path = os.path.join(directory, ".env")
    if os.path.isfile(path):
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def _is_local(url: str) -> bool:
    if SIM_PLACEHOLDER in url:
        return True
    host = urlsplit(url).hostname or ""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def _resolve_key(raw: dict[str, Any], name: str, env: dict[str, str]) -> tuple[str | None, str]:
    if raw.get("api_key"):
        return str(raw["api_key"]), "yaml"
    if raw.get("api_key_env"):
        value = env.get(str(raw["api_key_env"]))
        return (value, f"env:{raw['api_key_env']}") if value else (None, "none")
    for candidate in env_names_for(name):
        if env.get(candidate):
            return env[candidate], f"env:{candidate}"
    return None, "none"


class _Problems:
    def __init__(self, path: str):
        self.path = path
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.path}: {where}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            head = "invalid vendor config" if len(self.items) > 1 else "invalid vendor config"
            raise InputError(head + ":\n  " + "\n  ".join(self.items))


def _typed(problems: _Problems, where: str, raw: dict[str, Any], key: str, kind: type | tuple, default: Any) -> Any:
    value = raw.get(key, default)
    if value is None:
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        problems.add(f"{where}.{key}", f"must be {getattr(kind, '__name__', kind)}, got {value!r}")
        return default
    return value


def _parse_vendor(problems: _Problems, model: str, index: int, raw: Any, env: dict[str, str]) -> Vendor | None:
    where = f"{model}.vendors[{index}]"
    if not isinstance(raw, dict):
        problems.add(where, "must be a mapping")
        return None
    name = raw.get("name")
    if isinstance(name, str) and name:
        where = f"{model}.vendors[{index}] ({name})"
    else:
        problems.add(f"{where}.name", "missing")
        name = f"vendor{index}"
    for key in sorted(set(raw) - VENDOR_KEYS):
        problems.add(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(VENDOR_KEYS))})")
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        problems.add(f"{where}.url", "missing")
        url = ""
    elif not (url.startswith(("http://", "https://", SIM_PLACEHOLDER))):
        problems.add(f"{where}.url", f"must start with http:// or https:// (got {redact_url(url)!r})")
    model_id = raw.get("model_id") or model
    provider = raw.get("provider")
    if provider is not None and not isinstance(provider, (str, list)):
        problems.add(f"{where}.provider", "must be a string or a list of strings")
        provider = None
    providers = [provider] if isinstance(provider, str) else provider
    concurrency = _typed(problems, where, raw, "concurrency", int, 1)
    if concurrency < 1:
        problems.add(f"{where}.concurrency", "must be ≥ 1")
    timeout_s = _typed(problems, where, raw, "timeout_s", float, 60.0)
    if timeout_s <= 0:
        problems.add(f"{where}.timeout_s", "must be > 0")
    api_key, source = _resolve_key(raw, name, env)
    require_key = _typed(problems, where, raw, "require_key", bool, not _is_local(url))
    if require_key and not api_key:
        hint = f"api_key_env {raw['api_key_env']!r} is not set" if raw.get("api_key_env") else (
            f"set api_key, api_key_env, or the environment variable {name!r} (a .env file works)"
        )
        problems.add(f"{where}.api_key", f"no API key: {hint}")
    return Vendor(
        model=model, name=name, model_id=str(model_id), url=url,
        is_baseline=_typed(problems, where, raw, "is_baseline", bool, False),
        api_key=api_key, key_source=source, provider=providers,
        extra_body=_typed(problems, where, raw, "extra_body", dict, {}),
        headers={str(k): str(v) for k, v in _typed(problems, where, raw, "headers", dict, {}).items()},
        concurrency=max(1, concurrency), timeout_s=timeout_s if timeout_s > 0 else 60.0,
        include_usage=_typed(problems, where, raw, "include_usage", bool, True),
    )


def parse_config(data: Any, path: str, env: dict[str, str] | None = None) -> VendorConfig:
    env = dict(os.environ) if env is None else env
    problems = _Problems(path)
    if not isinstance(data, dict) or not data:
        problems.add("top level", "must be a mapping of model name → {vendors: [...]}")
        problems.raise_if_any()
    vendors: list[Vendor] = []
    for model, section in data.items():
        if not isinstance(section, dict):
            problems.add(str(model), "must be a mapping with a 'vendors' list")
            continue
        for key in sorted(set(section) - MODEL_KEYS):
            problems.add(f"{model}.{key}", "unknown key (a model has only 'vendors')")
        listed = section.get("vendors")
        if not isinstance(listed, list) or not listed:
            problems.add(f"{model}.vendors", "missing or empty")
            continue
        parsed = [_parse_vendor(problems, str(model), i, raw, env) for i, raw in enumerate(listed)]
        parsed = [v for v in parsed if v is not None]
        names = [v.name for v in parsed]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.add(f"{model}.vendors", f"vendor name {dup!r} appears twice")
        baselines = [v.name for v in parsed if v.is_baseline]
        if not baselines:
            problems.add(f"{model}.vendors", "no vendor has is_baseline: true (exactly one is needed)")
        elif len(baselines) > 1:
            problems.add(f"{model}.vendors", f"several baselines ({', '.join(baselines)}); exactly one is needed")
        vendors.extend(parsed)
    problems.raise_if_any()
    return VendorConfig(path=path, vendors=vendors)


def load_config(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> VendorConfig:
    """Read and validate a vendor config; every problem is reported in one InputError (exit status 2)."""
    path = os.fspath(path)
    if env is None:
        load_dotenv_file()
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise InputError(f"{path}: cannot read config ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise InputError(f"{path}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return parse_config(data, path, env)
