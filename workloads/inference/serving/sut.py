"""LoadGen's system under test as an HTTP endpoint: each sample LoadGen issues becomes one
streamed completion, sent by the asyncio client on an event loop of its own thread.

The first content chunk of a sample is reported to LoadGen at once (``FirstTokenComplete``,
with the chunk's text), and the end of its stream completes the sample with its token count
(``QuerySamplesComplete``, the answer's text as the response data), so LoadGen's TTFT, TPOT
and latency are the endpoint's. Every request's own record (chunk times, tokens, failure
reason) is kept for the run's client-side figures and error budget.

A request that fails (HTTP error, stall, malformed chunk, truncation, timeout) is still
answered to LoadGen, at once, with no data and one token, and counted with its reason: LoadGen
always finishes. ``fail`` (the harness's bound passed) answers everything outstanding. The
failure is kept and a failed sample answered as the batching SUT of the other inference
workloads does it, by the same code (``_sut.FailureLatch``, ``_sut.complete_empty``).

It offers what ``perfsuite.workloads.inference._harness.run_test`` uses of a SUT (``handle``, ``reset``,
``fail``, ``failure``, ``raise_if_failed``, ``stats``).
"""

from __future__ import annotations

import array
import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from perfsuite.workloads.inference._sut import FailureLatch, SUTStats, complete_empty
from perfsuite.workloads.inference.serving.client import Endpoint, RequestResult, Timeouts, new_session, stream_request
from perfsuite.workloads.inference.serving.load import event_loop


class HTTPSUT(FailureLatch):
    def __init__(
        self,
        lg: Any,
        endpoint: Endpoint,
        bodies: dict[int, bytes],
        timeouts: Timeouts,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.lg = lg
        self.endpoint = endpoint
        self.bodies = bodies
        self.timeouts = timeouts
        self.count_tokens = count_tokens
        self.handle: Any = None
        self.stats = SUTStats()
        self.results: list[RequestResult] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._outstanding: dict[int, RequestResult] = {}  # LoadGen response id -> its request
        self._first_sent: set[int] = set()
        self._tasks: set[asyncio.Future] = set()
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        loop = event_loop()()

        async def open_session() -> Any:
            return new_session()

        self._session = loop.run_until_complete(open_session())  # made on the loop that will use it
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._session.close())
                loop.close()

        self._thread = threading.Thread(target=run, name="serving-client", daemon=True)
        self._thread.start()
        self.handle = self.lg.ConstructSUT(self.issue_query, self.flush_queries)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=self.timeouts.request_s)
        if self.handle is not None:
            self.lg.DestroySUT(self.handle)
            self.handle = None

    def reset(self) -> None:
        """Fresh figures for the next LoadGen test."""
        self.stats = SUTStats()
        self.results = []

    def call(self, coro: Any) -> Any:
        """Run a coroutine on the client's loop (calibration requests) and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def send(self, index: int) -> RequestResult:
        """One request outside LoadGen (warm-up, calibration)."""
        return await stream_request(
            self._session,
            self.endpoint,
            self.bodies[index],
            RequestResult(index, time.perf_counter_ns()),
            self.timeouts,
            count_tokens=self.count_tokens,
        )

    def fail(self, reason: str) -> None:
        """The harness gave up on LoadGen: answer every outstanding sample now."""
        self._latch(reason)
        with self._lock:
            late = list(self._outstanding.items())
            self._outstanding.clear()
        for rid, r in late:
            self._answer(rid, r, failed=True)

    # -- LoadGen's callbacks ----------------------------------------------------------------
    def issue_query(self, query_samples: Sequence[Any]) -> None:
        now = time.perf_counter_ns()
        batch = [(q.id, q.index) for q in query_samples]
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._launch, batch, now)

    def flush_queries(self) -> None:
        """LoadGen's end-of-traffic call: every sample is sent as it comes, nothing is held back."""

    # -- on the client's loop -------------------------------------------------------------------
    def _launch(self, batch: list[tuple[int, int]], issued_ns: int) -> None:
        for rid, index in batch:
            r = RequestResult(index, issued_ns)
            with self._lock:
                self._outstanding[rid] = r
            task = asyncio.ensure_future(self._one(rid, r))
            self._tasks.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(self._tasks.discard)

    async def _one(self, rid: int, r: RequestResult) -> None:
        def first(res: RequestResult) -> None:
            with self._lock:
                if rid not in self._outstanding:
                    return  # answered already (the harness failed the run)
                self._first_sent.add(rid)
            data = array.array("B", res.text.encode() or b"\0")
            self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(rid, data.buffer_info()[0], len(data))])

        await stream_request(
            self._session,
            self.endpoint,
            self.bodies[r.index],
            r,
            self.timeouts,
            on_first=first,
            count_tokens=self.count_tokens,
        )
        with self._lock:
            if self._outstanding.pop(rid, None) is None:
                return
        self._answer(rid, r, failed=not r.ok)

    def _answer(self, rid: int, r: RequestResult, failed: bool) -> None:
        """Complete one sample to LoadGen (its first token first, where it has not been sent)."""
        with self._lock:
            first_sent = rid in self._first_sent
            self._first_sent.discard(rid)
        if failed:  # as every LoadGen SUT here answers a failed sample
            complete_empty(self.lg, [rid], tokens=True, first_token_ids=() if first_sent else [rid])
        else:
            payload = r.text.encode() or b"\0"
            data = array.array("B", payload)  # alive until LoadGen has copied it
            addr, size = data.buffer_info()[0], len(payload)
            if not first_sent:
                self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(rid, addr, size)])
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(rid, addr, size, max(1, r.output_tokens))])
        s = self.stats
        s.batches += 1
        s.batch_sizes.append(1)
        if not failed:
            s.samples += 1
            s.tokens += r.output_tokens
            s.latencies_s.append(r.e2e_s)
        if r.done_ns == 0:  # answered by ``fail`` while still streaming
            r.reason, r.detail = r.reason or "timeout", r.detail or "LoadGen's bound passed while it streamed"
        self.results.append(r)
