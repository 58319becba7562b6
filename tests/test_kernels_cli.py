"""The kernel workloads through the real CLI: runner, measuring subprocess, registry and
roofline fractions, then ``perfsuite roofline`` on what was stored."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


def test_run_ceilings_gemm_memory_then_roofline(cli):
    proc = cli(
        "run",
        "kernels.ceilings",
        "kernels.gemm",
        "kernels.memory",
        "--quick",
        "--device",
        "cpu",
        "--json",
        timeout=600,
        check=True,
    )
    records = {r["workload"]["name"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"kernels.ceilings", "kernels.gemm", "kernels.memory"}
    for r in records.values():
        assert (r["status"], r["verification"]["status"]) == ("success", "passed"), r["error"]
        assert r["details"]["work"]
    ceilings = records["kernels.ceilings"]
    assert "h2d.pinned" in ceilings["details"]["skipped_cases"]
    # The runs after the ceilings got their roofline fractions from it.
    gemm_tflops = next(m for m in records["kernels.gemm"]["metrics"] if m["name"] == "tflops")
    assert gemm_tflops["roofline"]["resource"] == "matmul.bf16"
    assert gemm_tflops["roofline"]["ceiling_run_id"] == ceilings["run_id"]
    assert gemm_tflops["roofline"]["fraction"] > 0
    copy_gbps = next(m for m in records["kernels.memory"]["metrics"] if m["case"] == "copy" and m["name"] == "gbps")
    assert copy_gbps["roofline"]["resource"] == "memory" and copy_gbps["roofline"]["fraction"] > 0

    data = json.loads(cli("roofline", "--json", check=True).stdout)
    assert data["ceilings_run_id"] == ceilings["run_id"]
    points = {(p["workload"], p["case"]): p for p in data["points"]}
    assert set(points) == {("kernels.gemm", "bf16"), ("kernels.memory", "copy"), ("kernels.memory", "triad")}
    gemm = points[("kernels.gemm", "bf16")]
    assert gemm["intensity"] == pytest.approx(2 * 256**3 / (3 * 256 * 256 * 2))
    assert gemm["bound"] in ("memory", "compute") and gemm["fraction"] > 0
    assert points[("kernels.memory", "copy")]["intensity"] == 0


def test_a_full_run_is_never_judged_against_a_quick_ceilings_run(cli):
    cli("run", "kernels.ceilings", "--quick", "--device", "cpu", timeout=600, check=True)
    proc = cli(
        "run", "kernels.gemm", "--device", "cpu", "-p", "m=128", "-p", "n=128", "-p", "k=128", "--json", check=True
    )
    (gemm,) = json.loads(proc.stdout)
    tflops = next(m for m in gemm["metrics"] if m["name"] == "tflops")
    assert tflops["roofline"]["fraction"] is None and tflops["roofline"]["ceiling_run_id"] is None
    assert "a quick run's ceilings judge only quick runs" in tflops["roofline"]["reason"]
