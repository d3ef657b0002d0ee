"""What a worker's record message may hold, checked before anything is stored (harness layer, below
:mod:`avv_harness.locust.distribution`): an item key as ``[model, vendor, sample_id, repeat]`` and rows that fit the
record schema and fill :data:`REQUIRED_COLUMNS`. Pure: no Locust, no I/O; a peer's message is never trusted."""

from __future__ import annotations

from avv_core.items import ItemKey
from avv_core.records import STATUS_FAILED, STATUS_SUCCESS, Record, RecordError

#: Columns every row a worker sends must fill.
REQUIRED_COLUMNS = ("run_id", "model", "vendor", "sample_id", "repeat", "status", "request_hash")
MALFORMED = "malformed"


class MalformedRecord(ValueError):
    """An ``avv_record`` the master cannot read; ``key`` is the item it names, when that part was readable."""

    def __init__(self, reason: str, key: ItemKey | None = None):
        super().__init__(reason)
        self.key = key


def parse_key(raw: object) -> ItemKey:
    """An item key sent as ``[model, vendor, sample_id, repeat]``; MalformedRecord otherwise."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 4:
        raise MalformedRecord("the key is not [model, vendor, sample_id, repeat]")
    model, vendor, sample_id, repeat = raw
    if not all(isinstance(x, str) for x in (model, vendor, sample_id)) or type(repeat) is not int:
        raise MalformedRecord("the key's parts have the wrong types")
    return ItemKey(model, vendor, sample_id, repeat)


def parse_record_message(data: object) -> tuple[ItemKey, list[Record]]:
    """The key and rows of an ``avv_record``, each row checked against the record schema and required to fill
    :data:`REQUIRED_COLUMNS`; MalformedRecord (with the key when readable) otherwise."""
    if not isinstance(data, dict):
        raise MalformedRecord(f"the message is a {type(data).__name__}, not a mapping")
    key = parse_key(data.get("key"))
    rows = data.get("records")
    if not isinstance(rows, list) or not rows:
        raise MalformedRecord("no rows", key)
    records: list[Record] = []
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise MalformedRecord(f"row {number} is a {type(row).__name__}, not a mapping", key)
        try:
            record = Record(row)
        except RecordError as exc:
            raise MalformedRecord(f"row {number}: {exc}", key) from None
        missing = [name for name in REQUIRED_COLUMNS if record.get(name) in (None, "")]
        if missing:
            raise MalformedRecord(f"row {number} has no {', '.join(missing)}", key)
        if record["status"] not in (STATUS_SUCCESS, STATUS_FAILED):
            raise MalformedRecord(f"row {number}: status {str(record['status'])[:40]!r}", key)
        records.append(record)
    return key, records
