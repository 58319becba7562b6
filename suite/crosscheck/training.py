"""A bare training loop beside a training workload: the reference that says what the suite's
instrumentation costs (phase events, the data path, MLLOG and goodput bookkeeping).

The bare loop is ``perfsuite/crosscheck/training_reference.py``, a script that imports nothing of the suite:
the same model (built from the same configuration), precision, optimizer, clipping, learning-rate
schedule and compile setting, fed from a device-resident split, timed in blocks of steps with
the host clock between two synchronisations, as the suite times its blocks. It is started by
the measuring process as a served subprocess on the same GPU (``--serve``: it builds, compiles
and warms up once, says it is ready, then times a block of steps on each request), so that the
suite's blocks and its blocks take turns (``perfsuite.crosscheck.take_turns``) in one call: the
suite's first side is its run's own blocks, then the two alternate. Both figures, their ratio
and the instrumentation's cost (1 - the ratio of throughputs) go in the record
(``details["crosscheck"]["train"]``); a script that cannot start or fails is recorded with the
reason, and the run itself stands.

``PERFSUITE_TRAINING_REFERENCE`` names the script; by default the one shipped in the package
(``perfsuite/crosscheck/training_reference.py``), started by its path as a script of its own.
"""

from __future__ import annotations

import json
import math
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_SCRIPT = "PERFSUITE_TRAINING_REFERENCE"
AGREEMENT = 0.03  # the bar: the instrumented loop within 3% of a bare loop of the same model
READY_TIMEOUT_S = 900.0  # building and compiling the bare loop's model (torch.compile of ResNet-50, GPT-2)
BLOCK_TIMEOUT_S = 600.0
# A turn's block lasts at least this long (more steps than an evaluation interval where those
# are quick), after WARM_STEPS untimed steps: a side that has sat idle while the other ran pays
# a wake-up (host threads, NCCL's proxy, clocks) in its first steps, and a block of one
# evaluation interval (a fraction of a second of ResNet-50 on a GPU) varied far more between
# rounds than the runs it was compared with.
MIN_BLOCK_S = 3.0
WARM_STEPS = 3
STDERR_TAIL_LINES = 12


def script_path() -> Path:
    """The bare loop's script: ``PERFSUITE_TRAINING_REFERENCE``, else the one shipped beside
    this module (run by its path, so that it imports nothing of the suite)."""
    named = os.environ.get(ENV_SCRIPT)
    if named:
        return Path(named)
    return Path(__file__).resolve().with_name("training_reference.py")


class ReferenceFailed(RuntimeError):
    """The bare loop did not start, answer or finish; the message is one line with its stderr's tail."""


class BareLoop:
    """``perfsuite/crosscheck/training_reference.py --serve`` as a subprocess: ``ready()`` waits for its build,
    compile and warm-up; ``block(steps)`` times that many steps there; ``close()`` ends it. Its
    stderr goes to ``log`` (kept beside the record)."""

    def __init__(
        self, args: list[str], log: Path, script: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.script = script or script_path()
        self.argv = [sys.executable, str(self.script), *args, "--serve"]
        self.log = log
        self.env = env  # None: this process's environment (one rank)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if not self.script.is_file():
            raise ReferenceFailed(f"the bare loop {self.script} is not there ({ENV_SCRIPT} names it)")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as err:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
                env=self.env,
            )
        threading.Thread(target=self._read, name="bare-loop-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # end of output: the process exited

    def _answer(self, timeout_s: float) -> dict:
        """The next JSON line the script prints (other lines are its chatter)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ReferenceFailed(f"the bare loop did not answer within {timeout_s:g} s{self._tail()}") from None
            if line is None:
                code = self.proc.wait() if self.proc is not None else None
                raise ReferenceFailed(f"the bare loop exited with code {code}{self._tail()}")
            if line.startswith("{"):
                return json.loads(line)

    def ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        return self._answer(timeout_s)

    def block(self, steps: int, timeout_s: float = BLOCK_TIMEOUT_S) -> dict:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"time {steps}\n")
        self.proc.stdin.flush()
        return self._answer(timeout_s)

    def close(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()  # a script that will not quit holds the GPU: it goes
            self.proc.wait()

    def _tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()[-STDERR_TAIL_LINES:]
        except OSError:
            return ""
        return (": " + " | ".join(line.strip() for line in lines if line.strip())) if lines else ""


def rank_environment(rank: int, world: int, local_rank: int, port: int) -> dict[str, str]:
    """The environment of one rank of the bare loop beside rank ``rank`` of a run: torchrun's
    variables for a process group of its own (the run's master address, ``port``), without
    torchrun's elastic-agent variables, which would send its rank 0 to the run's store instead
    of serving its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC_")}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(local_rank),
        MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
        MASTER_PORT=str(port),
    )
    return env


def free_port() -> int:
    """A TCP port free on this host now (rank 0's choice for the bare loop's process group)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def agreed_port(world: int, rank: int) -> int:
    """Rank 0's free port, broadcast over the run's process group so that every rank's bare
    loop joins the same one."""
    if world == 1:
        return free_port()
    import torch.distributed as dist

    box = [free_port() if rank == 0 else 0]
    dist.broadcast_object_list(box, src=0)
    return int(box[0])


def bare_loop_for(
    args: list[str], artifacts: Path, rank: int, world: int, local_rank: int, take_turns: Callable[..., list[dict]]
) -> "BareLoopCheck":
    """The bare loop beside one rank of a run, started: alone on one rank, one rank of a bare
    loop at the run's world size otherwise (its log is ``bare-loop.log``, or
    ``bare-loop.rank<N>.log`` per rank)."""
    if world == 1:
        return BareLoopCheck(BareLoop(args, artifacts / "bare-loop.log"), take_turns)
    env = rank_environment(rank, world, local_rank, agreed_port(world, rank))
    return BareLoopCheck(BareLoop(args, artifacts / f"bare-loop.rank{rank}.log", env=env), take_turns)


class BareLoopCheck:
    """One run's cross-check against the bare loop, as a training workload's driver uses it
    (``ctx.crosscheck.bare_loop``): started early so that it builds and compiles while the run
    initialises, waited for before the timed run, compared after it, and always closed. A
    failure at any step is kept and recorded (``status: failed`` with the reason), never raised."""

    def __init__(self, bare: BareLoop, take_turns: Callable[..., list[dict]]) -> None:
        self.bare = bare
        self.take_turns = take_turns  # perfsuite.crosscheck.take_turns (passed in: no import cycle)
        self.failure: str | None = None
        self.info: dict = {}
        try:
            bare.start()
        except (ReferenceFailed, OSError) as exc:
            self.failure = str(exc)

    def wait_ready(self) -> None:
        """Wait (once) for the bare loop's build, compile and warm-up."""
        if self.failure is None and not self.info:
            try:
                self.info = self.bare.ready()
            except ReferenceFailed as exc:
                self.failure = str(exc)

    def ready_for(self, parameters: int) -> bool:
        """Wait for the bare loop, then whether it trains a model of the suite's ``parameters``;
        where not, ``failure`` says why."""
        self.wait_ready()
        if self.failure is None and self.info.get("parameters") != parameters:
            self.failure = (
                f"not the same model: the bare loop's has {self.info.get('parameters')} parameters, "
                f"the suite's {parameters}"
            )
        return self.failure is None

    def compare(
        self,
        parameters: int,
        suite_rates: list[float],
        suite_block: Callable[[int], float],
        steps: int,
        samples_per_step: int,
        n_rounds: int,
        sampler: Callable[[], Any] | None = None,
        agree: Callable[[int], int] | None = None,
        gpu_index: int | None = None,
    ) -> dict:
        """``versus_bare_loop``, once the bare loop is known to train a model of the suite's
        ``parameters``; the bare loop is closed afterwards. ``agree`` (several ranks): the
        largest of the ranks' block lengths, so that every rank times the same steps.
        ``gpu_index`` (NVML's index of this rank's GPU): every block of either side is read at
        its two ends by this process (``perfsuite.measure.nvml_sampler.Endpoints``: the clocks at
        each end, the mean power between), with nothing sampling beside either side's steps;
        ``sampler`` is used where it is None."""
        out = {"tool": "training_reference.py", "script": str(self.bare.script), "argv": self.bare.argv[1:]}
        try:
            if self.ready_for(parameters):
                try:
                    if gpu_index is not None:
                        from perfsuite.measure.nvml_sampler import Endpoints

                        sampler = lambda: Endpoints(gpu_index)
                    found = versus_bare_loop(
                        self.bare,
                        suite_rates,
                        suite_block,
                        steps,
                        samples_per_step,
                        n_rounds,
                        self.take_turns,
                        sampler,
                        agree,
                    )
                    return {**out, **found, "reference": self.info}
                except ReferenceFailed as exc:
                    self.failure = str(exc)
            return {**out, "status": "failed", "reason": self.failure}
        finally:
            self.close()

    def close(self) -> None:
        self.bare.close()


def versus_bare_loop(
    bare: BareLoop,
    suite_rates: list[float],
    suite_block: Callable[[int], float],
    steps: int,
    samples_per_step: int,
    n_rounds: int,
    take_turns: Callable[..., list[dict]],
    sampler: Callable[[], Any] | None = None,
    agree: Callable[[int], int] | None = None,
) -> dict:
    """The suite's training loop beside the bare loop (already ``ready``), in turns for
    ``n_rounds`` rounds (``take_turns``: ``perfsuite.crosscheck.take_turns``): round 1's suite
    side is the run's own blocks (``suite_rates``, samples per second), later ones
    ``suite_block(n)`` (seconds for ``n`` more steps, timed as the run's blocks are); each later
    side, the bare loop's included, is ``WARM_STEPS`` untimed steps and then one block of
    ``turn_steps`` steps (the evaluation interval, longer where that is under ``MIN_BLOCK_S``).
    ``sampler`` (a fresh
    NVML reader for each block; the training driver's reads the GPU at each block's two ends,
    ``perfsuite.measure.nvml_sampler.Endpoints``) observes every block of either side, so
    that a round shows the clocks and power each ran at. Figures are samples per second; the
    ratio is the suite's over the bare loop's (below 1: the suite is slower), of the medians
    over rounds."""

    block = turn_steps(steps, samples_per_step, suite_rates)
    if agree is not None:  # each rank measured its own rate: data-parallel steps must match
        block = agree(block)

    def sampled(fn: Callable[[], float]) -> dict:
        with sampler() if sampler is not None else _Null() as s:
            rate = fn()
        return {"samples_per_s": rate, "nvml": s.summary() if s is not None else None}

    def suite_again() -> dict:
        suite_block(WARM_STEPS)  # untimed: woken from idle, as the bare loop is below
        return sampled(lambda: block * samples_per_step / suite_block(block))

    def reference() -> dict:
        bare.block(WARM_STEPS)
        return sampled(lambda: bare.block(block)["samples_per_s"])

    # round 1's suite side: the run's own blocks (its throughput as recorded), or one more
    # block where the run was too short to have any
    first = {"samples_per_s": statistics.median(suite_rates), "nvml": None} if suite_rates else suite_again()
    turns = take_turns(n_rounds, first, suite_again, reference)
    suite = statistics.median(t["suite"]["samples_per_s"] for t in turns)
    ref = statistics.median(t["reference"]["samples_per_s"] for t in turns)
    ratio = suite / ref if ref > 0 else None
    agrees = ratio is not None and abs(ratio - 1.0) <= AGREEMENT
    rounds = [
        {
            "order": t["order"],
            "suite_samples_per_s": t["suite"]["samples_per_s"],
            "reference_samples_per_s": t["reference"]["samples_per_s"],
            "suite_clocks": _clocks(t["suite"]["nvml"]),
            "reference_clocks": _clocks(t["reference"]["nvml"]),
        }
        for t in turns
    ]
    paired = paired_rounds(rounds)
    note = (
        "agrees"
        if agrees
        else (f"the suite runs at {ratio:.3f} of the bare loop's throughput" if ratio else "no figure")
    )
    if paired:
        low, high = paired["ci95"]
        note += f"; per round, throughput {paired['median']:.3f} of the bare loop's (95% CI {low:.3f}-{high:.3f})"
    return {
        "status": "measured",
        "compared_with": "bare loop ms per step",
        "suite_samples_per_s": suite,
        "reference_samples_per_s": ref,
        "rate_ratio": ratio,
        "instrumentation_cost": None if ratio is None else 1.0 - ratio,
        # the cross-check table's columns: time per step, as the kernels' cross-checks show time per call
        "suite_median_ms": 1e3 * samples_per_step / suite if suite > 0 else None,
        "reference_median_ms": 1e3 * samples_per_step / ref if ref > 0 else None,
        "time_ratio": None if not ratio else 1.0 / ratio,
        "agrees": agrees,
        "tolerance": AGREEMENT,
        "note": note,
        # each round's two sides ran one after the other: their ratio leaves out what drifts
        # between rounds (clocks under a power cap), which the medians of each side keep
        "round_ratios": paired["ratios"] if paired else [],
        "round_ratio_median": paired["median"] if paired else None,
        "round_ratio_ci95": paired["ci95"] if paired else None,
        "steps_per_block": block,
        "warm_steps_per_block": WARM_STEPS,
        "rounds": rounds,
    }


def paired_rounds(rounds: list[dict]) -> dict | None:
    """The rounds' ratios, suite over bare loop (``perfsuite.schemas.bare_loop_rounds``: each
    round's two sides ran back to back), their median and its 95% percentile bootstrap interval
    (``perfsuite.measure.stats.bootstrap_ci``), or None without a round to divide."""
    from perfsuite.measure.stats import bootstrap_ci
    from perfsuite.schemas.bare_loop_rounds import round_ratios

    ratios = round_ratios(rounds)
    if not ratios:
        return None
    low, high = bootstrap_ci(ratios)
    return {"ratios": ratios, "median": statistics.median(ratios), "ci95": [low, high]}


def turn_steps(steps: int, samples_per_step: int, suite_rates: list[float]) -> int:
    """Steps in one timed block of a turn: the evaluation interval, or more, so that a block
    lasts ``MIN_BLOCK_S`` at the suite's recorded rate (the interval alone where none is known)."""
    if not suite_rates:
        return steps
    step_s = samples_per_step / statistics.median(suite_rates)
    return max(steps, math.ceil(MIN_BLOCK_S / step_s)) if step_s > 0 else steps


def _clocks(nvml: dict | None) -> dict | None:
    if not nvml:
        return None
    clocks = {
        "sm_clock_mhz_median": nvml.get("sm_clock_mhz_median"),
        "power_w_median": nvml.get("power_w_median"),
        "clock_events": nvml.get("clock_events") or [],
    }
    if nvml.get("sampling") == "endpoints":  # two reads: the energy counter's mean power says more
        clocks["power_w_mean"] = nvml.get("power_w_mean")
    if nvml.get("sampler_error"):  # a sampler that failed says so beside the round, not nowhere
        clocks["sampler_error"] = nvml["sampler_error"]
    return clocks


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
