"""Nothing lost, nothing left behind, with real processes: a finished measurement reaches
disk before the registry is touched; killing ``perfsuite run`` (SIGKILL, SIGTERM, Ctrl-C)
leaves no measuring process, no torchrun rank and no temporary folder; bad input and
unusable registries or records folders are one line before anything runs; a failed
verification is an invalid run without a headline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from support.safety_support import leftovers

from tests.conftest import run_cli

PLUGIN = '''
import os, time
from dataclasses import dataclass
from pathlib import Path
from perfsuite import hookimpl, Workload, Case, Work, Check, Requirements, param

@dataclass(frozen=True)
class P:
    n: int = param(100, "items per call")

def _mark():
    """Say where this process is (its run folder), then hang: the test kills the runner now."""
    marker = os.environ.get("SAFETY_MARKER")
    if marker:
        Path(f"{marker}.{os.environ.get('RANK', '0')}").write_text(os.environ["PERFSUITE_WORKDIR"])

class Hang(Workload):
    name = "safety.hang"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        def fn():
            _mark()
            time.sleep(3600)
        return [Case("hang", fn, Work(items=1))]

class HangPair(Hang):
    name = "safety.hang_pair"
    category = "collectives"
    requirements = Requirements(devices=("cpu",), min_world_size=2)

class Ok(Workload):
    name = "safety.ok"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        ctx.details["pythonhashseed"] = os.environ.get("PYTHONHASHSEED")  # set when the worker was spawned
        def fn():
            self.out = sum(range(self.params.n))
        return [Case("sum", fn, Work(items=self.params.n),
                     verify=lambda: Check("sum", self.out == self.params.n * (self.params.n - 1) // 2, "closed form"))]

class Wrong(Ok):
    name = "safety.wrong"
    def cases(self, ctx):
        def fn():
            self.out = 1
        return [Case("sum", fn, Work(items=self.params.n),
                     verify=lambda: Check("sum", False, "relative error", error=0.267, tolerance=1e-6))]

class BreakRegistry(Ok):
    """Makes the SQLite registry's folder unusable while the run measures (a file in its place)."""
    name = "safety.break_registry"
    def setup(self, ctx):
        folder = Path(os.environ["SAFETY_REGISTRY_DIR"])
        folder.rename(folder.with_name(folder.name + ".moved"))
        folder.write_text("not a folder any more")

@hookimpl
def perfsuite_register_workloads(register):
    for w in (Hang, HangPair, Ok, Wrong, BreakRegistry):
        register(w)
'''

KILL_DEADLINE_S = 20.0  # generous on a loaded 2-core machine; the watch polls every 0.2 s
START_DEADLINE_S = 120.0
# Ending after a signal (the tree killed, folders removed, the summary written) ran past 120 s
# once with the machine's two cores at a load of 10; a runner that ignored the signal never ends.
INTERRUPTED_DEADLINE_S = 300.0


@pytest.fixture
def safety(add_plugin, perfsuite_env, tmp_path):
    add_plugin("safety", PLUGIN)
    perfsuite_env["SAFETY_MARKER"] = str(tmp_path / "marker")
    (tmp_path / "tmp").mkdir()
    perfsuite_env["TMPDIR"] = str(tmp_path / "tmp")  # where the run's folder and torchrun's go
    return perfsuite_env


def _ours(env: dict) -> list[psutil.Process]:
    """Live processes started under this test's registry (the runner, workers, torchrun, ranks)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("PERFSUITE_DB") == env["PERFSUITE_DB"]:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def _start_hanging(env: dict, tmp_path: Path, *args: str, ranks: int = 1) -> tuple[subprocess.Popen, Path]:
    """``perfsuite run ARGS`` until every rank of the hanging workload reached its hang;
    returns the runner and the run's temporary folder."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            *args,
            "--device",
            "cpu",
            "--timeout",
            "600",
            "--warmup",
            "0",
            "--iterations",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    markers = [tmp_path / f"marker.{rank}" for rank in range(ranks)]
    deadline = time.monotonic() + START_DEADLINE_S
    while not all(m.exists() for m in markers):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the hang never started (exit {proc.returncode})\n{out}\n{err}")
        time.sleep(0.1)
    workdir = Path(markers[0].read_text())
    assert workdir.name.startswith("perfsuite-") and workdir.is_dir()
    return proc, workdir


def _assert_all_gone(env: dict, workdir: Path) -> None:
    """No process of the run, and no temporary folder: its own, torchrun's (torchelastic_*)."""
    deadline = time.monotonic() + KILL_DEADLINE_S
    while (_ours(env) or workdir.exists() or leftovers(Path(env["TMPDIR"]))) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [" ".join(p.cmdline()[:6]) for p in _ours(env)]
    assert left == [] and not workdir.exists(), (left, workdir.exists())
    assert leftovers(Path(env["TMPDIR"])) == []


@pytest.mark.parametrize("workload, ranks", [("safety.hang", 1), ("safety.hang_pair", 2)])
def test_kill_9_of_the_runner_leaves_no_process_and_no_folder(safety, tmp_path, workload, ranks):
    extra = ["--nproc-per-node", "2"] if ranks == 2 else []
    proc, workdir = _start_hanging(safety, tmp_path, workload, *extra, ranks=ranks)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    _assert_all_gone(safety, workdir)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_exit_130_and_say_what_was_stored_and_what_not(safety, tmp_path, sig):
    proc, workdir = _start_hanging(safety, tmp_path, "safety.ok", "safety.hang", "safety.wrong")
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=INTERRUPTED_DEADLINE_S)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (summary,) = [line for line in err.splitlines() if line.startswith("Interrupted: ")]
    assert summary.startswith("Interrupted: stored: safety.ok ")
    assert summary.endswith("; not finished: safety.hang; not run: safety.wrong")
    _assert_all_gone(safety, workdir)
    stored = json.loads(run_cli(safety, "results", "--json", check=True).stdout)
    assert [r["workload"] for r in stored] == ["safety.ok"]


def test_a_registry_gone_mid_run_leaves_a_record_that_import_stores(safety, tmp_path):
    folder = tmp_path / "registry"
    folder.mkdir()
    safety["PERFSUITE_DB"] = f"sqlite:///{folder / 'registry.db'}"
    safety["SAFETY_REGISTRY_DIR"] = str(folder)
    proc = run_cli(
        safety, "run", "safety.break_registry", "safety.ok", "--device", "cpu", "--iterations", "3", "--seed", "7"
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "was not stored in the registry" in error[0], proc.stderr
    path = Path(error[0].split("its record is at ", 1)[1].split(": 'perfsuite import", 1)[0])
    assert f"'perfsuite import {path}' will load it" in error[0]
    assert path.parent == tmp_path / "records" and path.with_suffix(".mllog").exists()
    assert "not run: safety.ok" in proc.stderr  # the runs after it are not measured for nothing
    record = json.loads(path.read_text())
    assert record["status"] == "success" and record["workload"]["name"] == "safety.break_registry"
    assert record["details"]["pythonhashseed"] == "7"  # in the worker's environment from its start
    safety["PERFSUITE_DB"] = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert run_cli(safety, "import", str(path), check=True).stdout.startswith("stored: ")
    stored = json.loads(run_cli(safety, "show", record["run_id"], "--json", check=True).stdout)
    assert stored == record


def test_a_failed_verification_is_an_invalid_run_with_no_headline(safety):
    proc = run_cli(safety, "run", "safety.wrong", "--device", "cpu", "--iterations", "3", "--json")
    assert proc.returncode == 1, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "invalid" and record["verification"]["status"] == "failed"
    assert record["error"] == "verification failed: sum (relative error): error 0.267 > tolerance 1e-06"
    assert all(m["roofline"] is None for m in record["metrics"])
    table = run_cli(safety, "results", check=True).stdout
    row = next(line for line in table.splitlines() if "safety.wrong" in line)
    assert "invalid" in row and "items/s" not in row


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--db", "sqlite:////proc/nope/x.db"], "the registry cannot be used"),
        (["--db", "not a url"], "the registry cannot be used"),
        (["--db", "mysql://h/db"], "the registry cannot be used"),
    ],
)
def test_an_unusable_registry_is_one_line_before_anything_runs(safety, tmp_path, args, expected):
    proc = run_cli(safety, *args, "run", "safety.ok", "--device", "cpu", "--iterations", "3")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"Error: {expected}") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list((tmp_path / "records").glob("*.json"))


def test_a_records_folder_that_cannot_be_written_is_one_line_before_anything_runs(safety, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    safety["PERFSUITE_RECORDS"] = str(blocker / "records")
    proc = run_cli(safety, "run", "safety.ok", "--device", "cpu", "--iterations", "3")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"Error: the records folder {blocker / 'records'} cannot be written")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(run_cli(safety, "results", "--json", check=True).stdout) == []


def test_sizes_that_cannot_fit_are_refused_naming_the_available_memory(cli, perfsuite_env):
    proc = cli("run", "kernels.memory", "-p", "size_bytes=999999999G", "--device", "cpu")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("Error: kernels.memory: needs ") and "of host memory, more than the " in proc.stderr
    assert "GiB available; not started" in proc.stderr
    assert json.loads(cli("results", "--json", check=True).stdout) == []


def test_nnodes_without_a_rendezvous_endpoint_is_one_line(cli):
    proc = cli("run", "kernels.memory", "--quick", "--device", "cpu", "--nnodes", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "Error: --nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address)"


def test_pythonhashseed_stays_in_its_range():
    from perfsuite.controls import Controls, process_env

    assert process_env(Controls(seed=7)) == {"PYTHONHASHSEED": "7"}
    assert process_env(Controls(seed=2**32 + 3, deterministic=True))["PYTHONHASHSEED"] == "3"


# -- PostgreSQL stopped while the run measures ----------------------------------------------------
@pytest.fixture
def stoppable_pg():
    """A throwaway cluster of this test's own (the session's shared one must keep running):
    yields its database URL and the command that stops it at once."""
    from support import pg_cluster

    if pg_cluster.server_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
    pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")
    cluster = pg_cluster.start(prefix="perfsuite-pgstop-")
    try:
        yield cluster.url(), cluster.stop_argv
    finally:
        cluster.remove()


PG_STOPPER = '''
import json, os, subprocess
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, param

@dataclass(frozen=True)
class P:
    n: int = param(10, "items per call")

class StopServer(Workload):
    """Stops the registry's PostgreSQL server while the run measures."""
    name = "safety.stop_postgres"
    category = "kernels"
    Params = P
    def setup(self, ctx):
        subprocess.run(json.loads(os.environ["SAFETY_PG_STOP"]), check=True, capture_output=True)
    def cases(self, ctx):
        return [Case("noop", lambda: None, Work(items=1))]

@hookimpl
def perfsuite_register_workloads(register):
    register(StopServer)
'''


@pytest.mark.slow
def test_a_postgresql_server_stopped_mid_run_leaves_a_record_that_import_stores(
    add_plugin, perfsuite_env, stoppable_pg, tmp_path
):
    url, stop = stoppable_pg
    add_plugin("pgstop", PG_STOPPER)
    perfsuite_env["PERFSUITE_DB"] = url
    perfsuite_env["SAFETY_PG_STOP"] = json.dumps(stop)
    proc = run_cli(perfsuite_env, "run", "safety.stop_postgres", "--device", "cpu", "--iterations", "3")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert "was not stored in the registry: registry " in error  # the registry's own one-line reason follows
    (path,) = (tmp_path / "records").glob("*.json")
    assert f"its record is at {path}: 'perfsuite import {path}' will load it" in error
    perfsuite_env["PERFSUITE_DB"] = f"sqlite:///{tmp_path / 'later.db'}"
    assert run_cli(perfsuite_env, "import", str(path), check=True).stdout.startswith("stored: ")
