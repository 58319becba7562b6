"""SLURM's client commands, called and read: ``sbatch`` submits, ``squeue`` (then ``sacct``,
for a job the controller has forgotten) gives the state of every task of a job, ``scancel``
cancels. A refusal is :class:`SchedulerError` with one line: the scheduler's own answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

CALL_TIMEOUT_S = 60.0
# What is read of a client command's output, per stream: squeue's answer for a job array of
# thousands of tasks is well under a MiB; the rest of a runaway answer is read and dropped.
OUTPUT_LIMIT_BYTES = 4 << 20
LINE_LIMIT = 300  # the most of a scheduler's answer an error line quotes
DRAIN_JOIN_S = 5.0
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
class Answer:
    """A client command's exit code and output, decoded with replacement and bounded."""

    returncode: int
    stdout: str
    stderr: str
    cut: bool  # a stream was longer than OUTPUT_LIMIT_BYTES: only its first part is here


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


def _call(argv: list[str], env: dict[str, str] | None = None) -> Answer:
    """Run one client command with its output bounded (:data:`OUTPUT_LIMIT_BYTES` a stream,
    the rest read and dropped) and decoded with replacement; SchedulerError (one line) when
    it cannot start or does not end within :data:`CALL_TIMEOUT_S`."""
    try:
        proc = subprocess.Popen(
            [command(argv[0]), *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError as exc:
        raise SchedulerError(f"{argv[0]} cannot be started: {exc.strerror or exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Drain(proc.stdout), _Drain(proc.stderr)
    try:
        proc.wait(timeout=CALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise SchedulerError(f"{argv[0]} did not answer within {CALL_TIMEOUT_S:g} s") from exc
    finally:
        out.join()
        err.join()
    return Answer(proc.returncode, out.text(), err.text(), out.cut or err.cut)


class _Drain(threading.Thread):
    """Read one stream of a client command to its end, keeping its first bytes only."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.kept = bytearray()
        self.cut = False
        self.start()

    def run(self) -> None:
        with self.stream:
            while block := self.stream.read(1 << 16):
                room = OUTPUT_LIMIT_BYTES - len(self.kept)
                self.kept += block[: max(room, 0)]
                self.cut = self.cut or len(block) > room

    def join(self, timeout: float | None = DRAIN_JOIN_S) -> None:
        # a process the command left behind may hold the pipe open: what was read is the answer
        super().join(timeout)

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", errors="replace")


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` as one line of at most ``limit`` characters, saying what was cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}... (cut: {len(flat)} characters in all)"


def answer(tool: str, text: str, cut: bool = False) -> str:
    """The scheduler's answer as one line: its last ``error:`` line (``sbatch: error: Batch job
    submission failed: Invalid partition name specified`` -> ``sbatch: Batch job submission
    failed: Invalid partition name specified``), else its last line; at most
    :data:`LINE_LIMIT` characters, and a note where its output was longer than was read."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    last = (errors or lines or ["no answer"])[-1]
    _, sep, rest = last.partition("error:")
    said = one_line(rest.strip() if sep else last)
    note = f" (its output was longer than {OUTPUT_LIMIT_BYTES >> 20} MiB; the rest was not read)" if cut else ""
    return f"{tool}: {said}{note}"


def submit(script: Path, env: dict[str, str] | None = None) -> str:
    """``sbatch --parsable SCRIPT``; the job id, or SchedulerError with sbatch's answer."""
    done = _call(["sbatch", "--parsable", str(script)], env=env)
    if done.returncode != 0:
        raise SchedulerError(answer("sbatch", done.stderr + done.stdout, done.cut))
    job_id = done.stdout.strip().splitlines()[-1].split(";")[0] if done.stdout.strip() else ""
    if not JOB_ID.fullmatch(job_id) or done.cut:
        raise SchedulerError(f"sbatch: no job id in its answer {one_line(done.stdout.strip())!r}")
    return job_id


def has_pyxis() -> bool:
    """Whether srun here takes pyxis's ``--container-image`` (its options are listed in
    ``srun --help`` beside srun's own); SchedulerError where srun cannot answer."""
    done = _call(["srun", "--help"])
    if done.returncode != 0:
        raise SchedulerError(answer("srun", done.stderr + done.stdout, done.cut))
    return "--container-image" in done.stdout


def cancel(job_id: str) -> None:
    """``scancel JOB`` (every task of an array); SchedulerError with scancel's answer."""
    done = _call(["scancel", job_id])
    if done.returncode != 0:
        raise SchedulerError(answer("scancel", done.stderr + done.stdout, done.cut))


def tasks(job_id: str) -> list[TaskState]:
    """Every task of the job, by array index: from the controller (``squeue``, which keeps an
    ended job a few minutes), else from accounting (``sacct``); [] where neither knows it."""
    done = _call(["squeue", "--noheader", "--array", "--states=all", f"--jobs={job_id}", f"--format={SQUEUE_FORMAT}"])
    if done.returncode == 0 and done.stdout.strip():
        _whole("squeue", done)
        return sorted((_from_squeue(line) for line in done.stdout.strip().splitlines()), key=lambda t: t.array_index)
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        raise SchedulerError(answer("squeue", done.stderr + done.stdout, done.cut))
    return _from_sacct(job_id)


def job_state(job_id: str) -> str | None:
    """The state of one job (an array task by its own id) as the controller has it; None
    where the controller no longer knows it. SchedulerError where it cannot answer.
    (An array's own id also names the whole array: the line of the task itself is picked.)"""
    done = _call(["squeue", "--noheader", "--array", "--states=all", f"--jobs={job_id}", "--format=%A|%T"])
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return None
        raise SchedulerError(answer("squeue", done.stderr + done.stdout, done.cut))
    _whole("squeue", done)
    for line in done.stdout.split():
        own, _, state = line.partition("|")
        if not (JOB_ID.fullmatch(own) and STATE.fullmatch(state)):
            raise SchedulerError(f"squeue: cannot read its answer: a line reads {one_line(line, 80)!r}")
        if own == job_id:
            return state
    return None


def job_steps(job_id: str) -> set[str]:
    """The steps of a running job the controller knows (``JOB.STEP``, ``ARRAYJOB_INDEX.STEP`` for
    an array's task); SchedulerError where it cannot answer."""
    done = _call(["squeue", "--noheader", "--steps", f"--jobs={job_id}", "--format=%i"])
    if done.returncode != 0:
        raise SchedulerError(answer("squeue", done.stderr + done.stdout, done.cut))
    _whole("squeue", done)
    return set(done.stdout.split())


def _whole(tool: str, done: Answer) -> None:
    """An answer cut short cannot be read as a list of tasks: SchedulerError."""
    if done.cut:
        raise SchedulerError(
            f"{tool}: its answer was longer than {OUTPUT_LIMIT_BYTES >> 20} MiB and was not read "
            f"(it began {one_line(done.stdout, 80)!r})"
        )


JOB_ID = re.compile(r"\d{1,20}")
STATE = re.compile(r"[A-Z_]{1,40}")
ARRAY_INDEX = re.compile(r"\d{1,9}|N/A")


def _from_squeue(line: str) -> TaskState:
    parts = line.split("|", 5)
    if len(parts) != 6 or not (
        JOB_ID.fullmatch(parts[0]) and ARRAY_INDEX.fullmatch(parts[2]) and STATE.fullmatch(parts[3])
    ):
        raise SchedulerError(f"squeue: cannot read its answer: a line reads {one_line(line, 80)!r}")
    own, _array_job, index, state, reason, nodes = parts
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
    _whole("sacct", done)
    out = []
    for line in done.stdout.strip().splitlines():
        parts = line.split("|", 4)
        if len(parts) != 5:
            raise SchedulerError(f"sacct: cannot read its answer: a line reads {one_line(line, 80)!r}")
        raw, shown, state, reason, nodes = parts
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
