"""The latency-throughput curve as InferenceMAX draws it: per step, output tokens/s per GPU
against output tokens/s per user, beside TTFT, with the cost of a million output tokens where a
price is given and the joules per output token where the power is known.

Definitions (stated in the record's ``curve_basis``):

- Tokens/s per GPU: the step's output tokens/s (over its rate span, ``serving.metrics``) divided
  by the GPUs the engine uses, as InferenceMAX divides by its tensor-parallel size. The count is
  the ``gpus`` parameter, else what the server command says (tensor x pipeline x data parallel
  sizes, else the GPUs its ``CUDA_VISIBLE_DEVICES`` names), else 1, with the record saying it was
  assumed.
- Tokens/s per user: InferenceMAX's interactivity, 1000 / TPOT p50 (ms): the median request's
  (output tokens - 1) / (end of stream - first token), the rate at which one user sees tokens
  once the first has come. Its mean twin is 1000 / TPOT mean.
- Cost per million output tokens: ``price_per_gpu_hour`` x GPUs / 3600 / output tokens/s x 1e6,
  in ``currency``: the GPUs' hire while the step's tokens were made.
- Joules per output token: the energy of the step's GPUs over its output tokens. The energy is
  NVML's power, sampled every ``POWER_PERIOD_S`` on the GPUs the server uses while the step
  runs and integrated over time, where the endpoint is on this machine and NVML answers; else
  ``power_w_per_gpu`` x GPUs x the step's rate span when the user gave a wattage; else unknown,
  with the reason.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

POWER_PERIOD_S = 0.1  # ten readings a second per GPU: a step of a second has ten, and the client barely notices
PER_USER_DEFINITION = (
    "1000 / TPOT p50 (InferenceMAX's interactivity): the median request's "
    "(output tokens - 1) / (end of stream - first token)"
)
PER_GPU_DEFINITION = "the step's output tokens/s (over its rate span) / the engine's GPUs"
COST_DEFINITION = "price_per_gpu_hour x GPUs / 3600 / output tokens/s x 1e6"
# Flags that multiply the GPUs an engine spreads over (vLLM, SGLang, TensorRT-LLM spellings).
PARALLEL_FLAGS = {
    "tensor": ("--tensor-parallel-size", "-tp", "--tp", "--tp-size", "--tp_size"),
    "pipeline": ("--pipeline-parallel-size", "-pp", "--pp", "--pp-size", "--pp_size"),
    "data": ("--data-parallel-size", "-dp", "--dp", "--dp-size", "--dp_size"),
}


def _flag_value(argv: list[str], names: tuple[str, ...]) -> int | None:
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if text.isdigit() and int(text) > 0:
                return int(text)
    return None


def visible_devices(server_command: str, environ: Mapping[str, str]) -> list[str] | None:
    """The GPUs a server started by ``server_command`` sees: its own ``CUDA_VISIBLE_DEVICES=``
    (an ``env`` prefix), else the one it inherits from this process; None where neither is set."""
    for arg in _argv(server_command):
        if arg.startswith("CUDA_VISIBLE_DEVICES="):
            return [d for d in arg.split("=", 1)[1].split(",") if d.strip()]
    inherited = environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is None:
        return None
    return [d for d in inherited.split(",") if d.strip()]


def _argv(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def engine_gpus(server_command: str) -> tuple[int, str] | None:
    """How many GPUs the server command says its engine uses, and where that was read; None
    where it says nothing."""
    argv = _argv(server_command)
    sizes = {kind: _flag_value(argv, names) for kind, names in PARALLEL_FLAGS.items()}
    said = {kind: n for kind, n in sizes.items() if n is not None}
    if said:
        count = 1
        for n in said.values():
            count *= n
        return count, "the server command's " + " x ".join(f"{kind} parallel {n}" for kind, n in said.items())
    own = [a for a in argv if a.startswith("CUDA_VISIBLE_DEVICES=")]
    if own:
        devices = [d for d in own[0].split("=", 1)[1].split(",") if d.strip()]
        if devices:
            return len(devices), f"the server command's {own[0]}"
    return None


@dataclass(frozen=True)
class Basis:
    """What the curve of a run divides by and prices with (one per run)."""

    gpus: int
    gpus_source: str
    gpus_assumed: bool
    price_per_gpu_hour: float | None
    currency: str
    power_w_per_gpu: float | None  # the user's wattage (None: not given)
    power_gpus: tuple[int, ...] = ()  # NVML indices sampled during each step (empty: not sampled)
    power_note: str = ""  # how a step's energy is known, or why it is not

    def describe(self) -> dict:
        return {
            "gpus": self.gpus,
            "gpus_source": self.gpus_source,
            "gpus_assumed": self.gpus_assumed,
            "per_gpu": PER_GPU_DEFINITION,
            "per_user": PER_USER_DEFINITION,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "currency": self.currency if self.price_per_gpu_hour is not None else None,
            "cost": f"{self.price_per_gpu_hour:g} {self.currency} per GPU-hour; {COST_DEFINITION}"
            if self.price_per_gpu_hour is not None
            else "unknown: no price_per_gpu_hour given",
            "power_w_per_gpu": self.power_w_per_gpu,
            "power_gpus": list(self.power_gpus),
            "power": self.power_note,
        }


def basis(
    gpus: int,
    server_command: str,
    price_per_gpu_hour: float,
    currency: str,
    power_w_per_gpu: float,
    endpoint_local: bool,
    environ: Mapping[str, str] | None = None,
) -> Basis:
    """The run's basis from its parameters (0: not given) and where its endpoint runs."""
    env = os.environ if environ is None else environ
    said = engine_gpus(server_command) if server_command else None
    if gpus:
        count, source, assumed = gpus, "the gpus parameter", False
    elif said is not None:
        count, source, assumed = said[0], said[1], False
    else:
        count, source, assumed = 1, "assumed: 1 (no gpus parameter, and no server command says how many)", True
    price = price_per_gpu_hour or None
    watts = power_w_per_gpu or None
    indices, why = _power_gpus(count, server_command, endpoint_local, env)
    if indices:
        note = f"NVML power of GPUs {','.join(map(str, indices))} sampled every {POWER_PERIOD_S:g} s during each step"
        if watts is not None:
            note += f" (the given {watts:g} W per GPU where NVML gives no reading)"
    elif watts is not None:
        note = f"given: {watts:g} W per GPU x {count} GPUs x each step's rate span ({why})"
    else:
        note = f"unknown: {why}, and no power_w_per_gpu given"
    return Basis(count, source, assumed, price, currency, watts, tuple(indices), note)


def _power_gpus(count: int, server_command: str, local: bool, environ: Mapping[str, str]) -> tuple[list[int], str]:
    """NVML indices of the GPUs the server uses, or none with the reason."""
    if not local:
        return [], "the endpoint is not on this machine"
    try:
        import pynvml

        pynvml.nvmlInit()
        present = pynvml.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001 - NVML absent or failing is a stated reason, not an error
        return [], f"NVML unavailable ({type(exc).__name__}: {exc})"
    if present == 0:
        return [], "NVML sees no GPU"
    devices = visible_devices(server_command, environ)
    if devices is None:
        return list(range(min(count, present))), ""
    if not devices:
        return [], "CUDA_VISIBLE_DEVICES names no GPU"
    if not all(re.fullmatch(r"\d+", d.strip()) for d in devices):
        return [], f"CUDA_VISIBLE_DEVICES names GPUs by UUID or MIG ({','.join(devices)}): not matched to NVML"
    return [int(d) for d in devices if int(d) < present][:count], ""


@dataclass
class PowerSampler:
    """Context manager: NVML power of ``indices`` read every ``period_s`` on a daemon thread,
    integrated over time (trapezoids) into joules per GPU; no indices: records nothing."""

    indices: tuple[int, ...]
    period_s: float = POWER_PERIOD_S
    readings: list[tuple[float, list[float | None]]] = field(default_factory=list)
    error: str | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list[Any] = []
        self._t0 = 0.0

    def _read(self) -> None:
        import pynvml

        watts: list[float | None] = []
        for h in self._handles:
            try:
                watts.append(pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
            except pynvml.NVMLError:
                watts.append(None)
        self.readings.append((time.perf_counter() - self._t0, watts))

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.period_s):
                self._read()
        except Exception as exc:  # noqa: BLE001 - kept in the summary: a failing read must not stop the step
            self.error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> PowerSampler:
        self._t0 = time.perf_counter()
        if not self.indices:
            return self
        import pynvml

        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self._read()
        self._thread = threading.Thread(target=self._loop, name="serving-power", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._read()

    def summary(self) -> dict | None:
        """Joules and mean watts per GPU over the sampled span; None without two readings of every GPU."""
        if len(self.readings) < 2 or not self.indices:
            return None
        per_gpu = []
        for k in range(len(self.indices)):
            pts = [(t, watts) for t, w in self.readings if (watts := w[k]) is not None]
            if len(pts) < 2:
                return None
            joules = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in pairwise(pts))
            per_gpu.append(joules)
        span = self.readings[-1][0] - self.readings[0][0]
        return {
            "gpus": list(self.indices),
            "samples": len(self.readings),
            "span_s": span,
            "energy_j": sum(per_gpu),
            "energy_j_per_gpu": per_gpu,
            "mean_power_w": sum(per_gpu) / span if span > 0 else None,
            "sampler_error": self.error,
        }


def point(row: Mapping[str, Any], b: Basis, power: dict | None) -> dict:
    """A step's place on the curve (JSON-ready; None where a figure cannot be had)."""
    tokens_per_s = row.get("output_tokens_per_s") or 0.0
    tpot = row.get("tpot_ms") or {}
    per_gpu = tokens_per_s / b.gpus if tokens_per_s else None
    prompt = row.get("prompt_tokens")
    span = row.get("rate_span_s") or 0.0
    total_per_gpu = (row.get("output_tokens", 0) + prompt) / span / b.gpus if prompt is not None and span > 0 else None
    out: dict[str, Any] = {
        "gpus": b.gpus,
        "output_tokens_per_s_per_gpu": per_gpu,
        "total_tokens_per_s_per_gpu": total_per_gpu,
        "output_tokens_per_s_per_user": 1e3 / tpot["p50"] if tpot.get("p50") else None,
        "output_tokens_per_s_per_user_mean": 1e3 / tpot["mean"] if tpot.get("mean") else None,
        "ttft_p50_ms": (row.get("ttft_ms") or {}).get("p50"),
        "cost_per_million_output_tokens": (
            b.price_per_gpu_hour * b.gpus / 3600.0 / tokens_per_s * 1e6
            if b.price_per_gpu_hour is not None and tokens_per_s
            else None
        ),
        "currency": b.currency if b.price_per_gpu_hour is not None else None,
    }
    output_tokens = row.get("output_tokens") or 0
    if power is not None and output_tokens:
        out["energy_j"] = power["energy_j"]
        out["joules_per_output_token"] = power["energy_j"] / output_tokens
        out["power_source"] = "nvml"
    elif b.power_w_per_gpu is not None and output_tokens and span > 0:
        out["energy_j"] = b.power_w_per_gpu * b.gpus * span
        out["joules_per_output_token"] = out["energy_j"] / output_tokens
        out["power_source"] = "given"
    else:
        out["joules_per_output_token"] = None
        out["power_source"] = "unknown"
    return out
