"""What a run is doing while it runs: the runner waits for its measuring process in short
slices and hands each new progress note of rank 0 (``perfsuite.distributed.note_progress``:
the case, size, scenario or epoch, and how many of how many steps are done) to whoever
watches, such as ``perfsuite run``'s progress display; :func:`eta_s` estimates the time left."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfsuite.distributed import read_progress

POLL_S = 0.5  # how often the runner looks for a new note while it waits


@dataclass(frozen=True)
class Note:
    phase: str
    done: int | None = None  # steps behind the run
    total: int | None = None  # steps in all, where the workload knows

    def text(self) -> str:
        """``bf16 (1/3)``, or the phase alone where the count is not known."""
        return f"{self.phase} ({self.done}/{self.total})" if self.total else self.phase


def wait(
    proc: subprocess.Popen, timeout_s: float | None, spec_path: Path, on_note: Callable[[Note], None] | None
) -> None:
    """``proc.wait(timeout_s)``, calling ``on_note`` with each new note of rank 0 meanwhile;
    raises :class:`subprocess.TimeoutExpired` as ``proc.wait`` does."""
    if on_note is None:
        proc.wait(timeout=timeout_s)
        return
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last: tuple | None = None
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        try:
            proc.wait(timeout=POLL_S if left is None else max(0.0, min(POLL_S, left)))
            return
        except subprocess.TimeoutExpired:
            if left is not None and left <= POLL_S:
                raise
        raw = read_progress(spec_path)
        if raw is not None and (raw.get("time"), raw.get("phase")) != last:
            last = (raw.get("time"), raw.get("phase"))
            on_note(Note(str(raw.get("phase")), raw.get("done"), raw.get("total")))


def eta_s(elapsed_s: float, note: Note) -> float | None:
    """Seconds left if the steps still to do take as long as those done (None before the first
    step is done, or without a count)."""
    if not note.total or not note.done or note.done > note.total:
        return None
    return elapsed_s * (note.total - note.done) / note.done
