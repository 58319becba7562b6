"""A job's folder, kept beside the records (``<records>/slurm/<folder>/``): its sbatch script,
``job.json`` (the job id, the runs each array index makes, where its registry is), the
scheduler's log of each task and the records each index stored (``records/<index>/``).

The folder must be on storage the job's nodes share with the host that submits: the job
writes its records there, and ``perfsuite slurm status|wait|cancel`` reads them back.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perfsuite.files import write_atomic

JOB_FILE = "job.json"
SCRIPT_FILE = "job.sbatch"
# Where the job's ranks store: the registry named (a server every node reaches), or one
# SQLite file per array index beside its records, loaded into the named one by `wait`.
STORE_NAMED = "named"
STORE_BESIDE = "beside records"


class JobNotFound(Exception):
    """No perfsuite job folder holds this job id (one line)."""


@dataclass
class ArrayTask:
    """What one array index of the job runs: one ``perfsuite run`` or ``crosscheck`` command."""

    index: int
    command: str  # run | crosscheck
    argv: list[str]  # its arguments after the command name
    workloads: list[str]  # the workloads it runs, each ``repeat`` times
    repeat: int = 1
    ntasks_per_node: int | None = None  # this index's ranks per node, where not the job's

    def expected(self) -> Counter:
        """Runs per workload this index should store."""
        return Counter(dict.fromkeys(self.workloads, self.repeat))


@dataclass
class Job:
    folder: Path
    tasks: list[ArrayTask]
    store: str  # STORE_NAMED | STORE_BESIDE
    sbatch: dict = field(default_factory=dict)  # the job's options as submitted
    plan: str | None = None
    job_id: str | None = None
    submitted_at: str | None = None
    resubmits: str | None = None  # the job whose unfinished runs this one runs (slurm resubmit)

    @property
    def is_array(self) -> bool:
        return len(self.tasks) > 1

    @property
    def script(self) -> Path:
        return self.folder / SCRIPT_FILE

    @property
    def logs(self) -> Path:
        return self.folder / "logs"

    def records_dir(self, index: int) -> Path:
        return self.folder / "records" / str(index)

    def registry_file(self, index: int) -> Path:
        return self.folder / "registry" / f"{index}.db"

    def log(self, index: int, task_job_id: str | None = None) -> Path:
        """The scheduler's log of one index (``--output`` of the script)."""
        if self.is_array:
            return self.logs / f"{self.job_id}_{index}.out"
        return self.logs / f"{task_job_id or self.job_id}.out"

    def save(self) -> None:
        data = asdict(self)
        data["folder"] = str(self.folder)
        write_atomic(self.folder / JOB_FILE, json.dumps(data, indent=1, sort_keys=True))

    @classmethod
    def load(cls, folder: Path) -> "Job":
        data = json.loads((folder / JOB_FILE).read_text())
        data["folder"] = folder
        data["tasks"] = [ArrayTask(**t) for t in data["tasks"]]
        return cls(**data)


def new_folder(root: Path) -> Path:
    """A name for a new job's folder under ``root`` (not created): time first, so that a
    listing is in submission order."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return root / f"{stamp}-{uuid.uuid4().hex[:8]}"


def find(root: Path, job_id: str) -> Job:
    """The job whose id is ``job_id`` (an array task's ``ID_INDEX`` names its array)."""
    wanted = job_id.split("_")[0]
    for path in sorted(root.glob(f"*/{JOB_FILE}"), reverse=True):
        job = Job.load(path.parent)
        if job.job_id == wanted:
            return job
    raise JobNotFound(
        f"no perfsuite job {wanted} under {root} (jobs submitted with --job-dir elsewhere: give the same --job-dir)"
    )


def stored_records(job: Job, seen: dict[Path, dict] | None = None) -> dict[int, list[dict]]:
    """The records each array index has written so far, oldest first, each checked (schema,
    hash) as ``perfsuite import`` checks it; a file that fails is an error, never skipped.
    ``seen``: records already read, by path (a record file is written once, whole), so that
    following a long job does not read and check every record at every look."""
    from perfsuite.schemas.errors import RecordInvalid
    from perfsuite.schemas.reading import load_record_file
    from perfsuite.schemas.seal import seal_record

    seen = {} if seen is None else seen
    out: dict[int, list[dict]] = {}
    for task in job.tasks:
        for path in sorted(job.records_dir(task.index).glob("*.json")):
            if path in seen:
                continue
            try:
                record = load_record_file(path)
                seal_record(record)
            except RecordInvalid as exc:
                raise RecordInvalid(f"{path}: {exc}") from exc
            seen[path] = record
        found = [record for path, record in seen.items() if path.parent == job.records_dir(task.index)]
        out[task.index] = sorted(found, key=lambda r: r["started_at"])
    return out


def missing_runs(task: ArrayTask, records: list[dict]) -> Counter:
    """Runs per workload that the index should have stored and has not."""
    stored = Counter(r["workload"]["name"] for r in records)
    return task.expected() - stored
