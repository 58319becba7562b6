"""The measuring process: ``python -m perfsuite.engine.worker SPEC.json``.

Started by the runner in its own process group (or by torchrun / srun as one rank), it
reads its :class:`~perfsuite.engine.runspec.RunSpec`, joins the process group, fingerprints the
machine, runs the workload through :func:`perfsuite.engine.inprocess.run_workload` and writes a
:class:`~perfsuite.engine.runspec.WorkerResult` that the runner turns into a record. Rank 0 writes;
a failing rank leaves an error file naming it. It dies with the runner (perfsuite.engine.lifeline).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from perfsuite.engine.runspec import RunSpec, WorkerResult, now
from perfsuite.files import write_atomic


def run(spec_path: Path) -> int:
    from perfsuite.engine import lifeline

    lifeline.arm()
    spec = RunSpec.from_json(spec_path.read_text())
    from perfsuite import distributed
    from perfsuite.context import RunContext
    from perfsuite.engine import params as params_mod
    from perfsuite.engine.environment import collect
    from perfsuite.engine.inprocess import Unmet, run_workload
    from perfsuite.measure import nvml
    from perfsuite.plugins import get_host

    controls = spec.controls
    rank, world, local_rank = distributed.rank_from_env()
    result = WorkerResult(status="success", started_at=now(), finished_at="")
    ctx = None
    try:
        entry = get_host().get(spec.workload)
        params = params_mod.from_dict(entry.cls, spec.params)
        if controls.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise Unmet("torch sees no CUDA device (torch.cuda.is_available() is False)")
            torch.cuda.set_device(local_rank % torch.cuda.device_count())
        result.backend = distributed.init(controls.device, controls.timeout_s)
        ctx = RunContext(
            params=params,
            controls=controls,
            quick=spec.quick,
            rank=rank,
            world_size=world,
            local_rank=local_rank,
            dist_backend=result.backend,
            artifact_root=spec.artifact_dir,
        )
        if rank == 0:
            result.environment = collect(controls.device, deep=True)
        gpu = ctx.nvml_index()
        before = nvml.observe([gpu]) if gpu is not None else []
        run_workload(entry.cls, params, controls, ctx=ctx)
        if ctx.aborted is not None:  # a driver that stopped short of its goal (RunContext.abort)
            result.status, result.error = "aborted", ctx.aborted
        if gpu is not None:
            result.gpu_state = {"before": before, "after": nvml.observe([gpu])}
        merged = distributed.gather_metrics(ctx.metrics, world)
        result.metrics = merged if merged is not None else []
    except Unmet as skip:
        result.status, result.error = "skipped", str(skip)
    except BaseException as exc:  # noqa: BLE001 - recorded as the run's failure, with the traceback on stderr
        traceback.print_exc()
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}".strip()
        if world > 1:
            distributed.write_rank_error(spec_path, rank, result.error)
    if ctx is not None:
        result.checks = [vars(c) for c in ctx.checks]
        result.details = ctx.details
        if controls.profile is not None and not (ctx.details.get("profile") or ctx.details.get("ncu_cases")):
            # A driver that times its own loop never goes through RunContext.measure: say so.
            result.details["profile_not_applied"] = (
                f"--profile {controls.profile}: this workload measured no case through the harness's "
                "timed loop, so nothing was captured"
            )
    result.finished_at = now()
    if rank == 0:
        write_atomic(Path(spec.result_path), result.to_json())
    if world > 1 and result.status in ("success", "aborted"):
        distributed.shutdown()
    return 0 if result.status in ("success", "skipped", "aborted") else 1


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m perfsuite.engine.worker SPEC.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
