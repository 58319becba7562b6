"""The launcher: the commands it builds (local, torchrun one node and several, SLURM tasks),
SLURM's host lists, the environment every GPU process gets, and (perfsuite.processes) the clean-up of process
trees whose members live in sessions of their own (as torchrun's ranks do)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from perfsuite import distributed, processes
from perfsuite.engine import launcher
from perfsuite.engine.launcher import LaunchError, LaunchOptions, build, expand_hostlist

SLURM_VARS = (
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch):
    for v in SLURM_VARS:
        monkeypatch.delenv(v, raising=False)


@pytest.mark.parametrize(
    "text,hosts",
    [
        ("gpu7", ["gpu7"]),
        ("node[01-04],gpu7", ["node01", "node02", "node03", "node04", "gpu7"]),
        ("n[1,3-4,10]", ["n1", "n3", "n4", "n10"]),
        ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
        ("a[9-11],b", ["a9", "a10", "a11", "b"]),
    ],
)
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["node[01-04", "node]1[", "node[a-b]"])
def test_expand_hostlist_rejects_malformed_lists(bad):
    with pytest.raises(LaunchError):
        expand_hostlist(bad)


def test_single_process_is_a_plain_worker(tmp_path):
    spec = str(tmp_path / "spec.json")
    la = build(spec, LaunchOptions(), "cpu")
    assert la.launcher == "local" and la.world_size == 1 and la.records
    assert la.argv == [sys.executable, "-m", "perfsuite.engine.worker", spec]
    assert la.env[processes.SPEC_ENV] == spec and la.env[processes.TAG_ENV] == la.tag


def test_one_node_torchrun_is_standalone_and_gpu_runs_keep_nvlink_multicast_off(tmp_path):
    la = build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=4), "cuda")
    assert la.launcher == "torchrun" and la.world_size == 4 and la.records
    assert la.argv[1:4] == ["-m", "perfsuite.engine.lifeline", "torch.distributed.run"]  # dies with the runner
    assert "--standalone" in la.argv and "--nproc-per-node=4" in la.argv
    assert la.argv[-3:] == ["-m", "perfsuite.engine.worker", str(tmp_path / "s.json")]
    for k, v in launcher.NVLS_OFF.items():
        assert la.env[k] == v
    cpu = build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=4), "cpu")
    assert all(cpu.env.get(k) == os.environ.get(k) for k in launcher.NVLS_OFF)


def test_cuda_graph_runs_turn_nccls_graph_mixing_off_unless_the_user_chose(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_GRAPH_MIXING_SUPPORT", raising=False)
    spec = str(tmp_path / "s.json")
    graph = build(spec, LaunchOptions(nproc_per_node=2), "cuda", cuda_graph=True)
    assert graph.env["NCCL_GRAPH_MIXING_SUPPORT"] == "0"
    assert launcher.suite_env("cuda", cuda_graph=True)["NCCL_GRAPH_MIXING_SUPPORT"] == "0"  # in the record
    eager = build(spec, LaunchOptions(nproc_per_node=2), "cuda")
    assert "NCCL_GRAPH_MIXING_SUPPORT" not in eager.env and "NCCL_GRAPH_MIXING_SUPPORT" not in launcher.suite_env(
        "cuda"
    )
    assert "NCCL_GRAPH_MIXING_SUPPORT" not in launcher.suite_env("cpu", cuda_graph=True)
    monkeypatch.setenv("NCCL_GRAPH_MIXING_SUPPORT", "1")  # the user's setting stands
    assert build(spec, LaunchOptions(nproc_per_node=2), "cuda", cuda_graph=True).env["NCCL_GRAPH_MIXING_SUPPORT"] == "1"
    assert "NCCL_GRAPH_MIXING_SUPPORT" not in launcher.suite_env("cuda", cuda_graph=True)


def test_several_nodes_use_a_static_rendezvous_so_rank_0_is_on_node_0(tmp_path):
    opts = LaunchOptions(nproc_per_node=8, nnodes=2, node_rank=1, rdzv_endpoint="head:29500")
    la = build(str(tmp_path / "s.json"), opts, "cuda")
    assert la.world_size == 16 and la.nnodes == 2 and not la.records
    assert {"--rdzv-backend=static", "--node-rank=1", "--nnodes=2"} <= set(la.argv)
    port = int(la.rdzv_endpoint.rsplit(":", 1)[1])
    assert f"--rdzv-endpoint=head:{port}" in la.argv and port >= 29500
    # the next launch of the same command (next workload) gets the next port
    nxt = build(str(tmp_path / "s.json"), LaunchOptions(8, 2, 0, "head:29500"), "cuda")
    assert nxt.records and nxt.rdzv_endpoint == f"head:{port + 1}"
    assert launcher.endpoint_for_launch("10.0.0.1:29500", 3) == "10.0.0.1:29503"
    with pytest.raises(LaunchError):
        launcher.endpoint_for_launch("head", 0)
    with pytest.raises(LaunchError, match="rdzv-endpoint"):
        build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=8, nnodes=2), "cuda")


def _slurm_task(monkeypatch, procid: int, ntasks: int = 4, nodeid: int = 0) -> None:
    monkeypatch.setenv("SLURM_PROCID", str(procid))
    monkeypatch.setenv("SLURM_NTASKS", str(ntasks))
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", str(ntasks))
    monkeypatch.setenv("SLURM_LOCALID", str(procid % 2))
    monkeypatch.setenv("SLURM_NODEID", str(nodeid))
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "gpu[07-08]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x2)")
    monkeypatch.setenv("SLURM_NNODES", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "123456")
    monkeypatch.setenv("SLURM_STEP_ID", "0")


def test_a_slurm_task_is_one_rank_with_torch_variables_from_slurm(tmp_path, monkeypatch):
    _slurm_task(monkeypatch, procid=3, nodeid=1)
    # The CLI asks for min_world_size ranks per node by default: under srun each task is a rank.
    la = build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=2), "cuda")
    assert la.launcher == "slurm" and la.world_size == 4 and la.nnodes == 2 and not la.records
    assert la.argv == [sys.executable, "-m", "perfsuite.engine.worker", str(tmp_path / "s.json")]
    e = la.env
    assert (e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) == ("3", "4", "1", "2")
    assert e["MASTER_ADDR"] == "gpu07" and e["NCCL_NVLS_ENABLE"] == "0"
    port = int(e["MASTER_PORT"])
    assert launcher.SLURM_PORT_BASE <= port < launcher.SLURM_PORT_BASE + launcher.SLURM_PORT_SPAN + 100


def test_slurm_ports_agree_across_tasks_and_differ_between_launches(monkeypatch):
    _slurm_task(monkeypatch, procid=0)
    first, second = launcher.slurm_port(0), launcher.slurm_port(1)
    _slurm_task(monkeypatch, procid=2, nodeid=1)
    assert launcher.slurm_port(0) == first and second == first + 1
    monkeypatch.setenv("SLURM_JOB_ID", "123457")
    assert launcher.slurm_port(0) != first
    monkeypatch.setenv("MASTER_PORT", "31000")
    assert launcher.slurm_port(2) == 31002


def test_a_batch_script_is_not_a_rank_of_its_job(monkeypatch, tmp_path):
    """sbatch sets SLURM_PROCID=0 and SLURM_NTASKS in the script itself; only srun tasks
    (SLURM_STEP_NUM_TASKS) are ranks."""
    _slurm_task(monkeypatch, procid=0)
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS")
    assert launcher.slurm_world() == 1
    assert build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=2), "cpu").launcher == "torchrun"


def test_several_torchrun_nodes_in_a_slurm_step_take_their_node_rank_from_slurm(monkeypatch, tmp_path):
    _slurm_task(monkeypatch, procid=1, ntasks=2, nodeid=1)
    la = build(str(tmp_path / "s.json"), LaunchOptions(8, 2, 0, "gpu07:29500"), "cuda")
    assert la.launcher == "torchrun" and "--node-rank=1" in la.argv and not la.records


# -- clean-up -------------------------------------------------------------------------------
TREE = r"""
import subprocess, sys, time
# like torch's elastic agent: children in sessions of their own, and a grandchild
kids = [subprocess.Popen([sys.executable, "-c", "import subprocess,sys,time; "
                          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"],
                         start_new_session=True) for _ in range(2)]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(600)
"""


def _wait_for_descendants(pid: int, n: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = psutil.Process(pid).children(recursive=True)
        if len(kids) >= n:
            return kids
        time.sleep(0.1)
    raise AssertionError(f"expected {n} descendants of {pid}")


def test_kill_tree_reaches_ranks_in_their_own_sessions():
    env = dict(os.environ, **{processes.TAG_ENV: "test-" + os.urandom(6).hex()})
    root = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, start_new_session=True, env=env)
    kids = _wait_for_descendants(root.pid, 4)
    assert any(os.getsid(k.pid) != os.getsid(root.pid) for k in kids)
    processes.kill_tree(root.pid)
    root.wait(timeout=10)
    _gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive


def test_kill_tree_finds_tagged_orphans_whose_parent_is_gone(tmp_path):
    """A rank re-parented after its agent was killed is found by the launch tag."""
    tag = "test-" + os.urandom(6).hex()
    env = dict(os.environ, **{processes.TAG_ENV: tag})
    pidfile = tmp_path / "orphan.pid"
    # The parent starts the orphan-to-be and exits at once.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys; p=subprocess.Popen([sys.executable,'-c','import time; "
            f"time.sleep(600)'], start_new_session=True); open({str(pidfile)!r},'w').write(str(p.pid))",
        ],
        env=env,
    )
    parent.wait(timeout=30)
    orphan = psutil.Process(int(pidfile.read_text()))
    assert orphan.is_running()
    processes.kill_tree(parent.pid, tag=tag)  # the parent's pid is gone (or someone else's now)
    orphan.wait(timeout=10)
    assert not orphan.is_running()


def test_kill_tree_leaves_a_reused_pid_alone():
    """A pid that is not (or no longer) a launch's process: untagged, or another launch's."""
    env = dict(os.environ)
    env.pop(processes.TAG_ENV, None)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    try:
        processes.kill_tree(bystander.pid)
        processes.kill_tree(bystander.pid, tag="not-its-tag")
        time.sleep(0.2)
        assert bystander.poll() is None and psutil.Process(bystander.pid).status() != psutil.STATUS_STOPPED
    finally:
        bystander.kill()
        bystander.wait()


# -- what failing and hanging ranks leave behind ------------------------------------------------
def test_rank_errors_are_listed_first_failure_first(tmp_path):
    spec = tmp_path / "spec.json"
    for rank, error in ((3, "RuntimeError: the real cause"), (0, "DistBackendError: peer closed")):
        (tmp_path / f"rank-{rank}.error.json").write_text(json.dumps({"rank": rank, "error": error}))
        time.sleep(0.05)
    later = time.time() + 5
    os.utime(tmp_path / "rank-0.error.json", (later, later))
    assert distributed.read_rank_errors(spec) == [
        "rank 3: RuntimeError: the real cause",
        "rank 0: DistBackendError: peer closed",
    ]


def test_progress_names_the_rank_that_stopped_first(tmp_path, monkeypatch):
    spec = tmp_path / "spec.json"
    monkeypatch.setenv(distributed.SPEC_ENV, str(spec))
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank, phase in ((1, "setup"), (0, "all_reduce 8 B in-place")):
        monkeypatch.setenv("RANK", str(rank))
        distributed.note_progress(phase)
        time.sleep(0.05)
    lines = distributed.read_rank_progress(spec)
    assert lines[0].startswith("rank 1 last at 'setup'") and lines[1].startswith("rank 0 last at 'all_reduce")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    Path(distributed.progress_path(spec, 0)).unlink()
    distributed.note_progress("alone", done=1, total=4)  # a world of one notes its progress too: the runner shows it
    note = distributed.read_progress(spec)
    assert note is not None and (note["phase"], note["done"], note["total"]) == ("alone", 1, 4)


def test_rank_figures_aggregate_as_declared():
    values = [3.0, 1.0, 2.0]  # rank order
    assert [distributed.aggregate(values, how) for how in ("mean", "max", "min", "rank0")] == [2.0, 3.0, 1.0, 3.0]
    with pytest.raises(ValueError, match="unknown aggregation 'median'"):
        distributed.aggregate(values, "median")


def test_gpu_runs_turn_the_nccl_flight_recorder_off_unless_the_user_set_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_NCCL_TRACE_BUFFER_SIZE", raising=False)
    monkeypatch.delenv("TORCH_FR_BUFFER_SIZE", raising=False)
    la = build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=2), "cuda")
    assert la.env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "0" and la.env["TORCH_FR_BUFFER_SIZE"] == "0"
    assert launcher.suite_env("cuda")["TORCH_FR_BUFFER_SIZE"] == "0"
    assert launcher.suite_env("cpu") == {}
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    la = build(str(tmp_path / "s.json"), LaunchOptions(nproc_per_node=2), "cuda")
    assert la.env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"  # the user's choice stands, and is not claimed
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in launcher.suite_env("cuda")
