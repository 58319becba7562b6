"""The runner through the real CLI and real subprocesses: failures of every kind are
recorded with their reason, the rest of the run goes on, the registry stays readable."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import run_cli

MISBEHAVING = """
import os, signal, time
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, Check, param

@dataclass(frozen=True)
class P:
    n: int = param(200, "items per call")

def _workload(wname, behaviour):
    class W(Workload):
        name = wname
        category = "kernels"
        Params = P
        def cases(self, ctx):
            def fn():
                if behaviour == "raise":
                    raise RuntimeError("step exploded on purpose")
                if behaviour == "hang":
                    time.sleep(3600)
                if behaviour == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                self.out = sum(range(self.params.n))
            verify = lambda: Check("sum", self.out == self.params.n * (self.params.n - 1) // 2, "closed form")
            return [Case("sum", fn, Work(items=self.params.n), verify=verify)]
    W.__name__ = behaviour.title()
    return W

@hookimpl
def perfsuite_register_workloads(register):
    for b in ("ok", "raise", "hang", "kill"):
        register(_workload(f"demo.{b}", b))
"""

SLOW_OK = MISBEHAVING.replace('"demo.{b}"', '"slow.{b}"')


def _records(env, workload=None):
    args = ["results", "--json", "--limit", "500"] + (["--workload", workload] if workload else [])
    proc = run_cli(env, *args, check=True)
    return json.loads(proc.stdout)


def test_misbehaving_workloads_are_recorded_and_the_run_goes_on(cli, add_plugin, perfsuite_env):
    add_plugin("misbehave", MISBEHAVING)
    t0 = time.monotonic()
    proc = cli(
        "run",
        "demo.ok",
        "demo.raise",
        "demo.hang",
        "demo.kill",
        "demo.ok",
        "--device",
        "cpu",
        "--timeout",
        "20",
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--json",
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr  # failures make the exit non-zero, after everything ran
    records = json.loads(proc.stdout)
    by = {}
    for r in records:
        by.setdefault(r["workload"]["name"], []).append(r)
    assert [r["status"] for r in by["demo.ok"]] == ["success"]  # named twice, run once
    assert by["demo.ok"][0]["verification"]["status"] == "passed"
    assert by["demo.raise"][0]["status"] == "failed"
    assert by["demo.raise"][0]["error"] == "RuntimeError: step exploded on purpose"
    assert by["demo.hang"][0]["status"] == "timeout"
    assert "timed out after 20 s" in by["demo.hang"][0]["error"]
    assert by["demo.kill"][0]["status"] == "failed"
    assert "killed by signal SIGKILL" in by["demo.kill"][0]["error"]
    assert elapsed < 120
    stored = _records(perfsuite_env)
    assert sorted(r["status"] for r in stored) == ["failed", "failed", "success", "timeout"]
    for r in records:  # every record is readable back, byte for byte the same document
        shown = json.loads(cli("show", r["run_id"], "--json", check=True).stdout)
        assert shown == r


def _ours(proc, db_url: str) -> bool:
    """A process started for this test: it carries the test's registry in its environment
    (other sessions on the machine may run workers of their own at the same time)."""
    import psutil

    try:
        return proc.environ().get("PERFSUITE_DB") == db_url
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def test_hung_workload_leaves_no_process_behind(cli, add_plugin, perfsuite_env):
    import psutil

    add_plugin("misbehave", MISBEHAVING)
    proc = cli("run", "demo.hang", "--device", "cpu", "--timeout", "5", "--json")
    assert json.loads(proc.stdout)[0]["status"] == "timeout"
    leftovers = [p for p in psutil.process_iter() if _ours(p, perfsuite_env["PERFSUITE_DB"])]
    assert leftovers == []


def test_unknown_workload_or_parameter_is_one_line_exit_2_nothing_recorded(cli, add_plugin, perfsuite_env):
    add_plugin("misbehave", MISBEHAVING)
    proc = cli("run", "demo.ok", "no.such", "--device", "cpu")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "Error: unknown workload 'no.such' (see 'perfsuite list')"
    proc = cli("run", "demo.ok", "--param", "bogus=1", "--device", "cpu")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "unknown parameter 'bogus'" in proc.stderr
    proc = cli("run", "demo.ok", "--param", "n=many", "--device", "cpu")
    assert proc.returncode == 2 and "'many' is not an integer" in proc.stderr
    assert _records(perfsuite_env) == []


def test_records_validate_and_carry_controls_environment_and_statistics(cli, add_plugin, perfsuite_env, tmp_path):
    import jsonschema

    from perfsuite.schemas import load

    add_plugin("misbehave", MISBEHAVING)
    proc = cli(
        "run",
        "demo.ok",
        "--device",
        "cpu",
        "--seed",
        "7",
        "--repeat",
        "2",
        "--iterations",
        "13",
        "--param",
        "n=300",
        "--json",
        check=True,
    )
    records = json.loads(proc.stdout)
    assert [r["controls"]["seed"] for r in records] == [7, 8]  # unique seeds per repeat
    for r in records:
        jsonschema.Draft202012Validator(load("result")).validate(r)
        time_ms = next(m for m in r["metrics"] if m["name"] == "time_ms")
        assert len(time_ms["samples"]) == 13 and time_ms["statistics"]["n"] == 13
        s = time_ms["statistics"]
        assert s["min"] <= s["ci95_low"] <= s["median"] <= s["ci95_high"] <= s["max"]
        items = next(m for m in r["metrics"] if m["name"] == "items_per_s")
        # odd sample count: the median throughput is exactly the work over the median time
        assert items["value"] == pytest.approx(300 / (time_ms["value"] / 1e3), rel=1e-9)
        assert r["workload"]["params"] == {"n": 300}
        assert r["environment"]["measured_device"]["kind"] == "cpu"
        assert r["environment"]["suite"]["version"] == "0.1.0"
        files = sorted((tmp_path / "records").glob(f"{r['run_id']}.*"))
        assert [f.suffix for f in files] == [".json", ".mllog"]
        assert json.loads(files[0].read_text()) == r
        assert ":::MLLOG" in files[1].read_text()
    assert records[0]["comparability_key"] == records[1]["comparability_key"]


def test_a_record_that_breaks_the_schema_is_refused(cli, add_plugin, perfsuite_env, tmp_path):
    add_plugin("misbehave", MISBEHAVING)
    rec = json.loads(cli("run", "demo.ok", "--device", "cpu", "--iterations", "3", "--json", check=True).stdout)[0]
    bad = dict(rec, run_id="f" * 32, status="splendid")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    proc = cli("import", str(path))
    assert proc.returncode == 1
    assert "status" in proc.stderr and "splendid" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert [r["run_id"] for r in _records(perfsuite_env)] == [rec["run_id"]]
    # the original record imports idempotently
    good = tmp_path / "good.json"
    good.write_text(json.dumps(rec))
    again = cli("import", str(good), check=True)
    assert again.stdout.startswith("duplicate")


def test_two_concurrent_runs_on_one_sqlite_registry_lose_nothing(add_plugin, perfsuite_env):
    add_plugin("misbehave", MISBEHAVING)
    cmd = [
        sys.executable,
        "-m",
        "perfsuite",
        "run",
        "demo.ok",
        "--device",
        "cpu",
        "--repeat",
        "4",
        "--iterations",
        "3",
        "--warmup",
        "0",
        "--json",
    ]
    procs = [
        subprocess.Popen(cmd, env=perfsuite_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    run_ids = {r["run_id"] for out, _ in outs for r in json.loads(out)}
    assert len(run_ids) == 8
    assert {r["run_id"] for r in _records(perfsuite_env)} == run_ids
