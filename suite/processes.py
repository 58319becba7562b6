"""The processes a run starts, and how they are ended: the variables every launched process
carries (its launch tag, its run's spec file) and the kills that reach all of them.

One module below the engine, the plugin API and the cross-checks alike: the launcher tags what
it starts, the runner and a SLURM task end what was tagged, the ranks read their spec file's
name, and a cross-check ends the reference tool it started, all through the same few names.
torch's elastic agent starts each rank in a session of its own, so killing a process group
does not reach the ranks: :func:`kill_tree` kills every descendant, and every process that
carries the launch's tag in its environment (a rank re-parented after its agent died).
"""

from __future__ import annotations

import os
import signal

TAG_ENV = "PERFSUITE_LAUNCH_TAG"  # set in every launched process's environment: which launch it is
SPEC_ENV = "PERFSUITE_SPEC"  # set in every rank's environment: the spec file of its run
KILL_WAIT_S = 10.0


def kill_tree(pid: int, tag: str | None = None) -> None:
    """SIGKILL ``pid`` and everything it started, and (given the launch's ``tag``) every
    process of this user whose environment carries it: torchrun's ranks live in sessions
    of their own and outlive an agent that was killed first.

    ``pid`` must be a process started from a :class:`Launch` (its environment carries a
    launch tag): a pid that exited and was handed to an unrelated process is left alone.
    The root is stopped first so that it starts nothing new while its tree is collected."""
    import psutil

    procs: list[psutil.Process] = []
    try:
        root = psutil.Process(pid)
        # An exited root's pid may already belong to someone else: touch the root only if
        # it carries this launch's tag (any launch's tag when none is given).
        if _has_tag(root, tag):
            procs = _stopped_family(root)
    except psutil.NoSuchProcess:
        pass  # the root already exited; tagged orphans may remain
    if tag:
        procs += [p for p in _tagged(tag) if p.pid not in {q.pid for q in procs}]
    _kill_all(procs)


def kill_family(pid: int) -> None:
    """SIGKILL a child of this process that it has not yet waited for, and everything that
    child started (an MPI launcher's proxies and ranks, which hold GPUs). Its pid cannot have
    been handed to anyone else, so it needs no launch tag; the root is stopped first, as in
    :func:`kill_tree`."""
    import psutil

    try:
        procs = _stopped_family(psutil.Process(pid))
    except psutil.NoSuchProcess:
        procs = []
    _kill_all(procs)


def _stopped_family(root) -> list:
    """``root``, stopped so that it starts nothing new, and all its descendants."""
    root.send_signal(signal.SIGSTOP)
    return [root, *root.children(recursive=True)]


def _kill_all(procs: list) -> None:
    import psutil

    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            continue  # exited while we looked
    psutil.wait_procs(procs, timeout=KILL_WAIT_S)


def _has_tag(proc, tag: str | None) -> bool:
    import psutil

    try:
        found = proc.environ().get(TAG_ENV)
        return found is not None and (tag is None or found == tag)
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return False  # other users' processes and the ones gone meanwhile are not ours


def _tagged(tag: str) -> list:
    import psutil

    me = os.getpid()
    return [p for p in psutil.process_iter() if p.pid != me and _has_tag(p, tag)]
