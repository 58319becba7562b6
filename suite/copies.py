"""Cases more than one workload family builds, as part of the public API
(``from perfsuite import copy_case``): a device copy is the memory ceiling of ``kernels.ceilings``,
a STREAM kernel of ``kernels.memory`` and the peer-link ceiling of
``collectives.copy_bandwidth``, and all three must time and verify it the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfsuite.case import Case, Check, Work
from perfsuite.checks import equal


def copy_case(
    dst: Any,
    src: Any,
    *,
    label: str,
    work_bytes: float,
    roofline: str | None,
    fn: Callable[[], None] | None = None,
    graph_safe: bool = True,
) -> Case:
    """A copy of ``src`` into ``dst`` (default call: ``dst.copy_(src)``), verified bit-exact
    after poisoning ``dst``. ``dst`` and ``src`` may live on different devices (host-device
    and peer copies): ``work_bytes`` says what counts as moved, 2 x size within one memory
    (read + written), 1 x size across a link."""
    call = fn or (lambda: dst.copy_(src))

    def verify() -> Check:
        if dst.is_cuda or src.is_cuda:
            import torch

            torch.cuda.synchronize()  # no copy still in flight may write dst after the poison
        dst.fill_(float("nan"))
        call()
        return equal(label, dst.to(src.device), src, method="bit equality with the source after NaN poisoning")

    return Case(
        label=label,
        fn=call,
        work=Work(bytes=float(work_bytes)),
        roofline=roofline,
        verify=verify,
        graph_safe=graph_safe,
    )
