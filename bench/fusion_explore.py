"""Explore the fused chain's speed on a GPU before choosing defaults: Triton num_warps and
torch.compile modes over hidden sizes at a fixed 2**28 elements per tensor. Prints GB/s by
the bytes that must move and the fraction of a device copy measured in the same process."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins" / "perfsuite-triton"))

import torch
import triton.testing as tt

from perfsuite_triton.kernels.fused_chain import fused_chain
from workloads.kernels.fusion import make_chain

ELEMS = 2**28


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def main() -> None:
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy = gbps(2 * src.numel(), tt.do_bench(lambda: dst.copy_(src), warmup=50, rep=300))
    print(f"device copy {copy:.0f} GB/s")
    chain = make_chain()
    for hidden in (1024, 2048, 4096, 8192):
        rows = ELEMS // hidden
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        r = torch.randn_like(x)
        b, w, be = (torch.randn(hidden, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        nbytes = (3 * rows * hidden + 3 * hidden) * 2
        out = torch.empty_like(x)
        res = {}
        for nw in (2, 4, 8, 16):
            res[f"triton w{nw}"] = tt.do_bench(lambda: fused_chain(x, b, r, w, be, out=out, num_warps=nw),
                                               warmup=50, rep=300)
        res["triton auto"] = tt.do_bench(lambda: fused_chain(x, b, r, w, be, out=out), warmup=50, rep=300)
        for mode in ("default", "max-autotune-no-cudagraphs"):
            torch._dynamo.reset()
            f = torch.compile(chain, dynamic=False, mode=None if mode == "default" else mode)
            f(x, b, r, w, be)
            res[f"compile {mode}"] = tt.do_bench(lambda: f(x, b, r, w, be), warmup=50, rep=300)
        res["eager"] = tt.do_bench(lambda: chain(x, b, r, w, be), warmup=20, rep=200)
        for k, ms in res.items():
            g = gbps(nbytes, ms)
            print(f"hidden {hidden:5d} rows {rows:7d} {k:34s} {ms:7.3f} ms {g:7.0f} GB/s {g / copy:6.1%}")


if __name__ == "__main__":
    main()
