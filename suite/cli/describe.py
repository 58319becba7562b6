"""``perfsuite describe WORKLOAD``: what a workload measures, whether it can run here, its
parameters (type, default, quick preset, choices, help), its requirements and example command
lines; ``perfsuite list NAME`` prints the same. The facts come from the workload class itself,
so they cannot drift from what ``perfsuite run`` accepts."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any

import click

from perfsuite.cli._common import console, default_device, emit_json, fail, load_host
from perfsuite.text import plain


def type_text(kind: Any) -> str:
    """A parameter's type as ``-p`` reads it: ``int``, ``str list``, ``float or none``."""
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        return f"{type_text(item)} list"
    if origin is typing.Union or origin is types.UnionType:
        args = [type_text(a) for a in typing.get_args(kind) if a is not type(None)]
        return " or ".join(args) + (" or none" if type(None) in typing.get_args(kind) else "")
    return getattr(kind, "__name__", str(kind).replace("typing.", ""))


def value_text(value: Any) -> str:
    """A value as ``-p k=v`` takes it: lists comma-joined, ``none`` for None."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def parameters(cls: Any) -> list[dict[str, Any]]:
    """One dict per parameter: name, type, default, quick (the preset's value, or None),
    choices and help."""
    hints = typing.get_type_hints(cls.Params)
    out = []
    for f in dataclasses.fields(cls.Params):
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        quick = cls.quick.get(f.name)
        out.append(
            {
                "name": f.name,
                "type": type_text(hints[f.name]),
                "default": default,
                "quick": list(quick) if isinstance(quick, tuple) else quick,
                "choices": list(f.metadata["choices"]) if "choices" in f.metadata else None,
                "help": f.metadata.get("help", ""),
            }
        )
    return out


def examples(name: str, cls: Any, device: str) -> list[str]:
    """Command lines that run the workload: its quick preset, then its first parameters set
    explicitly (at their defaults, to show the syntax)."""
    reqs = cls.requirements
    opts = ""
    if device not in reqs.devices:
        opts += f" --device {reqs.devices[0]}"
    if reqs.min_world_size > 1:
        opts += f" --nproc-per-node {reqs.min_world_size}"
    short = [p for p in parameters(cls) if not p["name"].startswith("inject") and len(value_text(p["default"])) <= 24]
    shown = short[:2]
    params = "".join(f" -p {p['name']}={value_text(p['default'])}" for p in shown)
    lines = [f"perfsuite run {name} --quick{opts}"]
    if params:
        lines.append(f"perfsuite run {name}{params}{opts}")
    if reqs.rank_per_gpu and reqs.min_world_size <= 2 and (reqs.max_world_size or 2) >= 2:
        lines.append(f"perfsuite run {name} --quick{opts} --nproc-per-node 2")  # ranks chosen, not one per GPU
    return lines


def describe(host: Any, name: str, device: str) -> dict[str, Any]:
    """Everything ``describe`` prints, as JSON-ready data."""
    from perfsuite.controls import TIMING_CONTROLS, Controls
    from perfsuite.engine.launcher import LaunchOptions
    from perfsuite.engine.runner import RunRequest, static_unmet

    entry = host.get(name)
    cls = entry.cls
    reqs = cls.requirements
    launch = LaunchOptions(nproc_per_node=max(1, reqs.min_world_size))
    reason = static_unmet(RunRequest(entry, None, False, Controls(device=device), launch))
    return {
        "name": name,
        "category": cls.category,
        "version": cls.version,
        "description": cls.description,
        "plugin": {
            "name": entry.plugin.name,
            "distribution": entry.plugin.distribution,
            "version": entry.plugin.version,
        },
        "device": device,
        "available": reason is None,
        "reason": reason,
        "requirements": {
            "devices": list(reqs.devices),
            "min_world_size": reqs.min_world_size,
            "max_world_size": reqs.max_world_size,
            "packages": list(reqs.packages),
            "rank_per_gpu": reqs.rank_per_gpu,
        },
        "primary_metric": cls.primary_metric,
        "controls_honoured": list(cls.controls_honoured),
        "controls_not_applied": [c for c in TIMING_CONTROLS if c not in cls.controls_honoured],
        "params": parameters(cls),
        "quick": {k: list(v) if isinstance(v, tuple) else v for k, v in cls.quick.items()},
        "examples": examples(name, cls, device),
    }


def unknown_workload(host: Any, name: str) -> str:
    """One line for a name that is not in the catalogue, naming the closest ones."""
    close = difflib.get_close_matches(name, list(host.workloads), n=3, cutoff=0.5)
    if not close:
        close = [w for w in host.workloads if w.startswith(name.split(".")[0] + ".")][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown workload {name!r}{hint} (see 'perfsuite list')"


def print_description(info: dict[str, Any]) -> None:
    from perfsuite.analysis.layout import Column, FittedTable

    out = console()
    plugin = info["plugin"]["distribution"] or info["plugin"]["name"]
    out.print(
        plain(f"{info['name']}", style="bold")
        + plain(f"  v{info['version']}  {info['category']}  plugin {plugin} {info['plugin']['version'] or ''}")
    )
    if info["description"]:
        out.print(plain(info["description"]))
    here = "yes" if info["available"] else f"no: {info['reason']}"
    out.print(plain(f"runs here ({info['device']}): {here}"))
    r = info["requirements"]
    world = f"{r['min_world_size']}" + (f"..{r['max_world_size']}" if r["max_world_size"] else " or more")
    if r["rank_per_gpu"]:
        world += " (one per GPU visible by default, two on a CPU; --nproc-per-node N for N)"
    packages = ", ".join(r["packages"]) or "none"
    out.print(plain(f"needs: devices {', '.join(r['devices'])}; processes {world}; packages {packages}"))
    if info["primary_metric"]:
        out.print(plain(f"headline metric: {info['primary_metric']}"))
    if info["controls_not_applied"]:
        out.print(plain(f"times its own way: ignores {', '.join(info['controls_not_applied'])}"))
    table = FittedTable(
        (
            Column("parameter"),
            Column("type"),
            Column("default", wrap=True),
            Column("quick", wrap=True, drop=2),
            Column("choices", wrap=True, drop=1),
            Column("help", wrap=True),
        ),
        title="parameters (-p NAME=VALUE)",
    )
    for p in info["params"]:
        choices = ", ".join(map(str, p["choices"])) if p["choices"] else ""
        quick = value_text(p["quick"]) if p["name"] in info["quick"] else ""
        table.add_row(p["name"], p["type"], _cell(p["default"]), _cell(p["quick"]) if quick else "", choices, p["help"])
    out.print(table)
    out.print(plain("examples:"))
    for line in info["examples"]:
        out.print(plain(f"  {line}"))


def _cell(value: Any) -> str:
    """A value in the parameters table: list items apart, so that a long list wraps between them."""
    return ", ".join(map(value_text, value)) if isinstance(value, (list, tuple)) else value_text(value)


def describe_or_fail(names: tuple[str, ...], device: str | None, as_json: bool) -> None:
    """Describe each named workload (``describe`` and ``list NAME``)."""
    from perfsuite.plugins import UnknownWorkload

    host = load_host()
    device = device or default_device()
    infos = []
    for name in names:
        if name not in host.workloads and name not in host.conflicts:
            fail(unknown_workload(host, name))
        try:
            infos.append(describe(host, name, device))
        except UnknownWorkload as exc:  # disabled by a name conflict
            fail(str(exc))
    if as_json:
        emit_json(infos if len(infos) > 1 else infos[0])
        return
    for n, info in enumerate(infos):
        if n:
            console().print()
        print_description(info)


@click.command("describe")
@click.argument("names", nargs=-1, required=True, metavar="WORKLOAD...")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Judge availability for this device (default: cuda if a GPU is visible).",
)
def describe_cmd(names: tuple[str, ...], as_json: bool, device: str | None) -> None:
    """Describe a workload: parameters (type, default, quick preset, choices), requirements,
    whether it runs here, and example command lines."""
    describe_or_fail(names, device, as_json)
