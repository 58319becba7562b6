"""How the measuring process is started: one local process, ranks through torchrun
(``torch.distributed.run``), or a rank of a SLURM job step (``srun perfsuite run ...``)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path


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


NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def build(spec_path: str, opts: LaunchOptions, device: str) -> Launch:
    """The command that runs ``python -m suite.worker SPEC`` as the options ask."""
    env = dict(os.environ)
    if device == "cuda":
        env.update(NVLS_OFF)  # NVLink multicast stays off on shared hosts
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


def slurm_world() -> int:
    """World size of the SLURM job step this process is a task of (1 outside SLURM)."""
    return int(os.environ.get("SLURM_NTASKS", "1"))


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s descendants (collected first, so none is re-parented away), then it."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(procs, timeout=10)


def read_rank_errors(spec_path: Path) -> list[str]:
    """'rank N: error' for each rank that left an error file beside the spec."""
    out = []
    for f in sorted(Path(spec_path).parent.glob("rank-*.error.json")):
        data = json.loads(f.read_text())
        out.append(f"rank {data['rank']}: {data['error']}")
    return out
