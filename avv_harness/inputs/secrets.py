"""Secrets (inputs layer): where API keys come from (the YAML, ``.env``, the environment) and the redaction applied
on every write path (records, run.json, logs, Locust stats).

The run knows its secrets — API keys from the YAML, ``.env``, ``api_key_env`` or the vendor's variable,
secret header values, URL user-info and key-like query values — so it can remove them from any text
before the text leaves the process, whoever produced it (a vendor echoing the key in a 401 message,
requests quoting a header value in an exception, a URL with a password in a log line).
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Iterable
from typing import TypeVar, overload
from urllib.parse import unquote, urlsplit

from avv_core.json_types import JSONObject, JSONValue
from avv_core.records import COLUMN_KINDS, Record

_T = TypeVar("_T")
_KEY_PARAM = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|sig|signature)=)[^&#\s]*")
_USERINFO = re.compile(r"(?i)\b(https?://)[^/@\s]*@")


def redact_url(url: str) -> str:
    """Replace URL user-info (``user:password@``) and the values of query parameters named like keys
    (key, api_key, token, …) with ***. Works on a URL or on any text holding URLs."""
    return _KEY_PARAM.sub(r"\1***", _USERINFO.sub(r"\1***@", url))


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL: the user-info password (and user) and key-like query values."""
    out: list[str] = []
    try:
        parts = urlsplit(url)
        if parts.password:
            out += [parts.password, unquote(parts.password)]
        if parts.username and parts.password:
            # requests turns URL user-info into Basic auth: the header carries base64("user:password")
            basic = f"{unquote(parts.username)}:{unquote(parts.password)}".encode()
            out += [unquote(parts.username), base64.b64encode(basic).decode("ascii")]
    except ValueError:
        pass
    for match in _KEY_PARAM.finditer(url):
        value = url[match.end(1):match.end()]
        if value:
            out += [value, unquote(value)]
    return [s for s in out if len(s) >= 4]


def secret_header(name: str) -> bool:
    """A header named like a credential (``*auth*``, ``*key*``, ``*token*``, ``*secret*``): its value is a secret."""
    lowered = name.lower()
    return any(word in lowered for word in ("auth", "key", "token", "secret"))


def env_names_for(vendor_name: str) -> list[str]:
    """The variables a vendor's key is looked up in (the AVV convention): the exact name, upper-cased, ``_API_KEY``."""
    upper = re.sub(r"[^A-Za-z0-9]", "_", vendor_name).upper()
    return list(dict.fromkeys([vendor_name, upper, f"{upper}_API_KEY"]))


def environment_with_dotenv(directory: str = ".") -> dict[str, str]:
    """The environment plus ``.env`` from ``directory`` (variables already set win). Nothing is written
    into ``os.environ``: the keys reach only the config that asked for them."""
    env = dict(os.environ)
    path = os.path.join(directory, ".env")
    if os.path.isfile(path):
        from dotenv import dotenv_values

        for key, value in dotenv_values(path).items():
            if value is not None:
                env.setdefault(key, value)
    return env


#: The last place a key is looked for (K2VV's and MiniMax's default), only for a vendor that needs one.
FALLBACK_KEY_ENV = "OPENAI_API_KEY"


def resolve_key(raw: JSONObject, name: str, env: dict[str, str], *,
                fallback: bool = False) -> tuple[str | None, str]:
    """A vendor's API key, first hit wins: ``api_key`` in the YAML, the variable named by ``api_key_env``, a variable
    named after the vendor (:func:`env_names_for`), and with ``fallback`` (a vendor that needs a key: not loopback,
    not ``{sim}``, not ``require_key: false``) :data:`FALLBACK_KEY_ENV`; with where it came from (``yaml``,
    ``env:NAME`` or ``none``). A vendor that names ``api_key_env`` gets that variable or nothing: a key meant for one
    vendor is never sent to another because a variable was forgotten."""
    if raw.get("api_key"):
        return str(raw["api_key"]), "yaml"
    if raw.get("api_key_env"):
        value = env.get(str(raw["api_key_env"]))
        return (value, f"env:{raw['api_key_env']}") if value else (None, "none")
    for candidate in env_names_for(name):
        if env.get(candidate):
            return env[candidate], f"env:{candidate}"
    if fallback and env.get(FALLBACK_KEY_ENV):
        return env[FALLBACK_KEY_ENV], f"env:{FALLBACK_KEY_ENV}"
    return None, "none"


MASK = "***"
MIN_SECRET_CHARS = 4  # shorter "secrets" would mask ordinary words
# Written by the harness from the config and samples, never by a vendor: never redacted. request_hash is hex, so a
# ${VAR} value of 4+ hex digits (a port) would otherwise mask part of it: resume and the master's check compare it.
IDENTITY_COLUMNS = frozenset({"run_id", "model", "vendor", "sample_id", "request_hash"})


class Redactor:
    """Replaces every known secret (and URL user-info / key query values) in a text with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.extend(secrets)

    def extend(self, secrets: Iterable[str]) -> None:
        """Also remove these (a worker learns the master's override headers with its first items)."""
        found = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS} - self._secrets
        if not found:
            return
        # Also the forms a secret takes when quoted by repr() or JSON (escaped newlines and the like).
        self._secrets |= found | {s.encode("unicode_escape").decode("ascii") for s in found}
        ordered = sorted(self._secrets, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    @overload
    def __call__(self, text: str) -> str: ...

    @overload
    def __call__(self, text: _T) -> _T: ...

    def __call__(self, text: object) -> object:
        if not isinstance(text, str) or not text:
            return text
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return redact_url(text) if "://" in text or "=" in text else text

    def value(self, value: object) -> JSONValue:
        """``value`` with every string inside it (lists, dicts) redacted: for run.json."""
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return self(value)

    def record(self, record: Record) -> Record:
        """The record with every text column redacted (in place; returned for chaining), except the item's
        identity, which comes from the config and sample file, never from a vendor: a ``${VAR}`` value that
        happens to equal a vendor's name must not turn the name into ``***``."""
        get = record.get
        for name in _REDACTED_COLUMNS:
            value = get(name)
            if value and isinstance(value, str):
                cleaned = self(value)
                if cleaned is not value:
                    dict.__setitem__(record, name, cleaned)
        return record


#: The columns :meth:`Redactor.record` cleans: text a vendor or the client wrote (not the item's identity).
_REDACTED_COLUMNS = tuple(name for name, kind in COLUMN_KINDS.items()
                          if kind in ("str", "json") and name not in IDENTITY_COLUMNS)


class RedactingFilter(logging.Filter):
    """A logging filter that formats a record's message once and redacts it (and its traceback)."""

    def __init__(self, redact: Redactor):
        super().__init__("avv-redact")
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def install_log_redaction(redact: Redactor) -> RedactingFilter:
    """Attach the filter to every handler of the root logger (Locust's console and --logfile handlers)."""
    flt = RedactingFilter(redact)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(flt)
    return flt
