"""nccl-tests beside a collective sweep: run its binary in the same call, with the same sizes,
type, reduction, warm-up and iterations, and fold its table beside the suite's rows
(``details["crosscheck"]``), each size judged with the side that was launch-bound named
(:mod:`perfsuite.crosscheck.launch_floor`). The binary's own runner and parser are
:mod:`perfsuite.crosscheck.nccl_tests`."""

from __future__ import annotations

import os
from typing import Any

from perfsuite.crosscheck.nccl_tests import ENV_DIR as NCCL_TESTS_ENV


def nccl_tests_dir() -> str | None:
    return os.environ.get(NCCL_TESTS_ENV) or None


def collective_vs_nccl_tests(rows: list[dict], reference: dict) -> list[dict]:
    """Per size and mode: perfsuite's and nccl-tests' busbw and their ratio (suite / nccl-tests)."""
    from perfsuite.crosscheck.nccl_tests import MODE_KEYS

    ref_rows = {r["size_bytes"]: r for r in reference["rows"]}
    out = []
    for r in rows:
        ref = ref_rows.get(r["size_bytes"])
        for mode in MODE_KEYS:
            mine, theirs = r.get(mode), (ref or {}).get(mode)
            if mine is None or theirs is None:
                continue
            out.append(
                {
                    "size_bytes": r["size_bytes"],
                    "mode": mode,
                    "suite_time_us": mine["time_us"],
                    "nccl_tests_time_us": theirs["time_us"],
                    "suite_busbw_gbps": mine["busbw_gbps"],
                    "nccl_tests_busbw_gbps": theirs["busbw_gbps"],
                    "busbw_ratio": mine["busbw_gbps"] / theirs["busbw_gbps"] if theirs["busbw_gbps"] else None,
                }
            )
    return out


def versus_nccl_tests(ctx: Any, collective: str, rows: list[dict], **sweep: Any) -> dict:
    """nccl-tests run once beside a finished sweep (``run_nccl_tests``), compared with its
    ``rows``. Called on every rank; rank 0's answer is the one recorded."""
    return compare_nccl_tests([run_nccl_tests(ctx, collective, **sweep)], rows)


def run_nccl_tests(
    ctx: Any,
    collective: str,
    *,
    min_bytes: int,
    max_bytes: int,
    step_factor: int,
    iters: int,
    dtype: str,
    redop: str | None,
    root: int | None,
    check: bool,
    cycles: int = 1,
) -> dict:
    """nccl-tests' binary for ``collective``, the same sweep (``dtype`` in nccl-tests' spelling),
    started by rank 0 while the other ranks wait on the host (a gloo barrier: an NCCL barrier
    would keep a kernel spinning on their GPUs). Its ranks are laid out as
    ``perfsuite.crosscheck.nccl_tests.layout`` says: one process per GPU under an MPI launcher
    (``PERFSUITE_NCCL_TESTS_MPIRUN``), else one process with a thread per GPU or one thread
    for all; either way on this node's GPUs, so it needs every rank on this node.
    ``PERFSUITE_NCCL_TESTS_ENV`` is added to its environment and recorded.
    ``cycles``: nccl-tests runs the sweep that many times (``-N``). Its output is kept
    (``raw``) and read by ``compare_nccl_tests``. Called on every rank; rank 0's answer is
    the one that counts, and the others get its status (``rank0_status``)."""
    import subprocess

    import torch.distributed as dist

    from perfsuite import distributed
    from perfsuite.crosscheck import nccl_tests

    out: dict = {"tool": "nccl-tests"}
    directory = nccl_tests_dir()
    if directory is None:
        return {
            **out,
            "status": "skipped",
            "reason": f"no directory of nccl-tests binaries given "
            f"(set {NCCL_TESTS_ENV} or perfsuite crosscheck --nccl-tests)",
        }
    if ctx.device != "cuda" or distributed.local_world_size() != ctx.world_size:
        return {
            **out,
            "status": "skipped",
            "reason": "nccl-tests runs here as one process over this node's GPUs: needs device cuda and "
            "every rank on one node",
        }
    host_group = dist.new_group(backend="gloo")
    result = None
    if ctx.rank == 0:
        try:
            binary = nccl_tests.find_binary(directory, collective)
            placement, launcher = nccl_tests.layout(), nccl_tests.mpirun()
            args = nccl_tests.argv(
                binary,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                step_factor=step_factor,
                iters=iters,
                warmup=ctx.controls.warmup,
                gpus=ctx.world_size,
                dtype=dtype,
                redop=redop,
                root=root,
                graph=ctx.controls.cuda_graph,
                check=check,
                placement=placement,
                cycles=cycles,
            )
            extra = nccl_tests.extra_env()
            env = {**os.environ, **extra}  # the ranks' own (the suite's and the user's), and the extra
            parsed, text = nccl_tests.run(
                args, timeout_s=ctx.controls.timeout_s / 2, env=env, launcher=launcher, ranks=ctx.world_size
            )
            # every NCCL_* variable nccl-tests ran with, such as NCCL_GRAPH_MIXING_SUPPORT=0 under --cuda-graph
            nccl_env = {k: v for k, v in env.items() if k.startswith("NCCL_")}
            result = {
                **out,
                "status": "measured",
                "layout": placement,
                "launcher": launcher,
                "argv": args[1:],
                "env": extra,
                "nccl_env": nccl_env,
                "binary": str(binary),
                "version": parsed.version,
                "nccl_library": parsed.nccl_library,
                "raw": text,
            }
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            result = {**out, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
    status = [None if result is None else result["status"]]
    dist.broadcast_object_list(status, src=0, group=host_group)  # every rank learns how it went
    return result if result is not None else {**out, "status": "rank 0 only", "rank0_status": status[0]}


def nccl_tests_measured(run: dict) -> bool:
    """Whether nccl-tests measured in ``run`` (on any rank: the others hear it from rank 0)."""
    return "measured" in (run.get("status"), run.get("rank0_status"))


def compare_nccl_tests(runs: list[dict], rows: list[dict]) -> dict:
    """nccl-tests' table from one or more runs (rounds taken in turns with the suite's
    sweeps), each size's cycles of every round folded into their median
    (``perfsuite.crosscheck.nccl_tests.fold_cycles``), beside the suite's ``rows`` (whose loops of every
    round are folded the same way). Every compared size carries its ratio, the side that was
    launch-bound there and its verdict, and ``verdict`` is the cross-check's
    (``perfsuite.crosscheck.launch_floor.attribute``). A run that did not measure is the answer."""
    from perfsuite.crosscheck import launch_floor, nccl_tests

    for run in runs:
        if run.get("status") != "measured":
            return run
    parsed = nccl_tests.parse("\n".join(r["raw"] for r in runs))
    ref = parsed.to_dict()
    first = runs[0]
    compare, judged = launch_floor.attribute(collective_vs_nccl_tests(rows, ref))
    return {
        **{k: v for k, v in first.items() if k != "raw"},
        "rounds": len(runs),
        "table": ref,
        "compare": compare,
        "verdict": judged,
        "raw": "\n".join(
            f"# ---- round {i} of {len(runs)}\n{r['raw']}" if len(runs) > 1 else r["raw"] for i, r in enumerate(runs, 1)
        ),
    }
