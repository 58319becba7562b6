"""Cross-check the suite's timing of two kernels against independent reference timings, on a
CUDA GPU, in one process:

1. ``kernels.gemm`` (bf16, m = n = k = 8192) run through a real RunContext, against
   ``triton.testing.do_bench`` (median) of the same ``torch.matmul(A, B, out=C)``:
   the medians must agree within 3%;
2. ``kernels.memory`` (copy, 1 GiB per buffer) through RunContext, against a plain
   ``dst.copy_(src)`` of the same size timed with a pair of CUDA events around a batch of
   back-to-back copies: within 5%.

Prints a table (suite median, reference, ratio, tolerance, verdict) and writes the same as
JSON (``--json``, default ``$OUT/crosscheck.json``). Exit status 1 if a figure disagrees or a
verification fails.

    python3 bench/crosscheck_gpu.py [--size 8192] [--copy-bytes 1G] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GEMM_TOLERANCE = 0.03
COPY_TOLERANCE = 0.05
SEED = 0


def run_in_process(cls, overrides: dict, min_time_s: float):
    """The workload through the host's one in-process run (``perfsuite.engine.inprocess.run_workload``:
    seeds, unmet, setup, execute, teardown), exactly as the measuring process runs it."""
    import torch
    from perfsuite.controls import Controls
    from perfsuite.engine import params as params_mod
    from perfsuite.engine.inprocess import Unmet, run_workload

    params = params_mod.resolve(cls, overrides, quick=False)
    try:
        ctx = run_workload(cls, params, Controls(device="cuda", seed=SEED, min_time_s=min_time_s))
    except Unmet as exc:
        raise SystemExit(f"{cls.name} cannot run here: {exc}") from None
    torch.cuda.empty_cache()
    return ctx


def metric(ctx, case: str, name: str) -> float:
    return next(m["value"] for m in ctx.metrics if m["case"] == case and m["name"] == name)


def checks_passed(ctx) -> bool:
    return bool(ctx.checks) and all(c.passed for c in ctx.checks)


def gemm_crosscheck(size: int, min_time_s: float) -> dict:
    import torch
    import triton.testing
    from perfsuite.workloads.kernels.gemm import Gemm

    ctx = run_in_process(Gemm, {"m": size, "n": size, "k": size, "dtypes": ("bf16",)}, min_time_s)
    suite_ms = metric(ctx, "bf16", "time_ms")
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    rep_ms = max(1000, int(min_time_s * 1e3))
    ref_ms = triton.testing.do_bench(lambda: torch.matmul(a, b, out=c), warmup=100, rep=rep_ms, return_mode="median")
    return {
        "check": f"gemm bf16 {size}^3",
        "suite": "kernels.gemm median time_ms",
        "reference": "triton.testing.do_bench median (L2 flushed)",
        "suite_ms": suite_ms,
        "reference_ms": ref_ms,
        "suite_tflops": metric(ctx, "bf16", "tflops"),
        "reference_tflops": 2 * size**3 / (ref_ms * 1e-3) / 1e12,
        "tolerance": GEMM_TOLERANCE,
        "verified": checks_passed(ctx),
    }


def copy_crosscheck(nbytes: int, min_time_s: float, batch: int = 50) -> dict:
    import torch
    from perfsuite.workloads.kernels.memory import Memory

    ctx = run_in_process(Memory, {"size_bytes": nbytes, "ops": ("copy",)}, min_time_s)
    suite_ms = metric(ctx, "copy", "time_ms")
    n = nbytes // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty(n, device="cuda")
    for _ in range(10):
        dst.copy_(src)
    per_copy = []
    for _ in range(5):  # five batches of back-to-back copies between one pair of events each
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(batch):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        per_copy.append(start.elapsed_time(end) / batch)
    ref_ms = statistics.median(per_copy)
    if not torch.equal(dst, src):
        raise SystemExit("reference copy produced a wrong result")
    return {
        "check": f"copy {nbytes / 2**30:g} GiB",
        "suite": "kernels.memory copy median time_ms",
        "reference": f"CUDA events around {batch} back-to-back dst.copy_(src), median of 5 batches",
        "suite_ms": suite_ms,
        "reference_ms": ref_ms,
        "suite_gbps": metric(ctx, "copy", "gbps"),
        "reference_gbps": 2 * n * 4 / (ref_ms * 1e-3) / 1e9,
        "tolerance": COPY_TOLERANCE,
        "verified": checks_passed(ctx),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=8192, help="m = n = k of the bf16 GEMM")
    ap.add_argument("--copy-bytes", default="1G", help="bytes per copy buffer (K/M/G suffixes)")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds of timed calls in the suite's runs")
    ap.add_argument("--json", default=None, help="where to write the JSON (default: $OUT/crosscheck.json)")
    args = ap.parse_args()

    import torch
    from perfsuite.engine import params as params_mod
    from perfsuite.workloads.kernels.memory import Memory

    if not torch.cuda.is_available():
        print("crosscheck_gpu: needs a CUDA GPU", file=sys.stderr)
        return 2
    copy_bytes = params_mod.resolve(Memory, {"size_bytes": args.copy_bytes}, quick=False).size_bytes
    rows = [gemm_crosscheck(args.size, args.min_time), copy_crosscheck(copy_bytes, args.min_time)]
    ok = True
    print(f"\ncross-check on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"{'check':22} {'suite ms':>10} {'reference ms':>13} {'ratio':>7} {'tolerance':>9} {'verified':>8}  verdict")
    for r in rows:
        r["ratio"] = r["suite_ms"] / r["reference_ms"]
        r["agrees"] = abs(r["ratio"] - 1.0) <= r["tolerance"]
        ok &= r["agrees"] and r["verified"]
        print(
            f"{r['check']:22} {r['suite_ms']:10.4f} {r['reference_ms']:13.4f} {r['ratio']:7.3f} "
            f"{r['tolerance']:9.0%} {str(r['verified']):>8}  {'agrees' if r['agrees'] else 'DISAGREES'}"
        )
    print(
        f"  gemm: suite {rows[0]['suite_tflops']:.0f} TFLOP/s, do_bench {rows[0]['reference_tflops']:.0f} TFLOP/s;"
        f" copy: suite {rows[1]['suite_gbps']:.0f} GB/s, events {rows[1]['reference_gbps']:.0f} GB/s"
    )
    out = args.json or (os.path.join(os.environ["OUT"], "crosscheck.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(
            json.dumps(
                {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows, "all_agree": ok},
                indent=2,
            )
        )
        print(f"JSON: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
