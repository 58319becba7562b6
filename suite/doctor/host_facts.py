"""Host facts for the doctor, read from ``/sys``, ``/proc`` and psutil.

Every reader returns a :class:`Fact`: the value, or None with the reason it could not be
read here (no cpufreq in a VM, no NUMA in a container, ...). Nothing is written.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@dataclass(frozen=True)
class Fact:
    value: Any
    reason: str | None = None  # why value is None

    @classmethod
    def unread(cls, reason: str) -> "Fact":
        return cls(None, reason)


@dataclass
class HostReading:
    governors: Fact = field(default_factory=lambda: Fact.unread("not read"))  # sorted set of governor names
    turbo: Fact = field(default_factory=lambda: Fact.unread("not read"))  # True enabled / False disabled
    thp: Fact = field(default_factory=lambda: Fact.unread("not read"))  # "always" | "madvise" | "never"
    swap_used_bytes: Fact = field(default_factory=lambda: Fact.unread("not read"))
    load_1m: Fact = field(default_factory=lambda: Fact.unread("not read"))
    cpu_count: int = 1
    busy_processes: Fact = field(default_factory=lambda: Fact.unread("not read"))  # [(pid, name, cpu%)]


def _read_text(path: Path) -> Fact:
    try:
        return Fact(path.read_text().strip())
    except OSError as exc:
        return Fact.unread(f"{path}: {exc.strerror or exc}")


def governors() -> Fact:
    files = sorted(SYS_CPU.glob("cpu[0-9]*/cpufreq/scaling_governor"))
    if not files:
        return Fact.unread(f"no {SYS_CPU}/cpu*/cpufreq/scaling_governor (no cpufreq driver: VM or container)")
    seen = set()
    for f in files:
        fact = _read_text(f)
        if fact.value is None:
            return fact
        seen.add(fact.value)
    return Fact(sorted(seen))


def turbo() -> Fact:
    """intel_pstate's no_turbo (1 = off), else cpufreq's boost (1 = on)."""
    no_turbo = SYS_CPU / "intel_pstate" / "no_turbo"
    boost = SYS_CPU / "cpufreq" / "boost"
    if no_turbo.exists():
        fact = _read_text(no_turbo)
        return Fact(fact.value == "0") if fact.value is not None else fact
    if boost.exists():
        fact = _read_text(boost)
        return Fact(fact.value == "1") if fact.value is not None else fact
    return Fact.unread(f"neither {no_turbo} nor {boost} exists (no frequency driver exposes turbo here)")


def thp() -> Fact:
    fact = _read_text(THP)
    if fact.value is None:
        return fact
    chosen = [w[1:-1] for w in fact.value.split() if w.startswith("[")]
    return Fact(chosen[0]) if chosen else Fact.unread(f"{THP}: no bracketed mode in {fact.value!r}")


def swap_used() -> Fact:
    import psutil

    try:
        return Fact(int(psutil.swap_memory().used))
    except (OSError, RuntimeError) as exc:
        return Fact.unread(f"psutil.swap_memory: {exc}")


def load_1m() -> Fact:
    try:
        return Fact(os.getloadavg()[0])
    except OSError as exc:
        return Fact.unread(f"getloadavg: {exc}")


def busy_processes(sample_s: float, threshold_pct: float = 25.0) -> Fact:
    """Processes other than this one and its ancestors using over ``threshold_pct`` of a
    core during a short sample."""
    import psutil

    mine = {os.getpid()}
    # ancestors unreadable: they may then appear as busy, which is honest
    with contextlib.suppress(psutil.Error):
        mine.update(p.pid for p in psutil.Process().parents())
    procs = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.info["pid"] in mine:
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue  # ended or not ours to read
    time.sleep(sample_s)
    busy = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
        except psutil.Error:
            continue
        if pct >= threshold_pct:
            busy.append((p.info["pid"], p.info["name"] or "?", round(pct, 1)))
    return Fact(sorted(busy, key=lambda b: -b[2]))


def affinity_cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def node_cpus(node: int) -> Fact:
    fact = _read_text(SYS_NODE / f"node{node}" / "cpulist")
    return Fact(parse_cpulist(fact.value)) if fact.value is not None else fact


def read(busy_sample_s: float = 0.5) -> HostReading:
    return HostReading(
        governors=governors(),
        turbo=turbo(),
        thp=thp(),
        swap_used_bytes=swap_used(),
        load_1m=load_1m(),
        cpu_count=os.cpu_count() or 1,
        busy_processes=busy_processes(busy_sample_s),
    )
