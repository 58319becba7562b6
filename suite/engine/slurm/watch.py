"""A submitted job followed to its end: a line for each task's change of state and for each
record as it lands (the progress of the job's runs), then what every index stored and what
it did not finish. A job the scheduler cancelled, timed out or lost a node of keeps the
records of its finished runs; the runs it did not finish are named with the task's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.engine.slurm import scheduler
from perfsuite.engine.slurm.jobs import Job, missing_runs, stored_records
from perfsuite.engine.slurm.scheduler import TaskState

POLL_S = 1.0
# how `perfsuite run` sums up the runs it did not finish (perfsuite.engine.session)
STOP_LINES = ("Interrupted: ", "Stopped: ")
EXIT_OK = 0
EXIT_UNFINISHED = 1


class WaitTimeout(Exception):
    """The job did not end within the time given (one line)."""


@dataclass
class Outcome:
    job: Job
    states: dict[int, TaskState]  # by array index; an index the scheduler no longer knows is absent
    records: dict[int, list[dict]]
    unfinished: list[str] = field(default_factory=list)  # one line per index that left runs unfinished

    @property
    def all_records(self) -> list[dict]:
        return [r for index in sorted(self.records) for r in self.records[index]]

    @property
    def ended(self) -> bool:
        return all(s.ended for s in self.states.values())

    @property
    def exit_code(self) -> int:
        bad = [
            r
            for r in self.all_records
            if r["status"] in ("failed", "timeout", "invalid") or r["verification"]["status"] == "failed"
        ]
        failed_tasks = [s for s in self.states.values() if s.state != "COMPLETED"]
        return EXIT_UNFINISHED if self.unfinished or bad or failed_tasks else EXIT_OK


def state_text(task: TaskState) -> str:
    return task.state + (f" ({task.reason})" if task.reason else "") + (f" on {task.nodes}" if task.nodes else "")


def look(job: Job, seen: dict[Path, dict] | None = None) -> Outcome:
    """The job as it stands now: every task's state and every record stored so far
    (``seen``: the records read at earlier looks, by path)."""
    assert job.job_id is not None, "a job that was never submitted has nothing to look at"
    states = {t.array_index: t for t in scheduler.tasks(job.job_id)}
    outcome = Outcome(job, states, stored_records(job, seen))
    for task in job.tasks:
        missing = missing_runs(task, outcome.records[task.index])
        state = states.get(task.index)
        if not missing or (state is not None and not state.ended):
            continue
        expected = task.expected()
        named = ", ".join(
            f"{name} ({expected[name] - n} of {expected[name]} runs stored)" for name, n in sorted(missing.items())
        )
        where = state_text(state) if state else "unknown to the scheduler"
        log = job.log(task.index, state.job_id if state else None)
        said = last_word(log)
        outcome.unfinished.append(
            f"job {job.job_id} [{task.index}] {where}: not finished: {named}"
            + (f"; perfsuite in the job said: {said}" if said else "")
            + f"; its log: {log}"
        )
    return outcome


def last_word(log: Path) -> str | None:
    """The last summary line ``perfsuite run`` printed in a task's log as it stopped
    ("Interrupted: stored: ...; not finished: ...; not run: ..."), if any."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    said = [line.strip() for line in lines if line.startswith(STOP_LINES)]
    return said[-1] if said else None


def follow(job: Job, echo: Callable[[str], None], poll_s: float = POLL_S, timeout_s: float | None = None) -> Outcome:
    """Poll the job until every task has ended (processes gone, not merely COMPLETING),
    echoing each change of state and each record that lands; the final :class:`Outcome`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    shown_states: dict[int, str] = {}
    shown_records: set[str] = set()
    seen: dict[Path, dict] = {}
    while True:
        outcome = look(job, seen)
        for index, state in sorted(outcome.states.items()):
            text = state_text(state)
            if shown_states.get(index) != text:
                shown_states[index] = text
                echo(f"job {job.job_id} [{index}] {text}")
        for task in job.tasks:
            records = outcome.records[task.index]
            for n, record in enumerate(records, 1):
                if record["run_id"] not in shown_records:
                    shown_records.add(record["run_id"])
                    echo(
                        f"job {job.job_id} [{task.index}] stored {record['workload']['name']} {record['status']} "
                        f"{record['run_id'][:8]} ({n} of {sum(task.expected().values())})"
                    )
        if outcome.ended:
            return outcome
        if deadline is not None and time.monotonic() > deadline:
            raise WaitTimeout(
                f"job {job.job_id} has not ended after {timeout_s:g} s "
                f"({'; '.join(state_text(s) for s in outcome.states.values())})"
            )
        time.sleep(poll_s)


def collect(outcome: Outcome, open_registry: Callable[[], object]) -> list[str]:
    """Store every record the job wrote in the registry named now, in one transaction
    (idempotent: a record already there is a duplicate); "stored"/"duplicate" per record."""
    records = outcome.all_records
    if not records:
        return []
    registry = open_registry()
    try:
        return registry.store_all(records)  # type: ignore[attr-defined]
    finally:
        registry.close()  # type: ignore[attr-defined]
