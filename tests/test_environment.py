"""The environment fingerprint: the suite's own commit, in a checkout and in a copy whose
git history did not travel (as on a GPU host), and the measured device's identity."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

from tests.conftest import REPO


def _env_json(cwd, env) -> dict:
    proc = subprocess.run([sys.executable, "-m", "suite", "env", "--json", "--device", "cpu"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
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
    copy = tmp_path / "copy"
    for pkg in ("suite", "registry", "workloads", "schemas"):
        shutil.copytree(REPO / pkg, copy / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / ".git").mkdir()  # a partial .git, as a copy of the tree may carry: git fails there
    env = dict(perfsuite_env, PYTHONPATH=str(copy), PERFSUITE_GIT_COMMIT="a" * 40, PERFSUITE_GIT_DIRTY="0")
    assert _env_json(copy, env)["suite"] == {"version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False}
    del env["PERFSUITE_GIT_COMMIT"]
    assert _env_json(copy, env)["suite"]["git_commit"] is None


def test_gpu_uuids_match_across_torch_and_nvml_spellings():
    from suite.nvml import same_uuid

    assert same_uuid("18ba22b3-baa9", "GPU-18ba22b3-baa9") and same_uuid("GPU-18ba22b3-baa9", "18ba22b3-baa9")
    assert not same_uuid("18ba22b3-baa9", "GPU-18ba22b3-baa8")
    assert not same_uuid("", "GPU-")  # torch without a UUID matches no GPU


def test_the_users_nccl_settings_are_part_of_the_fingerprint(monkeypatch):
    from suite import environment

    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    monkeypatch.setenv("NCCLX_NOT_OURS", "1")
    got = environment.collect("cpu", deep=False)["comm_env"]
    assert got["NCCL_ALGO"] == "Ring" and got["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert "NCCLX_NOT_OURS" not in got
