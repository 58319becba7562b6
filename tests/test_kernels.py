"""The built-in kernel workloads on the CPU, driven through a real RunContext as the worker
drives them: quick presets run and verify, broken variants are caught, the declared work
matches hand-computed numbers, parameters parse, and the plugin module stays torch-free."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfsuite.context import RunContext  # noqa: E402
from perfsuite.controls import Controls, apply_seeds  # noqa: E402
from perfsuite.engine import params as params_mod  # noqa: E402
from perfsuite.engine.inprocess import run_workload  # noqa: E402
from perfsuite.measure.roofline import ceiling_table  # noqa: E402
from perfsuite.workloads.kernels import WORKLOADS, attention, gemm  # noqa: E402
from perfsuite.workloads.kernels.attention import Attention, attention_flops  # noqa: E402
from perfsuite.workloads.kernels.ceilings import Ceilings  # noqa: E402
from perfsuite.workloads.kernels.fusion import Fusion, fusion_bytes  # noqa: E402
from perfsuite.workloads.kernels.gemm import Gemm, MatmulOperands  # noqa: E402
from perfsuite.workloads.kernels.launch import Launch  # noqa: E402
from perfsuite.workloads.kernels.memory import Memory  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def make_ctx(cls, overrides: dict | None = None, quick: bool = True, device: str = "cpu") -> RunContext:
    apply_seeds(0, deterministic=False)
    p = params_mod.resolve(cls, overrides or {}, quick=quick)
    return RunContext(params=p, controls=Controls(device=device, iterations=3, warmup=1, min_time_s=None), quick=quick)


def run(cls, overrides: dict | None = None, quick: bool = True, device: str = "cpu") -> RunContext:
    """The workload as the worker runs it: perfsuite.engine.inprocess.run_workload."""
    p = params_mod.resolve(cls, overrides or {}, quick=quick)
    controls = Controls(device=device, iterations=3, warmup=1, min_time_s=None)
    return run_workload(cls, p, controls, quick=quick)


def metric(ctx: RunContext, case: str, name: str) -> dict:
    (m,) = [m for m in ctx.metrics if m["case"] == case and m["name"] == name]
    return m


def check(ctx: RunContext, label: str):
    (c,) = [c for c in ctx.checks if c.label == label]
    return c


# -- every quick preset, end to end on the CPU --------------------------------------------------
@pytest.mark.parametrize("cls", WORKLOADS, ids=lambda c: c.name)
def test_quick_preset_runs_and_verifies_on_cpu(cls):
    ctx = run(cls)
    work = ctx.details["work"]
    assert work, "no case ran"
    assert isinstance(ctx.details.get("skipped_cases", {}), dict)
    assert {c.label for c in ctx.checks} == set(work), "every case that ran is verified"
    failed = [c for c in ctx.checks if not c.passed]
    assert not failed, failed
    for case in work:
        assert metric(ctx, case, "time_ms")["value"] > 0
    assert not set(work) & set(ctx.details.get("skipped_cases", {}))


# -- gemm ------------------------------------------------------------------------------------------
def test_gemm_runs_each_cpu_dtype_and_skips_tf32_with_its_reason():
    ctx = run(Gemm, {"dtypes": "fp32,tf32,bf16,fp16"})
    assert set(ctx.details["work"]) == {"fp32", "bf16", "fp16"}
    assert ctx.details["skipped_cases"] == {"tf32": "tf32 is a GPU tensor-core mode"}
    assert all(c.passed for c in ctx.checks)
    assert metric(ctx, "fp16", "tflops")["roofline"]["resource"] == "matmul.fp16"
    assert check(ctx, "fp32").error < 1e-5


def test_gemm_is_unmet_when_no_requested_dtype_can_run():
    ctx = make_ctx(Gemm, {"dtypes": "tf32,fp8"})
    reason = Gemm(ctx.params).unmet(ctx)
    assert "tf32: tf32 is a GPU tensor-core mode" in reason
    assert "fp8:" in reason and "8.9" in reason


class WrongTileGemm(Gemm):
    """A kernel that gets one 64x64 output tile wrong (as a bad tile index would)."""

    def kernel(self, ops):
        def fn():
            ops.run()
            ops.out[64:128, 128:192] = 0

        return fn


class UnwrittenRowGemm(Gemm):
    """A kernel that never writes the last output row."""

    def kernel(self, ops):
        def fn():
            torch.matmul(ops.a[:-1], ops.b, out=ops.out[:-1])

        return fn


def test_gemm_verification_catches_a_wrong_tile():
    ctx = run(WrongTileGemm, {"dtypes": "fp32,bf16"})
    for label in ("fp32", "bf16"):
        c = check(ctx, label)
        assert not c.passed and c.error > 10 * c.tolerance, c


def test_gemm_verification_catches_an_unwritten_row_through_the_nan_poison():
    ctx = run(UnwrittenRowGemm, {"dtypes": "fp32"})
    c = check(ctx, "fp32")
    assert not c.passed and c.error == math.inf
    assert "256 of 65536 output elements are NaN" in c.detail


def test_gemm_fp8_path_builds_column_major_operands_and_verifies(monkeypatch):
    """The fp8 case (torch._scaled_mm, e4m3, unit scales) through this CPU torch, with the
    capability gate lifted: operand layout, the out= call and the float8 block sampling."""
    ops = MatmulOperands.random("fp8", 64, 48, 32, torch.device("cpu"))
    assert ops.b.stride() == (1, 32), "torch._scaled_mm needs B column-major"
    try:
        ops.run()
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"this torch has no CPU torch._scaled_mm: {exc}")
    monkeypatch.setattr(gemm, "matmul_unsupported", lambda dtype, device: None)
    ctx = run(Gemm, {"dtypes": "fp8", "m": 128, "n": 64, "k": 96})
    c = check(ctx, "fp8")
    assert c.passed and c.error < 1e-2, c
    assert ctx.details["work"]["fp8"]["bytes"] == 128 * 96 + 96 * 64 + 2 * 128 * 64


def test_tf32_and_fp32_precision_is_set_only_around_their_own_calls(monkeypatch):
    seen = []
    real = torch.matmul

    def spy(*args, **kwargs):
        seen.append((torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32))
        return real(*args, **kwargs)

    before = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
    monkeypatch.setattr(torch, "matmul", spy)
    for dtype in ("tf32", "fp32"):
        MatmulOperands.random(dtype, 8, 8, 8, torch.device("cpu")).run()
    assert seen == [("high", True), ("highest", False)]
    assert (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32) == before


# -- memory ----------------------------------------------------------------------------------------
class OneWrongElementCopy(Memory):
    def copy(self):
        super().copy()
        self.a[12345] += 1


class StaleTriad(Memory):
    """A triad that forgets the scalar (a = b + c)."""

    def triad(self):
        torch.add(self.b, self.c, out=self.a)


def test_memory_copy_with_one_wrong_element_fails():
    ctx = run(OneWrongElementCopy, {"ops": "copy"})
    c = check(ctx, "copy")
    assert not c.passed and c.error == 1.0


def test_memory_triad_with_the_wrong_formula_fails():
    ctx = run(StaleTriad, {"ops": "triad"})
    c = check(ctx, "triad")
    assert not c.passed and c.error > 0.1


# -- work accounting against hand-computed numbers ----------------------------------------------------
def test_gemm_work_and_throughput_match_hand_computed_numbers():
    ctx = run(Gemm, {"m": 64, "n": 32, "k": 16, "dtypes": "fp32,bf16"}, quick=False)
    assert ctx.details["work"]["fp32"] == {
        "flops": 2 * 64 * 32 * 16,
        "bytes": (64 * 16 + 16 * 32 + 64 * 32) * 4,
        "items": 0.0,
        "item_unit": "items",
    }
    assert ctx.details["work"]["bf16"]["bytes"] == (64 * 16 + 16 * 32 + 64 * 32) * 2
    # With 3 samples the median TFLOP/s is exactly the FLOPs over the median time.
    t_ms = metric(ctx, "fp32", "time_ms")["value"]
    assert metric(ctx, "fp32", "tflops")["value"] == pytest.approx(2 * 64 * 32 * 16 / (t_ms * 1e-3) / 1e12)


def test_memory_bytes_count_reads_and_writes():
    ctx = run(Memory, {"size_bytes": "4K"}, quick=False)
    assert ctx.details["work"]["copy"]["bytes"] == 2 * 4096
    assert ctx.details["work"]["triad"]["bytes"] == 3 * 4096
    t_ms = metric(ctx, "triad", "time_ms")["value"]
    assert metric(ctx, "triad", "gbps")["value"] == pytest.approx(3 * 4096 / (t_ms * 1e-3) / 1e9)
    assert metric(ctx, "copy", "gbps")["roofline"]["resource"] == "memory"


def test_attention_flops_and_bytes_and_the_causal_half():
    p = params_mod.resolve(Attention, {"batch": 2, "heads": 3, "seq_len": 64, "head_dim": 16}, quick=False)
    assert attention_flops(p) == 4 * 2 * 3 * 64 * 64 * 16
    causal = params_mod.resolve(
        Attention, {"batch": 2, "heads": 3, "seq_len": 64, "head_dim": 16, "causal": "true"}, quick=False
    )
    assert attention_flops(causal) == 2 * 2 * 3 * 64 * 64 * 16
    ctx = run(
        Attention,
        {"batch": 2, "heads": 3, "seq_len": 64, "head_dim": 16, "causal": "true", "backends": "math", "dtype": "fp32"},
        quick=False,
    )
    assert ctx.details["work"]["math"] == {
        "flops": 2 * 2 * 3 * 64 * 64 * 16,
        "bytes": 4 * 2 * 3 * 64 * 16 * 4,
        "items": 0.0,
        "item_unit": "items",
    }
    assert check(ctx, "math").passed


def test_fusion_bytes_are_inputs_once_and_output_once():
    p = params_mod.resolve(Fusion, {"rows": 10, "hidden": 8, "dtype": "bf16"}, quick=False)
    assert fusion_bytes(p) == (2 * 10 * 8 + 3 * 8 + 10 * 8) * 2


def test_launch_counts_launches_and_reports_microseconds_per_launch():
    ctx = run(Launch, {"launches": 50, "numel": 1})
    assert ctx.details["work"]["eager"]["items"] == 50
    assert ctx.details["work"]["eager"]["item_unit"] == "launches"
    t_ms = metric(ctx, "eager", "time_ms")["value"]
    assert metric(ctx, "eager", "us_per_launch")["value"] == pytest.approx(t_ms * 1e3 / 50)
    assert metric(ctx, "eager", "us_per_launch")["higher_is_better"] is False
    assert ctx.details["skipped_cases"] == {"graph": "CUDA graphs need a CUDA device"}


class OneLaunchShort(Launch):
    def chain(self):
        for _ in range(self.params.launches - 1):
            self.x.add_(1)


def test_launch_verification_catches_a_missing_launch():
    ctx = run(OneLaunchShort, {"launches": 20})
    c = check(ctx, "eager")
    assert not c.passed and c.error > 0


# -- attention -------------------------------------------------------------------------------------
def test_attention_records_why_a_backend_is_skipped():
    ctx = run(Attention)
    skipped = ctx.details["skipped_cases"]
    ran = set(ctx.details["work"])
    assert ran | set(skipped) == set(attention.BACKENDS)
    assert "math" in ran
    for backend, reason in skipped.items():
        assert reason.startswith(f"torch refused {backend} for bfloat16 [1, 2, 256, 64] on cpu: "), reason
        assert "RuntimeError" in reason, (backend, reason)
    assert metric(ctx, "math", "tflops")["roofline"]["resource"] == "matmul.bf16"


def test_attention_verification_catches_a_wrong_backend(monkeypatch):
    real = attention.sdpa_call

    def skewed(backend, q, k, v, causal):
        fn = real(backend, q, k, v, causal)
        return (lambda: fn() * 1.1) if backend == "math" and q.dtype == torch.bfloat16 else fn

    monkeypatch.setattr(attention, "sdpa_call", skewed)
    ctx = run(Attention, {"backends": "math"})
    c = check(ctx, "math")
    assert not c.passed and c.error == pytest.approx(0.1, rel=0.05)


def test_attention_is_unmet_when_no_backend_runs():
    ctx = make_ctx(Attention, {"backends": "efficient,cudnn"})
    reason = Attention(ctx.params).unmet(ctx)
    assert reason.startswith("no requested SDPA backend runs these inputs")
    assert "efficient:" in reason and "cudnn:" in reason


def test_show_renders_the_skipped_cases_of_a_record():
    """``perfsuite show`` renders ``details.skipped_cases`` in the host, for any workload."""
    from rich.console import Console
    from support.factories import make_record

    from perfsuite.analysis.tables import show_record, skipped_cases_table

    ctx = run(Attention)
    record = make_record(workload_name="kernels.attention", details=dict(ctx.details))
    console = Console(width=200, record=True)
    show_record(console, record, Attention)
    text = console.export_text()
    assert "cases not run" in text and "efficient" in text and "torch refused" in text
    assert skipped_cases_table({"details": {"skipped_cases": {}}}) is None
    assert skipped_cases_table({"details": {}}) is None


# -- fusion ----------------------------------------------------------------------------------------
def test_fusion_measures_the_hosts_chain_with_eager_as_the_baseline():
    """kernels.fusion times perfsuite.fused_chain (the definition perfsuite-triton's
    triton.fused_chain also times) and judges it by the host's float64 reference."""
    from perfsuite import fused_chain

    ctx = run(Fusion, {"impls": "eager", "dtype": "bf16", "rows": 32, "hidden": 64})
    (c,) = ctx.checks
    assert c.passed and c.tolerance == fused_chain.TOLERANCE["bf16"] and c.method == fused_chain.METHOD
    assert ctx.details["work"]["eager"]["bytes"] == fused_chain.bytes_per_call(32, 64, "bf16")
    with pytest.raises(params_mod.ParamError, match="'triton' is not one of"):
        params_mod.resolve(Fusion, {"impls": "eager,triton"}, quick=False)


def test_fusion_parameters_default_to_the_shape_both_fusers_can_fill():
    p = params_mod.resolve(Fusion, {}, quick=False)
    assert (p.rows, p.hidden, p.dtype) == (262144, 1024, "bf16")  # inductor's one-pass limit is 1024
    assert p.compile_mode == "max-autotune-no-cudagraphs"
    assert params_mod.resolve(Fusion, {}, quick=True).compile_mode == "default"
    for bad in ({"rows": "0"}, {"compile_mode": "fast"}):
        with pytest.raises(params_mod.ParamError):
            params_mod.resolve(Fusion, bad, quick=False)


def test_fusion_compile_records_compile_time_and_matches_eager():
    ctx = run(Fusion, {"impls": "eager,compile", "dtype": "fp32", "rows": 64, "hidden": 256})
    assert ctx.details["compile_s"] > 0 and ctx.details["compile_mode"] == "default"
    assert all(c.passed for c in ctx.checks) and {c.label for c in ctx.checks} == {"eager", "compile"}


# -- ceilings --------------------------------------------------------------------------------------
def test_ceilings_on_cpu_measure_the_cpu_resources_and_say_why_not_the_rest():
    ctx = run(Ceilings)
    assert set(ctx.details["work"]) == {"matmul.fp32", "matmul.bf16", "memory"}
    assert set(ctx.details["skipped_cases"]) == {
        "matmul.tf32",
        "matmul.fp16",
        "matmul.fp8",
        "h2d.pinned",
        "h2d.pageable",
        "d2h.pinned",
        "d2h.pageable",
    }
    assert ctx.details["skipped_cases"]["h2d.pinned"] == "host<->device transfers need a CUDA device"
    assert all(c.passed for c in ctx.checks)
    # The runner's ceiling lookup finds one figure per measured resource, in the right unit.
    table = ceiling_table({"metrics": ctx.metrics})
    assert {r: m["unit"] for r, m in table.items()} == {
        "matmul.fp32": "TFLOP/s",
        "matmul.bf16": "TFLOP/s",
        "memory": "GB/s",
    }
    assert all(m["roofline"] is None for m in ctx.metrics), "a ceiling is not judged against a ceiling"
    # Best over shapes and regimes: the ceiling is the fastest single call of any run, the best
    # burst's or the sustained one's (an upper bound, v4); the work recorded is that run's shape's.
    for resource, c in ctx.details["ceilings"].items():
        best = max(c["burst"]["value"], c["sustained"]["value"])
        assert table[resource]["value"] == pytest.approx(c["value"]) == pytest.approx(max(table[resource]["samples"]))
        assert c["value"] >= best
        name = c["metric"]
        for regime in ("burst", "sustained"):
            calls = next(m["samples"] for m in ctx.metrics if m["case"] == resource and m["name"] == f"{regime}_{name}")
            assert c["value"] == pytest.approx(max(c["value"], max(calls))), (resource, regime)
        assert c["burst"]["value"] == max(c["burst"]["by_shape"].values())
        # the best shape's burst again, twice by default (v6): each a candidate
        assert len(c["burst"]["again"]) == 2 and all(0 < a["fastest"] <= c["value"] for a in c["burst"]["again"])
        # matmuls: every shape's burst with the other L2 setting is a candidate too (v8)
        other = c["burst"]["other_l2"]
        if resource == "memory":
            assert other is None
        else:
            assert other["regime"] == "burst (L2 flushed)"
            assert set(other["by_shape"]) == set(c["burst"]["by_shape"])
            assert all(0 < o["fastest"] <= c["value"] for o in other["by_shape"].values())
        assert set(c["burst"]["by_shape"]) == (
            {"128x128x128", "256x256x256", "512x512x512"}
            if resource != "memory"
            else {f"{kind} {n} B" for kind in ("copy", "triad") for n in (64 * 1024, 1024**2, 16 * 1024**2)}
        )
    # memory: the fastest of copy (2 x size bytes) and triad (3 x size), so that it bounds both (v7)
    pattern, size = ctx.details["ceilings"]["memory"]["shape"].split()[:2]
    assert ctx.details["work"]["memory"]["bytes"] == {"copy": 2, "triad": 3}[pattern] * int(size)


# -- parameters and import cost --------------------------------------------------------------------
def test_params_parse_with_types_suffixes_and_choices():
    p = params_mod.resolve(Gemm, {"m": "1K", "dtypes": "fp32,bf16"}, quick=False)
    assert (p.m, p.n, p.dtypes) == (1024, 8192, ("fp32", "bf16"))
    assert params_mod.resolve(Gemm, {}, quick=True).m == 256
    assert params_mod.resolve(Memory, {"size_bytes": "64M"}, quick=False).size_bytes == 64 * 1024**2
    assert params_mod.resolve(Attention, {"causal": "yes"}, quick=False).causal is True
    with pytest.raises(params_mod.ParamError, match="'int8' is not one of"):
        params_mod.resolve(Gemm, {"dtypes": "bf16,int8"}, quick=False)
    with pytest.raises(params_mod.ParamError, match="must be positive"):
        params_mod.resolve(Gemm, {"m": "0"}, quick=False)
    with pytest.raises(params_mod.ParamError, match="unknown parameter 'dtype'"):
        params_mod.resolve(Gemm, {"dtype": "bf16"}, quick=False)


def test_importing_the_kernel_plugin_does_not_import_torch():
    code = (
        "import sys, workloads.kernels\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
        "assert len(workloads.kernels.WORKLOADS) == 6\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
