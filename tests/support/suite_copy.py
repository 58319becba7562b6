"""What the fresh-virtual-environment tests install perfsuite from: a copy of this checkout's
distribution (pip builds in the source tree, and its build/ and egg-info must not land in the
checkout or race another test), and the core dependencies as pyproject.toml declares them."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IGNORE = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")


def copy_suite(dest: Path) -> Path:
    """``dest``, made, holding the files pip builds perfsuite from."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)
    for folder in ("suite", "registry", "workloads", "schemas"):  # the folders the namespace maps
        shutil.copytree(REPO / folder, dest / folder, ignore=IGNORE)
    return dest


def core_dependencies() -> list[str]:
    """perfsuite's own dependencies, as pyproject.toml declares them (no extra)."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
