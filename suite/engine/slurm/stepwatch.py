"""A rank of a SLURM step ends itself when the controller says its step is gone.

When a node's ``slurmd`` dies, the controller declares the node down and its jobs
``NODE_FAIL``, but nothing is left on the node to kill the job's processes: ``slurmstepd``
and the ranks under it go on measuring, on a node the scheduler may already be handing to
another job, and rank 0 may store records after ``perfsuite slurm wait`` has summed the job
up. So every ``perfsuite`` task of a step runs a watch (a daemon thread, started by the
launcher at the task's first launch) that asks the controller every
``PERFSUITE_SLURM_STEP_WATCH_S`` seconds (default :data:`DEFAULT_PERIOD_S`) whether the
task's job still runs and still holds its step. Once the controller answers that it does
not, the watch kills every measuring process the task launched and then the task itself.
A controller that does not answer is not a verdict: jobs go on through a controller's
outage, and so do their ranks.

Rank 0 also leaves a marker in the job's folder (``live/``) while it runs, removed as it
ends (normally or fenced): ``perfsuite slurm wait`` waits for it before summing up a task
that ended ``NODE_FAIL``, so that no record lands after ``wait`` has returned.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from perfsuite.engine.slurm import scheduler
from perfsuite.files import write_atomic

PERIOD_ENV = "PERFSUITE_SLURM_STEP_WATCH_S"
DEFAULT_PERIOD_S = 30.0  # a look per task every half minute: cheap for the controller of a large job
JOB_DIR_ENV = "PERFSUITE_SLURM_JOB_DIR"  # set by perfsuite's job scripts: the job's folder, on shared storage
LIVE_FOLDER = "live"

# Ended without the node confirming it: the node's slurmd is gone, so are the kills it makes.
UNCONFIRMED = frozenset({"NODE_FAIL", "BOOT_FAIL"})
# Any other end (cancelled, timed out, a step gone) is the node's slurmstepd's to carry out,
# SIGTERM first (a run then stores what it finished), SIGKILL after the site's KillWait
# (30 s by default): the watch fences only what is still there a minute later.
SCHEDULER_KILL_GRACE_S = 60.0

_started: threading.Thread | None = None


def period_s() -> float:
    """Seconds between two looks, from ``PERFSUITE_SLURM_STEP_WATCH_S`` (a positive number of
    at most a day); the default where it is unset or not such a number (said once on stderr)."""
    text = os.environ.get(PERIOD_ENV)
    if text is None:
        return DEFAULT_PERIOD_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        print(
            f"perfsuite: {PERIOD_ENV}={text!r} is not a number of seconds in (0, 86400]; "
            f"the step-watch looks every {DEFAULT_PERIOD_S:g} s",
            file=sys.stderr,
        )
        return DEFAULT_PERIOD_S
    return value


def in_step() -> bool:
    """Whether this process is a task of a job step (srun), not the batch script itself."""
    return bool(os.environ.get("SLURM_JOB_ID")) and os.environ.get("SLURM_STEP_ID", "").isdigit()


def start() -> threading.Thread | None:
    """Start the watch once per process, inside a job step; None elsewhere."""
    global _started
    if _started is not None or not in_step():
        return _started
    job, step = os.environ["SLURM_JOB_ID"], os.environ["SLURM_STEP_ID"]
    period = period_s()
    marker = _mark_live(period) if os.environ.get("SLURM_PROCID") == "0" else None
    if marker is not None:
        atexit.register(_unmark, marker)
    _started = threading.Thread(
        target=_watch, args=(job, step, period, marker), name="perfsuite-step-watch", daemon=True
    )
    _started.start()
    return _started


def _watch(job: str, step: str, period: float, marker: Path | None) -> None:
    first_seen: float | None = None  # when the controller first said the step is over
    while True:
        time.sleep(period * random.uniform(0.8, 1.2))  # tasks of a large step do not ask at once
        why, unconfirmed = gone(job, step)
        if why is None:
            first_seen = None
            continue
        first_seen = first_seen or time.monotonic()
        if unconfirmed or time.monotonic() - first_seen >= SCHEDULER_KILL_GRACE_S:
            fence(why, marker)


def step_names(job: str, step: str) -> set[str]:
    """The names the controller may list this task's step under: ``JOB.STEP``, and for an
    array's task ``ARRAYJOB_INDEX.STEP``."""
    names = {f"{job}.{step}"}
    array_job, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and index:
        names.add(f"{array_job}_{index}.{step}")
    return names


def gone(job: str, step: str) -> tuple[str | None, bool]:
    """Why the controller says this task's step is over (None while it runs, or while the
    controller does not answer: that is not a verdict), and whether the job ended without
    its node confirming that its processes are gone (NODE_FAIL: nobody else will end them)."""
    try:
        state = scheduler.job_state(job)
        if state is None:
            return f"job {job} is no longer known to the controller", False
        if state in scheduler.ENDED:
            return f"job {job} is {state}", state in UNCONFIRMED
        steps = scheduler.job_steps(job)
    except scheduler.SchedulerError:
        return None, False
    if steps and not steps & step_names(job, step):
        return f"step {job}.{step} is no longer known to the controller", False
    return None, False


def fence(why: str, marker: Path | None) -> None:
    """End every measuring process this task launched (each carries a launch tag), then the
    task itself; rank 0's marker goes last, once nothing of it can write a record."""
    import psutil

    from perfsuite.processes import TAG_ENV

    print(f"perfsuite: {why}: ending this rank's processes (its step is gone)", file=sys.stderr, flush=True)
    try:
        family = psutil.Process().children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    launched = []
    for proc in family:
        try:
            if TAG_ENV in proc.environ():
                proc.kill()
                launched.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # gone meanwhile
    psutil.wait_procs(launched, timeout=10)
    if marker is not None:
        _unmark(marker)
    os.kill(os.getpid(), signal.SIGKILL)


# -- rank 0's marker, read by `perfsuite slurm wait` -----------------------------------------------
def live_folder(job_folder: Path) -> Path:
    return job_folder / LIVE_FOLDER


def _mark_live(period: float) -> Path | None:
    job_dir = os.environ.get(JOB_DIR_ENV)
    if not job_dir:
        return None
    index = os.environ.get("SLURM_ARRAY_TASK_ID", "0")
    host = socket.gethostname()
    path = live_folder(Path(job_dir)) / f"{index}.{host}.{os.getpid()}.json"
    try:
        path.parent.mkdir(exist_ok=True)
        write_atomic(path, json.dumps({"index": int(index), "host": host, "pid": os.getpid(), "period_s": period}))
    except OSError as exc:
        print(f"perfsuite: cannot leave rank 0's marker {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
    return path


def _unmark(marker: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()


def live_ranks(job_folder: Path, index: int) -> list[dict]:
    """Rank 0 markers of one array index still in the job's folder, those of this host whose
    process is gone left out (a task killed outright cannot remove its own)."""
    import psutil

    out = []
    host = socket.gethostname()
    for path in sorted(live_folder(job_folder).glob(f"{index}.*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # removed meanwhile
        if data.get("host") == host and not psutil.pid_exists(int(data.get("pid", 0))):
            continue
        out.append(data)
    return out
