"""The kernel workloads on a CUDA GPU (``pytest -m gpu``): every quick preset verifies,
the GPU-only cases (tf32, fp8, host<->device links, CUDA graphs, fused attention
backends, torch.compile of the fused chain) run or say why not, and a broken kernel is still caught.
Skipped cleanly without a GPU. No timed assertions: figures are printed (``-m perf``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perfsuite.workloads.kernels import WORKLOADS  # noqa: E402
from perfsuite.workloads.kernels.attention import Attention  # noqa: E402
from perfsuite.workloads.kernels.ceilings import TRANSFERS, Ceilings  # noqa: E402
from perfsuite.workloads.kernels.fusion import Fusion  # noqa: E402
from perfsuite.workloads.kernels.gemm import Gemm, matmul_unsupported  # noqa: E402
from perfsuite.workloads.kernels.launch import Launch  # noqa: E402
from tests.test_kernels import WrongTileGemm, check, metric, run  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("cls", WORKLOADS, ids=lambda c: c.name)
def test_quick_preset_verifies_on_the_gpu(cls):
    ctx = run(cls, device="cuda")
    assert ctx.checks and all(c.passed for c in ctx.checks), [c for c in ctx.checks if not c.passed]
    assert {c.label for c in ctx.checks} == set(ctx.details["work"])
    for label, reason in ctx.details["skipped_cases"].items():
        print(f"{cls.name} {label} skipped: {reason}")


def test_every_gemm_precision_this_gpu_has_verifies():
    ctx = run(Gemm, {"dtypes": "fp32,tf32,bf16,fp16,fp8"}, device="cuda")
    expected = {d for d in ("fp32", "tf32", "bf16", "fp16", "fp8") if matmul_unsupported(d, "cuda") is None}
    assert set(ctx.details["work"]) == expected
    assert all(c.passed for c in ctx.checks), ctx.checks
    # tf32 rounds the inputs: its error sits well above fp32's, proving the mode was on.
    if "tf32" in expected:
        assert check(ctx, "tf32").error > 10 * check(ctx, "fp32").error


def test_a_wrong_tile_is_caught_on_the_gpu():
    ctx = run(WrongTileGemm, {"dtypes": "bf16"}, device="cuda")
    assert not check(ctx, "bf16").passed


def test_ceilings_measure_the_host_device_links():
    ctx = run(Ceilings, device="cuda")
    assert set(TRANSFERS) <= set(ctx.details["work"])
    assert {"memory", "matmul.bf16"} <= set(ctx.details["work"])
    assert all(c.passed for c in ctx.checks)
    # a link's ceiling is an upper bound too: its fastest call, not its median (v5)
    assert ctx.details["ceiling_statistic"] == dict.fromkeys(TRANSFERS, "fastest call")
    for t in TRANSFERS:
        rate = next(m for m in ctx.metrics if m["case"] == t and m["name"] == "gbps")
        assert rate["value"] == max(rate["samples"]) >= rate["statistics"]["median"]


def test_graph_replay_launches_faster_than_eager():
    ctx = run(Launch, device="cuda")
    eager = metric(ctx, "eager", "us_per_launch")["value"]
    graph = metric(ctx, "graph", "us_per_launch")["value"]
    print(f"launch: eager {eager:.2f} us, graph {graph:.2f} us per launch")
    assert graph < eager  # structural (one host call vs N), not a timing threshold


def test_attention_backends_run_or_say_why():
    ctx = run(Attention, device="cuda")
    assert set(ctx.details["work"]) | set(ctx.details["skipped_cases"]) == {"flash", "efficient", "cudnn", "math"}
    assert {"flash", "math"} <= set(ctx.details["work"]), ctx.details["skipped_cases"]
    ctx = run(Attention, {"causal": "true", "backends": "flash,math"}, device="cuda")
    assert all(c.passed for c in ctx.checks)


def test_fusion_eager_and_compile_run_on_the_gpu():
    ctx = run(Fusion, device="cuda")
    assert set(ctx.details["work"]) == {"eager", "compile"}, ctx.details["skipped_cases"]
    assert all(c.passed for c in ctx.checks)
    assert ctx.details["compile_s"] > 0
