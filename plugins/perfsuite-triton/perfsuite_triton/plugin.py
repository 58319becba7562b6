"""The perfsuite plugin module of perfsuite-triton: the entry point ``triton`` in the
``perfsuite`` group names this module, and the host registers it with pluggy.

It uses only perfsuite's public API and imports neither torch nor triton, so that
``perfsuite list`` stays fast and works where they are not installed (the workloads are
then listed as unavailable, with the reason).
"""

from __future__ import annotations

import json
import os
from importlib import metadata

from perfsuite import hookimpl
from perfsuite_triton import __version__
from perfsuite_triton.workloads.fused_chain import FusedChain
from perfsuite_triton.workloads.matmul import Matmul
from perfsuite_triton.workloads.softmax import Softmax

WORKLOADS = (FusedChain, Softmax, Matmul)


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)


@hookimpl
def perfsuite_collect_environment(env):
    """Record the triton the kernels were built with, and whether they were interpreted."""
    packages = env.setdefault("packages", {})
    packages.setdefault("triton", _installed_version("triton"))
    packages.setdefault("perfsuite-triton", __version__)
    env["perfsuite_triton"] = {"version": __version__, "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET")}


@hookimpl
def perfsuite_register_commands(cli):
    import click

    @click.command("triton-info")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def triton_info(as_json: bool) -> None:
        """Triton as the triton.* workloads will see it: version, interpreter, GPU driver,
        and the matmul autotune configs."""
        info = describe_triton()
        if as_json:
            click.echo(json.dumps(info, indent=2, sort_keys=True))
            return
        for key in ("triton", "TRITON_INTERPRET", "interpreted", "driver", "driver_error"):
            click.echo(f"{key:18} {info[key]}")
        click.echo(f"matmul configs     {len(info['matmul_configs'])}:")
        for cfg in info["matmul_configs"]:
            click.echo("  " + " ".join(f"{k}={v}" for k, v in cfg.items()))

    cli.add_command(triton_info)


def describe_triton() -> dict:
    """What ``perfsuite triton-info`` prints; imports triton (a command, never ``list``)."""
    from triton.runtime import driver

    from perfsuite_triton.kernels import matmul as kernel

    info = {
        "triton": _installed_version("triton"),
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
        "interpreted": kernel.INTERPRETED,
        "driver": None,
        "driver_error": None,
        "matmul_configs": [kernel.config_dict(c) for c in kernel.CONFIGS],
    }
    try:
        target = driver.active.get_current_target()
        info["driver"] = f"{target.backend} {target.arch}"
    except RuntimeError as exc:  # no GPU driver: "0 active drivers ([])"
        info["driver_error"] = str(exc)
    return info


def _installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
