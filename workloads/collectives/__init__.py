"""Built-in collective-communication workloads (a plugin like any other): the seven
nccl-tests collectives over torch.distributed (NCCL on GPUs, gloo on CPUs) and the copy
bandwidths their bus bandwidth is compared with. Importing this is cheap: no torch."""

from __future__ import annotations

from perfsuite import hookimpl
from perfsuite.workloads.collectives.collective import COLLECTIVES
from perfsuite.workloads.collectives.copy_bandwidth import CopyBandwidth


@hookimpl
def perfsuite_register_workloads(register):
    for cls in COLLECTIVES:
        register(cls)
    register(CopyBandwidth)
