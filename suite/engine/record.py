"""From a run's outcome to its record: the verdict, the controls that were applied, the
roofline fractions, then one hash and one validation, and the files on disk.

A record is sealed in one place, :func:`seal`, from a :class:`Sealing` (everything known
before the measuring process starts: the record's frame, the ceilings read from the
registry, the price) and the process's :class:`~perfsuite.engine.runspec.WorkerResult`. The
runner saves the sealing beside the worker's result before the launch, so a result whose
runner died before its record was written is sealed later by the same code
(:mod:`perfsuite.engine.unrecorded`), and the record of a finished measurement never depends
on the registry being reachable when the measurement ends.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite.controls import as_applied
from perfsuite.engine import launcher, mllog
from perfsuite.engine import params as params_mod
from perfsuite.engine.runspec import WorkerResult
from perfsuite.files import write_atomic
from perfsuite.measure import roofline
from perfsuite.schemas import RESULT_SCHEMA_VERSION
from perfsuite.schemas.canonical import record_text
from perfsuite.schemas.comparability import comparability_key
from perfsuite.schemas.seal import seal_record
from perfsuite.workload import harness_params, headline_declaration, output_params

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.engine.launcher import Launch
    from perfsuite.engine.runspec import RunRequest

MAX_ERRORS_NAMED = 3
# Where a record goes when the records folder cannot take it: <data dir>/FALLBACK_FOLDER, else
# the system's temporary folder's FALLBACK_FOLDER-<uid>.
FALLBACK_FOLDER = "rescued-records"


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
    return complete(frame(req, run_id, launch), result, environment, ceilings)


def frame(req: "RunRequest", run_id: str, launch: "Launch | None") -> dict:
    """The sections of a run's record known before its measuring process starts: the workload,
    the controls, the launch. What the process reports is added by :func:`complete`."""
    cls = req.entry.cls
    world = launch.world_size if launch else 1
    record: dict = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "run_id": run_id,
        "workload": {
            "name": cls.name,
            "version": cls.version,
            "category": cls.category,
            "plugin": {
                "name": req.entry.plugin.name,
                "distribution": req.entry.plugin.distribution,
                "version": req.entry.plugin.version,
            },
            "params": params_mod.to_dict(req.params),
            "quick": req.quick,
            "scenario": req.scenario,
            "division": req.division,
            "primary_metric": cls.primary_metric,
            "headline": _headline_dict(cls),
            "harness_params": harness_params(cls),
            "output_params": output_params(cls),
            "comparable_since": cls.comparable_since,
        },
        "controls": as_applied(req.controls, cls.controls_honoured),
        "launch": {
            "launcher": launch.launcher if launch else "local",
            "world_size": world,
            "nnodes": launch.nnodes if launch else 1,
            "nproc_per_node": launch.nproc_per_node if launch else 1,
            "backend": None,  # the measuring process's (complete)
            "rdzv_endpoint": launch.rdzv_endpoint if launch else None,
            "topology": None,  # the measuring process's, for more than one rank (complete)
            "env": launcher.suite_env(req.controls.device, req.controls.cuda_graph),
            "user_env": launcher.user_env(req.controls.device, req.controls.cuda_graph),
        },
    }
    slurm = launcher.slurm_job()
    if slurm is not None:
        record["launch"]["slurm"] = slurm
    if req.reproduces:
        record["reproduces"] = req.reproduces
    return record


def complete(frame: dict, result: WorkerResult, environment: dict, ceilings: dict[str, list[dict]]) -> dict:
    """The record of one run from its :func:`frame` and what its measuring process reported,
    without its sha256. A value that is not a finite number makes the run failed, named."""
    result = finite_only(result)
    status, verification, error = verdict(result)
    metrics = result.metrics
    name = frame["workload"]["name"]
    if status == "success":
        roofline.resolve(metrics, ceilings.get(environment["measured_device"]["key"], []), name)
    launch = dict(frame["launch"], backend=result.backend)
    if launch["world_size"] > 1:
        launch["topology"] = result.details.get("topology")
    record = {
        **frame,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "status": status,
        "error": error,
        "comparability_key": "",  # set below, from the record's own content
        "launch": launch,
        "environment": environment,
        "gpu_state": result.gpu_state,
        "metrics": metrics,
        "verification": {"status": verification, "checks": result.checks},
        "details": result.details,
    }
    record["comparability_key"] = comparability_key(record)
    return record


def finite_only(result: WorkerResult) -> WorkerResult:
    """``result`` itself when every number in it is finite; else a failed copy whose error
    names the first value that is not (a record is JSON, which has no NaN or infinity), with
    no metrics and each such value elsewhere (checks, details) replaced by None."""
    found: list[str] = []
    for m in result.metrics:
        if _non_finite(m, "", []):
            value = m.get("value")
            shown = _shown(value) if isinstance(value, float) and not math.isfinite(value) else "not finite throughout"
            found.append(f"metric {m.get('name')} of case {m.get('case')} is {shown}, not a finite number")
    rest = {
        "checks": result.checks,
        "details": result.details,
        "gpu_state": result.gpu_state,
        "environment": result.environment,
    }
    where: list[str] = []
    cleaned = {key: _finite_copy(value, key, where) for key, value in rest.items()}
    found += [f"{path} is not a finite number" for path in where]
    if not found:
        return result
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return dataclasses.replace(
        result,
        status="failed",
        error=found[0] + more,
        metrics=[],
        **cleaned,
    )


def _shown(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _non_finite(value: object, path: str, where: list[str]) -> list[str]:
    """The paths of the values in ``value`` that are floats but not finite numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        where.append(path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _non_finite(item, f"{path}.{key}" if path else str(key), where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _non_finite(item, f"{path}[{i}]", where)
    return where


def _finite_copy(value: Any, path: str, where: list[str]) -> Any:
    """``value`` with each float that is not a finite number replaced by None, its path noted."""
    if isinstance(value, float) and not math.isfinite(value):
        where.append(path)
        return None
    if isinstance(value, dict):
        return {key: _finite_copy(item, f"{path}.{key}", where) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_copy(item, f"{path}[{i}]", where) for i, item in enumerate(value)]
    return value


@dataclasses.dataclass
class Sealing:
    """What a run's record needs besides its measuring process's result, all known before the
    process starts. Saved as JSON beside the result (``to_json``), so that the record of a
    result whose runner died is sealed later exactly as the runner would have sealed it."""

    frame: dict  # the record's sections known before the launch (:func:`frame`), preflight included
    device: str  # the controls' device: a result without a fingerprint gets this machine's
    ceilings: dict[str, list[dict]] = dataclasses.field(default_factory=dict)  # read before the run
    price_per_hour: float | None = None  # USD per accelerator-hour: the record's cost section
    accelerators: int = 1  # how many the cost is charged for

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> "Sealing":
        return cls(**json.loads(text))


def sealing(
    req: "RunRequest",
    run_id: str,
    launch: "Launch | None",
    ceilings: dict[str, list[dict]],
    checked: dict | None = None,
) -> Sealing:
    """The :class:`Sealing` of a run about to start (``checked``: its pre-flight section)."""
    from perfsuite.schemas.cost import accelerators_held

    framed = frame(req, run_id, launch)
    if checked is not None:
        framed["preflight"] = checked
    held = accelerators_held(req.controls.device, framed["launch"]["world_size"])
    return Sealing(framed, req.controls.device, ceilings, req.price_per_hour, held)


def seal(sealed: Sealing, result: WorkerResult, provenance: dict | None = None) -> dict:
    """The finished record: built, its cost, hashed and validated once. ``provenance``: how the
    record came to be when not by its runner (``details.provenance``)."""
    from perfsuite.engine.environment import collect

    # A run that never reached its measuring process still gets a fingerprint (light: no torch).
    environment = result.environment or collect(sealed.device, deep=False)
    record = complete(copy.deepcopy(sealed.frame), result, environment, sealed.ceilings)
    if sealed.price_per_hour is not None and record["status"] == "success":
        from perfsuite.schemas.cost import RUN_OPTION_SOURCE, cost_section

        record["cost"] = cost_section(record["metrics"], sealed.price_per_hour, sealed.accelerators, RUN_OPTION_SOURCE)
    if provenance is not None:
        record["details"] = dict(record["details"], provenance=provenance)
    return finalize(record)


def _headline_dict(cls) -> dict | None:
    declared = headline_declaration(cls)
    return declared.to_dict() if declared is not None else None


def finalize(record: dict) -> dict:
    """Seal the record (hash and validate it, once: :func:`~perfsuite.schemas.seal.seal_record`,
    as ``perfsuite import`` and ``perfsuite submit`` do): the file written next is what the
    registry stores."""
    return seal_record(record, new=True).record


def write_files(record: dict, records_dir: Path) -> Path:
    """The record's JSON file and its MLLOG twin, each written atomically; the JSON path."""
    records_dir.mkdir(parents=True, exist_ok=True)
    path = records_dir / f"{record['run_id']}.json"
    write_atomic(path, record_text(record))  # long sample lists encoded: the same sha256
    mllog.write(record, path.with_suffix(".mllog"))
    return path


def fallback_dirs(records_dir: Path) -> list[Path]:
    """The folders a record goes to when the records folder cannot take it, in order."""
    from perfsuite.registry.db import data_dir

    uid = os.getuid() if hasattr(os, "getuid") else 0
    candidates = [data_dir() / FALLBACK_FOLDER, Path(tempfile.gettempdir()) / f"{FALLBACK_FOLDER}-{uid}"]
    out = []
    for folder in candidates:
        if folder.resolve() != records_dir.resolve() and folder not in out:
            out.append(folder)
    return out
