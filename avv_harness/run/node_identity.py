"""What a worker presents to the master when it connects, and how the master compares it with its own.

Harness layer, pure except that it reads the chat-template files a config names (to compare their content,
not their paths, which differ between machines). No Locust.

A :class:`NodeIdentity` has three parts, each compared on its own so a refusal can say which one differs:

- ``version``: the avv-locust package version, the item-protocol number (:data:`PROTOCOL`) and a digest of
  the record schema (column names and kinds). Another version would build records the master cannot store.
- ``config``: per vendor the settings that decide what is sent and recorded — model id, URL (key-like
  parts redacted), provider, ``extra_body``, non-secret headers, ``include_usage``, ``is_baseline``, timeouts
  and the dialect (endpoint, transforms, tool parser, the chat template's content). Each setting is carried as a
  digest of its value plus the value as the sender shows it (redacted with the sender's own secrets), so the
  master can name what differs without ever seeing a key or a ``${VAR}`` value. API keys and secret header
  values are not compared: two workers may use different keys for the same vendor.
- ``samples``: the sha256 of the sample file the process read, or None. Workers read no sample file (each
  item carries its request body), so they present None; the master checks instead that each record answers
  the body it handed out (the record's ``request_hash``): see :mod:`avv_harness.locust.distribution`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from avv_core.canonical import canonical_sha256
from avv_core.json_types import JSONObject, JSONValue
from avv_core.records import COLUMNS
from avv_core.version import DISTRIBUTION, project_version
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import redact_url

#: The item protocol's number: raise it whenever a message's shape or meaning changes.
PROTOCOL = 4  # 3: avv_items echoes the ask's n; 4: asks carry an id avv_items echoes, avv_lost
PACKAGE = DISTRIBUTION
#: How much of a shown value a refusal message quotes.
SHOWN_CHARS = 120
#: How many differing settings a refusal message lists before "and N more".
LISTED_DIFFERENCES = 6


def digest(value: object) -> str:
    return canonical_sha256(value, default=str)


def records_schema_digest() -> str:
    return digest([[c.name, c.kind] for c in COLUMNS])[:16]


def version_part() -> JSONObject:
    return {PACKAGE: project_version(), "protocol": PROTOCOL, "records": records_schema_digest()}


def _template_digest(path: str | None) -> str | None:
    """The content of a chat template (a file, or a tokenizer folder's template files); None without one."""
    if not path:
        return None
    names = [path] if not os.path.isdir(path) else [
        os.path.join(path, n) for n in ("chat_template.jinja", "tokenizer_config.json")]
    h = hashlib.sha256()
    for name in names:
        try:
            with open(name, "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(b"<unreadable>")
    return h.hexdigest()


def vendor_settings(vendor: Vendor) -> JSONObject:
    """The settings of a vendor that two processes must share (keys and secret header values left out)."""
    d = vendor.dialect
    return {
        "model_id": vendor.model_id, "url": redact_url(vendor.url), "provider": vendor.provider,
        "extra_body": vendor.extra_body,
        "headers": dict(sorted(vendor.redacted()["headers"].items())),  # secret header values as ***
        "include_usage": vendor.include_usage, "is_baseline": vendor.is_baseline, "timeout_s": vendor.timeout_s,
        "max_request_s": vendor.max_request_s, "endpoint": d.endpoint, "transforms": list(d.transforms),
        "tool_parser": d.tool_parser, "chat_template": _template_digest(d.chat_template),
    }


def _shown(value: object, redact: Callable[[object], JSONValue]) -> str:
    """A value as a log line may quote it: redacted by the sender, as JSON (control characters escaped), cut
    to :data:`SHOWN_CHARS`."""
    text = json.dumps(redact(value), sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


@dataclass(frozen=True)
class NodeIdentity:
    """What one process presents (worker) or holds (master); see the module docstring."""

    worker: str  # host:pid, for log lines
    version: JSONObject
    config: str  # digest over every vendor's settings
    vendors: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # "model/vendor" → setting → [digest, shown]
    samples: str | None = None

    @classmethod
    def of(cls, worker: str, vendors: Mapping[str, Vendor], redact: Callable[[object], JSONValue],
           samples_sha256: str | None) -> NodeIdentity:
        """``redact`` is the process's own redactor (``Redactor.value``): it knows this process's secrets."""
        table: dict[str, dict[str, list[str]]] = {}
        for vendor in vendors.values():
            settings = vendor_settings(vendor)
            table[f"{vendor.model}/{vendor.name}"] = {
                name: [digest(value), _shown(value, redact)] for name, value in settings.items()}
        config = digest({name: {k: v[0] for k, v in s.items()} for name, s in table.items()})
        return cls(worker, version_part(), config, table, samples_sha256)

    def to_message(self) -> JSONObject:
        return {"worker": self.worker, "version": self.version, "config": self.config, "vendors": self.vendors,
                "samples": self.samples}

    @classmethod
    def from_message(cls, data: object) -> NodeIdentity:
        """ValueError naming the part that is missing or of the wrong shape."""
        if not isinstance(data, dict):
            raise ValueError(f"an identity must be a mapping, got {type(data).__name__}")
        version, config, vendors = data.get("version"), data.get("config"), data.get("vendors")
        if not isinstance(version, dict) or not all(isinstance(k, str) for k in version):
            raise ValueError("no version")
        if not isinstance(config, str) or not isinstance(vendors, dict):
            raise ValueError("no config")
        for name, settings in vendors.items():
            if not isinstance(name, str) or not isinstance(settings, dict) or not all(
                    isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, str) for x in v)
                    for v in settings.values()):
                raise ValueError(f"vendor {str(name)[:40]!r}: malformed settings")
        samples = data.get("samples")
        if samples is not None and not isinstance(samples, str):
            raise ValueError("samples: not a hash")
        return cls(str(data.get("worker") or "?")[:200], dict(version), config,
                   {n: {k: [v[0], v[1]] for k, v in s.items()} for n, s in vendors.items()}, samples)


def quote_peer(text: object) -> str:
    """A peer's text in a log line: control characters escaped, length bounded."""
    text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def differences(master: NodeIdentity, worker: NodeIdentity) -> list[str]:
    """What differs, one phrase per part (version / config / samples); empty when the worker may work."""
    out: list[str] = []
    if master.version != worker.version:
        keys = sorted(set(master.version) | set(worker.version))
        parts = [f"{quote_peer(k)}: worker {quote_peer(worker.version.get(k, '-'))}, "
                 f"master {quote_peer(master.version.get(k, '-'))}"
                 for k in keys if worker.version.get(k) != master.version.get(k)]
        out.append(f"its version differs ({'; '.join(parts)})")
    if master.config != worker.config:
        out.append(f"its config differs ({_config_differences(master, worker)})")
    if master.samples and worker.samples and master.samples != worker.samples:
        out.append(f"its samples differ (sha256: worker {quote_peer(worker.samples)[:12]}…, "
                   f"master {master.samples[:12]}…)")
    return out


def _config_differences(master: NodeIdentity, worker: NodeIdentity) -> str:
    found: list[str] = []
    for name in sorted(set(master.vendors) | set(worker.vendors)):
        mine, theirs = master.vendors.get(name), worker.vendors.get(name)
        if theirs is None:
            found.append(f"vendor {quote_peer(name)} only on the master")
        elif mine is None:
            found.append(f"vendor {quote_peer(name)} only on the worker")
        else:
            for setting in sorted(set(mine) | set(theirs)):
                a, b = theirs.get(setting, ["", "(none)"]), mine.get(setting, ["", "(none)"])
                if a[0] != b[0]:
                    shown = (f"worker {quote_peer(a[1])}, master {quote_peer(b[1])}" if a[1] != b[1]
                             else "values not shown: they hold secrets")
                    found.append(f"vendor {quote_peer(name)} {quote_peer(setting)}: {shown}")
    if not found:
        return f"digest: worker {quote_peer(worker.config)[:12]}…, master {master.config[:12]}…"
    more = len(found) - LISTED_DIFFERENCES
    return "; ".join(found[:LISTED_DIFFERENCES]) + (f"; and {more} more" if more > 0 else "")
