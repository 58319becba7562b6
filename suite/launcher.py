"""How the measuring process is started: one local process, ranks through torchrun
(``torch.distributed.run``), or a rank of a SLURM job step (``srun perfsuite run ...``)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchOptions:
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    launcher: str  # local | torchrun | slurm
    world_size: int
    nnodes: int
    nproc_per_node: int
    rdzv_endpoint: str | None
    records: bool  # whether this process stores the record (rank 0's side only)


def build(spec_path: str, opts: LaunchOptions) -> Launch:
    """The command that runs ``python -m suite.worker SPEC`` as the options ask."""
    env = dict(os.environ)
    worker = ["-m", "suite.worker", spec_path]
    world = opts.nproc_per_node * opts.nnodes
    if world == 1:
        return Launch([sys.executable, *worker], env, "local", 1, 1, 1, None, True)
    endpoint = opts.rdzv_endpoint or "127.0.0.1:0"
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={opts.nproc_per_node}",
            f"--nnodes={opts.nnodes}", f"--node-rank={opts.node_rank}"]
    if opts.nnodes == 1 and opts.rdzv_endpoint is None:
        argv.append("--standalone")
    else:
        argv += ["--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}"]
    return Launch(argv + worker, env, "torchrun", world, opts.nnodes, opts.nproc_per_node,
                  opts.rdzv_endpoint, opts.node_rank == 0)
