"""Submissions trees: check one, load it into the registry, file runs into one.

The layout (MLPerf-like)::

    <root>/<org>/systems/<system>.json                          (schemas/system.schema.json)
    <root>/<org>/results/<system>/<workload>/<run_id>.json       (schemas/result.schema.json)
    <root>/<org>/results/<system>/<workload>/<run_id>.mllog      (its MLLOG twin)

Anything else under ``<org>/`` (``evidence/`` logs, READMEs) is free-form and not read,
but every path in the tree must stay inside it.

:func:`check_tree` lists every problem, each with the file it is about, and stops at
none: a submitter fixes them all in one go. The rules:

- every path stays in the tree: no symlink pointing outside it (``..`` or absolute), none
  into a loop or to nothing; symlinks are never followed, and records and system files are
  regular files (a FIFO, a device or a socket is named, never opened);
- files are read with bounds: size, JSON nesting depth and integer length, the same for
  system files as for records (:mod:`perfsuite.schemas.reading`);
- each record follows the result schema, its sha256 matches its content, its figures are
  physical (:mod:`perfsuite.schemas.physics`), it was a ``success`` whose verification
  ``passed``, and it lies at
  ``results/<system>/<its workload>/<its run id>.json``;
- run ids are unique across the tree;
- seeds are unique among the runs of one workload with the same parameters on one system
  (the runs scored together: MLPerf's rule);
- required runs: :data:`REQUIRED_RUNS` per category, counted per system and
  comparability key (training needs 5, enough for an olympic mean over 3 after dropping
  the fastest and the slowest; a training run whose goal is throughput, never scored so, and
  every other category 1);
- a training run has its ``.mllog`` with every key of :data:`MLLOG_REQUIRED_TRAINING_KEYS`;
- each system with results has ``systems/<system>.json``, valid against the system
  schema, named as its file, and consistent with its records' fingerprints: accelerator
  model (``environment.gpus[].name``) and count per node (``len(environment.gpus)``).

:func:`import_tree` loads a tree that checks clean, idempotently. Filing runs into a tree
(``perfsuite submit``) is :mod:`perfsuite.publish.submissions.filing`: it runs this check on the tree as
it would be before it writes anything.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import stat
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from perfsuite import schemas
from perfsuite.registry.errors import RecordInvalid, RegistryError, one_line
from perfsuite.registry.models import Run, Submission, SubmittedSystem
from perfsuite.registry.store import IMPOSSIBLE
from perfsuite.schemas.canonical import (
    canonical_json,
    record_text,  # noqa: F401 - callers read a tree's record text from here
)
from perfsuite.schemas.comparability import comparability_key
from perfsuite.schemas.cost import result_cost, validate_price
from perfsuite.schemas.reading import (
    MAX_INTEGER_DIGITS,
    MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    kind,
    load_json_file,
    load_record_file,
    read_regular,
)

if TYPE_CHECKING:
    from perfsuite.registry.bulk import Prepared

SYSTEMS_DIR = "systems"
RESULTS_DIR = "results"
RECORD_SUFFIX = ".json"
MLLOG_SUFFIX = ".mllog"
SYSTEM_SCHEMA_VERSION = "1.0"
PRICE_FIELD = "accelerator_hour_price_usd"
# The fewest runs per system and comparability key, by workload category.
REQUIRED_RUNS = {"training": 5}
DEFAULT_REQUIRED_RUNS = 1
# MLLOG keys a training run's log must hold: the subset of MLPerf Training's common
# compliance rules (mlperf_logging's common.yaml) that does not depend on the benchmark.
MLLOG_REQUIRED_TRAINING_KEYS = (
    "submission_benchmark",
    "submission_division",
    "submission_platform",
    "seed",
    "global_batch_size",
    "train_samples",
    "eval_samples",
    "init_start",
    "init_stop",
    "run_start",
    "run_stop",
    "eval_accuracy",
)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a tree: the file (relative to the tree's root) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Incomplete(Problem):
    """A configuration without all the runs it needs yet: the tree is unfinished, not wrong
    (``submit`` files training runs one by one; ``check`` still fails until all are there)."""


@dataclass
class FiledRecord:
    org: str
    system: str
    path: Path  # absolute
    relpath: str
    record: dict
    prepared: "Prepared | None" = None  # its rows, rendered while it was checked (import_tree stores them)


@dataclass
class TreeReport:
    """What :func:`check_tree` found: the problems, and the records and systems read."""

    root: Path
    problems: list[Problem] = field(default_factory=list)
    records: list[FiledRecord] = field(default_factory=list)
    systems: dict[tuple[str, str], dict] = field(default_factory=dict)  # (org, name) -> description

    @property
    def ok(self) -> bool:
        return not self.problems


@functools.lru_cache(maxsize=1)
def _system_validator():
    from jsonschema import Draft202012Validator

    schema = schemas.load("system")
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate_system(description: dict) -> list[str]:
    """Every schema violation of a system description, as ``$.path: message``, and a price
    the schema's bounds let through (JSON's NaN compares false with both of them)."""
    if not isinstance(description, dict):
        return [f"a system description must be a JSON object, not {type(description).__name__}"]
    out = []
    for error in sorted(_system_validator().iter_errors(description), key=lambda e: list(e.absolute_path)):
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(one_line(f"{where}: {error.message}"))
    if not out:
        try:
            validate_price(description.get(PRICE_FIELD))
        except ValueError as exc:
            out.append(f"$.{PRICE_FIELD}: {exc}")
    return out


def _capacity(num_bytes: int | None) -> str:
    if not num_bytes:
        return "none"
    return f"{num_bytes / 2**30:.0f} GiB"


def system_description(
    record: dict,
    submitter: str,
    system_name: str,
    *,
    division: str | None = None,
    status: str = "Available",
    cooling: str = "unknown",
    number_of_nodes: int | None = None,
    interconnect: str | None = None,
    price_per_hour: float | None = None,
) -> dict:
    """A system description written from a record's environment fingerprint.

    What a fingerprint cannot know (cooling, availability, the interconnect when no
    topology was recorded, the price of an accelerator-hour) takes the arguments;
    "unknown" is said as such.
    """
    env = record["environment"]
    gpus = env["gpus"]
    runtime = env.get("runtime") or {}
    packages = env.get("packages") or {}
    software = {k: str(v) for k, v in {**packages, **{f"runtime.{k}": v for k, v in runtime.items()}}.items() if v}
    torch_version = runtime.get("torch") or packages.get("torch")
    if interconnect is None:
        topology = record["launch"].get("topology") or ""
        if len(gpus) <= 1:
            interconnect = "none"
        elif "NV" in topology:
            links = sorted({tok for tok in topology.split() if tok.startswith("NV") and tok[2:].isdigit()})
            interconnect = f"NVLink ({', '.join(links)})" if links else "NVLink"
        else:
            interconnect = "unknown"
    out = {
        "schema_version": SYSTEM_SCHEMA_VERSION,
        "submitter": submitter,
        "division": division or record["workload"]["division"],
        "status": status,
        "system_name": system_name,
        "host": env["host"],
        "number_of_nodes": number_of_nodes or record["launch"]["nnodes"],
        "host_processor_model_name": env["cpu"]["model"],
        "host_processors_per_node": 1,
        "host_processor_core_count": env["cpu"]["logical_cores"],
        "host_memory_capacity": _capacity(env["memory_bytes"]),
        "accelerator_model_name": gpus[0]["name"] if gpus else "none",
        "accelerators_per_node": len(gpus),
        "accelerator_memory_capacity": _capacity(gpus[0]["memory_bytes"]) if gpus else "none",
        "accelerator_interconnect": interconnect,
        "framework": f"PyTorch {torch_version}" if torch_version else "none",
        "software": software,
        "operating_system": env["os"],
        "cooling": cooling,
    }
    if gpus:
        out["accelerator_driver"] = gpus[0]["driver"]
    if price_per_hour is not None:
        out[PRICE_FIELD] = price_per_hour
    return out


# -- reading a tree ------------------------------------------------------------------------------
def _walk(root: Path) -> Iterator[tuple[Path, os.stat_result | OSError]]:
    """Every entry below ``root`` with its ``lstat`` (or the error of listing a folder),
    in name order, without recursion and never through a symlink."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield folder, exc
            continue
        below = []
        for entry in entries:
            path = Path(entry.path)
            try:
                info = os.lstat(path)
            except OSError as exc:
                yield path, exc
                continue
            yield path, info
            if stat.S_ISDIR(info.st_mode):
                below.append(path)
        stack.extend(reversed(below))


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _symlink_problem(real_root: Path, path: Path) -> str | None:
    """Why a symlink in the tree is wrong: a loop, dangling, or leading outside; None for one
    that stays inside (it is still never followed)."""
    try:
        target = os.readlink(path)
    except OSError as exc:
        return f"unreadable symlink: {exc.strerror or exc}"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"symlink loop: symlink to {target!r} (not followed)"
        if not isinstance(exc, FileNotFoundError):
            return f"symlink to {target!r} that cannot be followed: {exc.strerror or exc}"
        resolved = Path(os.path.realpath(path))
        if not resolved.is_relative_to(real_root):
            return f"path escapes the tree: symlink to {target!r} (resolves to {resolved}, outside {real_root})"
        return f"dangling symlink to {target!r}"
    resolved = Path(os.path.realpath(path))
    if not resolved.is_relative_to(real_root):
        return f"path escapes the tree: symlink to {target!r} (resolves to {resolved}, outside {real_root})"
    return None


def _mllog_keys(path: Path) -> set[str]:
    """The keys of a regular MLLOG file's lines; a line that is not JSON names no key."""
    keys = set()
    text = read_regular(path, MAX_RECORD_BYTES).decode("utf-8", errors="replace")
    for line in text.splitlines():
        if ":::MLLOG" not in line:
            continue
        payload = line.split(":::MLLOG", 1)[1]
        if payload.count("[") + payload.count("{") > MAX_RECORD_DEPTH or len(payload) > MAX_RECORD_BYTES:
            continue  # built to exhaust the parser; the missing keys are reported
        try:
            entry = json.loads(payload, parse_int=_mllog_int)
            keys.add(entry["key"])
        except (ValueError, KeyError, TypeError):
            continue  # a malformed line names no key; the missing keys are reported
    return keys


def _mllog_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ValueError("integer too long")
    return int(text)


def required_runs(record: dict) -> int:
    """Runs a configuration needs: a training run whose goal is throughput is a figure of one run,
    not a time to target scored by an olympic mean, so it needs one."""
    from perfsuite.analysis.scoring import is_throughput_goal  # on use: it brings numpy

    if is_throughput_goal(record):
        return DEFAULT_REQUIRED_RUNS
    return REQUIRED_RUNS.get(record["workload"]["category"], DEFAULT_REQUIRED_RUNS)


@dataclass
class _Listing:
    """A tree's entries as ``lstat`` saw them, and the problems the listing itself found."""

    modes: dict[Path, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def is_dir(self, path: Path) -> bool:
        return path in self.modes and stat.S_ISDIR(self.modes[path])

    def children(self, folder: Path) -> list[Path]:
        return sorted(p for p in self.modes if p.parent == folder)

    def below(self, folder: Path) -> list[Path]:
        return sorted(p for p in self.modes if p.is_relative_to(folder) and p != folder)


def _list_tree(root: Path) -> _Listing:
    """Every entry of the tree, and a problem for each symlink that loops, dangles or leaves
    the tree, each special file (FIFO, socket, device) and each folder that cannot be listed."""
    listing = _Listing()
    real_root = Path(os.path.realpath(root))
    for path, info in _walk(root):
        rel = _rel(root, path)
        if isinstance(info, OSError):
            listing.problems.append(Problem(rel, one_line(f"cannot be listed: {info.strerror or info}")))
            continue
        listing.modes[path] = info.st_mode
        if stat.S_ISLNK(info.st_mode):
            why = _symlink_problem(real_root, path)
            if why:
                listing.problems.append(Problem(rel, why))
        elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            listing.problems.append(
                Problem(rel, f"{kind(info.st_mode)}: a submissions tree holds regular files and folders only")
            )
    return listing


def _record_paths(root: Path, listing: _Listing) -> list[Path]:
    """The regular files at results/<system>/<workload>/<run_id>.json that the checks read."""
    out = []
    for org_dir in _org_dirs(root, listing):
        results_dir = org_dir / RESULTS_DIR
        if not listing.is_dir(results_dir):
            continue
        for path in listing.below(results_dir):
            if (
                path.suffix == RECORD_SUFFIX
                and stat.S_ISREG(listing.modes[path])
                and len(path.relative_to(results_dir).parts) == 3
            ):
                out.append(path)
    return out


def record_files(root: Path) -> list[Path]:
    """The record files a check of ``root`` reads (for a progress bar's total)."""
    root = Path(root)
    return _record_paths(root, _list_tree(root)) if root.is_dir() else []


def check_record_file(path: Path) -> tuple[dict, "Prepared"] | str:
    """Read and check one record file once (regular file, size, UTF-8, bounded JSON, schema,
    sha256, physics) and render its registry rows; or the problem, worded for ``perfsuite check``."""
    from perfsuite.registry.bulk import prepare_checked
    from perfsuite.schemas.validate import validate_schema

    try:
        record = load_record_file(path)  # regular file, size limit, UTF-8, bounded JSON
    except RecordInvalid as exc:
        return f"not a readable record: {exc}"
    try:
        if not isinstance(record, dict):
            raise RecordInvalid(f"a run record must be a JSON object, not {type(record).__name__}")
        validate_schema(record)
    except RecordInvalid as exc:
        return f"schema: {exc}"
    try:
        prepared = prepare_checked(record)
    except RecordInvalid as exc:
        if str(exc).startswith(IMPOSSIBLE):
            return str(exc)
        return f"record hash: {exc} (the record was changed after it was written)"
    return record, prepared


def _check_chunk(paths: list[Path]) -> list[tuple[dict, "Prepared"] | str]:
    return [check_record_file(p) for p in paths]


def _check_files(
    paths: list[Path], progress: Callable[[int], None] | None
) -> dict[Path, tuple[dict, "Prepared"] | str]:
    """Each file's :func:`check_record_file`, in worker processes when there are many."""
    from perfsuite.registry.bulk import map_chunks

    out: dict[Path, tuple[dict, Prepared] | str] = {}
    for chunk, results in map_chunks(_check_chunk, paths):
        out.update(zip(chunk, results))
        if progress is not None:
            progress(len(chunk))
    return out


def _org_dirs(root: Path, listing: _Listing) -> list[Path]:
    """``root`` is a submissions root (``<org>/...`` below) or one org's folder."""
    if listing.is_dir(root / SYSTEMS_DIR) or listing.is_dir(root / RESULTS_DIR):
        return [root]
    return [p for p in listing.children(root) if listing.is_dir(p) and not p.name.startswith(".")]


def _not_regular(listing: _Listing, path: Path) -> str | None:
    """Why a file where a record or a system file belongs is not read (None: it is read)."""
    mode = listing.modes[path]
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink where a regular file belongs: not followed"
    return "not read"  # a special file: named by the listing already


def check_tree(root: Path, progress: Callable[[int], None] | None = None) -> TreeReport:
    """Check a submissions tree; every problem is reported with its file. ``progress`` is
    called with the number of record files just checked."""
    root = Path(root)
    report = TreeReport(root=root)
    problems = report.problems
    try:
        root_mode = os.stat(root).st_mode
    except OSError as exc:
        problems.append(Problem(str(root), one_line(f"cannot be read: {exc.strerror or exc}")))
        return report
    if not stat.S_ISDIR(root_mode):
        problems.append(Problem(str(root), "not a directory"))
        return report
    listing = _list_tree(root)
    problems.extend(listing.problems)
    named = {p.path for p in problems}
    real_root = Path(os.path.realpath(root))
    checked = _check_files(_record_paths(root, listing), progress)

    for org_dir in _org_dirs(root, listing):
        org = org_dir.name if org_dir != root else real_root.name
        systems_dir, results_dir = org_dir / SYSTEMS_DIR, org_dir / RESULTS_DIR
        for path in listing.children(systems_dir) if listing.is_dir(systems_dir) else []:
            rel = _rel(root, path)
            if path.suffix != ".json" or listing.is_dir(path):
                problems.append(Problem(rel, "only <system>.json files belong in systems/"))
                continue
            why = _not_regular(listing, path)
            if why:
                if rel not in named:
                    problems.append(Problem(rel, why))
                continue
            try:
                description = load_json_file(path, MAX_RECORD_BYTES, MAX_RECORD_DEPTH)
            except RecordInvalid as exc:
                problems.append(Problem(rel, f"not readable JSON: {exc}"))
                continue
            errors = validate_system(description)
            problems.extend(Problem(rel, e) for e in errors)
            if isinstance(description, dict) and description.get("system_name") != path.stem:
                problems.append(
                    Problem(
                        rel,
                        f"system_name {description.get('system_name')!r} differs from its file name {path.stem!r}",
                    )
                )
            if not errors:
                report.systems[(org, path.stem)] = description
        for path in listing.below(results_dir) if listing.is_dir(results_dir) else []:
            rel = _rel(root, path)
            if listing.is_dir(path):
                continue
            why = _not_regular(listing, path)
            if why:
                if rel not in named:
                    problems.append(Problem(rel, why))
                continue
            parts = path.relative_to(results_dir).parts
            if path.suffix == MLLOG_SUFFIX:
                if path.with_suffix(RECORD_SUFFIX) not in listing.modes:
                    problems.append(Problem(rel, "an MLLOG file without its record"))
                continue
            if path.suffix != RECORD_SUFFIX or len(parts) != 3:
                problems.append(Problem(rel, "not at results/<system>/<workload>/<run_id>.json"))
                continue
            result = checked.get(path)
            if isinstance(result, str):
                problems.append(Problem(rel, result))
            elif result is not None:
                _check_filed_record(report, listing, root, FiledRecord(org, parts[0], path, rel, *result))

    _check_across_records(report)
    if not report.records and not report.problems:
        problems.append(
            Problem(
                str(root),
                f"no records found: expected <org>/{RESULTS_DIR}/<system>/<workload>/"
                f"<run_id>.json below it (or {RESULTS_DIR}/... below an org folder)",
            )
        )
    report.problems.sort(key=lambda p: (p.path, p.message))
    return report


def _check_filed_record(report: TreeReport, listing: _Listing, root: Path, filed: FiledRecord) -> None:
    """The checks of one readable, valid record that depend on where it is filed; it joins
    the report."""
    problems, record, rel, path = report.problems, filed.record, filed.relpath, filed.path
    workload = path.parent.name
    if record["workload"]["name"] != workload:
        problems.append(
            Problem(rel, f"filed under workload {workload!r} but is a run of {record['workload']['name']!r}")
        )
    if record["run_id"] != path.stem:
        problems.append(Problem(rel, f"file name {path.stem!r} is not the record's run id {record['run_id']}"))
    if record["status"] != "success":
        problems.append(
            Problem(rel, f"status is {record['status']!r}, not 'success': only successful runs may be submitted")
        )
    if record["verification"]["status"] != "passed":
        problems.append(
            Problem(
                rel,
                f"verification {record['verification']['status']}: only runs whose "
                f"verification passed may be submitted",
            )
        )
    if record["workload"]["category"] == "training":
        mllog = path.with_suffix(MLLOG_SUFFIX)
        if mllog not in listing.modes or not stat.S_ISREG(listing.modes[mllog]):
            problems.append(Problem(rel, "a training run needs its .mllog beside it (a regular file)"))
        else:
            try:
                found = _mllog_keys(mllog)
            except RecordInvalid as exc:
                problems.append(Problem(_rel(root, mllog), f"not readable: {exc}"))
            else:
                missing = [k for k in MLLOG_REQUIRED_TRAINING_KEYS if k not in found]
                if missing:
                    problems.append(Problem(_rel(root, mllog), f"MLLOG lacks required keys: {', '.join(missing)}"))
    report.records.append(filed)


def _check_across_records(report: TreeReport) -> None:
    problems = report.problems
    by_run_id: dict[str, list[FiledRecord]] = defaultdict(list)
    seeds: dict[tuple, dict[int, FiledRecord]] = defaultdict(dict)
    counts: dict[tuple, list[FiledRecord]] = defaultdict(list)
    for filed in report.records:
        r = filed.record
        by_run_id[r["run_id"]].append(filed)
        # MLPerf's rule is about the runs scored together: those of one workload with the same
        # parameters (comparability key) on one system. Other configurations may reuse a seed.
        key = comparability_key(r)  # recomputed from the record: a stored key is never trusted
        group = (filed.org, filed.system, r["workload"]["name"], key)
        seed = r["controls"]["seed"]
        first = seeds[group].get(seed)
        if first is not None:
            problems.append(
                Problem(
                    filed.relpath,
                    f"seed {seed} is already used by {first.relpath}: "
                    f"seeds must be unique per workload, parameters and system",
                )
            )
        else:
            seeds[group][seed] = filed
        counts[group].append(filed)
        description = report.systems.get((filed.org, filed.system))
        if description is None:
            problems.append(
                Problem(
                    filed.relpath,
                    f"no valid system file {filed.org}/{SYSTEMS_DIR}/{filed.system}.json for system {filed.system!r}",
                )
            )
            continue
        gpus = r["environment"]["gpus"]
        names = sorted({g["name"] for g in gpus}) or ["none"]
        if names != [description["accelerator_model_name"]]:
            problems.append(
                Problem(
                    filed.relpath,
                    f"accelerator {', '.join(names)} differs from the system file's "
                    f"{description['accelerator_model_name']!r} ({filed.system}.json)",
                )
            )
        if len(gpus) != description["accelerators_per_node"]:
            problems.append(
                Problem(
                    filed.relpath,
                    f"{len(gpus)} accelerators in the record, "
                    f"{description['accelerators_per_node']} per node in "
                    f"{filed.system}.json",
                )
            )
    for run_id, filed_list in by_run_id.items():
        for dup in filed_list[1:]:
            problems.append(Problem(dup.relpath, f"duplicate run id {run_id}: also {filed_list[0].relpath}"))
    for (_org, system, workload, _key), filed_list in counts.items():
        needed = required_runs(filed_list[0].record)
        if len(filed_list) < needed:
            problems.append(
                Incomplete(
                    filed_list[0].relpath,
                    f"{len(filed_list)} run(s) of {workload} with these "
                    f"parameters on {system}; "
                    f"{filed_list[0].record['workload']['category']} "
                    f"workloads need {needed}",
                )
            )


# -- loading a tree ------------------------------------------------------------------------------
def _system_row(session, org: str, name: str, description: dict) -> int:
    sha = hashlib.sha256(canonical_json(description).encode("utf-8")).hexdigest()
    row = session.execute(
        select(SubmittedSystem).where(SubmittedSystem.org == org, SubmittedSystem.name == name)
    ).scalar_one_or_none()
    if row is None:
        row = SubmittedSystem(org=org, name=name, sha256=sha, description=description)
        session.add(row)
        session.flush()
    elif row.sha256 != sha:
        row.sha256, row.description = sha, description  # the submitter corrected the description
    return row.id


def import_tree(
    registry, root: Path, progress: Callable[[int], None] | None = None, checked: TreeReport | None = None
) -> dict[str, int]:
    """Check ``root`` (or take its ``checked`` report), then store its records and their
    systems; idempotent. Each record is read and checked once.

    Raises :class:`RegistryError` listing the problems when the tree does not check clean
    (nothing is stored then). Returns counts: stored, duplicate, systems.
    """
    report = checked if checked is not None else check_tree(root)
    if not report.ok:
        shown = "; ".join(str(p) for p in report.problems[:5])
        more = f" (and {len(report.problems) - 5} more)" if len(report.problems) > 5 else ""
        raise RegistryError(f"{root} does not check clean, nothing imported: {shown}{more}")
    from perfsuite.registry.bulk import BulkOutcome, store_prepared

    outcome = BulkOutcome()
    batches = [
        [f.prepared for f in report.records[i : i + 2000] if f.prepared is not None]
        for i in range(0, len(report.records), 2000)
    ]
    from perfsuite.registry.errors import translated_errors

    with translated_errors(f"registry {registry.url}"):
        store_prepared(registry.engine, batches, outcome, atomic=True, progress=progress)  # all or none
    outcomes = {"stored": outcome.stored, "duplicate": outcome.duplicate, "systems": len(report.systems)}
    with registry._write_sessions() as session, session.begin():
        system_ids = {key: _system_row(session, *key, desc) for key, desc in report.systems.items()}
        run_pks = dict(
            session.execute(
                select(Run.run_id, Run.id).where(Run.run_id.in_([f.record["run_id"] for f in report.records]))
            ).all()
        )
        existing = set(
            session.execute(select(Submission.run_id).where(Submission.run_id.in_(list(run_pks.values())))).scalars()
        )
        for filed in report.records:
            pk = run_pks[filed.record["run_id"]]
            if pk in existing:
                continue
            session.add(Submission(run_id=pk, system_id=system_ids[(filed.org, filed.system)], path=filed.relpath))
    return outcomes


# -- filing runs into a tree -------------------------------------------------------------------
def filed_cost(report: TreeReport, filed: FiledRecord) -> dict | None:
    """A filed result's cost: its own, else one at its system description's price."""
    description = report.systems.get((filed.org, filed.system)) or {}
    r = filed.record
    return result_cost(
        r.get("cost"), description.get(PRICE_FIELD), r["metrics"], r["controls"]["device"], r["launch"]["world_size"]
    )
