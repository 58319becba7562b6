"""The system under test: LoadGen's queries in, batched model calls, responses out.

LoadGen calls ``issue_query`` from its own thread with a list of samples; the
:class:`BatchingSUT` queues them and one worker thread takes batches off the queue (up to
``max_batch`` samples; a partial batch leaves when its oldest sample has waited
``max_wait_s``, or at once when the queue holds no more), calls the model backend, and
completes every sample to LoadGen with its output bytes. A generating backend reports its
first token per sample (``FirstTokenComplete``) before the whole answer, which is how
LoadGen measures time to first token.

A LoadGen run only ends when every issued sample has been completed, so a SUT bug would
hang it. Here nothing can: an exception in the model call is recorded as the run's failure
and from then on every queued and newly issued sample is completed at once, without the
model, so that LoadGen returns; a watchdog thread completes (and fails the run for) any
sample handed to the model longer than ``query_timeout_s`` ago: a dropped query or a hung model call.
:meth:`BatchingSUT.raise_if_failed` then turns the recorded reason into the run's error.

LoadGen's module is passed in (``lg``), so that this file imports nothing heavy.
"""

from __future__ import annotations

import array
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

WATCHDOG_PERIOD_S = 0.05


class SUTFailure(RuntimeError):
    """The system under test failed a run: a model call raised, or a sample was never completed."""


class FailureLatch:
    """How every LoadGen SUT here fails a run (the batcher below, ``inference.serving``'s HTTP
    SUT): the first reason is kept, later ones are not (they follow from it), and
    :meth:`raise_if_failed` turns it into the run's error once LoadGen has returned."""

    _failure: str | None = None

    @property
    def failure(self) -> str | None:
        return self._failure

    def raise_if_failed(self) -> None:
        if self._failure is not None:
            raise SUTFailure(self._failure)

    def _latch(self, reason: str) -> None:
        """Record ``reason`` as the run's failure unless one is recorded already."""
        if self._failure is None:
            self._failure = reason


def complete_empty(lg: Any, ids: Sequence[int], *, tokens: bool, first_token_ids: Sequence[int] = ()) -> None:
    """Answer LoadGen's samples ``ids`` with no data, as a failed run answers them (LoadGen only
    returns once every issued sample is completed): their first token first where LoadGen
    measures one (``first_token_ids``), then each completed with one token (``tokens``) or none."""
    empty = array.array("B", b"\0")  # alive until LoadGen has copied it
    addr = empty.buffer_info()[0]
    if first_token_ids:
        lg.FirstTokenComplete([lg.QuerySampleResponse(i, addr, 0) for i in first_token_ids])
    if tokens:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, addr, 0, 1) for i in ids])
    else:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, addr, 0) for i in ids])


@dataclass
class Pending:
    id: int  # LoadGen's response id
    index: int  # the sample's index in the query sample library
    issued_ns: int
    dispatched_ns: int = 0  # when the batcher handed it to the model; 0 while queued


@dataclass
class Output:
    """One sample's answer: its bytes for LoadGen (and its accuracy log, which the accuracy
    check reads back), the token count for token latencies (0 for a classifier), and the
    decoded value (what the float32 reference's outputs are compared as)."""

    data: bytes
    n_tokens: int
    value: Any


class Backend(Protocol):
    def run_batch(self, indices: Sequence[int], first_token: Callable[[Sequence[bytes]], None] | None) -> list[Output]:
        """Run the model on these samples; a generating backend calls ``first_token`` once,
        with each sample's first token as bytes, as soon as it has them."""


@dataclass
class SUTStats:
    batches: int = 0
    samples: int = 0
    tokens: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)  # issue -> completion, as seen by the SUT


class BatchingSUT(FailureLatch):
    """A dynamic batcher between LoadGen and a :class:`Backend`.

    ``inject`` is the harness's self-test: ``drop`` never completes the third sample it
    is given, ``raise`` makes the second model call raise; both must fail the run with the
    reason and let LoadGen finish.
    """

    def __init__(
        self,
        lg: Any,
        backend: Backend,
        *,
        max_batch: int,
        max_wait_s: float,
        query_timeout_s: float,
        streams_tokens: bool,
        inject: str = "none",
    ) -> None:
        self.lg = lg
        self.backend = backend
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.query_timeout_s = query_timeout_s
        self.streams_tokens = streams_tokens
        self.inject = inject
        self.stats = SUTStats()
        self._queue: deque[Pending] = deque()
        self._outstanding: dict[int, Pending] = {}
        self._cv = threading.Condition()
        self._stop = False
        self._calls = 0
        self._seen = 0
        self._threads: list[threading.Thread] = []
        self._tasks: deque[tuple[Callable[[], Any], Future]] = deque()
        self.handle = None

    # -- LoadGen's callbacks ----------------------------------------------------------
    def issue_query(self, query_samples: Sequence[Any]) -> None:
        now = time.perf_counter_ns()
        with self._cv:
            failed = self._failure is not None
            if not failed:
                for q in query_samples:
                    p = Pending(q.id, q.index, now)
                    self._queue.append(p)
                    self._outstanding[p.id] = p
                self._cv.notify_all()
        if failed:  # after a failure nothing runs: answer at once so that LoadGen can finish
            self._complete_empty([Pending(q.id, q.index, now) for q in query_samples], track=False)

    def flush_queries(self) -> None:
        """LoadGen's end-of-traffic call: nothing is held back, so nothing to do."""

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        self.handle = self.lg.ConstructSUT(self.issue_query, self.flush_queries)
        for target, name in ((self._worker, "sut-batcher"), (self._watchdog, "sut-watchdog")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=max(self.query_timeout_s, 1.0))
        self._threads.clear()
        if self.handle is not None:
            self.lg.DestroySUT(self.handle)
            self.handle = None

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the batcher's thread and return its result (or raise its exception).

        Every model call of a run happens on that one thread, warm-up and calibration
        included: torch.compile's CUDA graphs (a static cache on CUDA) are recorded per thread."""
        future: Future = Future()
        with self._cv:
            self._tasks.append((fn, future))
            self._cv.notify_all()
        return future.result()

    def reset(self) -> None:
        """Fresh statistics between LoadGen runs (the failure, if any, stays)."""
        self.stats = SUTStats()

    def fail(self, reason: str) -> None:
        """Record the run's failure (the first reason wins) and answer everything queued."""
        with self._cv:
            self._latch(reason)
            queued = list(self._queue)
            self._queue.clear()
            self._cv.notify_all()
        self._complete_empty(queued)

    # -- the batcher ----------------------------------------------------------------------
    def _next_batch(self) -> list[Pending] | tuple[Callable[[], Any], Future] | None:
        with self._cv:
            while True:
                if self._stop:
                    return None
                if self._tasks:
                    return self._tasks.popleft()
                if self._queue:
                    wait = self._queue[0].issued_ns / 1e9 + self.max_wait_s - time.perf_counter_ns() / 1e9
                    if len(self._queue) >= self.max_batch or wait <= 0:
                        n = min(self.max_batch, len(self._queue))
                        batch = [self._queue.popleft() for _ in range(n)]
                        now = time.perf_counter_ns()
                        for p in batch:
                            p.dispatched_ns = now
                        return batch
                    self._cv.wait(timeout=wait)
                else:
                    self._cv.wait(timeout=0.1)

    def _worker(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            if isinstance(batch, tuple):
                fn, future = batch
                try:
                    future.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller of call()
                    future.set_exception(exc)
                continue
            try:
                self._run(batch)
            except BaseException as exc:  # noqa: BLE001 - the run's failure: recorded, and LoadGen still finishes
                self.fail(f"model call on a batch of {len(batch)} raised {type(exc).__name__}: {exc}")
                self._complete_empty(batch)

    def _run(self, batch: list[Pending]) -> None:
        self._calls += 1
        if self.inject == "raise" and self._calls == 2:
            raise RuntimeError("injected failure (inject=raise)")
        indices = [p.index for p in batch]
        first = self._first_token_sender(batch) if self.streams_tokens else None
        outputs = self.backend.run_batch(indices, first)
        if len(outputs) != len(batch):
            raise RuntimeError(f"backend returned {len(outputs)} outputs for {len(batch)} samples")
        keep: list[Pending] = []
        keep_out: list[Output] = []
        for p, out in zip(batch, outputs):
            self._seen += 1
            if self.inject == "drop" and self._seen == 3:
                continue  # the self-test's dropped sample: never completed here
            keep.append(p)
            keep_out.append(out)
        self._complete(keep, keep_out)

    def _first_token_sender(self, batch: list[Pending]) -> Callable[[Sequence[bytes]], None]:
        def send(tokens: Sequence[bytes]) -> None:
            buffers = [array.array("B", t) for t in tokens]
            responses = [self.lg.QuerySampleResponse(p.id, b.buffer_info()[0], len(b)) for p, b in zip(batch, buffers)]
            self.lg.FirstTokenComplete(responses)

        return send

    def _complete(self, batch: list[Pending], outputs: list[Output]) -> None:
        done = time.perf_counter_ns()
        buffers = [array.array("B", o.data) for o in outputs]  # alive until LoadGen has copied them
        with self._cv:
            live = [(p, o, b) for p, o, b in zip(batch, outputs, buffers) if self._outstanding.pop(p.id, None)]
        if not live:
            return
        if self.streams_tokens:
            responses = [self.lg.QuerySampleResponse(p.id, b.buffer_info()[0], len(b), o.n_tokens) for p, o, b in live]
        else:
            responses = [self.lg.QuerySampleResponse(p.id, b.buffer_info()[0], len(b)) for p, o, b in live]
        s = self.stats
        s.batches += 1
        s.batch_sizes.append(len(batch))
        for p, o, _ in live:
            s.samples += 1
            s.tokens += o.n_tokens
            s.latencies_s.append((done - p.issued_ns) * 1e-9)
        self.lg.QuerySamplesComplete(responses)

    def _complete_empty(self, batch: list[Pending], track: bool = True) -> None:
        """Answer samples with no data (the run has failed): LoadGen needs every one answered."""
        if track:
            with self._cv:
                batch = [p for p in batch if self._outstanding.pop(p.id, None)]
        if not batch:
            return
        ids = [p.id for p in batch]
        complete_empty(self.lg, ids, tokens=self.streams_tokens, first_token_ids=ids if self.streams_tokens else ())

    # -- the watchdog --------------------------------------------------------------------
    def _watchdog(self) -> None:
        limit_ns = int(self.query_timeout_s * 1e9)
        while True:
            with self._cv:
                if self._stop:
                    return
                now = time.perf_counter_ns()
                # Measured from dispatch: in Offline every sample is issued at once and waits its turn.
                late = [p for p in self._outstanding.values() if p.dispatched_ns and now - p.dispatched_ns > limit_ns]
                if late:
                    p = late[0]
                    self._latch(
                        f"sample {p.index} (LoadGen response id {p.id}) was not completed within "
                        f"{self.query_timeout_s:g} s of reaching the model: dropped by the SUT or a hung "
                        f"model call ({len(late)} sample(s) late)"
                    )
                stale = list(self._queue) if late else []
                if late:
                    self._queue.clear()
            if late:
                self._complete_empty(late + stale)
            time.sleep(WATCHDOG_PERIOD_S)
