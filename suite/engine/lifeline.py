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
same thread, armed before the elastic agent runs in this process, whose temporary files
(``torchelastic_*`` log folders, the watchdog's file) are made inside the run's folder.

While no measuring process runs (before the launch, while the record is written and
stored) nothing of the above is alive to clean up after a ``kill -9`` of the runner: the
:class:`Janitor` is. It is a small process of its own session that the runner tells which
folders it made; it reads a pipe whose only writer is the runner, so the end of the
runner, however it ends, is the end of the pipe, and the janitor removes what is left.

Whoever removes a run's folder (the runner, a lifeline thread, the janitor) goes through
:func:`settle`: a folder holding a complete result of the measuring process is never
deleted before that result is moved, with what its record needs, into a folder of the
records folder (:data:`UNRECORDED_FOLDER`, named in the run's :data:`KEEP_FILE`), where the
next ``perfsuite run`` or ``perfsuite results`` names it and ``perfsuite import`` seals it.
Where no such folder can take it, the run's folder is left as it is. This module runs as
the janitor with the standard library alone, so that check is structural; the full one is
made when the result is sealed.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ANCESTOR_ENV = "PERFSUITE_ANCESTOR"  # "PID:START_TIME" of the perfsuite run process
WORKDIR_ENV = "PERFSUITE_WORKDIR"  # the run's temporary folder
POLL_S = 0.2
WORKDIR_PREFIX = "perfsuite-"  # a run's temporary folder: perfsuite-<run id[:8]>-<random>
RESULT_FILE = "result.json"  # the measuring process's WorkerResult
SEALING_FILE = "sealing.json"  # what the record needs besides the result (perfsuite.engine.record.Sealing)
KEEP_FILE = "keep.json"  # the run id, its runner, and the folders a complete result is moved to
KEPT_FILE = "kept.json"  # in a kept result's folder: KEEP_FILE's facts, and who kept it, when and why
UNRECORDED_FOLDER = "unrecorded"  # <records folder>/unrecorded/<run id>/: results without a record
KEPT_FILES = (RESULT_FILE, SEALING_FILE)


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
    """The runner is gone: settle the run's folder (a complete result is kept), kill what this
    process started, then itself."""
    import psutil

    if workdir:
        settle(Path(workdir), f"the lifeline of measuring process {os.getpid()}", "its runner ended")
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


def write_keep(workdir: Path, run_id: str, folders: list[Path]) -> None:
    """Name, in the run's folder, where a complete result goes if the runner dies: ``folders``
    in order (each gets ``<run id>/``), with the run id and the runner that made it."""
    facts = {
        "run_id": run_id,
        "host": socket.gethostname(),
        "runner_pid": os.getpid(),
        "folders": [str(f) for f in folders],
    }
    (workdir / KEEP_FILE).write_text(json.dumps(facts))


def complete_result(folder: Path) -> dict | None:
    """The measuring process's result in ``folder`` when it is complete (written whole, as it
    is renamed into place, and a result's shape), with its sealing beside it; else None."""
    try:
        result = json.loads((folder / RESULT_FILE).read_text())
        sealing = json.loads((folder / SEALING_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(result, dict) and isinstance(sealing, dict)):
        return None
    if not all(isinstance(result.get(key), str) and result[key] for key in ("status", "started_at", "finished_at")):
        return None
    return result


def settle(workdir: Path, by: str, why: str) -> Path | None:
    """Remove a run's folder, unless it holds a complete result: then the result (and its
    sealing) is moved first into the first of the folders named in its :data:`KEEP_FILE` that
    takes it, and that place returned; where none does, the folder is left and returned.
    Safe to call from several processes at once: each copies, one rename wins."""
    if complete_result(workdir) is None:
        shutil.rmtree(workdir, ignore_errors=True)  # another process of the launch may race us to it
        return None
    try:
        keep = json.loads((workdir / KEEP_FILE).read_text())
        run_id, folders = str(keep["run_id"]), [Path(f) for f in keep["folders"]]
    except (OSError, ValueError, KeyError, TypeError):
        return workdir  # no word where to keep it: it stays where it is
    kept = dict(keep, kept_by=by, why=why, kept_at=_now())
    for folder in folders:
        try:
            final = keep_result(workdir, folder, run_id, kept)
        except OSError:
            continue  # this folder cannot take it: the next one
        shutil.rmtree(workdir, ignore_errors=True)
        return final
    return workdir


def keep_result(workdir: Path, folder: Path, run_id: str, kept: dict) -> Path:
    """Copy the result and its sealing into ``folder/<run id>``, made whole under another name
    and renamed into place; the place (also when another process put it there first)."""
    final = folder / run_id
    if complete_result(final) is not None:
        return final
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".{run_id}~{socket.gethostname()}~{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)  # our own leftover (a pid reused after a kill -9)
    try:
        staging.mkdir()
        for name in KEPT_FILES:
            shutil.copyfile(workdir / name, staging / name)
        (staging / KEPT_FILE).write_text(json.dumps(kept))
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if complete_result(final) is not None:
            return final  # another process of the launch kept it first (and removed the folder)
        raise
    return final


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat()


class Janitor:
    """The runner's side of the janitor process: :meth:`watch` a folder before making it,
    :meth:`release` it once removed (or kept on purpose). Whatever is still watched when the
    runner ends, by any way, is removed by the janitor."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._watched: set[str] = set()

    def _start(self) -> subprocess.Popen:
        # -I -S: nothing but the standard library, no folder of the package on sys.path.
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(Path(__file__).resolve()), JANITOR_FLAG],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C or a kill of the runner's process group spares it
        )
        for path in self._watched:
            self._send(proc, "watch", path)
        return proc

    @staticmethod
    def _send(proc: subprocess.Popen, action: str, path: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({action: path}).encode() + b"\n")
        proc.stdin.flush()

    def _tell(self, action: str, path: str) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        try:
            self._send(self._proc, action, path)
        except BrokenPipeError:  # it was killed: a fresh one takes over the whole list
            self._proc = self._start()
            self._send(self._proc, action, path)

    def watch(self, path: Path) -> None:
        self._watched.add(str(path))
        self._tell("watch", str(path))

    def release(self, path: Path) -> None:
        self._watched.discard(str(path))
        if self._proc is not None:
            self._tell("release", str(path))

    def close(self) -> None:
        """End the janitor now (it removes what is still watched); later calls start a new one."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it is gone already: nothing left to tell it
            proc.stdin.close()
        proc.wait()
        self._watched.clear()


JANITOR_FLAG = "--janitor"


def janitor() -> None:
    """The janitor process: read ``{"watch": path}`` / ``{"release": path}`` lines until the
    runner's end closes the pipe, then remove every folder still watched."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the runner
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal closing
    watched: set[str] = set()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a line cut short by the runner's death: its folder was not made yet
        if "watch" in message:
            watched.add(message["watch"])
        elif "release" in message:
            watched.discard(message["release"])
    for path in watched:
        settle(Path(path), "the janitor", "its runner ended before the record was written")


def main() -> None:
    """``python -m perfsuite.engine.lifeline MODULE ARGS...``: run MODULE as ``__main__`` under the watch."""
    if sys.argv[1:] == [JANITOR_FLAG]:
        janitor()
        return
    if len(sys.argv) < 2:
        print("usage: python -m perfsuite.engine.lifeline MODULE [ARGS...]", file=sys.stderr)
        sys.exit(2)
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    workdir = os.environ.get(WORKDIR_ENV)
    if workdir:
        # torchrun's agent makes its log folders (torchelastic_*) and watchdog file with
        # tempfile: inside the run's folder, they go with it. Its ranks' environment is untouched.
        tempfile.tempdir = workdir
    arm()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
