"""A plugin that needs only numpy runs where torch is not installed: a fresh virtual
environment gets perfsuite's core dependencies from the package index (no extras, so no
torch), perfsuite itself from this checkout, and a plugin written from the docs alone (its
workload module is the "Testing your plugin" page's example, its package and plugin module
the tutorial's shape). There, ``perfsuite list`` shows it available, ``perfsuite run`` measures
and verifies it, ``perfsuite results`` shows the stored run, and ``import torch`` fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.suite_copy import copy_suite, core_dependencies

from tests.conftest import REPO
from tests.test_docs import TITLED_BLOCK

PAGE = REPO / "docs" / "testing-plugins.md"

# The tutorial's package (section 2) and plugin module (section 5), for the page's workload.
PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "perfsuite-demo"
version = "0.1.0"
description = "out = x * x with numpy: a perfsuite workload plugin without torch"
requires-python = ">=3.11"
dependencies = ["perfsuite", "numpy"]

[project.entry-points.perfsuite]
demo = "perfsuite_demo_plugin"

[tool.setuptools]
py-modules = ["perfsuite_demo", "perfsuite_demo_plugin"]
"""
PLUGIN_MODULE = '''\
"""perfsuite-demo's plugin module, named by the entry point ``demo``."""

from perfsuite import hookimpl
from perfsuite_demo import Square


@hookimpl
def perfsuite_register_workloads(register):
    register(Square)
'''


def write_sources(dest: Path) -> tuple[Path, Path]:
    """A copy of the suite to build from and the plugin's folder."""
    suite_src, plugin_src = copy_suite(dest / "perfsuite"), dest / "perfsuite-demo"
    blocks = {m["path"]: m["body"] for m in TITLED_BLOCK.finditer(PAGE.read_text())}
    plugin_src.mkdir()
    (plugin_src / "perfsuite_demo.py").write_text(blocks["perfsuite_demo.py"])
    (plugin_src / "perfsuite_demo_plugin.py").write_text(PLUGIN_MODULE)
    (plugin_src / "pyproject.toml").write_text(PYPROJECT)
    return suite_src, plugin_src


@pytest.mark.slow
def test_a_numpy_plugin_lists_runs_and_shows_its_results_without_torch(tmp_path):
    suite_src, plugin_src = write_sources(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")

    def pip_install(*args: str) -> None:
        proc = subprocess.run(
            [python, "-m", "pip", "--disable-pip-version-check", "-q", "install", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, f"pip install {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"

    pip_install("setuptools>=77", *core_dependencies())
    pip_install("--no-deps", "--no-build-isolation", str(suite_src), str(plugin_src))
    no_torch = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True, timeout=120)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PERFSUITE_PLUGINS") and not k.startswith("VIRTUAL_ENV")
    }
    env.update(
        {
            "PERFSUITE_DB": f"sqlite:///{tmp_path / 'registry.db'}",
            "PERFSUITE_RECORDS": str(tmp_path / "records"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "PERFSUITE_PLUGINS": "demo",
        }
    )

    def perfsuite(*args: str) -> str:
        proc = subprocess.run(
            [str(venv / "bin" / "perfsuite"), *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"perfsuite {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    rows = {row["name"]: row for row in json.loads(perfsuite("list", "--device", "cpu", "--json")) if "name" in row}
    listed = rows["demo.square"]
    assert listed["available"] is True, listed
    assert rows["kernels.gemm"]["available"] is False and "'torch'" in rows["kernels.gemm"]["reason"]
    assert listed["plugin"]["distribution"] == "perfsuite-demo"

    (record,) = json.loads(perfsuite("run", "demo.square", "--device", "cpu", "--json"))
    assert record["status"] == "success" and record["verification"]["status"] == "passed", record
    assert any(m["name"] == "gbps" and m["value"] > 0 for m in record["metrics"])
    assert (tmp_path / "records" / f"{record['run_id']}.json").is_file()

    shown = perfsuite("results")
    assert "demo.square" in shown and record["run_id"][:8] in shown
    (row,) = [r for r in json.loads(perfsuite("results", "--json")) if r["metric"] == "gbps"]
    assert row["run_id"] == record["run_id"] and row["verification"] == "passed"
