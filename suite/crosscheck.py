"""Built-in cross-checks: the same callable timed by the reference tool in the same process
and the same call, both figures and their ratio stored in the record
(``details["crosscheck"]``).

- kernels (any case measured through ``RunContext.measure``): ``triton.testing.do_bench``
  (median, its own L2 flush) with ``rep`` = the wall time of the suite's timed loop, so that
  it makes about as many calls: a burst (``--iterations 20``) is compared with a burst and
  a sustained run (``--min-time 2``) with a sustained one (do_bench's default 100 ms is
  neither: on an H200 it gives 732 TFLOP/s where a burst gives 790 and two seconds 670).
  The two take turns for ``rounds`` rounds (``--rounds``, ``PERFSUITE_CROSSCHECK_ROUNDS``,
  default 4: each goes first as often as the other), each from a GPU rested for
  ``suite.context.COOL_REST_S``, and the ratio is of the medians over rounds: one 20-call
  burst of either varies by a few percent (on an H200 do_bench's flushed bf16 burst read
  1.428 ms once against 1.377-1.411 in three other runs, a 0.961 ratio on its own), and the
  second of two bursts run without a rest between them read 5-6% slower;
- collectives: the nccl-tests binary of the collective, from the directory in
  ``PERFSUITE_NCCL_TESTS``, started by rank 0 after the sweep with the same sizes, type,
  reduction, warm-up and iterations (``workloads.collectives._sweep``), as one process per
  GPU under an MPI launcher where one is given (``PERFSUITE_NCCL_TESTS_MPIRUN``).

Asked for with ``perfsuite crosscheck`` (or ``PERFSUITE_CROSSCHECK=1`` in the environment of
``perfsuite run``). A reference that cannot run here is recorded as skipped with the reason.
"""
from __future__ import annotations

import contextlib
import os
import statistics
from typing import Any, Callable

from suite.nccl_tests import ENV_DIR as NCCL_TESTS_ENV

ENV_REQUEST = "PERFSUITE_CROSSCHECK"
ENV_ROUNDS = "PERFSUITE_CROSSCHECK_ROUNDS"
DEFAULT_ROUNDS = 4  # even: the suite and the reference each go first in half the rounds
DO_BENCH_MIN_REP_MS = 1.0  # do_bench runs at least one call whatever rep says
DO_BENCH_WARMUP_MS = 25.0  # do_bench's default
# untimed calls do_bench always makes before its warm-up (triton 3.x: one, then five to estimate)
DO_BENCH_OWN_CALLS = 6
AGREEMENT = 0.02  # the bar: within 2% of do_bench run the same way
COOL_WAIT_S = 20.0  # longest wait for a cool GPU before each of the two timings


def requested() -> bool:
    return os.environ.get(ENV_REQUEST, "") not in ("", "0")


def rounds(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> int:
    """How many rounds the suite and the reference take turns for (``PERFSUITE_CROSSCHECK_ROUNDS``)."""
    text = environ.get(ENV_ROUNDS, "").strip() or str(DEFAULT_ROUNDS)
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{ENV_ROUNDS}={text!r} is not a whole number of rounds") from None
    if n < 1:
        raise ValueError(f"{ENV_ROUNDS}={n}: at least one round")
    return n


def take_turns(n_rounds: int, suite_first: Any, suite_again: Callable[[], Any],
               reference: Callable[[], Any]) -> list[dict]:
    """``n_rounds`` rounds of the suite's timing and the reference's, taking turns: round 1
    is the suite's recorded run (``suite_first``, already taken) then the reference; from
    round 2 on the reference goes first in even rounds and second in odd ones, so that
    neither always meets the GPU the other has just left."""
    out = [{"order": "suite first", "suite": suite_first, "reference": reference()}]
    for r in range(2, n_rounds + 1):
        if r % 2 == 0:
            ref = reference()
            out.append({"order": "reference first", "suite": suite_again(), "reference": ref})
        else:
            mine = suite_again()
            out.append({"order": "suite first", "suite": mine, "reference": reference()})
    return out


def nccl_tests_dir() -> str | None:
    return os.environ.get(NCCL_TESTS_ENV) or None


def do_bench_unavailable(device: str) -> str | None:
    """Why triton's do_bench cannot time a call here, or None."""
    if device != "cuda":
        return "triton.testing.do_bench times with CUDA events: it needs a CUDA device (this run is on the CPU)"
    try:
        import triton.testing  # noqa: F401
    except ImportError as exc:
        return f"triton is not installed ({exc})"
    return None


def do_bench_warmup_ms(call_ms: float, warmup_calls: int | None) -> float:
    """do_bench's ``warmup`` for as many calls before its timed ones as the suite made
    (``warmup_calls`` of ``call_ms`` each): do_bench makes ``DO_BENCH_OWN_CALLS`` of its own
    first and at least one warm-up call, so it is given the rest, plus half a call: it counts
    its calls as ``int(warmup / estimate)`` with an estimate that includes its L2 flush, a
    little longer than the call. None: do_bench's default."""
    if warmup_calls is None:
        return DO_BENCH_WARMUP_MS
    return call_ms * (max(warmup_calls - DO_BENCH_OWN_CALLS, 1) + 0.5)


def versus_do_bench(fn: Callable[[], Any], device: str, suite_samples_s: list[float], suite_wall_s: float,
                    settle: Callable[[], dict] | None = None, suite_settled: dict | None = None,
                    warmup_calls: int | None = None, suite_l2_flush: bool = False,
                    suite_again: Callable[[], tuple[list[float], dict | None]] | None = None, n_rounds: int = 1,
                    sampler: Callable[[], Any] | None = None, suite_nvml: dict | None = None) -> dict:
    """Time ``fn`` with do_bench for as long as the suite's loop ran; both medians and their
    ratio. ``settle`` (the GPU's wait until cool) runs right before each do_bench and each
    further suite loop, as it ran before the suite's first (``suite_settled``, what it saw
    then): every timing starts from the same state. ``warmup_calls``: the calls the suite
    made before its timed loop; do_bench makes as many before its own (``do_bench_warmup_ms``;
    default: do_bench's 25 ms). do_bench always overwrites a 256 MB buffer between calls (an
    L2 flush): ``suite_l2_flush`` says whether the suite's loop did too (``--l2-flush``),
    which is run the same way; without it the two loops load a power-capped GPU differently.
    ``suite_again`` times the suite's loop once more (its samples and NVML summary): with it,
    the two take ``n_rounds`` turns (``take_turns``) and each side's figure is the median of
    its rounds' medians. ``sampler`` (a fresh ``suite.nvml_sampler.Sampler``) samples NVML
    during each do_bench, as the suite's own loops are (``suite_nvml``: its first loop's): each
    round records both sides' SM clocks and clock events, so a round that ran slower shows
    whether it ran at a lower clock."""
    suite_ms = statistics.median(suite_samples_s) * 1e3
    out: dict = {"tool": "triton.testing.do_bench", "suite_median_ms": suite_ms,
                 "suite_l2_flush": suite_l2_flush, "reference_l2_flush": True}
    why = do_bench_unavailable(device)
    if why:
        return {**out, "status": "skipped", "reason": why}
    import triton
    import triton.testing

    rep_ms = max(DO_BENCH_MIN_REP_MS, suite_wall_s * 1e3)
    warmup_ms = do_bench_warmup_ms(suite_ms, warmup_calls)

    def reference() -> dict:
        seen = settle() if settle is not None else None
        with sampler() if sampler is not None else contextlib.nullcontext() as s:
            ms = float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
        return {"median_ms": ms, "settled": seen, "nvml": s.summary() if s is not None else None}

    def again() -> dict:
        seen = settle() if settle is not None else None
        samples, nvml = suite_again()
        return {"median_ms": statistics.median(samples) * 1e3, "settled": seen, "nvml": nvml}

    first = {"median_ms": suite_ms, "settled": suite_settled, "nvml": suite_nvml}
    turns = take_turns(n_rounds if suite_again is not None else 1, first, again, reference)
    suite_med = statistics.median(t["suite"]["median_ms"] for t in turns)
    ref_ms = statistics.median(t["reference"]["median_ms"] for t in turns)
    ratio = suite_med / ref_ms if ref_ms > 0 else None
    if settle is not None:  # what NVML showed before the first round's two timings
        out["settled"] = {"suite": suite_settled, "reference": turns[0]["reference"]["settled"]}
    return {**out, "status": "measured", "tool_version": triton.__version__, "suite_median_ms": suite_med,
            "reference_median_ms": ref_ms, "rounds": [{"order": t["order"], "suite_ms": t["suite"]["median_ms"],
                                                       "reference_ms": t["reference"]["median_ms"],
                                                       "suite_clocks": _clocks(t["suite"]["nvml"]),
                                                       "reference_clocks": _clocks(t["reference"]["nvml"])}
                                                      for t in turns],
            "rep_ms": rep_ms, "warmup_ms": warmup_ms, "time_ratio": ratio,
            "agrees": ratio is not None and abs(ratio - 1.0) <= AGREEMENT, "tolerance": AGREEMENT}


def _clocks(nvml: dict | None) -> dict | None:
    """What a round's NVML summary says of its clocks: SM MHz min and median, clock events."""
    if not nvml:
        return None
    return {"sm_clock_mhz_min": nvml.get("sm_clock_mhz_min"), "sm_clock_mhz_median": nvml.get("sm_clock_mhz_median"),
            "clock_events": nvml.get("clock_events") or []}


def collective_vs_nccl_tests(rows: list[dict], reference: dict) -> list[dict]:
    """Per size and mode: perfsuite's and nccl-tests' busbw and their ratio (suite / nccl-tests)."""
    from suite.nccl_tests import MODE_KEYS

    ref_rows = {r["size_bytes"]: r for r in reference["rows"]}
    out = []
    for r in rows:
        ref = ref_rows.get(r["size_bytes"])
        for mode in MODE_KEYS:
            mine, theirs = r.get(mode), (ref or {}).get(mode)
            if mine is None or theirs is None:
                continue
            out.append({"size_bytes": r["size_bytes"], "mode": mode,
                        "suite_time_us": mine["time_us"], "nccl_tests_time_us": theirs["time_us"],
                        "suite_busbw_gbps": mine["busbw_gbps"], "nccl_tests_busbw_gbps": theirs["busbw_gbps"],
                        "busbw_ratio": mine["busbw_gbps"] / theirs["busbw_gbps"] if theirs["busbw_gbps"] else None})
    return out


def versus_nccl_tests(ctx: Any, collective: str, rows: list[dict], **sweep: Any) -> dict:
    """nccl-tests run once beside a finished sweep (``run_nccl_tests``), compared with its
    ``rows``. Called on every rank; rank 0's answer is the one recorded."""
    return compare_nccl_tests([run_nccl_tests(ctx, collective, **sweep)], rows)


def run_nccl_tests(ctx: Any, collective: str, *, min_bytes: int, max_bytes: int, step_factor: int, iters: int,
                   dtype: str, redop: str | None, root: int | None, check: bool, cycles: int = 1) -> dict:
    """nccl-tests' binary for ``collective``, the same sweep (``dtype`` in nccl-tests' spelling),
    started by rank 0 while the other ranks wait on the host (a gloo barrier: an NCCL barrier
    would keep a kernel spinning on their GPUs). Its ranks are laid out as
    ``suite.nccl_tests.layout`` says: one process per GPU under an MPI launcher
    (``PERFSUITE_NCCL_TESTS_MPIRUN``), else one process with a thread per GPU or one thread
    for all; either way on this node's GPUs, so it needs every rank on this node.
    ``PERFSUITE_NCCL_TESTS_ENV`` is added to its environment and recorded.
    ``cycles``: nccl-tests runs the sweep that many times (``-N``). Its output is kept
    (``raw``) and read by ``compare_nccl_tests``. Called on every rank; rank 0's answer is
    the one that counts, and the others get its status (``rank0_status``)."""
    import subprocess

    import torch.distributed as dist

    from suite import distributed, nccl_tests

    out: dict = {"tool": "nccl-tests"}
    directory = nccl_tests_dir()
    if directory is None:
        return {**out, "status": "skipped", "reason": f"no directory of nccl-tests binaries given "
                                                      f"(set {NCCL_TESTS_ENV} or perfsuite crosscheck --nccl-tests)"}
    if ctx.device != "cuda" or distributed.local_world_size() != ctx.world_size:
        return {**out, "status": "skipped",
                "reason": "nccl-tests runs here as one process over this node's GPUs: needs device cuda and "
                          "every rank on one node"}
    host_group = dist.new_group(backend="gloo")
    result = None
    if ctx.rank == 0:
        try:
            binary = nccl_tests.find_binary(directory, collective)
            placement, launcher = nccl_tests.layout(), nccl_tests.mpirun()
            args = nccl_tests.argv(binary, min_bytes=min_bytes, max_bytes=max_bytes, step_factor=step_factor,
                                   iters=iters, warmup=ctx.controls.warmup, gpus=ctx.world_size, dtype=dtype,
                                   redop=redop, root=root, graph=ctx.controls.cuda_graph, check=check,
                                   placement=placement, cycles=cycles)
            extra = nccl_tests.extra_env()
            env = {**os.environ, **extra}  # the ranks' own (the suite's and the user's), and the extra
            parsed, text = nccl_tests.run(args, timeout_s=ctx.controls.timeout_s / 2, env=env, launcher=launcher,
                                          ranks=ctx.world_size)
            # every NCCL_* variable nccl-tests ran with, such as NCCL_GRAPH_MIXING_SUPPORT=0 under --cuda-graph
            nccl_env = {k: v for k, v in env.items() if k.startswith("NCCL_")}
            result = {**out, "status": "measured", "layout": placement, "launcher": launcher, "argv": args[1:],
                      "env": extra, "nccl_env": nccl_env, "binary": str(binary), "version": parsed.version,
                      "nccl_library": parsed.nccl_library, "raw": text}
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
    (``suite.nccl_tests.fold_cycles``), beside the suite's ``rows`` (whose loops of every
    round are folded the same way). A run that did not measure is the answer."""
    from suite import nccl_tests

    for run in runs:
        if run.get("status") != "measured":
            return run
    parsed = nccl_tests.parse("\n".join(r["raw"] for r in runs))
    ref = parsed.to_dict()
    first = runs[0]
    return {**{k: v for k, v in first.items() if k != "raw"}, "rounds": len(runs), "table": ref,
            "compare": collective_vs_nccl_tests(rows, ref),
            "raw": "\n".join(f"# ---- round {i} of {len(runs)}\n{r['raw']}" if len(runs) > 1 else r["raw"]
                             for i, r in enumerate(runs, 1))}
