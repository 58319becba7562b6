"""Helpers shared by the SQLite and PostgreSQL registry tests."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from perfsuite.registry.models import Base

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO = TESTS_DIR.parent


def git(*args: str) -> bytes:
    """``git ARGS`` in the repository; its standard output."""
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, timeout=120).stdout


def run_older_code(commit: str, folders: tuple[str, ...], script: str, args: list[str], root: Path) -> list[str]:
    """Run ``script`` (its argv: the old code's folder, this tests folder, then ``args``) with the
    repository's ``folders`` as they were at ``commit``, extracted under ``root``: how a registry
    made by an older perfsuite is made for the migration tests. Its output lines; skips where the
    checkout has no git history."""
    if not (REPO / ".git").exists():
        pytest.skip("needs the repository's git history (the older registry code is taken from it)")
    code = root / "code"
    code.mkdir()
    with tarfile.open(fileobj=io.BytesIO(git("archive", commit, *folders))) as archive:
        archive.extractall(code)
    path = root / "make.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(path), str(code), str(TESTS_DIR), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()


# Each child waits for a "go" file so that all of them open the (fresh) registry at the
# same moment, then stores its records and prints the results of store() as JSON.
_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from support.factories import make_record
from perfsuite.registry import open_registry

url, tag, count, go = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
open(go + "." + tag + ".ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
registry = open_registry(url)
outcomes = {}
for i in range(count):
    # Two workloads and one host shared by every process: the shared rows race too.
    record = make_record(workload_name=("kernels.gemm", "kernels.copy")[i % 2], params={"i": i, "tag": tag})
    outcomes[record["run_id"]] = registry.store(record)
registry.close()
print(json.dumps(outcomes))
"""


# Each child opens a new fresh file every round, all children at the same moment (the
# parent's "go.N" file), and prints the error of every round whose open failed.
_OPENER = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from perfsuite.registry import open_registry

workdir, tag, rounds = sys.argv[2], sys.argv[3], int(sys.argv[4])
errors = []
for n in range(rounds):
    open(os.path.join(workdir, f"ready.{n}.{tag}"), "w").close()
    while not os.path.exists(os.path.join(workdir, f"go.{n}")):
        time.sleep(0.001)
    try:
        open_registry(f"sqlite:///{workdir}/r{n}.db").close()
    except Exception as exc:
        errors.append(f"round {n}: {exc}")
print(json.dumps(errors))
"""


def open_fresh_files_at_once(workdir: Path, processes: int, rounds: int, timeout_s: float = 240.0) -> list[str]:
    """``processes`` real processes open ``rounds`` fresh SQLite registries, each one all
    at once; return the error of every open that failed."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, str(TESTS_DIR), str(workdir), f"p{n}", str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    deadline = time.monotonic() + timeout_s
    for n in range(rounds):
        _release_when_ready(children, workdir, f"ready.{n}.*", workdir / f"go.{n}", deadline)
    errors = []
    for child in children:
        out, err = child.communicate(timeout=timeout_s)
        if child.returncode != 0:
            raise AssertionError(f"an opening process failed: exit {child.returncode}: {err.strip()[-2000:]}")
        errors += json.loads(out)
    return errors


def _release_when_ready(children: list[subprocess.Popen], workdir: Path, ready: str, go: Path, deadline: float) -> None:
    """Create ``go`` once every child has written its ``ready`` file (a glob in ``workdir``),
    or at once when a child has exited or ``deadline`` has passed (its error is then read)."""
    while len(list(workdir.glob(ready))) < len(children):
        if time.monotonic() > deadline or any(c.poll() is not None for c in children):
            break
        time.sleep(0.001)
    go.touch()


def table_counts(registry) -> dict[str, int]:
    """Row count of every registry table, to show that a refused store changed nothing."""
    with registry.session() as session:
        return {
            name: session.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in Base.metadata.tables.items()
        }


def run_concurrent_stores(
    url: str, processes: int, per_process: int, workdir: Path, timeout_s: float = 240.0
) -> dict[str, str]:
    """Start ``processes`` real Python processes that open ``url`` at once and each store
    ``per_process`` new records; return {run_id: outcome} over all of them."""
    go = workdir / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(TESTS_DIR), url, f"p{n}", str(per_process), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    _release_when_ready(children, workdir, "go.*.ready", go, time.monotonic() + 60)
    outcomes: dict[str, str] = {}
    failures = []
    for child in children:
        out, err = child.communicate(timeout=timeout_s)
        if child.returncode != 0:
            failures.append(f"exit {child.returncode}: {err.strip()[-2000:]}")
        else:
            outcomes.update(json.loads(out))
    if failures:
        raise AssertionError("a storing process failed:\n" + "\n".join(failures))
    return outcomes
