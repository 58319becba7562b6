"""Profile summaries (PyTorch profiler on the CPU, ncu's CSV on captured output) and cost
per result."""

from __future__ import annotations

import pytest

from perfsuite.measure import profiling
from perfsuite.schemas import cost

# ncu 2025 --csv --metrics ... output for two launches of one GEMM kernel and one copy.
NCU_CSV = """==PROF== Connected to process 5120 (/usr/bin/python3.12)
==PROF== Profiling "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN" - 0: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 5120
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","10.12"
"0","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,650.30"
"0","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","88.50"
"1","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","9.88"
"1","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.6497"
"1","5120","python3.12","127.0.0.1","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","88.70"
"2","5120","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.00"
"2","5120","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","3,300"
"2","5120","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.00"
"""


def test_ncu_csv_summary():
    top = profiling.parse_ncu_csv(NCU_CSV)
    gemm, fill = top
    assert gemm["name"].startswith("nvjet_hsh") and gemm["calls"] == 2
    assert gemm["total_us"] == pytest.approx(1650.3 + 1649.7)
    assert gemm["memory_throughput_pct"] == pytest.approx(10.0)
    assert gemm["sm_throughput_pct"] == pytest.approx(88.6)
    assert fill["total_us"] == pytest.approx(3.3) and fill["calls"] == 1
    assert gemm["share"] + fill["share"] == pytest.approx(1.0)


def test_ncu_csv_without_header_is_an_error():
    with pytest.raises(ValueError, match="no ncu CSV header"):
        profiling.parse_ncu_csv("==PROF== ERROR: profiling is not supported on this device\n")


def test_torch_profile_on_the_cpu_names_the_operator(tmp_path):
    torch = pytest.importorskip("torch")
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    summary = profiling.capture_torch(lambda: a @ b, "cpu", tmp_path / "trace.json")
    assert summary["top"][0]["name"] == "aten::mm"
    assert (tmp_path / "trace.json").stat().st_size > 0


def test_unavailable_reasons():
    assert "needs --device cuda" in profiling.unavailable_reason("ncu", "cpu")
    assert "unknown profiler" in profiling.unavailable_reason("nsys", "cuda")
    assert profiling.unavailable_reason("torch", "cpu") is None


def test_cost_per_million_items_and_per_run():
    metrics = [
        {"case": "gpt", "name": "items_per_s", "unit": "tokens/s", "value": 50_000.0},
        {"case": "gpt", "name": "time_to_target_s", "unit": "s", "value": 1800.0},
        {"case": "gpt", "name": "tflops", "unit": "TFLOP/s", "value": 400.0},
    ]
    section = cost.cost_section(metrics, price_per_hour=3.6, accelerators=2, source="--price-per-hour")
    lines = {line["metric"]: line for line in section["lines"]}
    # 2 accelerators x 3.6 USD/h = 0.002 USD/s; a million tokens take 20 s
    assert lines["items_per_s"]["usd"] == pytest.approx(0.04) and lines["items_per_s"]["per"] == "1M tokens"
    assert lines["time_to_target_s"]["usd"] == pytest.approx(3.6) and lines["time_to_target_s"]["per"] == "run"
    assert "tflops" not in lines
    with pytest.raises(ValueError):
        cost.cost_section(metrics, price_per_hour=-1, accelerators=1, source="x")
