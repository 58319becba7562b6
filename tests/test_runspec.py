"""The typed run boundary and the record's verdict, without processes: one JSON form each
for what goes to the worker and what comes back, and the controls a record states."""

from __future__ import annotations

import pytest

from perfsuite.controls import TIMING_CONTROLS, Controls, as_applied
from perfsuite.engine.record import verdict
from perfsuite.engine.runspec import RunSpec, WorkerResult


def test_run_spec_and_worker_result_round_trip_through_their_json():
    spec = RunSpec(
        run_id="a" * 32,
        workload="kernels.gemm",
        params={"m": 8, "dtypes": ["bf16"]},
        quick=True,
        controls=Controls(device="cuda", seed=3, iterations=5),
        workdir="/tmp/x",
        result_path="/tmp/x/result.json",
    )
    assert RunSpec.from_json(spec.to_json()) == spec
    result = WorkerResult(
        status="success",
        started_at="t0",
        finished_at="t1",
        metrics=[{"name": "tflops"}],
        checks=[],
        details={"k": 1},
        environment={"host": "h"},
        backend="gloo",
    )
    assert WorkerResult.from_json(result.to_json()) == result


def test_a_worker_result_with_an_unknown_status_or_field_is_refused():
    with pytest.raises(ValueError, match="worker status 'splendid'"):
        WorkerResult(status="splendid", started_at="t0", finished_at="t1")
    with pytest.raises(TypeError):
        WorkerResult.from_json('{"status": "success", "started_at": "t0", "finished_at": "t1", "extra": 1}')


def _check(passed: bool, **kw) -> dict:
    return {
        "label": "sum",
        "passed": passed,
        "method": "closed form",
        "error": None,
        "tolerance": None,
        "detail": "",
        **kw,
    }


@pytest.mark.parametrize(
    "status, checks, expected",
    [
        ("success", [_check(True)], ("success", "passed", None)),
        ("success", [], ("success", "skipped", None)),
        (
            "success",
            [_check(False, error=0.5, tolerance=0.01)],
            ("invalid", "failed", "verification failed: sum (closed form): error 0.5 > tolerance 0.01"),
        ),
        ("failed", [_check(False, detail="3 wrong")], ("failed", "failed", "boom")),
    ],
)
def test_a_run_whose_verification_failed_is_invalid(status, checks, expected):
    result = WorkerResult(
        status=status, started_at="t0", finished_at="t1", checks=checks, error="boom" if status == "failed" else None
    )
    assert verdict(result) == expected


def test_records_state_only_the_timing_controls_a_workload_honours():
    c = Controls(warmup=3, iterations=7, l2_flush=True)
    full = as_applied(c, TIMING_CONTROLS)
    assert full["not_applied"] == [] and full["iterations"] == 7 and full["l2_flush"] is True
    sweep = as_applied(c, ("warmup", "cuda_graph"))
    assert sweep["not_applied"] == ["iterations", "min_time_s", "max_iterations", "l2_flush"]
    assert sweep["warmup"] == 3 and sweep["cuda_graph"] is False
    assert all(sweep[name] is None for name in sweep["not_applied"])
    with pytest.raises(ValueError, match="unknown timing controls"):
        as_applied(c, ("warmup", "speed"))


def test_collectives_declare_the_controls_their_sweep_applies():
    from perfsuite.workloads.collectives.collective import AllReduce

    assert AllReduce.controls_honoured == ("warmup", "cuda_graph")
