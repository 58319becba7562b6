"""The environment fingerprint: the suite's own commit, in a checkout and in a copy whose
git history did not travel (as on a GPU host), and the measured device's identity."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from tests.conftest import REPO


def _env_json(cwd, env) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", "env", "--json", "--device", "cpu"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_checkout_commit_and_measured_device(perfsuite_env):
    env = _env_json(REPO, perfsuite_env)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert env["suite"]["git_commit"] == head and isinstance(env["suite"]["git_dirty"], bool)
    device = env["measured_device"]
    assert device["kind"] == "cpu" and device["uuid"] is None and len(device["key"]) == 32
    assert device["name"] == env["cpu"]["model"]
    assert _env_json(REPO, perfsuite_env)["measured_device"]["key"] == device["key"]  # stable identity


def test_copy_without_history_takes_the_stated_commit(perfsuite_env, tmp_path):
    """A copy of the tree installed where no git history travelled with it (as on a GPU host)."""
    copy = tmp_path / "copy"
    for pkg in ("suite", "registry", "workloads", "schemas"):
        shutil.copytree(REPO / pkg, copy / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")
    shutil.copy2(REPO / "README.md", copy / "README.md")
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "--target",
            str(site),
            str(copy),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (site / ".git").mkdir()  # a partial .git, as a copy of the tree may carry: git fails there
    env = dict(perfsuite_env, PYTHONPATH=str(site), PERFSUITE_GIT_COMMIT="a" * 40, PERFSUITE_GIT_DIRTY="0")
    assert _env_json(tmp_path, env)["suite"] == {"version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False}
    del env["PERFSUITE_GIT_COMMIT"]
    assert _env_json(tmp_path, env)["suite"]["git_commit"] is None
