"""What a data-parallel step of the suite's training driver does that the bare DDP loop's does not,
and what each difference costs at this world size.

The training cross-check times the suite's step (``perfsuite.workloads.training._base``) beside a
bare DDP loop of the same model (``perfsuite/crosscheck/training_reference.py``). On one GPU the
two agree; on 2 and 4 GPUs the suite's step has been the slower one (GPT-2 124M on 2 H200s: 46.5
against 42.0 ms), with its GPU drawing less power (more idle time) than the bare loop's. Both
compile the same model and loss inside DDP, so the difference is in what surrounds the compiled
call. This script builds the workload's own model once per rank, wrapped in DDP and compiled as
both do, and times blocks of steps that each differ from the bare loop's step in one thing, in
rounds that rotate their order, so that each difference's cost shows alone:

    bare        the bare loop's step: a random gather from a small device split, the lr set by hand
    vocab       the same, its tokens drawn from the whole vocabulary instead of the workload's
                symbols, as the bare loop drew them before it took ``--symbols`` (training.gpt only)
    suite-data  the suite's tensor pipeline (perfsuite.inputs.tensors) over the workload's own split
    epoch-sync  suite-data, plus a copy from pageable memory at each epoch (what that pipeline
                did before its epoch order was copied from pinned memory): a host synchronisation
    events      CUDA events around forward, backward and optimizer (perfsuite.workloads.training._phases)
    scheduler   the lr set by torch's LambdaLR (perfsuite.workloads.training._optim)
    sampler     the NVML sampler thread in this process (perfsuite.measure.nvml_sampler), as the
                cross-check's turns ran it around the suite's blocks (they now read the GPU only at
                each block's two ends, perfsuite.measure.nvml_sampler.Endpoints, as every block here does)
    lifeline    the lifeline thread every measuring process runs (perfsuite.engine.lifeline), polling
    suite       suite-data, events, scheduler, sampler and lifeline together (the suite's step as it
                was measured beside the bare loop)
    suite-now   the same without the sampler thread (the suite's step as it is measured now)
    evals       an evaluation of the workload's own held-out split (``_evaluate``: the model in
                eval mode, no gradients, the ranks' sums all-reduced) before each block's warm-up
                steps, untimed, as a run evaluates between its timed blocks
    suite-evals suite-now with evals

With ``--as-run`` the model is built as a run builds it: its FLOPs counted on random inputs before
DDP and compiling (``_count_flops``), and after compiling the workload's untimed initialisation
(``_untimed_warmup``: warm-up steps on synthetic batches, then the weights, optimizer, schedule and
random state loaded back), so that what those leave behind shows against the default build in
the same call.

With ``--beside-bare VARIANT,...`` the cross-check's own bare loop runs beside this process as it
runs beside a run (``perfsuite.crosscheck.training``: one child process per rank, its own process
group, started before the model is built here and waited for before the first block), and after
every other block each named variant takes turns with it exactly as the suite's blocks take turns
in a run's cross-check (``versus_bare_loop``, ``--rounds`` rounds): ``bare`` there is the bare step
against the bare loop's process, the two sides differing only in which process runs them, so its
round ratio says what the turns themselves read between two equal steps at this world size.

then, after the model, optimizer and schedule are loaded back from copies taken before compiling
(as the untimed initialisation does), ``bare``, ``suite`` and ``suite-now`` once more; last, on a
GPU whose ``local_cpulist`` the kernel gives, every rank pinned to the CPUs beside its GPU, ``bare``
and ``suite-now`` again (nothing pins the suite's ranks or the bare loop's). A block is
``WARM_STEPS`` untimed steps, then as many steps as last ``--seconds`` (the same count on every rank), timed with
the host clock between two synchronisations; the GPU's mean power over it comes from NVML's energy
counter (two reads, no thread), and Python's garbage collections over it (by generation, and
their seconds). Rank 0 prints a table (ms per step, samples/s of the global batch, the ratio to
``bare``, power per rank, collection time, the phase split where events ran) and writes ``--out``.

    torchrun --standalone --nproc-per-node 2 bench/ddp_step_gap.py --model gpt --out gap-gpt-2.json
    python bench/ddp_step_gap.py --summarize gap-gpt-1.json gap-gpt-2.json gap-gpt-4.json

``--summarize`` prints each variant's weak-scaling efficiency (N-GPU samples/s over N x the
one-GPU figure) beside ``bare``'s. The process sets the variables the suite sets for its measuring
processes (``perfsuite.engine.launcher.suite_env``) before NCCL starts, as ``bench/nccl_rank.py`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import json
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WARM_STEPS = 3
CALIBRATION_STEPS = 5
MIN_STEPS = 5
# The scale-out plan's throughput entries (plans: scaleout-training-x4), per GPU where it scales.
MODELS: dict[str, dict[str, Any]] = {
    "gpt": {
        "layers": 12,
        "width": 768,
        "heads": 12,
        "context": 1024,
        "vocab": 50304,
        "symbols": 64,
        "precision": "bf16",
        "compile": True,
        "lr": 6e-4,
        "warmup_steps": 50,
        "max_steps": 3000,
        "train_samples": 16384,
        "eval_samples": 64,
    },
    "resnet": {
        "depth": 50,
        "width": 64,
        "image_size": 224,
        "classes": 32,
        "precision": "bf16",
        "compile": True,
        "lr": 0.4,
        "warmup_steps": 50,
        "max_steps": 45,
        "train_samples": 4096,
        "eval_samples": 256,
    },
}
PER_GPU = {"gpt": 16, "resnet": 256}
VARIANTS: dict[str, frozenset[str]] = {
    "bare": frozenset(),
    "vocab": frozenset({"vocab"}),
    "suite-data": frozenset({"suite-data"}),
    "epoch-sync": frozenset({"suite-data", "epoch-sync"}),
    "events": frozenset({"events"}),
    "scheduler": frozenset({"scheduler"}),
    "sampler": frozenset({"sampler"}),
    "lifeline": frozenset({"lifeline"}),
    "suite": frozenset({"suite-data", "events", "scheduler", "sampler", "lifeline"}),
    "suite-now": frozenset({"suite-data", "events", "scheduler", "lifeline"}),
    "evals": frozenset({"evals"}),
    "suite-evals": frozenset({"suite-data", "events", "scheduler", "lifeline", "evals"}),
}
AFTER_RESTORE = ("bare", "suite", "suite-now")
# What --beside-bare keeps of each variant's turns with the bare loop (``versus_bare_loop``'s figures).
TURN_FIGURES = (
    "suite_samples_per_s", "reference_samples_per_s", "rate_ratio", "round_ratio_median", "round_ratio_ci95", "rounds",
)  # fmt: skip


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=tuple(MODELS), default="gpt")
    ap.add_argument("--per-gpu", type=int, default=None, help="samples per rank (default: the plan's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a workload parameter")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of a timed block")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--as-run", action="store_true", help="build as a run does: FLOPs counted first, untimed warm-up and restore"
    )
    ap.add_argument(
        "--beside-bare",
        default="",
        metavar="VARIANTS",
        help="comma-separated variants that take turns with the cross-check's bare loop in its own processes",
    )
    ap.add_argument("--summarize", nargs="+", type=Path, default=None, metavar="FILE")
    args = ap.parse_args()
    unknown = [v for v in (*args.variants.split(","), *filter(None, args.beside_bare.split(","))) if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    return args


def main() -> None:
    args = parse_args()
    if args.summarize:
        summarize([json.loads(p.read_text()) for p in args.summarize])
        return
    from bench.nccl_rank import run_rank

    run_rank(lambda: measure(args), "ddp_step_gap")


# -- the rank's process group, model and steps -----------------------------------------------
def join(device_kind: str) -> tuple[int, int, Any]:
    """(rank, world, device): the NCCL group of a torchrun rank as the suite joins it, gloo on the
    CPU, no group at all alone (as the suite trains one rank without DDP)."""
    import torch
    import torch.distributed as dist

    from perfsuite.engine.launcher import suite_env

    world, local = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))
    if device_kind == "cuda":
        os.environ.update(suite_env("cuda"))
        if world > 1:
            from bench.nccl_rank import init_nccl_rank

            rank, world = init_nccl_rank()
            return rank, world, torch.device("cuda", local)
        torch.cuda.set_device(local)
        return 0, 1, torch.device("cuda", local)
    if world > 1:
        dist.init_process_group("gloo")
        return dist.get_rank(), world, torch.device("cpu")
    return 0, 1, torch.device("cpu")


def workload_for(args: argparse.Namespace, world: int) -> Any:
    from perfsuite.engine import params

    if args.model == "gpt":
        from perfsuite.workloads.training.gpt import GPTTraining as cls
    else:
        from perfsuite.workloads.training.resnet import ResNetTraining as cls
    given: dict[str, Any] = dict(MODELS[args.model])
    given["global_batch"] = (args.per_gpu or PER_GPU[args.model]) * world
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"ddp_step_gap: --set {item!r} is not KEY=VALUE")
        given[key] = value
    return cls(params.resolve(cls, given, quick=False))


def bare_split(workload: Any, device: Any, per_rank: int, rank: int, *extra: str) -> tuple[Any, Any, Any]:
    """The bare loop's own device-resident split and input layout (its ``build_*``); ``extra``:
    arguments after the workload's (the last of a repeated one counts)."""
    from perfsuite.crosscheck import training_reference

    p = workload.params
    argv = [*workload.reference_args(), "--batch", str(p.global_batch), "--device", device.type, *extra]
    saved, sys.argv = sys.argv, ["training_reference.py", *argv]
    try:
        ref_args = training_reference.parse_args()
    finally:
        sys.argv = saved
    build = training_reference.build_gpt if ref_args.model == "gpt" else training_reference.build_resnet
    _model, _outputs, _criterion, (inputs, labels), layout = build(ref_args, device, per_rank, rank)
    return inputs, labels, layout


class Steps:
    """The training step of each variant, over one compiled DDP model and one optimizer."""

    def __init__(self, workload: Any, rank: int, world: int, device: Any, as_run: bool = False) -> None:
        import torch

        from perfsuite.inputs.tensors import RankBatches, batches
        from perfsuite.workloads.training import _optim
        from perfsuite.workloads.training._base import _with_loss

        p = self.p = workload.params
        self.torch, self.device, self.world = torch, device, world
        self.cuda = device.type == "cuda"
        self.per_rank = p.global_batch // world
        model = workload.build_model().to(device)
        if self.cuda and workload.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.workload = workload
        if as_run:
            workload._count_flops(model, device, self.amp)
        whole: Any = _with_loss(workload, model)
        if world > 1:
            from torch.nn.parallel import DistributedDataParallel

            whole = DistributedDataParallel(whole, device_ids=[device.index] if self.cuda else None)
        self.step_loss = torch.compile(whole) if p.compile else whole
        self.opt, self.sched = _optim.build(p, model.parameters(), fused=self.cuda)
        self.lr_factor = lambda i: _optim.lr_factor(p, i)
        # what the untimed initialisation copies before compiling and loads back after it
        self.saved = (
            copy.deepcopy(model.state_dict()),
            copy.deepcopy(self.opt.state_dict()),
            copy.deepcopy(self.sched.state_dict()),
        )
        self.bare_x, self.bare_y, self.layout = bare_split(workload, device, self.per_rank, rank)
        self.vocab_x: Any = None
        self.vocab_y: Any = None
        if workload.reference_args()[0] == "gpt":
            self.vocab_x, self.vocab_y, _ = bare_split(workload, device, self.per_rank, rank, "--symbols", "0")
        train_x, train_y, eval_x, eval_y = workload.make_data()
        self.eval_x, self.eval_y = eval_x[rank::world].to(device), eval_y[rank::world].to(device)
        self.order = RankBatches(len(train_x), p.global_batch, rank, world, 1)
        self.stream = batches("tensor", train_x, train_y, self.order, device, 0)
        next(self.stream)  # the split goes to the device here, before any block
        self.index = 0
        from perfsuite.workloads.training._phases import PhaseClock

        self.clock = PhaseClock(self.cuda)
        self.untimed_s = None
        if as_run:  # the run's untimed initialisation: synthetic batches, then everything loaded back
            self.untimed_s = workload._untimed_warmup(
                lambda x, y: self.step(frozenset(), None, (x, y)),
                model, self.opt, self.sched, device, self.per_rank, self,
            )  # fmt: skip
            self.index = 0

    def amp(self) -> Any:
        torch = self.torch
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.p.precision == "bf16")

    def batch(self, toggles: frozenset[str]) -> tuple[Any, Any]:
        torch = self.torch
        if "suite-data" in toggles:
            if "epoch-sync" in toggles and self.index % self.order.steps_per_epoch == 0:
                torch.randperm(self.order.n).to(self.device)  # pageable: the host waits for the GPU
            return next(self.stream)
        if "vocab" in toggles and self.vocab_x is not None:
            x, y = self.vocab_x, self.vocab_y
        else:
            x, y = self.bare_x, self.bare_y
        idx = torch.randint(0, len(x), (self.per_rank,), device=self.device)
        return self.layout(x[idx]), y[idx]

    def step(self, toggles: frozenset[str], clock: Any, given: tuple[Any, Any] | None = None) -> None:
        torch, p = self.torch, self.p
        x, y = given if given is not None else self.batch(toggles)
        phase = clock.compute if "events" in toggles else (lambda _name: contextlib.nullcontext())
        with phase("forward"), self.amp():
            loss = self.step_loss(x, y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            if p.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), p.grad_clip)
            if "scheduler" in toggles:
                self.opt.step()
                self.sched.step()
            else:
                lr = p.lr * self.lr_factor(self.index)
                for group in self.opt.param_groups:
                    group["lr"] = lr
                self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        self.index += 1

    def restore(self) -> None:
        """Load back what was copied before compiling, as ``_untimed_warmup`` does."""
        weights, opt_state, sched_state = self.saved
        self.opt.zero_grad(set_to_none=True)
        with self.torch.no_grad():
            self.model.load_state_dict(weights)
        self.opt.load_state_dict(opt_state)
        self.sched.load_state_dict(sched_state)

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    synchronize = sync  # what ``_untimed_warmup`` calls on its run context

    def evaluate(self) -> None:
        """The run's evaluation between blocks (untimed)."""
        self.workload._evaluate(self.model, self.eval_x, self.eval_y, self.device, self.amp, self.world, 0.0)


# -- what runs beside the steps ------------------------------------------------------------
class Lifeline:
    """The lifeline's watch (``perfsuite.engine.lifeline.arm``) of this process's parent."""

    def __init__(self) -> None:
        from perfsuite.engine import lifeline

        self.lifeline = lifeline
        self.token = lifeline.ancestor_token(os.getppid())
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="perfsuite-lifeline", daemon=True)

    def _watch(self) -> None:
        while not self.stop.wait(self.lifeline.POLL_S):
            if not self.lifeline.alive(self.token):
                return

    def __enter__(self) -> Lifeline:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


class GcPauses:
    """Python's garbage collections during a block, by generation, and the seconds they held
    the interpreter: a rank paused by a full collection holds every rank at the next all-reduce."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = 0.0
        self._since = 0.0

    def _note(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._since = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._since

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._note)


def gpu_local_cpus(device: Any) -> set[int] | None:
    """The CPUs the kernel lists beside this rank's GPU (its PCI device's ``local_cpulist``), or None."""
    if device.type != "cuda":
        return None
    import torch

    props = torch.cuda.get_device_properties(device)
    try:
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        text = Path(f"/sys/bus/pci/devices/{bus}/local_cpulist").read_text().strip()
    except (AttributeError, OSError):
        return None  # an older torch, or no such file (a container without /sys)
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus & os.sched_getaffinity(0) or None


def gpu_index(device: Any) -> int | None:
    """NVML's index of this rank's GPU (as ``RunContext.nvml_index`` finds it)."""
    if device.type != "cuda":
        return None
    from perfsuite.measure import nvml

    if nvml.init()[0] is None:
        return None
    _, gpu = nvml.current_cuda_gpu(nvml.describe_gpus())
    return int(gpu["index"]) if gpu is not None else device.index


def beside(toggles: frozenset[str], index: int | None) -> contextlib.ExitStack:
    from perfsuite.measure import nvml_sampler

    stack = contextlib.ExitStack()
    if "sampler" in toggles:
        stack.enter_context(nvml_sampler.sample(index))
    if "lifeline" in toggles:
        stack.enter_context(Lifeline())
    return stack


def block(steps: Steps, toggles: frozenset[str], n: int, index: int | None) -> dict:
    """One timed block of ``n`` steps of a variant, after ``WARM_STEPS`` untimed ones."""
    from perfsuite.measure import nvml
    from perfsuite.workloads.training._phases import COMPUTE

    clock = steps.clock  # one clock for every block, as a run has: its events are reused
    if "evals" in toggles:
        steps.evaluate()
    for _ in range(WARM_STEPS):
        steps.step(toggles, clock)
    clock.discard_pending()
    clock.seconds = dict.fromkeys(clock.seconds, 0.0)
    clock.reserve(n)  # the block's events made before its timing, as the suite's runs make them
    steps.sync()
    e0 = nvml.energy_mj(index) if index is not None else None
    with beside(toggles, index), GcPauses() as pauses:
        threads = sorted(t.name for t in threading.enumerate())
        t0 = time.perf_counter()
        for _ in range(n):
            steps.step(toggles, clock)
        steps.sync()
        seconds = time.perf_counter() - t0
    e1 = nvml.energy_mj(index) if index is not None else None
    clock.drain()
    return {
        "seconds": seconds,
        "power_w": (e1 - e0) / 1000.0 / seconds if e0 is not None and e1 is not None and e1 > e0 else None,
        "phases_ms": {k: 1e3 * clock.seconds[k] / n for k in COMPUTE} if "events" in toggles else None,
        "python_threads": threads,
        "cpus": len(os.sched_getaffinity(0)),  # the CPUs this rank may run on
        "gc_collections": pauses.count,  # by generation
        "gc_s": pauses.seconds,
    }


class _RunShim:
    """What a training workload's ``_start_bare_loop`` reads of its run context."""

    def __init__(self, device: Any, rank: int, world: int, artifacts: Path) -> None:
        from perfsuite.crosscheck import take_turns
        from perfsuite.crosscheck.training import bare_loop_for

        local = int(os.environ.get("LOCAL_RANK", 0))
        self.device = device.type
        self.controls = argparse.Namespace(seed=1)
        self.crosscheck = argparse.Namespace(
            bare_loop=lambda argv: bare_loop_for(argv, artifacts, rank, world, local, take_turns)
        )


def start_bare_loop(workload: Any, rank: int, world: int, device: Any, out: Path | None) -> Any:
    """The cross-check's bare loop of this workload, started as a run starts it (one child per
    rank); its ranks' logs go to a folder made for them beside ``out`` (else a fresh temporary one)."""
    import tempfile

    if out is not None:
        logs = out.with_name(out.stem + ".bare-loop")
        logs.mkdir(parents=True, exist_ok=True)
    else:
        logs = Path(tempfile.mkdtemp(prefix="ddp-step-gap-bare-loop-"))
    return workload._start_bare_loop(_RunShim(device, rank, world, logs))


def take_turns_with(
    check: Any, steps: Steps, names: list[str], n: int, rounds: int, index: int | None, agree: Any
) -> dict:
    """Each named variant in turns with the bare loop's processes, as a run's cross-check takes
    them (``versus_bare_loop``, after ``BareLoopCheck.ready_for``, as its ``compare`` does): per
    variant, both sides' samples/s per round and the paired figures. The bare loop is closed
    afterwards; one that failed is said, not raised."""
    from perfsuite.crosscheck.training import ReferenceFailed, versus_bare_loop
    from perfsuite.measure.nvml_sampler import Endpoints

    out: dict[str, Any] = {}
    try:
        if not check.ready_for(sum(t.numel() for t in steps.model.parameters())):
            return {"status": "failed", "reason": check.failure}
        sampler = (lambda: Endpoints(index)) if index is not None else None
        for name in names:
            toggles = VARIANTS[name]

            def suite_block(k: int, toggles: frozenset[str] = toggles) -> float:
                if "events" in toggles:  # made before the timing, as a run's turns make them
                    steps.clock.reserve(k)
                steps.sync()
                t0 = time.perf_counter()
                with beside(toggles, None):
                    for _ in range(k):
                        steps.step(toggles, steps.clock)
                    steps.sync()
                seconds = time.perf_counter() - t0
                steps.clock.drain()
                return seconds

            try:
                found = versus_bare_loop(
                    check.bare, [], suite_block, n, steps.p.global_batch, rounds, check.take_turns, sampler, agree
                )
            except ReferenceFailed as exc:
                return {**out, name: {"status": "failed", "reason": str(exc)}}
            out[name] = {key: found[key] for key in TURN_FIGURES}
        return out
    finally:
        check.close()


def measure(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    rank, world, device = join(args.device)
    workload = workload_for(args, world)
    turning = [name for name in args.beside_bare.split(",") if name]
    bare_loop = start_bare_loop(workload, rank, world, device, args.out) if turning else None
    steps = Steps(workload, rank, world, device, args.as_run)
    if bare_loop is not None:
        bare_loop.wait_ready()  # built and compiled: it holds its memory, idle, as beside a run's blocks
    index = gpu_index(device)
    names = args.variants.split(",")
    if args.model != "gpt" and "vocab" in names:
        names.remove("vocab")  # images have no vocabulary

    def agree_max(value: float) -> float:
        if world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    t0 = time.perf_counter()
    steps.step(VARIANTS["bare"], None)  # compiles
    steps.sync()
    compile_s = agree_max(time.perf_counter() - t0)
    probe = block(steps, VARIANTS["bare"], CALIBRATION_STEPS, None)
    n = int(agree_max(max(MIN_STEPS, math.ceil(args.seconds / (probe["seconds"] / CALIBRATION_STEPS)))))
    runs: list[tuple[str, int, dict]] = []
    for r in range(args.rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:  # each round starts one variant later
            runs.append((name, r, block(steps, VARIANTS[name], n, index)))
    steps.restore()
    for name in AFTER_RESTORE:
        if name in names:
            runs.append((f"{name} after restore", args.rounds, block(steps, VARIANTS[name], n, index)))
    # last, every rank pinned to the CPUs beside its GPU (where every rank can be): whether where
    # the scheduler put a rank's threads is part of the gap (nothing pins the suite's ranks or the bare loop's)
    local = gpu_local_cpus(device)
    if -agree_max(-float(local is not None and local != os.sched_getaffinity(0))) > 0:
        assert local is not None
        os.sched_setaffinity(0, local)
        for name in ("bare", "suite-now"):
            if name in names:
                runs.append((f"{name} pinned", args.rounds + 1, block(steps, VARIANTS[name], n, index)))
    turns = (
        take_turns_with(bare_loop, steps, turning, n, args.rounds, index, lambda v: int(agree_max(v)))
        if bare_loop is not None
        else None
    )
    mine = [dict(found, variant=name, round=r, rank=rank) for name, r, found in runs]
    every: list[Any] = [None] * world
    if world > 1:
        dist.all_gather_object(every, mine)
    else:
        every = [mine]
    if rank == 0:
        p = workload.params
        out = {
            "model": args.model,
            "world_size": world,
            "global_batch": p.global_batch,
            "per_rank_batch": p.global_batch // world,
            "params": dataclasses.asdict(p),
            "steps_per_block": n,
            "warm_steps_per_block": WARM_STEPS,
            "compile_s": compile_s,
            "as_run": args.as_run,
            "untimed_init_s": steps.untimed_s,
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "variants": fold(every, n, p.global_batch),
        }
        if turns is not None:
            out["beside_bare"] = turns
        print_table(out)
        if args.out is not None:
            args.out.write_text(json.dumps(out, indent=1))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
        # Everything is written. On the CPU, a gloo rank that ran evaluations (their all-reduces)
        # can abort in the interpreter's teardown after this ("terminate called without an active
        # exception": 5 of 24 two-rank runs beside three busy loops on 2 cores), so the rank
        # leaves here, without the C++ destructors.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def fold(every: list[list[dict]], n: int, global_batch: int) -> dict:
    """Per variant: each round's block seconds (the slowest rank's: a step ends on every rank at
    its all-reduce), the median samples/s, every rank's power and phase split."""
    out: dict[str, dict] = {}
    for entry in every[0]:
        name, r = entry["variant"], entry["round"]
        ranks = [next(e for e in theirs if e["variant"] == name and e["round"] == r) for theirs in every]
        v = out.setdefault(
            name,
            {
                "block_seconds": [],
                "power_w": [],
                "phases_ms": [],
                "gc_s": [],
                "gc_collections": [],
                "python_threads": entry["python_threads"],
            },
        )
        v["block_seconds"].append(max(e["seconds"] for e in ranks))
        v["power_w"].append([e["power_w"] for e in ranks])
        v["phases_ms"].append([e["phases_ms"] for e in ranks])
        v["gc_s"].append([e["gc_s"] for e in ranks])
        v["gc_collections"].append([e["gc_collections"] for e in ranks])
    for v in out.values():
        v["ms_per_step"] = 1e3 * statistics.median(v["block_seconds"]) / n
        v["samples_per_s"] = n * global_batch / statistics.median(v["block_seconds"])
    bare = out.get("bare", {}).get("samples_per_s")
    for v in out.values():
        v["vs_bare"] = v["samples_per_s"] / bare if bare else None
    return out


def print_table(out: dict) -> None:
    print(
        f"{out['model']} on {out['world_size']} rank(s) ({out['device']}, torch {out['torch']}): "
        f"{out['per_rank_batch']} a rank, {out['steps_per_block']} steps a block, compiled in {out['compile_s']:.1f} s"
        + (" (built as a run: FLOPs counted, untimed warm-up and restore)" if out.get("as_run") else "")
    )
    head = f"{'variant':<22}{'ms/step':>9}{'samples/s':>11}{'vs bare':>9}  {'power W (rank 0..)':<26}"
    print(head + f"{'gc ms (max rank)':>17}  fwd/bwd/opt ms (rank 0)")
    for name, v in out["variants"].items():
        powers = [[w for w in rnd if w is not None] for rnd in v["power_w"]]
        per_rank = [statistics.median(col) for col in zip(*powers, strict=False)] if all(powers) else []
        watts = " ".join(f"{w:.0f}" for w in per_rank) or "-"
        phases = [rnd[0] for rnd in v["phases_ms"] if rnd[0]]
        split = "/".join(f"{statistics.median(ph[k] for ph in phases):.1f}" for k in phases[0]) if phases else "-"
        ratio = f"{v['vs_bare']:.3f}" if v["vs_bare"] else "-"
        gc_ms = 1e3 * statistics.median(max(rnd) for rnd in v["gc_s"])
        row = f"{name:<22}{v['ms_per_step']:>9.2f}{v['samples_per_s']:>11.1f}{ratio:>9}  {watts:<26}"
        print(row + f"{gc_ms:>17.1f}  {split}")
    for name, turns in (out.get("beside_bare") or {}).items():
        if not isinstance(turns, dict) or "rounds" not in turns:
            print(f"beside the bare loop's processes, {name}: {turns}")
            continue
        ratios = " ".join(f"{r['suite_samples_per_s'] / r['reference_samples_per_s']:.3f}" for r in turns["rounds"])
        low, high = turns["round_ratio_ci95"]
        print(
            f"beside the bare loop's processes, {name}: {turns['suite_samples_per_s']:.1f} against "
            f"{turns['reference_samples_per_s']:.1f} samples/s, round ratios {ratios}, "
            f"median {turns['round_ratio_median']:.3f} ({low:.3f}-{high:.3f})"
        )
    for name in ("bare", "suite", "suite-now"):
        if name in out["variants"]:
            print(f"python threads during a {name} block: {', '.join(out['variants'][name]['python_threads'])}")


def summarize(found: list[dict]) -> None:
    """Each variant's weak-scaling efficiency at every world size against the one-rank file."""
    by_world = {f["world_size"]: f for f in found}
    if 1 not in by_world:
        sys.exit("ddp_step_gap --summarize: no one-rank file among them (efficiency is against one rank)")
    one = by_world[1]["variants"]
    worlds = sorted(w for w in by_world if w > 1)
    print(f"weak-scaling efficiency (N-rank samples/s over N x one rank's), {by_world[1]['model']}")
    print(f"{'variant':<22}" + "".join(f"{f'{w} ranks':>12}{'- bare':>9}" for w in worlds))
    for name in one:
        cells = []
        for w in worlds:
            theirs = by_world[w]["variants"]
            if name not in theirs or "bare" not in theirs:
                cells.append(f"{'-':>12}{'':>9}")
                continue
            eff = theirs[name]["samples_per_s"] / (w * one[name]["samples_per_s"])
            bare_eff = theirs["bare"]["samples_per_s"] / (w * one["bare"]["samples_per_s"])
            cells.append(f"{eff:>12.3f}{eff - bare_eff:>+9.3f}")
        print(f"{name:<22}" + "".join(cells))


if __name__ == "__main__":
    main()
