"""avv-locust harness: configuration, samples, the streaming wire client, records and the Locust glue.

Importing this package does not import Locust (the scoring side reads the record schema from here);
the Locust integration lives in :mod:`avv_harness.locust.plugin`.
"""

from avv_core.errors import InputError
from avv_core.record_file import RecordWriter, read_records
from avv_core.records import COLUMN_NAMES, ERROR_KINDS

__all__ = ["COLUMN_NAMES", "ERROR_KINDS", "InputError", "RecordWriter", "read_records"]
