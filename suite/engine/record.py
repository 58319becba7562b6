"""From a run's outcome to its record: the verdict, the controls that were applied, the
roofline fractions, then one hash and one validation, and the files on disk.

:func:`build_record` is pure (everything it needs is passed in: the ceilings were read
from the registry before the run started), so the record of a finished measurement never
depends on the registry being reachable when the measurement ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from perfsuite.controls import as_applied
from perfsuite.engine import launcher, mllog
from perfsuite.engine import params as params_mod
from perfsuite.engine.files import write_atomic
from perfsuite.engine.runspec import WorkerResult
from perfsuite.measure import roofline
from perfsuite.schemas import RESULT_SCHEMA_VERSION
from perfsuite.schemas.comparability import comparability_key
from perfsuite.workload import harness_params, headline_declaration

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.engine.launcher import Launch
    from perfsuite.engine.runspec import RunRequest

MAX_ERRORS_NAMED = 3


def verdict(result: WorkerResult) -> tuple[str, str, str | None]:
    """(status, verification status, error). A run whose verification failed is ``invalid``
    with the failing checks as its error: it is never ranked and never a ceiling."""
    failed = [c for c in result.checks if not c["passed"]]
    if failed:
        verification = "failed"
    elif result.checks and result.status == "success":
        verification = "passed"
    else:
        verification = "skipped"
    if result.status != "success" or not failed:
        return result.status, verification, result.error
    named = "; ".join(_check_text(c) for c in failed[:MAX_ERRORS_NAMED])
    more = f" (and {len(failed) - MAX_ERRORS_NAMED} more)" if len(failed) > MAX_ERRORS_NAMED else ""
    return "invalid", verification, f"verification failed: {named}{more}"


def _check_text(check: dict) -> str:
    text = f"{check['label']} ({check['method']})"
    if check.get("elements_failed"):  # per-element checks: the count and the worst element say more than a norm
        text += f": {check['detail']}"
    elif check["error"] is not None and check["tolerance"] is not None:
        text += f": error {check['error']:.3g} > tolerance {check['tolerance']:.3g}"
    elif check["detail"]:
        text += f": {check['detail']}"
    return text


def build_record(
    req: "RunRequest",
    run_id: str,
    result: WorkerResult,
    launch: "Launch | None",
    environment: dict,
    ceilings: dict[str, list[dict]],
) -> dict:
    """The record of one run, without its sha256. ``ceilings``: device key -> the latest
    passed records of the ceiling workloads measured on it (read before the run)."""
    cls = req.entry.cls
    params = params_mod.to_dict(req.params)
    status, verification, error = verdict(result)
    metrics = result.metrics
    if status == "success":
        roofline.resolve(metrics, ceilings.get(environment["measured_device"]["key"], []), cls.name)
    world = launch.world_size if launch else 1
    record = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "run_id": run_id,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "status": status,
        "error": error,
        "workload": {
            "name": cls.name,
            "version": cls.version,
            "category": cls.category,
            "plugin": {
                "name": req.entry.plugin.name,
                "distribution": req.entry.plugin.distribution,
                "version": req.entry.plugin.version,
            },
            "params": params,
            "quick": req.quick,
            "scenario": req.scenario,
            "division": req.division,
            "primary_metric": cls.primary_metric,
            "headline": _headline_dict(cls),
            "harness_params": harness_params(cls),
            "comparable_since": cls.comparable_since,
        },
        "comparability_key": "",  # set below, from the record's own content
        "controls": as_applied(req.controls, cls.controls_honoured),
        "launch": {
            "launcher": launch.launcher if launch else "local",
            "world_size": world,
            "nnodes": launch.nnodes if launch else 1,
            "nproc_per_node": launch.nproc_per_node if launch else 1,
            "backend": result.backend,
            "rdzv_endpoint": launch.rdzv_endpoint if launch else None,
            "topology": result.details.get("topology") if world > 1 else None,
            "env": launcher.suite_env(req.controls.device, req.controls.cuda_graph),
            "user_env": launcher.user_env(req.controls.device, req.controls.cuda_graph),
        },
        "environment": environment,
        "gpu_state": result.gpu_state,
        "metrics": metrics,
        "verification": {"status": verification, "checks": result.checks},
        "details": result.details,
    }
    slurm = launcher.slurm_job()
    if slurm is not None:
        record["launch"]["slurm"] = slurm
    if req.reproduces:
        record["reproduces"] = req.reproduces
    record["comparability_key"] = comparability_key(record)
    return record


def _headline_dict(cls) -> dict | None:
    declared = headline_declaration(cls)
    return declared.to_dict() if declared is not None else None


def finalize(record: dict) -> dict:
    """Hash and validate the record, once: the file written next is what the registry stores."""
    from perfsuite.registry import record_sha256, validate_record

    record.pop("sha256", None)
    record["sha256"] = record_sha256(record)
    validate_record(record)
    return record


def write_files(record: dict, records_dir: Path) -> Path:
    """The record's JSON file and its MLLOG twin, each written atomically; the JSON path."""
    records_dir.mkdir(parents=True, exist_ok=True)
    path = records_dir / f"{record['run_id']}.json"
    from perfsuite.registry.records import record_text

    write_atomic(path, record_text(record))  # long sample lists encoded: the same sha256
    mllog.write(record, path.with_suffix(".mllog"))
    return path
