"""The docs say what is true: the plugin tutorial, followed from a fresh virtual environment,
builds a plugin that perfsuite lists and runs; and every GPU figure the docs quote names a
record that is under ``submissions/``.

The tutorial's files and commands are read from ``docs/plugin-tutorial.md`` itself (its code
blocks with a ``title="PATH"``, its shell lines), so the page and this test cannot drift.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

TUTORIAL = REPO / "docs" / "plugin-tutorial.md"
FIGURES = REPO / "docs" / "figures.md"
README = REPO / "README.md"
# A fenced block with a title: ```python title="perfsuite_axpy/kernel.py" ... ```
TITLED_BLOCK = re.compile(r'^```\w+ title="(?P<path>[^"]+)"\n(?P<body>.*?)^```$', re.DOTALL | re.MULTILINE)
SHELL_BLOCK = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
PLUGIN_DIR = "perfsuite-axpy"
WORKLOAD = "axpy.scaled_add"


def tutorial_files() -> dict[str, str]:
    """The plugin's files as the tutorial writes them out, by path inside the plugin folder."""
    files = {m["path"]: m["body"] for m in TITLED_BLOCK.finditer(TUTORIAL.read_text())}
    assert files, f"no titled code blocks in {TUTORIAL}"
    return files


def tutorial_command(prefix: str) -> list[str]:
    """The one shell line of the tutorial that starts with ``prefix``, split as a shell would
    (comments dropped)."""
    lines = [
        line.strip()
        for block in SHELL_BLOCK.finditer(TUTORIAL.read_text())
        for line in block["body"].splitlines()
        if line.strip().startswith(prefix)
    ]
    assert len(lines) == 1, f"the tutorial should have one shell line starting {prefix!r}, has {lines}"
    return shlex.split(lines[0], comments=True)


def test_the_tutorial_writes_out_every_file_of_its_layout():
    listed = re.search(r"^```text\n(?P<body>.*?)^```$", TUTORIAL.read_text(), re.DOTALL | re.MULTILINE)
    assert listed, "the tutorial's layout block is missing"
    layout = {
        line.split("#")[0].strip().removeprefix(f"{PLUGIN_DIR}/")
        for line in listed["body"].splitlines()[1:]
        if line.strip()
    }
    assert layout == set(tutorial_files())


def _copy_perfsuite(dest: Path) -> Path:
    """A copy of this checkout's distribution to install from: pip builds in the source tree,
    and its egg-info must not land in the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for folder in ("suite", "registry", "workloads", "schemas"):  # the folders the namespace maps
        shutil.copytree(REPO / folder, dest / folder, ignore=ignore)
    return dest


@pytest.mark.slow
def test_the_plugin_tutorial_followed_in_a_fresh_venv_builds_a_plugin_perfsuite_lists_and_runs(tmp_path):
    """Minutes on 2 cores (a venv, two editable installs, a run, the plugin's own tests), so slow.

    The fresh environment gets perfsuite and the plugin installed into it, as the tutorial
    says; their dependencies (torch, triton, pytest ...) come from this test's environment
    through a path file, instead of being downloaded again: the tutorial's `pip install`
    lines run with `--no-deps` for that reason."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    work = tmp_path / "work"
    plugin = work / PLUGIN_DIR
    for relative, body in tutorial_files().items():
        path = plugin / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    perfsuite_src = _copy_perfsuite(tmp_path / "perfsuite-src")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # This environment's packages after the fresh one's own: pip, setuptools, torch, triton, pytest.
    parents = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    Path(purelib, "zz_dependencies.pth").write_text("\n".join(parents) + "\n")

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PERFSUITE_PLUGINS", "TRITON_INTERPRET") and not k.startswith("VIRTUAL_ENV")
    }
    env.update(
        {
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "PERFSUITE_DB": f"sqlite:///{tmp_path / 'registry.db'}",
            "PERFSUITE_RECORDS": str(tmp_path / "records"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "PERFSUITE_PLUGINS": "axpy",  # this plugin alone, whatever else the environment holds
        }
    )

    def run(argv: list[str], **extra_env: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, cwd=work, env={**env, **extra_env}, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{shlex.join(argv)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def pip_install(command: list[str], source: str | None = None) -> None:
        """A `pip install` line of the tutorial, run by the fresh interpreter, without deps."""
        assert command[:3] == ["pip", "install", "-e"], command
        offline = ["-q", "--no-deps", "--no-build-isolation", "--no-index"]
        run([python, "-m", "pip", "install", *offline, "-e", source or command[3]])

    # perfsuite's pyproject needs setuptools 77 or newer to build; where this environment's is
    # older, the fresh one gets its own from the package index (as test_triton_plugin does).
    setuptools = run([python, "-c", "import setuptools; print(setuptools.__version__)"]).stdout
    if int(setuptools.split(".")[0]) < 77:
        run([python, "-m", "pip", "install", "-q", "setuptools>=77"])

    # 1. Set up: perfsuite into the fresh environment (from a copy of this checkout).
    pip_install(tutorial_command("pip install -e 'path/to/perfsuite"), str(perfsuite_src))
    where = run([python, "-c", "import perfsuite; print(perfsuite.__file__)"]).stdout.strip()
    assert Path(where).is_relative_to(perfsuite_src), f"perfsuite imported from {where}, not the fresh install"

    # 6. Install it and list it.
    pip_install(tutorial_command("pip install -e ./perfsuite-axpy"))
    plugins = {p["name"]: p for p in json.loads(run(["perfsuite", "plugins", "--json"]).stdout)}
    assert plugins["axpy"]["distribution"] == "perfsuite-axpy" and plugins["axpy"]["version"] == "0.1.0"
    assert plugins["axpy"]["hooks"] == ["perfsuite_register_workloads"]
    assert plugins["axpy"]["workloads"] == [WORKLOAD] and plugins["axpy"]["error"] is None
    listed = {row["name"]: row for row in json.loads(run(["perfsuite", "list", "--json", "--device", "cpu"]).stdout)}
    row = listed[WORKLOAD]
    assert row["category"] == "kernels" and row["available"] is True, row
    assert row["plugin"] == {"name": "axpy", "distribution": "perfsuite-axpy", "version": "0.1.0"}

    # 7. Run it: on the CPU through Triton's interpreter, then without it (a skip, with the reason).
    command = tutorial_command(f"TRITON_INTERPRET=1 perfsuite run {WORKLOAD} --quick --device cpu")
    assignment, argv = command[0], command[1:]
    name, value = assignment.split("=", 1)
    (record,) = json.loads(run([*argv, "--json"], **{name: value}).stdout)
    assert record["status"] == "success", record["error"]
    assert record["verification"]["status"] == "passed"
    assert record["workload"]["plugin"] == {"name": "axpy", "distribution": "perfsuite-axpy", "version": "0.1.0"}
    assert record["workload"]["params"] == {"n": 100_000, "dtype": "fp32", "alpha": 2.0}
    cases = {(m["case"], m["name"]) for m in record["metrics"]}
    assert {("triton", "gbps"), ("torch_eager", "gbps"), ("triton", "speedup")} <= cases
    (skipped,) = json.loads(run([*argv, "--json"]).stdout)
    assert skipped["status"] == "skipped" and "TRITON_INTERPRET=1" in skipped["error"]

    # 8. Test it: the plugin's own tests, as the tutorial runs them.
    pytest_argv = tutorial_command("python -m pytest perfsuite-axpy/tests")
    outcome = run([python, *pytest_argv[1:], "-p", "no:cacheprovider"]).stdout
    assert re.search(r"\b4 passed\b", outcome), outcome


# -- figures: every run id the docs and the README quote is a record under submissions/ --
RUN_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{8}(?![0-9a-f])")


def filed_run_ids() -> set[str]:
    return {p.stem[:8] for p in (REPO / "submissions").glob("*/results/*/*/*.json") if len(p.stem) == 32}


FENCED = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize(
    "page",
    [FIGURES, REPO / "docs" / "triton-plugin.md", REPO / "tools" / "probes" / "README.md", README],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_every_run_id_quoted_is_a_record_under_submissions(page):
    """Prose and tables only: a fenced block shows a command's output (the README's CPU run,
    whose records are not filed)."""
    quoted = set(RUN_ID.findall(FENCED.sub("", page.read_text())))
    assert quoted, f"{page} quotes no run id"
    missing = sorted(quoted - filed_run_ids())
    assert missing == [], f"{page} quotes run ids with no record under submissions/: {missing}"
