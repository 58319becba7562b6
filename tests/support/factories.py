"""Builders of schema-valid run records for tests: ``make_record(**overrides)``.

The records look like what the runner writes (same fields, statistics computed by
``perfsuite.measure.stats`` from raw samples, a correct ``sha256``), so tests of the registry, the CLI,
comparisons and the leaderboard all exercise real-shaped data.

Keyword arguments name the things tests usually vary (workload name, params, device,
host, start time, status, verification). Any other keyword is a top-level record key:
a dict value is merged into that section (``environment={"host": "b"}``), anything else
replaces it. The sha256 is computed last, unless ``sha256=`` is given. After mutating a
record by hand, call :func:`sign` to give it a correct hash again.
"""

from __future__ import annotations

import copy
import hashlib
import uuid as uuidlib
from datetime import UTC, datetime, timedelta

from perfsuite.measure import stats
from perfsuite.schemas.canonical import record_sha256
from perfsuite.schemas.comparability import comparability_key

DEFAULT_START = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)
H200 = {"name": "NVIDIA H200", "memory_bytes": 150_754_820_096, "sm_count": 132, "compute_capability": "9.0"}


def make_device_key(kind: str, name: str, uuid: str | None) -> str:
    """A measured-device key as 16 hex digits (what the schema's pattern allows)."""
    return hashlib.sha256(f"{kind}|{name}|{uuid}".encode()).hexdigest()[:16]


def make_metric(
    case: str,
    name: str,
    unit: str,
    samples: list[float],
    *,
    higher_is_better: bool,
    roofline: dict | None = None,
    aggregate: str = "rank0",
) -> dict:
    summary = stats.summarize(samples)
    return {
        "case": case,
        "name": name,
        "unit": unit,
        "value": summary["median"],
        "higher_is_better": higher_is_better,
        "samples": [float(s) for s in samples],
        "statistics": summary,
        "aggregate": aggregate,
        "per_rank": None,
        "roofline": roofline,
    }


def gemm_metrics(
    case: str = "bf16",
    time_ms: tuple[float, ...] = (1.02, 1.00, 1.01, 1.05, 0.99),
    flops: float = 2 * 1024**3,
    resource: str = "matmul.bf16",
) -> list[dict]:
    """time_ms then tflops for one case, the tflops judged against ``resource``."""
    tflops = [flops / (t * 1e-3) / 1e12 for t in time_ms]
    roofline = {
        "resource": resource,
        "fraction": None,
        "ceiling": None,
        "ceiling_unit": None,
        "ceiling_run_id": None,
        "reason": "no kernels.ceilings record for this device",
    }
    return [
        make_metric(case, "time_ms", "ms", list(time_ms), higher_is_better=False),
        make_metric(case, "tflops", "TFLOP/s", tflops, higher_is_better=True, roofline=roofline, aggregate="min"),
    ]


def _gpu(index: int, host: str) -> dict:
    uuid = "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{host}/{index}"))
    return {"index": index, "uuid": uuid, "driver": "580.95.05", "ecc_enabled": True, "mig_enabled": False, **H200}


def _observation(index: int) -> dict:
    return {
        "index": index,
        "sm_clock_mhz": 1980,
        "max_sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201,
        "power_w": 118.5,
        "power_limit_w": 700.0,
        "temperature_c": 34,
        "throttle_reasons": [],
        "energy_mj": 123_456_789,
        "processes": [],
    }


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def sign(record: dict) -> dict:
    """Set the record's sha256 to the hash of its current content; returns the record."""
    record["sha256"] = record_sha256(record)
    return record


def make_record(
    *,
    workload_name: str = "kernels.gemm",
    version: int = 1,
    category: str | None = None,
    params: dict | None = None,
    device: str = "cpu",
    device_key: str | None = None,
    host: str = "testhost",
    gpu_count: int = 1,
    started_at: datetime | str | None = None,
    status: str = "success",
    verification: str = "passed",
    metrics: list[dict] | None = None,
    run_id: str | None = None,
    **overrides,
) -> dict:
    """A complete, schema-valid run record with a correct sha256 (see the module docstring)."""
    params = {"m": 1024, "n": 1024, "k": 1024, "dtype": "bf16"} if params is None else params
    category = category or workload_name.split(".")[0]
    if isinstance(started_at, str):
        start_text = started_at
        finish_text = started_at
    else:
        start = started_at or DEFAULT_START
        start_text = start.isoformat()
        finish_text = (start + timedelta(seconds=7.5)).isoformat()
    gpus = [_gpu(i, host) for i in range(gpu_count)] if device == "cuda" else []
    if device == "cuda":
        measured = {"kind": "cuda", "name": gpus[0]["name"], "uuid": gpus[0]["uuid"]}
    else:
        measured = {"kind": "cpu", "name": "AMD EPYC 9654 96-Core Processor", "uuid": None}
    measured["key"] = device_key or make_device_key(measured["kind"], measured["name"], measured["uuid"])
    if metrics is None:
        metrics = gemm_metrics() if status == "success" else []
    checks = (
        []
        if verification == "skipped"
        else [
            {
                "label": "bf16",
                "passed": verification == "passed",
                "method": "allclose vs fp64 reference",
                "error": 2.4e-3 if verification == "passed" else 0.31,
                "tolerance": 1e-2,
                "detail": "",
            }
        ]
    )
    record = {
        "schema_version": "1.0",
        "run_id": run_id or uuidlib.uuid4().hex,
        "started_at": start_text,
        "finished_at": finish_text,
        "status": status,
        "error": None if status in ("success", "skipped") else f"workload {status}",
        "workload": {
            "name": workload_name,
            "version": version,
            "category": category,
            "plugin": {"name": "perfsuite.workloads.kernels", "distribution": "perfsuite", "version": "0.1.0"},
            "params": params,
            "quick": True,
            "scenario": None,
            "division": "closed",
        },
        "comparability_key": "0" * 64,  # set from the record's content below
        "controls": {
            "device": device,
            "seed": 0,
            "deterministic": False,
            "warmup": 2,
            "iterations": 5,
            "min_time_s": None,
            "max_iterations": 1000,
            "l2_flush": device == "cuda",
            "cuda_graph": False,
            "timeout_s": 600.0,
            "repeat_index": 0,
            "repeat_count": 1,
        },
        "launch": {
            "launcher": "local",
            "world_size": 1,
            "nnodes": 1,
            "nproc_per_node": 1,
            "backend": None,
            "rdzv_endpoint": None,
            "topology": None,
        },
        "environment": {
            "host": host,
            "os": "Linux-6.8.0-x86_64-with-glibc2.39",
            "python": "3.11.9",
            "cpu": {"model": "AMD EPYC 9654 96-Core Processor", "logical_cores": 192, "physical_cores": 96},
            "memory_bytes": 1_622_000_000_000,
            "packages": {"torch": "2.11.0", "numpy": "2.2.1", "triton": None},
            "gpus": gpus,
            "suite": {"version": "0.1.0", "git_commit": "0123456789abcdef0123456789abcdef01234567", "git_dirty": False},
            "plugins": [{"name": "workloads.kernels", "version": "0.1.0"}],
            "measured_device": measured,
        },
        "gpu_state": (
            {"before": [_observation(g["index"]) for g in gpus], "after": [_observation(g["index"]) for g in gpus]}
            if device == "cuda"
            else None
        ),
        "metrics": copy.deepcopy(metrics),
        "verification": {"status": verification, "checks": checks},
        "details": {"note": "made by tests/support/factories.py"},
    }
    record = _merge(record, overrides)
    if "comparability_key" not in overrides:
        record["comparability_key"] = comparability_key(record)
    if "sha256" not in overrides:
        sign(record)
    return record
