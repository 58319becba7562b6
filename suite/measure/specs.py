"""Vendor datasheet peaks of common data-centre GPUs, shown beside the measured ceilings.

The table lives in :mod:`perfsuite.schemas.datasheets`, its one home: the registry holds
stored figures to it too, and may import nothing of the host but ``perfsuite.schemas``.
"""

from __future__ import annotations

from perfsuite.schemas.datasheets import (
    A100_SXM_80GB,
    B200,
    H100_PCIE,
    H100_SXM,
    H200_SXM,
    RESOURCE_FIELDS,
    SPECS,
    GpuSpec,
    lookup,
    spec_fraction,
)

__all__ = [
    "A100_SXM_80GB",
    "B200",
    "H100_PCIE",
    "H100_SXM",
    "H200_SXM",
    "RESOURCE_FIELDS",
    "SPECS",
    "GpuSpec",
    "lookup",
    "spec_fraction",
]
