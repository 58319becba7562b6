"""Runs workloads: one measuring subprocess per run, in its own process group, with a
timeout that kills the whole tree; then the record, on disk first, in the registry second.

A run, from the runner's side:

1. static requirements (no process for a run that cannot happen here);
2. the launch (one process, torchrun or a SLURM rank) and, on the side that stores the
   record, the roofline ceilings read from the registry: the last time the registry is
   touched before the measurement ends;
3. the typed :class:`~perfsuite.engine.runspec.RunSpec` to the worker, its
   :class:`~perfsuite.engine.runspec.WorkerResult` back (or the runner's own "timeout" / "failed");
4. the record built, hashed and validated once, written atomically with its MLLOG twin;
5. only then the registry commit: if that fails, :class:`RecordNotStored` says where the
   file is, for ``perfsuite import``.

A finished measurement survives every failure after it: Ctrl-C and SIGTERM that come once
the worker's result is written wait while the record is built and written (a fraction of a
second), and end the command after it; a records folder that cannot take the file (full,
remounted read-only) sends it to a fallback folder that is named, and the registry stores it
anyway; where no folder can take it, it is stored in the registry, or printed whole as JSON
on stderr as the last resort. The worker's result is removed only once its record is
somewhere: a runner that dies before (``kill -9``) leaves it, with the record's
:class:`~perfsuite.engine.record.Sealing` saved before the launch, in
``<records>/unrecorded/<run id>/`` (perfsuite.engine.lifeline.settle), where the next command
names it and ``perfsuite import`` seals it with the same code (perfsuite.engine.unrecorded).

Every process of a launch dies with this one (perfsuite.engine.lifeline) and the temporary
folder goes with them; the :class:`~perfsuite.engine.lifeline.Janitor` removes the folder when
the runner itself is killed while no measuring process runs (keeping a complete result).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from perfsuite import distributed, processes
from perfsuite.controls import Controls, process_env
from perfsuite.engine import launcher, lifeline, progress
from perfsuite.engine import params as params_mod
from perfsuite.engine.record import Sealing, fallback_dirs, seal, sealing, write_files
from perfsuite.engine.runspec import RunRequest, RunSpec, WorkerResult, now
from perfsuite.measure.roofline import CEILING_SOURCES

LOG_TAIL_LINES = 15
WORKDIR_PREFIX = lifeline.WORKDIR_PREFIX
RESULT_FILE = lifeline.RESULT_FILE


class RegistryUnavailable(Exception):
    """The registry failed before a measurement started: nothing measured is lost (one line)."""


class StrictRefusal(Exception):
    """``--strict`` and a failed pre-flight check: nothing was measured or recorded (one line)."""


@dataclasses.dataclass
class Kept:
    """Where a finished record's file is: ``path`` (None: no folder could take it) and, when
    that is not the records folder, why (one line)."""

    path: Path | None
    note: str | None = None


class RecordNotStored(Exception):
    """The registry refused the record or could not be reached; the record is on disk (its
    path named) or, where no folder could take it, printed on stderr as JSON (one line)."""

    def __init__(self, record: dict, path: Path | None, reason: str) -> None:
        self.record, self.path, self.reason = record, path, reason
        where = (
            f"its record is at {path}: 'perfsuite import {path}' will load it"
            if path is not None
            else "no folder could take its record, printed above as JSON: save it to a file and "
            "'perfsuite import FILE' will load it"
        )
        super().__init__(
            f"run {record['run_id']} ({record['workload']['name']}, {record['status']}) was not "
            f"stored in the registry: {reason}; {where}"
        )


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends, then deliver them as they came: the block
    (a record built and written, a fraction of a second) is never cut in half. Only the main
    thread can hold signals; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    caught = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in caught}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def registry_failures() -> tuple[type[BaseException], ...]:
    """What opening or using the registry raises when it is unusable: its own RegistryError,
    and whatever SQLAlchemy or the file system raise beneath it."""
    from sqlalchemy.exc import SQLAlchemyError

    from perfsuite.registry import RegistryError

    return (RegistryError, SQLAlchemyError, OSError)


def failure_line(exc: BaseException) -> str:
    """An exception as one line: SQLAlchemy's messages carry SQL and a link on further lines.
    The registry's own errors are written for the user and keep their text as is."""
    from perfsuite.registry import RegistryError

    text = " ".join(str(exc).strip().splitlines()[:1]) or type(exc).__name__
    if isinstance(exc, RegistryError) or text.startswith(type(exc).__name__):
        return text
    return f"{type(exc).__name__}: {text}"


def static_unmet(req: RunRequest) -> str | None:
    """Requirements checked before any process starts (cheap, no torch import)."""
    r = req.entry.cls.requirements
    if req.controls.device not in r.devices:
        return f"runs on {', '.join(r.devices)} only, not {req.controls.device}"
    for pkg in r.packages:
        try:
            found = find_spec(pkg) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"needs the Python package {pkg!r}, which is not installed"
    world = req.launch.nproc_per_node * req.launch.nnodes
    if world < r.min_world_size and launcher.slurm_world() < r.min_world_size:
        return f"needs a world size of at least {r.min_world_size} (this launch has {world})"
    if r.max_world_size is not None and max(world, launcher.slurm_world()) > r.max_world_size:
        return f"runs as at most {r.max_world_size} process(es) (this launch has {max(world, launcher.slurm_world())})"
    return None


def kill_tree(proc: subprocess.Popen, tag: str) -> None:
    """SIGKILL the process group and every descendant (torchrun's ranks included)."""
    processes.kill_tree(proc.pid, tag)
    with contextlib.suppress(ProcessLookupError):  # already gone: nothing to kill
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def device_keys(device: str) -> list[str]:
    """The keys a run on ``device`` may be measured on here (the CPU, or each GPU NVML sees),
    without torch: the ceilings of each are read before the run."""
    import socket

    from perfsuite.engine.environment import cpu_model, device_key
    from perfsuite.measure import nvml

    host = socket.gethostname()
    if device == "cuda":
        return [device_key("cuda", g["name"], g["uuid"], host) for g in nvml.describe_gpus()]
    return [device_key("cpu", cpu_model(), None, host)]


class Runner:
    """Runs requests one after another and stores each record as soon as it is on disk."""

    def __init__(
        self,
        open_registry: Callable[[], Any],
        records_dir: Path,
        echo: Callable[[str], None] = lambda s: None,
        on_progress: Callable[[RunRequest, progress.Note], None] | None = None,
    ) -> None:
        self._open_registry = open_registry
        self._registry: Any = None
        self.records_dir = records_dir
        self.echo = echo
        self.janitor = lifeline.Janitor()
        # run id -> the file of a record on disk that the registry does not hold (yet)
        self.unstored: dict[str, Path] = {}
        # run id -> where a finished measurement without a record is kept (perfsuite.engine.unrecorded)
        self.unrecorded: dict[str, Path] = {}
        self._kept: set[str] = set()  # run ids whose record is somewhere (disk, registry or stderr)
        self.last_stored: dict | None = None  # the record of the current run, once the registry holds it
        self.on_progress = on_progress  # each progress note of a running run (perfsuite.engine.progress)

    def close(self) -> None:
        """End the janitor process (it removes any temporary folder still there)."""
        self.janitor.close()

    def _with_registry(self, use: Callable[[Any], Any]) -> Any:
        """Use the registry, then release its connections: a run may last many minutes, and a
        registry that went away meanwhile must fail the next use, not a stale connection."""
        if self._registry is None:
            self._registry = self._open_registry()
        try:
            return use(self._registry)
        finally:
            self._registry.close()

    def check_registry(self) -> None:
        """Open the registry (creating and migrating it) and read from it; RegistryUnavailable if that fails."""
        try:
            self._with_registry(lambda reg: reg.results(limit=1))
        except registry_failures() as exc:
            raise RegistryUnavailable(f"the registry cannot be used: {failure_line(exc)}") from exc

    def unstored_notice(self) -> str | None:
        """One line when the records folder holds records the registry does not (a command
        killed between writing and storing one), with the command that stores them."""
        from perfsuite.registry.recovery import unstored_notice, unstored_records

        try:
            found = self._with_registry(lambda reg: unstored_records(reg, self.records_dir))
        except registry_failures() as exc:
            raise RegistryUnavailable(f"the registry cannot be read: {failure_line(exc)}") from exc
        return unstored_notice(found, self.records_dir)

    def unrecorded_lines(self) -> list[str]:
        """One line for each finished measurement a runner left without a record (it died
        between the result and the record), with the command that stores it; kept results
        whose record the registry holds meanwhile are removed."""
        from perfsuite.engine import unrecorded

        def find(reg: Any) -> list[unrecorded.Kept]:
            unrecorded.prune(reg, self.records_dir)
            return unrecorded.find(reg, self.records_dir)

        try:
            found = self._with_registry(find)
        except registry_failures() as exc:
            raise RegistryUnavailable(f"the registry cannot be read: {failure_line(exc)}") from exc
        return [f"Note: {unrecorded.finished_line(k)}" for k in found]

    def ceilings(self, device: str, quick: bool) -> dict[str, list[dict]]:
        """device key -> the latest passed full record of each ceiling workload measured on it.
        A quick run's ceilings (small shapes, understated) judge only another quick run, and
        only until the device has a full one."""

        def read(reg: Any) -> dict[str, list[dict]]:
            out = {}
            for key in device_keys(device):
                found = (reg.latest_ceiling(w, key, quick_allowed=quick) for w in CEILING_SOURCES)
                out[key] = [r for r in found if r]
            return out

        try:
            return self._with_registry(read)
        except registry_failures() as exc:
            raise RegistryUnavailable(f"the registry cannot be read: {failure_line(exc)}") from exc

    def run(self, req: RunRequest) -> dict | None:
        """The stored record, or None where another node's rank 0 stores it. Raises
        RegistryUnavailable (nothing measured yet) or RecordNotStored (the file is on disk)."""
        run_id = uuid.uuid4().hex
        self.last_stored = None
        started = now()
        unmet = static_unmet(req)
        if unmet:
            if not launcher.stores_records(req.launch):
                return None  # rank 0's side records the skip, once
            result = WorkerResult(status="skipped", error=unmet, started_at=started, finished_at=now())
            return self._finish(sealing(req, run_id, None, {}), result)
        from perfsuite.doctor.preflight import preflight_section, refusal

        checked = preflight_section(req.controls.device)  # before the worker starts: a quiet machine
        if req.strict and refusal(checked):
            raise StrictRefusal(refusal(checked))
        workdir = self._make_workdir(run_id)
        try:
            spec = RunSpec(
                run_id=run_id,
                workload=req.entry.name,
                params=params_mod.to_dict(req.params),
                quick=req.quick,
                controls=req.controls,
                workdir=str(workdir),
                result_path=str(workdir / RESULT_FILE),
                artifact_dir=str(self.records_dir / "artifacts" / run_id),
            )
            spec_path = workdir / "spec.json"
            launch = launcher.build(str(spec_path), req.launch, req.controls.device, req.controls.cuda_graph)
            ncu_log = workdir / "ncu.csv"
            if req.controls.profile == "ncu":  # single local process only (checked in perfsuite.engine.session)
                from perfsuite.measure.profiling import ncu_command

                launch.argv = ncu_command(ncu_log) + launch.argv
            ceilings = self.ceilings(req.controls.device, req.quick) if launch.records else {}
            sealed = sealing(req, run_id, launch, ceilings, checked)
            if launch.records:  # before the launch: a result is never without what seals it
                (workdir / lifeline.SEALING_FILE).write_text(sealed.to_json())
            spec_path.write_text(spec.to_json())
            launch.env.update(process_env(req.controls))
            launch.env.update(req.extra_env)
            launch.env.update({lifeline.ANCESTOR_ENV: lifeline.ancestor_token(), lifeline.WORKDIR_ENV: str(workdir)})
            try:
                result = self._launch(req, spec, spec_path, launch, started)
                if not launch.records:
                    return None  # another node's rank 0 writes the record
                if req.controls.profile == "ncu" and result.status == "success":
                    self._ncu_summary(result, ncu_log, Path(spec.artifact_dir))
                return self._finish(sealed, result, workdir)
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM once the worker had written its result: the record is
                # written (and stored) first, then the interrupt ends the command.
                finished = None if run_id in self._kept or not launch.records else _finished_result(workdir)
                if finished is not None:
                    self._finish(sealed, finished, workdir)
                raise
        finally:
            self._remove_workdir(workdir, run_id)

    def _make_workdir(self, run_id: str) -> Path:
        """The run's temporary folder, named to the janitor before it exists, with the folders a
        complete result is kept in should this process die before its record is written."""
        from perfsuite.engine.unrecorded import keep_folders

        workdir = Path(tempfile.gettempdir()) / f"{WORKDIR_PREFIX}{run_id[:8]}-{secrets.token_hex(4)}"
        self.janitor.watch(workdir)
        workdir.mkdir(mode=0o700)
        lifeline.write_keep(workdir, run_id, keep_folders(self.records_dir))
        return workdir

    def _remove_workdir(self, workdir: Path, run_id: str) -> None:
        """Remove the run's folder; a worker's result whose record is nowhere yet (an unexpected
        error, a second interrupt while the first was sealing it) is kept and named first."""
        if run_id not in self._kept and lifeline.complete_result(workdir) is not None:
            from perfsuite.engine.unrecorded import finished_line, read_kept

            kept = lifeline.settle(workdir, "the runner", "its command was interrupted or failed before the record")
            self.janitor.release(workdir)
            if kept is not None:
                self.unrecorded[run_id] = kept
                self.echo(f"run {run_id}: {finished_line(read_kept(kept))}")
            return
        shutil.rmtree(workdir, ignore_errors=True)  # a rank may be writing to it as it is killed
        if workdir.exists():
            return  # the janitor tries again when this process ends
        self.janitor.release(workdir)

    def _launch(
        self, req: RunRequest, spec: RunSpec, spec_path: Path, launch: launcher.Launch, started: str
    ) -> WorkerResult:
        log_path = Path(spec.workdir) / "worker.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                launch.argv,
                env=launch.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                progress.wait(proc, req.controls.timeout_s, spec_path, self._watcher(req))
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_tree(proc, launch.tag)
                timed_out = True
            finally:
                if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): leave no orphan ranks behind
                    kill_tree(proc, launch.tag)
        # Anything the launch started and left behind (a rank that outlived torchrun) goes too.
        processes.kill_tree(proc.pid, launch.tag)
        launcher.note_rank_exit(launch, proc.returncode)  # for rank 0's side, on another task
        if not launch.records:
            return WorkerResult(status="skipped", started_at=started, finished_at=now())  # not reported here
        rank_errors = distributed.read_rank_errors(spec_path)
        if timed_out or proc.returncode != 0 or rank_errors:  # a rank that died is named first
            # ... unless it wrote its own error: a rank that raised may abort as it exits (SIGABRT),
            # and its exception, not the signal, is the cause
            reported = {error.split(":", 1)[0] for error in rank_errors}  # "rank 1"
            died = [d for d in launcher.dead_ranks(launch, log_path) if d.split(" died", 1)[0] not in reported]
            rank_errors = died + rank_errors
        if timed_out:
            msg = f"timed out after {req.controls.timeout_s:g} s; process tree killed"
            where = rank_errors + (distributed.read_rank_progress(spec_path) if launch.world_size > 1 else [])
            if where:
                msg += "; " + "; ".join(where)
            return WorkerResult(status="timeout", error=msg, started_at=started, finished_at=now())
        result_path = Path(spec.result_path)
        if result_path.exists():
            result = WorkerResult.from_json(result_path.read_text())
            if result.status == "failed" and rank_errors:
                result.error = "; ".join(rank_errors)
            return result
        why = "; ".join(rank_errors) if rank_errors else f"measuring process {_exit_reason(proc.returncode)}"
        tail = _tail(log_path)
        self.echo(f"{req.entry.name}: {why}" + (f"\n{tail}" if tail else ""))
        error = why + (f" (last output: {tail.splitlines()[-1]})" if tail else "")
        return WorkerResult(status="failed", error=error, started_at=started, finished_at=now())

    def _watcher(self, req: RunRequest) -> Callable[[progress.Note], None] | None:
        watch = self.on_progress
        if watch is None:
            return None
        return lambda note: watch(req, note)

    @staticmethod
    def _ncu_summary(result: WorkerResult, log: Path, artifacts: Path) -> None:
        """Nsight Compute's CSV log into the record's ``details["profile"]``; the log itself is
        kept beside the record. A log without kernels is stated, not ignored."""
        from perfsuite.measure.profiling import PROFILE_CALLS, parse_ncu_csv

        cases = result.details.pop("ncu_cases", [])
        entry: dict = {"tool": "ncu", "calls": PROFILE_CALLS, "cases": cases, "log": "ncu.csv"}
        try:
            text = log.read_text(errors="replace")
            artifacts.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, artifacts / "ncu.csv")
            entry["top"] = parse_ncu_csv(text)
        except (OSError, ValueError) as exc:
            entry["top"], entry["error"] = [], f"{type(exc).__name__}: {exc}"
        result.details["profile"] = {"ncu": entry}

    def _finish(self, sealed: Sealing, result: WorkerResult, workdir: Path | None = None) -> dict:
        """Seal, write and store the record of a run (``workdir``: the run's folder, whose
        worker result goes once the record's file is written)."""
        run_id = sealed.frame["run_id"]
        with deferred_interrupts():  # a finished measurement reaches a file before any interrupt
            record = seal(sealed, result)
            kept = self._keep(record)
            if kept.path is not None and workdir is not None:
                (workdir / RESULT_FILE).unlink(missing_ok=True)  # its record is on disk: nothing to keep
        # In memory only (no folder took it): the store is not interrupted either.
        holding = deferred_interrupts() if kept.path is None else contextlib.nullcontext()
        with holding:
            try:
                self._with_registry(lambda reg: reg.store(record))
            except registry_failures() as exc:
                if kept.path is None:
                    sys.stderr.write(json.dumps(record, sort_keys=True) + "\n")
                    sys.stderr.flush()
                    self._kept.add(run_id)
                raise RecordNotStored(record, kept.path, failure_line(exc)) from exc
        self._kept.add(run_id)
        self.unstored.pop(run_id, None)
        self.last_stored = record
        self._announce_stored(record)
        if kept.note:
            where = f"its file is at {kept.path}" if kept.path else "it has no file"
            self.echo(f"run {run_id} ({record['workload']['name']}) is stored in the registry; {where}: {kept.note}")
        return record

    def _keep(self, record: dict) -> Kept:
        """Write the record's files: into the records folder, else into the first fallback
        folder that takes them; ``Kept(None, why)`` when none does. Never raises for a folder."""
        run_id = record["run_id"]
        path: Path | None = None
        note: str | None = None
        try:
            path = write_files(record, self.records_dir)
        except OSError as exc:
            why = exc.strerror or str(exc)
            if (self.records_dir / f"{run_id}.json").is_file():  # complete (renamed into place); its twin is not
                path, note = self.records_dir / f"{run_id}.json", f"its MLLOG twin could not be written: {why}"
            else:
                refusals = [f"the records folder {self.records_dir} cannot take it: {why}"]
                path = self._keep_elsewhere(record, refusals)
                note = "; ".join(refusals)
        if path is not None:
            self._kept.add(run_id)
            self.unstored[run_id] = path
        return Kept(path, note)

    def _keep_elsewhere(self, record: dict, refusals: list[str]) -> Path | None:
        """The record's file in the first fallback folder that takes it; each refusal noted."""
        for folder in fallback_dirs(self.records_dir):
            try:
                return write_files(record, folder)
            except OSError as exc:
                if (folder / f"{record['run_id']}.json").is_file():
                    return folder / f"{record['run_id']}.json"  # only its MLLOG twin failed
                refusals.append(f"nor can {folder}: {exc.strerror or exc}")
        return None

    def _announce_stored(self, record: dict) -> None:
        """The ``perfsuite_record_stored`` hook, each plugin with its own copy of the record; a
        plugin that raises is one warning line, and the stored record is untouched."""
        import copy

        from perfsuite.plugins import get_host

        url = self._registry.url if self._registry is not None else ""
        failures = get_host().call_each(
            "perfsuite_record_stored", per_plugin=lambda info: {"record": copy.deepcopy(record)}, registry_url=url
        )
        for failure in failures:
            self.echo(f"Warning: plugin {failure.plugin} failed in {failure.hook}: {failure.error}")


def _finished_result(workdir: Path) -> WorkerResult | None:
    """The worker's result in ``workdir`` when it wrote a complete one; None otherwise (a
    result the runner cannot read is kept and named by the cleanup, never sealed here)."""
    if lifeline.complete_result(workdir) is None:
        return None
    try:
        return WorkerResult.from_json((workdir / RESULT_FILE).read_text())
    except (OSError, ValueError, TypeError):
        return None


def resolve_controls(**kwargs: Any) -> Controls:
    """Controls from CLI options; None means 'the default from Controls'."""
    fields = {f.name for f in dataclasses.fields(Controls)}
    return Controls(**{k: v for k, v in kwargs.items() if k in fields and v is not None})


def repeat_seeds(seed: int | None, repeat: int) -> list[int]:
    """Unique seeds for the N runs of a repeat (MLPerf asks for them): the given seed and the
    next ones, or fresh random ones recorded in each record."""
    if seed is None:
        base = int.from_bytes(os.urandom(4), "little") & 0x3FFFFFFF
    else:
        base = seed
    return [base + i for i in range(repeat)]
