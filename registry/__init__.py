"""The results registry: run records stored in SQLite or PostgreSQL through SQLAlchemy 2.

    from perfsuite.registry import open_registry
    with open_registry() as reg:          # $PERFSUITE_DB or the per-user SQLite file
        reg.store(record)                 # "stored" or "duplicate"
        reg.results(workload="kernels.gemm")
        reg.store_all(records)            # one transaction: all or none

    check_url(url)                        # before a long run: RegistryError (one line) if it
                                          # cannot be opened; creates nothing
    load_record_file(path); check_record(record)   # what ``perfsuite import`` checks per file

Nothing here imports the runner, the CLI or any workload: the registry only knows records.
"""

from __future__ import annotations

from .db import Registry, check_url, default_url, open_registry, records_dir
from .errors import RecordInvalid, RegistryError
from .records import (
    MAX_RECORD_BYTES,
    canonical_json,
    check_record,
    load_record_file,
    record_sha256,
    validate_record,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "RecordInvalid",
    "Registry",
    "RegistryError",
    "canonical_json",
    "check_record",
    "check_url",
    "default_url",
    "load_record_file",
    "open_registry",
    "record_sha256",
    "records_dir",
    "validate_record",
]
