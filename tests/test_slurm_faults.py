"""perfsuite's SLURM runner when its cluster misbehaves.

First with scheduler commands that answer badly: fake ``sbatch``/``squeue``/``scancel``
scripts, written into the test's folder and put first on PATH, that print bytes that are
not UTF-8 or 50 MB: every command says so in one line and a non-zero exit, never a
traceback. Then on the real one-node cluster (``slurm_cluster``): a node whose slurmd is
killed mid-job, a controller that stops while ``slurm wait`` watches, a rank killed in the
middle of a collective, and a sweep ended by its time limit and resubmitted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import run_cli
from support import slurm_cluster
from support.slurm_cluster import stored_records, submitted

SMALL_COPY = ["kernels.memory", "--quick", "--device", "cpu", "-p", "size_bytes=1M", "-p", "ops=copy"]
# Runs whose --min-time is what they last: a 64 MiB copy takes long enough a call that the
# timed calls reach their minimum time before the 10,000-call cap on any machine.
TIMED_COPY = ["kernels.memory", "--quick", "--device", "cpu", "-p", "size_bytes=64M", "-p", "ops=copy"]
JOB_TIMEOUT_S = 240
FIFTY_MB = 50_000_000
# The longest line a bad answer may come back as: one line a terminal can show.
LINE_BOUND = 1000
STEP_WATCH_ENV = "PERFSUITE_SLURM_STEP_WATCH_S"


# -- scheduler commands that answer badly (no cluster) --------------------------------------------
def _fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


NOT_UTF8 = r"printf 'sbatch: error: \377\376 bad \200 bytes\n' >&2; exit 1"
HUGE_LINE = f"head -c {FIFTY_MB} /dev/zero | tr '\\0' x >&2; exit 1"
HUGE_STDOUT = f"head -c {FIFTY_MB} /dev/zero | tr '\\0' x; exit 0"
HUGE_LINES = f"yes 'not|a|job' | head -c {FIFTY_MB}; exit 0"


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The command's one error line; asserts there is no traceback and no other error line."""
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, proc.stderr[-4000:]
    assert all(len(line) <= LINE_BOUND for line in proc.stderr.splitlines()), [
        len(line) for line in proc.stderr.splitlines()
    ]
    return errors[0]


@pytest.fixture
def fake_env(perfsuite_env, tmp_path):
    """The test's environment with a folder of fake scheduler commands first on PATH."""
    env = dict(perfsuite_env)
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    return env


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (NOT_UTF8, "sbatch: \ufffd\ufffd bad \ufffd bytes"),
        (HUGE_LINE, "sbatch: xxxx"),
        (HUGE_STDOUT, "sbatch: no job id in its answer"),
    ],
    ids=["not-utf8", "50MB-error", "50MB-answer"],
)
def test_sbatch_answering_badly_is_one_line_and_exit_2(fake_env, tmp_path, body, said):
    _fake(tmp_path / "bin", "sbatch", body)
    jobs = tmp_path / "jobs"
    proc = run_cli(fake_env, "run", *SMALL_COPY, "--slurm", "--job-dir", str(jobs), timeout=120)
    line = _one_line_error(proc)
    assert proc.returncode == 2
    assert line.startswith(f"Error: {said}")
    assert not jobs.exists() or not any(jobs.iterdir())  # a refused job leaves nothing behind


def _submitted_job(env: dict, tmp_path: Path) -> str:
    """A job folder as `run --slurm` leaves it, from an sbatch that answers job 4242."""
    _fake(tmp_path / "bin", "sbatch", "echo 4242")
    proc = run_cli(env, "run", *SMALL_COPY, "--slurm", "--job-dir", str(tmp_path / "jobs"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return "4242"


@pytest.mark.parametrize(
    "body",
    [NOT_UTF8.replace("sbatch", "squeue"), HUGE_LINE, HUGE_STDOUT, HUGE_LINES],
    ids=["not-utf8", "50MB-error", "50MB-answer", "50MB-of-lines"],
)
@pytest.mark.parametrize("command", ["status", "wait", "cancel"])
def test_squeue_and_scancel_answering_badly_are_one_line_never_a_traceback(fake_env, tmp_path, body, command):
    """status and wait retry a controller that does not answer for --retry-for seconds, then
    stop with the controller's own exit code (3); cancel's scancel answers badly as well."""
    job_id = _submitted_job(fake_env, tmp_path)
    _fake(tmp_path / "bin", "squeue", body)
    _fake(tmp_path / "bin", "sacct", "exit 1")
    args = ["--job-dir", str(tmp_path / "jobs")]
    if command == "cancel":
        _fake(tmp_path / "bin", "scancel", body.replace("squeue", "scancel"))
        proc = run_cli(fake_env, "slurm", "cancel", job_id, *args, "--retry-for", "2", timeout=120)
        line = _one_line_error(proc)
        # scancel refusing is exit 2; one that answered 0 leaves the watch to a silent squeue: exit 3
        refused = body.endswith("exit 1")
        assert proc.returncode == (2 if refused else 3), proc.stderr[-2000:]
        assert line.startswith("Error: scancel: " if refused else "Error: squeue: "), line
        return
    proc = run_cli(fake_env, "slurm", command, job_id, *args, "--retry-for", "2", timeout=120)
    line = _one_line_error(proc)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "squeue" in line
    assert f"perfsuite slurm wait {job_id} --job-dir {tmp_path / 'jobs'}" in proc.stderr  # how to watch again


def test_resubmit_refuses_a_job_that_has_not_ended_and_reruns_what_an_ended_one_did_not_store(fake_env, tmp_path):
    """From what squeue says: a running job is refused (exit 2, one line); a job that ended
    with nothing stored gets the same command again, printed with --dry-run."""
    job_id = _submitted_job(fake_env, tmp_path)
    jobs = tmp_path / "jobs"
    (folder,) = jobs.iterdir()
    (step,) = [line for line in (folder / "job.sbatch").read_text().splitlines() if line.startswith("srun ")]
    _fake(tmp_path / "bin", "squeue", f"echo '{job_id}|{job_id}|N/A|RUNNING|None|vm'")
    running = run_cli(fake_env, "slurm", "resubmit", job_id, "--job-dir", str(jobs), timeout=120)
    assert running.returncode == 2
    assert running.stderr.strip().splitlines() == [
        f"Error: job {job_id} has not ended (RUNNING on vm): resubmit it once it has"
    ]
    _fake(tmp_path / "bin", "squeue", f"echo '{job_id}|{job_id}|N/A|TIMEOUT|TimeLimit|vm'")
    again = run_cli(fake_env, "slurm", "resubmit", job_id, "--job-dir", str(jobs), "--time", "2:00:00", "--dry-run")
    assert again.returncode == 0, again.stderr
    assert "#SBATCH --time=2:00:00" in again.stdout
    (rerun,) = [line for line in again.stdout.splitlines() if line.startswith("srun ")]
    assert rerun.split(" -m perfsuite ")[1] == step.split(" -m perfsuite ")[1]
    assert len(list(jobs.iterdir())) == 1  # a dry run keeps nothing


# -- the real cluster ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    why = slurm_cluster.unavailable()
    if why:
        pytest.skip(why)
    started = slurm_cluster.start(prefix="perfsuite-slurm-faults-")
    yield started
    started.stop()


@pytest.fixture
def env(perfsuite_env, cluster):
    env = cluster.env(perfsuite_env)
    env[STEP_WATCH_ENV] = "1"  # each rank asks the controller for its step every second
    return env


def _measuring(job_id: str) -> list[str]:
    """perfsuite's processes still running for the job (each carries SLURM_JOB_ID)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if "perfsuite" in cmdline and proc.environ().get("SLURM_JOB_ID") == job_id:
                found.append(f"{proc.pid} {cmdline}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _job_files(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "records").glob("*/*.json"))


def _first_record(env: dict, *args: str) -> tuple[str, Path]:
    """Submit ``run ARGS --slurm``; (job id, folder) once its first record has landed."""
    proc = run_cli(env, "run", *args, "--slurm", timeout=60)
    assert proc.returncode == 0, proc.stderr
    job_id, folder = submitted(proc)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not _job_files(folder):
        assert time.monotonic() < deadline, list((folder / "logs").glob("*"))
        time.sleep(0.3)
    return job_id, folder


@pytest.mark.slow
def test_a_node_whose_slurmd_is_killed_mid_job_has_its_ranks_fenced_and_nothing_lands_after_wait(env, cluster):
    """slurmd SIGKILLed: the controller declares the node down and the job NODE_FAIL, but
    nothing on the node kills the job's processes. Each rank's step-watch sees its step gone
    and ends them; `wait` returns only once rank 0 has stopped, so no record lands later."""
    job_id, folder = _first_record(env, *TIMED_COPY, "--min-time", "2", "--repeat", "8")
    cluster.kill("slurmd")
    try:
        waited = run_cli(env, "slurm", "wait", job_id, timeout=JOB_TIMEOUT_S)
        at_return = _job_files(folder)
        left = _measuring(job_id)
        time.sleep(10)  # two more runs would land in this time had the ranks gone on
        later = _job_files(folder)
    finally:
        cluster.restart("slurmd")
        cluster.wait_until_idle()
    assert waited.returncode == 1, waited.stderr
    assert f"job {job_id} [0] NODE_FAIL" in waited.stderr
    assert left == []
    assert later == at_return
    assert 1 <= len(at_return) < 8
    assert sorted(f"{r['run_id']}.json" for r in stored_records(env)) == at_return  # wait stored each


@pytest.mark.slow
def test_wait_outlasts_a_controller_outage_and_collects_when_it_returns(env, cluster, tmp_path):
    """slurmctld stopped mid-job: a `wait` whose retry window is shorter than the outage
    stops with exit 3 and the command that resumes watching; that command, run while the
    controller is still down, retries until it returns and then collects every run."""
    job_id, folder = _first_record(env, *TIMED_COPY, "--min-time", "2", "--repeat", "3")
    cluster.kill("slurmctld", signal.SIGTERM)
    log = tmp_path / "resumed.err"
    try:
        short = run_cli(env, "slurm", "wait", job_id, "--retry-for", "3", timeout=120)
        assert short.returncode == 3, short.stderr
        (resume,) = [line for line in short.stderr.splitlines() if "perfsuite slurm wait" in line]
        argv = resume[resume.index("perfsuite slurm wait") :].split()[1:]
        with open(log, "wb") as err_file:
            resumed = subprocess.Popen(
                [sys.executable, "-m", "perfsuite", *argv, "--retry-for", "120"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err_file,
            )
        deadline = time.monotonic() + 120  # the outage goes on until the resumed wait has met it
        while "retrying" not in log.read_text(errors="replace"):
            assert resumed.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.3)
    finally:
        cluster.restart("slurmctld")
    resumed.wait(timeout=JOB_TIMEOUT_S)
    err = log.read_text(errors="replace")
    assert resumed.returncode == 0, err
    assert "the scheduler answers again" in err
    assert f"job {job_id} [0] COMPLETED" in err
    assert len(stored_records(env)) == 3
    assert len(_job_files(folder)) == 3


def _rank_worker(job_id: str, rank: str) -> psutil.Process | None:
    """The measuring process of one rank of the job, once it has joined its process group."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            environ = proc.environ()
            if (
                environ.get("SLURM_JOB_ID") == job_id
                and environ.get("RANK") == rank
                and "perfsuite.engine.worker" in " ".join(proc.info["cmdline"] or [])
            ):
                note = Path(environ["PERFSUITE_SPEC"]).parent / f"rank-{rank}.progress.json"
                if note.exists() and "joining" not in json.loads(note.read_text())["phase"]:
                    return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError, ValueError):
            continue
    return None


@pytest.mark.slow
def test_a_rank_killed_mid_collective_is_named_in_the_record_and_the_summary(env):
    """Two ranks over gloo; rank 1's measuring process SIGKILLed mid-loop. Rank 0 only sees a
    reset connection; the record and `wait` name rank 1 and its signal."""
    args = ["collectives.all_reduce", "--device", "cpu", "-p", "max_bytes=256", "--min-time", "60"]
    proc = run_cli(env, "run", *args, "--slurm", "--ntasks", "2", timeout=60)
    assert proc.returncode == 0, proc.stderr
    job_id, _ = submitted(proc)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while (worker := _rank_worker(job_id, "1")) is None:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    worker.send_signal(signal.SIGKILL)
    waited = run_cli(env, "slurm", "wait", job_id, timeout=JOB_TIMEOUT_S)
    assert waited.returncode == 1, waited.stderr
    (record,) = stored_records(env)
    assert record["status"] == "failed"
    assert record["error"].startswith("rank 1 died (SIGKILL)"), record["error"]
    assert "rank 1 died (SIGKILL)" in waited.stderr


@pytest.mark.slow
def test_a_sweep_cut_by_its_time_limit_is_resubmitted_for_its_unfinished_runs_only(env, tmp_path):
    """A plan of two indices under a one-minute limit: index 0 finishes, index 1 (eight runs of
    15 s) is killed part way. `resubmit` runs index 1's missing runs and nothing
    else; the registry then holds every run of the plan, each once. Index 1 copies 256 MiB a
    call, so that its 15 s of timed calls come long before the 10,000-call cap on any machine."""
    plan = tmp_path / "sweep.toml"
    plan.write_text(
        'name = "sweep"\n[defaults]\ndevice = "cpu"\nquick = true\n'
        '[[run]]\nworkloads = ["kernels.memory"]\nparams = { size_bytes = "1M", ops = "copy" }\n'
        '[[run]]\nworkloads = ["kernels.memory"]\nparams = { size_bytes = "256M", ops = "copy" }\n'
        "min_time_s = 15\nrepeat = 8\n"
    )
    first = run_cli(env, "run", "--plan", str(plan), "--slurm", "--time", "1", "--wait", timeout=JOB_TIMEOUT_S)
    assert first.returncode == 1, first.stderr
    job_id, _ = submitted(first)
    cut = [s for s in first.stderr.splitlines() if s.startswith("Not finished: ")]
    assert len(cut) == 1, first.stderr
    assert f"job {job_id} [1] TIMEOUT" in cut[0]
    done_before = len(stored_records(env))
    assert 2 <= done_before < 9
    again = run_cli(env, "slurm", "resubmit", job_id, "--time", "10", "--wait", timeout=JOB_TIMEOUT_S)
    assert again.returncode == 0, again.stderr
    new_id, new_folder = submitted(again)
    assert new_id != job_id
    job = json.loads((new_folder / "job.json").read_text())
    (task,) = job["tasks"]
    assert task["workloads"] == ["kernels.memory"]
    assert task["repeat"] == 9 - done_before
    assert "size_bytes=256M" in " ".join(task["argv"])
    records = stored_records(env)
    assert len(records) == 9
    assert len({r["run_id"] for r in records}) == 9
    sizes = sorted(r["workload"]["params"]["size_bytes"] for r in records)
    assert sizes == [1 << 20] + [256 << 20] * 8


@pytest.mark.slow
def test_a_rank_killed_under_torchrun_is_named_from_torchruns_root_cause(perfsuite_env):
    """The same without SLURM: torchrun reports every rank's exit, rank 0's SIGTERM (its own
    agent stopping it once rank 1 had failed) before the root cause; the record names the
    root cause, rank 1, first. Rank 0's own error follows when it saw its peer go before its
    agent stopped it; on a loaded host the agent may be first, and then only the log's last line
    does."""
    args = ["collectives.all_reduce", "--device", "cpu", "-p", "max_bytes=256", "--min-time", "60"]
    run = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", "run", *args, "--nproc-per-node", "2"],
        env=perfsuite_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while (worker := _local_rank_worker(perfsuite_env, "1")) is None:
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.3)
    worker.send_signal(signal.SIGKILL)
    _, err = run.communicate(timeout=JOB_TIMEOUT_S)
    assert run.returncode == 1, err
    (record,) = stored_records(perfsuite_env)
    error = record["error"]
    assert re.match(r"rank 1 died \(SIGKILL\)(; rank 0: | \(last output: )", error), error
    assert "rank 0 died" not in error


def _local_rank_worker(env: dict, rank: str) -> psutil.Process | None:
    """A rank's measuring process of a run with this test's registry, once past joining."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            environ = proc.environ()
            if environ.get("PERFSUITE_DB") == env["PERFSUITE_DB"] and environ.get("RANK") == rank:
                note = Path(environ["PERFSUITE_SPEC"]).parent / f"rank-{rank}.progress.json"
                if note.exists() and "joining" not in json.loads(note.read_text())["phase"]:
                    return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError, ValueError, KeyError):
            continue
    return None
