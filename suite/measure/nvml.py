"""GPU state through NVML: observed and recorded, never changed.

Clocks, power and its enforced limit, temperature, clock-event (throttle) reasons, the
total-energy counter and the processes on each GPU. Every function degrades to "not
available" with the reason instead of raising, since a machine without NVIDIA GPUs is a
normal place to run the CPU workloads.
"""

from __future__ import annotations

import functools
from typing import Any

_REASONS = (
    ("nvmlClocksEventReasonGpuIdle", "gpu idle"),
    ("nvmlClocksEventReasonApplicationsClocksSetting", "applications clocks setting"),
    ("nvmlClocksEventReasonSwPowerCap", "software power cap"),
    ("nvmlClocksEventReasonHwSlowdown", "hardware slowdown"),
    ("nvmlClocksEventReasonSyncBoost", "sync boost"),
    ("nvmlClocksEventReasonSwThermalSlowdown", "software thermal slowdown"),
    ("nvmlClocksEventReasonHwThermalSlowdown", "hardware thermal slowdown"),
    ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "hardware power brake slowdown"),
    ("nvmlClocksEventReasonDisplayClockSetting", "display clock setting"),
)


@functools.lru_cache(maxsize=1)
def init() -> tuple[Any, str | None]:
    """(pynvml module or None, reason it is unavailable)."""
    try:
        import pynvml
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed ({exc})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: no GPU here
        return None, f"NVML unavailable: {exc}"
    return pynvml, None


def device_count() -> int:
    nv, _ = init()
    return nv.nvmlDeviceGetCount() if nv else 0


def _try(fn, *args, default=None):
    """One NVML query; a query the GPU does not support reads as None."""
    nv, _ = init()
    try:
        return fn(*args)
    except nv.NVMLError:
        return default


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def describe_gpus() -> list[dict]:
    """Static description of each GPU for the environment fingerprint."""
    nv, _ = init()
    if nv is None:
        return []
    driver = _str(nv.nvmlSystemGetDriverVersion())
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        ecc = _try(nv.nvmlDeviceGetCurrentEccMode, h) if hasattr(nv, "nvmlDeviceGetCurrentEccMode") else None
        mig = _try(nv.nvmlDeviceGetMigMode, h)
        cc = _try(nv.nvmlDeviceGetCudaComputeCapability, h)
        out.append(
            {
                "index": i,
                "name": _str(nv.nvmlDeviceGetName(h)),
                "uuid": _str(nv.nvmlDeviceGetUUID(h)),
                "memory_bytes": int(nv.nvmlDeviceGetMemoryInfo(h).total),
                "driver": driver,
                "sm_count": None,  # filled from torch in the measuring process
                "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                "ecc_enabled": bool(ecc) if ecc is not None else None,
                "mig_enabled": bool(mig[0]) if mig else None,
                "pci_bus_id": _str(_try(lambda: nv.nvmlDeviceGetPciInfo(h).busId) or ""),
            }
        )
    return out


def same_uuid(a: str, b: str) -> bool:
    """torch writes a GPU's UUID bare, NVML with a 'GPU-' prefix."""
    return bool(a) and a.removeprefix("GPU-") == b.removeprefix("GPU-")


def current_cuda_gpu(gpu_list: list[dict]) -> tuple[str, dict | None]:
    """(torch's UUID of its current CUDA device, NVML's description of that GPU or None)."""
    import torch

    uuid = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", ""))
    return uuid, next((g for g in gpu_list if same_uuid(uuid, g["uuid"])), None)


def throttle_reasons(mask: int) -> list[str]:
    nv, _ = init()
    return [label for attr, label in _REASONS if hasattr(nv, attr) and mask & getattr(nv, attr)]


def observe(indices: list[int] | None = None) -> list[dict]:
    """A snapshot of each GPU's clocks, power, temperature, throttle reasons, energy counter
    and the processes on it (other processes there make a measurement suspect)."""
    nv, _ = init()
    if nv is None:
        return []
    idx = range(nv.nvmlDeviceGetCount()) if indices is None else indices
    out = []
    for i in idx:
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mask = (
            _try(nv.nvmlDeviceGetCurrentClocksEventReasons, h)
            if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
            else _try(nv.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        )
        power_mw = _try(nv.nvmlDeviceGetPowerUsage, h)
        limit_mw = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        procs = []
        for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            for p in _try(getattr(nv, getter), h, default=[]) or []:
                procs.append({"pid": int(p.pid), "used_memory_bytes": int(p.usedGpuMemory or 0)})
        out.append(
            {
                "index": i,
                "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "max_sm_clock_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                "power_w": power_mw / 1000.0 if power_mw is not None else None,
                "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
                "temperature_c": _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "throttle_reasons": throttle_reasons(mask) if mask is not None else [],
                "energy_mj": energy_mj(i),
                "processes": procs,
            }
        )
    return out


def energy_mj(index: int) -> int | None:
    """The GPU's total-energy counter in millijoules, or None where it has none."""
    nv, _ = init()
    if nv is None:
        return None
    h = nv.nvmlDeviceGetHandleByIndex(index)
    return _try(nv.nvmlDeviceGetTotalEnergyConsumption, h)
