"""The LoadGen parameters both inference workloads share, their validation, and how they
become LoadGen's ``TestSettings``.

Every field LoadGen reads is set here explicitly (durations, query counts, seeds, the
target latency percentile, the expected latency or QPS hints), so that a run never
depends on LoadGen's defaults silently, and all of them are recorded with the run.
Bad values (a negative QPS, a zero latency bound, an unknown scenario) are refused when
the parameters are built, before anything runs: ``__post_init__`` raises ValueError and
the host prints it as one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite import param

SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")
MODES = ("submission", "performance", "accuracy")  # submission: accuracy first, then performance
INJECTIONS = ("none", "drop", "raise")
DTYPES = ("fp32", "bf16", "fp16")
# LoadGen's own default target percentiles per scenario (test_settings.h), recorded when not overridden.
DEFAULT_PERCENTILE = {"SingleStream": 0.90, "MultiStream": 0.99, "Server": 0.99, "Offline": 0.99}


@dataclass(frozen=True)
class LoadGenParams:
    scenarios: tuple[str, ...] = param(SCENARIOS, "LoadGen scenarios to run, in order", choices=SCENARIOS)
    mode: str = param("submission", "accuracy (every sample once), performance, or both (submission)", choices=MODES)
    num_samples: int = param(256, "samples in the query sample library (all are in the performance set)")
    min_duration_ms: int = param(10_000, "LoadGen min_duration_ms of a performance run")
    min_query_count: int = param(100, "LoadGen min_query_count of a performance run")
    target_latency_percentile: float | None = param(
        None, "latency percentile of SingleStream/MultiStream/Server (None: LoadGen's 0.9 / 0.99 / 0.99)"
    )
    samples_per_query: int = param(8, "MultiStream samples per query")
    target_qps: float = param(10.0, "Server target QPS (the start of --find-peak's search)")
    latency_ms: float = param(100.0, "Server latency bound per sample (without token latencies)")
    max_batch: int = param(32, "dynamic batcher: most samples per model call")
    max_wait_ms: float = param(2.0, "dynamic batcher (Server): longest a partial batch waits for more samples")
    query_timeout_s: float = param(60.0, "a sample not completed this long after reaching the model fails the run")
    find_peak: bool = param(False, "Server: search the highest target QPS that stays VALID (--find-peak)")
    peak_steps: int = param(8, "find_peak: most LoadGen runs of the search (doubling, then bisection)")
    dtype: str = param("bf16", "element type of the measured model (the reference is float32)", choices=DTYPES)
    model_seed: int = param(0, "seed of the model's weights and the synthetic data (fixed across repeats)")
    inject: str = param(
        "none", "self-test of the SUT: drop a sample or raise in a model call", choices=INJECTIONS, harness=True
    )

    def __post_init__(self) -> None:
        if not self.scenarios:
            raise ValueError("name at least one scenario")
        if len(set(self.scenarios)) != len(self.scenarios):
            raise ValueError(f"scenarios repeat: {','.join(self.scenarios)}")
        positive = {
            "num_samples": self.num_samples,
            "min_query_count": self.min_query_count,
            "samples_per_query": self.samples_per_query,
            "target_qps": self.target_qps,
            "latency_ms": self.latency_ms,
            "max_batch": self.max_batch,
            "query_timeout_s": self.query_timeout_s,
            "peak_steps": self.peak_steps,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, not {value:g}")
        for name, value in (("min_duration_ms", self.min_duration_ms), ("max_wait_ms", self.max_wait_ms)):
            if value < 0:
                raise ValueError(f"{name} must not be negative, not {value:g}")
        p = self.target_latency_percentile
        if p is not None and not 0.0 < p < 1.0:
            raise ValueError(f"target_latency_percentile must lie strictly between 0 and 1, not {p:g}")
        if self.samples_per_query > self.num_samples:
            raise ValueError(f"samples_per_query ({self.samples_per_query}) exceeds num_samples ({self.num_samples})")

    def percentile(self, scenario: str) -> float:
        return (
            DEFAULT_PERCENTILE[scenario] if self.target_latency_percentile is None else self.target_latency_percentile
        )


@dataclass(frozen=True)
class Hints:
    """What LoadGen needs to know in advance to generate enough queries, measured by a
    calibration pass of the SUT just before the run (and recorded with it)."""

    single_latency_s: float  # one sample alone
    query_latency_s: float  # one MultiStream query
    offline_qps: float  # samples per second at full batches


def loadgen_settings(
    lg: Any,
    p: LoadGenParams,
    scenario: str,
    mode: str,
    seed: int,
    hints: Hints,
    target_qps: float | None = None,
    tokens: dict[str, float] | None = None,
) -> tuple[Any, dict]:
    """LoadGen's TestSettings for one run, and the same settings as a JSON-ready dict.

    ``tokens`` (generation): ``{"ttft_ms": ..., "tpot_ms": ...}`` switches on LoadGen's
    token latencies, with the Server bounds on time to first token and per output token.
    """
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = {"accuracy": lg.TestMode.AccuracyOnly, "performance": lg.TestMode.PerformanceOnly}[mode]
    qps = p.target_qps if target_qps is None else target_qps
    pct = p.percentile(scenario)
    # Seeds: LoadGen's three, all from the run's seed (unique per repeat, as MLPerf asks).
    rec: dict[str, Any] = {
        "scenario": scenario,
        "mode": mode,
        "min_duration_ms": p.min_duration_ms,
        "max_duration_ms": 0,
        "min_query_count": p.min_query_count,
        "max_query_count": 0,
        "qsl_rng_seed": seed,
        "sample_index_rng_seed": seed + 1,
        "schedule_rng_seed": seed + 2,
        "performance_sample_count_override": p.num_samples,
        "single_stream_expected_latency_ns": max(int(hints.single_latency_s * 1e9), 1),
        "single_stream_target_latency_percentile": pct,
        "multi_stream_expected_latency_ns": max(int(hints.query_latency_s * 1e9), 1),
        "multi_stream_target_latency_percentile": pct,
        "multi_stream_samples_per_query": p.samples_per_query,
        "server_target_qps": qps,
        "server_target_latency_ns": int(p.latency_ms * 1e6),
        "server_target_latency_percentile": pct,
        "offline_expected_qps": max(hints.offline_qps, 1e-3),
        "use_token_latencies": tokens is not None,
    }
    if tokens is not None:
        rec["ttft_latency"] = int(tokens["ttft_ms"] * 1e6)
        rec["tpot_latency"] = int(tokens["tpot_ms"] * 1e6)
    for key, value in rec.items():
        if key not in ("scenario", "mode"):
            setattr(ts, key, value)
    return ts, rec
