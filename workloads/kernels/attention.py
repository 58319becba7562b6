"""``kernels.attention``: ``torch.nn.functional.scaled_dot_product_attention`` forward, one
case per SDPA backend, side by side on the same inputs.

Each case forces one backend with ``torch.nn.attention.sdpa_kernel(SDPBackend.X)``. A
backend that refuses these inputs on this device (flash needs fp16/bf16 on sm80+, cuDNN
needs a recent cuDNN, none but math and flash exist on the CPU ...) is found by one trial
call and skipped with torch's own reason in ``details["skipped_cases"]``.

Work per call: 4*B*H*S^2*D FLOPs (Q K^T and P V, 2*S^2*D each per head), halved when
causal; bytes = Q, K, V read once and O written once. Judged against the device's
``matmul.<dtype>`` ceiling. Verified against the math backend computed in float32, element
by element and by norm.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Case, Check, Work, param
from perfsuite.dtypes import element_size, torch_dtype
from perfsuite.workloads.kernels._base import (
    KernelWorkload,
    first_line,
    fp32_matmul_precision,
)
from perfsuite.workloads.kernels._verify import chunked_close

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

BACKENDS = ("flash", "efficient", "cudnn", "math")
_SDP_BACKEND = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
# Relative Frobenius error against the float32 math backend. Fused kernels keep the
# softmax statistics in fp32 and round P and O to the input dtype: bf16 (unit roundoff
# 2^-8) lands near 3e-3, fp16 (2^-11) near 5e-4; the tolerances leave a 5-20x margin.
# fp32 kernels differ from the reference only by summation order.
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-4}
# Per element, (rtol, atol as a fraction of the reference's RMS): the output is rounded once to
# the input dtype (u |ref|, rtol 2u) and P's rounding errors add up over the keys like noise of
# the output's own scale (atol). A wrong tile of O is off by about the RMS.
ELEMENT_TOLERANCE = {"bf16": (2 * 2**-8, 8e-2), "fp16": (2 * 2**-11, 4e-2), "fp32": (1e-4, 1e-3)}


@dataclass(frozen=True)
class AttentionParams:
    batch: int = param(8, "batch size B")
    heads: int = param(16, "attention heads H (queries, keys and values alike)")
    seq_len: int = param(4096, "sequence length S (queries and keys)")
    head_dim: int = param(128, "head dimension D")
    dtype: str = param(
        "bf16", "element type (fp32 only the CPU and the math/efficient backends run)", choices=("bf16", "fp16", "fp32")
    )
    causal: bool = param(False, "causal mask (is_causal=True): half the FLOPs")
    backends: tuple[str, ...] = param(BACKENDS, "SDPA backends, one case each", choices=BACKENDS)

    def __post_init__(self) -> None:
        if min(self.batch, self.heads, self.seq_len, self.head_dim) < 1:
            raise ValueError("batch, heads, seq_len and head_dim must be positive")
        if not self.backends:
            raise ValueError("backends names no SDPA backend")


def attention_flops(p: AttentionParams) -> float:
    full = 4.0 * p.batch * p.heads * p.seq_len * p.seq_len * p.head_dim
    # Causal: only the lower triangle (S(S+1)/2 of S^2 scores) is computed; the convention
    # of FlashAttention's benchmarks is exactly half.
    return full / 2 if p.causal else full


def sdpa_call(backend: str, q: Any, k: Any, v: Any, causal: bool) -> Callable[[], Any]:
    """One attention forward with only ``backend`` enabled; returns the output."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, _SDP_BACKEND[backend])

    def fn() -> Any:
        with sdpa_kernel(chosen):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return fn


def backend_refusal(backend: str, q: Any, k: Any, v: Any, causal: bool) -> str | None:
    """Why ``backend`` cannot run these inputs here (torch's warnings and error), or None."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sdpa_call(backend, q, k, v, causal)()
        except RuntimeError as exc:
            # torch explains a refusal in UserWarnings ("Flash attention requires ...") and
            # then raises a generic error; keep both.
            said = [str(w.message).strip() for w in caught if str(w.message).strip()]
            inputs = f"{str(q.dtype).removeprefix('torch.')} {list(q.shape)} on {q.device.type}"
            return f"torch refused {backend} for {inputs}: " + "; ".join([*dict.fromkeys(said), first_line(exc)])
    return None


class Attention(KernelWorkload):
    name = "kernels.attention"
    version = 1
    description = "scaled_dot_product_attention forward per SDPA backend vs the matrix ceiling"
    Params = AttentionParams
    quick = {"batch": 1, "heads": 2, "seq_len": 256, "head_dim": 64}
    primary_metric = "tflops"

    def _inputs(self, ctx: "RunContext", batch: int, heads: int) -> tuple[Any, Any, Any]:
        import torch

        p = self.params
        shape = (batch, heads, p.seq_len, p.head_dim)
        dt = torch_dtype(p.dtype)
        return tuple(torch.randn(shape, device=ctx.torch_device, dtype=dt) for _ in range(3))

    def unmet(self, ctx: "RunContext") -> str | None:
        # Probe every backend on one (batch, head) slice of the real shape: cheap, and the
        # constraints that matter (dtype, head_dim, device, seq_len) are all there.
        q, k, v = self._inputs(ctx, 1, 1)
        refusals = {b: backend_refusal(b, q, k, v, self.params.causal) for b in dict.fromkeys(self.params.backends)}
        if all(refusals.values()):
            return "no requested SDPA backend runs these inputs: " + "; ".join(f"{b}: {r}" for b, r in refusals.items())
        return None

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        self.q, self.k, self.v = self._inputs(ctx, p.batch, p.heads)
        self._skipped: dict[str, str] = {}
        self._fns: dict[str, Callable[[], Any]] = {}
        for backend in dict.fromkeys(p.backends):
            reason = backend_refusal(backend, self.q, self.k, self.v, p.causal)
            if reason:
                self._skipped[backend] = reason
            else:
                self._fns[backend] = sdpa_call(backend, self.q, self.k, self.v, p.causal)
        if not self._fns:
            raise RuntimeError(
                "no SDPA backend runs the full-size inputs: " + "; ".join(f"{b}: {r}" for b, r in self._skipped.items())
            )
        # The reference: the math backend in float32 (IEEE matmuls), one batch element at a
        # time so its S x S score matrix stays small.
        self._reference = []
        with fp32_matmul_precision("highest"):
            for i in range(p.batch):
                qf, kf, vf = (t[i : i + 1].to(torch.float32) for t in (self.q, self.k, self.v))
                self._reference.append(sdpa_call("math", qf, kf, vf, p.causal)())
        squares = sum(float((r.to(torch.float64) ** 2).sum()) for r in self._reference)
        self._reference_rms = math.sqrt(squares / sum(r.numel() for r in self._reference))

    def _verify(self, backend: str) -> Check:
        out = self._fns[backend]()
        rtol, atol_rms = ELEMENT_TOLERANCE[self.params.dtype]
        return chunked_close(
            backend,
            ((out[i : i + 1], ref) for i, ref in enumerate(self._reference)),
            tuple(out.shape),
            tolerance=TOLERANCE[self.params.dtype],
            rtol=rtol,
            atol=atol_rms * self._reference_rms,
            method="per element and by relative Frobenius error vs the math backend in float32",
        )

    def cases(self, ctx: "RunContext") -> list[Case]:
        p = self.params
        nbytes = 4.0 * p.batch * p.heads * p.seq_len * p.head_dim * element_size(p.dtype)
        work = Work(flops=attention_flops(p), bytes=nbytes)
        built = [
            Case(
                label=b,
                fn=fn,
                work=work,
                roofline=f"matmul.{p.dtype}",
                verify=lambda b=b: self._verify(b),
                baseline=(b == "math"),
            )
            for b, fn in self._fns.items()
        ]
        for label, reason in self._skipped.items():
            ctx.skip_case(label, reason)
        return built

    def teardown(self, ctx: "RunContext") -> None:
        self.q = self.k = self.v = None
        self._fns = {}
        self._reference = []
