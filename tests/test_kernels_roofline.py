"""``perfsuite roofline``: the placement math on synthetic records with hand-computed
answers, the plot files, and the command against a real SQLite registry."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta

import click
import pytest
from support.factories import DEFAULT_START, make_metric, make_record

from perfsuite.analysis.roofline_plot import plot
from perfsuite.analysis.roofline_report import Roof, kernel_records, place, report
from perfsuite.cli.roofline import require_matplotlib
from perfsuite.measure.roofline import roofline_metric_name
from tests.conftest import run_cli

GPU_KEY = "00aa00aa00aa00aa"
PEAK_BF16 = 800.0  # TFLOP/s
MEMORY_GBPS = 4000.0  # ridge of bf16: 800e12 / 4000e9 = 200 FLOP/B


def _roofline_block(resource: str) -> dict:
    return {
        "resource": resource,
        "fraction": None,
        "ceiling": None,
        "ceiling_unit": None,
        "ceiling_run_id": None,
        "reason": "not yet resolved",
    }


def ceilings_record(device_key: str = GPU_KEY, **figures: float) -> dict:
    figures = figures or {"matmul.bf16": PEAK_BF16, "memory": MEMORY_GBPS}
    metrics = []
    for resource, value in figures.items():
        name, unit = ("tflops", "TFLOP/s") if resource.startswith("matmul.") else ("gbps", "GB/s")
        metrics.append(make_metric(resource, "time_ms", "ms", [1.0, 1.0, 1.0], higher_is_better=False))
        metrics.append(make_metric(resource, name, unit, [value] * 3, higher_is_better=True))
    return make_record(
        workload_name="kernels.ceilings",
        params={"matmul_size": 8192},
        device="cuda",
        device_key=device_key,
        metrics=metrics,
        started_at=DEFAULT_START,
    )


def kernel_record(
    name: str,
    cases: dict[str, dict],
    *,
    work: dict | None,
    minutes: int = 1,
    params: dict | None = None,
    verification: str = "passed",
    device_key: str = GPU_KEY,
) -> dict:
    """cases: label -> {"tflops": v, "gbps": v, "resource": r}; work: label -> {"flops", "bytes"}."""
    metrics = []
    for label, figs in cases.items():
        metrics.append(make_metric(label, "time_ms", "ms", [1.0] * 3, higher_is_better=False))
        for metric_name, unit in (("tflops", "TFLOP/s"), ("gbps", "GB/s")):
            if metric_name in figs:
                judged = roofline_metric_name(figs["resource"]) == metric_name
                metrics.append(
                    make_metric(
                        label,
                        metric_name,
                        unit,
                        [figs[metric_name]] * 3,
                        higher_is_better=True,
                        roofline=_roofline_block(figs["resource"]) if judged else None,
                    )
                )
    details = {"work": {k: {**v, "items": 0.0, "item_unit": "items"} for k, v in work.items()}} if work else {}
    return make_record(
        workload_name=name,
        params=params or {"case": name},
        device="cuda",
        device_key=device_key,
        metrics=metrics,
        details=details,
        verification=verification,
        started_at=DEFAULT_START + timedelta(minutes=minutes),
    )


N = 8192
GEMM_WORK = {"flops": 2.0 * N**3, "bytes": 3.0 * N * N * 2}


def gemm_record(**kw) -> dict:
    return kernel_record(
        "kernels.gemm",
        {"bf16": {"tflops": 600.0, "gbps": 600.0 * 1e3 / (N / 3), "resource": "matmul.bf16"}},
        work={"bf16": GEMM_WORK},
        **kw,
    )


def memory_record(**kw) -> dict:
    return kernel_record(
        "kernels.memory",
        {"copy": {"gbps": 3000.0, "resource": "memory"}, "triad": {"gbps": 3400.0, "resource": "memory"}},
        work={"copy": {"flops": 0.0, "bytes": 2.0 * 2**30}, "triad": {"flops": 0.0, "bytes": 3.0 * 2**30}},
        minutes=2,
        **kw,
    )


def test_roof_reads_peaks_and_bandwidths_from_the_ceilings_record():
    roof = Roof.from_record(
        ceilings_record(**{"matmul.bf16": 800.0, "matmul.fp8": 1600.0, "memory": 4000.0, "h2d.pinned": 55.0})
    )
    assert roof.peaks_tflops == {"matmul.bf16": 800.0, "matmul.fp8": 1600.0}
    assert roof.bandwidths_gbps == {"memory": 4000.0, "h2d.pinned": 55.0}
    assert roof.ridge("matmul.bf16") == pytest.approx(200.0)
    assert roof.ridge("matmul.fp32") is None


def test_a_large_gemm_is_compute_bound_under_its_dtype_peak():
    (p,) = place(gemm_record(), Roof.from_record(ceilings_record()))
    assert p.intensity == pytest.approx(N / 3)  # 2 N^3 / (3 N^2 * 2 bytes)
    assert (p.bound, p.roof, p.roof_unit) == ("compute", PEAK_BF16, "TFLOP/s")
    assert p.fraction == pytest.approx(600.0 / 800.0)


def test_a_low_intensity_kernel_is_memory_bound_under_the_slope():
    rec = kernel_record(
        "kernels.attention",
        {"flash": {"tflops": 30.0, "resource": "matmul.bf16"}},
        work={"flash": {"flops": 1e9, "bytes": 1e8}},
    )
    (p,) = place(rec, Roof.from_record(ceilings_record()))
    assert p.intensity == pytest.approx(10.0)
    assert p.bound == "memory"
    assert p.roof == pytest.approx(10.0 * MEMORY_GBPS / 1e3)  # 40 TFLOP/s, under the 800 peak
    assert p.fraction == pytest.approx(30.0 / 40.0)


def test_cases_without_flops_sit_at_intensity_zero_and_are_judged_by_bandwidth():
    copy, triad = place(memory_record(), Roof.from_record(ceilings_record()))
    assert (copy.intensity, copy.bound, copy.roof, copy.roof_unit) == (0.0, "memory", MEMORY_GBPS, "GB/s")
    assert copy.fraction == pytest.approx(0.75)
    assert copy.bandwidth_only and triad.fraction == pytest.approx(0.85)


def test_intensity_falls_back_to_the_metrics_without_recorded_work():
    rec = kernel_record(
        "kernels.thirdparty", {"k": {"tflops": 500.0, "gbps": 1000.0, "resource": "matmul.bf16"}}, work=None
    )
    (p,) = place(rec, Roof.from_record(ceilings_record()))
    assert p.intensity == pytest.approx(500.0)  # 500e12 FLOP/s / 1000e9 B/s
    assert p.note == "intensity from the TFLOP/s and GB/s metrics"
    assert (p.bound, p.fraction) == ("compute", pytest.approx(500.0 / 800.0))


def test_a_dtype_without_a_measured_peak_is_judged_by_the_slope_and_says_so():
    rec = kernel_record(
        "kernels.gemm", {"fp8": {"tflops": 100.0, "resource": "matmul.fp8"}}, work={"fp8": {"flops": 1e9, "bytes": 1e7}}
    )
    (p,) = place(rec, Roof.from_record(ceilings_record()))
    assert p.bound == "memory" and p.roof == pytest.approx(100.0 * MEMORY_GBPS / 1e3)
    assert "no 'matmul.fp8' peak" in p.note


def test_only_verified_kernel_runs_other_than_the_ceilings_are_placed():
    good = gemm_record()
    records = [
        good,
        ceilings_record(),
        gemm_record(verification="failed"),
        make_record(workload_name="collectives.all_reduce", device="cuda", device_key=GPU_KEY),
    ]
    assert kernel_records(records) == [good]
    data = report(records, ceilings_record())
    assert [(p["workload"], p["case"]) for p in data["points"]] == [("kernels.gemm", "bf16")]
    json.dumps(data)  # the --json output is plain JSON


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_is_written(tmp_path, suffix):
    pytest.importorskip("matplotlib")
    data = report([gemm_record(), memory_record()], ceilings_record())
    out = tmp_path / f"roof{suffix}"
    plot(data, out)
    body = out.read_bytes()
    assert len(body) > 10_000
    assert body.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in body[:2000]
    if suffix == ".svg":
        text = body.decode()
        assert "gemm:bf16 75%" in text and "memory:copy" in text


def test_a_missing_matplotlib_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(click.ClickException) as info:
        require_matplotlib()
    assert info.value.message == "plotting needs matplotlib: pip install 'perfsuite[plot]'"


# -- the command against a real registry ------------------------------------------------------------
@pytest.fixture
def stored(perfsuite_env):
    from perfsuite.registry import open_registry

    records = {"ceilings": ceilings_record(), "gemm": gemm_record(), "memory": memory_record()}
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for r in records.values():
            assert reg.store(r) == "stored"
    return records


def test_roofline_command_json(perfsuite_env, stored):
    proc = run_cli(perfsuite_env, "roofline", "--json", check=True)
    data = json.loads(proc.stdout)
    assert data["ceilings_run_id"] == stored["ceilings"]["run_id"]
    points = {(p["workload"], p["case"]): p for p in data["points"]}
    assert set(points) == {("kernels.gemm", "bf16"), ("kernels.memory", "copy"), ("kernels.memory", "triad")}
    assert points[("kernels.gemm", "bf16")]["fraction"] == pytest.approx(0.75)
    assert points[("kernels.memory", "copy")]["intensity"] == 0


def test_roofline_command_table_runs_and_plot(perfsuite_env, stored, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "roof.svg"
    proc = run_cli(perfsuite_env, "roofline", "--run", stored["gemm"]["run_id"], "--out", str(out), check=True)
    assert "kernels.gemm" in proc.stdout and "75.0%" in proc.stdout and "compute" in proc.stdout
    assert "kernels.memory" not in proc.stdout
    assert out.stat().st_size > 10_000


def test_roofline_command_without_ceilings_says_what_to_run(perfsuite_env, stored):
    proc = run_cli(perfsuite_env, "roofline", "--device-key", "11bb11bb11bb11bb")
    assert proc.returncode == 1
    assert "no passed kernels.ceilings run of device 11bb11bb11bb11bb" in proc.stderr
    assert "perfsuite run kernels.ceilings" in proc.stderr


def test_roofline_command_refuses_an_unknown_plot_format(perfsuite_env, stored, tmp_path):
    proc = run_cli(perfsuite_env, "roofline", "--out", str(tmp_path / "roof.pdf"))
    assert proc.returncode == 2 and "must end in .png or .svg" in proc.stderr


def test_a_system_page_names_each_roofline_point_by_its_table_and_record(tmp_path):
    """Two GEMM shapes of one case on one system: the system page's roofline table says which
    shape each point is (its table's settings) and links its record, as the results table does."""
    from perfsuite.publish.leaderboard import build_site
    from perfsuite.registry import open_registry

    big = gemm_record(params={"m": 8192}, minutes=1)
    small = gemm_record(params={"m": 1024}, minutes=2)
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for record in (ceilings_record(), big, small):
            reg.store(record)
        build_site(reg, tmp_path / "site")
    (page,) = [p.read_text() for p in (tmp_path / "site" / "systems").glob("*.html")]
    table = page.split('id="roofline-chart"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]  # after the header
    assert len(rows) == 2
    for record, shape in ((big, "8192"), (small, "1024")):
        (row,) = [r for r in rows if f"record.html#{record['run_id']}" in r]
        assert re.search(rf"<td>kernels.gemm</td><td>[^<]*\bm {shape}</td><td>bf16</td>", row), row
