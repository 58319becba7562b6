"""torch.distributed inside the measuring process: join the group the launcher made,
bring every rank's metrics to rank 0 (aggregated as each metric declares), and say what
the run ran on (backend, NCCL version, the GPU topology ``nvidia-smi topo -m`` prints).

Ranks also leave a small progress file beside the run's spec (``note_progress``), so
that when a run hangs the runner can say which rank stopped where instead of only
"timed out": the rank that is behind the others is the one that hangs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from perfsuite.files import write_atomic
from perfsuite.processes import SPEC_ENV  # set in every rank's environment: the spec file of the run

TOPOLOGY_TIMEOUT_S = 20.0


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables (the launcher sets the same
    ones for SLURM tasks); (0, 1, 0) when alone."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0)))


def local_world_size() -> int:
    """Ranks on this node (torchrun's LOCAL_WORLD_SIZE); the world size when not told."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))


def init(device: str, timeout_s: float) -> str | None:
    """Join the process group (NCCL on GPUs, gloo on CPUs); returns the backend or None.

    ``timeout_s`` bounds every collective: with gloo a rank whose peer died waits in its
    collective until then (torchrun normally tears it down much sooner)."""
    _rank, world, local = rank_from_env()
    if world == 1:
        return None
    import datetime

    import torch
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if device == "cuda":
        # A SLURM task bound to one GPU sees only that one: LOCAL_RANK 3 is device 0 there.
        gpu = local % torch.cuda.device_count()
        torch.cuda.set_device(gpu)
        kwargs["device_id"] = torch.device("cuda", gpu)  # binds the communicator to this GPU
    note_progress("joining the process group")
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    note_progress("joined the process group")
    return backend


def aggregate(values: list[float], how: str) -> float:
    """One figure from every rank's (rank order): their mean, max or min, or rank 0's."""
    if how == "mean":
        return sum(values) / len(values)
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    if how == "rank0":
        return values[0]
    raise ValueError(f"unknown aggregation {how!r} (mean, max, min, rank0)")


def gather_metrics(metrics: list[dict], world: int) -> list[dict] | None:
    """All ranks call this; rank 0 gets the merged metrics (samples of rank 0, per-rank
    values beside, the value aggregated as declared); the other ranks get None.

    Values are paired by (case, name), not by position: a rank may lack a metric another
    has (an energy figure where its GPU's counter did not advance); per_rank then lists
    the ranks that have it, in rank order."""
    if world == 1:
        return metrics
    import torch.distributed as dist

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, [(m["case"], m["name"], m["value"]) for m in metrics])
    if dist.get_rank() != 0:
        return None
    by_rank = [{(c, n): v for c, n, v in theirs} for theirs in gathered]
    merged = []
    for m in metrics:
        key = (m["case"], m["name"])
        values = [float(r[key]) for r in by_rank if key in r]
        merged.append(dict(m, per_rank=values, value=float(aggregate(values, m["aggregate"]))))
    return merged


def shutdown() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# -- what the run ran on ------------------------------------------------------------------
def nccl_version() -> str | None:
    """The NCCL torch uses (``2.27.3``), or None without CUDA."""
    import torch

    if not torch.cuda.is_available() or not hasattr(torch.cuda, "nccl"):
        return None
    v = torch.cuda.nccl.version()
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def topology() -> str | None:
    """``nvidia-smi topo -m`` (which link joins each pair of GPUs: NV18, PIX, SYS ...) where
    the binary exists; None elsewhere. A failing nvidia-smi is reported in the text."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=TOPOLOGY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"nvidia-smi topo -m did not answer within {TOPOLOGY_TIMEOUT_S:g} s"
    if out.returncode != 0:
        return f"nvidia-smi topo -m failed (exit {out.returncode}): {(out.stderr or out.stdout).strip()}"
    return ANSI_ESCAPE.sub("", out.stdout).rstrip()  # nvidia-smi underlines the header


# -- per-rank files beside the run's spec: errors and progress, for naming the rank at fault --
def rank_error_path(spec_path: str | Path, rank: int) -> Path:
    return Path(spec_path).parent / f"rank-{rank}.error.json"


def write_rank_error(spec_path: str | Path, rank: int, error: str) -> None:
    """Leave this rank's failure beside the spec (atomically), for the runner to name it."""
    write_atomic(rank_error_path(spec_path, rank), json.dumps({"rank": rank, "error": error}))


def read_rank_errors(spec_path: str | Path) -> list[str]:
    """'rank N: error' for each rank that left an error file beside the spec, the first
    failure first (by file time): the others often only report that a peer went away."""
    entries = []
    for f in Path(spec_path).parent.glob("rank-*.error.json"):
        data = json.loads(f.read_text())
        entries.append((f.stat().st_mtime, int(data["rank"]), str(data["error"])))
    entries.sort()
    return [f"rank {rank}: {error}" for _, rank, error in entries]


def progress_path(spec_path: str | Path, rank: int) -> Path:
    return Path(spec_path).parent / f"rank-{rank}.progress.json"


def note_progress(phase: str, done: int | None = None, total: int | None = None) -> None:
    """Record where this rank is: ``phase`` says what it is doing ("bf16", "1048576 B
    in-place", "epoch 3", "Server"), ``done`` of ``total`` steps are behind it. Cheap (one small
    file write): call it per case, size, scenario or epoch, not per timed call. The runner shows
    rank 0's notes while the run goes on (with an ETA where ``total`` is given) and every
    rank's after a timeout. Does nothing outside a launched run (no spec in the environment)."""
    spec = os.environ.get(SPEC_ENV)
    rank, _world, _ = rank_from_env()
    if not spec:
        return
    path = progress_path(spec, rank)
    note = {"rank": rank, "phase": phase, "time": time.time(), "done": done, "total": total}
    try:
        write_atomic(path, json.dumps(note))
    except OSError as exc:  # a missing spec folder must not fail the measurement itself
        print(f"[rank {rank}] cannot write progress file {path}: {exc}", flush=True)


def read_progress(spec_path: str | Path, rank: int = 0) -> dict | None:
    """A rank's latest note (``phase``, ``done``, ``total``, ``time``), or None before its first."""
    try:
        return json.loads(progress_path(spec_path, rank).read_text())
    except (OSError, json.JSONDecodeError):
        return None  # not written yet, or caught mid-replace: the next look sees it


def read_rank_progress(spec_path: str | Path, now: float | None = None) -> list[str]:
    """'rank N last at PHASE (S s ago)' for each rank of this node, the stalest first:
    after a timeout the first line names the rank that stopped earliest."""
    now = time.time() if now is None else now
    entries = []
    for f in Path(spec_path).parent.glob("rank-*.progress.json"):
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # a file caught mid-replace: the others still tell the story
        entries.append(data)
    entries.sort(key=lambda d: (d["time"], d["rank"]))
    return [f"rank {d['rank']} last at {d['phase']!r} ({now - d['time']:.1f} s ago)" for d in entries]
