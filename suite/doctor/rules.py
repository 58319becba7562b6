"""The verdict rules of the doctor: pure functions from readings to findings, so each
rule is tested on synthetic readings. Thresholds are named here, once, with why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfsuite.doctor.findings import Finding
from perfsuite.doctor.gpu_facts import GpuReading
from perfsuite.doctor.host_facts import Fact, HostReading, node_cpus

# Clock-event reasons that mean the GPU is being held back right now.
FAILING_CLOCK_EVENTS = (
    "hardware slowdown",
    "hardware thermal slowdown",
    "software thermal slowdown",
    "hardware power brake slowdown",
)
WARNING_CLOCK_EVENTS = ("software power cap", "applications clocks setting", "sync boost", "display clock setting")
TEMPERATURE_MARGIN_C = 5  # within this of the slowdown threshold fails
IDLE_WARM_C = 60  # an idle GPU this warm is still cooling from other work
LOAD_WARN_PER_CORE = 0.5
LOAD_FAIL_PER_CORE = 1.0


def _f(check: str, scope: str, verdict: str, value: str, why: str) -> Finding:
    return Finding(check, scope, verdict, value, why)


def _unknown(check: str, scope: str, fact: Fact) -> Finding:
    return _f(check, scope, "unknown", "unknown", fact.reason or "not read")


def _judge(check: str, scope: str, fact: Fact, rule: Callable[[Any], tuple[str, str, str]]) -> Finding:
    """Apply ``rule(value) -> (verdict, value text, why)``, or unknown with the reason."""
    if fact.value is None:
        return _unknown(check, scope, fact)
    verdict, text, why = rule(fact.value)
    return _f(check, scope, verdict, text, why)


# -- host --------------------------------------------------------------------------------
def governor(names: list[str]) -> tuple[str, str, str]:
    text = ",".join(names)
    if names == ["performance"]:
        return "ok", text, "cores stay at full frequency, so host-side timings do not wait for ramp-up"
    return (
        "warn",
        text,
        "a governor other than 'performance' ramps cores up on demand: launch-bound and data-pipeline figures vary",
    )


def turbo(enabled: bool) -> tuple[str, str, str]:
    if enabled:
        return (
            "warn",
            "enabled",
            "turbo frequency depends on temperature and active cores: host-side figures drift between runs "
            "(pyperf advises off)",
        )
    return "ok", "disabled", "host frequency does not depend on temperature or load"


def thp(mode: str) -> tuple[str, str, str]:
    if mode == "always":
        return (
            "warn",
            mode,
            "khugepaged compaction can stall a process at random: 'madvise' keeps huge pages where asked for",
        )
    return "ok", mode, "no background compaction stalls outside regions that ask for huge pages"


def swap(used: int) -> tuple[str, str, str]:
    if used > 0:
        return (
            "warn",
            f"{used / 2**20:.0f} MiB in use",
            "swapped-out pages of the benchmark or its data stall it when touched",
        )
    return "ok", "0 MiB in use", "nothing is swapped out"


def load(load_1m: float, cores: int) -> tuple[str, str, str]:
    text = f"{load_1m:.2f} on {cores} cores"
    if load_1m >= LOAD_FAIL_PER_CORE * cores:
        return "fail", text, "every core is busy with other work: launches and input pipelines will be delayed"
    if load_1m >= LOAD_WARN_PER_CORE * cores:
        return "warn", text, "other work shares the cores: host-side timings are suspect"
    return "ok", text, "the host is quiet"


def busy(procs: list[tuple[int, str, float]]) -> tuple[str, str, str]:
    if not procs:
        return "ok", "none", "no other process used a noticeable share of a core"
    text = ", ".join(f"{name} (pid {pid}, {pct:.0f}%)" for pid, name, pct in procs[:3])
    return "warn", text, "other busy processes compete for cores, memory bandwidth and PCIe"


def judge_host(h: HostReading) -> list[Finding]:
    return [
        _judge("cpu governor", "host", h.governors, governor),
        _judge("cpu turbo", "host", h.turbo, turbo),
        _judge("transparent huge pages", "host", h.thp, thp),
        _judge("swap", "host", h.swap_used_bytes, swap),
        _judge("load average", "host", h.load_1m, lambda v: load(v, h.cpu_count)),
        _judge("busy processes", "host", h.busy_processes, busy),
    ]


# -- GPU -------------------------------------------------------------------------------
def no_gpu(reason: str) -> list[Finding]:
    checks = (
        "foreign processes",
        "persistence mode",
        "clocks",
        "temperature",
        "ecc",
        "memory rows",
        "mig",
        "pcie link",
        "nvlink",
        "numa affinity",
    )
    return [_f(c, "gpu", "unknown", "unknown", f"no GPU: {reason}") for c in checks]


def foreign(procs: list[tuple[int, int]]) -> tuple[str, str, str]:
    if procs:
        text = ", ".join(f"pid {pid} ({used / 2**20:.0f} MiB)" for pid, used in procs)
        return "fail", text, "another process on the GPU shares its SMs, memory bandwidth and power budget"
    return "ok", "none", "the GPU is not shared"


def persistence(on: bool) -> tuple[str, str, str]:
    if on:
        return "ok", "on", "the driver stays loaded: no initialisation in the first call"
    return (
        "warn",
        "off",
        "without persistence mode the driver re-initialises when no process holds the GPU: first calls are slower",
    )


def clocks(sm: int, max_sm: int, events: list[str]) -> tuple[str, str, str]:
    named = [e for e in events if e != "gpu idle"]
    text = f"SM {sm} of {max_sm} MHz, clock events: {', '.join(events) or 'none'}"
    if any(e in FAILING_CLOCK_EVENTS for e in named):
        return "fail", text, "the GPU is slowed by heat or a hardware signal before the run starts"
    if named:
        return (
            "warn",
            text,
            "clocks are held below their maximum by a setting or power cap: burst figures will be lower",
        )
    return "ok", text, "idle clocks are low by design; nothing holds them back"


def temperature(temp: int, slowdown: int | None, idle: bool) -> tuple[str, str, str]:
    text = f"{temp} C" + (f" (slowdown at {slowdown} C)" if slowdown else "")
    if slowdown and temp >= slowdown - TEMPERATURE_MARGIN_C:
        return "fail", text, "the GPU is at its slowdown temperature: clocks will drop during the run"
    if idle and temp >= IDLE_WARM_C:
        return (
            "warn",
            text,
            "an idle GPU this warm is still cooling from other work: the first seconds run hotter than a cool start",
        )
    return "ok", text, "cool enough that the first seconds of a run are not thermally limited"


def ecc(enabled: bool, volatile_uncorrected: int | None, aggregate_uncorrected: int | None) -> tuple[str, str, str]:
    text = (
        f"{'on' if enabled else 'off'}, uncorrected errors: volatile {volatile_uncorrected}, "
        f"aggregate {aggregate_uncorrected}"
    )
    if volatile_uncorrected:
        return "fail", text, "uncorrected memory errors since the driver loaded: results and the GPU are suspect"
    if aggregate_uncorrected:
        return "warn", text, "uncorrected memory errors in the GPU's lifetime: watch for retired or remapped memory"
    if not enabled:
        return (
            "warn",
            text,
            "ECC off: memory errors go undetected (and bandwidth is higher than with ECC on, so figures do not "
            "compare)",
        )
    return "ok", text, "ECC on and no uncorrected errors"


def memory_rows(pending_retire: bool | None, remapped: dict | None) -> tuple[str, str, str]:
    parts = []
    if pending_retire is not None:
        parts.append(f"retirement pending: {'yes' if pending_retire else 'no'}")
    if remapped is not None:
        parts.append(
            f"remapped rows: {remapped['correctable']} correctable, {remapped['uncorrectable']} "
            f"uncorrectable, pending {'yes' if remapped['pending'] else 'no'}, "
            f"failure {'yes' if remapped['failure'] else 'no'}"
        )
    text = "; ".join(parts)
    if (remapped or {}).get("failure"):
        return "fail", text, "a row remapping failed: the GPU needs service"
    if pending_retire or (remapped or {}).get("pending"):
        return "warn", text, "a retirement or remapping waits for a GPU reset: affected memory is still in use"
    return "ok", text, "no memory rows waiting to be retired or remapped"


def mig(enabled: bool) -> tuple[str, str, str]:
    if enabled:
        return "warn", "enabled", "with MIG on, a run measures one slice of the GPU, not the whole device"
    return "ok", "disabled", "the whole GPU is measured"


def pcie(gen: tuple[int, int], width: tuple[int, int], idle: bool) -> tuple[str, str, str]:
    text = f"gen {gen[0]} of {gen[1]}, x{width[0]} of x{width[1]}"
    if width[0] < width[1]:
        return (
            "warn",
            text,
            "the link trained narrower than it can: host-device copies are capped below the slot's bandwidth",
        )
    if gen[0] < gen[1]:
        if idle:
            return (
                "ok",
                text,
                "the link drops its generation at idle to save power and returns to full speed under load",
            )
        return "warn", text, "the link runs below its generation under load: host-device copies are capped"
    return "ok", text, "the link runs at its full generation and width"


def nvlink(up: int, present: int) -> tuple[str, str, str]:
    text = f"{up} of {present} links up"
    if up < present:
        return "warn", text, "a link that is down lowers peer and collective bandwidth"
    return "ok", text, "every NVLink is up"


def numa(node: int, affinity: set[int] | None, node_cpu_set: set[int] | None) -> tuple[str, str, str]:
    if node < 0:
        return "ok", "no NUMA node reported", "one memory node: host-device copies take the same path from every core"
    if affinity is None or node_cpu_set is None:
        return "ok", f"node {node}", "affinity not compared"
    text = (
        f"GPU on node {node}; process may run on {len(affinity)} CPUs, "
        f"{len(affinity & node_cpu_set)} of them on that node"
    )
    if not affinity & node_cpu_set:
        return "warn", text, "every allowed CPU is on another node: copies cross the socket link"
    if affinity - node_cpu_set:
        return (
            "warn",
            text,
            "some allowed CPUs are on another node: bind the process to the GPU's node for stable copy figures",
        )
    return "ok", text, "the process runs on the GPU's own NUMA node"


def judge_gpu(g: GpuReading, affinity: set[int] | None) -> list[Finding]:
    scope = f"gpu{g.index}"
    idle = "gpu idle" in (g.clock_events.value or [])
    out = [
        _judge("foreign processes", scope, g.foreign_processes, foreign),
        _judge("persistence mode", scope, g.persistence, persistence),
    ]
    if None in (g.sm_clock_mhz.value, g.max_sm_clock_mhz.value, g.clock_events.value):
        bad = next(f for f in (g.sm_clock_mhz, g.max_sm_clock_mhz, g.clock_events) if f.value is None)
        out.append(_unknown("clocks", scope, bad))
    else:
        out.append(_f("clocks", scope, *clocks(g.sm_clock_mhz.value, g.max_sm_clock_mhz.value, g.clock_events.value)))
    out.append(
        _judge("temperature", scope, g.temperature_c, lambda t: temperature(t, g.slowdown_temperature_c.value, idle))
    )
    out.append(
        _judge(
            "ecc",
            scope,
            g.ecc_enabled,
            lambda on: ecc(on, g.ecc_volatile_uncorrected.value, g.ecc_aggregate_uncorrected.value),
        )
    )
    if g.retired_pages_pending.value is None and g.remapped_rows.value is None:
        out.append(_unknown("memory rows", scope, g.remapped_rows))
    else:
        out.append(_f("memory rows", scope, *memory_rows(g.retired_pages_pending.value, g.remapped_rows.value)))
    out.append(_judge("mig", scope, g.mig_enabled, mig))
    if g.pcie_gen.value is None or g.pcie_width.value is None:
        out.append(_unknown("pcie link", scope, g.pcie_gen if g.pcie_gen.value is None else g.pcie_width))
    else:
        out.append(_f("pcie link", scope, *pcie(g.pcie_gen.value, g.pcie_width.value, idle)))
    out.append(_judge("nvlink", scope, g.nvlinks, lambda v: nvlink(*v)))
    node = g.numa_node.value
    node_cpu_set = node_cpus(node).value if node is not None and node >= 0 else None
    out.append(_judge("numa affinity", scope, g.numa_node, lambda n: numa(n, affinity, node_cpu_set)))
    return out
