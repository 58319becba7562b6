"""Filing registry runs into a submissions tree (``perfsuite submit``): all or nothing.

A submission is planned whole before a byte is written: every path through
:class:`~perfsuite.publish.submissions.writer.TreeWriter` (no symlink on the way, no name with a
separator or a control character, nothing leaving the tree), and the tree as it would be
afterwards through the same check a reviewer runs (:func:`~perfsuite.publish.submissions.tree.check_tree`),
on a copy of the system's part of the tree in a scratch folder. A submission that would add a
problem (a seed already used, a record from another accelerator than the system file's) is
refused with nothing written. A configuration that does not have all its runs yet is not a
refusal: training needs five, and a submitter files them as they come.

The files are then written one by one, each atomically; a write that fails half way (a full
disk, a read-only remount) takes back every file and folder the submission made, so the tree
is as it was before.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from perfsuite.owned_output import OutputRefused
from perfsuite.registry.errors import RecordInvalid, RegistryError, one_line
from perfsuite.schemas.reading import MAX_RECORD_BYTES, MAX_RECORD_DEPTH, load_json_file, read_regular
from perfsuite.schemas.seal import seal_record

from .tree import (
    MLLOG_SUFFIX,
    PRICE_FIELD,
    RECORD_SUFFIX,
    RESULTS_DIR,
    SYSTEMS_DIR,
    Incomplete,
    Problem,
    check_tree,
    system_description,
    validate_system,
)
from .writer import TreeWriter

# An MLLOG twin of a long training run is larger than its record; the bound only keeps a
# planted file of gigabytes out of memory.
MAX_FILED_BYTES = 16 * MAX_RECORD_BYTES


def submit_runs(
    records: list[dict],
    root: Path,
    org: str,
    system: str,
    records_dir: Path | None,
    mllog_text: Callable[[dict], str],
    parents: bool = False,
    **description_options,
) -> list[Path]:
    """File ``records`` under ``root/org/results/system/...``; write the system file from the
    first record's fingerprint when there is none. A record file the runner wrote (found in
    ``records_dir`` with the same hash) is copied byte for byte, with its MLLOG twin. Returns
    the files written (an existing system file is checked, not rewritten).

    Refusals (:class:`OutputRefused`, nothing written): a run that did not succeed and pass
    its verification, a path the tree writer refuses, an existing system file that is invalid
    or priced otherwise, and a submission the tree's check would find a problem in. A write
    that fails half way takes the submission back and raises its ``OSError``.
    """
    if not records:
        raise RegistryError("no runs to submit")
    for record in records:
        if record["status"] != "success" or record["verification"]["status"] != "passed":
            raise OutputRefused(
                f"run {record['run_id']} is {record['status']} with verification "
                f"{record['verification']['status']}: only successful, verified runs are submitted: nothing written"
            )
    writer = TreeWriter(Path(root), parents=parents)
    writer.check_root()
    writes, written = _plan(writer, records, org, system, records_dir, mllog_text, description_options)
    problems = _problems_added(Path(root), org, system, writes)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise OutputRefused(one_line(f"{problems[0]}{more}: nothing written"))
    previous = {path: _existing(path) for path, _ in writes}
    try:
        for path, data in writes:
            if previous[path] != data:
                writer.write(path, data, previous[path])
    except BaseException as exc:
        left = writer.undo()
        if left:
            raise RegistryError(
                one_line(f"the submission failed and could not be taken back: {'; '.join(left)}")
            ) from exc
        raise
    return written


def _plan(
    writer: TreeWriter,
    records: list[dict],
    org: str,
    system: str,
    records_dir: Path | None,
    mllog_text: Callable[[dict], str],
    description_options: dict,
) -> tuple[list[tuple[Path, bytes]], list[Path]]:
    """Every (path, bytes) the submission writes, every path checked; and the files to name."""
    system_file = writer.path(org, SYSTEMS_DIR, f"{system}.json")
    writes: list[tuple[Path, bytes]] = []
    written: list[Path] = []
    if os.path.lexists(system_file):
        _check_existing_system(system_file, description_options.get("price_per_hour"))
    else:
        description = system_description(records[0], org, system, **description_options)
        errors = validate_system(description)
        if errors:
            raise OutputRefused(
                f"the system description made from run {records[0]['run_id']} is invalid: "
                + "; ".join(errors)
                + ": nothing written"
            )
        writes.append((system_file, (json.dumps(description, indent=2) + "\n").encode("utf-8")))
        written.append(system_file)
    for record in records:
        folder = (org, RESULTS_DIR, system, record["workload"]["name"])
        dest = writer.path(*folder, f"{record['run_id']}{RECORD_SUFFIX}")
        mllog_dest = writer.path(*folder, f"{record['run_id']}{MLLOG_SUFFIX}")
        source = records_dir / f"{record['run_id']}{RECORD_SUFFIX}" if records_dir else None
        copied = _runner_file(source, record) if source is not None else None
        if copied is not None and source is not None:
            twin = _regular_bytes(source.with_suffix(MLLOG_SUFFIX))
            writes.append((dest, copied))
            writes.append((mllog_dest, twin if twin is not None else mllog_text(record).encode("utf-8")))
        else:
            writes.append((dest, seal_record(record).text.encode("utf-8")))  # the registry's copy, checked again
            writes.append((mllog_dest, mllog_text(record).encode("utf-8")))
        written.append(dest)
    return writes, written


def _copy_regular_files(source: Path, dest: Path) -> None:
    """The regular files below ``source`` (never through a symlink) to the same places below ``dest``."""
    if not os.path.isdir(source) or os.path.islink(source):
        return
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = Path(dirpath) / name
            if stat.S_ISREG(os.lstat(path).st_mode):
                target = dest / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target, follow_symlinks=False)


def _problems_added(root: Path, org: str, system: str, writes: list[tuple[Path, bytes]]) -> list[Problem]:
    """The problems the tree's check finds in this system's part of the tree once ``writes``
    are filed and did not find before, but for a configuration still short of runs. Checked on
    a copy in a scratch folder: the tree itself is only read."""
    with tempfile.TemporaryDirectory(prefix="perfsuite-submit-") as scratch:
        copy = Path(scratch) / "tree"
        system_file = Path(org, SYSTEMS_DIR, f"{system}.json")
        _copy_regular_files(root / org / RESULTS_DIR / system, copy / org / RESULTS_DIR / system)
        existing = root / system_file
        if os.path.lexists(existing) and stat.S_ISREG(os.lstat(existing).st_mode):
            (copy / system_file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(existing, copy / system_file, follow_symlinks=False)
        copy.mkdir(exist_ok=True)
        before = set(check_tree(copy).problems)
        for path, data in writes:
            target = copy / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        after = check_tree(copy).problems
    return [p for p in after if p not in before and not isinstance(p, Incomplete)]


def _existing(path: Path) -> bytes | None:
    """The bytes at ``path`` before the submission (None: nothing there), kept to put back."""
    if not os.path.lexists(path):
        return None
    try:
        return read_regular(path, MAX_FILED_BYTES, "a filed file")
    except RecordInvalid as exc:
        raise OutputRefused(one_line(f"{path}: {exc}: nothing written")) from exc


def _regular_bytes(path: Path) -> bytes | None:
    """The bytes of a regular file, or None where there is none (or it cannot be read)."""
    try:
        return read_regular(path, MAX_RECORD_BYTES)
    except RecordInvalid:
        return None


def _runner_file(path: Path, record: dict) -> bytes | None:
    """The bytes of the runner's file of ``record``, where it is there with the same hash."""
    data = _regular_bytes(path)
    if data is None:
        return None
    try:
        return data if json.loads(data).get("sha256") == record["sha256"] else None
    except (ValueError, AttributeError, RecursionError):
        return None  # not the runner's record: the registry's copy is filed instead


def _check_existing_system(path: Path, price_per_hour: float | None) -> None:
    """Refuse to file runs under a system file that is invalid, or whose price differs from
    the one asked for (a price is changed in the file, never behind the submitter's back)."""
    try:
        description = load_json_file(path, MAX_RECORD_BYTES, MAX_RECORD_DEPTH)
    except RecordInvalid as exc:
        raise OutputRefused(one_line(f"{path}: not readable JSON: {exc}: nothing written")) from exc
    errors = validate_system(description)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise OutputRefused(f"{path}: {errors[0]}{more}: nothing written")
    if price_per_hour is not None and description.get(PRICE_FIELD) != price_per_hour:
        raise OutputRefused(
            f"{path} exists with {PRICE_FIELD} {description.get(PRICE_FIELD)}, not "
            f"{price_per_hour:g}: change the price in that file"
        )
