"""LoadGen's scenarios (Server, Offline, SingleStream) against an HTTP endpoint, with the
inference family's LoadGen settings, bounded tests, hint corrections and summary parser
(``LoadGenRunner``), and an HTTP SUT in place of the dynamic batcher.

Calibration sends requests before LoadGen does, so that LoadGen generates enough queries for
its minimum duration: the fastest of two requests alone (SingleStream's expected latency)
and a burst of concurrent requests (Offline's expected QPS), with the family's margins.

A scenario's verdict is LoadGen's, and INVALID besides when more requests failed than the
error budget allows or when the Server scenario's target rate exceeds the client's measured
capacity; each reason is stated. Its headline is LoadGen's metric: completed tokens per second
(Server), tokens per second (Offline), the target-percentile latency (SingleStream).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfsuite import Check
from perfsuite.workloads.inference._driver import HINT_MARGIN, PERCENTILES_REPORTED, STREAM_HINT_MARGIN, LoadGenRunner
from perfsuite.workloads.inference._harness import LoadGenResult
from perfsuite.workloads.inference._settings import Hints, LoadGenParams
from perfsuite.workloads.inference.serving.metrics import SLO, summarize
from perfsuite.workloads.inference.serving.sut import HTTPSUT

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

CALIBRATION_BURST = 16  # concurrent requests timed for Offline's expected QPS
CALIBRATION_TRIES = 6  # single requests tried for two that succeed
HEADLINE = {"Server": ("tokens_per_s", "tokens/s"), "Offline": ("tokens_per_s", "tokens/s")}
LOADGEN_KINDS = ("latency", "ttft", "tpot")


def write_requests(path: Path, results: list, keys: Mapping[int, str] | None = None) -> None:
    """Every request of a test, one JSON line each (chunk gaps included), beside the record;
    ``keys``: each request's prompt digest by its index (``prompt_sha256``: a sweep step's
    prompts are its own, so the index alone does not name the prompt)."""
    with open(path, "w") as f:
        for r in results:
            row = r.to_row()
            if keys is not None:
                row["prompt_sha256"] = keys[r.index]
            f.write(json.dumps(row) + "\n")


class ServingLoadGen(LoadGenRunner):
    def __init__(
        self,
        ctx: "RunContext",
        p: LoadGenParams,
        sut: HTTPSUT,
        slo: SLO,
        error_budget: float,
        capacity_rps: float | None,
        energy_local: bool,
    ) -> None:
        tokens = {"ttft_ms": slo.ttft_ms or 1e9, "tpot_ms": slo.tpot_ms or 1e9}
        super().__init__(ctx, p, sut, tokens)
        self.sut: HTTPSUT = sut
        self.slo = slo
        self.error_budget = error_budget
        self.capacity_rps = capacity_rps
        if not energy_local:
            self.energy = lambda: None

    def calibrate(self) -> dict:
        async def burst(n: int) -> float:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(self.sut.send(i % self.p.num_samples) for i in range(n)))
            ok = sum(r.ok for r in results)
            return ok / (time.perf_counter() - t0)

        singles = []
        for i in range(CALIBRATION_TRIES):  # a bad server fails some requests: its verdict comes later
            r = self.sut.call(self.sut.send(i % self.p.num_samples))
            if r.ok:
                singles.append(r)
            if len(singles) == 2:
                break
        if not singles:
            raise RuntimeError(
                f"calibration: none of {CALIBRATION_TRIES} requests succeeded (last: {r.reason}: {r.detail})"
            )
        single = min(r.e2e_s for r in singles)
        qps = self.sut.call(burst(min(CALIBRATION_BURST, self.p.num_samples)))
        if not qps > 0:
            raise RuntimeError("calibration: no request of the concurrent burst completed")
        self.measured = Hints(single, single, qps)
        self.hints = Hints(single / STREAM_HINT_MARGIN, single / STREAM_HINT_MARGIN, qps * HINT_MARGIN)
        return {
            "single_request_s": single,
            "burst_requests": min(CALIBRATION_BURST, self.p.num_samples),
            "burst_requests_per_s": qps,
            "hint_margin": HINT_MARGIN,
            "stream_hint_margin": STREAM_HINT_MARGIN,
        }

    def run(self, details: dict) -> None:
        self.sut.start()
        try:
            details["calibration"] = self.calibrate()
            for scenario in self.p.scenarios:
                out: dict[str, Any] = {}
                details["scenarios"][scenario] = out
                result = self._performance_test(scenario, out)
                out["performance"] = self.record(scenario, result)
        finally:
            self.sut.stop()

    def record(self, scenario: str, result: LoadGenResult) -> dict:
        ctx = self.ctx
        s = result.summary
        assert s is not None
        client = summarize(self.sut.results, self.slo)
        write_requests(result.log_dir / "requests.jsonl", self.sut.results)
        reasons = list(s.invalid_reasons)
        failed, sent = client["errors"]["count"], client["requests"]
        if sent and failed / sent > self.error_budget:
            by = ", ".join(f"{k} {v}" for k, v in client["errors"]["by_reason"].items())
            reasons.append(
                f"{failed} of {sent} requests failed ({by}): over the error budget of {self.error_budget:.1%}"
            )
        client_limited = (
            scenario == "Server" and self.capacity_rps is not None and self.p.target_qps > self.capacity_rps
        )
        if client_limited:
            reasons.append(
                f"the target rate {self.p.target_qps:g}/s exceeds the client's measured capacity "
                f"{self.capacity_rps:.0f}/s"
            )
        valid = s.valid and len(reasons) == len(s.invalid_reasons)
        ctx.add_check(
            Check(
                label=f"{scenario} VALID",
                passed=valid,
                method="LoadGen's verdict (constraints, minimum duration and queries, early stopping), "
                f"failed requests within the error budget ({self.error_budget:.1%})",
                detail=("VALID" if valid else "INVALID: " + "; ".join(reasons)),
            )
        )
        # the headline first: it is the case's first candidate metric
        name, unit = HEADLINE.get(scenario, ("", ""))
        if name and name in s.rates:
            ctx.add_metric(scenario, name, unit, [s.rates[name]], higher_is_better=True)
        else:
            latency_key = next((k for k in s.headline_ns if k.startswith("latency ")), None)
            if latency_key is not None:
                pct = latency_key.split(" ")[1]
                ctx.add_metric(
                    scenario, f"latency_{pct}_ms", "ms", [s.headline_ns[latency_key] / 1e6], higher_is_better=False
                )
        for rate, value in s.rates.items():
            if rate != name:
                unit = "tokens/s" if "tokens" in rate else ("queries/s" if rate.startswith("qps") else "samples/s")
                ctx.add_metric(scenario, rate, unit, [value], higher_is_better=True)
        for kind in LOADGEN_KINDS:
            for pct in PERCENTILES_REPORTED:
                ns = s.latency_ns.get(kind, {}).get(pct)
                if ns is not None:
                    ctx.add_metric(scenario, f"{kind}_{pct}_ms", "ms", [ns / 1e6], higher_is_better=False)
        self._client_metrics(scenario, client, result)
        return {
            "valid": valid,
            "invalid_reasons": reasons,
            "client_limited": client_limited,
            "settings": result.settings,
            "summary": s.to_dict(),
            "files": self._files(result),
            "client": client,
            "wall_s": result.wall_s,
            "gpu": result.gpu,
            "energy": _energy(result.energy_j, result.wall_s, client),
        }

    def _client_metrics(self, case: str, client: dict, result: LoadGenResult) -> None:
        """What the client saw of the same requests: its own TTFT/TPOT/ITL, goodput, failures, energy."""
        add = self.ctx.add_metric
        for key, label in (
            ("ttft_ms", "client_ttft"),
            ("tpot_ms", "client_tpot"),
            ("itl_ms", "itl"),
            ("e2e_ms", "e2e"),
        ):
            for pct in ("p50", "p99"):
                if pct in client[key]:
                    add(case, f"{label}_{pct}_ms", "ms", [client[key][pct]], higher_is_better=False)
        add(case, "goodput_rps", "requests/s", [client["goodput_rps"]], higher_is_better=True)
        add(case, "slo_attainment", "fraction", [client["slo_attainment"]], higher_is_better=True)
        add(case, "failed_requests", "requests", [float(client["errors"]["count"])], higher_is_better=False)
        energy = _energy(result.energy_j, result.wall_s, client)
        if energy:
            add(case, "power_w", "W", [energy["power_w"]], higher_is_better=False)
            add(case, "energy_per_request_j", "J/request", [energy["per_request_j"]], higher_is_better=False)
            if energy["per_output_token_j"]:
                add(
                    case, "energy_per_output_token_j", "J/token", [energy["per_output_token_j"]], higher_is_better=False
                )


def _energy(energy_j: float | None, wall_s: float, client: dict) -> dict | None:
    if not energy_j or not client["completed"]:
        return None
    return {
        "energy_j": energy_j,
        "power_w": energy_j / wall_s,
        "per_request_j": energy_j / client["completed"],
        "per_output_token_j": energy_j / client["output_tokens"] if client["output_tokens"] else None,
    }
