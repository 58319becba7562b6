"""Built-in cross-checks: the same callable timed by the reference tool in the same process
and the same call, both figures and their ratio stored in the record
(``details["crosscheck"]``).

- kernels (any case measured through ``RunContext.measure``): ``triton.testing.do_bench``
  timed alike with the suite's loop (``perfsuite.crosscheck.do_bench``: L2 flushed between
  calls on both sides, the same untimed calls first, the same number of timed calls compared,
  each round's two SM clocks compared and a round at different clocks not paired), so that a
  burst (``--iterations 20``) is compared with a burst and a sustained run (``--min-time 2``)
  with a sustained one (do_bench's default 100 ms is neither: on an H200 it gives 732 TFLOP/s
  where a burst gives 790 and two seconds 670). The two take turns for ``rounds`` rounds (``--rounds``,
  ``PERFSUITE_CROSSCHECK_ROUNDS``, default 4: each goes first as often as the other), each
  from a GPU rested for ``perfsuite.context.COOL_REST_S``, and the ratio is of the medians over
  the paired rounds: one 20-call burst of either varies by a few percent (on an H200 do_bench's
  flushed bf16 burst read 1.428 ms once against 1.377-1.411 in three other runs, a 0.961
  ratio on its own), and the second of two bursts run without a rest between them read 5-6%
  slower;
- training (``perfsuite.crosscheck.training``): a bare loop of the same model, precision,
  optimizer and compile setting (``perfsuite/crosscheck/training_reference.py``), served as a subprocess on the
  same GPU, its blocks of steps taking turns with the suite's; the ratio of throughputs is the
  instrumentation's cost;
- serving endpoints (``inference.serving``): AIPerf, else the bare asyncio client
  ``perfsuite.crosscheck.serving_reference``, against the same endpoint with the same prompts and
  load, in turns with the suite's own client (``perfsuite.crosscheck.aiperf``);
- collectives: the nccl-tests binary of the collective, from the directory in
  ``PERFSUITE_NCCL_TESTS``, started by rank 0 after the sweep with the same sizes, type,
  reduction, warm-up and iterations (``perfsuite.workloads.collectives._sweep``), as one process per
  GPU under an MPI launcher where one is given (``PERFSUITE_NCCL_TESTS_MPIRUN``); each size
  names the side that was launch-bound there, from each side's own shortest time per call
  (``perfsuite.crosscheck.launch_floor``), so a ratio off 1 at a few MiB is never left unexplained.

Asked for with ``perfsuite crosscheck`` (or ``PERFSUITE_CROSSCHECK=1`` in the environment of
``perfsuite run``). A reference that cannot run here is recorded as skipped with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV_REQUEST = "PERFSUITE_CROSSCHECK"
ENV_ROUNDS = "PERFSUITE_CROSSCHECK_ROUNDS"
DEFAULT_ROUNDS = 4  # even: the suite and the reference each go first in half the rounds
AGREEMENT = 0.02  # the bar: within 2% of do_bench run the same way
COOL_WAIT_S = 20.0  # longest wait for a cool GPU before each of the two timings


def requested() -> bool:
    return os.environ.get(ENV_REQUEST, "") not in ("", "0")


def rounds(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> int:
    """How many rounds the suite and the reference take turns for (``PERFSUITE_CROSSCHECK_ROUNDS``)."""
    text = environ.get(ENV_ROUNDS, "").strip() or str(DEFAULT_ROUNDS)
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{ENV_ROUNDS}={text!r} is not a whole number of rounds") from None
    if n < 1:
        raise ValueError(f"{ENV_ROUNDS}={n}: at least one round")
    return n


def take_turns(
    n_rounds: int, suite_first: Any, suite_again: Callable[[], Any], reference: Callable[[], Any]
) -> list[dict]:
    """``n_rounds`` rounds of the suite's timing and the reference's, taking turns: round 1
    is the suite's recorded run (``suite_first``, already taken) then the reference; from
    round 2 on the reference goes first in even rounds and second in odd ones, so that
    neither always meets the GPU the other has just left."""
    out = [{"order": "suite first", "suite": suite_first, "reference": reference()}]
    for r in range(2, n_rounds + 1):
        if r % 2 == 0:
            ref = reference()
            out.append({"order": "reference first", "suite": suite_again(), "reference": ref})
        else:
            mine = suite_again()
            out.append({"order": "suite first", "suite": mine, "reference": reference()})
    return out


class CrossCheck:
    """The reference tools as a workload's driver reaches them: ``ctx.crosscheck``. Kernels need
    none of it (``ctx.measure`` times do_bench beside each case); a collective sweep asks it
    whether to run nccl-tests, runs it in turns with its own loops and folds the tables; a
    serving endpoint is measured by AIPerf in turns with the suite's client (``serving``)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx  # the perfsuite.context.RunContext of the run (which imports this module)

    @property
    def requested(self) -> bool:
        """Whether this run times its callables with the reference tools too."""
        return requested()

    def rounds(self) -> int:
        """The turns a cross-checked run and its reference take."""
        return rounds()

    def nccl_tests(self, collective: str, **sweep: Any) -> dict:
        """nccl-tests once, beside a collective sweep, same call (``collectives.run_nccl_tests``)."""
        from perfsuite.crosscheck.collectives import run_nccl_tests

        return run_nccl_tests(self._ctx, collective, **sweep)

    def nccl_tests_measured(self, run: dict) -> bool:
        """Whether nccl-tests measured in ``run``, on any rank."""
        from perfsuite.crosscheck.collectives import nccl_tests_measured

        return nccl_tests_measured(run)

    def bare_loop(self, args: list[str]) -> Any:
        """The bare training loop (``perfsuite/crosscheck/training_reference.py ARGS``) started now, to build and
        compile while the run initialises: a ``perfsuite.crosscheck.training.BareLoopCheck``
        (``wait_ready()`` before the timed run, ``compare(...)`` after it)."""
        from perfsuite.crosscheck.training import bare_loop_for

        ctx = self._ctx  # at a world size above one, every rank starts its rank of the bare loop
        return bare_loop_for(args, ctx.artifact_dir(), ctx.rank, ctx.world_size, ctx.local_rank, take_turns)

    def serving(self, suite_once: Callable[[], dict], spec: dict) -> dict:
        """AIPerf (else the bare asyncio reference client) against a serving endpoint, in turns
        with ``suite_once`` (the suite's client, one run; its figures) (``aiperf.versus_reference``).
        ``spec["prompts"]`` (text, output length) and, for a request rate, ``spec["offsets_s"]``
        (the suite's arrival times) are what both sides send, and when."""
        from perfsuite.crosscheck.aiperf import versus_reference

        return versus_reference(suite_once, spec, rounds(), take_turns)

    def compare_nccl_tests(self, runs: list[dict], rows: list[dict]) -> dict:
        """nccl-tests' runs folded into one table beside the sweep's rows."""
        from perfsuite.crosscheck.collectives import compare_nccl_tests

        return compare_nccl_tests(runs, rows)
