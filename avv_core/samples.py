"""Sample files: JSONL, one OpenAI chat-completions body per line.

Sample id = ``data_index`` when present, else the 1-based line number. Keys that are not request fields
(``data_index``, ``expected_tool_call``, ``expected_calls``, ``tool_names``, ``check_type``,
``scenario_check``, ``expected_language`` and any key starting with ``_``) are removed before sending and kept
as metadata. The body is kept as written: K2VV's custom ``_input`` role becomes ``system`` only when the
request is built, by the ``input_role_to_system`` transform of the default (``generic``) adapter
(:mod:`avv_harness.dialects.transforms`).

Gold labels (optional, never sent; :class:`Gold`):

- ``expected_tool_call``: true / false — whether the turn should be answered with a tool call (K2VV, MiniMax);
- ``expected_calls``: ``[{"name": …, "arguments": {…}}, …]``, the calls the turn should make (any order). An
  argument's value is its acceptable values: a list = alternatives (BFCL's possible-answer convention: wrap a
  list-valued argument, ``[[3, 5]]``), anything else = the one acceptable value; ``""`` among the
  alternatives means the argument may be left out. Implies ``expected_tool_call: true``;
- ``tool_names``: ``{wire name: original name}`` when the tools were renamed for the wire (BFCL's dotted
  names); ``expected_calls`` use the original names and grading maps the vendor's calls back.

``check_type`` (a string or a list of strings, as MiniMax writes it) and ``expected_language`` are validated
here: a sample's language check (:attr:`Sample.language_check`, see :mod:`.language`) must be computable
before any request is sent.

``_stream: false`` (metadata, never sent) sends the line without streaming: its answer is one JSON body (the
conformance suite's stream-parity probes; :attr:`Sample.streamed`).

``agent`` (an object; never sent) makes the line an agent task followed over several steps, validated here with
file and line (:mod:`avv_core.agent_task`; the loop is :mod:`avv_harness.wire.agent_loop`). Its gold for the end travels
with the other gold labels (:attr:`Gold.agent`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from functools import cached_property

from avv_core.agent_task import AGENT_KEY, AgentTask, agent_of, parse_agent
from avv_core.canonical import canonical_sha256
from avv_core.errors import InputError
from avv_core.json_input import parse_json
from avv_core.json_types import JSONObject
from avv_core.language import sample_language_check

#: Metadata key: ``false`` sends the sample without streaming (:attr:`Sample.streamed`).
STREAM_KEY = "_stream"
METADATA_KEYS = frozenset({"data_index", "expected_tool_call", "expected_calls", "tool_names", "check_type",
                           "scenario_check", "expected_language", AGENT_KEY})


@dataclass(frozen=True)
class Gold:
    """A sample's gold labels (see the module docstring); every field optional."""

    expected_tool_call: bool | None = None  # should the turn call a tool at all
    expected_calls: tuple[JSONObject, ...] | None = None  # {name, arguments} with possible answers
    tool_names: dict[str, str] = field(default_factory=dict)  # wire name → original name
    agent: AgentTask | None = None  # an agent task: its gold end (final_calls, final_text_pattern) and injection

    @property
    def labelled(self) -> bool:
        return self.expected_tool_call is not None

    @property
    def known(self) -> bool:
        """Carries anything scoring reads: a trigger label or an agent task."""
        return self.labelled or self.agent is not None

    def original_name(self, wire: str) -> str:
        return self.tool_names.get(wire, wire)

    def wire_name(self, original: str) -> str:
        return next((w for w, o in self.tool_names.items() if o == original), original)


@dataclass(frozen=True)
class Sample:
    sample_id: str
    line: int
    body: JSONObject
    metadata: JSONObject = field(default_factory=dict)

    @property
    def tools(self) -> list[JSONObject]:
        return list(self.body.get("tools") or [])

    @property
    def streamed(self) -> bool:
        """Sent with ``stream: true`` (every sample but one whose metadata says ``_stream: false``)."""
        return self.metadata.get(STREAM_KEY) is not False

    @cached_property
    def gold(self) -> Gold:
        """The gold labels of the metadata (validated when the line was parsed)."""
        return gold_of(self.metadata, self.agent)

    @cached_property
    def agent(self) -> AgentTask | None:
        """The sample's agent task (None: a single request)."""
        return agent_of(self.metadata, self.tools)

    @cached_property
    def request_hash(self) -> str:
        """sha256 of the request body as canonical JSON (sorted keys, no metadata): equal bodies, equal
        hashes, whatever their key order or line in the file."""
        return body_hash(self.body)

    @cached_property
    def language_check(self) -> str | None:
        """The sample's language-check spec (:func:`avv_core.language.sample_language_check`), or None."""
        return sample_language_check(self.metadata, self.body)


def body_hash(body: JSONObject) -> str:
    return canonical_sha256(body)


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


def gold_of(metadata: JSONObject, agent: AgentTask | None = None) -> Gold:
    """:class:`Gold` from a sample's metadata (assumed valid: see :func:`check_gold`) and its agent task."""
    calls = metadata.get("expected_calls")
    expected = metadata.get("expected_tool_call")
    if expected is None and calls:
        expected = True
    return Gold(expected, tuple(calls) if calls else None, dict(metadata.get("tool_names") or {}), agent)


def check_gold(obj: JSONObject, where: str) -> None:
    """Raise InputError (``where`` = "file:line") unless the gold keys of a sample line are well-formed."""
    expected = obj.get("expected_tool_call")
    if expected is not None and not isinstance(expected, bool):
        raise InputError(f"{where}: field 'expected_tool_call' must be true or false, got {expected!r}")
    names = obj.get("tool_names")
    if names is not None and (not isinstance(names, dict)
                              or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items())):
        raise InputError(f"{where}: field 'tool_names' must be an object of wire name → original name (strings)")
    if "expected_calls" not in obj:
        return
    calls = obj["expected_calls"]
    if not isinstance(calls, list) or not calls:
        raise InputError(f"{where}: field 'expected_calls' must be a non-empty list of {{name, arguments}} "
                         "(for a turn that should not call a tool, set expected_tool_call: false)")
    if expected is False:
        raise InputError(f"{where}: 'expected_calls' is given but 'expected_tool_call' is false")
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or set(call) - {"name", "arguments"}:
            raise InputError(f"{where}: expected_calls[{i}] must be an object with 'name' and 'arguments'")
        if not isinstance(call.get("name"), str) or not call["name"]:
            raise InputError(f"{where}: expected_calls[{i}].name must be a non-empty string")
        if not isinstance(call.get("arguments", {}), dict):
            raise InputError(f"{where}: expected_calls[{i}].arguments must be an object "
                             "(argument → acceptable value or list of acceptable values)")


def parse_sample_line(text: str, line_no: int, path: str) -> Sample | None:
    """Parse one JSONL line; None for a blank line. Raises InputError naming file and line (also for a line
    nested deeper than :data:`avv_core.json_input.MAX_JSON_DEPTH`)."""
    if not text.strip():
        return None
    obj = parse_json(text, f"{path}:{line_no}")
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
    check_gold(obj, f"{path}:{line_no}")
    if AGENT_KEY in obj:
        parse_agent(obj[AGENT_KEY], tools or [], f"{path}:{line_no}")
    metadata = {k: v for k, v in obj.items() if _is_metadata_key(k)}
    body = {k: v for k, v in obj.items() if not _is_metadata_key(k)}
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
