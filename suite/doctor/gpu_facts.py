"""GPU facts for the doctor, read through NVML (and the PCI device's NUMA node in /sys).

Each field is a :class:`Fact`; a query the GPU or driver does not support reads as
unknown with NVML's own error text. Nothing is ever set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.doctor.host_facts import Fact

SYS_PCI = Path("/sys/bus/pci/devices")


@dataclass
class GpuReading:
    index: int
    name: str
    persistence: Fact  # True / False
    sm_clock_mhz: Fact
    max_sm_clock_mhz: Fact
    clock_events: Fact  # list of reason labels
    temperature_c: Fact
    slowdown_temperature_c: Fact
    ecc_enabled: Fact
    ecc_volatile_uncorrected: Fact
    ecc_aggregate_uncorrected: Fact
    retired_pages_pending: Fact  # True / False
    remapped_rows: Fact  # dict(correctable, uncorrectable, pending, failure)
    mig_enabled: Fact
    pcie_gen: Fact  # (current, max)
    pcie_width: Fact  # (current, max)
    nvlinks: Fact  # (up, present)
    numa_node: Fact
    foreign_processes: Fact  # [(pid, used bytes)]


def _query(nv: Any, fn: Callable[[], Any]) -> Fact:
    try:
        return Fact(fn())
    except nv.NVMLError as exc:
        return Fact.unread(f"NVML: {exc}")
    except AttributeError as exc:  # an older nvidia-ml-py without this call
        return Fact.unread(f"nvidia-ml-py lacks it ({exc})")


def _numa_node(bus_id: str) -> Fact:
    # NVML writes 0000xxxx:BB:DD.F with 8 domain digits; sysfs uses 4.
    domain, _, rest = bus_id.lower().partition(":")
    path = SYS_PCI / f"{domain[-4:]}:{rest}" / "numa_node"
    try:
        return Fact(int(path.read_text().strip()))
    except (OSError, ValueError) as exc:
        return Fact.unread(f"{path}: {exc}")


def _nvlinks(nv: Any, h: Any) -> tuple[int, int]:
    up = present = 0
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nv.nvmlDeviceGetNvLinkState(h, link)
        except nv.NVMLError:
            continue  # this link index does not exist on this GPU
        present += 1
        up += int(state == 1)
    if present == 0:
        raise nv.NVMLError(getattr(nv, "NVML_ERROR_NOT_SUPPORTED", 3))
    return up, present


def _foreign(nv: Any, h: Any, own: set[int]) -> list[tuple[int, int]]:
    out = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for p in getattr(nv, getter)(h) or []:
            if int(p.pid) not in own:
                out.append((int(p.pid), int(p.usedGpuMemory or 0)))
    return out


def _clock_events(nv: Any, h: Any) -> list[str]:
    from perfsuite.measure.nvml import throttle_reasons

    getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return throttle_reasons(getter(h))


def _remapped(nv: Any, h: Any) -> dict:
    corr, uncorr, pending, failure = nv.nvmlDeviceGetRemappedRows(h)[:4]
    return {"correctable": int(corr), "uncorrectable": int(uncorr), "pending": bool(pending), "failure": bool(failure)}


def read(indices: list[int] | None = None) -> tuple[list[GpuReading], str | None]:
    """(one reading per GPU, None) or ([], the reason there is no GPU to read)."""
    from perfsuite.measure import nvml

    nv, reason = nvml.init()
    if nv is None:
        return [], reason
    count = nv.nvmlDeviceGetCount()
    if count == 0:
        return [], "NVML sees no GPU"
    own = {os.getpid(), os.getppid()}
    out = []
    for i in range(count) if indices is None else indices:
        h = nv.nvmlDeviceGetHandleByIndex(i)
        q = lambda fn: _query(nv, fn)
        bus = q(lambda: nvml._str(nv.nvmlDeviceGetPciInfo(h).busId))
        out.append(
            GpuReading(
                index=i,
                name=nvml._str(nv.nvmlDeviceGetName(h)),
                persistence=q(lambda: nv.nvmlDeviceGetPersistenceMode(h) == 1),
                sm_clock_mhz=q(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                max_sm_clock_mhz=q(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                clock_events=q(lambda: _clock_events(nv, h)),
                temperature_c=q(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                slowdown_temperature_c=q(
                    lambda: nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
                ),
                ecc_enabled=q(lambda: bool(nv.nvmlDeviceGetEccMode(h)[0])),
                ecc_volatile_uncorrected=q(
                    lambda: int(
                        nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
                    )
                ),
                ecc_aggregate_uncorrected=q(
                    lambda: int(
                        nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_AGGREGATE_ECC)
                    )
                ),
                retired_pages_pending=q(lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h) == 1),
                remapped_rows=q(lambda: _remapped(nv, h)),
                mig_enabled=q(lambda: bool(nv.nvmlDeviceGetMigMode(h)[0])),
                pcie_gen=q(
                    lambda: (nv.nvmlDeviceGetCurrPcieLinkGeneration(h), nv.nvmlDeviceGetMaxPcieLinkGeneration(h))
                ),
                pcie_width=q(lambda: (nv.nvmlDeviceGetCurrPcieLinkWidth(h), nv.nvmlDeviceGetMaxPcieLinkWidth(h))),
                nvlinks=q(lambda: _nvlinks(nv, h)),
                numa_node=_numa_node(bus.value) if bus.value else bus,
                foreign_processes=q(lambda: _foreign(nv, h, own)),
            )
        )
    return out, None
