"""Work-item identity: one :class:`ItemKey` used by the ledger, the records, resume, stress, scoring,
tests and benchmarks, and the ``X-AVV-Item`` tag that carries it on the wire.

Pure: no Locust, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import quote, unquote

from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.measures import is_missing
from avv_core.samples import Sample

ITEM_HEADER = "X-AVV-Item"
ATTEMPT_HEADER = "X-AVV-Attempt"


class VendorId(NamedTuple):
    """A vendor of a model: what one Locust User class replays against."""

    model: str
    vendor: str

    def __str__(self) -> str:
        return f"{self.model}/{self.vendor}"


class ItemKey(NamedTuple):
    """Identity of a work item: (model, vendor, sample, repeat). Every item is recorded once per run."""

    model: str
    vendor: str
    sample_id: str
    repeat: int

    @classmethod
    def from_record(cls, row: JSONMapping) -> ItemKey:
        """The key of a record row (a dict or a typed CSV row)."""
        return cls(str(row["model"]), str(row["vendor"]), str(row["sample_id"]), int(row["repeat"]))

    @classmethod
    def of(cls, vendor: VendorId, sample_id: str, repeat: int) -> ItemKey:
        return cls(vendor.model, vendor.vendor, str(sample_id), int(repeat))

    @property
    def vendor_id(self) -> VendorId:
        return VendorId(self.model, self.vendor)

    def tag(self, run_id: str, attempt: int, step: int | None = None) -> str:
        """``run/model/vendor/sample/repeat/attempt`` (an agent step: ``…/attempt/step``), each part
        percent-encoded (RFC 3986, nothing kept but unreserved characters), so the tag is plain ASCII — a valid
        HTTP header value — whatever the names are, and ``/`` inside a name cannot be confused with the separator."""
        parts: tuple[str, ...] = (run_id, self.model, self.vendor, self.sample_id, str(self.repeat), str(attempt))
        if step is not None:
            parts += (str(step),)
        return "/".join(quote(part, safe="") for part in parts)

    @staticmethod
    def parse_tag(tag: str) -> tuple[str, ItemKey, int]:
        """``(run_id, key, attempt)`` from a tag made by :meth:`tag`. Raises ValueError otherwise."""
        parts = tag.split("/")
        if len(parts) not in (6, 7):
            raise ValueError(f"not an avv item tag: {tag!r}")
        run_id, model, vendor, sample_id, repeat, attempt = (unquote(p) for p in parts[:6])
        if len(parts) == 7:
            int(unquote(parts[6]))  # the agent step: an integer too
        return run_id, ItemKey(model, vendor, sample_id, int(repeat)), int(attempt)

    @staticmethod
    def tag_step(tag: str) -> int | None:
        """The agent step of a tag made by :meth:`tag` (None: a single-request item)."""
        parts = tag.split("/")
        return int(unquote(parts[6])) if len(parts) == 7 else None


def truth_tag(record: JSONMapping) -> str:
    """The tag the final attempt of a record was sent with (the simulator's ``client_tag``)."""
    raw_step: JSONValue = record.get("step")
    step = None if is_missing(raw_step) else int(raw_step)  # NaN / <NA> from a frame: a single-request item
    return ItemKey.from_record(record).tag(str(record["run_id"]), int(record["attempts"]), step)


@dataclass(frozen=True)
class WorkItem:
    """What a user runs: the key, the sample to send, and (stress mode) the level it starts in."""

    key: ItemKey
    sample: Sample
    level: int | None = None
    extra: JSONObject = field(default_factory=dict)

    def to_message(self) -> JSONObject:
        """A msgpack-able dict for Locust's custom messages (master → worker)."""
        return {
            "key": list(self.key), "sample_id": self.sample.sample_id, "line": self.sample.line,
            "body": self.sample.body, "metadata": self.sample.metadata, "level": self.level, "extra": self.extra,
        }

    @classmethod
    def from_message(cls, data: JSONMapping) -> WorkItem:
        model, vendor, sample_id, repeat = data["key"]
        sample = Sample(sample_id=str(data["sample_id"]), line=int(data.get("line") or 0), body=data["body"],
                        metadata=dict(data.get("metadata") or {}))
        return cls(ItemKey(model, vendor, str(sample_id), int(repeat)), sample, data.get("level"),
                   dict(data.get("extra") or {}))
