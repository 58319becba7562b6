"""Built-in kernel workloads, a plugin module like any outside one (listed in
``perfsuite.plugins.DEFAULT_PLUGINS``): GEMM, memory bandwidth, the device's own ceilings,
attention, a fused memory-bound chain and launch overhead. The host's ``perfsuite roofline``
places their results on the device's roofline.

One file per workload; none imports torch at module level, so ``perfsuite list`` stays fast.
"""

from __future__ import annotations

from perfsuite import hookimpl
from perfsuite.workloads.kernels.attention import Attention
from perfsuite.workloads.kernels.ceilings import Ceilings
from perfsuite.workloads.kernels.fusion import Fusion
from perfsuite.workloads.kernels.gemm import Gemm
from perfsuite.workloads.kernels.launch import Launch
from perfsuite.workloads.kernels.memory import Memory

WORKLOADS = (Ceilings, Gemm, Memory, Attention, Fusion, Launch)


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)
