"""The time-to-target driver shared by the training workloads, MLPerf Training style.

A run: build the model, the optimizer and the input pipeline (MLLOG ``init_start`` ..
``init_stop``), then, from ``run_start``: train on global batches, evaluate every
``eval_every`` steps on the held-out split, and stop when the evaluation accuracy reaches
``target_accuracy`` (status ``success``), or when the step budget ``max_steps`` (or the
time budget ``time_budget_s``, checked at evaluations) is spent (status ``aborted``, never
ranked). ``run_stop`` ends the timed region; time-to-target is run_start -> run_stop as
MLPerf times it, every evaluation inside it.

A run's ``goal`` says what it claims. ``target`` (the default) is the above. ``throughput``
trains for its budget and that is its goal: spending it ends the run ``success``, with the
evaluation curve recorded but the target neither stopping it nor checked, no time to target
and no convergence check. Its headline is its throughput (tokens/s for a language model, else
samples/s: the ``throughput`` case of the family's headline), so data-parallel scaling runs
that stop at a short budget by design are records that can be filed and charted. Its
verification is that the training stayed finite (every evaluation's loss), so a throughput
figure of a diverged run is never filed. The goal is a parameter: a throughput run and a
time-to-target run never share a comparability key.

MLPerf's clock rules (``untimed_init``, on by default): model initialisation that touches no
data may happen before ``run_start``, compilation included. So the training step is compiled and
warmed up on synthetic batches (``random_batch``: shaped like the data, not drawn from it) before
``init_stop``, and the model's weights and buffers, the optimizer, the learning-rate schedule and
the random number generators are restored afterwards, so that the timed run starts from the
state it would have started from without it. That untimed initialisation is recorded
(``untimed_init_s``, beside the time to target); with ``untimed_init=false`` the first step's
compilation is on the clock instead. The setting is a parameter, so runs with it on and off never
share a comparability key.

The training step is the model and its loss as one module, wrapped in DistributedDataParallel on
several ranks, then compiled: torch.compile's DDP optimizer splits the graph at the gradient
buckets, so each bucket's all-reduce overlaps the rest of the backward pass, and the loss sits in
DDP's graph rather than in one compiled apart (on 4 H200s, GPT-2 124M at 16 sequences a GPU:
1,497 sequences/s this way against 1,409 with the loss compiled apart and 1,439 with the model
compiled inside DDP, whose backward is one graph that hands DDP every gradient at its end).

Several ranks (``--nproc-per-node``) train one DistributedDataParallel model on a fixed
global batch, each rank taking its share; evaluation is sharded and summed across ranks,
so every rank takes the same stop decision.

Recorded: time, steps and samples to the target; samples/s (tokens/s for language
models) per evaluation interval; model TFLOP/s per device (FLOPs of one forward and
backward counted by torch's FlopCounterMode, times samples/s), judged by the runner
against the device's measured ``matmul.<precision>`` ceiling: that fraction is the MFU
(the host's tables add the fraction of the vendor's datasheet peak for the same resource);
energy to the target (NVML's energy counter, summed over ranks); the goodput split (see
``_phases``); the evaluation curve; and the MLLOG events (see ``_events``).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite import Check, Headline, Workload, distributed, param
from perfsuite.headlines import TIME_TO_TARGET
from perfsuite.inputs.tensors import PIPELINES, RankBatches, batches
from perfsuite.workloads.training import _optim
from perfsuite.workloads.training._events import Events
from perfsuite.workloads.training._phases import PhaseClock

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

PRECISIONS = ("fp32", "bf16")
GOALS = ("target", "throughput")
MLLOG_PRECISION = {"fp32": "fp32", "bf16": "bfloat16"}
FLOP_COUNT_BATCH = 2
UNTIMED_WARMUP_STEPS = 2  # the compiling step, then one more (a recompilation would show there)
NOTE_EVERY_S = 2.0  # a progress note within an epoch at most this often: one small file write


@dataclass(frozen=True)
class TrainingParams:
    """Parameters every training workload has (each workload sets its own defaults)."""

    global_batch: int = param(64, "samples per optimizer step, over all ranks (fixed as ranks change)")
    optimizer: str = param("adamw", "optimizer", choices=_optim.OPTIMIZERS)
    lr: float = param(1e-3, "base learning rate (after warm-up)")
    weight_decay: float = param(0.0, "weight decay")
    warmup_steps: int = param(0, "steps of linear learning-rate warm-up")
    schedule: str = param("constant", "learning-rate decay after warm-up, to 0 at max_steps", choices=_optim.SCHEDULES)
    grad_clip: float = param(0.0, "clip the gradient norm to this (0: no clipping)")
    precision: str = param("fp32", "fp32, or bf16 autocast", choices=PRECISIONS)
    compile: bool = param(False, "torch.compile the training step's model")
    eval_every: int = param(25, "steps between evaluations")
    max_steps: int = param(
        2000, "step budget: a run still below the target then stops as aborted (goal=throughput: as success)"
    )
    time_budget_s: float = param(
        0.0,
        "time budget from run_start, checked at evaluations (0: none): "
        "a run still below the target then stops as aborted (goal=throughput: as success)",
    )
    target_accuracy: float = param(0.9, "evaluation accuracy that ends the run")
    train_samples: int = param(8192, "samples in the training split")
    eval_samples: int = param(1024, "samples in the held-out evaluation split")
    pipeline: str = param("tensor", "input pipeline", choices=PIPELINES)
    loader_workers: int = param(0, "DataLoader worker processes / DALI threads")
    data_seed: int = param(0, "seed of the synthetic data set (the run's seed orders it and initialises the model)")
    goal: str = param(
        "target",
        "what the run claims: target (time to target_accuracy; the budget's end is aborted) or throughput "
        "(train for the budget, which ends it as success; its headline is its throughput)",
        choices=GOALS,
    )
    untimed_init: bool = param(
        True,
        "MLPerf's clock rules: compile and warm up on synthetic batches before run_start (the state restored "
        "after it, no data touched), recorded as untimed_init_s; false: compilation on the clock",
    )


class TimeToTarget(Workload):
    """Base of the training workloads; subclasses provide the data, the model and the loss."""

    category = "training"
    controls_honoured: ClassVar[tuple[str, ...]] = ()  # time to target runs on its own clock, not the timing loop
    headline: ClassVar[Headline | None] = TIME_TO_TARGET  # MLPerf Training's figure, the untimed init beside it
    sample_unit: ClassVar[str] = "samples"
    channels_last: ClassVar[bool] = False

    # -- what a training workload provides ------------------------------------------
    def make_data(self) -> tuple[Any, Any, Any, Any]:
        """(train inputs, train labels, eval inputs, eval labels), on the host."""
        raise NotImplementedError

    def build_model(self) -> Any:
        raise NotImplementedError

    def random_batch(self, n: int, device: Any) -> tuple[Any, Any]:
        """Inputs and labels shaped like the data but not from it (for counting FLOPs
        before run_start, where MLPerf forbids touching the training data)."""
        raise NotImplementedError

    def outputs(self, model: Any, x: Any) -> Any:
        """The model's output for a batch (what the loss is computed from)."""
        raise NotImplementedError

    def criterion(self, out: Any, y: Any) -> Any:
        """The loss of an output against its labels (compiled on its own with ``compile``)."""
        raise NotImplementedError

    def reference_args(self) -> list[str]:
        """``perfsuite/crosscheck/training_reference.py``'s model arguments for the same model (the bare loop
        of the cross-check); the run's batch, precision, optimizer and schedule are added."""
        raise NotImplementedError

    def loss(self, model: Any, x: Any, y: Any) -> Any:
        return self.criterion(self.outputs(model, x), y)

    def eval_sums(self, model: Any, x: Any, y: Any) -> tuple[Any, Any, Any]:
        """(correct, counted, summed loss) over one evaluation batch, as tensors."""
        raise NotImplementedError

    def tokens_per_sample(self) -> int | None:
        return None

    def model_details(self, model: Any) -> dict:
        return {"parameters": sum(t.numel() for t in model.parameters())}

    def trained(self, ctx: "RunContext", model: Any, reached: bool, accuracy: float) -> None:
        """Called on rank 0 with the trained model once the run's figures are recorded: a
        workload saves it where its parameters ask (``training.gpt``'s ``save_to``); nothing here."""

    # -- the harness side ------------------------------------------------------------
    def unmet(self, ctx: "RunContext") -> str | None:
        p = self.params
        if p.global_batch % ctx.world_size:
            return f"global_batch {p.global_batch} does not divide into {ctx.world_size} ranks"
        if p.pipeline == "dali":
            from importlib.util import find_spec

            if find_spec("nvidia") is None or find_spec("nvidia.dali") is None:
                return "pipeline=dali needs NVIDIA DALI (the Python package nvidia.dali), which is not installed"
        if p.precision == "bf16" and ctx.device == "cuda":
            import torch

            if not torch.cuda.is_bf16_supported():
                return "this GPU does not support bf16"
        return None

    def setup(self, ctx: "RunContext") -> None:
        self.train_x, self.train_y, self.eval_x, self.eval_y = self.make_data()

    def teardown(self, ctx: "RunContext") -> None:
        self.train_x = self.train_y = self.eval_x = self.eval_y = None

    def execute(self, ctx: "RunContext") -> None:
        # Cross-checked, the bare loop starts first: it builds and compiles while this run initialises.
        bare = self._start_bare_loop(ctx) if ctx.crosscheck.requested else None
        try:
            self._execute(ctx, bare)
        finally:
            if bare is not None:
                bare.close()

    def _execute(self, ctx: "RunContext", bare: Any) -> None:
        import torch

        p = self.params
        device = ctx.torch_device
        cuda = device.type == "cuda"
        world, rank = ctx.world_size, ctx.rank
        ev = Events(enabled=rank == 0)
        amp = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=p.precision == "bf16")

        if cuda and p.precision == "fp32":
            # fp32 means fp32: cuDNN would otherwise run convolutions in TF32, and the MFU
            # would be judged against the wrong ceiling (matmul.fp32)
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        # -- init: nothing here touches the training data ----------------------------
        ev.point("cache_clear", True)
        ev.start("init_start")
        init_t0 = time.perf_counter()
        model = self.build_model().to(device)
        if cuda and self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        flops_per_sample = self._count_flops(model, device, amp)
        model_info = self.model_details(model)
        # the model and its loss in one module (the loss compiled with the model, not eager: GPT-2's
        # cross-entropy over 16 x 1024 x 50,304 logits upcast to float32 in eager kernels reads and
        # writes them several times over), in DDP on several ranks, then compiled (module docstring)
        train_model: Any = _with_loss(self, model)
        if world > 1:
            from torch.nn.parallel import DistributedDataParallel

            train_model = DistributedDataParallel(train_model, device_ids=[device.index] if cuda else None)
        step_loss = torch.compile(train_model) if p.compile else train_model
        opt, sched = _optim.build(p, model.parameters(), fused=cuda)
        order = RankBatches(len(self.train_x), p.global_batch, rank, world, ctx.controls.seed)

        def one_step(x: Any, y: Any, phase: Any) -> None:
            with phase("forward"), amp():
                loss = step_loss(x, y)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                if p.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), p.grad_clip)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)

        untimed_s = None
        if p.untimed_init:
            distributed.note_progress("compiling and warming up on synthetic batches (untimed)")
            untimed_s = self._untimed_warmup(
                lambda x, y: one_step(x, y, lambda _name: _Null()), model, opt, sched, device, order.per_rank, ctx
            )
        stream = batches(p.pipeline, self.train_x, self.train_y, order, device, p.loader_workers)
        eval_x, eval_y = self.eval_x[rank::world].to(device), self.eval_y[rank::world].to(device)
        self._log_hyperparameters(ev, ctx, order)
        ev.end("init_stop")
        init_s = time.perf_counter() - init_t0
        if bare is not None:
            bare.wait_ready()  # built and compiled: it holds its memory, idle, while this run is timed
        ctx.barrier()

        # -- the timed run ------------------------------------------------------------
        clock = PhaseClock(cuda)
        clock.reserve(p.eval_every)  # a block's events, made before run_start: timed steps only record them
        evals: list[dict] = []
        block_rates: list[float] = []
        energy0 = ctx.energy_j()
        ev.start("run_start")
        t0 = time.perf_counter()
        spe = order.steps_per_epoch
        n_train = len(self.train_x)
        reached, out_of_time, accuracy, step = False, False, 0.0, 0
        for_throughput = p.goal == "throughput"  # the budget is the goal: reaching the target does not stop it
        block_t0, block_steps = t0, 0

        def epoch_of(samples: int) -> float:
            return round(samples / n_train, 6)

        def train_step(clock: PhaseClock, timed: bool) -> None:
            with clock.host("data_wait") if timed else _Null():
                x, y = next(stream)
            one_step(x, y, clock.compute if timed else (lambda _name: _Null()))

        noted_at = time.monotonic()
        for step in range(p.max_steps):
            samples = step * p.global_batch
            if step % spe == 0:
                ev.start("epoch_start", epoch_num=step // spe + 1, samples_count=samples)
            if step % spe == 0 or time.monotonic() - noted_at >= NOTE_EVERY_S:
                # within an epoch too, so that the time left is known before the epoch ends
                distributed.note_progress(f"epoch {step // spe + 1}", step, p.max_steps)  # at most max_steps
                noted_at = time.monotonic()
            if step % p.eval_every == 0:
                ev.start(
                    "block_start",
                    first_epoch_num=step // spe + 1,
                    epoch_count=round(p.eval_every * p.global_batch / n_train, 6),
                    samples_count=samples,
                )
            if step == 0 and not p.untimed_init:
                with clock.host("compile_warmup"):
                    train_step(clock, timed=False)
                    ctx.synchronize()
                block_t0 = time.perf_counter()
            else:
                train_step(clock, timed=True)
                block_steps += 1
            done = (step + 1) * p.global_batch
            if (step + 1) % spe == 0:
                ev.end("epoch_stop", epoch_num=step // spe + 1, samples_count=done)
            if (step + 1) % p.eval_every == 0 or step + 1 == p.max_steps:
                ctx.synchronize()
                now = time.perf_counter()
                if block_steps:
                    block_rates.append(block_steps * p.global_batch / (now - block_t0))
                ev.end("block_stop", first_epoch_num=(step - (step % p.eval_every)) // spe + 1, samples_count=done)
                ev.start("eval_start", epoch_num=epoch_of(done), samples_count=done)
                with clock.host("evaluation"):
                    accuracy, eval_loss, elapsed = self._evaluate(
                        model, eval_x, eval_y, device, amp, world, time.perf_counter() - t0
                    )
                ev.end("eval_stop", epoch_num=epoch_of(done), samples_count=done)
                ev.point("eval_accuracy", accuracy, epoch_num=epoch_of(done), samples_count=done)
                clock.drain()
                evals.append(
                    {
                        "step": step + 1,
                        "samples": done,
                        "epoch": epoch_of(done),
                        "accuracy": accuracy,
                        "loss": eval_loss,
                        "time_s": time.perf_counter() - t0,
                    }
                )
                ctx.log(f"step {step + 1}: eval_accuracy {accuracy:.4f} (target {p.target_accuracy})")
                reached = accuracy >= p.target_accuracy
                block_t0, block_steps = time.perf_counter(), 0
                if reached and not for_throughput:
                    break
                if p.time_budget_s and elapsed >= p.time_budget_s:
                    out_of_time = True
                    break
        ctx.synchronize()
        wall = time.perf_counter() - t0
        status = "success" if reached or for_throughput else "aborted"
        ev.end(
            "run_stop",
            status=status,
            epoch_num=epoch_of((step + 1) * p.global_batch),
            samples_count=(step + 1) * p.global_batch,
        )
        energy1 = ctx.energy_j()
        steps_run = step + 1
        energy_j = self._total_energy(energy0, energy1, device, world)
        goodput = clock.split(wall)
        self._record(ctx, reached, wall, init_s, steps_run, accuracy, energy_j, goodput, block_rates, flops_per_sample)
        if bare is not None:  # after run_stop: the run's figures stand as measured
            extra = PhaseClock(cuda)  # the turns' own clock: the run's goodput split is already taken

            def suite_block(steps: int) -> float:
                """Seconds for ``steps`` more steps, instrumented and timed as the run's blocks are
                (their events made beforehand and reused from turn to turn, as the run's are)."""
                extra.reserve(steps)
                ctx.synchronize()
                t = time.perf_counter()
                for _ in range(steps):
                    train_step(extra, timed=True)
                ctx.synchronize()
                seconds = time.perf_counter() - t
                extra.drain()
                return seconds

            ctx.details["crosscheck"] = {
                "train": bare.compare(
                    model_info["parameters"],
                    block_rates,
                    suite_block,
                    p.eval_every,
                    p.global_batch,
                    ctx.crosscheck.rounds(),
                    None,  # no sampler thread in this process: the GPU is sampled from a child (gpu_index)
                    lambda n: self._agree_max(n, device, world),
                    gpu_index=ctx.nvml_index(),
                )
            }
        ctx.details.update(
            {
                "training": {
                    "model": model_info,
                    "flops_per_sample": flops_per_sample,
                    "world_size": world,
                    "optimizer": f"{p.optimizer} ({'fused' if cuda else 'default'})",
                    "global_batch": p.global_batch,
                    "per_rank_batch": order.per_rank,
                    "steps_per_epoch": spe,
                    "goal": p.goal,
                    "reached_target": reached,
                    "target_accuracy": p.target_accuracy,
                    "steps": steps_run,
                    "samples": steps_run * p.global_batch,
                    "clock_rules": "mlperf" if p.untimed_init else "compilation on the clock",
                    "untimed_init_s": init_s,
                    "untimed_warmup_s": untimed_s,
                    "data_parallel": "torch.compile(DistributedDataParallel(model + loss))" if world > 1 else None,
                },
                "goodput": goodput,
                "evals": evals,
            }
        )
        if rank == 0:
            ctx.details["mllog"] = ev.items
            self.trained(ctx, model, reached, accuracy)
        if for_throughput:
            self._check_finite(ctx, evals)
        elif reached:
            ctx.add_check(
                Check(
                    "target",
                    True,
                    "evaluation accuracy >= target_accuracy",
                    error=accuracy,
                    tolerance=p.target_accuracy,
                    detail=f"reached at step {steps_run}",
                )
            )
            self._check_convergence(ctx, float(steps_run * p.global_batch))
        else:
            budget = f"the time budget of {p.time_budget_s:g} s" if out_of_time else "the step budget"
            ctx.abort(
                f"eval_accuracy {accuracy:.4f} is below the target {p.target_accuracy} after "
                f"{steps_run} steps ({budget})"
            )

    # -- pieces ----------------------------------------------------------------------
    def _start_bare_loop(self, ctx: "RunContext") -> Any:
        """The cross-check's bare loop (``ctx.crosscheck.bare_loop``) of this model, global batch,
        precision, optimizer, clipping, schedule and compile setting, at the run's world size
        (each rank starts its rank of it, on its own device)."""
        p = self.params
        args = [
            *self.reference_args(),
            *("--batch", str(p.global_batch), "--precision", p.precision, "--optimizer", p.optimizer),
            *("--lr", repr(p.lr), "--weight-decay", repr(p.weight_decay), "--grad-clip", repr(p.grad_clip)),
            *("--warmup-steps", str(p.warmup_steps), "--schedule", p.schedule, "--max-steps", str(p.max_steps)),
            *("--device", ctx.device, "--seed", str(ctx.controls.seed)),
            *(["--compile"] if p.compile else []),
        ]
        return ctx.crosscheck.bare_loop(args)

    def _check_finite(self, ctx: "RunContext", evals: list[dict]) -> None:
        """A throughput run's verification: its training stayed finite (every evaluation's loss), so
        that the throughput of a run that diverged (a bf16 overflow, a learning rate too high) is never
        filed as a figure of training. The target is not its claim, so it is not checked."""
        bad = [e for e in evals if not math.isfinite(e["loss"]) or not math.isfinite(e["accuracy"])]
        if bad:
            detail = f"not finite at step {bad[0]['step']}"
        elif evals:
            detail = f"{len(evals)} evaluations, the last loss {evals[-1]['loss']:.4g}"
        else:
            detail = "no evaluation"
        ctx.add_check(
            Check(
                "finite training",
                bool(evals) and not bad,
                "every evaluation's loss and accuracy are finite (the training did not diverge)",
                detail=detail,
            )
        )

    def _check_convergence(self, ctx: "RunContext", samples: float) -> None:
        """MLPerf's reference-convergence-point check (``perfsuite.convergence``): a run
        that reached its target on fewer samples than the reference points for its global batch
        allow fails it, so it is ``invalid`` and never ranked; where there is no reference for
        this benchmark or batch the record says so and nothing is checked."""
        from perfsuite.convergence import PointsError, verdict

        try:
            found = verdict(self.name, convergence_params(self.params), [samples])
        except PointsError as exc:
            found = {"status": "unchecked", "reason": str(exc)}
        ctx.details["convergence"] = found
        if found["status"] == "unchecked":
            return
        ctx.add_check(
            Check(
                "convergence",
                found["status"] == "passed",
                "samples to target >= the reference convergence points' minimum at this global batch",
                error=found["samples_to_target"],
                tolerance=found["min_samples"],
                detail=found["note"],
            )
        )

    def _untimed_warmup(
        self, step: Any, model: Any, opt: Any, sched: Any, device: Any, per_rank: int, ctx: "RunContext"
    ) -> float:
        """Seconds of compiling and warming up the training step on synthetic batches before
        run_start (MLPerf's untimed initialisation); the model's weights and buffers, the
        optimizer, the schedule and the random number generators are then put back as they were."""
        import torch

        cuda = device.type == "cuda"
        weights = copy.deepcopy(model.state_dict())
        opt_state, sched_state = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state(device) if cuda else None
        ctx.synchronize()
        t0 = time.perf_counter()
        for _ in range(UNTIMED_WARMUP_STEPS):
            x, y = self.random_batch(per_rank, device)
            step(x, y)
        ctx.synchronize()
        seconds = time.perf_counter() - t0
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            model.load_state_dict(weights)  # in place: DDP and the compiled graph keep the same tensors
        opt.load_state_dict(opt_state)
        sched.load_state_dict(sched_state)
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, device)
        ctx.synchronize()
        return seconds

    def _count_flops(self, model: Any, device: Any, amp: Any) -> float:
        """FLOPs of one sample's forward and backward, counted on random inputs; the
        model's state (batch-norm statistics included) is restored afterwards."""
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        state = copy.deepcopy(model.state_dict())
        x, y = self.random_batch(FLOP_COUNT_BATCH, device)
        counter = FlopCounterMode(display=False)
        with counter:
            with amp():
                loss = self.loss(model, x, y)
            loss.backward()
        model.zero_grad(set_to_none=True)
        model.load_state_dict(state)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return counter.get_total_flops() / FLOP_COUNT_BATCH

    def _evaluate(
        self, model: Any, x: Any, y: Any, device: Any, amp: Any, world: int, elapsed_s: float
    ) -> tuple[float, float, float]:
        """(accuracy, mean loss, elapsed seconds) agreed by every rank: sums over the ranks'
        shards, and the ranks' mean of the time since run_start (so that a time budget
        stops every rank at the same evaluation)."""
        import torch

        per_rank = max(1, self.params.global_batch // world)
        sums = torch.zeros(4, dtype=torch.float64, device=device)
        sums[3] = elapsed_s
        model.eval()
        with torch.no_grad():
            for i in range(0, len(x), per_rank):
                with amp():
                    correct, counted, loss_sum = self.eval_sums(model, x[i : i + per_rank], y[i : i + per_rank])
                sums[:3] += torch.stack([correct.double(), counted.double(), loss_sum.double()])
        model.train()
        if world > 1:
            import torch.distributed as dist

            dist.all_reduce(sums)
        correct, counted, loss_sum, elapsed = sums.tolist()
        return correct / counted, loss_sum / counted, elapsed / world

    def _agree_max(self, n: int, device: Any, world: int) -> int:
        """The largest ``n`` over the ranks (each rank's own ``n`` on one)."""
        if world == 1:
            return n
        import torch
        import torch.distributed as dist

        t = torch.tensor([n], dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def _total_energy(self, e0: float | None, e1: float | None, device: Any, world: int) -> float | None:
        """Joules over run_start..run_stop, summed over ranks; None if any rank cannot say."""
        import torch

        mine = e1 - e0 if e0 is not None and e1 is not None and e1 >= e0 else float("nan")
        if world > 1:
            import torch.distributed as dist

            t = torch.tensor([mine], dtype=torch.float64, device=device)
            dist.all_reduce(t)
            mine = t.item()
        return None if mine != mine else mine

    def _log_hyperparameters(self, ev: Events, ctx: "RunContext", order: RankBatches) -> None:
        p = self.params
        precision = MLLOG_PRECISION[p.precision]
        keys = {
            "seed": ctx.controls.seed,
            "global_batch_size": p.global_batch,
            "micro_batch_size": order.per_rank,
            "gradient_accumulation_steps": 1,
            "train_samples": len(self.train_x),
            "eval_samples": len(self.eval_x),
            "max_steps": p.max_steps,
            "target_accuracy": p.target_accuracy,
            **_optim.mllog_hyperparameters(p),
            "lowest_numerical_precision_in_linear": precision,
            "lowest_numerical_precision_in_attn": precision,
            "lowest_numerical_precision_in_comm": "fp32",  # DDP reduces the fp32 gradients
            "tensor_parallelism": 1,
            "pipeline_parallelism": 1,
            "context_parallelism": 1,
            "expert_parallelism": 1,
            "data_parallelism": ctx.world_size,
            "config_filename": f"perfsuite:{self.name}",
            "run_goal": p.goal,  # run_stop's status is success at the target, or at the budget's end for throughput
        }
        for key, value in keys.items():
            ev.point(key, value)

    def _record(
        self,
        ctx: "RunContext",
        reached: bool,
        wall: float,
        init_s: float,
        steps: int,
        accuracy: float,
        energy_j: float | None,
        goodput: dict,
        block_rates: list[float],
        flops_per_sample: float,
    ) -> None:
        p = self.params
        samples = steps * p.global_batch
        # a throughput run's figures of its budget are what it ran, never a time to target (it may pass
        # the target on the way: that is not its claim), and its throughput is a case of its own, the
        # one its headline names (perfsuite.schemas.headline.TIME_TO_TARGET)
        for_throughput = p.goal == "throughput"
        reached = reached and not for_throughput
        run, train = ("budget", "throughput") if for_throughput else ("target", "train")
        prefix = "time_to_target_s" if reached else "run_time_s"
        ctx.add_metric(run, prefix, "s", [wall], higher_is_better=False, aggregate="max")
        # beside it, what MLPerf's clock rules keep off it: init_start..init_stop, compilation included
        ctx.add_metric(run, "untimed_init_s", "s", [init_s], higher_is_better=False, aggregate="max")
        ctx.add_metric(
            run,
            "steps_to_target" if reached else "steps_run",
            "steps",
            [float(steps)],
            higher_is_better=False,
            aggregate="rank0",
        )
        ctx.add_metric(
            run,
            "samples_to_target" if reached else "samples_run",
            self.sample_unit,
            [float(samples)],
            higher_is_better=False,
            aggregate="rank0",
        )
        ctx.add_metric(run, "eval_accuracy", "fraction", [accuracy], higher_is_better=True, aggregate="rank0")
        if energy_j is not None:
            ctx.add_metric(
                run,
                "energy_to_target_j" if reached else "energy_run_j",
                "J",
                [energy_j],
                higher_is_better=False,
                aggregate="rank0",
            )
        ctx.add_metric(run, "goodput", "fraction", [goodput["goodput"]], higher_is_better=True, aggregate="min")
        if not block_rates:
            return  # a run of one step has no steady-state throughput
        world = ctx.world_size
        ctx.add_metric(
            train, "samples_per_s", f"{self.sample_unit}/s", block_rates, higher_is_better=True, aggregate="min"
        )
        ctx.add_metric(
            train,
            "samples_per_s_per_device",
            f"{self.sample_unit}/s",
            [r / world for r in block_rates],
            higher_is_better=True,
            aggregate="min",
        )
        tokens = self.tokens_per_sample()
        if tokens:
            ctx.add_metric(
                train,
                "tokens_per_s",
                "tokens/s",
                [r * tokens for r in block_rates],
                higher_is_better=True,
                aggregate="min",
            )
        if flops_per_sample > 0:
            ctx.add_metric(
                train,
                "tflops",
                "TFLOP/s",
                [r * flops_per_sample / world * 1e-12 for r in block_rates],
                higher_is_better=True,
                aggregate="mean",
                roofline=f"matmul.{p.precision}",
            )

    # -- presentation ------------------------------------------------------------------
    @classmethod
    def render_details(cls, record: dict) -> Any:
        from perfsuite.workloads.training._report import render

        return render(record)


def convergence_params(params: Any) -> dict[str, Any]:
    """A run's parameters as the reference convergence points read them: less its output parameters
    (where it saves what it leaves behind, training.gpt's ``save_to``), as the points are built
    from records (``perfsuite.convergence.build``), so that a run matches the points of records
    filed before such a parameter existed."""
    from dataclasses import asdict, fields

    outputs = {f.name for f in fields(params) if f.metadata.get("output")}
    return {k: v for k, v in asdict(params).items() if k not in outputs}


def _with_loss(workload: TimeToTarget, model: Any) -> Any:
    """The model and the workload's loss as one module (``forward(x, y)`` gives the loss), so that
    DDP's graph and the compiled one hold both."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any, y: Any) -> Any:
            return workload.criterion(workload.outputs(self.model, x), y)

    return WithLoss()


class _Null:
    """A do-nothing context manager (the warm-up step is timed as a whole)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
