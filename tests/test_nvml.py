"""The NVML sampler (``perfsuite.measure.nvml_sampler``) and the throttle flag it feeds, on
replayed readings: a power-capped or thermally slowed loop is flagged with the clocks seen, a
cool one and a GPU without NVML are not, the background sampler keeps its period, and a burst
waits until the GPU has rested without a clock event."""

from __future__ import annotations

import threading
import time

from perfsuite.measure.nvml_sampler import Endpoints, Reading, Sampler, summarize, wait_until_cool
from perfsuite.schemas.throttle import throttle_flag


def fake_reader(readings):
    """A reader that replays ``readings`` (sm MHz, W, reasons) and then repeats the last."""
    it = iter(readings)
    last = [None]

    def read(t):
        try:
            clock, power, reasons = next(it)
            last[0] = Reading(t, clock, power, tuple(reasons))
        except StopIteration:
            pass
        return last[0] and Reading(t, last[0].sm_clock_mhz, last[0].power_w, last[0].reasons)

    return read


def test_a_power_capped_loop_is_flagged_with_the_clocks_seen():
    s = summarize(
        [
            Reading(0.0, 1980, 420.0, ()),
            Reading(0.02, 1755, 690.0, ("software power cap",)),
            Reading(0.04, 1455, 700.0, ("software power cap",)),
        ]
    )
    assert s["samples"] == 3 and s["sm_clock_mhz_min"] == 1455 and s["sm_clock_mhz_median"] == 1755
    assert s["power_w_max"] == 700.0 and s["power_capped"] and not s["thermal_slowdown"]
    assert throttle_flag(s) == "power-capped"
    hot = summarize([Reading(0.0, 1600, 500.0, ("hardware thermal slowdown", "software power cap"))])
    assert throttle_flag(hot) == "power-capped + thermal slowdown"


def test_a_cool_loop_and_a_gpu_without_nvml_are_not_flagged():
    cool = summarize([Reading(0.0, 1980, 300.0, ()), Reading(0.02, 1980, 310.0, ("gpu idle",))])
    assert throttle_flag(cool) is None and cool["clock_events"] == ["gpu idle"]
    assert summarize([]) is None and throttle_flag(None) is None


def test_the_sampler_reads_in_the_background_at_its_period():

    with Sampler(
        fake_reader([(1980, 400.0, ())] * 3 + [(1455, 700.0, ["software power cap"])]), period_s=0.005
    ) as sampler:
        time.sleep(0.1)
    s = sampler.summary()
    assert s["samples"] >= 5  # one at each end and several in between
    assert s["power_capped"] and s["sm_clock_mhz_min"] == 1455 and s["sm_clock_mhz_max"] == 1980


def test_endpoints_read_a_block_at_its_two_ends_with_the_mean_power_from_the_energy_counter():
    """What a data-parallel training turn is read by: nothing runs beside the block (no thread
    starts), the clocks come from its two ends, the power from the energy counter between."""
    reads, joules = [], iter([5_000_000, 5_000_000 + 700_000])  # millijoules: 700 J over the block
    threads = threading.active_count()

    def read(t):
        reads.append((t, threading.active_count()))
        return Reading(t, 1965.0 if not reads[1:] else 1912.5, 690.0, ("software power cap",))

    with Endpoints(0, read=read, energy=lambda: next(joules)) as ends:
        time.sleep(0.05)
        assert len(reads) == 1 and threading.active_count() == threads  # read once at the start, alone
    s = ends.summary()
    assert len(reads) == 2 and reads[1][0] >= 0.05
    assert s["sampling"] == "endpoints" and s["samples"] == 2
    assert s["sm_clock_mhz_min"] == 1912.5 and s["sm_clock_mhz_max"] == 1965.0 and s["power_capped"]
    assert abs(s["power_w_mean"] - 700.0 / s["duration_s"]) < 1e-6 and s["power_w_mean"] < 700.0 / 0.05


def test_endpoints_without_nvml_or_without_an_energy_counter():
    with Endpoints(0, read=lambda t: None, energy=lambda: None) as ends:
        pass
    assert ends.summary() is None  # no readings: nothing to show, as the sampler without NVML
    with Endpoints(0, read=lambda t: Reading(t, 1980.0, 400.0, ()), energy=lambda: None) as ends:
        time.sleep(0.01)
    s = ends.summary()
    assert s["samples"] == 2 and s["power_w_mean"] is None and s["power_w_median"] == 400.0


def test_waiting_for_a_cool_gpu_stops_when_the_power_cap_clears():
    state = wait_until_cool(
        None,
        max_s=5.0,
        poll_s=0.001,
        read=fake_reader([(1455, 700.0, ["software power cap"])] * 3 + [(1980, 200.0, ["gpu idle"])]),
    )
    assert state["cool"] is True and state["events"] == []
    stuck = wait_until_cool(None, max_s=0.01, poll_s=0.001, read=fake_reader([(1455, 700.0, ["software power cap"])]))
    assert stuck["cool"] is False and stuck["events"] == ["software power cap"]


def test_a_cool_gpu_has_rested_without_an_event_for_the_whole_rest():
    """The event flag clears within a fraction of a second of a burst: a burst waits until
    NVML has shown no power or thermal event for ``rest_s`` on end, counted from the call."""
    seen = []

    def reader(t):
        seen.append(t)
        hot = ("software power cap",) if len(seen) in (3, 4) else ()  # the cap shows twice, then clears
        return Reading(t, 1455.0 if hot else 1980.0, 690.0 if hot else 150.0, hot)

    state = wait_until_cool(None, max_s=5.0, poll_s=0.005, read=reader, rest_s=0.1)
    assert state["cool"] is True and state["rest_s"] == 0.1
    last_hot = seen[3]
    assert state["waited_s"] >= last_hot + 0.1  # a full rest after the last reading with the cap
    quick = wait_until_cool(None, max_s=5.0, poll_s=0.001, read=lambda t: Reading(t, 1980.0, 100.0, ()), rest_s=0.0)
    assert quick["cool"] is True and quick["waited_s"] < 0.05


def test_the_nvml_reader_reads_clock_power_and_reasons(monkeypatch):
    """The default reader against a fake pynvml: SM clock, power in W and the reason labels."""
    import types

    from perfsuite.measure import nvml, nvml_sampler

    class NVMLError(Exception):
        pass

    fake = types.SimpleNamespace(
        NVMLError=NVMLError,
        NVML_CLOCK_SM=1,
        nvmlClocksEventReasonSwPowerCap=4,
        nvmlClocksEventReasonGpuIdle=1,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetClockInfo=lambda h, kind: 1455,
        nvmlDeviceGetPowerUsage=lambda h: 699_500,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 4,
    )
    monkeypatch.setattr(nvml, "init", lambda: (fake, None))
    r = nvml_sampler.nvml_reader(0)(0.5)
    assert r == Reading(0.5, 1455.0, 699.5, ("software power cap",))
    assert wait_until_cool(0, max_s=0.0)["events"] == ["software power cap"]
