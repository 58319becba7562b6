"""Start one rank of a bench script under torchrun as the suite starts its own measuring
processes: the suite's variables (``perfsuite.engine.launcher.suite_env``: flight recorder and NVLink
multicast off) set before NCCL starts, this rank's GPU selected, an NCCL process group bound
to it. Used by bench/dist_loop.py and the probes in tools/probes/."""

from __future__ import annotations

import os


def init_nccl_rank() -> tuple[int, int]:
    """(rank, world size) after the NCCL process group of this torchrun rank is up."""
    import torch
    import torch.distributed as dist

    from perfsuite.engine.launcher import suite_env

    os.environ.update(suite_env("cuda"))
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_rank(), dist.get_world_size()


def run_rank(main, name: str) -> None:
    """Run a bench script's ``main`` on this rank; on any failure print one line and leave at
    once: NCCL's exit path can wait on ranks still inside a collective."""
    import sys

    try:
        main()
    except BaseException as exc:  # noqa: BLE001 - reported, then the process leaves
        print(f"{name} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(1)
