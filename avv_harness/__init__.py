"""avv-locust harness: configuration, the streaming wire client, dialects, the run controller and the Locust glue.

Importing this package does not import Locust (the Locust integration lives in :mod:`avv_harness.locust.plugin`)
nor an HTTP client: :func:`export_run` is imported when first used. The record schema and records.csv live in
:mod:`avv_core`; the names below are kept here for code written against earlier versions.
"""

from typing import Any

from avv_core.errors import InputError
from avv_core.record_file import RecordWriter, read_records
from avv_core.records import COLUMN_NAMES, ERROR_KINDS

__all__ = ["COLUMN_NAMES", "ERROR_KINDS", "InputError", "RecordWriter", "export_run", "read_records"]


def __getattr__(name: str) -> Any:
    if name == "export_run":  # K2VV / MiniMax files: needs the wire client's request builder (requests)
        from avv_harness.exports import export_run

        return export_run
    raise AttributeError(f"module 'avv_harness' has no attribute {name!r}")
