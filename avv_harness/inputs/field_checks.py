"""Checks of single vendor-config fields, each adding problems instead of raising (inputs layer).

The config is validated as a whole (:mod:`avv_harness.inputs.config`): every check here adds what is wrong to a
:class:`Problems` collector, named by file and field, and the collector raises one ``InputError`` listing them all.
No message shows a secret: keys and ``${VAR}`` values are named, never printed (:meth:`Problems.hide` is the last
guard), and names are shown with control characters escaped.
"""

from __future__ import annotations

import math
import os
import re
import ssl
from pathlib import Path
from urllib.parse import urlsplit

from avv_core.errors import InputError
from avv_core.http_headers import refused_header
from avv_core.json_types import JSONObject, JSONValue
from avv_core.pricing import DEFAULT_CURRENCY, MAX_PRICE, Price
from avv_core.suggest import did_you_mean
from avv_harness.dialects import dialect as dia
from avv_harness.inputs.secrets import redact_url, secret_header

#: A vendor URL holding this is served by the embedded simulator (replaced by its address at start-up).
SIM_PLACEHOLDER = "{sim}"
PRICE_KEYS = ("input", "output", "cached_input", "currency")
_CURRENCY = re.compile(r"^[A-Z]{3}$")

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*$")


def check_key(problems: Problems, where: str, key: str | None, source: str) -> str | None:
    """Keys are stripped of surrounding whitespace (a trailing newline from ``echo >> .env`` is common);
    anything left that cannot go into an HTTP header is an input error. The key itself is never shown."""
    if key is None:
        return None
    key = key.strip()
    if not key:
        return None
    if not _HEADER_VALUE.match(key) or any(c.isspace() for c in key):
        problems.add(f"{where}.api_key", f"the key from {source} holds whitespace, a line break or a "
                     "non-ASCII character inside it; an API key must be one printable ASCII word")
        return None
    return key


def _url_problem(exc: ValueError) -> str:
    """urlsplit's complaint without the text it quotes (that text may be a ${VAR} value)."""
    text = str(exc).lower()
    if "out of range" in text:
        return "port out of range"
    if "port" in text:
        return "the port is not a number"
    if "ipv6" in text or "ipv4" in text or "address" in text:
        return "not a valid IP address in the host"
    return "cannot be parsed"


def check_url(problems: Problems, where: str, url: str, written: str | None = None,
               variables: str | None = None) -> None:
    """``url`` is the value to check; when ``variables`` is set (``"${PORT}"``) it came from them, and a message
    names them and shows ``written`` (the value as written in the file), never the value itself."""
    if url.startswith(SIM_PLACEHOLDER):
        return

    def problem(what: str, detail: str = "") -> None:
        if variables:
            problems.add(f"{where}.url", f"the value from {variables} {what}{detail}; as written: "
                         f"{redact_url(written or '')!r}")
        else:
            problems.add(f"{where}.url", f"{what}{detail}: {redact_url(url)!r}")

    if not url.startswith(("http://", "https://")):
        problem("must start with http:// or https://")
        return
    if any(c.isspace() for c in url) or not _HEADER_VALUE.match(url):
        problem("must not contain spaces, line breaks or non-ASCII characters", " (percent-encode them)")
        return
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        problem("is not a valid URL" if variables else "not a valid URL", f" ({_url_problem(exc)})")
        return
    if not parts.hostname:
        problem("has no host")
    elif port == 0:
        problem("has port 0, which is not a port")


def check_headers(problems: Problems, where: str, headers: JSONObject,
                   substitution: dia.Substitution | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        name = str(name)
        if not _HEADER_NAME.match(name):
            problems.add(f"{where}.headers", f"{name!r} is not a valid HTTP header name")
            continue
        refused = refused_header(name)
        if refused:
            problems.add(f"{where}.headers.{name}", f"{refused}: remove it (docs/reference/wire-faults.md)")
            continue
        if value is None or isinstance(value, (dict, list)):
            problems.add(f"{where}.headers.{name}", "must be a string or a number")
            continue
        text = str(value).strip() if secret_header(name) else str(value)
        if not _HEADER_VALUE.match(text):
            variables = substitution.named(f"headers.{name}") if substitution else None
            shown = (f"(the value from {variables}, not shown)" if variables
                     else "(value hidden)" if secret_header(name) else repr(text))
            problems.add(f"{where}.headers.{name}", f"holds a line break, control or non-ASCII character {shown}")
            continue
        out[name] = text
    return out


def positive_seconds(problems: Problems, where: str, raw: JSONObject, key: str,
                      default: float | None) -> float | None:
    value = typed(problems, where, raw, key, float, default)
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        problems.add(f"{where}.{key}", f"must be a finite number > 0, got {raw.get(key)!r}")
        return default
    return value


def parse_price(problems: Problems, where: str, raw: object) -> Price | None:
    """``price: {input, output, cached_input, currency}``: per million tokens, finite and ≥ 0; ``input`` and
    ``output`` required, ``cached_input`` defaults to ``input``, ``currency`` to USD (three capital letters)."""
    if raw is None:
        return None
    where = f"{where}.price"
    if not isinstance(raw, dict):
        problems.add(where, "must be a mapping with input, output (per million tokens), cached_input, currency")
        return None
    ok = True
    for key in sorted(set(map(str, raw)) - set(PRICE_KEYS)):
        problems.add(f"{where}.{printable_name(key)}",
                     f"unknown key{did_you_mean(key, PRICE_KEYS)} (known: {', '.join(PRICE_KEYS)})")
        ok = False
    amounts: dict[str, float] = {}
    for key in ("input", "output", "cached_input"):
        value = raw.get(key)
        if value is None:
            if key != "cached_input":
                problems.add(f"{where}.{key}", "missing (the price per million tokens)")
                ok = False
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            problems.add(f"{where}.{key}", f"must be a finite number ≥ 0 (per million tokens), got {value!r}")
            ok = False
            continue
        if value > MAX_PRICE:
            problems.add(f"{where}.{key}", f"{value:g} per million tokens is too large: a run's costs would overflow "
                         f"(at most {MAX_PRICE:.3g}; see MAX_PRICE in avv_core/pricing.py)")
            ok = False
            continue
        amounts[key] = float(value)
    currency = raw.get("currency", DEFAULT_CURRENCY)
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        problems.add(f"{where}.currency", f"must be a three-letter ISO 4217 code such as USD, got {currency!r}")
        ok = False
    if not ok:
        return None
    return Price(amounts["input"], amounts["output"], amounts.get("cached_input", amounts["input"]), str(currency))


def parse_tls_verify(problems: Problems, where: str, value: object, config_dir: str) -> bool | str:
    """``tls_verify``: ``true`` (absent: the default CAs), ``false`` (no certificate check), or the path of a CA
    file (PEM) or folder (OpenSSL's hashed layout), relative to the config file's folder: returned absolute. A path
    that does not exist, or a file that holds no certificate OpenSSL can read, is a problem here, not a ``connect``
    failure on every request of the run."""
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    field = f"{where}.tls_verify"
    if not isinstance(value, str) or not value.strip():
        problems.add(field, f"must be true, false or the path of a CA certificate file or folder, got {value!r}")
        return True
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        path = Path(config_dir) / path
    if not path.exists():
        quoted = " (true and false are written without quotes)" if value.strip().lower() in ("true", "false") else ""
        problems.add(field, f"CA file or folder {value!r} not found (relative paths are read from the config file's "
                     f"folder, {config_dir}){quoted}")
        return True
    if path.is_file():
        try:
            ssl.create_default_context(cafile=str(path))
        except ssl.SSLError as exc:
            problems.add(field, f"{value!r} holds no CA certificate OpenSSL can read (PEM): {exc.reason or exc}")
            return True
        except OSError as exc:
            problems.add(field, f"{value!r} cannot be read: {exc.strerror or exc}")
            return True
    return str(path.resolve())


#: Substituted values at least this long are blanked out of every message (a last guard: the messages name
#: variables, not values). Shorter ones would blank out ordinary words and numbers.
HIDDEN_MIN_CHARS = 4


class Problems:
    def __init__(self, path: str):
        self.path = path
        self.items: list[str] = []
        self.hidden: set[str] = set()

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.path}: {where}: {message}")

    def hide(self, values: list[str]) -> None:
        """Values no message may show (those put in by ``${VAR}``)."""
        self.hidden.update(v for v in values if len(v) >= HIDDEN_MIN_CHARS)

    def raise_if_any(self) -> None:
        if self.items:
            text = "invalid vendor config:\n  " + "\n  ".join(self.items)
            for value in sorted(self.hidden, key=len, reverse=True):
                text = text.replace(value, "***")
            raise InputError(text)


def typed(problems: Problems, where: str, raw: JSONObject, key: str, kind: type | tuple, default: object) -> JSONValue:
    value = raw.get(key, default)
    if value is None:
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        # a key ${VAR} is substituted in may hold a secret: its value is never shown, only its type
        got = f"a {type(value).__name__}" if key in dia.SUBSTITUTED_KEYS else repr(value)
        problems.add(f"{where}.{key}", f"must be {getattr(kind, '__name__', kind)}, got {got}")
        return default
    return value


def printable_name(text: str) -> str:
    """A name as a message shows it: control characters escaped (``\\x1b``), so the message cannot run them."""
    if text.isprintable():  # the usual case, without importing the scoring package
        return text
    from avv_scoring import terminal_text

    return terminal_text(text)


def control_problem(text: str) -> str | None:
    """What is wrong with a name holding control characters (:func:`avv_scoring.report.escape.is_control`) or a
    lone surrogate (:func:`surrogate_problem`), else None."""
    if text.isprintable():
        return None
    lone = surrogate_problem(text)
    if lone:
        return lone
    from avv_scoring import control_characters

    found = control_characters(text)
    return (f"holds control characters ({', '.join(found)}); names are printed in terminals, logs and reports"
            if found else None)


def surrogate_problem(text: str) -> str | None:
    """What is wrong with a text holding a lone surrogate (YAML's and JSON's ``\\ud800`` escapes make one), else
    None: it is no character, so it cannot be encoded as UTF-8 — not in records.csv, a log line, a report, a
    Locust class name on the web UI, nor a request."""
    if text.isascii():
        return None
    lone = list(dict.fromkeys(f"\\u{ord(c):04x}" for c in text if "\ud800" <= c <= "\udfff"))
    return (f"holds a lone surrogate ({', '.join(lone)}), which is no character: it cannot be written as UTF-8"
            if lone else None)
