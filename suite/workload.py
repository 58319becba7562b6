"""The workload contract: what a workload author writes, in one file per workload.

A workload declares who it is (``name``, ``category``, ``version``), typed parameters
(a dataclass ``Params`` plus a ``quick`` preset), what it needs (``requirements``) and,
for each thing it times, a :class:`Case`: the function to time, the work one call does
(FLOPs, bytes, items), the device ceiling it is judged against, and how its output is
verified. The harness owns warm-up, timing, statistics, energy, output and storage.

Workloads that are not a simple timed loop (sweeps, time-to-target, LoadGen scenarios)
override :meth:`Workload.execute` and drive ``ctx.measure`` / ``ctx.add_metric`` themselves.

Nothing here imports torch: workload modules are imported by ``perfsuite list``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from perfsuite.controls import TIMING_CONTROLS
from perfsuite.schemas.headline import Headline

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.case import Case
    from perfsuite.context import RunContext

CATEGORIES = ("data", "kernels", "collectives", "training", "inference")
DEVICES = ("cpu", "cuda")


def param(default: Any, help: str, choices: tuple | None = None, harness: bool = False, output: bool = False) -> Any:
    """A typed workload parameter: use as a field of a workload's ``Params`` dataclass.

    ``harness=True``: the parameter steers only a self-test of the harness (a planted wrong
    element, a rank that raises), never what is measured. It stays out of the comparability
    key, and a run with it away from its default is a self-test: recorded, never ranked.

    ``output=True``: the parameter says only where the run leaves something behind (a folder a
    trained model is saved in), never how it runs or what is measured: it stays out of the
    comparability key, and the run is ranked as any other."""
    meta: dict[str, Any] = {"help": help}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if harness:
        meta["harness"] = True
    if output:
        meta["output"] = True
    if isinstance(default, (list, dict, set)):
        raise TypeError("parameter defaults must be immutable (use a tuple)")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Requirements:
    """What a workload needs before it can run; an unmet one is a skip with its reason.

    ``devices``: the devices it runs on, of ``("cpu", "cuda")`` (``devices=("cuda",)``: a GPU
    workload, skipped on the CPU with the reason). ``min_world_size``/``max_world_size``: the
    ranks it runs with (``max_world_size=1``: one process that drives its devices itself).
    ``packages``: importable module names it needs (``"triton"``, ``"nvidia.dali"``), checked
    without importing them. ``rank_per_gpu``: ``True`` gives a run on one node one rank per
    visible GPU (two gloo ranks on the CPU) unless ``--nproc-per-node`` says otherwise, as
    nccl-tests' ``-g`` takes the GPUs it is given; ``False``: one process.

    Example: ``Requirements(devices=("cuda",), packages=("triton",))``.
    """

    devices: tuple[str, ...] = DEVICES
    min_world_size: int = 1
    max_world_size: int | None = None  # 1: one process that drives its devices itself
    packages: tuple[str, ...] = ()  # importable module names, e.g. "triton", "nvidia.dali"
    # True: a run on one node gets one rank per GPU visible (two gloo ranks on the CPU) unless
    # --nproc-per-node says otherwise, as nccl-tests -g takes the GPUs it is given (the collectives);
    # False: one process (perfsuite.engine.launcher.default_nproc_per_node decides).
    rank_per_gpu: bool = False


class Workload:
    """Base class of every workload. Subclasses set the class attributes and implement
    :meth:`setup` and :meth:`cases` (or :meth:`execute` for a driver).

    Class attributes: ``name`` (dotted, ``"axpy.scaled_add"``), ``category`` (one of
    ``data``, ``kernels``, ``collectives``, ``training``, ``inference``), ``version`` (bump it
    when what is measured changes: records of different versions are never compared, unless
    ``comparable_since`` says they measure the same thing), ``description`` (one line for
    ``perfsuite list``), ``Params`` (a frozen dataclass of :func:`param` fields), ``quick``
    (parameter overrides of ``--quick``), ``requirements`` (:class:`Requirements`),
    ``primary_metric`` (each case's headline metric, e.g. ``"tflops"``; ``None``: its first
    throughput), ``headline`` (a richer :class:`~perfsuite.Headline`, per scenario or size),
    and ``controls_honoured`` (the timing controls a driver that times its own way applies;
    the rest are recorded as not applied).

    The harness calls, in the measuring process: :meth:`unmet`, :meth:`setup`,
    :meth:`execute` (which by default measures and verifies every case of :meth:`cases`),
    then :meth:`teardown`, always. ``self.params`` holds the resolved ``Params``.
    """

    name: ClassVar[str]
    category: ClassVar[str]
    version: ClassVar[int] = 1
    description: ClassVar[str] = ""
    Params: ClassVar[type]
    quick: ClassVar[Mapping[str, Any]] = {}
    requirements: ClassVar[Requirements] = Requirements()
    # The headline metric of each case (e.g. "tflops"), stored in the record and used by every
    # table and summary (schemas.headline); None: the case's first throughput.
    primary_metric: ClassVar[str | None] = None
    # A richer headline (per scenario, per message size, figures beside it, the validity check);
    # None: ``primary_metric`` alone. See perfsuite.schemas.headline.Headline.
    headline: ClassVar[Headline | None] = None
    # The oldest version whose records measure the same thing as this one (its records and
    # this version's then share a comparability key); None: only this version's.
    comparable_since: ClassVar[int | None] = None
    # The timing controls (perfsuite.controls.TIMING_CONTROLS) this workload applies: all of them
    # when its cases go through ctx.measure; a driver that times its own way names the ones
    # it honours, and its records state the rest as not applied.
    controls_honoured: ClassVar[tuple[str, ...]] = TIMING_CONTROLS

    def __init__(self, params: Any) -> None:
        self.params = params

    # -- before any process starts, called by the runner -----------------------------
    def footprint_bytes(self, world_size: int) -> int | None:
        """Bytes this run allocates on its measuring device per rank (host memory on the CPU,
        device memory on a GPU), or None when unknown. The runner refuses a run whose
        footprint exceeds the memory available, before it starts. Cheap: no torch."""
        return None

    # -- lifecycle, called by the harness in the measuring process -----------------
    def unmet(self, ctx: "RunContext") -> str | None:
        """Return why this run cannot happen on this machine (dtype not supported, feature
        missing), or None. Called after requirements are checked, before setup."""
        return None

    def setup(self, ctx: "RunContext") -> None:
        """Allocate inputs deterministically from ctx's seeded generators."""

    def cases(self, ctx: "RunContext") -> "list[Case]":
        """The timed cases of this run, one :class:`~perfsuite.Case` per implementation or
        precision, built on what :meth:`setup` allocated. A case that cannot run here is left
        out and reported with ``ctx.skip_case(label, reason)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement cases() or execute()")

    def execute(self, ctx: "RunContext") -> None:
        """Time every case, then verify it. Drivers override this (and note their own progress
        with ``perfsuite.distributed.note_progress``)."""
        from perfsuite.distributed import note_progress

        cases = self.cases(ctx)
        for done, case in enumerate(cases):
            note_progress(case.label, done, len(cases))
            ctx.measure(case)
            ctx.verify(case)

    def teardown(self, ctx: "RunContext") -> None:
        """Free what setup allocated."""

    # -- presentation, called by ``perfsuite show`` ---------------------------------
    @classmethod
    def render_details(cls, record: Mapping[str, Any]) -> Any:
        """Return a rich renderable for the record's ``details`` (e.g. an nccl-tests table),
        or None when the metrics table says it all."""
        return None


def harness_params(cls: type[Workload]) -> dict[str, Any]:
    """Name -> default (JSON-ready: a tuple as a list) of the parameters declared ``param(..., harness=True)``."""
    return {
        f.name: list(f.default) if isinstance(f.default, tuple) else f.default
        for f in dataclasses.fields(cls.Params)
        if f.metadata.get("harness")
    }


def output_params(cls: type[Workload]) -> list[str]:
    """Names of the parameters declared ``param(..., output=True)``."""
    return [f.name for f in dataclasses.fields(cls.Params) if f.metadata.get("output")]


def headline_declaration(cls: type[Workload]) -> Headline | None:
    """The workload's headline: its declaration, else its ``primary_metric`` alone, else None."""
    if cls.headline is not None:
        return cls.headline
    return Headline(metric=(cls.primary_metric,)) if cls.primary_metric else None


def validate_workload_class(cls: Any) -> None:
    """Raise TypeError naming the first thing wrong with a registered workload class."""
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        raise TypeError(f"{cls!r} is not a subclass of perfsuite.Workload")
    for attr in ("name", "category", "Params"):
        if not hasattr(cls, attr):
            raise TypeError(f"workload {cls.__name__} does not set {attr!r}")
    if cls.category not in CATEGORIES:
        raise TypeError(f"workload {cls.name}: category {cls.category!r} is not one of {CATEGORIES}")
    if "." not in cls.name or cls.name.split(".", 1)[0] == "":
        raise TypeError(f"workload name {cls.name!r} must be dotted, e.g. 'kernels.gemm'")
    if not dataclasses.is_dataclass(cls.Params):
        raise TypeError(f"workload {cls.name}: Params must be a dataclass")
    names = {f.name for f in dataclasses.fields(cls.Params)}
    unknown = set(cls.quick) - names
    if unknown:
        raise TypeError(f"workload {cls.name}: quick preset names unknown parameters {sorted(unknown)}")
    unknown = set(cls.controls_honoured) - set(TIMING_CONTROLS)
    if unknown:
        raise TypeError(f"workload {cls.name}: controls_honoured names unknown controls {sorted(unknown)}")
    if cls.primary_metric is not None and not (isinstance(cls.primary_metric, str) and cls.primary_metric):
        raise TypeError(f"workload {cls.name}: primary_metric must be a metric name or None")
    if cls.headline is not None and not isinstance(cls.headline, Headline):
        raise TypeError(f"workload {cls.name}: headline must be a perfsuite.Headline or None")
    since = cls.comparable_since
    if since is not None and not (isinstance(since, int) and 1 <= since <= cls.version):
        raise TypeError(f"workload {cls.name}: comparable_since must be a version from 1 to {cls.version}, or None")
    for d in cls.requirements.devices:
        if d not in DEVICES:
            raise TypeError(f"workload {cls.name}: device {d!r} is not one of {DEVICES}")
