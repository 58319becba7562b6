"""NVML sampled from a process of its own, for a cross-check whose two sides must run alike.

The training cross-check samples the GPU (SM clock, power, clock events) during every block of
either side, so that each round shows the clocks each ran at. The in-process sampler
(``perfsuite.measure.nvml_sampler``) is a thread that wakes every 20 ms and takes the GIL: during
the suite's blocks it ran inside the suite's rank, beside its training step, while during the bare
loop's blocks it ran outside the bare loop's process. On several ranks a rank held up at its
step holds every rank up at the next all-reduce, so that asymmetry is a cost the suite's side
alone paid. Here the sampling runs in a child (``python -m perfsuite.crosscheck.gpu_watch INDEX
PERIOD_S``), told by a line on its stdin when a block starts (``start``, answered ``started``
once the first sample is taken) and ends (``stop``, answered with the block's summary as one JSON
line, ``nvml_sampler.summarize``'s); ``quit`` or the end of its stdin ends it. Both sides are
then sampled from outside their own processes, and the suite's process runs no thread of it.

Every wait for the child is bounded (``ANSWER_TIMEOUT_S``); a child that cannot start or answer
leaves ``sampler_error`` in the block's summary and the cross-check goes on without samples.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

ANSWER_TIMEOUT_S = 10.0


class LineReader:
    """Lines from a file descriptor, each read with a bound, without Python's buffering (which
    would hide from ``select`` a line already read from the descriptor)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pending = b""
        self.closed = False

    def ready(self, timeout_s: float) -> bool:
        """Whether a line (or the end) can be read now, waiting at most ``timeout_s``."""
        if b"\n" in self._pending or self.closed:
            return True
        return bool(select.select([self.fd], [], [], max(0.0, timeout_s))[0])

    def readline(self, timeout_s: float | None) -> str | None:
        """The next line without its newline; None at the end; TimeoutError past ``timeout_s``
        (None: no bound, for the child, whose stdin ends when its parent does)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._pending:
            if self.closed:
                if not self._pending:
                    return None
                line, self._pending = self._pending, b""
                return line.decode(errors="replace")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], wait)[0]:
                raise TimeoutError(f"no line within {timeout_s:g} s")
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.closed = True
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace")


class GpuWatch:
    """The child sampling GPU ``index`` (NVML's index). Calling it gives a context manager for
    one block, as ``RunContext.gpu_sampler`` does: ``with watch() as s: ...; s.summary()``."""

    def __init__(self, index: int, period_s: float | None = None, argv: list[str] | None = None) -> None:
        from perfsuite.measure.nvml_sampler import DEFAULT_PERIOD_S

        self.period_s = DEFAULT_PERIOD_S if period_s is None else period_s
        # argv: another child speaking the same lines (tests give one synthetic readings)
        self.argv = argv or [sys.executable, "-m", "perfsuite.crosscheck.gpu_watch", str(index), repr(self.period_s)]
        self.error: str | None = None
        self.proc: subprocess.Popen | None = None
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            self.error = f"the GPU watch did not start: {exc}"
            return
        assert self.proc.stdout is not None
        self._lines = LineReader(self.proc.stdout.fileno())

    def __call__(self) -> Window:
        return Window(self)

    def ask(self, word: str) -> str:
        """Send ``word``; the child's answer (one line). Raises OSError/TimeoutError/EOFError."""
        if self.error is not None:
            raise OSError(self.error)
        assert self.proc is not None and self.proc.stdin is not None
        if self.proc.poll() is not None:
            raise EOFError(f"the GPU watch exited with code {self.proc.returncode}")
        self.proc.stdin.write(f"{word}\n".encode())
        self.proc.stdin.flush()
        line = self._lines.readline(ANSWER_TIMEOUT_S)
        if line is None:
            raise EOFError(f"the GPU watch exited with code {self.proc.wait()}")
        return line

    def close(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=ANSWER_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()  # a watch that will not quit goes: it holds nothing of the run
            self.proc.wait()


class Window:
    """One block sampled by the watch: from ``__enter__`` to ``__exit__``."""

    def __init__(self, watch: GpuWatch) -> None:
        self.watch = watch
        self._summary: dict | None = None
        self._error: str | None = None

    def __enter__(self) -> Window:
        try:
            answer = self.watch.ask("start")
            if answer != "started":
                self._error = f"the GPU watch answered {answer[:200]!r} to start"
        except (OSError, TimeoutError, EOFError) as exc:
            self._error = f"the GPU watch did not start a block: {exc}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._error is not None:
            return
        try:
            answer = self.watch.ask("stop")
            self._summary = json.loads(answer)
        except (OSError, TimeoutError, EOFError, ValueError) as err:
            self._error = f"the GPU watch gave no summary: {err}"

    def summary(self) -> dict | None:
        """The block's summary (``nvml_sampler.summarize``: None without NVML), or the error."""
        if self._error is not None:
            return {"samples": 0, "sampler_error": self._error}
        return self._summary


def serve(index: int, period_s: float, read: Any = None) -> int:
    """The child: answer ``start``/``stop`` on stdin until ``quit`` or its end."""
    from perfsuite.measure import nvml_sampler

    read = read or nvml_sampler.nvml_reader(index)
    lines = LineReader(sys.stdin.fileno())
    out = sys.stdout
    while True:
        word = lines.readline(None)
        if word is None or word == "quit":
            return 0
        if word != "start":
            print(f"gpu_watch: expected 'start' or 'quit', got {word[:80]!r}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        readings: list[Any] = []

        def sample() -> None:
            r = read(time.perf_counter() - t0)
            if r is not None:
                readings.append(r)

        sample()
        out.write("started\n")
        out.flush()
        while not lines.ready(period_s):
            sample()
        word = lines.readline(ANSWER_TIMEOUT_S)
        sample()
        if word is None:
            return 0  # the parent is gone
        if word != "stop":
            print(f"gpu_watch: expected 'stop', got {word!r}", file=sys.stderr)
            return 2
        out.write(json.dumps(nvml_sampler.summarize(readings, period_s)) + "\n")
        out.flush()


def main() -> None:
    if len(sys.argv) != 3:
        print("usage: python -m perfsuite.crosscheck.gpu_watch NVML_INDEX PERIOD_S", file=sys.stderr)
        sys.exit(2)
    try:
        index, period_s = int(sys.argv[1]), float(sys.argv[2])
    except ValueError:
        print(f"gpu_watch: {sys.argv[1]!r} {sys.argv[2]!r} are not an index and a period in seconds", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(index, period_s))


if __name__ == "__main__":
    main()
