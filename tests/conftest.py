"""Shared fixtures: an isolated registry per test, real subprocesses of the CLI, and
throwaway plugin distributions discovered through real entry points."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.temp_root import MACHINE_TEMP_ROOT  # read here, before the session moves the temp root

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption(
        "--alone-tests",
        choices=("run", "defer", "only"),
        default="run",
        help="tests marked 'alone' (they judge timings against a reference client or loop): run them with "
        "the rest (run), leave them out (defer), or run only them (only). scripts/test.sh defers them from "
        "its parallel pass and runs them after it, with nothing else on the machine's cores.",
    )


def pytest_collection_modifyitems(config, items):
    choice = config.getoption("--alone-tests")
    if choice == "run":
        return
    keep = [item for item in items if (item.get_closest_marker("alone") is not None) == (choice == "only")]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


@pytest.fixture(scope="session", autouse=True)
def session_temp_root(tmp_path_factory) -> Iterator[Path]:
    """The test run's temporary files under pytest's own folder (which pytest prunes to the last
    few runs), never the machine's temp root: a context with no artifact root makes a fresh
    folder for each run (``RunContext.artifact_dir``, as ``perfsuite.testing.run_in_process``
    does), and engines and LoadGen make their own. ``tempfile.tempdir`` moves it for this
    process, ``TMPDIR`` for every subprocess a test starts; a test that sets its own TMPDIR
    keeps it. torch.compile's cache stays where torch puts it by default (the machine's temp
    root), so that each run does not compile the CPU tests' models afresh."""
    folder = tmp_path_factory.mktemp("tmp", numbered=False)
    with pytest.MonkeyPatch.context() as patch:
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
            inductor = Path(MACHINE_TEMP_ROOT) / f"torchinductor_{getpass.getuser()}"
            patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        yield folder


def cli_env(folder: Path) -> dict:
    """Environment for CLI subprocesses whose registry, records folder and data live in
    ``folder``: no third-party plugins unless a test adds them. A module-scoped fixture
    (one server or model for many tests) builds it from its own folder."""
    env = dict(os.environ)
    env.update(
        {
            "PERFSUITE_DB": f"sqlite:///{folder / 'registry.db'}",
            "PERFSUITE_RECORDS": str(folder / "records"),
            "XDG_DATA_HOME": str(folder / "data"),
            "PERFSUITE_PLUGINS": "",
            "PYTHONPATH": os.pathsep.join(p for p in [str(REPO), env.get("PYTHONPATH", "")] if p),
            "COLUMNS": "200",
        }
    )
    return env


@pytest.fixture
def perfsuite_env(tmp_path, monkeypatch):
    """Environment for CLI subprocesses: a fresh SQLite registry and records folder, no
    third-party plugins unless a test adds them."""
    env = cli_env(tmp_path)
    for k, v in env.items():
        if k.startswith("PERFSUITE") or k in ("XDG_DATA_HOME",):
            monkeypatch.setenv(k, v)
    return env


def run_cli(env: dict, *args: str, timeout: float = 300, check: bool | None = None) -> subprocess.CompletedProcess:
    """``python -m perfsuite ARGS`` in a real subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check is True:
        assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture
def cli(perfsuite_env):
    def _run(*args: str, **kw) -> subprocess.CompletedProcess:
        return run_cli(perfsuite_env, *args, **kw)

    return _run


@pytest.fixture
def add_plugin(tmp_path, perfsuite_env):
    """Install a throwaway plugin distribution visible to subprocesses: a module plus a
    ``.dist-info`` with a ``perfsuite`` entry point, on PYTHONPATH. Enables it in
    PERFSUITE_PLUGINS."""
    site = tmp_path / "plugin-site"
    site.mkdir(exist_ok=True)
    enabled: list[str] = []

    def _add(name: str, source: str, version: str = "0.1.0") -> None:
        module = f"ps_test_{name}"
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        dist = site / f"perfsuite_test_{name}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: perfsuite-test-{name}\nVersion: {version}\n")
        (dist / "entry_points.txt").write_text(f"[perfsuite]\n{name} = {module}\n")
        enabled.append(name)
        perfsuite_env["PERFSUITE_PLUGINS"] = ",".join(enabled)
        paths = perfsuite_env["PYTHONPATH"].split(os.pathsep)
        if str(site) not in paths:
            perfsuite_env["PYTHONPATH"] = os.pathsep.join([str(site), *paths])

    return _add


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for one test module (``support.browser.launch_chromium``): the browser
    tests of the leaderboard share it, each opening pages of its own."""
    from support.browser import launch_chromium

    yield from launch_chromium()
