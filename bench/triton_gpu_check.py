"""Fast GPU check of the perfsuite-triton kernels, in one process and without the suite's
runner: each kernel against a float64 torch reference (the workloads' tolerances), and
timed with triton.testing.do_bench (median, L2 flushed between calls) next to torch eager
and torch.compile, as GB/s or TFLOP/s. Memory-bound kernels are also shown as a fraction
of this GPU's copy bandwidth, measured here the same way (bytes read + written).

    python3 bench/triton_gpu_check.py            # the workloads' default (GPU) sizes
    python3 bench/triton_gpu_check.py --quick    # their quick sizes
    python3 bench/triton_gpu_check.py --json OUT.json

Sizes come from the workloads' Params, so this checks what ``perfsuite run`` measures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "plugins" / "perfsuite-triton"), str(REPO)]

from perfsuite.dtypes import torch_dtype  # noqa: E402  (after the path set-up above)

WARPS = (None, 4, 8, 16)  # None: the launcher's own choice, what the workloads use
COPY_BYTES = 1 << 30  # 1 GiB copied: 2 GiB moved per call
DEVICE = "cuda"


def params(cls, quick: bool):
    from perfsuite.engine import params as params_mod

    return params_mod.resolve(cls, {}, quick)


def bench(fn) -> float:
    """Median seconds per call."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e-3


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def rel_error(out, ref) -> float:
    from perfsuite.checks import relative_error

    return relative_error(out, ref)


def compiled(fn, *args):
    import torch

    c = torch.compile(fn, dynamic=False, fullgraph=True)
    t0 = time.perf_counter()
    c(*args)
    sync()
    return c, time.perf_counter() - t0


def check_fused_chain(quick: bool, rows: list[dict], copy_gbps: float) -> None:
    import torch
    from perfsuite import fused_chain as chain
    from perfsuite_triton.kernels import fused_chain as k
    from perfsuite_triton.workloads.fused_chain import FusedChain

    p = params(FusedChain, quick)
    inputs = chain.make_inputs(p.rows, p.hidden, p.dtype, DEVICE)  # as the workloads make them
    x = inputs.x
    args = (*inputs, p.eps)
    nbytes = chain.bytes_per_call(p.rows, p.hidden, p.dtype)
    ref = chain.reference(*args)
    tol = chain.TOLERANCE[p.dtype]
    shape = f"{p.rows}x{p.hidden} {p.dtype}"
    out = torch.empty_like(x)
    for warps in WARPS:
        cfg = k.launch_config(p.hidden, warps)
        out.fill_(float("nan"))
        k.fused_chain(*args, out=out, num_warps=warps)
        err = rel_error(out, ref)
        t = bench(lambda: k.fused_chain(*args, out=out, num_warps=warps))
        rows.append(
            row(
                "fused_chain",
                shape,
                "triton",
                f"BLOCK={cfg['BLOCK']} warps={cfg['num_warps']}" + (" (auto)" if warps is None else ""),
                t,
                nbytes / t / 1e9,
                "GB/s",
                copy_gbps,
                err,
                tol,
            )
        )
    t = bench(lambda: chain.eager(*args))
    rows.append(
        row(
            "fused_chain",
            shape,
            "torch_eager",
            "",
            t,
            nbytes / t / 1e9,
            "GB/s",
            copy_gbps,
            rel_error(chain.eager(*args), ref),
            tol,
        )
    )
    c, compile_s = compiled(chain.eager, *args)
    t = bench(lambda: c(*args))
    rows.append(
        row(
            "fused_chain",
            shape,
            "torch_compile",
            f"compile {compile_s:.1f}s",
            t,
            nbytes / t / 1e9,
            "GB/s",
            copy_gbps,
            rel_error(c(*args), ref),
            tol,
        )
    )


def check_softmax(quick: bool, rows: list[dict], copy_gbps: float) -> None:
    import torch
    from perfsuite_triton.kernels import softmax as k
    from perfsuite_triton.workloads import _shared
    from perfsuite_triton.workloads.softmax import Softmax

    p = params(Softmax, quick)
    x = (3 * torch.randn(p.rows, p.cols, device=DEVICE)).to(torch_dtype(p.dtype))
    nbytes = 2 * p.rows * p.cols * x.element_size()
    ref = torch.softmax(x.double(), -1)
    tol = _shared.TOLERANCE[p.dtype]
    shape = f"{p.rows}x{p.cols} {p.dtype}"
    out = torch.empty_like(x)
    for warps in WARPS:
        cfg = k.launch_config(p.cols, warps)
        out.fill_(float("nan"))
        k.softmax(x, out=out, num_warps=warps)
        err = rel_error(out, ref)
        t = bench(lambda: k.softmax(x, out=out, num_warps=warps))
        rows.append(
            row(
                "softmax",
                shape,
                "triton",
                f"BLOCK={cfg['BLOCK']} warps={cfg['num_warps']}" + (" (auto)" if warps is None else ""),
                t,
                nbytes / t / 1e9,
                "GB/s",
                copy_gbps,
                err,
                tol,
            )
        )
    eager = lambda: torch.softmax(x, -1)  # noqa: E731
    t = bench(eager)
    rows.append(
        row("softmax", shape, "torch_eager", "", t, nbytes / t / 1e9, "GB/s", copy_gbps, rel_error(eager(), ref), tol)
    )
    c, compile_s = compiled(lambda v: torch.softmax(v, -1), x)
    t = bench(lambda: c(x))
    rows.append(
        row(
            "softmax",
            shape,
            "torch_compile",
            f"compile {compile_s:.1f}s",
            t,
            nbytes / t / 1e9,
            "GB/s",
            copy_gbps,
            rel_error(c(x), ref),
            tol,
        )
    )


def check_matmul(quick: bool, rows: list[dict], dtypes: list[str]) -> None:
    import torch
    from perfsuite_triton.kernels import matmul as k
    from perfsuite_triton.workloads import _shared
    from perfsuite_triton.workloads.matmul import Matmul

    base = params(Matmul, quick)
    for dtype in dtypes or [base.dtype]:
        p = dataclasses.replace(base, dtype=dtype)
        dt = torch_dtype(p.dtype)
        a = torch.randn(p.m, p.k, device=DEVICE, dtype=dt)
        b = torch.randn(p.k, p.n, device=DEVICE, dtype=dt)
        flops = 2.0 * p.m * p.n * p.k
        ref = a.double() @ b.double()
        tol = _shared.TOLERANCE[p.dtype]
        shape = f"{p.m}x{p.n}x{p.k} {p.dtype}"
        out = torch.empty(p.m, p.n, device=DEVICE, dtype=dt)
        t0 = time.perf_counter()
        k.matmul(a, b, out=out)
        sync()
        tune_s = time.perf_counter() - t0
        chosen = k.chosen_config()["config"]
        out.fill_(float("nan"))
        k.matmul(a, b, out=out)
        err = rel_error(out, ref)
        t = bench(lambda: k.matmul(a, b, out=out))
        cfg = " ".join(f"{key}={v}" for key, v in chosen.items())
        rows.append(
            row(
                "matmul",
                shape,
                "triton",
                f"{cfg} (tuned {tune_s:.0f}s)",
                t,
                flops / t / 1e12,
                "TFLOP/s",
                None,
                err,
                tol,
            )
        )
        t = bench(lambda: torch.matmul(a, b))
        rows.append(
            row(
                "matmul",
                shape,
                "torch_eager",
                "cuBLAS",
                t,
                flops / t / 1e12,
                "TFLOP/s",
                None,
                rel_error(torch.matmul(a, b), ref),
                tol,
            )
        )
        c, compile_s = compiled(torch.matmul, a, b)
        t = bench(lambda: c(a, b))
        rows.append(
            row(
                "matmul",
                shape,
                "torch_compile",
                f"compile {compile_s:.1f}s",
                t,
                flops / t / 1e12,
                "TFLOP/s",
                None,
                rel_error(c(a, b), ref),
                tol,
            )
        )
        del a, b, ref, out
        torch.cuda.empty_cache()


def row(kernel, shape, impl, config, t_s, rate, unit, copy_gbps, err, tol) -> dict:
    return {
        "kernel": kernel,
        "shape": shape,
        "impl": impl,
        "config": config,
        "time_ms": t_s * 1e3,
        "rate": rate,
        "unit": unit,
        "of_copy": rate / copy_gbps if copy_gbps else None,
        "rel_error": err,
        "tolerance": tol,
        "ok": err <= tol,
    }


def copy_bandwidth_gbps() -> float:
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=DEVICE).random_(0, 255)
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src))
    del src, dst
    torch.cuda.empty_cache()
    return 2 * COPY_BYTES / t / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the workloads' quick sizes")
    ap.add_argument("--matmul-dtypes", default="", help="comma list among bf16,fp16,fp32 (default: the workload's)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        sys.exit("unset TRITON_INTERPRET: this script times the kernels on the GPU")
    import torch
    import triton

    if not torch.cuda.is_available():
        sys.exit("no CUDA device visible to torch")
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}", flush=True)
    copy_gbps = copy_bandwidth_gbps()
    print(f"device copy bandwidth (read + written, do_bench median): {copy_gbps:.0f} GB/s", flush=True)
    rows: list[dict] = []
    check_fused_chain(args.quick, rows, copy_gbps)
    check_softmax(args.quick, rows, copy_gbps)
    check_matmul(args.quick, rows, [d for d in args.matmul_dtypes.split(",") if d])
    print(
        f"\n{'kernel':12} {'shape':24} {'impl':14} {'ms':>9} {'rate':>16} {'of copy':>8} {'rel err':>9} "
        f"{'ok':>3}  config"
    )
    for r in rows:
        frac = f"{r['of_copy']:.0%}" if r["of_copy"] is not None else "-"
        print(
            f"{r['kernel']:12} {r['shape']:24} {r['impl']:14} {r['time_ms']:9.3f} {r['rate']:10.1f} {r['unit']:7}"
            f"{frac:>8} {r['rel_error']:9.2e} {'yes' if r['ok'] else 'NO':>3}  {r['config']}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "copy_gbps": copy_gbps,
                    "rows": rows,
                },
                indent=2,
            )
        )
    if not all(r["ok"] for r in rows):
        sys.exit("some outputs are outside their tolerance (ok = NO above)")


if __name__ == "__main__":
    main()
