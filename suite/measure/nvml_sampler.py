"""NVML sampled in the background while a timed loop runs: SM clock, power and clock-event
(throttle) reasons at a fixed period, summarised for the record.

Why: a snapshot before and after a loop misses what happened during it. A GEMM loop of two
seconds on an H200 starts at 1980 MHz and ends power-capped at 1455 MHz; its figure is a
*sustained* one and must say so beside a *burst* figure from a cool GPU. The summary keeps
the minimum and median SM clock, the maximum power, every clock-event reason seen and the
number of samples; ``perfsuite.schemas.throttle.throttle_flag`` turns it into the one word a table shows.

The reader is injectable (tests feed synthetic readings); the default reads NVML through
``perfsuite.measure.nvml`` and degrades to no samples where NVML is unavailable.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_PERIOD_S = 0.02
# Clock-event reasons (perfsuite.measure.nvml's labels) that lower the clocks because of power or heat.
POWER_EVENTS = ("software power cap", "hardware power brake slowdown")
THERMAL_EVENTS = ("software thermal slowdown", "hardware thermal slowdown", "hardware slowdown")


@dataclass(frozen=True)
class Reading:
    """One sample of one GPU."""

    t_s: float  # seconds since the sampler started
    sm_clock_mhz: float | None
    power_w: float | None
    reasons: tuple[str, ...] = ()


Reader = Callable[[], "Reading | None"]


def nvml_reader(index: int) -> Callable[[float], Reading | None]:
    """A reader of GPU ``index`` through NVML: (seconds since start) -> Reading, or None
    where NVML is unavailable."""
    from perfsuite.measure import nvml

    nv, _ = nvml.init()
    if nv is None:
        return lambda t: None
    h = nv.nvmlDeviceGetHandleByIndex(index)
    get_reasons = (
        getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    )

    def read(t: float) -> Reading:
        clock = nvml._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        power_mw = nvml._try(nv.nvmlDeviceGetPowerUsage, h)
        mask = nvml._try(get_reasons, h)
        return Reading(
            t,
            float(clock) if clock is not None else None,
            power_mw / 1000.0 if power_mw is not None else None,
            tuple(nvml.throttle_reasons(mask)) if mask is not None else (),
        )

    return read


@dataclass
class Sampler:
    """Context manager: samples ``read`` every ``period_s`` on a daemon thread from enter
    to exit (one sample at each end as well, so a short loop still has two)."""

    read: Callable[[float], Reading | None]
    period_s: float = DEFAULT_PERIOD_S
    readings: list[Reading] = field(default_factory=list)
    error: str | None = None
    active: bool = True  # False: no GPU to sample, no thread

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _sample(self) -> None:
        r = self.read(time.perf_counter() - self._t0)
        if r is not None:
            self.readings.append(r)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.period_s):
                self._sample()
        except Exception as exc:  # noqa: BLE001 - recorded in the summary: a failing reader must not stop the run
            self.error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> "Sampler":
        self._t0 = time.perf_counter()
        if not self.active:
            return self
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def summary(self) -> dict | None:
        return summarize(self.readings, self.period_s, self.error)


def summarize(readings: list[Reading], period_s: float = DEFAULT_PERIOD_S, error: str | None = None) -> dict | None:
    """The record's view of a sampled loop, or None without samples (no NVML)."""
    if not readings:
        return None
    clocks = [r.sm_clock_mhz for r in readings if r.sm_clock_mhz is not None]
    powers = [r.power_w for r in readings if r.power_w is not None]
    seen = list(dict.fromkeys(reason for r in readings for reason in r.reasons))
    return {
        "samples": len(readings),
        "period_s": period_s,
        "duration_s": readings[-1].t_s - readings[0].t_s,
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
        "sm_clock_mhz_max": max(clocks) if clocks else None,
        "power_w_max": max(powers) if powers else None,
        "power_w_median": statistics.median(powers) if powers else None,
        "clock_events": seen,
        "power_capped": any(r in POWER_EVENTS for r in seen),
        "thermal_slowdown": any(r in THERMAL_EVENTS for r in seen),
        "sampler_error": error,
    }


class Endpoints:
    """Context manager: one reading of GPU ``index`` as a block starts and one as it ends, and
    the mean power between them from NVML's energy counter, all taken by the caller's thread
    outside the block's own timing: nothing runs beside the block. For data-parallel training
    turns, where sampling beside the step, even from a child process and at 20 ms or 250 ms
    periods alike, made 4-rank GPT-2 124M steps slower on H200s (42-44 ms to 45-48 ms): there
    the clocks at both ends and the power over the block must do.
    ``read`` and ``energy`` are injectable for tests."""

    def __init__(
        self,
        index: int,
        read: Callable[[float], Reading | None] | None = None,
        energy: Callable[[], int | None] | None = None,
    ) -> None:
        from perfsuite.measure import nvml

        self.read = read or nvml_reader(index)
        self.energy = energy or (lambda: nvml.energy_mj(index))
        self.readings: list[Reading] = []
        self._t0 = 0.0
        self._energy_mj: tuple[int | None, int | None] = (None, None)  # at the start, at the end

    def __enter__(self) -> "Endpoints":
        self._t0 = time.perf_counter()
        self._energy_mj = (self.energy(), None)
        self._take(0.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self._take(time.perf_counter() - self._t0)
        self._energy_mj = (self._energy_mj[0], self.energy())

    def _take(self, t: float) -> None:
        r = self.read(t)
        if r is not None:
            self.readings.append(r)

    def summary(self) -> dict | None:
        out = summarize(self.readings, 0.0)
        if out is None:
            return None
        out["sampling"] = "endpoints"
        e0, e1 = self._energy_mj
        span = out["duration_s"]
        out["power_w_mean"] = (e1 - e0) / 1000.0 / span if e0 is not None and e1 is not None and span > 0 else None
        return out


def sample(
    index: int | None, period_s: float = DEFAULT_PERIOD_S, read: Callable[[float], Reading | None] | None = None
) -> Sampler:
    """A sampler of GPU ``index`` (no GPU: one that records nothing)."""
    if read is not None:
        return Sampler(read, period_s)
    if index is None:
        return Sampler(lambda t: None, period_s, active=False)
    return Sampler(nvml_reader(index), period_s)


def wait_until_cool(
    index: int | None,
    max_s: float,
    poll_s: float = 0.05,
    read: Callable[[float], Reading | None] | None = None,
    rest_s: float = 0.0,
) -> dict:
    """Wait (at most ``max_s``) until NVML has shown no power or thermal clock event on GPU
    ``index`` for ``rest_s`` seconds on end (counted from the call: the GPU's rest since the
    loop before), so that a *burst* figure starts from a cool GPU. The event flag alone clears
    within a fraction of a second of a burst, while the power controller still remembers it:
    on an H200 a 20-call bf16 GEMM burst straight after another, with no event showing, ran
    5-6% slower (ratios 0.952 and 0.946 to do_bench). Returns what happened:
    seconds waited, whether it was cool at the end, the events still seen, the rest asked for."""
    if read is None:
        if index is None:
            return {"waited_s": 0.0, "cool": None, "events": [], "rest_s": rest_s}
        read = nvml_reader(index)
    t0 = time.perf_counter()
    quiet_since = 0.0
    while True:
        t = time.perf_counter() - t0
        r = read(t)
        if r is None:
            return {"waited_s": t, "cool": None, "events": [], "rest_s": rest_s}
        hot = [e for e in r.reasons if e in POWER_EVENTS or e in THERMAL_EVENTS]
        if hot:
            quiet_since = t
        if (not hot and t - quiet_since >= rest_s) or t >= max_s:
            return {"waited_s": t, "cool": not hot, "events": hot, "rest_s": rest_s}
        time.sleep(poll_s)
