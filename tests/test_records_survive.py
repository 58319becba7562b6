"""A finished measurement always survives, with real processes and real filesystems: a records
folder that fills up or is remounted read-only while the run measures sends the record to
the registry and a named fallback folder; with the registry gone too, the fallback file is
named for ``perfsuite import``; with every folder gone, the record is printed whole on
stderr. ``kill -9`` and SIGTERM in the window between writing a record and storing it,
looped, leave every record stored or named, and ``perfsuite import <records folder>`` stores
the rest. No temporary folder (``perfsuite-*``, ``torchelastic_*``) and no ``.tmp`` file is
left on any of these paths.

The filesystems are tmpfs mounts (the tests run as root here and in CI); where mounting is
not allowed those tests are skipped, and the ones that break folders by putting files in
their place run anyway.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from support.safety_support import (
    PLUGIN,
    RUN_ARGS,
    can_mount,
    leftovers,
    signal_in_window,
    tmpfs,
    wait_for_no_leftovers,
)

from perfsuite.schemas.validate import check_record
from tests.conftest import run_cli

KILL_TRIES = int(os.environ.get("PERFSUITE_SAFETY_KILL_TRIES", "4"))
KILL_BUDGET_S = float(os.environ.get("PERFSUITE_SAFETY_KILL_BUDGET_S", "25"))


@pytest.fixture
def survive(add_plugin, perfsuite_env, tmp_path):
    """The plugin of breaking workloads, and TMPDIR in a folder of the test's own."""
    add_plugin("survive", PLUGIN)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    perfsuite_env["TMPDIR"] = str(tmpdir)
    return perfsuite_env


@pytest.fixture
def mountable(tmp_path):
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")


def _stored_ids(env: dict) -> set[str]:
    return {r["run_id"] for r in json.loads(run_cli(env, "results", "--json", "--limit", "1000", check=True).stdout)}


def _lines(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def _no_temporaries(*folders: Path) -> list[str]:
    return [str(p) for folder in folders if folder.exists() for p in folder.rglob("*.tmp")]


@pytest.mark.parametrize("fault", ["full", "remounted read-only"])
def test_a_records_folder_that_cannot_take_the_record_mid_run_leaves_it_in_the_registry_and_a_named_folder(
    survive, tmp_path, mountable, fault
):
    with tmpfs(tmp_path / "records", size="1m") as records:
        survive["PERFSUITE_RECORDS"] = str(records)
        if fault == "full":
            survive["SURVIVE_FILL"], workload = str(records), "survive.fill_records"
        else:
            survive["SURVIVE_REMOUNT"], workload = str(records), "survive.remount"
        proc = run_cli(survive, "run", workload, *RUN_ARGS)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = _lines(proc.stderr, "is stored in the registry")
        why = "No space left on device" if fault == "full" else "Read-only file system"
        assert f"the records folder {records} cannot take it: {why}" in line
        kept = Path(line.split("its file is at ", 1)[1].split(": the records folder", 1)[0])
        assert kept.parent == tmp_path / "data" / "perfsuite" / "rescued-records"
        record = json.loads(kept.read_text())
        assert _stored_ids(survive) == {record["run_id"]}
        shown = json.loads(run_cli(survive, "show", record["run_id"], "--json", check=True).stdout)
        assert shown == record
        assert not list(records.glob("*.json")) and _no_temporaries(records) == []
    assert wait_for_no_leftovers(tmp_path / "tmp") == []


def test_records_folder_and_registry_gone_mid_run_leave_the_record_in_a_named_fallback_file(survive, tmp_path):
    registry_dir = tmp_path / "registry"
    registry_dir.mkdir()
    survive["PERFSUITE_DB"] = f"sqlite:///{registry_dir / 'registry.db'}"
    survive["SURVIVE_BREAK"] = os.pathsep.join([str(tmp_path / "records"), str(registry_dir)])
    proc = run_cli(survive, "run", "survive.break_folders", *RUN_ARGS)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (error,) = _lines(proc.stderr, "Error: ")
    path = Path(error.split("its record is at ", 1)[1].split(": 'perfsuite import", 1)[0])
    assert path.parent == tmp_path / "data" / "perfsuite" / "rescued-records"
    assert "was not stored in the registry" in error and f"'perfsuite import {path}' will load it" in error
    survive["PERFSUITE_DB"] = f"sqlite:///{tmp_path / 'later.db'}"
    assert run_cli(survive, "import", str(path), check=True).stdout.startswith("stored: ")
    assert _no_temporaries(tmp_path / "data") == []
    assert wait_for_no_leftovers(tmp_path / "tmp") == []


def test_with_no_folder_and_no_registry_the_record_is_printed_whole_on_stderr(survive, tmp_path):
    registry_dir = tmp_path / "registry"
    registry_dir.mkdir()
    survive["PERFSUITE_DB"] = f"sqlite:///{registry_dir / 'registry.db'}"
    survive["SURVIVE_BREAK"] = os.pathsep.join([str(tmp_path / "records"), str(registry_dir)])
    fallbacks = [
        tmp_path / "data" / "perfsuite" / "rescued-records",
        tmp_path / "tmp" / f"rescued-records-{os.getuid()}",
    ]
    for blocked in fallbacks:
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("a file where the fallback folder would go")
    proc = run_cli(survive, "run", "survive.break_folders", *RUN_ARGS)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (error,) = _lines(proc.stderr, "Error: ")
    assert "no folder could take its record, printed above as JSON" in error
    (printed,) = [line for line in proc.stderr.splitlines() if line.startswith("{")]
    record = json.loads(printed)
    check_record(record)  # whole, with its hash
    saved = tmp_path / "saved.json"
    saved.write_text(printed)
    survive["PERFSUITE_DB"] = f"sqlite:///{tmp_path / 'later.db'}"
    assert run_cli(survive, "import", str(saved), check=True).stdout.startswith(f"stored: {record['run_id']}")


def _check_every_record_stored_or_named(env: dict, records: Path, tries: list) -> None:
    on_disk = {p.stem: p for p in records.glob("*.json")}
    assert {t.record.stem for t in tries if t.record is not None} <= set(on_disk), "a record file vanished"
    stored = _stored_ids(env)
    for run_id, path in on_disk.items():
        if run_id in stored:
            continue
        (t,) = [t for t in tries if t.record == path]
        if t.signal == signal.SIGTERM:  # a summary was printed: it names the file and the command
            (summary,) = _lines(t.stderr, "Interrupted: ")
            assert str(path) in summary and f"'perfsuite import {records}' stores it" in summary, summary
    for t in tries:
        json.loads(t.record.read_text())  # complete: never half a file under the final name
        assert "Traceback" not in t.stderr, t.stderr
    # 'results' and the next run say how many are not stored, in one line; the run removes
    # stale temporaries.
    missing = len(set(on_disk) - stored)
    expected = (
        [
            f"Note: {missing} record{'s' if missing != 1 else ''} in {records} not in the registry: "
            f"'perfsuite import {records}' stores them"
        ]
        if missing
        else []
    )
    listed = run_cli(env, "results", check=True)
    assert _lines(listed.stderr, "not in the registry") == expected
    after = run_cli(env, "run", "survive.ok", *RUN_ARGS)
    assert after.returncode == 0, after.stderr
    assert _lines(after.stderr, "not in the registry") == expected
    assert _no_temporaries(records) == []
    imported = run_cli(env, "import", str(records), check=True)
    assert imported.stdout.strip().startswith(f"{records}: {missing} stored, "), imported.stdout
    assert _stored_ids(env) == {p.stem for p in records.glob("*.json")}
    again = run_cli(env, "import", str(records), check=True)
    assert again.stdout.strip().startswith(f"{records}: 0 stored, ")  # idempotent


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_signals_between_writing_and_storing_leave_every_record_stored_or_named(survive, tmp_path, sig):
    records = tmp_path / "records"
    tries = signal_in_window(survive, records, sig, KILL_TRIES, KILL_BUDGET_S)
    print(f"{signal.Signals(sig).name}: {len(tries)} tries, {sum(t.signalled for t in tries)} signalled in the window")
    assert all(t.record is not None for t in tries), [t.stderr for t in tries]
    if sig == signal.SIGTERM:
        assert {t.returncode for t in tries} <= {0, 130}, [t.stderr for t in tries]
    _check_every_record_stored_or_named(survive, records, tries)
    assert wait_for_no_leftovers(tmp_path / "tmp") == []


def test_signals_from_the_summary_to_the_exit_end_the_command_interrupted_never_killed(survive):
    """SIGTERM sent again and again from the moment the summary reaches stdout until the
    process is gone: every one lands after the runs, so the summary comes out whole and the
    command exits 130 (a signal noted while it writes) or 0 (every signal after it had written
    all, ignored: under load the first can come that late), never as killed by the signal (-15)
    in its last milliseconds."""
    import subprocess
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", "run", "survive.ok", *RUN_ARGS],
        env=survive,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # the summary has begun: the runs are over
    sent = 0
    while proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        sent += 1
        time.sleep(0.001)
    rest, err = proc.stdout.read(), proc.stderr.read()  # what readline left buffered is kept
    assert first and sent, (first, sent)
    assert proc.returncode in (0, 130), (proc.returncode, sent, err)
    assert rest.splitlines()[-1].startswith("survive.ok  sum") and "Traceback" not in err, (rest, err)


def test_a_torchrun_run_leaves_no_temporary_folder(survive, tmp_path):
    pytest.importorskip("torch")
    proc = run_cli(survive, "run", "survive.ok_pair", "--nproc-per-node", "2", *RUN_ARGS, "--json")
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["launch"]["launcher"] == "torchrun" and record["status"] == "success"
    assert leftovers(tmp_path / "tmp") == []


def test_the_janitor_removes_what_it_watches_when_its_runner_is_killed(tmp_path):
    """The janitor alone: a process that made a folder is killed (-9); the folder goes."""
    import subprocess
    import time

    folder = tmp_path / "perfsuite-watched"
    script = (
        "import sys, time; from pathlib import Path; from perfsuite.engine.lifeline import Janitor\n"
        f"j = Janitor(); p = Path({str(folder)!r}); j.watch(p); p.mkdir(); (p / 'x').write_text('x')\n"
        "print('ready', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    assert folder.is_dir()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()
