"""Ceilings are upper bounds (``perfsuite.measure.roofline``, ``perfsuite.analysis.figures``,
``perfsuite.analysis.roofline_report``): a figure above its measured ceiling is never shown
above 100% but as an understated ceiling, the quick kernels stay under the ceilings measured
beside them, and the share of the datasheet peak is shown next to the measured ceiling."""

from __future__ import annotations

import re

from perfsuite.analysis import figures


def record_with(metrics, throttle=None, workload="kernels.gemm", device="NVIDIA H200"):
    return {
        "workload": {"name": workload},
        "environment": {"measured_device": {"name": device}},
        "details": {"throttle": throttle or {}},
        "metrics": metrics,
    }


def roofed(fraction, resource="matmul.bf16", value=700.0):
    return {
        "case": "bf16",
        "name": "tflops",
        "value": value,
        "unit": "TFLOP/s",
        "roofline": {
            "resource": resource,
            "fraction": fraction,
            "ceiling": value / fraction if fraction else None,
            "ceiling_unit": "TFLOP/s",
            "ceiling_run_id": "abcdef0123456789",
            "reason": None,
        },
    }


def test_a_result_above_its_ceiling_is_never_shown_above_100_percent():
    over = roofed(1.085)
    cell = figures.ceiling_cell(over)
    assert "108" not in cell and "understated" in cell and "abcdef01" in cell and "kernels.ceilings" in cell
    assert figures.ceiling_cell(roofed(0.873)) == "87.3% matmul.bf16"
    assert "87.3% of matmul.bf16" in figures.ceiling_cell(roofed(0.873), long=True)


def test_percent_of_spec_beside_the_measured_ceiling_for_known_devices():
    m = roofed(0.9, value=773.0)
    assert figures.spec_cell(record_with([m]), m) == f"{773.0 / 989.5 * 100:.1f}% of H200 SXM"
    assert figures.spec_cell(record_with([m], device="Intel Xeon"), m) == ""
    ceiling = {"case": "memory", "name": "gbps", "value": 4240.0, "unit": "GB/s", "roofline": None}
    assert figures.spec_cell(record_with([ceiling], workload="kernels.ceilings"), ceiling) == "88.3% of H200 SXM"


def test_the_quick_kernels_never_exceed_their_ceilings_as_shown():
    """kernels.ceilings then the quick kernels it judges, in process, as the runner resolves
    them: every fraction is at most 100% or shown as an understated ceiling. The ceiling is
    the best over shapes (sizes) and over burst and sustained."""
    from test_kernels import run

    from perfsuite.measure.roofline import resolve
    from perfsuite.workloads.kernels.ceilings import Ceilings
    from perfsuite.workloads.kernels.gemm import Gemm
    from perfsuite.workloads.kernels.memory import Memory

    ceil = run(Ceilings)
    ceilings_record = {"run_id": "c" * 32, "metrics": ceil.metrics}
    for _resource, c in ceil.details["ceilings"].items():
        assert c["value"] >= max(c["burst"]["by_shape"].values())
        assert c["value"] >= c["sustained"]["value"]
    shown = []
    for cls, overrides in ((Gemm, {"dtypes": "fp32,bf16"}), (Memory, {})):
        ctx = run(cls, overrides)
        resolve(ctx.metrics, [ceilings_record], cls.name)
        for m in ctx.metrics:
            if m["roofline"] and m["roofline"]["fraction"] is not None:
                cell = figures.ceiling_cell(m)
                shown.append((cls.name, m["case"], m["roofline"]["fraction"], cell))
                if m["roofline"]["fraction"] > 1:
                    assert "understated" in cell
    assert len(shown) == 4, shown
    for *_, cell in shown:
        pct = re.match(r"([\d.]+)%", cell)
        assert pct is None or float(pct.group(1)) <= 100.0, shown
    print("\n".join(f"{n} {c}: {f:.1%}" for n, c, f, _ in shown))


def test_the_roofline_table_never_shows_a_point_above_its_roof():
    from rich.console import Console

    from perfsuite.analysis.roofline_report import render_table

    point = {
        "workload": "kernels.gemm",
        "case": "bf16",
        "intensity": 1365.0,
        "tflops": 800.0,
        "gbps": 586.0,
        "bound": "compute",
        "roof": 700.0,
        "roof_unit": "TFLOP/s",
        "fraction": 800 / 700,
        "run_id": "a" * 32,
        "note": "",
    }
    console = Console(record=True, width=300)
    console.print(render_table({"device": "NVIDIA H200", "ceilings_run_id": "c" * 32, "points": [point]}))
    text = console.export_text()
    assert "114" not in text and "ceiling understated: redo kernels.ceilings (run cccccccc)" in text
