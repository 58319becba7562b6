"""A run plan (``perfsuite run --plan``'s TOML) as a job array: one ``[[run]]`` per index.

Each ``[[run]]``, over the plan's ``[defaults]``, becomes the arguments of one ``perfsuite run``
(or ``crosscheck``, where it says ``crosscheck = true``) command: keys are the options' long
names with underscores, ``workloads`` the names, ``params`` one ``--param`` each. Under SLURM
every task is one rank, so the local launch keys (``nproc_per_node``, ``nnodes``,
``node_rank``, ``rdzv_endpoint``) are not passed on: ``nproc_per_node`` becomes that index's
tasks per node, and the most of them the GPUs per node the job asks for where the command
line names none.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

PLANS_DIR = Path(__file__).resolve().parent.parent / "plans"
LOCAL_LAUNCH_KEYS = ("nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint")
PLAN_KEYS = {"name", "description", "defaults", "run"}


class PlanError(ValueError):
    """A plan that cannot be read or run as a job array (one line)."""


@dataclass
class PlanRun:
    """One ``[[run]]`` as one array index's command."""

    command: str  # run | crosscheck
    argv: list[str]
    workloads: list[str]
    repeat: int
    quick: bool
    ntasks_per_node: int | None  # the plan's nproc_per_node for this run, if any


@dataclass
class Plan:
    name: str
    source: Path
    runs: list[PlanRun]

    def max_ntasks_per_node(self) -> int | None:
        """The most ranks per node any run asks for (``nproc_per_node``), if any does."""
        counts = [r.ntasks_per_node for r in self.runs if r.ntasks_per_node is not None]
        return max(counts) if counts else None


def find(name_or_file: str) -> Path:
    """A plan file: a path that exists, else ``NAME`` among the plans shipped with perfsuite."""
    path = Path(name_or_file)
    if path.is_file():
        return path
    shipped = PLANS_DIR / f"{name_or_file}.toml"
    if shipped.is_file():
        return shipped
    known = ", ".join(sorted(p.stem for p in PLANS_DIR.glob("*.toml"))) or "none"
    raise PlanError(f"no plan file {name_or_file!r} and no shipped plan of that name (shipped: {known})")


def load(name_or_file: str) -> Plan:
    path = find(name_or_file)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError(f"plan {path}: {exc}") from exc
    unknown = set(data) - PLAN_KEYS
    if unknown:
        raise PlanError(f"plan {path}: unknown key(s) {', '.join(sorted(unknown))} "
                        f"(a plan has {', '.join(sorted(PLAN_KEYS))})")
    runs = data.get("run")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise PlanError(f"plan {path}: no [[run]] tables")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise PlanError(f"plan {path}: [defaults] must be a table")
    out = []
    for number, table in enumerate(runs, 1):
        try:
            out.append(plan_run({**defaults, **table, "params": {**defaults.get("params", {}),
                                                                 **table.get("params", {})}}))
        except PlanError as exc:
            raise PlanError(f"plan {path}, [[run]] {number}: {exc}") from exc
    return Plan(str(data.get("name") or path.stem), path, out)


def plan_run(values: dict[str, Any]) -> PlanRun:
    """One run's merged keys as a command and its arguments."""
    values = dict(values)
    values.pop("label", None)
    command = "crosscheck" if values.pop("crosscheck", False) else "run"
    workloads = values.pop("workloads", [])
    if isinstance(workloads, str):
        workloads = [workloads]
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        raise PlanError("workloads must be a list of workload names")
    quick = bool(values.get("quick", False))
    if not workloads and not quick:
        raise PlanError("no workloads (and not quick)")
    ntasks_per_node = values.get("nproc_per_node")
    for key in LOCAL_LAUNCH_KEYS:
        values.pop(key, None)
    params = values.pop("params", {})
    if not isinstance(params, dict):
        raise PlanError("params must be a table")
    argv = list(workloads)
    for key, value in params.items():
        argv += ["--param", f"{key}={_text(value)}"]
    for key, value in values.items():
        option = "--" + key.replace("_", "-")
        if value is True:
            argv.append(option)
        elif value is False:
            continue
        elif isinstance(value, dict):
            raise PlanError(f"{key} must be a value, not a table")
        else:
            argv += [option, _text(value)]
    repeat = values.get("repeat", 1)
    if not isinstance(repeat, int) or repeat < 1:
        raise PlanError("repeat must be a whole number of at least 1")
    if ntasks_per_node is not None and (not isinstance(ntasks_per_node, int) or ntasks_per_node < 1):
        raise PlanError("nproc_per_node must be a whole number of at least 1")
    return PlanRun(command, argv, workloads, repeat, quick, ntasks_per_node)


def _text(value: Any) -> str:
    """A TOML value as the command line gives it: booleans lower case, lists comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    return str(value)
