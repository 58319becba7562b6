"""From what a user asked for to the runs the runner is given: the one builder that
``perfsuite run`` and ``perfsuite.run`` both call, so that a command line and a Python call
saying the same thing make the same runs (the same workloads in the same order, parameters,
seeds, controls, ranks and quick defaults), and refuse the same things with the same line.

A request is built from three things: the workload names (none with ``quick``: the quick
suite), the parameter assignments (:data:`Assignment`: ``k=v`` for every named workload that
has ``k``, ``name:k=v`` for one) and the run options, named as ``perfsuite run``'s options
are (:data:`RUN_DEFAULTS`). Anything that cannot run as asked raises :class:`RequestError`
(a ``ValueError``, one line) before anything runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from perfsuite.engine.runspec import RunRequest

# The run options and their defaults, as the command line has them: the one place they live
# (``perfsuite run``'s options, a plan's entries and ``perfsuite.run``'s controls all name these).
RUN_DEFAULTS: dict[str, Any] = dict(
    quick=False,
    device=None,
    repeat=1,
    timeout_s=None,
    seed=None,
    deterministic=False,
    warmup=None,
    iterations=None,
    min_time_s=None,
    l2_flush=False,
    cuda_graph=False,
    nproc_per_node=None,
    nnodes=1,
    node_rank=0,
    rdzv_endpoint=None,
    division="open",
    reproduces=None,
    strict=False,
    profile=None,
    price_per_hour=None,
)
# Controls a Python caller may set that have no option on the command line.
PYTHON_ONLY_OPTIONS: dict[str, Any] = dict(max_iterations=None)

MAX_SEED = 2**32 - 1  # numpy's seeders and PYTHONHASHSEED take no more

# (workload or None for every named workload that has the key, key, value): one ``--param``.
Assignment = tuple[str | None, str, Any]


class RequestError(ValueError):
    """Runs that cannot be built as asked; the message is one line."""


def parse_param_items(items: Sequence[str]) -> list[Assignment]:
    """``["m=1024", "kernels.gemm:dtypes=bf16"]`` (``--param`` as typed) -> assignments."""
    from perfsuite.engine.params import ParamError, parse_assignments

    out: list[Assignment] = []
    for item in items:
        target = None
        if ":" in item.split("=", 1)[0]:
            target, item = item.split(":", 1)
        try:
            ((key, value),) = parse_assignments([item]).items()
        except ParamError as exc:
            raise RequestError(str(exc)) from None
        out.append((target, key, value))
    return out


def build_requests(
    host,
    names: Sequence[str],
    assignments: Sequence[Assignment],
    options: Mapping[str, Any],
    extra_env: Mapping[str, str] | None = None,
) -> list[RunRequest]:
    """The runs asked for: each named workload (or, with ``quick`` and no names, every
    workload; the ceilings first), its parameters resolved, once per ``repeat`` with its own
    seed. ``options`` are run options by :data:`RUN_DEFAULTS`' names; ``extra_env`` variables
    for the measuring process beyond the suite's own (a cross-check's reference tools)."""
    from perfsuite.controls import QUICK_MIN_TIME_S
    from perfsuite.engine import params as params_mod
    from perfsuite.engine.launcher import LaunchOptions, default_nproc_per_node, gpus_visible, slurm_world
    from perfsuite.engine.runner import repeat_seeds, resolve_controls
    from perfsuite.plugins import UnknownWorkload
    from perfsuite.schemas.cost import validate_price

    unknown = sorted(set(options) - set(RUN_DEFAULTS) - set(PYTHON_ONLY_OPTIONS))
    if unknown:
        raise RequestError(f"unknown run options {unknown}: valid: {', '.join([*RUN_DEFAULTS, *PYTHON_ONLY_OPTIONS])}")
    o = {**RUN_DEFAULTS, **PYTHON_ONLY_OPTIONS, **options}
    try:
        validate_price(o["price_per_hour"])
    except ValueError as exc:
        raise RequestError(f"--price-per-hour: {exc}") from None
    if o["seed"] is not None and o["seed"] + o["repeat"] - 1 > MAX_SEED:
        raise RequestError(
            f"--seed {o['seed']} with --repeat {o['repeat']}: the last run's seed would be "
            f"{o['seed'] + o['repeat'] - 1}, above {MAX_SEED} (2**32-1, the most the seeders take)"
        )
    quick = o["quick"]
    if not names:
        if not quick:
            raise RequestError("name at least one workload, or use --quick alone for the quick suite")
        names = tuple(host.workloads)
    names_list = _order(list(dict.fromkeys(names)))
    device = o["device"] or ("cuda" if gpus_visible() > 0 else "cpu")
    try:
        for n in names_list:
            host.get(n)
        per_params = _assign(assignments, names_list, host)
        resolved = {n: params_mod.resolve(host.get(n).cls, per_params[n], quick) for n in names_list}
    except (UnknownWorkload, params_mod.ParamError) as exc:
        raise RequestError(str(exc)) from None
    min_time_s = o["min_time_s"]
    if min_time_s is None and quick:
        min_time_s = QUICK_MIN_TIME_S
    nnodes = o["nnodes"]
    gpus = gpus_visible() if device == "cuda" else 0
    requests = []
    for n in names_list:
        entry = host.get(n)
        # The ranks follow the GPUs visible here unless told otherwise (--nproc-per-node); across
        # nodes one per node unless told, and under srun every task is already one rank.
        reqs = entry.cls.requirements
        auto = default_nproc_per_node(reqs, device, gpus) if nnodes == 1 and slurm_world() == 1 else 1
        nproc = o["nproc_per_node"] or auto
        if reqs.max_world_size is not None and nnodes == 1 and nproc > reqs.max_world_size:
            nproc = reqs.max_world_size  # --nproc-per-node is for the multi-rank workloads named beside it
        launch = LaunchOptions(
            nproc_per_node=nproc, nnodes=nnodes, node_rank=o["node_rank"], rdzv_endpoint=o["rdzv_endpoint"]
        )
        for i, s in enumerate(repeat_seeds(o["seed"], o["repeat"])):
            controls = resolve_controls(
                device=device,
                seed=s,
                deterministic=o["deterministic"],
                warmup=o["warmup"],
                iterations=o["iterations"],
                min_time_s=min_time_s,
                max_iterations=o["max_iterations"],
                l2_flush=o["l2_flush"],
                cuda_graph=o["cuda_graph"],
                timeout_s=o["timeout_s"],
                repeat_index=i,
                repeat_count=o["repeat"],
                profile=o["profile"],
            )
            requests.append(
                RunRequest(
                    entry,
                    resolved[n],
                    quick,
                    controls,
                    launch,
                    division=o["division"],
                    reproduces=o["reproduces"],
                    strict=o["strict"],
                    price_per_hour=o["price_per_hour"],
                    extra_env=dict(extra_env or {}),
                )
            )
    return requests


def _order(names: list[str]) -> list[str]:
    """The ceilings run goes first, so the runs after it get roofline fractions."""
    from perfsuite.measure.roofline import CEILINGS_WORKLOAD

    return sorted(names, key=lambda n: (n != CEILINGS_WORKLOAD,))


def _assign(assignments: Sequence[Assignment], names: list[str], host) -> dict[str, dict[str, Any]]:
    """Each workload's parameter values: an untargeted assignment goes to every named workload
    that has the key, a targeted one to its workload; a key no named workload has is an error."""
    from perfsuite.engine.params import ParamError, param_fields

    per: dict[str, dict[str, Any]] = {n: {} for n in names}
    for target, key, value in assignments:
        if target is not None and target not in per:
            raise ParamError(f"--param {target}:{key}={value}: {target!r} is not one of the workloads being run")
        hit = False
        for n in [target] if target else names:
            if key in param_fields(host.get(n).cls.Params):
                per[n][key] = value
                hit = True
        if not hit:
            raise ParamError(unknown_param_text(key, [target] if target else names, host))
    return per


def unknown_param_text(key: str, names: list[str], host) -> str:
    """One line naming the parameters the workloads do have, the closest first."""
    from perfsuite.engine.params import param_fields

    valid = sorted({p for n in names for p in param_fields(host.get(n).cls.Params)})
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    where = ", ".join(names)
    listed = ", ".join(valid) or "none"
    return f"unknown parameter {key!r} for {where}: {hint}valid: {listed} (perfsuite describe {names[0]})"
