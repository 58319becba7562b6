"""Run plans: what a machine should run, as data the CLI reads (``perfsuite run --plan``)
rather than a shell script around it. A plan is a TOML file::

    name = "gpu-one"
    description = "One GPU: its ceilings, then every kernel at its default size"
    [defaults]                  # any `perfsuite run` option, by its long name with underscores
    device = "cuda"
    [[run]]
    workloads = ["kernels.ceilings"]
    [[run]]
    workloads = ["kernels.gemm"]
    params = { dtypes = "bf16,fp8", m = 8192 }
    min_time = 2.0
    [[run]]
    workloads = ["kernels.gemm"]
    crosscheck = true           # the reference tool in the same call (perfsuite crosscheck)
    rounds = 4

Each ``[[run]]`` is what one ``perfsuite run`` (or ``crosscheck``) command line would run;
``workloads = []`` with ``quick = true`` is the quick suite. ``params`` takes ``k = v`` (every
workload of the entry that has ``k``) and ``"name:k" = v``. Plans shipped with perfsuite live in
``perfsuite/plans`` and are found by name (``perfsuite run --plan gpu-one``). Values are checked
here as the command line checks them (the caller passes a ``check`` per option), so a bad
plan is one line naming its file and entry before anything runs.

A plan is data from wherever the user points, so it is read within bounds and against a schema:
a regular file only (a FIFO or a device is refused before it is read, so nothing blocks or
fills memory) of at most :data:`MAX_PLAN_BYTES`, nesting at most :data:`MAX_DEPTH` tables and
arrays, at most :data:`MAX_ENTRIES` entries and :data:`MAX_RUNS` runs in all. Every key has
a type (``seed = true`` or ``repeat = 2.5`` is refused, never coerced), a key no plan has is
refused, and an option of the command that a plan cannot set (``slurm``, ``db``, ``json``) is
refused naming the command-line option to give instead.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

# Keys of a [[run]] entry that are not `perfsuite run` options.
ENTRY_KEYS = {"workloads", "params", "crosscheck", "label"}
# The cross-check's own options (perfsuite crosscheck), allowed where ``crosscheck = true``.
CROSSCHECK_OPTIONS = {"rounds", "nccl_tests", "mpirun"}
# Plan option names that differ from the run command's parameter names.
RENAMED = {"timeout": "timeout_s", "min_time": "min_time_s"}

MAX_PLAN_BYTES = 1024 * 1024  # the largest shipped plan is under 10 KB
MAX_DEPTH = 5  # the plan, its [[run]] array, an entry, its params table, a list value
MAX_ENTRIES = 1000  # [[run]] entries (a SLURM job array of one index each)
MAX_RUNS = 10_000  # runs of every entry, repeats counted: days of measuring at a few seconds each
MAX_LABEL_CHARS = 200


class PlanError(ValueError):
    """A plan that cannot be run as written; the message is one line naming the file and entry."""


@dataclass(frozen=True)
class PlannedRun:
    """One ``[[run]]`` of a plan: the workloads (empty: every workload, with ``quick``), their
    parameters as ``-p`` would give them, the run options, and whether it is a cross-check."""

    label: str
    workloads: tuple[str, ...]
    params: tuple[str, ...]  # "k=v" or "name:k=v", as --param takes them
    options: dict[str, Any]  # run options by the run command's parameter names
    crosscheck: bool = False


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    source: str
    runs: tuple[PlannedRun, ...]


def shipped() -> list[str]:
    """The names of the plans that come with perfsuite."""
    folder = resources.files("perfsuite.plans")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def locate(name_or_path: str) -> tuple[str, str]:
    """(source label, TOML text) of a plan file, or of a shipped plan by name."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return str(path), read_plan_file(path)
    if name_or_path in shipped():
        text = resources.files("perfsuite.plans").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        return f"perfsuite/plans/{name_or_path}.toml", text
    raise PlanError(
        f"no plan file {name_or_path!r}, and no shipped plan of that name (shipped: {', '.join(shipped()) or 'none'})"
    )


def read_plan_file(path: Path) -> str:
    """The text of a plan file: a regular file (a symlink to one is followed) of at most
    :data:`MAX_PLAN_BYTES`, in UTF-8. It is opened without blocking and checked before a byte is
    read: a FIFO would wait for a writer forever, and ``/dev/zero`` never ends."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise PlanError(f"plan {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PlanError(f"plan {path}: not a regular file (a plan is a TOML file)")
        if info.st_size > MAX_PLAN_BYTES:
            raise PlanError(f"plan {path}: {info.st_size:,} bytes, over the {MAX_PLAN_BYTES:,}-byte limit of a plan")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError(f"plan {path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_PLAN_BYTES:  # it grew while it was read
        raise PlanError(f"plan {path}: over the {MAX_PLAN_BYTES:,}-byte limit of a plan")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError(f"plan {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _shown(value: Any) -> str:
    """A key or value as an error line quotes it: a megabyte string is not echoed whole."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}... ({len(text):,} characters)"


def _depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests tables and arrays, counted no further than ``limit + 1``."""
    if limit < 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in children), default=0)


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _toml_type(value: Any) -> str:
    """What a TOML value is, as an error line says it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return {int: "an integer", float: "a number", str: "a string"}.get(type(value), type(value).__name__)


def _of_type(value: Any, kind: type) -> bool:
    """Whether a TOML value is of ``kind``: a boolean is no integer, a fraction no integer, an
    integer is a number."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def _name_problem(value: str) -> str | None:
    """Why a label or workload name cannot be printed as one (control characters, length)."""
    if len(value) > MAX_LABEL_CHARS:
        return f"{len(value):,} characters (at most {MAX_LABEL_CHARS})"
    for c in value:
        if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp"):
            return f"holds a control character ({ord(c):#04x})"
    return None


def _check_param_value(where: str, key: Any, value: Any) -> None:
    """A ``params`` value is what ``-p`` takes: a string, number or boolean, or an array of them."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, (dict, list)) or not isinstance(item, (str, int, float, bool)):
            raise PlanError(
                f"{where}: params.{key} is {_toml_type(item)}: give a string, number or boolean, or an array of them"
            )
        if isinstance(item, float) and not math.isfinite(item):
            raise PlanError(f"{where}: params.{key} = {item!r} is not a finite number")


def _check_entry(where: str, entry: dict, kinds: Mapping[str, type] | None, command_line: Mapping[str, str]) -> None:
    """The schema of one merged entry: the entry keys' types, and each option's TOML type where
    ``kinds`` (option name -> bool, int, float or str) is given."""
    label = entry.get("label", "")
    if not isinstance(label, str):
        raise PlanError(f"{where}: label is {_toml_type(label)}, not a string")
    problem = _name_problem(label)
    if problem is not None:
        raise PlanError(f"{where}: label {label[:40]!r}: {problem}")
    workloads = entry.get("workloads", [])
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        raise PlanError(f"{where}: workloads is an array of workload names, not {_toml_type(workloads)}")
    for w in workloads:
        problem = _name_problem(w)
        if problem is not None:
            raise PlanError(f"{where}: workload {w[:40]!r}: {problem}")
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise PlanError(f"{where}: params is a table of k = v, not {_toml_type(params)}")
    for key, value in params.items():
        _check_param_value(where, key if len(key) <= 40 else f"{key[:40]}...", value)
    if not isinstance(entry.get("crosscheck", False), bool):
        raise PlanError(f"{where}: crosscheck is true or false, not {_toml_type(entry['crosscheck'])}")
    for key, value in entry.items():
        if key in ENTRY_KEYS:
            continue
        name: str = RENAMED.get(key) or key
        if name in command_line:
            raise PlanError(f"{where}: {key} cannot be set in a plan: give {command_line[name]} on the command line")
        if kinds is None:
            continue
        if name not in kinds:
            raise PlanError(f"{where}: unknown option {_shown(key)}")
        if not _of_type(value, kinds[name]):
            raise PlanError(f"{where}: {key} is {_toml_type(value)}, not {_TYPE_NAMES[kinds[name]]}")


def _scalar(value: Any) -> str:
    """A TOML value as ``-p`` would give it: booleans lower case, lists comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_scalar(v) for v in value)
    return str(value)


def load(
    name_or_path: str,
    check_option: Callable[[str, Any], Any],
    kinds: Mapping[str, type] | None = None,
    command_line: Mapping[str, str] | None = None,
) -> Plan:
    """Read and check a plan. ``check_option(name, value)`` converts one run option as the
    command line would (raising ``ValueError`` with the reason, or ``KeyError`` for a name the
    command has not), and returns the converted value. ``kinds``: the TOML type of each option
    a plan may set (by the command's parameter names; any other is refused); ``command_line``:
    the command's options that a plan cannot set, each with the flag to give instead."""
    source, text = locate(name_or_path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"plan {source}: not valid TOML ({exc})") from None
    except RecursionError:
        raise PlanError(
            f"plan {source}: nests tables or arrays too deeply to read (a plan nests at most {MAX_DEPTH})"
        ) from None
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise PlanError(f"plan {source}: nests tables or arrays more than {MAX_DEPTH} deep")
    unknown = sorted(set(data) - {"name", "description", "defaults", "run"})
    if unknown:
        shown = _shown(unknown[:5])[:-1] + (", ...]" if len(unknown) > 5 else "]")
        raise PlanError(f"plan {source}: unknown top-level keys {shown} (name, description, defaults, run)")
    for key in ("name", "description"):
        if not isinstance(data.get(key, ""), str):
            raise PlanError(f"plan {source}: {key} is {_toml_type(data[key])}, not a string")
    problem = _name_problem(data.get("name", ""))
    if problem is not None:
        raise PlanError(f"plan {source}: name {data['name'][:40]!r}: {problem}")
    defaults = data.get("defaults", {})
    entries = data.get("run", [])
    if not isinstance(defaults, dict) or not isinstance(entries, list) or not entries:
        raise PlanError(f"plan {source}: needs a [defaults] table (optional) and at least one [[run]]")
    if len(entries) > MAX_ENTRIES:
        raise PlanError(f"plan {source}: {len(entries):,} [[run]] entries, over the limit of {MAX_ENTRIES:,}")
    runs = []
    for i, entry in enumerate(entries, 1):
        where = f"plan {source}, run {i}"
        if not isinstance(entry, dict):
            raise PlanError(f"{where}: each [[run]] is a table")
        merged = {**defaults, **entry}
        _check_entry(where, merged, kinds, command_line or {})
        label = merged.pop("label", "") or f"run {i}"
        workloads = merged.pop("workloads", [])
        params = merged.pop("params", {})
        crosscheck = merged.pop("crosscheck", False)
        if not workloads and not merged.get("quick"):
            raise PlanError(f"{where}: name its workloads, or set quick = true for the quick suite")
        options = {}
        for key, value in merged.items():
            if key in CROSSCHECK_OPTIONS and not crosscheck:
                raise PlanError(f"{where}: {key} is an option of a cross-check (set crosscheck = true)")
            name = RENAMED.get(key, key)
            try:
                options[name] = check_option(name, value)
            except KeyError:
                raise PlanError(f"{where}: unknown option {_shown(key)}") from None
            except ValueError as exc:
                reason = str(exc) if len(str(exc)) <= 200 else f"{str(exc)[:200]}..."  # it may quote the value
                raise PlanError(f"{where}: {key} = {_shown(value)}: {reason}") from None
        runs.append(
            PlannedRun(
                label, tuple(workloads), tuple(f"{k}={_scalar(v)}" for k, v in params.items()), options, crosscheck
            )
        )
    return Plan(data.get("name") or Path(source).stem, data.get("description", ""), source, tuple(runs))


def check_run_count(plan: Plan, all_workloads: int, repeat_given: int | None) -> int:
    """The runs a plan makes (each entry's workloads, or ``all_workloads`` for the quick suite,
    times its repeat, or ``repeat_given`` on the command line); :class:`PlanError` above
    :data:`MAX_RUNS`, counted before any run is resolved."""
    total = 0
    for run in plan.runs:
        repeat = repeat_given if repeat_given is not None else run.options.get("repeat", 1)
        total += (len(set(run.workloads)) or all_workloads) * repeat
    if total > MAX_RUNS:
        raise PlanError(f"plan {plan.source}: {total:,} runs, over the limit of {MAX_RUNS:,} runs a plan may make")
    return total
