"""The conformance suite's probes (scoring layer, below :mod:`.load`, which reads them from a run's samples; pure but
for reading the shipped requests): each probe is one request, a sample line with its ``_probe`` metadata, so a
conformance run sends it through the same wire client, records, ledger, budget and resume as any sample.

Probes come from two sources:

- the **fixed requests** shipped with the project (``avv_scoring/data/conformance_requests.jsonl``,
  :func:`fixed_requests`): short requests whose answer under ``tool_choice: auto`` is obvious (a weather question
  calls ``get_weather``, a greeting calls nothing, two cities call twice), so a parameter that is ignored shows;
- the run's own **samples with tools** (the first :data:`SOURCE_SAMPLES` single-request samples that have tools): the
  same checks on the buyer's requests.

Each check (:mod:`.conformance.checks`) says which probes it needs from the bases (:mod:`.conformance.suite` builds
them). A probe's body is the base request with the check's parameters and ``temperature: 0``; its metadata keeps the
base's gold labels (the simulator follows them, and they say what the model does under ``auto``) and ``_probe``:
``{"check", "base"}`` plus ``"variant"`` where a check sends a base twice (``streamed`` / ``whole`` for stream
parity, the parameter for the out-of-range probes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources

from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.samples import STREAM_KEY, Sample

#: Metadata key of a probe line: ``{"check", "base", "variant"?}``.
PROBE_KEY = "_probe"
#: The shipped fixed requests (one JSON object per line: ``name``, ``why``, the request, gold labels).
FIXED_REQUESTS = "conformance_requests.jsonl"
#: Samples of the run (with tools, single requests) the checks are also run on, in file order.
SOURCE_SAMPLES = 3
#: Gold-label keys copied from a base to its probes.
GOLD_KEYS = ("expected_tool_call", "expected_calls", "tool_names")
#: Keys of a fixed request line that describe it and are not sent.
DESCRIBING_KEYS = ("name", "why")


@dataclass(frozen=True)
class Base:
    """A request the probes are built from: a fixed request or a sample of the run."""

    name: str  # the fixed request's name, or ``sample:<sample id>``
    body: JSONMapping  # the request (no metadata)
    gold: JSONMapping = field(default_factory=dict)  # its gold labels (copied to every probe)
    fixed: bool = False  # a fixed request (else a sample of the run)

    @property
    def tools(self) -> list[JSONValue]:
        return list(self.body.get("tools") or [])

    def tool_names(self) -> list[str]:
        names = []
        for tool in self.tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names


@dataclass(frozen=True)
class Probe:
    """One probe request: its sample id, the check it is for, its base, and the request body sent."""

    sample_id: str
    check: str
    base: str
    body: JSONMapping
    variant: str = ""
    gold: JSONMapping = field(default_factory=dict)
    streamed: bool = True

    def line(self) -> JSONObject:
        """The probe as a sample-file line."""
        meta: JSONObject = {"check": self.check, "base": self.base}
        if self.variant:
            meta["variant"] = self.variant
        out: JSONObject = {"data_index": self.sample_id, **self.body, **self.gold, PROBE_KEY: meta}
        if not self.streamed:
            out[STREAM_KEY] = False
        return out

    @classmethod
    def of(cls, sample: Sample) -> Probe | None:
        """The probe a sample line is (None: it is no probe)."""
        meta = sample.metadata.get(PROBE_KEY)
        if not isinstance(meta, Mapping) or not isinstance(meta.get("check"), str):
            return None
        return cls(sample.sample_id, meta["check"], str(meta.get("base") or ""), sample.body,
                   str(meta.get("variant") or ""), {k: sample.metadata[k] for k in GOLD_KEYS if k in sample.metadata},
                   sample.streamed)


def fixed_requests() -> list[Base]:
    """The shipped fixed requests, in file order."""
    text = resources.files("avv_scoring").joinpath("data").joinpath(FIXED_REQUESTS).read_text(encoding="utf-8")
    out: list[Base] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        gold = {k: obj.pop(k) for k in GOLD_KEYS if k in obj}
        name = str(obj.pop("name"))
        for key in DESCRIBING_KEYS:
            obj.pop(key, None)
        out.append(Base(name, obj, gold, fixed=True))
    return out


def sample_bases(samples: Iterable[Sample], limit: int = SOURCE_SAMPLES) -> list[Base]:
    """The first ``limit`` samples with tools that are single requests, as bases."""
    out: list[Base] = []
    for sample in samples:
        if len(out) >= limit:
            break
        if sample.tools and sample.agent is None:
            gold = {k: sample.metadata[k] for k in GOLD_KEYS if k in sample.metadata}
            out.append(Base(f"sample:{sample.sample_id}", sample.body, gold))
    return out


def probe(check: str, base: Base, changes: JSONMapping, variant: str = "", streamed: bool = True,
          temperature: float | None = 0.0) -> Probe:
    """A probe of ``check`` on ``base``: its body with ``changes`` (``None`` removes a key) and ``temperature``."""
    body = {k: v for k, v in base.body.items() if k not in ("tool_choice", "parallel_tool_calls", "stream",
                                                            "stream_options", "n")}
    if temperature is not None:
        body["temperature"] = temperature
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    sample_id = f"{check}:{base.name}" + (f":{variant}" if variant else "")
    return Probe(sample_id, check, base.name, body, variant, dict(base.gold), streamed)


def probes_of(samples: Iterable[Sample]) -> dict[str, Probe]:
    """Sample id → its probe, for the samples that are probes."""
    return {p.sample_id: p for s in samples if (p := Probe.of(s)) is not None}

