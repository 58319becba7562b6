"""The training cross-check's GPU sampling from a child process (``perfsuite.crosscheck.gpu_watch``):
the measuring process carries no thread of it during a block, each block gets its own summary,
and a child that dies or is misused is a recorded error, never a failed cross-check."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from perfsuite.crosscheck.gpu_watch import GpuWatch

# a child speaking the watch's lines with synthetic readings of a power-capped GPU
SYNTHETIC = [
    sys.executable,
    "-c",
    "import sys; from perfsuite.crosscheck.gpu_watch import serve; "
    "from perfsuite.measure.nvml_sampler import Reading; "
    "sys.exit(serve(0, 0.01, read=lambda t: Reading(t, 1455.0, 699.0, ('software power cap',))))",
]


def _tasks() -> set[str]:
    return set(os.listdir(f"/proc/{os.getpid()}/task"))


def test_a_block_is_sampled_by_a_child_and_the_measuring_process_runs_no_thread_of_it():
    watch = GpuWatch(0, argv=SYNTHETIC)
    try:
        threads, tasks = {t.name for t in threading.enumerate()}, _tasks()
        with watch() as block:
            inside_threads, inside_tasks = {t.name for t in threading.enumerate()}, _tasks()
            time.sleep(0.15)
        assert inside_threads == threads and inside_tasks == tasks  # nothing of it wakes in this process
        assert watch.proc is not None and watch.proc.pid != os.getpid() and watch.proc.poll() is None
        first = block.summary()
        assert first is not None and first["samples"] >= 3 and first["sm_clock_mhz_median"] == 1455.0
        assert first["power_capped"] is True and first["sampler_error"] is None
        with watch() as again:
            pass
        second = again.summary()
        assert second is not None and second["samples"] < first["samples"]  # its own block's readings only
    finally:
        watch.close()
    assert watch.proc is not None and watch.proc.returncode == 0


def test_without_nvml_a_block_has_no_samples_and_no_error():
    watch = GpuWatch(0)  # the real child: this machine's NVML reader, none on a CPU runner
    try:
        with watch() as block:
            time.sleep(0.05)
        summary = block.summary()
        assert summary is None or (summary["samples"] >= 2 and summary["sampler_error"] is None)
    finally:
        watch.close()
    assert watch.proc is not None and watch.proc.returncode == 0


def test_a_child_that_dies_is_a_recorded_error_not_a_failure():
    watch = GpuWatch(0, argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
    try:
        with watch() as block:
            pass
        summary = block.summary()
        assert summary is not None and summary["samples"] == 0
        assert "exited with code 3" in summary["sampler_error"]
    finally:
        watch.close()


def test_the_child_refuses_bad_arguments_with_one_line(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "perfsuite.crosscheck.gpu_watch", "first", "soon"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "not an index" in done.stderr


def test_a_watch_that_fails_is_named_beside_each_round_of_the_training_crosscheck(tmp_path: Path):
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from perfsuite.crosscheck import take_turns
    from perfsuite.crosscheck.training import BareLoop, versus_bare_loop

    tiny = ["gpt", "--layers", "1", "--width", "16", "--heads", "2", "--context", "8", "--vocab", "32"]
    bare = BareLoop([*tiny, "--batch", "4", "--device", "cpu", "--precision", "fp32"], tmp_path / "bare.log")
    watch = GpuWatch(0, argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
    try:
        bare.start()
        bare.ready(timeout_s=120)
        found = versus_bare_loop(bare, [100.0], lambda n: 0.01 * n, 2, 4, 2, take_turns, watch)
    finally:
        watch.close()
        bare.close()
    later = found["rounds"][1]  # round 1's suite side is the run's own blocks, sampled by nobody
    for side in ("suite_clocks", "reference_clocks"):
        assert "exited with code 3" in later[side]["sampler_error"], side
        assert later[side]["sm_clock_mhz_median"] is None
    assert found["status"] == "measured" and found["reference_samples_per_s"] > 0
