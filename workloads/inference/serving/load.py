"""Load shapes of ``inference.serving`` and the client processes that send them.

Open loop (a request rate): arrival times drawn as vLLM's ``bench serve`` draws them, gaps from
a gamma distribution of shape ``burstiness`` and mean ``1 / rate`` (burstiness 1: a Poisson
process; below 1 burstier, above 1 more even; ``inf`` evenly spaced), rescaled so that the last
request leaves at ``n / rate`` exactly, which keeps the offered rate the same for every seed.
Closed loop (a concurrency): N requests in flight, each slot sending its next request as soon
as its last one ends.

A :class:`ClientPool` runs a :class:`Job` in up to ``processes`` client processes (one: in
this process), each an asyncio loop (uvloop's where installed) with its own keep-alive
connections, as AIPerf's workers do; ``serving.capacity`` measures what one process sustains.
Open loop: request k goes to process k mod P and leaves at its scheduled time on the shared
monotonic clock, never before (an absolute deadline, so a late wake-up does not shift the
requests after it, and the arrivals are the same from any number of processes). Closed loop:
one process, unless the job names more (the capacity measurement, which must saturate the
client), and never more processes than requests in flight. Why one: the load a closed loop puts
on a server is not only how many requests are in flight but when they arrive. Slots whose
answers end in the same engine step send their next requests in one burst from one event loop,
and a continuous-batching engine admits the burst in one prefill step, as it does the one-loop
reference client's. Split between processes, the slots become independent loops that start and
answer a few milliseconds apart: the engine admits their bursts in separate steps, each one
costing the others' running requests a prefill (and, on a GPU engine that keeps CUDA graphs per
batch shape, a mixed batch off its decode path), so the same concurrency measures a slower
engine. One process sends a closed loop far beyond any engine's rate.
Every request's scheduled and actual send time are kept, so a client that fell behind its
schedule shows it (``send lag``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from perfsuite.workloads.inference.serving.client import Endpoint, RequestResult, Timeouts, new_session, stream_request
from perfsuite.workloads.inference.serving.http import Session

START_LEAD_S = 0.3  # a multi-process job starts this long after it is handed out: every process is waiting
READY_TIMEOUT_S = 60.0  # a spawned client process imports the client before it says it is ready
# The event loop's timers tick in milliseconds (epoll's timeout, uvloop's clock): a shorter
# sleep returns at once, so waiting out a sub-millisecond gap with it would spin the loop.
TIMER_TICK_S = 0.001


def arrival_offsets_s(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """Send times (seconds from the start) of ``n`` requests at ``rate`` per second."""
    import numpy as np

    if n < 1:
        return []
    if not rate > 0:
        raise ValueError(f"a request rate must be greater than 0, not {rate:g}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be greater than 0, not {burstiness:g}")
    if math.isinf(rate):
        return [0.0] * n
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / rate)
    else:
        gaps = np.random.default_rng(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    times = np.cumsum(gaps)
    times *= (n / rate) / times[-1]
    times -= times[0]  # the first request leaves at once
    return [float(t) for t in times]


def token_counter(tokenizer: str | None) -> Callable[[str], int] | None:
    """A function counting a text's tokens with the ``tokenizer.json`` at ``tokenizer`` (a file
    or a folder holding one), or None without one."""
    if not tokenizer:
        return None
    from tokenizers import Tokenizer

    path = Path(tokenizer)
    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises its own exception type with the parser's message
        raise ValueError(f"the tokenizer {file} cannot be read: {exc}") from exc
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


@dataclass
class Job:
    """Requests to send: ``order`` (prompt indices) with their ``bodies``; open loop when
    ``offsets_s`` gives each one's send time, else closed loop at ``concurrency``."""

    endpoint: Endpoint
    timeouts: Timeouts
    bodies: dict[int, bytes]
    order: list[int]
    offsets_s: list[float] | None = None
    concurrency: int = 1
    tokenizer: str | None = None
    processes: int = 0  # client processes that send it; 0: every one for an open loop, one for a closed loop
    start_ns: int = 0  # set by the pool
    positions: list[int] = field(default_factory=list)  # which of ``order`` this process sends

    def __post_init__(self) -> None:
        if self.offsets_s is None and self.concurrency < 1:
            raise ValueError(f"a closed loop needs at least 1 request in flight, not {self.concurrency}")
        if self.processes < 0:
            raise ValueError(f"a job's client processes must be 0 (the load decides) or more, not {self.processes}")

    def senders(self, available: int) -> int:
        """How many of ``available`` client processes send this job: a closed loop stays in one
        event loop unless it names more (never more processes than requests in flight)."""
        wanted = self.processes or (available if self.offsets_s is not None else 1)
        if self.offsets_s is None:
            wanted = min(wanted, self.concurrency)
        return max(1, min(available, wanted))

    def share(self, worker: int, workers: int) -> "Job":
        """The part of this job that client process ``worker`` of ``workers`` sends."""
        positions = list(range(worker, len(self.order), workers))
        concurrency = self.concurrency // workers + (1 if worker < self.concurrency % workers else 0)
        bodies = {self.order[k]: self.bodies[self.order[k]] for k in positions}
        return Job(
            self.endpoint,
            self.timeouts,
            bodies,
            self.order,
            self.offsets_s,
            concurrency,
            self.tokenizer,
            1,
            self.start_ns,
            positions,
        )


async def _run(job: Job, session: Session, count: Callable[[str], int] | None) -> list[RequestResult]:
    positions = job.positions or list(range(len(job.order)))
    if job.offsets_s is not None:
        tasks = []
        for k in positions:
            due = job.start_ns + int(job.offsets_s[k] * 1e9)
            while (wait := (due - perf_counter_ns()) * 1e-9) > 0:  # a timer may fire a little early
                await asyncio.sleep(max(wait, TIMER_TICK_S))
            index = job.order[k]
            tasks.append(
                asyncio.create_task(
                    stream_request(
                        session,
                        job.endpoint,
                        job.bodies[index],
                        RequestResult(index, due),
                        job.timeouts,
                        count_tokens=count,
                    )
                )
            )
        return list(await asyncio.gather(*tasks))
    results: list[RequestResult] = []
    todo = iter(positions)
    while perf_counter_ns() < job.start_ns:
        await asyncio.sleep((job.start_ns - perf_counter_ns()) / 1e9)

    async def slot() -> None:
        for k in todo:  # one iterator shared by every slot: each request is sent once
            index = job.order[k]
            results.append(
                await stream_request(
                    session,
                    job.endpoint,
                    job.bodies[index],
                    RequestResult(index, perf_counter_ns()),
                    job.timeouts,
                    count_tokens=count,
                )
            )

    await asyncio.gather(*(slot() for _ in range(job.concurrency)))
    return results


def event_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop where it is installed (about twice asyncio's streamed requests per
    second on one core), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


class Sender:
    """One client process's event loop, keep-alive connections and token counters, kept from job
    to job (a sweep's steps, the capacity measurement's phases), so that a job's first requests
    find their connections open as its later ones do. A token counter is read from its
    ``tokenizer.json`` once, by :meth:`prepare`, before a job's schedule starts: a large
    vocabulary takes a tenth of a second or more to load, which on the schedule's clock would make
    a step's first sends late."""

    def __init__(self) -> None:
        self.loop = event_loop()()
        self.session = new_session()
        self._counters: dict[str, Callable[[str], int] | None] = {}
        self.prepared_ns: dict[str, int] = {}  # when each tokenizer was ready (the clock of the schedules)

    def prepare(self, tokenizer: str | None) -> Callable[[str], int] | None:
        """The token counter of a job's ``tokenizer``, loaded on first use and kept."""
        key = tokenizer or ""
        if key not in self._counters:
            self._counters[key] = token_counter(tokenizer)
            self.prepared_ns[key] = perf_counter_ns()
        return self._counters[key]

    def run(self, job: Job) -> list[RequestResult]:
        count = self.prepare(job.tokenizer)
        if not job.start_ns:
            job.start_ns = perf_counter_ns()
        return self.loop.run_until_complete(_run(job, self.session, count))

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.session.close())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    def __enter__(self) -> "Sender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_here(job: Job) -> list[RequestResult]:
    """Send a whole job from this process, on connections of its own."""
    with Sender() as sender:
        return sender.run(job)


def _worker_main(conn: Any) -> None:
    """A client process: load a job's token counter when asked ("prepare", the tokenizer's path),
    run each job it receives ("run"), send back its results; None ends it. The client's modules
    are imported before it says it is ready, so a job's schedule starts on time."""
    with Sender() as sender:
        conn.send(("ready", None))
        while True:
            message = conn.recv()
            if message is None:
                return
            verb, part = message
            try:
                if verb == "prepare":
                    sender.prepare(part)
                    conn.send(("ok", None))
                else:
                    conn.send(("ok", sender.run(part)))
            except Exception as exc:  # noqa: BLE001 - reported to the pool, which raises it in the measuring process
                conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ClientPool:
    """``processes`` client processes kept for a run (spawned once: starting one costs a
    Python interpreter and the client's imports)."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError(f"client processes must be at least 1, not {processes}")
        self.processes = processes
        self._workers: list[tuple[Any, Any]] = []
        self._here: Sender | None = None  # one process: this one sends, from the thread that runs jobs
        if processes > 1:
            ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs LoadGen's threads
            for _ in range(processes):
                here, there = ctx.Pipe()
                proc = ctx.Process(target=_worker_main, args=(there,), daemon=True, name="serving-client")
                proc.start()
                self._workers.append((proc, here))
            for _proc, conn in self._workers:
                if not conn.poll(READY_TIMEOUT_S):
                    self.close()
                    raise RuntimeError(f"a client process was not ready within {READY_TIMEOUT_S:g} s")
                conn.recv()

    @property
    def pids(self) -> list[int]:
        """The processes that send (this one where there is one), for their CPU time."""
        return [proc.pid for proc, _ in self._workers] or [os.getpid()]

    def senders(self, job: Job) -> int:
        """How many of this pool's processes send ``job`` (:meth:`Job.senders`)."""
        return job.senders(self.processes)

    def run(self, job: Job) -> list[RequestResult]:
        """Send ``job``: every sending process first loads what the job needs (its token
        counter), then the schedule starts, so that nothing a process loads is on its clock."""
        if not self._workers:
            if self._here is None:
                self._here = Sender()
            self._here.prepare(job.tokenizer)
            job.start_ns = perf_counter_ns()
            return self._here.run(job)
        workers = self._workers[: self.senders(job)]
        self._each(workers, "prepare", lambda w: job.tokenizer)  # the path only, not the job's bodies
        job.start_ns = perf_counter_ns() + int(START_LEAD_S * 1e9)
        out: list[RequestResult] = []
        for payload in self._each(workers, "run", lambda w: job.share(w, len(workers))):
            out.extend(payload)
        return out

    @staticmethod
    def _each(workers: list[tuple[Any, Any]], verb: str, part: Callable[[int], Any]) -> list[Any]:
        """Hand each worker its part of a job under ``verb`` and collect the answers; a worker's
        error is raised here, after every worker has answered (none is left mid-job)."""
        for w, (_, conn) in enumerate(workers):
            conn.send((verb, part(w)))
        answers: list[Any] = []
        errors: list[str] = []
        for _proc, conn in workers:
            status, payload = conn.recv()
            (answers if status == "ok" else errors).append(payload)
        if errors:
            raise RuntimeError(f"a client process failed: {errors[0]}")
        return answers

    def close(self) -> None:
        if self._here is not None:
            self._here.close()
            self._here = None
        for _proc, conn in self._workers:
            with contextlib.suppress(BrokenPipeError, OSError):  # gone already: joined or killed below
                conn.send(None)
        deadline = time.monotonic() + 5.0
        for proc, _ in self._workers:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._workers.clear()

    def __enter__(self) -> "ClientPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
