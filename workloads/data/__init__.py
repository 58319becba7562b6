"""Built-in data-pipeline workloads, a plugin module like any outside one (listed in
``perfsuite.plugins.DEFAULT_PLUGINS``): does the input pipeline keep the device fed?

- ``data.image_pipeline``: JPEG decode + augment into device batches, per pipeline;
- ``data.host_to_device``: pinned vs pageable copies, sizes, streams, % of the h2d ceiling;
- ``data.storage_read``: .npy shards into GPU memory: numpy, DALI cpu/gpu (GDS), KvikIO;
- ``data.loader_stall``: share of a training-shaped step spent waiting for data.

The data sets (``perfsuite.inputs.datasets``) and image pipelines (``perfsuite.inputs.images``) live in
the host's public API, so training workloads use them without importing this family.
One file per workload; none imports torch at module level.
"""

from __future__ import annotations

from perfsuite import hookimpl
from perfsuite.workloads.data.host_to_device import HostToDevice
from perfsuite.workloads.data.image_pipeline import ImagePipeline
from perfsuite.workloads.data.loader_stall import LoaderStall
from perfsuite.workloads.data.storage_read import StorageRead

WORKLOADS = (ImagePipeline, HostToDevice, StorageRead, LoaderStall)


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)
