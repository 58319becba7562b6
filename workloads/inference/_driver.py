"""The LoadGen driver both inference workloads share: calibrate, then per scenario an
accuracy run (every sample once, outputs read back from LoadGen's accuracy log and
compared with a float32 reference) and a performance run (or, for Server with
``find_peak``, a bounded search of the highest VALID target QPS), each turned into metrics
from LoadGen's own summary, with its log files kept in the run's artifact folder.

A workload supplies a :class:`Model`: the measured backend, the float32 reference, how to
decode a response's bytes and how to score outputs against the reference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from perfsuite import Check, distributed
from perfsuite.workloads.inference._harness import (
    LoadGenResult,
    read_accuracy_log,
    run_test,
)
from perfsuite.workloads.inference._settings import Hints, LoadGenParams, loadgen_settings
from perfsuite.workloads.inference._sut import Backend, BatchingSUT

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

CALIBRATION_WARMUP = 1
CALIBRATION_CALLS = 2
HINT_MARGIN = 1.5  # Offline: expected QPS over the measured one (each extra sample is really run)
STREAM_HINT_MARGIN = 4.0  # SingleStream/MultiStream: expected latency under the measured (extra queries are free)
HINT_RETRIES = 2
BOUND_FACTOR = 3.0  # a LoadGen run may take this many times its expected length before it is aborted
PERCENTILES_REPORTED = ("p50", "p90", "p99")
KIND_NAMES = {"latency": "latency", "ttft": "ttft", "tpot": "tpot", "TTFT": "ttft", "TPOT": "tpot"}
RATE_UNITS = {
    "completed_samples_per_s": "samples/s",
    "samples_per_s": "samples/s",
    "scheduled_samples_per_s": "samples/s",
    "qps_with_overhead": "queries/s",
    "qps_without_overhead": "queries/s",
    "tokens_per_s": "tokens/s",
    "tokens_per_s_with_overhead": "tokens/s",
    "tokens_per_s_without_overhead": "tokens/s",
}


class Score(NamedTuple):
    """What a model's score function says of the outputs against the reference: the score
    (judged against the threshold), a line of detail, and per element (a sample's class, a
    generated token) how many were compared and how many differ from the reference's.
    ``malformed`` lists the samples whose output cannot be compared at all (a sequence of
    the wrong length): one of them fails the check whatever the score."""

    value: float
    detail: str
    compared: int
    differing: int
    malformed: tuple[int, ...] = ()


@dataclass
class Model:
    """What a workload hands the driver."""

    backend: Backend  # the measured model
    reference: Backend  # the same weights in float32
    decode: Callable[[bytes], Any]  # a response's bytes -> the value compared
    # (outputs, reference) -> a Score, or (score, detail) without per-element counts
    score: Callable[[dict[int, Any], dict[int, Any]], "Score | tuple[float, str]"]
    score_method: str  # e.g. "classification agreement with a float32 reference"
    threshold: float
    tokens: dict[str, float] | None = None  # generation: Server TTFT/TPOT bounds; switches token latencies on
    warm_up: Callable[[], None] | None = None  # compiles every shape the run will use, before calibration


def accuracy_check(
    label: str, model: Model, outputs: dict[int, Any], reference: dict[int, Any], missing: list[int]
) -> Check:
    """The accuracy verification of a run's logged ``outputs`` against the float32
    ``reference``: no sample missing, no output malformed, and the score at least the
    model's threshold (MLPerf's rule: a reduced-precision model may differ from the reference
    on a few samples, so a differing element is counted, not failed, until the score falls
    under the threshold). ``elements_checked``/``elements_failed`` count the compared and the
    differing elements."""
    result = model.score(outputs, reference)
    counts = result if isinstance(result, Score) else None
    score, detail = float(result[0]), str(result[1])
    malformed = list(counts.malformed) if counts else []
    passed = not missing and not malformed and score >= model.threshold
    why = f"{len(missing)} sample(s) missing from LoadGen's accuracy log; " if missing else ""
    if malformed:
        why += f"{len(malformed)} sample(s) with a malformed output (first {malformed[:5]}); "
    return Check(
        label=label,
        passed=passed,
        method=model.score_method,
        error=score,
        tolerance=model.threshold,
        detail=f"{why}{detail} (threshold {model.threshold:g}: score must be >= it)",
        elements_checked=counts.compared if counts else None,
        elements_failed=counts.differing if counts else None,
    )


def calibrate(backend: Backend, p: LoadGenParams) -> tuple[Hints, dict]:
    """Time the backend alone (single sample, one MultiStream query, a full batch) so that
    LoadGen generates enough queries for the minimum duration; doubles as the warm-up.

    LoadGen pre-generates ``min_duration / expected latency`` queries (``expected QPS x
    min_duration x 1.1`` samples in Offline) and a run that runs out of them before the
    minimum duration is INVALID. Extra SingleStream/MultiStream queries cost nothing (the test
    ends once the duration and count are met), extra Offline samples are all run: so the
    hints lean towards more, by ``STREAM_HINT_MARGIN`` and ``HINT_MARGIN``, from the fastest
    call. The measured times and the margins are recorded."""

    def fastest(n: int) -> float:
        indices = [i % p.num_samples for i in range(n)]
        for _ in range(CALIBRATION_WARMUP):
            backend.run_batch(indices, None)
        times = []
        for _ in range(CALIBRATION_CALLS):
            t0 = time.perf_counter()
            backend.run_batch(indices, None)
            times.append(time.perf_counter() - t0)
        return min(times)

    single = fastest(1)
    if "MultiStream" in p.scenarios:
        query = fastest(min(p.samples_per_query, p.max_batch)) * -(-p.samples_per_query // p.max_batch)
    else:
        query = single  # unused: no MultiStream run
    full = fastest(p.max_batch)
    hints = Hints(
        single_latency_s=single / STREAM_HINT_MARGIN,
        query_latency_s=query / STREAM_HINT_MARGIN,
        offline_qps=p.max_batch / full * HINT_MARGIN,
    )
    return hints, {
        "single_sample_s": single,
        "multistream_query_s": query,
        "full_batch_s": full,
        "measured_offline_samples_per_s": p.max_batch / full,
        "calls_each": CALIBRATION_CALLS,
        "hint_margin": HINT_MARGIN,
        "stream_hint_margin": STREAM_HINT_MARGIN,
    }


def expected_s(p: LoadGenParams, scenario: str, mode: str, measured: Hints, target_qps: float) -> float:
    """How long LoadGen should take, from the calibration's measured times (not the hints,
    which lean low on purpose): the basis of the run's bound."""
    n_queries = p.num_samples if mode == "accuracy" else p.min_query_count
    if scenario == "Offline":
        samples = p.num_samples if mode == "accuracy" else max(p.min_query_count, 1)
        return max(0.0 if mode == "accuracy" else p.min_duration_ms / 1e3 * 1.1, samples / measured.offline_qps)
    if scenario == "Server":
        work = n_queries / target_qps + measured.single_latency_s
    elif scenario == "MultiStream":
        work = (
            n_queries / p.samples_per_query * measured.query_latency_s
            if mode == "accuracy"
            else n_queries * measured.query_latency_s
        )
    else:
        work = n_queries * measured.single_latency_s
    return work if mode == "accuracy" else max(p.min_duration_ms / 1e3, work)


class LoadGenRunner:
    """LoadGen tests against one SUT, each bounded and its logs kept: a performance run with
    its hint corrections (``_performance_test``) and the Server search of the highest VALID
    QPS (``_find_peak``). Shared by :class:`Driver` (models in this process) and the serving
    workload (an HTTP endpoint); ``tokens`` (``{"ttft_ms", "tpot_ms"}``) switches LoadGen's
    token latencies on, with those Server bounds."""

    def __init__(self, ctx: "RunContext", p: LoadGenParams, sut: Any, tokens: dict[str, float] | None) -> None:
        import mlperf_loadgen

        self.lg = mlperf_loadgen
        self.ctx, self.p, self.sut, self.tokens = ctx, p, sut, tokens
        self.root = ctx.artifact_dir()
        self.hints: Hints | None = None
        self.measured: Hints | None = None  # the calibration's times without margins, for bounds
        self.energy: Callable[[], float | None] = ctx.energy_j  # read before and after each test

    # -- one LoadGen test ---------------------------------------------------------------
    def _test(self, scenario: str, mode: str, folder: str, target_qps: float | None = None) -> LoadGenResult:
        assert self.hints is not None and self.measured is not None
        ts, settings = loadgen_settings(
            self.lg,
            self.p,
            scenario,
            mode,
            self.ctx.controls.seed,
            self.hints,
            target_qps=target_qps,
            tokens=self.tokens,
        )
        qps = self.p.target_qps if target_qps is None else target_qps
        bound = BOUND_FACTOR * expected_s(self.p, scenario, mode, self.measured, qps) + self.p.query_timeout_s + 30.0
        settings["bound_s"] = bound
        self.ctx.log(f"LoadGen {scenario} {mode}" + (f" at {target_qps:g} QPS" if target_qps else ""))
        with self.ctx.gpu_sampler() as sampler:
            result = run_test(
                self.lg, self.sut, ts, settings, self.p.num_samples, self.root / folder, bound, self.energy
            )
        result.gpu = sampler.summary()
        return result

    def _performance_test(self, scenario: str, out: dict) -> LoadGenResult:
        """A performance run; when LoadGen ran out of pre-generated queries before the minimum
        duration (the calibration's hint was off: this machine is shared, timings drift), the
        hint is corrected from what LoadGen measured and the run repeated, at most
        ``HINT_RETRIES`` times, as a submitter tunes expected QPS. Every attempt is recorded."""
        assert self.hints is not None
        attempts: list[dict] = []
        out["attempts"] = attempts
        for k in range(HINT_RETRIES + 1):
            folder = f"{scenario}-performance" + (f"-retry{k}" if k else "")
            result = self._test(scenario, "performance", folder)
            s = result.summary
            assert s is not None
            attempts.append(
                {
                    "folder": folder,
                    "hints": vars(self.hints).copy(),
                    "valid": s.valid,
                    "invalid_reasons": s.invalid_reasons,
                    "next_steps": s.next_steps(self.p.percentile(scenario)),
                }
            )
            if s.valid or s.satisfied.get("Min duration", True) or scenario == "Server":
                return result
            mean_s = s.latency_ns.get("latency", {}).get("mean", 0.0) / 1e9
            if scenario == "Offline" and s.rates.get("samples_per_s"):
                self.hints = replace(self.hints, offline_qps=s.rates["samples_per_s"] * HINT_MARGIN)
            elif scenario == "SingleStream" and mean_s > 0:
                self.hints = replace(self.hints, single_latency_s=mean_s / STREAM_HINT_MARGIN)
            elif scenario == "MultiStream" and mean_s > 0:
                self.hints = replace(self.hints, query_latency_s=mean_s / STREAM_HINT_MARGIN)
            else:
                return result
        return result

    def _files(self, result: LoadGenResult) -> list[str]:
        return sorted(str(f.relative_to(self.root)) for f in result.log_dir.iterdir() if f.is_file())

    def _find_peak(self, out: dict) -> LoadGenResult:
        """The highest Server target QPS that stays VALID: double from ``target_qps`` while VALID
        (halve while INVALID), then bisect between the last VALID and the first INVALID, in at
        most ``peak_steps`` LoadGen runs. Every step is recorded; the best VALID run is the result."""
        p = self.p
        steps: list[dict] = []
        best: LoadGenResult | None = None
        lo: float | None = None  # highest VALID so far
        hi: float | None = None  # lowest INVALID so far
        qps = p.target_qps
        for k in range(p.peak_steps):
            result = self._test("Server", "performance", f"Server-peak-{k:02d}", target_qps=qps)
            s = result.summary
            assert s is not None
            steps.append(
                {
                    "step": k,
                    "target_qps": qps,
                    "valid": s.valid,
                    "invalid_reasons": s.invalid_reasons,
                    "completed_samples_per_s": s.rates.get("completed_samples_per_s"),
                    "latency_p99_ms": s.latency_ns.get("latency", {}).get("p99", 0) / 1e6,
                    "ttft_p99_ms": s.latency_ns.get("ttft", {}).get("p99", 0) / 1e6 or None,
                    "tpot_p99_ms": s.latency_ns.get("tpot", {}).get("p99", 0) / 1e6 or None,
                    "folder": result.log_dir.name,
                }
            )
            if s.valid:
                lo, best = qps, result
            else:
                hi = qps if hi is None else min(hi, qps)
            if hi is None:
                qps = qps * 2
            elif lo is None:
                qps = qps / 2
            else:
                qps = (lo + hi) / 2
        out["find_peak"] = {
            "start_qps": p.target_qps,
            "max_steps": p.peak_steps,
            "steps": steps,
            "peak_valid_qps": lo,
            "lowest_invalid_qps": hi,
        }
        if best is None:
            raise RuntimeError(
                f"find_peak: no target QPS from {p.target_qps:g} down to "
                f"{steps[-1]['target_qps']:g} was VALID in {p.peak_steps} steps"
            )
        self.ctx.add_metric("Server", "peak_valid_qps", "queries/s", [lo], higher_is_better=True)
        return best


class Driver(LoadGenRunner):
    """Calibrate, then per scenario an accuracy run and a performance run of a :class:`Model`
    in this process, behind the dynamic batcher."""

    def __init__(self, ctx: "RunContext", p: LoadGenParams, model: Model) -> None:
        import mlperf_loadgen

        sut = BatchingSUT(
            mlperf_loadgen,
            model.backend,
            max_batch=p.max_batch,
            max_wait_s=p.max_wait_ms / 1e3,
            query_timeout_s=p.query_timeout_s,
            streams_tokens=model.tokens is not None,
            inject=p.inject,
        )
        super().__init__(ctx, p, sut, model.tokens)
        self.sut: BatchingSUT = sut
        self.model = model
        self.details: dict[str, Any] = {
            "artifact_dir": str(self.root),
            "loadgen_version": loadgen_version(),
            "scenarios": {},
        }
        self._reference: dict[int, Any] | None = None

    def run(self) -> None:
        ctx, p = self.ctx, self.p
        ctx.details["inference"] = self.details
        self.sut.start()
        try:
            if self.model.warm_up is not None:
                t0 = time.perf_counter()
                self.sut.call(self.model.warm_up)
                self.details["warm_up_s"] = time.perf_counter() - t0
            self.hints, self.details["calibration"] = self.sut.call(lambda: calibrate(self.model.backend, p))
            cal = self.details["calibration"]
            self.measured = Hints(
                cal["single_sample_s"], cal["multistream_query_s"], cal["measured_offline_samples_per_s"]
            )
            for done, scenario in enumerate(p.scenarios):
                distributed.note_progress(scenario, done, len(p.scenarios))
                self.details["scenarios"][scenario] = out = {}
                # Only Server's samples arrive one by one; the others issue a whole query at once.
                self.sut.max_wait_s = p.max_wait_ms / 1e3 if scenario == "Server" else 0.0
                out["max_wait_ms"] = self.sut.max_wait_s * 1e3
                if p.mode in ("submission", "accuracy"):
                    out["accuracy"] = self._accuracy(scenario)
                if p.mode in ("submission", "performance"):
                    if scenario == "Server" and p.find_peak:
                        result = self._find_peak(out)
                    else:
                        result = self._performance_test(scenario, out)
                    out["performance"] = self._performance(scenario, result)
        finally:
            self.sut.stop()

    # -- accuracy -------------------------------------------------------------------------
    def reference(self) -> dict[int, Any]:
        """Every sample through the float32 reference, in batches, once per run."""
        if self._reference is None:
            ref: dict[int, Any] = {}
            idx = list(range(self.p.num_samples))
            for start in range(0, len(idx), self.p.max_batch):
                chunk = idx[start : start + self.p.max_batch]
                outs = self.sut.call(lambda: self.model.reference.run_batch(chunk, None))
                for i, out in zip(chunk, outs):
                    ref[i] = out.value
            self._reference = ref
        return self._reference

    def _accuracy(self, scenario: str) -> dict:
        result = self._test(scenario, "accuracy", f"{scenario}-accuracy")
        logged = read_accuracy_log(result.log_dir)
        missing = sorted(set(range(self.p.num_samples)) - set(logged))
        outputs = {i: self.model.decode(b) for i, b in logged.items()}
        check = accuracy_check(f"{scenario} accuracy", self.model, outputs, self.reference(), missing)
        score, detail = check.error or 0.0, check.detail
        self.ctx.add_check(check)
        self.ctx.add_metric(scenario, "accuracy_score", "fraction", [score], higher_is_better=True)
        return {
            "settings": result.settings,
            "samples_logged": len(logged),
            "missing": missing[:20],
            "score": score,
            "threshold": self.model.threshold,
            "method": self.model.score_method,
            "detail": detail,
            "files": self._files(result),
        }

    # -- performance -----------------------------------------------------------------------
    def _performance(self, scenario: str, result: LoadGenResult) -> dict:
        ctx = self.ctx
        s = result.summary
        assert s is not None
        reasons = "; ".join(s.invalid_reasons)
        # what would make it VALID, from LoadGen's own figures (the query count early stopping
        # needs, the latency bound missed): the line a user acts on
        steps = "; ".join(s.next_steps(self.p.percentile(scenario)))
        ctx.add_check(
            Check(
                label=f"{scenario} VALID",
                passed=s.valid,
                method="LoadGen's verdict (constraints, minimum duration and queries, early stopping)",
                detail=f"{'VALID' if s.valid else 'INVALID'}"
                + (f": {reasons}" if reasons else "")
                + (f"; next step: {steps}" if steps else ""),
            )
        )
        for name, value in s.rates.items():
            ctx.add_metric(scenario, name, RATE_UNITS[name], [value], higher_is_better=True)
        for kind, stats in s.latency_ns.items():
            for pct in PERCENTILES_REPORTED:
                if pct in stats:
                    ctx.add_metric(scenario, f"{kind}_{pct}_ms", "ms", [stats[pct] / 1e6], higher_is_better=False)
        for key, ns in s.early_stopping_estimates_ns.items():
            kind, pct = key.split(" ")
            ctx.add_metric(
                scenario, f"early_stopping_{KIND_NAMES[kind]}_{pct}_ms", "ms", [ns / 1e6], higher_is_better=False
            )
        st = result.stats
        if st.latencies_s:
            ctx.add_metric(scenario, "sut_latency_ms", "ms", [x * 1e3 for x in st.latencies_s], higher_is_better=False)
        energy = {}
        if result.energy_j and st.samples:
            energy = {"energy_j": result.energy_j, "wall_s": result.wall_s}
            ctx.add_metric(scenario, "power_w", "W", [result.energy_j / result.wall_s], higher_is_better=False)
            ctx.add_metric(
                scenario, "energy_per_sample_j", "J/sample", [result.energy_j / st.samples], higher_is_better=False
            )
            ctx.add_metric(
                scenario, "samples_per_j", "samples/J", [st.samples / result.energy_j], higher_is_better=True
            )
            if st.tokens:
                ctx.add_metric(
                    scenario, "energy_per_token_j", "J/token", [result.energy_j / st.tokens], higher_is_better=False
                )
                ctx.add_metric(
                    scenario, "tokens_per_j", "tokens/J", [st.tokens / result.energy_j], higher_is_better=True
                )
        return {
            "settings": result.settings,
            "summary": s.to_dict(self.p.percentile(scenario)),
            "files": self._files(result),
            "sut": {
                "batches": st.batches,
                "samples": st.samples,
                "tokens": st.tokens,
                "mean_batch": st.samples / st.batches if st.batches else 0.0,
                "max_batch_seen": max(st.batch_sizes, default=0),
            },
            "wall_s": result.wall_s,
            "energy": energy or None,
            "gpu": result.gpu,
        }


def loadgen_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("mlcommons-loadgen")
    except metadata.PackageNotFoundError:
        return None
