"""Finished measurements without a record: found, named in one line each, and sealed.

A runner that dies between its measuring process's result and the record (``kill -9``, an
OOM kill, a second Ctrl-C) leaves the result, with the record's
:class:`~perfsuite.engine.record.Sealing` saved before the launch, in
``<records>/unrecorded/<run id>/`` (:func:`perfsuite.engine.lifeline.settle`; a fallback
folder's ``unrecorded/`` where the records folder cannot take it). :func:`find` lists those
the registry lacks (``perfsuite run`` and ``perfsuite results`` name each), and
:func:`recover` turns one into its record through :func:`perfsuite.engine.record.seal`, the
runner's own path, stating its provenance in ``details.provenance``: ``perfsuite import``
of the folder (or of its ``result.json``). Recovering is idempotent: the record's file is
written once, into the records folder, and the kept folder goes once the registry holds it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perfsuite.engine import lifeline
from perfsuite.engine.record import Sealing, fallback_dirs, seal, write_files
from perfsuite.engine.runspec import WorkerResult, now

RUN_ID = re.compile(r"[0-9a-f]{32}")
FINISHED = "finished, not yet stored"


@dataclass(frozen=True)
class Kept:
    """A finished measurement without a record: its folder and what names it."""

    path: Path
    run_id: str
    workload: str
    finished_at: str
    facts: dict  # the kept folder's KEPT_FILE (or, left in the run's folder, its KEEP_FILE)


class NotRecoverable(Exception):
    """A path that holds no complete result of a measuring process, or one that cannot be
    sealed (one line)."""


def keep_folders(records_dir: Path) -> list[Path]:
    """Where a complete result is kept, in order: the records folder's ``unrecorded/``, then
    each fallback folder's (perfsuite.engine.record.fallback_dirs)."""
    return [folder / lifeline.UNRECORDED_FOLDER for folder in [records_dir, *fallback_dirs(records_dir)]]


def read_kept(path: Path) -> Kept:
    """The kept result at ``path`` (its folder, or its ``result.json``); NotRecoverable if it
    holds no complete result with its sealing."""
    folder = path.parent if path.name == lifeline.RESULT_FILE else path
    result = lifeline.complete_result(folder)
    if result is None:
        raise NotRecoverable(
            f"{path} holds no complete result of a measuring process "
            f"({lifeline.RESULT_FILE} and {lifeline.SEALING_FILE} that parse)"
        )
    sealing = json.loads((folder / lifeline.SEALING_FILE).read_text())
    frame = sealing.get("frame") if isinstance(sealing, dict) else None
    if not isinstance(frame, dict) or not RUN_ID.fullmatch(str(frame.get("run_id"))):
        raise NotRecoverable(f"{folder / lifeline.SEALING_FILE} names no run id")
    facts: dict = {}
    for name in (lifeline.KEPT_FILE, lifeline.KEEP_FILE):
        try:
            facts = json.loads((folder / name).read_text())
            break
        except FileNotFoundError:
            continue  # the other name
        except ValueError as exc:
            raise NotRecoverable(f"{folder / name} is not JSON: {exc}") from exc
    workload = frame.get("workload", {}).get("name", "?") if isinstance(frame.get("workload"), dict) else "?"
    return Kept(folder, frame["run_id"], str(workload), result["finished_at"], facts)


def finished_line(kept: Kept) -> str:
    """One line: the path, the workload, when it finished, and the command that stores it."""
    return (
        f"{FINISHED}: {kept.path} ({kept.workload}, finished {kept.finished_at}): "
        f"'perfsuite import {kept.path}' stores it"
    )


def find(registry, records_dir: Path) -> list[Kept]:
    """The kept results the registry lacks, oldest first: in the keep folders, and in run
    folders left in the temporary folder (no keep folder could take them) whose runner is
    gone. One whose record file is already in the records folder is left to that file's own
    notice (it is the same measurement)."""
    found: list[Kept] = []
    for folder in keep_folders(records_dir):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue  # no such folder: nothing kept there
        for entry in entries:
            if not RUN_ID.fullmatch(entry.name) or not entry.is_dir() or entry.is_symlink():
                continue
            try:
                found.append(read_kept(entry))
            except NotRecoverable:
                continue  # half-copied by a keeper that was killed; the whole copy is elsewhere or gone
    for workdir in sorted(Path(tempfile.gettempdir()).glob(f"{lifeline.WORKDIR_PREFIX}*")):
        if workdir.is_symlink() or lifeline.complete_result(workdir) is None:
            continue
        try:
            kept = read_kept(workdir)
        except NotRecoverable:
            continue  # not a result this finder can seal; the run's own runner names it
        if not _runner_alive(kept.facts) and kept.facts.get("folders") == [str(f) for f in keep_folders(records_dir)]:
            found.append(kept)
    known = registry.stored_hashes([k.run_id for k in found])
    waiting = [k for k in found if k.run_id not in known and not (records_dir / f"{k.run_id}.json").exists()]
    return sorted(waiting, key=lambda k: k.finished_at)


def _runner_alive(facts: dict) -> bool:
    """Whether the runner named in a run folder's facts may still be running (its own runs'
    folders are its to seal): a process of that pid on this host, or another host's runner."""
    if facts.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(facts["runner_pid"]), 0)
    except (KeyError, TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def provenance(kept: Kept, result: WorkerResult) -> dict:
    """``details.provenance`` of a recovered record: where the result came from, and when."""
    facts = kept.facts
    why = facts.get("why", "its runner stopped before writing its record")
    return {
        "recovered": f"from the measuring process's result after the runner stopped before writing its record: {why}",
        "host": facts.get("host"),
        "runner_pid": facts.get("runner_pid"),
        "kept_by": facts.get("kept_by"),
        "kept_at": facts.get("kept_at"),
        "result_written_at": result.finished_at,
        "recovered_at": now(),
        "recovered_on": socket.gethostname(),
    }


def recover(registry, path: Path, records_dir: Path) -> tuple[dict, str]:
    """Seal the kept result at ``path`` into its record, write the record's file into
    ``records_dir`` and store it: (record, "stored" or "duplicate"). The kept folder goes once
    the registry holds the record. A second call finds the record's file and stores that."""
    from perfsuite.registry.store import check_storable
    from perfsuite.schemas.errors import RecordInvalid
    from perfsuite.schemas.reading import load_record_file

    kept = read_kept(path)
    record_file = records_dir / f"{kept.run_id}.json"
    if record_file.is_file():
        record = load_record_file(record_file)  # sealed before: the same record, the same hash
    else:
        try:
            result = WorkerResult.from_json((kept.path / lifeline.RESULT_FILE).read_text())
            sealed = Sealing.from_json((kept.path / lifeline.SEALING_FILE).read_text())
        except (TypeError, ValueError, KeyError) as exc:
            raise NotRecoverable(f"{kept.path}: {type(exc).__name__}: {exc}") from exc
        record = seal(sealed, result, provenance(kept, result))
        write_files(record, records_dir)
    check_storable(record)
    if record["run_id"] != kept.run_id:
        raise RecordInvalid(f"{record_file}: its run id is {record['run_id']}, not {kept.run_id}")
    outcome = registry.store(record)
    shutil.rmtree(kept.path, ignore_errors=True)  # sealed and stored: the record is the copy now
    return record, outcome


def prune(registry, records_dir: Path) -> list[Path]:
    """Remove kept results whose record the registry holds (a runner killed after writing and
    storing the record, before removing its folder); the folders removed."""
    removed = []
    for folder in keep_folders(records_dir):
        try:
            entries = [e for e in folder.iterdir() if RUN_ID.fullmatch(e.name) and e.is_dir() and not e.is_symlink()]
        except OSError:
            continue  # no such folder
        known = registry.stored_hashes([e.name for e in entries])
        for entry in entries:
            if entry.name in known:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed
