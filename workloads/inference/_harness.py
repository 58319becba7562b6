"""One LoadGen test against a :class:`BatchingSUT`, bounded, with its logs kept.

``StartTest`` blocks its caller until LoadGen has issued every query and seen every sample
completed; it runs here on a thread of its own while this thread waits with a bound. When
the bound passes, the SUT is failed (which answers every outstanding sample, so LoadGen
can return) and the run raises with the reason; if LoadGen still does not return, the
run raises anyway and the runner's timeout ends the process.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.workloads.inference._summary import LoadGenSummary, read_summary
from perfsuite.workloads.inference._sut import BatchingSUT, SUTFailure, SUTStats

LOG_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
GRACE_S = 30.0  # after failing the SUT, how long LoadGen gets to notice and return


@dataclass
class LoadGenResult:
    scenario: str
    mode: str
    settings: dict
    log_dir: Path
    wall_s: float
    energy_j: float | None
    stats: SUTStats
    summary: LoadGenSummary | None  # performance mode only
    gpu: dict | None = None  # the GPU sampled during the run (clocks, power, throttle reasons); None without one


def _no_op(samples: Any) -> None:
    """QSL load/unload: every sample is resident from setup on, so there is nothing to move."""


def run_test(
    lg: Any, sut: BatchingSUT, ts: Any, settings: dict, num_samples: int, log_dir: Path, bound_s: float, energy: Any
) -> LoadGenResult:
    """Run one LoadGen test; raise SUTFailure when the SUT failed or LoadGen overran ``bound_s``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(log_dir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    qsl = lg.ConstructQSL(num_samples, num_samples, _no_op, _no_op)
    sut.reset()
    errors: list[BaseException] = []

    def start() -> None:
        try:
            # An empty audit-config name: a stray audit.config in the working folder must not
            # change the test.
            lg.StartTestWithLogSettings(sut.handle, qsl, ts, log, "")
        except BaseException as exc:  # noqa: BLE001 - reported by the waiting thread
            errors.append(exc)

    e0 = energy()
    t0 = time.perf_counter()
    thread = threading.Thread(target=start, name="loadgen", daemon=True)
    thread.start()
    thread.join(timeout=bound_s)
    overran = thread.is_alive()
    if overran:
        sut.fail(f"LoadGen did not finish the {settings['scenario']} {settings['mode']} run within {bound_s:.0f} s")
        thread.join(timeout=GRACE_S)
    wall = time.perf_counter() - t0
    e1 = energy()
    if thread.is_alive():
        raise SUTFailure(
            f"{sut.failure}; LoadGen still had not returned {GRACE_S:.0f} s after every outstanding sample was answered"
        )
    lg.DestroyQSL(qsl)
    trace = log_dir / "mlperf_log_trace.json"
    if trace.exists() and trace.stat().st_size == 0:
        trace.unlink()  # tracing is off: LoadGen leaves an empty file
    if errors:
        raise SUTFailure(f"LoadGen raised {type(errors[0]).__name__}: {errors[0]}")
    sut.raise_if_failed()
    summary = read_summary(log_dir) if settings["mode"] == "performance" else None
    used = e1 - e0 if e0 is not None and e1 is not None and e1 > e0 else None
    return LoadGenResult(settings["scenario"], settings["mode"], settings, log_dir, wall, used, sut.stats, summary)


def read_accuracy_log(log_dir: Path) -> dict[int, bytes]:
    """LoadGen's accuracy log: sample index -> the bytes the SUT returned for it (the last one
    where a sample was logged twice)."""
    path = log_dir / "mlperf_log_accuracy.json"
    if not path.exists():
        raise SUTFailure(f"LoadGen wrote no accuracy log in {log_dir}")
    entries = json.loads(path.read_text() or "[]")
    return {int(e["qsl_idx"]): bytes.fromhex(e["data"]) for e in entries}
