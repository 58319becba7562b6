"""The measuring process: ``python -m suite.worker SPEC.json``.

Started by the runner in its own process group (or by torchrun / srun as one rank), it
imports the workload, applies the controls, runs unmet / setup / execute / teardown and
writes a partial result (metrics, checks, details, environment, GPU state) that the
runner turns into a record. Rank 0 writes; a failing rank leaves an error file naming it.
"""
from __future__ import annotations

import datetime as dt
import json
import sys
import traceback
from pathlib import Path

from suite.files import write_atomic


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def run(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    from suite.controls import Controls, apply_seeds, prepare_process_env

    controls = Controls.from_dict(spec["controls"])
    prepare_process_env(controls)
    from suite import distributed, nvml, params as params_mod
    from suite.context import RunContext
    from suite.environment import collect
    from suite.plugins import get_host

    rank, world, local_rank = distributed.rank_from_env()
    result: dict = {"started_at": now(), "status": "success", "error": None, "metrics": [], "checks": [],
                    "details": {}, "environment": None, "gpu_state": None, "backend": None}
    result_path = Path(spec["result_path"])
    ctx = None
    workload = None
    try:
        entry = get_host().get(spec["workload"])
        params = params_mod.from_dict(entry.cls, spec["params"])
        if controls.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise _Skip("torch sees no CUDA device (torch.cuda.is_available() is False)")
            torch.cuda.set_device(local_rank % torch.cuda.device_count())
        result["backend"] = distributed.init(controls.device, controls.timeout_s)
        apply_seeds(controls.seed, controls.deterministic)
        ctx = RunContext(params=params, controls=controls, quick=spec["quick"], rank=rank, world_size=world,
                         local_rank=local_rank, dist_backend=result["backend"],
                         artifact_root=spec.get("artifact_dir"))
        if rank == 0:
            result["environment"] = collect(controls.device, deep=True)
        gpu = ctx.nvml_index()
        before = nvml.observe([gpu]) if gpu is not None else []
        workload = entry.cls(params)
        reason = workload.unmet(ctx)
        if reason:
            raise _Skip(reason)
        try:
            workload.setup(ctx)
            workload.execute(ctx)
        finally:
            workload.teardown(ctx)
        if ctx.aborted is not None:
            result["status"], result["error"] = "aborted", ctx.aborted
        if gpu is not None:
            result["gpu_state"] = {"before": before, "after": nvml.observe([gpu])}
        merged = distributed.gather_metrics(ctx.metrics, world)
        result["metrics"] = merged if merged is not None else []
    except _Skip as skip:
        result["status"], result["error"] = "skipped", str(skip)
    except BaseException as exc:  # recorded as the run's failure, with the traceback on stderr
        traceback.print_exc()
        result["status"], result["error"] = "failed", f"{type(exc).__name__}: {exc}".strip()
        if world > 1:
            distributed.write_rank_error(spec_path, rank, result["error"])
    if ctx is not None:
        result["checks"] = [vars(c) for c in ctx.checks]
        result["details"] = ctx.details
    result["finished_at"] = now()
    if rank == 0:
        write_atomic(result_path, json.dumps(result))
    if world > 1 and result["status"] in ("success", "aborted"):
        distributed.shutdown()
    return 0 if result["status"] in ("success", "skipped", "aborted") else 1


class _Skip(Exception):
    """A requirement found unmet in the measuring process (no CUDA, unsupported dtype)."""


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m suite.worker SPEC.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
