"""avv-locust harness: configuration, the streaming wire client, dialects, the run controller and the Locust glue.

Importing this package does not import Locust (the Locust integration lives in :mod:`avv_harness.locust.plugin`)
nor an HTTP client: :func:`export_run` is imported when first used. The record schema and records.csv live in
:mod:`avv_core`; the names below are kept here for code written against earlier versions.

Folders, lowest first (:data:`LAYERS`; a module imports only from its own folder and the ones before it, and
``bench/import_graph.py`` fails on an upward import): ``dialects`` (how a vendor's requests are shaped: adapters,
transforms, overrides, chat templates, the config's dialect keys) → ``inputs`` (the vendor config, samples files,
secrets) → ``wire`` (one request: the wire formats, the streaming clients, an item's attempts) → ``run`` (a run:
controller, lifecycle, budget, ledger, stress policy, and the interfaces the Locust layer implements) → ``locust``
(the Locust glue: plugin, roles, web UI, Prometheus) → the entry points at the top (``exports``, ``samples_cli``,
``docs``, ``locustfile``, ``cli``).
"""

from typing import TYPE_CHECKING

from avv_core.errors import InputError
from avv_core.record_file import RecordWriter, read_records
from avv_core.records import COLUMN_NAMES, ERROR_KINDS

#: The folders and top-level modules of this package, lowest first (read by bench/import_graph.py).
LAYERS = ("dialects", "inputs", "wire", "run", "locust", "exports", "samples_cli", "docs", "locustfile", "cli")

if TYPE_CHECKING:  # at run time loaded lazily by __getattr__ (below)
    from avv_harness.exports import export_run

__all__ = ["COLUMN_NAMES", "ERROR_KINDS", "InputError", "RecordWriter", "export_run", "read_records"]


def __getattr__(name: str) -> object:
    if name == "export_run":  # K2VV / MiniMax files: needs the wire client's request builder (requests)
        from avv_harness.exports import export_run

        return export_run
    raise AttributeError(f"module 'avv_harness' has no attribute {name!r}")
