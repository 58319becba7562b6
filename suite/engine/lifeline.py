"""Measuring processes die with the ``perfsuite run`` that started them.

The runner's timeout is enforced by the runner: if it is killed (``kill -9``, an OOM
kill, a closed terminal) nothing else would stop a hung worker, torchrun or its ranks,
nor remove the run's temporary folder. So every process of a launch carries the runner's
pid and start time in its environment (:data:`ANCESTOR_ENV`) and runs :func:`arm`: a
daemon thread that polls the runner (and its own parent) a few times a second and, when
either is gone, removes the run's folder, kills its own descendants and then itself.

A polling thread rather than ``PR_SET_PDEATHSIG``: the death signal fires when the
*thread* that forked a process exits, and torch's elastic agent may start ranks from a
thread of its own; and a signal kills before anyone removes the folder. The thread runs
whenever the main thread waits (sleeps, collectives, I/O release the GIL).

torchrun itself is started as ``python -m perfsuite.engine.lifeline torch.distributed.run ...``: the
same thread, armed before the elastic agent runs in this process.
"""

from __future__ import annotations

import os
import runpy
import shutil
import signal
import sys
import threading

ANCESTOR_ENV = "PERFSUITE_ANCESTOR"  # "PID:START_TIME" of the perfsuite run process
WORKDIR_ENV = "PERFSUITE_WORKDIR"  # the run's temporary folder
POLL_S = 0.2


def ancestor_token(pid: int | None = None) -> str:
    """``PID:START_TIME`` of a process: a pid alone may be reused by a stranger."""
    import psutil

    p = psutil.Process(pid or os.getpid())
    return f"{p.pid}:{p.create_time():.3f}"


def alive(token: str) -> bool:
    """Whether the process named by ``token`` still runs (a zombie is dead: it waits to be reaped)."""
    import psutil

    pid_text, _, started = token.partition(":")
    try:
        p = psutil.Process(int(pid_text))
        return f"{p.create_time():.3f}" == started and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def arm() -> threading.Thread | None:
    """Start the watch when this process was launched by a runner; None otherwise."""
    token = os.environ.get(ANCESTOR_ENV)
    if not token:
        return None
    parent = os.getppid()
    workdir = os.environ.get(WORKDIR_ENV)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(POLL_S):
            if os.getppid() != parent or not alive(token):
                die(workdir)

    thread = threading.Thread(target=watch, name="perfsuite-lifeline", daemon=True)
    thread.start()
    return thread


def die(workdir: str | None) -> None:
    """The runner is gone: remove the run's folder, kill what this process started, then itself."""
    import psutil

    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)  # another process of the launch may race us to it
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            continue  # exited meanwhile
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    """``python -m perfsuite.engine.lifeline MODULE ARGS...``: run MODULE as ``__main__`` under the watch."""
    if len(sys.argv) < 2:
        print("usage: python -m perfsuite.engine.lifeline MODULE [ARGS...]", file=sys.stderr)
        sys.exit(2)
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    arm()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
