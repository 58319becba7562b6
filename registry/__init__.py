"""The results registry: run records stored in SQLite or PostgreSQL through SQLAlchemy 2.

    from perfsuite.registry import open_registry
    with open_registry() as reg:          # $PERFSUITE_DB or the per-user SQLite file
        reg.store(record)                 # "stored" or "duplicate"
        reg.results(workload="kernels.gemm")
        reg.store_all(records)            # one transaction: all or none

    check_url(url)                        # before a long run: RegistryError (one line) if it
                                          # cannot be opened; creates nothing

The record rules (canonical form, hash, validation, reading a record file, and
``seal_record``, which the engine, ``perfsuite import`` and ``perfsuite submit`` all call) live in
``perfsuite.schemas``. Nothing here imports the runner, the CLI or any workload: the registry
stores and queries records.
"""

from __future__ import annotations

from .db import Registry, check_url, default_url, open_registry, records_dir
from .errors import RecordInvalid, RegistryError

__all__ = [
    "RecordInvalid",
    "Registry",
    "RegistryError",
    "check_url",
    "default_url",
    "open_registry",
    "records_dir",
]
