"""SLURM's client commands, called and read: ``sbatch`` submits, ``squeue`` (then ``sacct``,
for a job the controller has forgotten) gives the state of every task of a job, ``scancel``
cancels. A refusal is :class:`SchedulerError` with one line: the scheduler's own answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CALL_TIMEOUT_S = 60.0
# States after which a job's processes are gone (COMPLETING is not one: they are being killed).
ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
SQUEUE_FORMAT = "%A|%F|%K|%T|%r|%N"


class SchedulerError(Exception):
    """SLURM refused or could not answer; the message is one line, the scheduler's own words."""


@dataclass(frozen=True)
class TaskState:
    """One task of a job as the scheduler sees it: the job itself, or one index of an array."""

    job_id: str  # this task's own id (an array task has one of its own)
    array_index: int  # 0 for a job that is not an array
    state: str  # PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL ...
    reason: str  # why it pends or how it ended, "" for none
    nodes: str  # SLURM's host list ("" while pending)

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def command(name: str) -> str:
    """The path of a SLURM client command; SchedulerError where it is not installed."""
    found = shutil.which(name)
    if found is None:
        raise SchedulerError(
            f"{name} not found on PATH: submitting and watching jobs needs SLURM's client "
            f"commands (sbatch, squeue, scancel) on this host"
        )
    return found


def _call(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [command(argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise SchedulerError(f"{argv[0]} did not answer within {CALL_TIMEOUT_S:g} s") from exc


def answer(tool: str, text: str) -> str:
    """The scheduler's answer as one line: its last ``error:`` line (``sbatch: error: Batch job
    submission failed: Invalid partition name specified`` -> ``sbatch: Batch job submission
    failed: Invalid partition name specified``), else its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    last = (errors or lines or ["no answer"])[-1]
    _, sep, rest = last.partition("error:")
    return f"{tool}: {rest.strip() if sep else last}"


def submit(script: Path, env: dict[str, str] | None = None) -> str:
    """``sbatch --parsable SCRIPT``; the job id, or SchedulerError with sbatch's answer."""
    done = _call(["sbatch", "--parsable", str(script)], env=env)
    if done.returncode != 0:
        raise SchedulerError(answer("sbatch", done.stderr + done.stdout))
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0] if done.stdout.strip() else ""
    if not job_id.isdigit():
        raise SchedulerError(f"sbatch: no job id in its answer {done.stdout.strip()!r}")
    return job_id


def has_pyxis() -> bool:
    """Whether srun here takes pyxis's ``--container-image`` (its options are listed in
    ``srun --help`` beside srun's own); SchedulerError where srun cannot answer."""
    done = _call(["srun", "--help"])
    if done.returncode != 0:
        raise SchedulerError(answer("srun", done.stderr + done.stdout))
    return "--container-image" in done.stdout


def cancel(job_id: str) -> None:
    """``scancel JOB`` (every task of an array); SchedulerError with scancel's answer."""
    done = _call(["scancel", job_id])
    if done.returncode != 0:
        raise SchedulerError(answer("scancel", done.stderr + done.stdout))


def tasks(job_id: str) -> list[TaskState]:
    """Every task of the job, by array index: from the controller (``squeue``, which keeps an
    ended job a few minutes), else from accounting (``sacct``); [] where neither knows it."""
    done = _call(["squeue", "--noheader", "--array", "--states=all", f"--jobs={job_id}", f"--format={SQUEUE_FORMAT}"])
    if done.returncode == 0 and done.stdout.strip():
        return sorted((_from_squeue(line) for line in done.stdout.strip().splitlines()), key=lambda t: t.array_index)
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        raise SchedulerError(answer("squeue", done.stderr + done.stdout))
    return _from_sacct(job_id)


def _from_squeue(line: str) -> TaskState:
    own, _array_job, index, state, reason, nodes = line.split("|", 5)
    return TaskState(own, int(index) if index.isdigit() else 0, state, "" if reason == "None" else reason, nodes)


def _from_sacct(job_id: str) -> list[TaskState]:
    """The job's tasks from accounting; [] where accounting is off or knows nothing of it."""
    if shutil.which("sacct") is None:
        return []
    done = _call(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--jobs={job_id}",
            "--format=JobIDRaw,JobID,State,Reason,NodeList",
        ]
    )
    if done.returncode != 0:
        return []  # accounting storage disabled: the controller was the only source
    out = []
    for line in done.stdout.strip().splitlines():
        raw, shown, state, reason, nodes = line.split("|", 4)
        _, _, index = shown.partition("_")
        out.append(
            TaskState(
                raw,
                int(index) if index.isdigit() else 0,
                state.split()[0] if state else "UNKNOWN",
                "" if reason == "None" else reason,
                nodes,
            )
        )
    return sorted(out, key=lambda t: t.array_index)


def environment_for(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment sbatch runs with (and exports to the job): this process's, plus ``env``."""
    out = dict(os.environ)
    out.update(env or {})
    return out
