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
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
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
        try:
            return str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PlanError(f"plan {path}: cannot be read ({exc})") from None
    if name_or_path in shipped():
        text = resources.files("perfsuite.plans").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        return f"perfsuite/plans/{name_or_path}.toml", text
    raise PlanError(
        f"no plan file {name_or_path!r}, and no shipped plan of that name (shipped: {', '.join(shipped()) or 'none'})"
    )


def _scalar(value: Any) -> str:
    """A TOML value as ``-p`` would give it: booleans lower case, lists comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_scalar(v) for v in value)
    return str(value)


def load(name_or_path: str, check_option: Callable[[str, Any], Any]) -> Plan:
    """Read and check a plan. ``check_option(name, value)`` converts one run option as the
    command line would (raising ``ValueError`` with the reason, or ``KeyError`` for a name the
    command has not), and returns the converted value."""
    source, text = locate(name_or_path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"plan {source}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - {"name", "description", "defaults", "run"})
    if unknown:
        raise PlanError(f"plan {source}: unknown top-level keys {unknown} (name, description, defaults, run)")
    defaults = data.get("defaults", {})
    entries = data.get("run", [])
    if not isinstance(defaults, dict) or not isinstance(entries, list) or not entries:
        raise PlanError(f"plan {source}: needs a [defaults] table (optional) and at least one [[run]]")
    runs = []
    for i, entry in enumerate(entries, 1):
        where = f"plan {source}, run {i}"
        if not isinstance(entry, dict):
            raise PlanError(f"{where}: each [[run]] is a table")
        merged = {**defaults, **entry}
        label = str(merged.pop("label", "")) or f"run {i}"
        workloads = merged.pop("workloads", [])
        if isinstance(workloads, str) or not all(isinstance(w, str) for w in workloads):
            raise PlanError(f"{where}: workloads is a list of workload names")
        params = merged.pop("params", {})
        if not isinstance(params, dict):
            raise PlanError(f"{where}: params is a table of k = v")
        crosscheck = merged.pop("crosscheck", False)
        if not isinstance(crosscheck, bool):
            raise PlanError(f"{where}: crosscheck is true or false")
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
                raise PlanError(f"{where}: unknown option {key!r}") from None
            except ValueError as exc:
                raise PlanError(f"{where}: {key} = {value!r}: {exc}") from None
        runs.append(
            PlannedRun(
                label, tuple(workloads), tuple(f"{k}={_scalar(v)}" for k, v in params.items()), options, crosscheck
            )
        )
    return Plan(str(data.get("name", Path(source).stem)), str(data.get("description", "")), source, tuple(runs))
