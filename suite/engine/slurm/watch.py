"""A submitted job followed to its end: a line for each task's change of state and for each
record as it lands (the progress of the job's runs), then what every index stored and what
it did not finish. A job the scheduler cancelled, timed out or lost a node of keeps the
records of its finished runs; the runs it did not finish are named with the task's state.

A scheduler that does not answer (a controller restarting, a network cut) is asked again,
with a growing pause, for up to ``retry_for_s``: the job goes on meanwhile, and so does the
watch once the controller answers again. After that, :class:`SchedulerSilent`: the caller
stops with its own exit code and says how to watch again.

A task that ended ``NODE_FAIL`` (the controller lost its node, whose processes nobody on
the node confirmed gone) is summed up only once its rank 0 has stopped: each rank fences
itself when it sees its step gone (:mod:`.stepwatch`) and removes its marker, so that no
record lands after the summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.engine.slurm import scheduler, stepwatch
from perfsuite.engine.slurm.jobs import Job, missing_runs, stored_records
from perfsuite.engine.slurm.scheduler import TaskState

POLL_S = 1.0
# how `perfsuite run` sums up the runs it did not finish (perfsuite.engine.session)
STOP_LINES = ("Interrupted: ", "Stopped: ")
# The exit codes of `perfsuite slurm wait|status|cancel|resubmit` and `run --slurm --wait`.
EXIT_OK = 0  # every run of the job finished and passed
EXIT_UNFINISHED = 1  # a run failed or did not finish, or a task ended other than COMPLETED
EXIT_SCHEDULER_SILENT = 3  # the scheduler did not answer within the retry window: the job goes on
EXIT_STILL_RUNNING = 4  # --timeout passed before the job ended: the job goes on
RETRY_FOR_S = 600.0  # how long a scheduler that does not answer is asked again, by default
RETRY_FIRST_S = 1.0  # the first pause between two asks; it doubles up to RETRY_MOST_S
RETRY_MOST_S = 30.0
# States whose processes the controller did not see end: the node's own ranks fence themselves.
UNCONFIRMED = stepwatch.UNCONFIRMED
# How long a task that ended NODE_FAIL is waited for, past its step-watch's period: the
# look, killing its processes, and a record being written meanwhile.
FENCE_GRACE_S = 30.0


class WaitTimeout(Exception):
    """The job did not end within the time given (one line)."""


class SchedulerSilent(Exception):
    """The scheduler did not answer for the whole retry window (one line)."""


def look_retrying(
    job: Job,
    echo: Callable[[str], None],
    retry_for_s: float = RETRY_FOR_S,
    seen: dict[Path, dict] | None = None,
) -> "Outcome":
    """:func:`look`, asking a scheduler that does not answer again (pauses of 1, 2, 4 ... up
    to 30 s) for up to ``retry_for_s`` seconds; :class:`SchedulerSilent` after that."""
    deadline: float | None = None
    pause = RETRY_FIRST_S
    while True:
        try:
            outcome = look(job, seen)
        except scheduler.SchedulerError as exc:
            now = time.monotonic()
            if deadline is None:
                deadline = now + retry_for_s
                echo(f"job {job.job_id}: the scheduler does not answer ({exc}); retrying for up to {retry_for_s:g} s")
            if now >= deadline:
                raise SchedulerSilent(f"{exc} (no answer for {retry_for_s:g} s)") from exc
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, RETRY_MOST_S)
            continue
        if deadline is not None:
            echo(f"job {job.job_id}: the scheduler answers again")
        return outcome


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


def follow(
    job: Job,
    echo: Callable[[str], None],
    poll_s: float = POLL_S,
    timeout_s: float | None = None,
    retry_for_s: float = RETRY_FOR_S,
) -> Outcome:
    """Poll the job until every task has ended (processes gone, not merely COMPLETING, and
    rank 0 of a task whose node failed stopped), echoing each change of state and each
    record that lands; the final :class:`Outcome`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    shown_states: dict[int, str] = {}
    shown_records: set[str] = set()
    seen: dict[Path, dict] = {}
    fenced: dict[int, float] = {}  # index -> when its NODE_FAIL was first seen with rank 0 still marked live
    settled = False
    while True:
        outcome = look_retrying(job, echo, retry_for_s, seen)
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
        if outcome.ended and not _unfenced(job, outcome, fenced, echo):
            if not fenced or settled:
                return outcome
            settled = True  # one more look: a record may have landed as rank 0 stopped
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise WaitTimeout(
                f"job {job.job_id} has not ended after {timeout_s:g} s "
                f"({'; '.join(state_text(s) for s in outcome.states.values())})"
            )
        time.sleep(poll_s)


def _unfenced(job: Job, outcome: Outcome, fenced: dict[int, float], echo: Callable[[str], None]) -> bool:
    """Whether a task that ended without its node confirming it (NODE_FAIL) still has a rank 0
    that may store a record; each is waited for at most its step-watch's period plus
    :data:`FENCE_GRACE_S`, then named as one that may store late."""
    waiting = False
    for index, state in outcome.states.items():
        if state.state not in UNCONFIRMED:
            continue
        live = stepwatch.live_ranks(job.folder, index)
        if not live:
            continue
        bound = max(float(r.get("period_s", stepwatch.DEFAULT_PERIOD_S)) for r in live) + FENCE_GRACE_S
        hosts = ", ".join(sorted({str(r.get("host")) for r in live}))
        if index not in fenced:
            fenced[index] = time.monotonic()
            echo(f"job {job.job_id} [{index}] {state.state}: waiting up to {bound:g} s for rank 0 on {hosts} to stop")
        if time.monotonic() - fenced[index] < bound:
            waiting = True
            continue
        outcome.unfinished.append(
            f"job {job.job_id} [{index}] {state.state}: rank 0 on {hosts} did not confirm it stopped within "
            f"{bound:g} s; a record it stores later is loaded by 'perfsuite slurm wait {job.job_id}' again"
        )
    return waiting


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
