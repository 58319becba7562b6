"""perfsuite on SLURM: the sbatch scripts it writes, and jobs it submits, follows and collects
on a real one-node SLURM cluster (``slurm_cluster``: Debian's slurm-wlm and munge, started
in a scratch folder for this module and stopped after it), on the CPU.

What one host cannot give (several nodes, GPUs, pyxis) is tested through the script the
job would run (``--dry-run``) and the scheduler's own variables.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import psutil
import pytest
from conftest import run_cli
from support import slurm_cluster
from support.slurm_cluster import stored_records, submitted

from perfsuite.engine import launcher
from perfsuite.engine.plan import load
from perfsuite.engine.slurm.script import JobOptions

# one all_reduce of 8-256 B, 2 calls a loop: the collective over gloo, in seconds
SMALL_ALL_REDUCE = ["collectives.all_reduce", "--quick", "--device", "cpu", "-p", "max_bytes=256", "-p", "iters=2"]
# kernels.memory's copy of 1 MiB buffers on the CPU, as long as --min-time says
SMALL_COPY = ["kernels.memory", "--quick", "--device", "cpu", "-p", "size_bytes=1M", "-p", "ops=copy"]
JOB_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def cluster():
    why = slurm_cluster.unavailable()
    if why:
        pytest.skip(why)
    started = slurm_cluster.start()
    yield started
    daemons = [d.pid for d in started.daemons.values()]
    started.stop()
    assert not [pid for pid in daemons if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


@pytest.fixture
def env(perfsuite_env, cluster):
    return cluster.env(perfsuite_env)


def _job_processes(job_id: str) -> list[str]:
    """Processes still running for the job (its tasks carry SLURM_JOB_ID)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.environ().get("SLURM_JOB_ID") == job_id:
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # gone meanwhile, or not ours to read
    return found


# -- the script (no cluster) ---------------------------------------------------------------------
def test_dry_run_of_two_nodes_of_eight_gpus_in_a_container_has_the_shape_of_mlperf_run_sub(cli, tmp_path):
    """MLPerf's run.sub (NVIDIA's training submissions): #SBATCH --exclusive with nodes, time,
    partition and account; the first node from 'scontrol show hostnames'; the image imported
    once per node (srun --ntasks=$SLURM_JOB_NUM_NODES --container-image --container-name ...
    true); the benchmark as one srun step of one task per GPU using the container by name
    with its mounts. The script is printed, not submitted: nothing is written."""
    proc = cli(
        "run",
        "collectives.all_reduce",
        "-p",
        "max_bytes=1G",
        "--slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--partition",
        "batch",
        "--account",
        "perf",
        "--qos",
        "high",
        "--time",
        "01:00:00",
        "--exclusive",
        "--container-image",
        "nvcr.io#nvidia/pytorch:25.01-py3",
        "--container-mounts",
        "/lustre/data:/data",
        "--job-dir",
        str(tmp_path / "jobs"),
        "--dry-run",
        check=True,
    )
    script = proc.stdout
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]
    assert directives[:11] == [
        "--job-name=perfsuite",
        "--nodes=2",
        "--ntasks-per-node=8",
        "--gpus-per-node=8",
        "--partition=batch",
        "--account=perf",
        "--qos=high",
        "--time=01:00:00",
        "--exclusive",
        "--export=ALL",
        "--no-requeue",
    ]
    assert not any(d.startswith("--array") for d in directives)
    assert 'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"' in script
    assert (
        'srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 '
        "--container-image='nvcr.io#nvidia/pytorch:25.01-py3' --container-name=\"$container\" true"
    ) in script
    (step,) = [line for line in script.splitlines() if line.startswith("srun --nodes=")]
    folder = directives[-1].removeprefix("--output=").removesuffix("/logs/%j.out")
    assert step == (
        'srun --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 --container-name="$container" '
        f"--container-mounts=/lustre/data:/data,{folder}:{folder} "
        "perfsuite run collectives.all_reduce --param max_bytes=1G --device cuda"
    )
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0  # it parses as bash
    assert not (tmp_path / "jobs").exists()


def test_a_crosscheck_job_runs_nccl_tests_under_srun_one_process_per_gpu(cli, tmp_path):
    proc = cli(
        "crosscheck",
        "collectives.all_reduce",
        "--slurm",
        "--gpus-per-node",
        "8",
        "--mpi",
        "pmi2",
        "--job-dir",
        str(tmp_path),
        "--dry-run",
        check=True,
    )
    (step,) = [line for line in proc.stdout.splitlines() if line.startswith("srun --nodes=")]
    assert step.startswith("srun --nodes=1 --ntasks-per-node=8 --kill-on-bad-exit=1 ")
    assert step.endswith(
        " crosscheck collectives.all_reduce --device cuda "
        "--mpirun 'srun --overlap --mpi=pmi2 --nodes=1 --gpus-per-node=8'"
    )


def test_slurm_options_without_slurm_are_a_usage_error(cli):
    proc = cli("run", "kernels.memory", "--partition", "gpu")
    assert proc.returncode == 2
    assert "--partition needs --slurm" in proc.stderr


def test_torchrun_options_are_refused_under_slurm(cli, tmp_path):
    proc = cli("run", "collectives.all_reduce", "--slurm", "--nproc-per-node", "2", "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "Error: --nproc-per-node is for torchrun here; under --slurm every task is one rank "
        "(give --nodes, --ntasks-per-node or --ntasks)"
    ]


def test_runs_on_cuda_need_gpus_in_the_job(cli):
    proc = cli("run", "kernels.gemm", "--device", "cuda", "--slurm", "--dry-run")
    assert proc.returncode == 2
    assert "--gpus-per-node" in proc.stderr


def test_a_job_perfsuite_did_not_submit_is_one_line(cli, tmp_path):
    proc = cli("slurm", "status", "424242", "--job-dir", str(tmp_path))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == f"Error: no perfsuite job 424242 under {tmp_path} (jobs submitted with --job-dir "
        "elsewhere: give the same --job-dir)"
    )


# -- plans as job arrays (no cluster) ----------------------------------------------------------------
def _steps(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip().startswith("srun --nodes=")]


def test_each_run_of_a_plan_is_one_index_of_a_job_array(cli, tmp_path):
    """run --plan --slurm: one array index per [[run]], each its own command (crosscheck where
    the entry is one); the plan's nproc_per_node is the index's tasks per node and its largest
    the job's GPUs per node; options given on the command line apply to every entry."""
    plan = tmp_path / "p.toml"
    plan.write_text(
        'name = "p"\ndescription = "three"\n[defaults]\ndevice = "cuda"\nnproc_per_node = 8\n'
        '[[run]]\nworkloads = ["collectives.all_reduce"]\nparams = { max_bytes = "1G" }\n'
        '[[run]]\nworkloads = ["training.gpt"]\nnproc_per_node = 2\nrepeat = 3\ncuda_graph = true\n'
        '[[run]]\nworkloads = ["collectives.all_gather"]\ncrosscheck = true\nrounds = 2\n'
    )
    proc = cli(
        "run", "--plan", str(plan), "--warmup", "5", "--slurm", "--job-dir", str(tmp_path), "--dry-run", check=True
    )
    script = proc.stdout
    assert "#SBATCH --gpus-per-node=8" in script
    assert "#SBATCH --ntasks-per-node=8" in script
    assert "#SBATCH --array=0-2" in script
    first, second, third = (step.split(" -m perfsuite ", 1) for step in _steps(script))
    assert first[0].startswith("srun --nodes=1 --ntasks-per-node=8 ")
    assert first[1] == "run collectives.all_reduce --param max_bytes=1G --device cuda --warmup 5"
    assert second[0].startswith("srun --nodes=1 --ntasks-per-node=2 ")
    assert second[1] == "run training.gpt --device cuda --repeat 3 --warmup 5 --cuda-graph"
    assert third[1] == (
        "crosscheck collectives.all_gather --rounds 2 --device cuda --warmup 5 "
        "--mpirun 'srun --overlap --mpi=pmix --nodes=1 --gpus-per-node=8'"
    )


def test_a_plan_entry_naming_a_job_option_is_refused(cli, tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text('[[run]]\nworkloads = ["kernels.gemm"]\npartition = "gpu"\n')
    proc = cli("run", "--plan", str(plan), "--slurm", "--dry-run")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("Error: plan ")
    assert line.endswith("run 1: partition cannot be set in a plan: give --partition on the command line")


@pytest.mark.parametrize(
    ("plan", "gpus"),
    [
        ("scaleout-collectives-x4", 4),
        ("scaleout-collectives-x8", 8),
        ("scaleout-training-x4", 4),
        ("scaleout-training-x8", 8),
    ],
)
def test_the_shipped_multi_gpu_plans_make_a_job_array_every_command_of_which_parses(cli, tmp_path, plan, gpus):
    """Each [[run]] is checked as the job would check it (options, workloads, parameters)."""
    proc = cli("run", "--plan", plan, "--slurm", "--exclusive", "--job-dir", str(tmp_path), "--dry-run", check=True)
    script = proc.stdout
    assert f"#SBATCH --gpus-per-node={gpus}" in script
    assert "#SBATCH --exclusive" in script
    runs = len(load(plan, lambda option, value: value).runs)
    assert f"#SBATCH --array=0-{runs - 1}" in script
    steps = _steps(script)
    assert len(steps) == runs
    assert all("--device cuda" in s for s in steps)


# -- the launcher in a job (no cluster) ----------------------------------------------------------------
def test_the_record_states_the_job_from_slurms_variables(monkeypatch):
    for key, value in {
        "SLURM_JOB_ID": "1234",
        "SLURM_ARRAY_JOB_ID": "1230",
        "SLURM_ARRAY_TASK_ID": "4",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_NODELIST": "gpu[07-08]",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
        "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
        "SLURM_TASKS_PER_NODE": "8(x2)",
        "SLURM_JOB_PARTITION": "batch",
        "SLURM_CLUSTER_NAME": "eos",
        launcher.SLURM_VERSION_ENV: "slurm 23.11.4",
    }.items():
        monkeypatch.setenv(key, value)
    launcher.slurm_version.cache_clear()
    try:
        assert launcher.slurm_job() == {
            "job_id": "1234",
            "array_job_id": "1230",
            "array_index": 4,
            "step_id": "0",
            "nodelist": ["gpu07", "gpu08"],
            "tasks_per_node": [8, 8],
            "partition": "batch",
            "cluster": "eos",
            "version": "23.11.4",
        }
        monkeypatch.delenv("SLURM_STEP_ID")  # the batch script itself, outside any step: the job's nodes
        monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-09]")
        monkeypatch.setenv("SLURM_TASKS_PER_NODE", "8(x3)")
        job = launcher.slurm_job()
        assert job["step_id"] is None
        assert job["nodelist"] == ["gpu07", "gpu08", "gpu09"]
        assert job["tasks_per_node"] == [8, 8, 8]
        monkeypatch.delenv("SLURM_JOB_ID")
        assert launcher.slurm_job() is None
    finally:
        launcher.slurm_version.cache_clear()


# -- jobs on the real cluster ------------------------------------------------------------------------
@pytest.mark.slow
def test_run_slurm_stores_a_record_naming_the_job_and_two_ranks_over_gloo(env, cluster):
    proc = run_cli(env, "run", *SMALL_ALL_REDUCE, "--slurm", "--ntasks", "2", "--wait", timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    job_id, folder = submitted(proc)
    assert f"job {job_id} [0] COMPLETED" in proc.stderr
    assert "collectives.all_reduce" in proc.stdout  # the summary table
    (record,) = stored_records(env)
    launch = record["launch"]
    assert record["status"] == "success"
    assert record["verification"]["status"] == "passed"
    assert launch["launcher"] == "slurm"
    assert launch["world_size"] == 2
    assert launch["backend"] == "gloo"
    version = cluster.client("scontrol", "--version").stdout.split()[-1]
    assert launch["slurm"] == {
        "job_id": job_id,
        "array_job_id": None,
        "array_index": None,
        "step_id": "0",
        "nodelist": [cluster.node],
        "tasks_per_node": [2],
        "partition": "debug",
        "cluster": "perfsuite-test",
        "version": version,
    }
    assert (folder / "job.sbatch").read_text().splitlines()[0] == "#!/bin/bash"
    assert sorted(p.name for p in (folder / "records" / "0").glob("*.json")) == [f"{record['run_id']}.json"]
    status = json.loads(run_cli(env, "slurm", "status", job_id, "--json", check=True).stdout)
    (task,) = status["tasks"]
    assert task["state"].startswith("COMPLETED")
    assert task["stored"] == task["expected"] == 1


@pytest.mark.slow
def test_a_plan_submitted_as_a_job_array_stores_every_run(env, tmp_path, pg_registry):
    """Two [[run]]s, two array indices at once (one CPU each); the job's ranks store straight
    into the registry named (PostgreSQL where its server is installed, else SQLite files
    beside the records that 'wait' loads)."""
    if pg_registry:
        env["PERFSUITE_DB"] = pg_registry
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'name = "two"\n[defaults]\ndevice = "cpu"\nquick = true\n'
        '[[run]]\nworkloads = ["kernels.memory"]\nparams = { size_bytes = "1M", ops = "copy" }\n'
        '[[run]]\nworkloads = ["collectives.copy_bandwidth"]\n'
    )
    proc = run_cli(env, "run", "--plan", str(plan), "--slurm", "--wait", timeout=JOB_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    job_id, folder = submitted(proc)
    assert "#SBATCH --array=0-1" in (folder / "job.sbatch").read_text()
    assert ("SQLite" in proc.stderr) is not bool(pg_registry)  # the one line where the nodes may not reach it
    by_index = {r["launch"]["slurm"]["array_index"]: r for r in stored_records(env)}
    assert sorted(by_index) == [0, 1]
    assert by_index[0]["workload"]["name"] == "kernels.memory"
    assert by_index[0]["status"] == "success"
    # the run the CPU cannot make is recorded as skipped, once, with its reason
    assert by_index[1]["workload"]["name"] == "collectives.copy_bandwidth"
    assert by_index[1]["status"] == "skipped"
    assert {r["launch"]["slurm"]["array_job_id"] for r in by_index.values()} == {job_id}


@pytest.fixture
def pg_registry():
    """A PostgreSQL registry URL where the server and driver are installed, else None."""
    from support import pg_cluster

    if pg_cluster.server_bin() is None or find_spec("psycopg") is None:
        yield None
        return
    server = pg_cluster.start()
    try:
        yield server.url()
    finally:
        server.remove()


def _three_runs_one_finished(env: dict) -> tuple[str, Path]:
    """A job of three runs of a few seconds each, once the first has stored its record and
    the second is under way: (job id, job folder)."""
    proc = run_cli(env, "run", *SMALL_COPY, "--min-time", "2", "--repeat", "3", "--slurm", timeout=60)
    assert proc.returncode == 0, proc.stderr
    job_id, folder = submitted(proc)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not list((folder / "records" / "0").glob("*.json")):
        assert time.monotonic() < deadline, (folder / "logs" / f"{job_id}.out").read_text()
        time.sleep(0.3)
    assert _job_processes(job_id)
    return job_id, folder


def _only_the_first_run_stored(env: dict, job_id: str) -> None:
    (record,) = stored_records(env)
    assert record["status"] == "success"
    assert record["launch"]["slurm"]["job_id"] == job_id


@pytest.mark.slow
def test_cancel_mid_run_keeps_finished_records_names_the_rest_and_leaves_no_process(env):
    job_id, _ = _three_runs_one_finished(env)
    cancelled = run_cli(env, "slurm", "cancel", job_id, timeout=JOB_TIMEOUT_S)
    assert cancelled.returncode == 1, cancelled.stderr
    assert _job_processes(job_id) == []
    (line,) = [s for s in cancelled.stderr.splitlines() if s.startswith("Not finished: ")]
    assert line.startswith(f"Not finished: job {job_id} [0] CANCELLED")
    assert "kernels.memory (1 of 3 runs stored)" in line
    assert "not finished: kernels.memory (repeat 2/3); not run: kernels.memory (repeat 3/3)" in line
    _only_the_first_run_stored(env, job_id)


@pytest.mark.slow
def test_a_job_whose_node_fails_keeps_finished_records_and_names_the_rest(env, cluster):
    """The node marked DOWN mid-run (as the controller does when a node stops answering):
    the job ends NODE_FAIL, is not requeued, and its processes are killed by slurmd."""
    job_id, _ = _three_runs_one_finished(env)
    down = cluster.client("scontrol", "update", f"nodename={cluster.node}", "state=down", "reason=perfsuite-test")
    assert down.returncode == 0, down.stderr
    try:
        waited = run_cli(env, "slurm", "wait", job_id, timeout=JOB_TIMEOUT_S)
    finally:
        cluster.client("scontrol", "update", f"nodename={cluster.node}", "state=resume")  # if not back already
        cluster.wait_until_idle()
    assert waited.returncode == 1, waited.stderr
    (line,) = [s for s in waited.stderr.splitlines() if s.startswith("Not finished: ")]
    assert line.startswith(f"Not finished: job {job_id} [0] NODE_FAIL")
    assert "kernels.memory (1 of 3 runs stored)" in line
    _only_the_first_run_stored(env, job_id)
    deadline = time.monotonic() + 30  # slurmd kills the steps of a job its controller gave up
    while _job_processes(job_id):
        assert time.monotonic() < deadline, _job_processes(job_id)
        time.sleep(0.3)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (["--partition", "nope"], "sbatch: Batch job submission failed: Invalid partition name specified"),
        (
            ["--time", "2:00:00"],
            "sbatch: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)",
        ),
        (
            ["--ntasks", str(slurm_cluster.NODE_CPUS + 1)],
            "sbatch: Batch job submission failed: More processors requested than permitted",
        ),
        (["no-sbatch"], "sbatch not found on PATH"),
        (
            ["--container-image", "nvcr.io#nvidia/pytorch:25.01-py3"],
            "--container-image: this cluster's srun has no --container-image (the pyxis plugin is not installed)",
        ),
    ],
)
def test_a_refused_job_is_the_schedulers_answer_in_one_line_exit_2_and_nothing_kept(env, tmp_path, args, answer):
    if args == ["no-sbatch"]:
        env["PATH"] = str(tmp_path / "empty")  # SLURM's clients are not on it
        args = []
    jobs = tmp_path / "jobs"
    proc = run_cli(env, "run", *SMALL_COPY, "--slurm", *args, "--job-dir", str(jobs), timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"Error: {answer}")
    assert not jobs.exists() or not any(jobs.iterdir())
    records = Path(env["PERFSUITE_RECORDS"])
    assert not records.exists() or not any(records.iterdir())
    assert not Path(env["PERFSUITE_DB"].removeprefix("sqlite:///")).exists()  # the registry never opened


@pytest.mark.slow
def test_the_crosscheck_launcher_starts_one_process_per_task_from_inside_a_step(cluster):
    """The --mpirun a cross-check gets in a job, run as rank 0 of a two-task step runs it
    (with the MPI plugin this cluster offers): nccl-tests' ranks are a step of their own."""
    mpirun = JobOptions(mpi="pmi2").nccl_tests_launcher()
    probe = f'{sys.executable} -c \'import os; print(os.environ["SLURM_PROCID"], os.environ["SLURM_STEP_ID"])\''
    inner = f'if [ "$SLURM_PROCID" = 0 ]; then {mpirun} -n 2 {probe}; fi'
    done = cluster.client("srun", "--ntasks=2", "bash", "-c", inner, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split("\n")[:-1]) == ["0 1", "1 1"]  # ranks 0 and 1 of step 1, beside step 0
