"""Long runs say what they are doing: the measuring process's progress notes reach the runner
while it waits, and ``perfsuite run`` shows them (a line per step with the time left when its
stderr is not a terminal). Real processes: a child that writes notes, a real CLI run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from perfsuite.engine import progress
from perfsuite.engine.progress import Note, Pace, duration, eta_s
from perfsuite.processes import SPEC_ENV

NOTER = """
import sys, time
from perfsuite.distributed import note_progress
for done, phase in enumerate(sys.argv[1:]):
    note_progress(phase, done, len(sys.argv) - 1)
    time.sleep(float(__import__("os").environ["NOTE_GAP_S"]))
"""

SLOW_CASES = """
import time
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, param

@dataclass(frozen=True)
class P:
    pause_s: float = param(1.2, "seconds each case takes")

class Slow(Workload):
    name = "demo.slow_cases"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        def make(label):
            def fn():
                time.sleep(self.params.pause_s / 3)
            return Case(label, fn, Work(items=1))
        return [make(label) for label in ("first", "second", "third")]

@hookimpl
def perfsuite_register_workloads(register):
    register(Slow)
"""


def _child(tmp_path, phases, gap_s):
    env = dict(os.environ, NOTE_GAP_S=str(gap_s))
    env[SPEC_ENV] = str(tmp_path / "spec.json")
    env.pop("RANK", None)
    return subprocess.Popen([sys.executable, "-c", NOTER, *phases], env=env)


def test_the_runner_hears_each_note_of_the_process_it_waits_for(tmp_path):
    proc = _child(tmp_path, ["setup", "bf16", "fp8"], gap_s=1.2)  # longer than a poll: none missed
    notes: list[Note] = []
    progress.wait(proc, 60.0, tmp_path / "spec.json", notes.append)
    assert proc.returncode == 0
    assert [(n.phase, n.done, n.total) for n in notes] == [("setup", 0, 3), ("bf16", 1, 3), ("fp8", 2, 3)]
    assert notes[1].text() == "bf16 (1/3)"


def test_waiting_with_notes_still_times_out(tmp_path):
    proc = _child(tmp_path, ["forever"], gap_s=60)
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        progress.wait(proc, 1.0, tmp_path / "spec.json", lambda note: None)
    assert time.monotonic() - t0 < 10
    proc.kill()
    proc.wait()


def test_time_left_from_the_steps_done():
    assert eta_s(30.0, Note("x", 1, 4)) == pytest.approx(90.0)
    assert eta_s(30.0, Note("x", 0, 4)) is None and eta_s(30.0, Note("x")) is None


def test_a_run_prints_a_line_per_step_with_the_time_left_when_not_on_a_terminal(cli, add_plugin):
    add_plugin("slow", SLOW_CASES)
    proc = cli("run", "demo.slow_cases", "--device", "cpu", "--iterations", "3", "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stderr.splitlines()]
    assert "running demo.slow_cases on cpu" in lines
    steps = [line for line in lines if line.startswith("demo.slow_cases: ")]
    assert re.fullmatch(r"demo\.slow_cases: first \(0/3\), \d+ s elapsed", steps[0]), steps[0]
    assert any(re.fullmatch(r"demo\.slow_cases: second \(1/3\), \d+ s elapsed, about \d+ s left", ln) for ln in steps)
    assert any(re.fullmatch(r"demo\.slow_cases: third \(2/3\), \d+ s elapsed, about \d+ s left", ln) for ln in steps)


def test_the_progress_line_shows_the_time_elapsed_and_left_once_a_rate_is_known():
    """A training run notes epoch 1 at step 0 after a minute of start-up and compilation, then
    every few seconds within the epoch: the time left comes from the steps' own rate."""
    pace = Pace(started=1000.0)
    assert pace.line(Note("epoch 1", 0, 400), 1060.0) == "epoch 1 (0/400), 1 min 00 s elapsed"
    # 40 steps in 20 s: 360 more take 3 min, not the 9 min that the start-up would make them
    assert pace.line(Note("epoch 1", 40, 400), 1080.0) == "epoch 1 (40/400), 1 min 20 s elapsed, about 3 min 00 s left"
    assert pace.line(Note("epoch 2", 200, 400), 1160.0).endswith("2 min 40 s elapsed, about 1 min 40 s left")
    # a phase without a count, and a new count measured afresh
    assert pace.line(Note("evaluating"), 1170.0) == "evaluating, 2 min 50 s elapsed"
    fresh = Pace(started=0.0)
    assert fresh.line(Note("bf16", 1, 3), 30.0) == "bf16 (1/3), 30 s elapsed, about 1 min 00 s left"
    assert duration(3 * 3600 + 5 * 60) == "3 h 05 min"
