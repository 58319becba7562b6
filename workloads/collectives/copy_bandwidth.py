"""``collectives.copy_bandwidth``: the copy ceilings the collectives' busbw is read against.

- ``p2p``: ``dst.copy_(src)`` from GPU ``src_device`` to GPU ``dst_device`` in one process
  (torch issues a peer copy: over NVLink or PCIe when the GPUs can access each other,
  staged through the host when they cannot; ``details["p2p_access"]`` says which);
- ``h2d.pinned``: pinned host memory to the GPU, ``non_blocking``.

Bytes counted are the bytes transferred once over the link (as nccl-tests counts a
send/recv), not read + written. The ``p2p`` label is the ceiling resource the
collectives' ``busbw_gbps`` metrics name; busbw of an all_reduce over NVLink can exceed one
direction's copy bandwidth, since a ring sends and receives at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfsuite import Case, Requirements, Workload, copy_case, param

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

MIB = 1024**2


@dataclass(frozen=True)
class CopyParams:
    size_bytes: int = param(256 * MIB, "bytes per copy (K/M/G suffixes)")
    src_device: int = param(0, "source GPU of the peer copy")
    dst_device: int = param(1, "destination GPU of the peer copy")

    def __post_init__(self) -> None:
        if self.size_bytes < 4:
            raise ValueError("size_bytes must hold at least one float32")
        if self.src_device == self.dst_device:
            raise ValueError("src_device and dst_device must differ")


class CopyBandwidth(Workload):
    name = "collectives.copy_bandwidth"
    category = "collectives"
    version = 1
    description = "peer GPU-to-GPU copy (p2p) and pinned host-to-device copy bandwidth: the busbw ceiling"
    Params = CopyParams
    quick = {"size_bytes": 32 * MIB}
    requirements = Requirements(devices=("cuda",), max_world_size=1, packages=("torch",))  # one process, both GPUs
    primary_metric = "gbps"

    def unmet(self, ctx: "RunContext") -> str | None:
        import torch

        n = torch.cuda.device_count()
        p = self.params
        if max(p.src_device, p.dst_device) >= n:
            needed = max(p.src_device, p.dst_device) + 1
            return f"the peer copy GPU{p.src_device} -> GPU{p.dst_device} needs {needed} GPUs; {n} visible"
        return None

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        n = p.size_bytes // 4
        src_dev, dst_dev = torch.device("cuda", p.src_device), torch.device("cuda", p.dst_device)
        # Timed on the source GPU's stream: torch runs a cross-device copy there, fenced
        # with the destination's stream both ways, so events on it bracket the copy.
        torch.cuda.set_device(src_dev)
        g = torch.Generator(device=src_dev).manual_seed(ctx.controls.seed)
        src = torch.rand(n, generator=g, device=src_dev)
        dst = torch.empty(n, device=dst_dev)
        host = torch.rand(n, generator=torch.Generator().manual_seed(ctx.controls.seed)).pin_memory()
        dev_dst = torch.empty(n, device=src_dev)
        self._cases = [
            copy_case(dst, src, label="p2p", work_bytes=n * 4.0, roofline=None),
            copy_case(
                dev_dst,
                host,
                label="h2d.pinned",
                work_bytes=n * 4.0,
                roofline=None,
                fn=lambda: dev_dst.copy_(host, non_blocking=True),
            ),
        ]
        ctx.details.update(
            {
                "size_bytes": n * 4,
                "p2p_pair": [p.src_device, p.dst_device],
                "p2p_access": {
                    f"{p.src_device}->{p.dst_device}": torch.cuda.can_device_access_peer(p.src_device, p.dst_device),
                    f"{p.dst_device}->{p.src_device}": torch.cuda.can_device_access_peer(p.dst_device, p.src_device),
                },
                "devices": [torch.cuda.get_device_name(i) for i in (p.src_device, p.dst_device)],
                "bytes_counted": "bytes transferred once (not read + written)",
            }
        )

    def cases(self, ctx: "RunContext") -> list[Case]:
        return self._cases

    def teardown(self, ctx: "RunContext") -> None:
        self._cases = []
