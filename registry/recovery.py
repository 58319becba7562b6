"""Records on disk that the registry does not hold: found, named in one line, imported.

The runner writes a record's file first and stores it second; a command killed between the
two (``kill -9``, a node that went down, a registry that was unreachable) leaves the file in
the records folder and nothing in the registry. :func:`unstored_records` finds such files
(the next ``perfsuite run`` and ``perfsuite results`` say so), and :func:`import_folder`
stores them: ``perfsuite import <records folder>``, idempotent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfsuite.schemas.reading import load_record_file

from .errors import RecordInvalid
from .store import check_storable

RECORD_NAME = re.compile(r"[0-9a-f]{32}\.json")
SUBMISSION_FOLDERS = ("systems", "results")
# Where the runner keeps finished measurements it could not turn into records (the engine's
# lifeline.UNRECORDED_FOLDER; the registry imports nothing of the engine).
UNRECORDED_FOLDER = "unrecorded"


# Every record name in a listing at once: one pass of the regex engine over the names joined by
# newlines, not a match per entry (100,000 entries: a third of the time).
RECORD_NAMES = re.compile(r"^([0-9a-f]{32})\.json$", re.MULTILINE)


def record_ids(folder: Path) -> list[str]:
    """The run ids of the entries named ``<run id>.json`` directly in ``folder`` but folders (a
    FIFO or a symlink so named is listed, and refused when it is read): 100,000 in a tenth of
    a second, which ``perfsuite results`` spends on each call to name the records not stored."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []  # no records folder yet: nothing in it
    folders = {entry.name for entry in entries if entry.is_dir(follow_symlinks=False)}  # the kind the listing gave
    joined = "\n".join(entry.name for entry in entries)
    if joined.count("\n") == len(entries) - 1:  # no name holds a newline: each line is one whole name
        found = RECORD_NAMES.findall(joined)
    else:
        found = [entry.name[:32] for entry in entries if RECORD_NAME.fullmatch(entry.name)]
    return [run_id for run_id in found if f"{run_id}.json" not in folders] if folders else found


def record_names(folder: Path) -> dict[str, str]:
    """Run id -> entry name, for :func:`record_ids`."""
    return {run_id: f"{run_id}.json" for run_id in record_ids(folder)}


def record_files(folder: Path) -> dict[str, Path]:
    """Run id -> file, for :func:`record_names`."""
    return {run_id: folder / name for run_id, name in record_names(folder).items()}


def is_records_folder(folder: Path) -> bool:
    """A folder of ``<run id>.json`` files (the runner's records folder), as opposed to a
    submissions tree (``<org>/systems``, ``<org>/results``)."""
    if any((folder / name).is_dir() for name in SUBMISSION_FOLDERS):
        return False
    return bool(record_ids(folder)) or (folder / UNRECORDED_FOLDER).is_dir()


def unstored_records(registry, folder: Path) -> list[Path]:
    """The record files in ``folder`` whose run id the registry does not hold, sorted."""
    found = set(record_ids(folder))  # each id hashed once, here
    known = registry.stored_ids(found)
    return sorted(folder / f"{run_id}.json" for run_id in found - known)


def unstored_notice(paths: list[Path], folder: Path) -> str | None:
    """One line naming how many records ``folder`` holds that the registry does not, and the
    command that stores them; None when there are none."""
    if not paths:
        return None
    count = f"{len(paths)} record" + ("s" if len(paths) != 1 else "")
    return f"Note: {count} in {folder} not in the registry: 'perfsuite import {folder}' stores them"


@dataclass
class FolderImport:
    """What :func:`import_folder` did: counts, and each refused file with why (one line)."""

    stored: int = 0
    duplicate: int = 0
    refused: list[tuple[Path, str]] = field(default_factory=list)


def import_folder(registry, folder: Path) -> FolderImport:
    """Store the records of a records folder that the registry does not hold yet.

    Each file is checked on its own (regular file, size, JSON, schema, hash, physics); a file
    that fails is refused with its reason and the others are stored, in one transaction.
    Records already stored with the same hash count as duplicates; a run id stored with a
    different record is refused.
    """
    out = FolderImport()
    files = record_files(folder)
    known = registry.stored_hashes(list(files))
    pending = []
    for run_id, path in sorted(files.items()):
        try:
            record = load_record_file(path)
            sha256 = check_storable(record)
            if record["run_id"] != run_id:
                raise RecordInvalid(f"its run id is {record['run_id']}, not its file name's")
        except RecordInvalid as exc:
            out.refused.append((path, str(exc)))
            continue
        if run_id not in known:
            pending.append(record)
        elif known[run_id] == sha256:
            out.duplicate += 1
        else:
            out.refused.append((path, f"run {run_id} is stored with another record (sha256 {known[run_id]})"))
    if pending:
        outcomes = registry.store_all(pending)
        out.stored += outcomes.count("stored")
        out.duplicate += outcomes.count("duplicate")  # stored meanwhile by another process
    return out
