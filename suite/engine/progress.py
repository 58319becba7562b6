"""What a run is doing while it runs: the runner waits for its measuring process in short
slices and hands each new progress note of rank 0 (``perfsuite.distributed.note_progress``:
the case, size, scenario or epoch, and how many of how many steps are done) to whoever
watches, such as ``perfsuite run``'s progress display; :class:`Pace` says how long the run has
taken and, once a rate is known, about how long it has left (:func:`eta_s`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``1 h 05 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


@dataclass
class Pace:
    """Elapsed time and time left of one run, from the notes it hands the runner.

    The rate is measured from the first note that had a count, not from the start: before it the
    process started, imported its framework and compiled (a training run's first epoch note comes
    after a minute of that), which says nothing of how long the steps take. With only one counted
    note so far, the time since the start stands in, as :func:`eta_s` has it. A new count (a
    different ``total``, or fewer steps done: the next phase) measures its rate afresh.
    """

    started: float
    first: tuple[float, int, int] | None = field(default=None)  # (when, done, total) of the first counted note

    def left_s(self, note: Note, now: float) -> float | None:
        """Seconds left after ``note`` seen at ``now`` (None while no rate is known)."""
        if not note.total or note.done is None or note.done > note.total:
            return None
        if self.first is None or self.first[2] != note.total or note.done < self.first[1]:
            self.first = (now, note.done, note.total)
        when, done, _ = self.first
        if note.done > done and now > when:
            return (now - when) / (note.done - done) * (note.total - note.done)
        return eta_s(now - self.started, note)

    def line(self, note: Note, now: float) -> str:
        """The progress line: ``epoch 1 (120/400), 1 min 05 s elapsed, about 3 min 02 s left``,
        the time left once a rate is known."""
        left = self.left_s(note, now)
        text = f"{note.text()}, {duration(now - self.started)} elapsed"
        return text + (f", about {duration(left)} left" if left is not None else "")
