"""One ``perfsuite run`` command's worth of runs: the checks made before any of them
starts, and the loop that runs them, so that every way it can end says what happened.

- Before: launch options, memory footprints, the records folder and the registry are
  checked; a problem is one line and exit 2, and nothing has been measured.
- Ctrl-C or SIGTERM: the current run's process tree is killed and its folder removed (the
  runner does that on the way out); exit 130 with the runs stored, the run interrupted
  and the runs not started. A record that reached disk but not the registry is named with
  its file and the ``perfsuite import`` command that stores it.
- A registry that fails after a measurement: the record is on disk; one line names the
  file and ``perfsuite import``; the remaining runs are not started; exit 1.
- Records a previous command left in the records folder but not in the registry (it was
  killed between the two) are noticed before the runs start, in one line; so is each
  finished measurement a killed command left without a record (perfsuite.engine.unrecorded).
- Ctrl-C or SIGTERM once a run's measuring process has written its result: the record is
  written and stored first; where it cannot be, the result is named as finished, with the
  ``perfsuite import`` command that stores it, never as "not finished".
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.engine import launcher
from perfsuite.engine.footprint import too_large
from perfsuite.engine.runner import (
    RecordNotStored,
    RegistryUnavailable,
    Runner,
    RunRequest,
    StrictRefusal,
    static_unmet,
)
from perfsuite.files import remove_stale_temporaries

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


class PreflightError(Exception):
    """A run that cannot start as asked; the message is one line and nothing was measured."""


def check_records_dir(path: Path) -> None:
    """The records folder exists (or can be made) and a file can be created in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".perfsuite-write-check-"):
            pass
    except OSError as exc:
        raise PreflightError(f"the records folder {path} cannot be written: {exc.strerror or exc}") from exc


def profile_unmet(req: RunRequest) -> str | None:
    """Why ``--profile`` cannot run for this request here (no torch import), or None."""
    from perfsuite.measure.profiling import unavailable_reason

    tool = req.controls.profile
    if tool is None:
        return None
    why = unavailable_reason(tool, req.controls.device)
    if why is None and tool == "ncu":
        world = max(req.launch.nproc_per_node * req.launch.nnodes, launcher.slurm_world())
        if world > 1 or req.launch.rdzv_endpoint is not None:
            why = "Nsight Compute wraps a single local measuring process, not torchrun or SLURM ranks"
    return None if why is None else f"--profile {tool}: {why}"


def strict_unmet(requests: list[RunRequest]) -> str | None:
    """``--strict``: the pre-flight checks of each device the runs use, made now, so that a
    failed check stops the command before anything is measured."""
    from perfsuite.doctor.preflight import preflight_section, refusal

    for device in dict.fromkeys(r.controls.device for r in requests if r.strict):
        why = refusal(preflight_section(device))
        if why:
            return why
    return None


def preflight(runner: Runner, requests: list[RunRequest], check_url: Callable[[], Any] | None = None) -> None:
    """Everything that can be known to fail before the first run starts; PreflightError.
    ``check_url``: the registry URL's cheap check (registry.check_url), made before the
    registry is opened, so that a bad ``--db`` is one line before any run."""
    for req in requests:
        try:
            launcher.validate(req.launch)
        except launcher.LaunchError as exc:
            raise PreflightError(str(exc)) from exc
        why = profile_unmet(req)
        if why:
            raise PreflightError(why)
    for req in requests:
        if static_unmet(req) is not None:
            continue  # recorded as a skip with its reason; its size does not matter
        opts = req.launch
        world = max(opts.nproc_per_node * opts.nnodes, launcher.slurm_world())
        why = too_large(req.entry.cls(req.params), req.controls.device, world, opts.nproc_per_node)
        if why:
            raise PreflightError(f"{req.entry.name}: {why}; not started")
    if any(launcher.stores_records(req.launch) for req in requests):
        check_records_dir(runner.records_dir)
        remove_stale_temporaries(runner.records_dir)  # left by a writer killed mid-write
        if check_url is not None:
            from perfsuite.registry import RegistryError

            try:
                check_url()
            except RegistryError as exc:
                raise PreflightError(f"the registry cannot be used: {exc}") from exc
        try:
            runner.check_registry()
        except RegistryUnavailable as exc:
            raise PreflightError(str(exc)) from exc
        try:
            notice = runner.unstored_notice()
        except RegistryUnavailable as exc:
            raise PreflightError(str(exc)) from exc
        if notice:
            runner.echo(notice)
        try:
            for line in runner.unrecorded_lines():
                runner.echo(line)
        except RegistryUnavailable as exc:
            raise PreflightError(str(exc)) from exc
    why = strict_unmet(requests)
    if why:
        raise PreflightError(why)


def _handled_signals(handler, then_ignored: bool = False) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM both go to ``handler`` inside the block (main thread only); after it
    they get their previous handlers back, or with ``then_ignored`` are ignored."""

    @contextlib.contextmanager
    def scope() -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, signal.SIG_IGN if then_ignored else h)

    return scope()


def sigterm_as_interrupt() -> contextlib.AbstractContextManager[None]:
    """SIGTERM ends the command as Ctrl-C does (the process tree killed, folders removed)."""

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    return _handled_signals(interrupt)


def signals_noted(noted: list[int]) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM only noted (appended to ``noted``) from the start of a command's runs
    to its exit: the janitor closed, the summary and the lines naming a record the registry lacks
    written. A signal then cuts nothing short; the command exits 130 afterwards. The runs
    themselves, inside :func:`sigterm_as_interrupt`, are still interrupted at once.

    On leaving the block both signals are ignored, not restored: the command has written
    everything and is exiting, and a default SIGTERM in those last milliseconds would end it
    as killed (-15) with its work done."""

    def note(signum, frame) -> None:
        noted.append(signum)

    return _handled_signals(note, then_ignored=True)


@dataclass
class Outcome:
    records: list[dict] = field(default_factory=list)  # stored (or, when not stored, on disk)
    exit_code: int = 0
    messages: list[str] = field(default_factory=list)  # one line each, for stderr


def _label(req: RunRequest) -> str:
    c = req.controls
    return req.entry.name + (f" (repeat {c.repeat_index + 1}/{c.repeat_count})" if c.repeat_count > 1 else "")


def _summary(stored: list[dict], current: RunRequest, what: str, rest: list[RunRequest]) -> str:
    done = ", ".join(f"{r['workload']['name']} {r['run_id'][:8]}" for r in stored) or "none"
    not_run = ", ".join(_label(r) for r in rest) or "none"
    return f"stored: {done}; {what}: {_label(current)}; not run: {not_run}"


def _interrupted(runner: Runner, stored: list[dict], current: RunRequest, rest: list[RunRequest]) -> str:
    """The summary after a signal: what is stored, the run it cut (named with its file when
    its record reached disk but not the registry, with the command that stores it), the rest."""
    if runner.last_stored is not None and all(r is not runner.last_stored for r in stored):
        # the signal came after the current run's record was stored
        done = ", ".join(f"{r['workload']['name']} {r['run_id'][:8]}" for r in [*stored, runner.last_stored])
        return f"Interrupted: stored: {done}; not run: {', '.join(_label(r) for r in rest) or 'none'}"
    if runner.unrecorded and not runner.unstored:
        # the measurement had finished; a second signal (or a failure) came before its record
        from perfsuite.engine.unrecorded import FINISHED

        paths = list(runner.unrecorded.values())
        command = " and ".join(f"'perfsuite import {p}'" for p in paths)
        what = f"{FINISHED}: {', '.join(str(p) for p in paths)} ({command} stores it)"
        return "Interrupted: " + _summary(stored, current, what, rest)
    if not runner.unstored:
        return "Interrupted: " + _summary(stored, current, "not finished", rest)
    files = ", ".join(str(p) for p in runner.unstored.values())
    folders = list(dict.fromkeys(str(p.parent) for p in runner.unstored.values()))
    command = " and ".join(f"'perfsuite import {f}'" for f in folders)
    what = f"on disk, not in the registry ({files}; {command} stores it)"
    return "Interrupted: " + _summary(stored, current, what, rest)


def run_all(
    runner: Runner, requests: list[RunRequest], on_start: Callable[[RunRequest], None] = lambda req: None
) -> Outcome:
    """Run every request in order; the exit code says how it ended (0, 1, 2 or 130)."""
    try:
        return _run_each(runner, requests, on_start)
    finally:
        runner.close()


def _run_each(runner: Runner, requests: list[RunRequest], on_start: Callable[[RunRequest], None]) -> Outcome:
    out = Outcome()
    with sigterm_as_interrupt():
        for i, req in enumerate(requests):
            rest = requests[i + 1 :]
            try:
                on_start(req)
                record = runner.run(req)
            except KeyboardInterrupt:
                out.messages.append(_interrupted(runner, out.records, req, rest))
                out.exit_code = EXIT_INTERRUPTED
                return out
            except RecordNotStored as exc:
                out.records.append(exc.record)
                out.messages += [f"Error: {exc}", "Stopped: " + _summary(out.records[:-1], req, "not stored", rest)]
                out.exit_code = EXIT_FAILED
                return out
            except RegistryUnavailable as exc:
                out.messages += [f"Error: {exc}", "Stopped: " + _summary(out.records, req, "not started", rest)]
                out.exit_code = EXIT_FAILED
                return out
            except (launcher.LaunchError, StrictRefusal) as exc:
                out.messages.append(f"Error: {exc}")
                out.exit_code = EXIT_USAGE
                return out
            if record is not None:
                out.records.append(record)
    bad = [
        r
        for r in out.records
        if r["status"] in ("failed", "timeout", "invalid") or r["verification"]["status"] == "failed"
    ]
    out.exit_code = EXIT_FAILED if bad else 0
    return out
