"""The versioned JSON Schemas (draft 2020-12) of perfsuite's records, shipped as package data."""

from __future__ import annotations

import functools
import json
from importlib import resources

RESULT_SCHEMA_VERSION = "1.0"
# The workload whose records hold a device's measured ceilings (matrix peaks, memory and
# host-device bandwidth): the host's roofline fractions and the registry's lookup both name it.
CEILINGS_WORKLOAD = "kernels.ceilings"


@functools.cache
def load(name: str) -> dict:
    """Load ``<name>.schema.json`` (e.g. ``load("result")``)."""
    return json.loads(resources.files(__name__).joinpath(f"{name}.schema.json").read_text())
