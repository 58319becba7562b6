"""What crosses the worker boundary, typed: the :class:`RunSpec` the runner hands the
measuring process, and the :class:`WorkerResult` it hands back. Each has exactly one
JSON form (``to_json`` / ``from_json``), so nothing on either side reads a dict with
``.get`` defaults, and the parameters are resolved once (by the runner) and travel as
the record will state them. The :class:`RunRequest` is what the runner is asked to run,
before it becomes a spec.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfsuite.controls import Controls

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.engine.launcher import LaunchOptions
    from perfsuite.plugins import WorkloadEntry

# What a run came to before its record is built: the measuring process reports success,
# failed, skipped or aborted (a driver stopped short: RunContext.abort); the runner reports
# "timeout" (it killed the process) and "failed" for a process that died without a result.
# A success whose verification failed becomes "invalid" in the record (perfsuite.engine.record.verdict).
WORKER_STATUSES = ("success", "failed", "skipped", "timeout", "aborted")


def now() -> str:
    """A record's timestamps: UTC, ISO 8601 with its offset."""
    return dt.datetime.now(dt.UTC).isoformat()


@dataclass(frozen=True)
class RunSpec:
    """Everything the measuring process needs, and nothing it must look up elsewhere."""

    run_id: str
    workload: str  # the registered dotted name
    params: dict[str, Any]  # resolved, JSON-ready (perfsuite.engine.params.to_dict); rebuilt with from_dict
    quick: bool
    controls: Controls
    workdir: str  # the run's temporary folder: removed by whoever outlives the others
    result_path: str
    artifact_dir: str | None = None  # kept beside the record, for a workload's own files (RunContext.artifact_dir)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        data = json.loads(text)
        data["controls"] = Controls.from_dict(data["controls"])
        return cls(**data)


@dataclass
class WorkerResult:
    """What the measuring process (rank 0) measured, checked and saw."""

    status: str
    started_at: str
    finished_at: str
    error: str | None = None
    metrics: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    environment: dict | None = None  # None: the process never got as far as fingerprinting
    gpu_state: dict | None = None
    backend: str | None = None  # torch.distributed backend of a multi-rank run

    def __post_init__(self) -> None:
        if self.status not in WORKER_STATUSES:
            raise ValueError(f"worker status {self.status!r} is not one of {WORKER_STATUSES}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "WorkerResult":
        return cls(**json.loads(text))


@dataclass
class RunRequest:
    """One run the runner is asked for: the workload, its resolved parameters, the controls
    and the launch; the runner turns it into a :class:`RunSpec` and a record."""

    entry: "WorkloadEntry"
    params: Any
    quick: bool
    controls: Controls
    launch: "LaunchOptions"
    division: str = "open"
    scenario: str | None = None
    reproduces: str | None = None  # the run id this run re-runs ('perfsuite reproduce')
    strict: bool = False  # refuse to measure when a pre-flight check fails (perfsuite.doctor.preflight)
    price_per_hour: float | None = None  # USD per accelerator-hour: the record's cost section (schemas.cost)
    # variables for the measuring process beyond the suite's own: a cross-check asks for its
    # reference tools this way (perfsuite.cli.crosscheck.crosscheck_env)
    extra_env: dict[str, str] = field(default_factory=dict)
