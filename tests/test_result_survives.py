"""A finished measurement survives the death of the runner that was turning it into a record,
with real processes: ``perfsuite run`` is signalled (``kill -9``, SIGTERM) the moment its
measuring process's ``result.json`` appears, twenty times each. Every measurement is then
stored, or named by ``perfsuite results`` and ``perfsuite run`` (path, workload, when, and
the command that stores it) and stored by ``perfsuite import`` of that path, with its
provenance in the record; the registry holds each exactly once, however often the imports
are repeated. SIGTERM in that window stores the record before the command exits, or names
the result as finished, never as "not finished".

A workload whose metric is not a finite number is recorded as failed with one line naming
the metric: the record is valid JSON, nothing is half-written, no temporary folder is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.safety_support import PLUGIN, RUN_ARGS, wait_for_no_leftovers

from tests.conftest import run_cli

TRIES = 20
NAMED = "finished, not yet stored: "

NONFINITE_PLUGIN = '''
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, param

@dataclass(frozen=True)
class P:
    value: str = param("nan", "the value the metric is given: nan, inf or -inf")

class NonFinite(Workload):
    """Reports a metric whose value is not a finite number (a driver computing it by hand)."""
    name = "nonfinite.metric"
    category = "kernels"
    Params = P
    def execute(self, ctx):
        metric = ctx.add_metric("sum", "items_per_s", "items/s", [1.0, 2.0, 3.0], higher_is_better=True)
        metric["value"] = float(self.params.value)

@hookimpl
def perfsuite_register_workloads(register):
    register(NonFinite)
'''


@pytest.fixture
def survive(add_plugin, perfsuite_env, tmp_path):
    """The plugin of small workloads, and TMPDIR in a folder of the test's own."""
    add_plugin("survive", PLUGIN)
    add_plugin("nonfinite", NONFINITE_PLUGIN)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    perfsuite_env["TMPDIR"] = str(tmpdir)
    return perfsuite_env


@dataclass
class Try:
    """One ``perfsuite run`` signalled as soon as its worker's result appeared."""

    prefix: str  # the run id's first 8 digits (the run's temporary folder is named with them)
    in_window: bool  # the record file was not there yet when the signal went
    returncode: int
    stderr: str


def _workdirs(tmpdir: Path) -> set[Path]:
    return set(tmpdir.glob("perfsuite-*"))


def signal_after_result(env: dict, records: Path, sig: int, tries: int) -> list[Try]:
    """Run ``survive.ok`` ``tries`` times; each time, poll for its worker's ``result.json`` and
    send ``sig`` the instant it is there. A run whose result the poll missed is not counted."""
    tmpdir = Path(env["TMPDIR"])
    done: list[Try] = []
    attempts = 0
    while len(done) < tries and attempts < 3 * tries:
        attempts += 1
        before = _workdirs(tmpdir)
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfsuite", "run", "survive.ok", *RUN_ARGS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: Path | None = None
        while proc.poll() is None and seen is None:
            found = [d for d in _workdirs(tmpdir) - before if (d / "result.json").exists()]
            if found:
                seen = found[0]
            else:
                time.sleep(0.001)
        in_window = False
        if seen is not None and proc.poll() is None:
            prefix = seen.name.split("-")[1]
            in_window = not list(records.glob(f"{prefix}*.json"))
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        if seen is not None:
            done.append(Try(seen.name.split("-")[1], in_window, proc.returncode, err))
    return done


def _stored(env: dict) -> list[str]:
    rows = json.loads(run_cli(env, "results", "--json", "--limit", "1000", check=True).stdout)
    return [r["run_id"] for r in rows]


def _named(stderr: str) -> dict[str, str]:
    """Run id prefix -> the line naming a finished result not yet stored."""
    out = {}
    for line in stderr.splitlines():
        if NAMED in line:
            path = _path_of(line)
            folder = path.parent if path.name == "result.json" else path
            # <records>/unrecorded/<run id>, or a run folder perfsuite-<run id[:8]>-<random>
            out[folder.name.split("-")[1] if folder.name.startswith("perfsuite-") else folder.name[:8]] = line
    return out


def _path_of(line: str) -> Path:
    return Path(line.split(NAMED, 1)[1].split(" (", 1)[0])


def _check_nothing_lost(env: dict, records: Path, tries: list[Try], sig: int) -> None:
    assert len(tries) == TRIES, f"the poll saw {len(tries)} results of {TRIES}"
    for t in tries:
        assert "Traceback" not in t.stderr, t.stderr
    stored = _stored(env)
    listed = run_cli(env, "results")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    named = _named(listed.stderr)
    lost = [t.prefix for t in tries if not any(s.startswith(t.prefix) for s in stored) and t.prefix not in named]
    in_window = sum(t.in_window for t in tries)
    print(f"{signal.Signals(sig).name}: {len(tries)} tries, {in_window} in the window, {len(named)} named, lost {lost}")
    assert lost == [], f"{len(lost)} of {len(tries)} measurements neither stored nor named: {listed.stderr}"
    # each named line: the path, the workload, when it finished and the command that stores it
    for line in named.values():
        path = _path_of(line)
        assert path.is_relative_to(records / "unrecorded") and path.exists(), line
        assert "survive.ok" in line and "finished 20" in line and f"'perfsuite import {path}'" in line, line
    # the next run names them too, and runs
    after = run_cli(env, "run", "survive.ok", *RUN_ARGS)
    assert after.returncode == 0 and set(_named(after.stderr)) == set(named), after.stderr
    for i, (prefix, line) in enumerate(sorted(named.items())):
        path = _path_of(line)
        target = path / "result.json" if i % 2 else path  # the folder or the worker's own file
        done = run_cli(env, "import", str(target))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"stored: {prefix}"), done.stdout
    # idempotent: the records folder imported again stores nothing new
    again = run_cli(env, "import", str(records), check=True)
    assert again.stdout.strip().startswith(f"{records}: 0 stored, "), again.stdout
    stored = _stored(env)
    for t in tries:
        assert sum(s.startswith(t.prefix) for s in stored) == 1, (t.prefix, stored)
    assert len(stored) == len(set(stored)) == TRIES + 1  # and the later run
    assert _named(run_cli(env, "results", check=True).stderr) == {}
    for prefix in named:
        (run_id,) = [s for s in stored if s.startswith(prefix)]
        record = json.loads(run_cli(env, "show", run_id, "--json", check=True).stdout)
        provenance = record["details"]["provenance"]
        assert provenance["recovered"].startswith("from the measuring process's result after the runner"), provenance
        assert {"host", "runner_pid", "result_written_at", "recovered_at"} <= set(provenance), provenance
    assert wait_for_no_leftovers(Path(env["TMPDIR"])) == []


def test_kill_9_the_moment_the_result_is_written_loses_no_measurement(survive, tmp_path):
    records = tmp_path / "records"
    tries = signal_after_result(survive, records, signal.SIGKILL, TRIES)
    _check_nothing_lost(survive, records, tries, signal.SIGKILL)


def test_sigterm_the_moment_the_result_is_written_stores_it_or_names_it_finished(survive, tmp_path):
    records = tmp_path / "records"
    tries = signal_after_result(survive, records, signal.SIGTERM, TRIES)
    for t in tries:
        assert t.returncode in (0, 130, 143), (t.returncode, t.stderr)
        assert "not finished" not in t.stderr, t.stderr
        if t.returncode != 0:
            interrupted = [line for line in t.stderr.splitlines() if line.startswith("Interrupted: ")]
            assert len(interrupted) == 1, t.stderr
            assert f"stored: survive.ok {t.prefix}" in interrupted[0] or NAMED in t.stderr, t.stderr
    _check_nothing_lost(survive, records, tries, signal.SIGTERM)


def test_a_result_no_folder_can_keep_stays_in_its_run_folder_named_and_imported(survive, tmp_path):
    """The records folder's ``unrecorded`` and both fallback folders are files: the result of a
    runner killed (-9) at once stays in its run folder, which is named and then imported."""
    records = tmp_path / "records"
    records.mkdir()
    blocked = [
        records / "unrecorded",
        tmp_path / "data" / "perfsuite" / "rescued-records",
        tmp_path / "tmp" / f"rescued-records-{os.getuid()}",
    ]
    for path in blocked:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a file where the folder would go")
    (t,) = signal_after_result(survive, records, signal.SIGKILL, 1)
    listed = run_cli(survive, "results", check=True)
    (line,) = _named(listed.stderr).values()
    path = _path_of(line)
    assert path.parent == tmp_path / "tmp" and path.name.startswith(f"perfsuite-{t.prefix}-"), line
    done = run_cli(survive, "import", str(path), check=True)
    assert done.stdout.startswith(f"stored: {t.prefix}"), done.stdout
    assert [s[:8] for s in _stored(survive)] == [t.prefix]
    assert _named(run_cli(survive, "results", check=True).stderr) == {}
    assert wait_for_no_leftovers(tmp_path / "tmp") == []
    assert all(p.read_text() == "a file where the folder would go" for p in blocked)


def _finite_json(text: str) -> dict:
    def refuse(name: str) -> float:
        raise AssertionError(f"{name} in a record file")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_metric_that_is_not_a_finite_number_is_recorded_as_failed_naming_it(survive, tmp_path, value):
    proc = run_cli(survive, "run", "nonfinite.metric", "--device", "cpu", "-p", f"value={value}", "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "failed" and record["metrics"] == []
    shown = {"nan": "nan", "inf": "inf", "-inf": "-inf"}[value]
    assert record["error"] == f"metric items_per_s of case sum is {shown}, not a finite number", record["error"]
    (path,) = (tmp_path / "records").glob("*.json")
    assert _finite_json(path.read_text())["run_id"] == record["run_id"]
    assert _stored(survive) == [record["run_id"]]
    assert not (tmp_path / "records" / "unrecorded").exists()
    assert [p for p in (tmp_path / "records").rglob("*") if p.name.endswith(".tmp")] == []
    assert wait_for_no_leftovers(tmp_path / "tmp") == []
