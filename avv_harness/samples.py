"""Sample files: JSONL, one OpenAI chat-completions body per line.

Sample id = ``data_index`` when present, else the 1-based line number. Keys that are not request fields
(``data_index``, ``expected_tool_call``, ``check_type``, ``scenario_check``, ``expected_language`` and any
key starting with ``_``) are removed before sending and kept as metadata. K2VV's custom ``_input`` message
role is rewritten to ``system`` (as K2VV itself does before sending).

``check_type`` (a string or a list of strings, as MiniMax writes it) and ``expected_language`` are validated
here: a sample's language check (:attr:`Sample.language_check`, see :mod:`.language`) must be computable
before any request is sent.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .errors import InputError
from .language import sample_language_check

METADATA_KEYS = frozenset({"data_index", "expected_tool_call", "check_type", "scenario_check", "expected_language"})


@dataclass(frozen=True)
class Sample:
    sample_id: str
    line: int
    body: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @cached_property
    def request_hash(self) -> str:
        """sha256 of the request body as canonical JSON (sorted keys, no metadata): equal bodies, equal
        hashes, whatever their key order or line in the file."""
        return body_hash(self.body)

    @cached_property
    def language_check(self) -> str | None:
        """The sample's language-check spec (:func:`avv_harness.language.sample_language_check`), or None."""
        return sample_language_check(self.metadata, self.body)


def body_hash(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class SampleSet:
    path: str
    sha256: str
    samples: list[Sample]
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)

    def by_id(self) -> dict[str, Sample]:
        return {s.sample_id: s for s in self.samples}


def _is_metadata_key(key: str) -> bool:
    return key in METADATA_KEYS or key.startswith("_")


def _normalise_messages(messages: list[Any]) -> list[Any]:
    out = []
    for msg in messages:
        if isinstance(msg, dict) and msg.get("role") == "_input":
            msg = {**msg, "role": "system"}
        out.append(msg)
    return out


def parse_sample_line(text: str, line_no: int, path: str) -> Sample | None:
    """Parse one JSONL line; None for a blank line. Raises InputError naming file and line."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{line_no}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}:{line_no}: a sample must be a JSON object, got {type(obj).__name__}")
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{path}:{line_no}: field 'messages' is missing or not a non-empty list")
    tools = obj.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise InputError(f"{path}:{line_no}: field 'tools' must be a list")
    n = obj.get("n")
    if n is not None and n != 1:
        raise InputError(f"{path}:{line_no}: field 'n' is {n!r}: only one choice per request is supported "
                         "(several choices would be merged into one answer); remove it or set it to 1")
    data_index = obj.get("data_index")
    if data_index is not None and (isinstance(data_index, bool) or not isinstance(data_index, (int, str))):
        raise InputError(f"{path}:{line_no}: field 'data_index' must be an integer or a string, "
                         f"got {data_index!r}")
    if isinstance(data_index, str) and (not data_index.strip() or any(c in data_index for c in "\r\n\t")):
        raise InputError(f"{path}:{line_no}: field 'data_index' must be a non-empty string without "
                         f"line breaks or tabs, got {data_index!r}")
    metadata = {k: v for k, v in obj.items() if _is_metadata_key(k)}
    body = {k: v for k, v in obj.items() if not _is_metadata_key(k)}
    body["messages"] = _normalise_messages(messages)
    sample_id = str(obj["data_index"]) if obj.get("data_index") is not None else str(line_no)
    sample = Sample(sample_id=sample_id, line=line_no, body=body, metadata=metadata)
    try:
        sample.language_check  # noqa: B018 - validated (and cached) before any request
    except ValueError as exc:
        raise InputError(f"{path}:{line_no}: {exc}") from None
    return sample


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_samples(path: str | os.PathLike[str], skip_bad_lines: bool = False) -> SampleSet:
    """Load and validate a whole sample file before any request is sent.

    With ``skip_bad_lines`` a malformed line is skipped and listed in ``skipped_lines`` instead of
    raising. Duplicate sample ids are always an error (records could not be told apart).
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read sample file ({exc.strerror})") from None
    samples: list[Sample] = []
    skipped: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for line_no, raw_line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError:
            error = InputError(f"{path}:{line_no}: not valid UTF-8")
            if not skip_bad_lines:
                raise error from None
            skipped.append((line_no, str(error)))
            continue
        try:
            sample = parse_sample_line(text, line_no, path)
        except InputError as exc:
            if not skip_bad_lines:
                raise
            skipped.append((line_no, str(exc)))
            continue
        if sample is None:
            continue
        if sample.sample_id in seen:
            raise InputError(
                f"{path}:{line_no}: duplicate sample id {sample.sample_id!r} (first on line {seen[sample.sample_id]})"
            )
        seen[sample.sample_id] = line_no
        samples.append(sample)
    if not samples:
        raise InputError(f"{path}: no samples found")
    digest = hashlib.sha256(raw).hexdigest()
    return SampleSet(path=path, sha256=digest, samples=samples, skipped_lines=skipped)
