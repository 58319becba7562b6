"""perfsuite doctor: every verdict rule on synthetic readings, and the real command on
this (GPU-less) machine."""

from __future__ import annotations

import json

import pytest

from perfsuite.doctor import Finding, overall, rules
from perfsuite.doctor.gpu_facts import GpuReading
from perfsuite.doctor.host_facts import Fact, HostReading, parse_cpulist


def gpu(**over) -> GpuReading:
    base = dict(
        index=0,
        name="NVIDIA H200",
        persistence=Fact(True),
        sm_clock_mhz=Fact(345),
        max_sm_clock_mhz=Fact(1980),
        clock_events=Fact(["gpu idle"]),
        temperature_c=Fact(31),
        slowdown_temperature_c=Fact(87),
        ecc_enabled=Fact(True),
        ecc_volatile_uncorrected=Fact(0),
        ecc_aggregate_uncorrected=Fact(0),
        retired_pages_pending=Fact(False),
        remapped_rows=Fact({"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}),
        mig_enabled=Fact(False),
        pcie_gen=Fact((1, 5)),
        pcie_width=Fact((16, 16)),
        nvlinks=Fact((18, 18)),
        numa_node=Fact(-1),
        foreign_processes=Fact([]),
    )
    base.update(over)
    return GpuReading(**base)


def by_check(findings: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in findings}


def test_a_quiet_gpu_is_all_ok():
    found = by_check(rules.judge_gpu(gpu(), affinity={0, 1}))
    assert {f.verdict for f in found.values()} == {"ok"}, found
    # an idle link drops its generation by design
    assert "gen 1 of 5" in found["pcie link"].value


@pytest.mark.parametrize(
    "over, check, verdict, text",
    [
        (dict(foreign_processes=Fact([(4242, 2 * 2**30)])), "foreign processes", "fail", "pid 4242 (2048 MiB)"),
        (dict(persistence=Fact(False)), "persistence mode", "warn", "off"),
        (dict(clock_events=Fact(["software power cap"]), sm_clock_mhz=Fact(1455)), "clocks", "warn", "SM 1455 of 1980"),
        (dict(clock_events=Fact(["hardware thermal slowdown"])), "clocks", "fail", "hardware thermal slowdown"),
        (dict(temperature_c=Fact(84)), "temperature", "fail", "84 C (slowdown at 87 C)"),
        (dict(temperature_c=Fact(66)), "temperature", "warn", "66 C"),
        (dict(ecc_enabled=Fact(False)), "ecc", "warn", "off"),
        (dict(ecc_volatile_uncorrected=Fact(3)), "ecc", "fail", "volatile 3"),
        (dict(ecc_aggregate_uncorrected=Fact(1)), "ecc", "warn", "aggregate 1"),
        (
            dict(remapped_rows=Fact({"correctable": 0, "uncorrectable": 1, "pending": False, "failure": True})),
            "memory rows",
            "fail",
            "failure yes",
        ),
        (dict(retired_pages_pending=Fact(True)), "memory rows", "warn", "retirement pending: yes"),
        (dict(mig_enabled=Fact(True)), "mig", "warn", "enabled"),
        (dict(pcie_width=Fact((8, 16))), "pcie link", "warn", "x8 of x16"),
        (dict(pcie_gen=Fact((3, 5)), clock_events=Fact([])), "pcie link", "warn", "gen 3 of 5"),
        (dict(nvlinks=Fact((17, 18))), "nvlink", "warn", "17 of 18 links up"),
        (dict(ecc_enabled=Fact.unread("NVML: Not Supported")), "ecc", "unknown", "unknown"),
    ],
)
def test_each_gpu_rule(over, check, verdict, text):
    f = by_check(rules.judge_gpu(gpu(**over), affinity={0, 1}))[check]
    assert f.verdict == verdict, f
    assert text in f.value, f


def test_numa_rule_compares_affinity_with_the_gpu_node():
    assert rules.numa(1, {0, 1, 2, 3}, {4, 5, 6, 7})[0] == "warn"  # all on the far node
    assert rules.numa(0, {0, 1, 4}, {0, 1, 2, 3})[0] == "warn"  # partly far
    assert rules.numa(0, {0, 1}, {0, 1, 2, 3})[0] == "ok"
    assert rules.numa(-1, {0}, None)[0] == "ok"
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}


@pytest.mark.parametrize(
    "field, value, check, verdict",
    [
        ("governors", Fact(["performance"]), "cpu governor", "ok"),
        ("governors", Fact(["performance", "powersave"]), "cpu governor", "warn"),
        ("turbo", Fact(True), "cpu turbo", "warn"),
        ("turbo", Fact(False), "cpu turbo", "ok"),
        ("thp", Fact("always"), "transparent huge pages", "warn"),
        ("thp", Fact("madvise"), "transparent huge pages", "ok"),
        ("swap_used_bytes", Fact(3 * 2**20), "swap", "warn"),
        ("load_1m", Fact(8.5), "load average", "fail"),
        ("load_1m", Fact(4.5), "load average", "warn"),
        ("load_1m", Fact(0.2), "load average", "ok"),
        ("busy_processes", Fact([(77, "stress", 99.0)]), "busy processes", "warn"),
        ("busy_processes", Fact.unread("psutil: denied"), "busy processes", "unknown"),
    ],
)
def test_each_host_rule(field, value, check, verdict):
    reading = HostReading(cpu_count=8, **{field: value})
    f = by_check(rules.judge_host(reading))[check]
    assert f.verdict == verdict, f


def test_overall_verdict():
    ok = Finding("a", "host", "ok", "", "")
    warn = Finding("b", "host", "warn", "", "")
    fail = Finding("c", "host", "fail", "", "")
    unknown = Finding("d", "gpu", "unknown", "", "")
    assert overall([ok, unknown]) == "ok"
    assert overall([ok, warn, unknown]) == "warn"
    assert overall([warn, fail]) == "fail"
    with pytest.raises(ValueError):
        Finding("e", "host", "maybe", "", "")


def test_doctor_on_this_machine(cli):
    proc = cli("doctor", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    checks = {(c["scope"], c["check"]): c for c in out["checks"]}
    # Without a GPU every GPU check is unknown, with the reason.
    gpu_checks = [c for c in out["checks"] if c["scope"].startswith("gpu")]
    if gpu_checks and gpu_checks[0]["scope"] == "gpu":
        assert all(c["verdict"] == "unknown" and c["why"].startswith("no GPU:") for c in gpu_checks)
    # The host checks read real values here: swap, load and THP come from /proc and /sys.
    assert checks[("host", "swap")]["value"].endswith("MiB in use")
    assert " on " in checks[("host", "load average")]["value"]
    assert checks[("host", "transparent huge pages")]["verdict"] in ("ok", "warn", "unknown")
    assert out["verdict"] in ("ok", "warn", "fail")
    assert proc.returncode == (1 if out["verdict"] == "fail" else 0)
    table = cli("doctor")
    assert "load average" in table.stdout and "Traceback" not in table.stderr
