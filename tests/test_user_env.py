"""The user's environment is never overridden: the suite's own settings for GPU processes
(NVLink multicast off, NCCL's flight recorder off, graph mixing off under --cuda-graph) apply
only where the user set nothing, every rank gets the user's values unchanged, and the record
says which settings were the suite's (``launch.env``) and which the user's (``launch.user_env``)."""

from __future__ import annotations

import json
import subprocess
import sys

from perfsuite.controls import Controls
from perfsuite.engine import launcher
from perfsuite.engine.environment import collect
from perfsuite.engine.launcher import LaunchOptions, build
from perfsuite.engine.params import resolve
from perfsuite.engine.record import build_record, finalize
from perfsuite.engine.runspec import RunRequest, WorkerResult, now
from perfsuite.plugins import get_host

SUITE_VARIABLES = (*launcher.NVLS_OFF, *launcher.FLIGHT_RECORDER_OFF, *launcher.GRAPH_MIXING_OFF)


def _clean(monkeypatch) -> None:
    for name in SUITE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _worker_sees(env: dict[str, str], names: tuple[str, ...]) -> dict[str, str | None]:
    """What a process started with the launch's environment reads (a real child process)."""
    code = f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {list(names)!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _cuda_record(launch: launcher.Launch, cuda_graph: bool = False) -> dict:
    """The record the runner builds for a CUDA launch (a skipped run: no GPU needed to build it)."""
    entry = get_host().get("collectives.all_reduce")
    req = RunRequest(
        entry,
        resolve(entry.cls, {}, quick=True),
        True,
        Controls(device="cuda", cuda_graph=cuda_graph),
        LaunchOptions(nproc_per_node=2),
    )
    result = WorkerResult(status="skipped", error="built in a test", started_at=now(), finished_at=now())
    return finalize(build_record(req, "ab" * 16, result, launch, collect("cpu", deep=False), {}))


def test_a_users_nccl_nvls_enable_1_is_passed_to_the_ranks_and_recorded_as_the_users(tmp_path, monkeypatch):
    _clean(monkeypatch)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    launch = build(str(tmp_path / "spec.json"), LaunchOptions(nproc_per_node=2), "cuda")
    seen = _worker_sees(launch.env, ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"))
    assert seen == {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    recorded = _cuda_record(launch)["launch"]
    assert recorded["user_env"] == {"NCCL_NVLS_ENABLE": "1"}
    assert "NCCL_NVLS_ENABLE" not in recorded["env"]  # not claimed as the suite's
    assert recorded["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and recorded["env"]["TORCH_FR_BUFFER_SIZE"] == "0"


def test_where_the_user_set_nothing_the_suites_defaults_apply_and_are_recorded_as_the_suites(tmp_path, monkeypatch):
    _clean(monkeypatch)
    launch = build(str(tmp_path / "spec.json"), LaunchOptions(nproc_per_node=2), "cuda", cuda_graph=True)
    assert _worker_sees(launch.env, SUITE_VARIABLES) == {
        **launcher.NVLS_OFF,
        **launcher.FLIGHT_RECORDER_OFF,
        **launcher.GRAPH_MIXING_OFF,
    }
    recorded = _cuda_record(launch, cuda_graph=True)["launch"]
    assert recorded["env"] == {**launcher.NVLS_OFF, **launcher.FLIGHT_RECORDER_OFF, **launcher.GRAPH_MIXING_OFF}
    assert recorded["user_env"] == {}


def test_the_users_older_name_for_the_flight_recorder_is_not_overridden_by_the_newer_one(tmp_path, monkeypatch):
    """torch reads TORCH_FR_BUFFER_SIZE before TORCH_NCCL_TRACE_BUFFER_SIZE: a suite default under
    the new name would silently win over the user's setting under the old one."""
    _clean(monkeypatch)
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    launch = build(str(tmp_path / "spec.json"), LaunchOptions(nproc_per_node=2), "cuda")
    seen = _worker_sees(launch.env, ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"))
    assert seen == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_FR_BUFFER_SIZE": None}
    assert launcher.user_env("cuda") == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}
    assert not set(launcher.FLIGHT_RECORDER_OFF) & set(launcher.suite_env("cuda"))


def test_cpu_runs_get_no_suite_settings_and_keep_the_users(tmp_path, monkeypatch):
    _clean(monkeypatch)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    launch = build(str(tmp_path / "spec.json"), LaunchOptions(nproc_per_node=2), "cpu")
    assert _worker_sees(launch.env, ("NCCL_NVLS_ENABLE", "TORCH_FR_BUFFER_SIZE")) == {
        "NCCL_NVLS_ENABLE": "1",
        "TORCH_FR_BUFFER_SIZE": None,
    }
    assert launcher.suite_env("cpu") == {} and launcher.user_env("cpu") == {}
