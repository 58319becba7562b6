"""``inference.serving``: an OpenAI-compatible HTTP endpoint as the system under test
(vLLM, SGLang, TensorRT-LLM, TGI, ``transformers serve``, llama.cpp's server), measured as
serving engineers measure it and judged as MLPerf judges a run.

- The endpoint: ``url`` (a server that runs already; the record says so) or ``server_command``
  (started by the suite in the run's process tree, ready when its health endpoint answers, its
  log kept as ``server.log`` beside the record, stopped with the run). ``build_model`` writes a
  Llama model and word-level tokenizer from a config for ``{model_dir}`` (no download), once, into
  the suite's cache (``perfsuite.inputs.cache``), where later runs find it.
- Prompts: deterministic synthetic ones, input and output lengths from stated distributions
  (``serving.prompts``); ``ignore_eos`` asks engines that have it for fixed output lengths. The
  run's ``num_prompts`` (seeded by ``prompt_seed``) are LoadGen's sample library, the warm-up's and
  the cross-check's; every single-turn sweep step draws prompts of its own, seeded by
  ``prompt_seed`` and the step's number, because an engine with a prefix cache (vLLM's is on by
  default) would serve a step that re-sent earlier prompts from its cache: it would measure cache
  hits, not prefills, and the cache guard would never rank it. The seeds make a run repeat exactly.
- LoadGen's scenarios (``scenarios``: Server, Offline, SingleStream): LoadGen issues the
  queries, the streaming client answers it with the first token (``FirstTokenComplete``) and
  the token count, so LoadGen's TTFT/TPOT and VALID/INVALID verdict are the endpoint's.
- Sweeps: an open-loop request-rate sweep (``rates``, gamma arrivals with ``burstiness``), a
  search of the highest rate within the SLOs (``find_peak``), and a closed-loop concurrency
  sweep (``concurrencies``): TTFT, TPOT, ITL and E2E percentiles, SLO goodput per step.
- Traffic shapes beside single-turn prompts, one at a time, with the sweeps: trace replay
  (``trace``, Mooncake's format or a plain JSONL, at ``trace_time_scale``), shared prefixes
  (``prefixes`` x ``suffixes_per_prefix``, ``serving.traffic``) and multi-turn sessions
  (``turns``, ``serving.sessions``); every step states its shape and the engine's prefix-cache
  hit rate where it reports cached tokens. The cross-check sends single-turn prompts.
- Failures (HTTP errors, stalls, malformed chunks, truncated streams, timeouts) are counted
  per request with their reasons; past ``error_budget`` a scenario or step is INVALID.
- Accuracy beside speed (``accuracy_data``, ``serving.accuracy``): questions with reference
  answers sent as a scored pass of their own after each sweep step, at its load; a step below
  ``accuracy_min`` is INVALID and the sweep's accuracy check fails.
- The client's own capacity against the null streaming server is measured and recorded; a rate
  beyond it is flagged. Energy per request and per output token comes from NVML where the
  endpoint runs on this machine's GPU (``--device cuda`` and a local URL).
- ``perfsuite crosscheck inference.serving``: AIPerf (or the bare asyncio reference client)
  against the same endpoint with the same prompts and load, taking turns with the suite's
  client (``perfsuite.crosscheck.aiperf``).

Work: output tokens. Check: LoadGen's verdict and the error budget per scenario; a sweep must
have a VALID step. Headline: LoadGen's metric per scenario; goodput at the SLO for sweeps. The
record's ``details["serving"]`` is described in ``serving.report`` (what ``perfsuite show``
prints and the leaderboard draws).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlparse

from perfsuite import Headline, Requirements, Workload
from perfsuite.workloads.inference.serving.params import QUICK, SERVE_MODULES, TRANSFORMERS_SERVE, ServingParams

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


class Serving(Workload):
    name = "inference.serving"
    category = "inference"
    # 2: every single-turn sweep step sends prompts of its own (version 1 re-sent the run's prompts
    # from the first, so a step after the first met them in an engine's prefix cache); trace_sha256
    # and accuracy_data_sha256 name the files' content in the key. 3: a rate step whose server fell
    # behind its schedule reads the completions' own rates, no longer the offered rate
    # (``serving.metrics.rate_span``), so a saturated step's rates changed meaning. 4: a rate step's
    # rates are what the server delivered in its steady-state window (first request's end to last
    # arrival), the offered rate only where it delivered that; a step with no steady state reads its
    # duration: a batching engine that admits everything and slows every stream no longer reads
    # the offered rate
    version = 4
    description = (
        "an OpenAI-compatible endpoint under MLPerf LoadGen and rate/concurrency sweeps: TTFT, TPOT, ITL, "
        "SLO goodput, AIPerf cross-check"
    )
    Params = ServingParams
    quick: ClassVar[Mapping[str, Any]] = QUICK
    controls_honoured = ()  # LoadGen and the load shapes decide how long and how often
    # A sweep's goodput at its SLOs; LoadGen's tokens/s (Server, Offline) or latency percentile per
    # scenario with its VALID/INVALID; time to first token and per output token beside.
    headline = Headline(
        metric=("goodput_at_slo_rps",),
        cases={
            "SingleStream": ("latency_p90_ms",),
            "Server": ("tokens_per_s",),
            "Offline": ("tokens_per_s",),
        },
        beside=("goodput_at_slo_tokens_per_s", "ttft_p99_ms", "tpot_p99_ms"),
        validity="{case} VALID",
    )
    requirements = Requirements(devices=("cpu", "cuda"), max_world_size=1, packages=("httptools", "mlperf_loadgen"))

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self.server: Any = None
        self.pool: Any = None
        self.endpoint: Any = None
        self.prompts: list = []
        self.details: dict[str, Any] = {}
        self.tokenizer: str | None = None
        self.energy_local = False
        self.curve_basis: Any = None  # serving.curve.Basis: what the curve divides by and prices with
        self.rate_checks: dict[float, dict] = {}  # the client's open loop at each rate a sweep asked
        self.server_usage: bool | None = None  # the stream carried usage token counts (None: no warm-up saw)
        self.steps_run = 0  # a step's number seeds its shared prefixes and sessions: no step warms the next
        self.prompts_sent: set[str] | None = None  # digests of the single-turn prompts sent so far (the cache guard's)
        self.accuracy: Any = None  # serving.accuracy.ScoredPass where accuracy_data is given

    def unmet(self, ctx: "RunContext") -> str | None:
        """A started ``transformers serve`` needs the serving extra; without it the run is a skip."""
        import importlib.util

        command = self.params.server_command
        if TRANSFORMERS_SERVE in command or "transformers serve" in command:
            missing = [m for m in ("transformers", *SERVE_MODULES) if importlib.util.find_spec(m) is None]
            if missing:
                return f"transformers serve needs {', '.join(missing)} (pip install 'perfsuite[serving]')"
        return None

    # -- setup: the endpoint, the prompts, the client ------------------------------------------
    def setup(self, ctx: "RunContext") -> None:
        from perfsuite.workloads.inference.serving import server as srv
        from perfsuite.workloads.inference.serving.client import Endpoint
        from perfsuite.workloads.inference.serving.load import ClientPool
        from perfsuite.workloads.inference.serving.prompts import Lengths, describe, synthetic_prompts

        p = self.params
        if not (p.measures_alone or ctx.crosscheck.requested):
            # the parameters alone cannot tell: a cross-check (perfsuite crosscheck) needs no other step
            raise ValueError(
                "nothing to measure: name scenarios, rates, concurrencies or find_peak, "
                "or run it under perfsuite crosscheck"
            )
        root = ctx.artifact_dir()
        d: dict[str, Any] = {"artifact_dir": str(root)}
        self.details = ctx.details["serving"] = d
        model_dir = ""
        if p.build_model:
            from perfsuite.workloads.inference.serving.model import cached

            folder, d["model_built"] = cached(p.model_shape)
            model_dir = d["model_built"]["directory"] = str(folder)
        self.tokenizer = p.tokenizer or model_dir or None
        headers: dict[str, str] = {}
        if p.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[p.api_key_env]}"
        if p.url:
            base_url = p.url.rstrip("/")
            ready = srv.find_ready(base_url, p.health_path, headers)
            d["endpoint"] = {
                "base_url": base_url,
                "health_path": ready,
                "health_paths_tried": list(srv.health_paths(p.health_path)),
                "started_by_suite": False,
                "note": "a server already running when the run started",
            }
        else:
            port = srv.free_port()
            base_url = f"http://127.0.0.1:{port}"
            self.server = srv.ServerProcess(
                srv.command_argv(p.server_command, port, model_dir), root / "server.log", base_url, p.health_path
            )
            ctx.log(f"starting the server: {' '.join(self.server.argv)}")
            self.server.start()
            self.server.wait_ready(p.server_ready_timeout_s)
            d["endpoint"] = {"base_url": base_url, "started_by_suite": True, "server": self.server.describe()}
        host = urlparse(base_url).hostname or ""
        self.energy_local = ctx.device == "cuda" and host in LOCAL_HOSTS
        d["energy"] = (
            "NVML total energy of this machine's GPU (the endpoint is local)"
            if self.energy_local
            else "not measured: "
            + (
                "the run's device is not cuda"
                if ctx.device != "cuda"
                else f"the endpoint ({host}) is not on this machine"
            )
        )
        from perfsuite.workloads.inference.serving.curve import basis

        self.curve_basis = basis(
            p.gpus, p.server_command, p.price_per_gpu_hour, p.currency, p.power_w_per_gpu, host in LOCAL_HOSTS
        )
        d["curve_basis"] = self.curve_basis.describe()
        report = srv.self_report(base_url, headers)
        d["endpoint"]["self_report"] = report
        d["endpoint"]["engine"] = self._engine(report)
        from perfsuite.workloads.inference.serving.engine_metrics import probe as metrics_probe

        d["engine_metrics"] = metrics_probe(base_url, p.metrics_path, headers)
        model = p.model or model_dir or self._first_model(report)
        if not model:
            raise srv.ServerUnavailable("no model name: give model=..., the server's /v1/models named none")
        extra = (("ignore_eos", True),) if p.ignore_eos else ()
        self.endpoint = Endpoint(base_url, model, p.api, tuple(headers.items()), extra)
        d["endpoint"].update(
            model=model,
            api=p.api,
            url=self.endpoint.url,
            ignore_eos=p.ignore_eos,
            api_key="from $" + p.api_key_env if p.api_key_env else None,
        )
        inputs = Lengths(p.input_tokens, p.input_stddev, p.length_distribution)
        outputs = Lengths(p.output_tokens, p.output_stddev, p.length_distribution)
        self.prompts = synthetic_prompts(p.num_prompts, inputs, outputs, p.prompt_seed)
        d["prompts"] = describe(self.prompts, inputs, outputs, p.prompt_seed)
        d["traffic"] = self._traffic()
        d["slo"] = {**self._slo().describe(), "goodput_target": p.goodput_target, "error_budget": p.error_budget}
        if p.accuracy_data:
            self.accuracy = self._scored_pass(ctx)
            d["accuracy"] = {**self.accuracy.data.describe(), **self.accuracy.rules.describe()}
        self._warm_up(ctx)
        self.pool = ClientPool(p.client_processes)
        libraries = _versions(("httptools", "orjson", "uvloop"))
        d["client"] = {
            "libraries": libraries,
            "processes": p.client_processes,
            "event_loop": "uvloop" if "uvloop" in libraries else "asyncio",
        }
        if p.measure_client:
            from perfsuite.workloads.inference.serving.capacity import client_capacity

            cap = d["client"]["capacity"] = client_capacity(self.pool, seconds=1.0)
            ctx.log(
                f"client capacity: {cap['requests_per_s']:.0f} streamed requests/s "
                f"({cap['client_cpu_ms_per_request']:.3f} ms of CPU each), idle TTFT p50 "
                f"{cap['idle_ttft_p50_ms']:.2f} ms (load {cap['machine']['load_1m']:.1f})"
            )

    def _scored_pass(self, ctx: "RunContext") -> Any:
        """The questions scored at every step (``serving.accuracy``)."""
        from perfsuite.workloads.inference.serving.accuracy import AccuracyRules, ScoredPass, load

        p = self.params
        rules = AccuracyRules(p.accuracy_metric, p.accuracy_min, p.accuracy_requests, p.accuracy_max_tokens)
        data, seed = load(p.accuracy_data), ctx.controls.seed
        if data.sha256 != p.accuracy_data_sha256:  # the parameters pinned the file's bytes: the record names them
            raise ValueError(
                f"accuracy_data {p.accuracy_data} changed since the run started "
                f"(sha256 {data.sha256}, not {p.accuracy_data_sha256})"
            )
        return ScoredPass(data, rules, self.endpoint, self.timeouts(), self.tokenizer, p.gamma_shape, seed)

    def _traffic(self) -> dict:
        """The run's traffic shape and the parameters that define it (each step states its own too)."""
        p = self.params
        shape = p.traffic_shape
        if shape == "trace":
            return {
                "shape": shape,
                "trace_format": p.trace_format,
                "time_scale": p.trace_time_scale,
                "file": os.path.basename(p.trace),
            }
        if shape == "shared_prefix":
            return self._shared_prefix().describe()
        if shape == "multi_turn":
            return {"shape": shape, "turns": p.turns, "think_time_s": p.think_time_s, "sessions": p.sessions}
        return {"shape": shape, "prompts": "synthetic single-turn prompts (serving.prompts), none sharing a prefix"}

    def _slo(self) -> Any:
        from perfsuite.workloads.inference.serving.metrics import SLO

        p = self.params
        return SLO(p.slo_ttft_ms, p.slo_tpot_ms, p.slo_e2e_ms or None)

    def _engine(self, report: dict) -> dict:
        from perfsuite.workloads.inference.serving.server import engine_from_report

        engine = engine_from_report(report)
        argv = self.server.argv if self.server is not None else []
        if "transformers" in " ".join(argv) and "serve" in argv:
            engine = {
                "name": "transformers serve",
                "version": _versions(("transformers",)).get("transformers"),
                "version_source": "the measuring process's transformers (the server ran " + argv[0] + ")",
            }
        return engine

    @staticmethod
    def _first_model(report: dict) -> str:
        body = (report.get("/v1/models") or {}).get("body") or {}
        data = body.get("data") if isinstance(body, dict) else None
        return str(data[0].get("id", "")) if isinstance(data, list) and data and isinstance(data[0], dict) else ""

    def bodies(self) -> dict[int, bytes]:
        return {pr.index: self.endpoint.body(pr.text, pr.output_tokens) for pr in self.prompts}

    def timeouts(self) -> Any:
        from perfsuite.workloads.inference.serving.client import Timeouts

        return Timeouts(stall_s=self.params.stall_timeout_s, request_s=self.params.request_timeout_s)

    def _warm_up(self, ctx: "RunContext") -> None:
        """A few requests before anything is measured (a server's first requests load, compile
        or size its caches); if none succeeds, the endpoint cannot be measured: one line. A first
        request that ran out of time (timeout, stall) ends the warm-up there: the next ones would
        wait as long, and a run against an endpoint that never answers in time ends after one
        ``request_timeout_s``."""
        import time

        from perfsuite.workloads.inference.serving.load import Job, Sender
        from perfsuite.workloads.inference.serving.server import ServerUnavailable

        p = self.params
        if not p.warmup_requests:
            return
        bodies = self.bodies()
        t0 = time.perf_counter()
        results = []
        with Sender() as sender:
            for i in range(p.warmup_requests):
                job = Job(self.endpoint, self.timeouts(), bodies, [i % len(self.prompts)], None, 1, self.tokenizer)
                results += sender.run(job)
                if not any(r.ok for r in results) and results[-1].reason in ("timeout", "stall"):
                    break
        good = [r for r in results if r.ok]
        self.details["warm_up"] = {
            "requests": len(results),
            "succeeded": len(good),
            "seconds": time.perf_counter() - t0,
            "first_e2e_s": results[0].e2e_s if results else None,
            "token_count_source": sorted({r.token_source for r in good}),
        }
        # whether the server streams its own token counts: the cross-check asks AIPerf for them only then
        self.server_usage = bool(good) and all(r.token_source == "usage" for r in good)
        if not good:
            r = results[0]
            raise ServerUnavailable(
                f"{self.endpoint.url} answered no warm-up request: {r.reason}: {r.detail}"
                + (f" ({len(results)} of {p.warmup_requests} sent)" if len(results) < p.warmup_requests else "")
            )

    # -- measuring ----------------------------------------------------------------------
    def execute(self, ctx: "RunContext") -> None:
        p = self.params
        if p.scenarios:
            self._loadgen(ctx)
        if p.rates or p.find_peak:
            self._rate_sweep(ctx)
        if p.concurrencies:
            self._concurrency_sweep(ctx)
        if p.trace:
            self._trace_replay(ctx)
        if ctx.crosscheck.requested:
            self._crosscheck(ctx)

    def _capacity(self, one_loop: bool = False) -> float | None:
        """The client's measured requests/s; ``one_loop``: one process's share (LoadGen's SUT
        sends from one event loop in this process, however many client processes there are)."""
        cap = (self.details.get("client") or {}).get("capacity")
        if not cap:
            return None
        return cap["requests_per_s_per_process"] if one_loop else cap["requests_per_s"]

    def _rate_check(self, mode: str, load: float) -> dict | None:
        """The client's open loop at a rate step's rate (``capacity.rate_check``), once per rate;
        None where the client's capacity is not measured (``measure_client``) or the step is no rate."""
        if mode != "rate" or not self.params.measure_client:
            return None
        from perfsuite.workloads.inference.serving.capacity import rate_check

        if load not in self.rate_checks:
            self.rate_checks[load] = rate_check(self.pool, load, self._capacity())
        return self.rate_checks[load]

    def _loadgen(self, ctx: "RunContext") -> None:
        import mlperf_loadgen

        from perfsuite.workloads.inference._driver import loadgen_version
        from perfsuite.workloads.inference._settings import LoadGenParams
        from perfsuite.workloads.inference.serving.load import token_counter
        from perfsuite.workloads.inference.serving.loadgen import ServingLoadGen
        from perfsuite.workloads.inference.serving.sut import HTTPSUT

        p = self.params
        lgp = LoadGenParams(
            scenarios=p.scenarios,
            mode="performance",
            num_samples=p.num_prompts,
            min_duration_ms=p.min_duration_ms,
            min_query_count=p.min_query_count,
            target_latency_percentile=p.target_latency_percentile,
            samples_per_query=1,
            target_qps=p.target_qps,
            latency_ms=p.slo_e2e_ms or p.request_timeout_s * 1e3,
            max_batch=1,
            max_wait_ms=0.0,
            query_timeout_s=p.request_timeout_s,
        )
        sut = HTTPSUT(mlperf_loadgen, self.endpoint, self.bodies(), self.timeouts(), token_counter(self.tokenizer))
        runner = ServingLoadGen(ctx, lgp, sut, self._slo(), p.error_budget, self._capacity(True), self.energy_local)
        out = self.details["loadgen"] = {"loadgen_version": loadgen_version(), "scenarios": {}}
        runner.run(out)

    def _job(self, n: int, concurrency: int = 1, offsets: list[float] | None = None, first: int = 0) -> Any:
        from perfsuite.workloads.inference.serving.load import Job

        order = [(first + i) % len(self.prompts) for i in range(n)]
        return Job(self.endpoint, self.timeouts(), self.bodies(), order, offsets, concurrency, self.tokenizer)

    def _step(self, ctx: "RunContext", mode: str, load: float, label: str = "") -> dict:
        """One sweep step measured and judged (its metrics are recorded after the sweep's own)."""
        from perfsuite.workloads.inference.serving.load import Job, arrival_offsets_s

        p = self.params
        self.steps_run += 1
        if p.traffic_shape == "multi_turn":
            return self._session_step(ctx, int(load), label)
        traffic: dict[str, Any] = {"shape": p.traffic_shape}
        n = p.sweep_requests
        keys: dict[int, str] | None = None
        if p.traffic_shape == "shared_prefix":
            design = self._shared_prefix()
            texts = design.prompts(p.prompt_seed, self.steps_run)
            bodies = {k: self.endpoint.body(t, p.output_tokens) for k, t in enumerate(texts)}
            n = len(texts)
            traffic.update(design.describe(), step_seed=self.steps_run)
        else:  # single-turn: prompts of the step's own (serving.prompts.step_prompts), none sent before
            if mode == "rate":
                n = max(n, math.ceil(load * p.sweep_duration_s))
            prompts = self._step_prompts(n)
            bodies = {pr.index: self.endpoint.body(pr.text, pr.output_tokens) for pr in prompts}
            keys = {pr.index: prompt_key(pr.text) for pr in prompts}
            del prompts  # the bodies hold them: a long step's texts are not kept twice while it runs
            traffic.update(prompts="drawn afresh for every step", prompt_stream=[p.prompt_seed, self.steps_run])
        offsets = arrival_offsets_s(n, load, p.gamma_shape, ctx.controls.seed) if mode == "rate" else None
        order = list(range(n))
        job = Job(self.endpoint, self.timeouts(), bodies, order, offsets, int(load) if offsets is None else 1)
        job.tokenizer = self.tokenizer
        ctx.log(f"{mode} {load:g}: {n} requests ({p.traffic_shape})")
        return self._measure(ctx, mode, load, label, lambda: self.pool.run(job), traffic, self.pool.senders(job), keys)

    def _step_prompts(self, n: int) -> list:
        """The single-turn prompts of the step under way (``serving.prompts.step_prompts``)."""
        from perfsuite.workloads.inference.serving.prompts import Lengths, step_prompts

        p = self.params
        inputs = Lengths(p.input_tokens, p.input_stddev, p.length_distribution)
        outputs = Lengths(p.output_tokens, p.output_stddev, p.length_distribution)
        return step_prompts(n, inputs, outputs, p.prompt_seed, self.steps_run)

    def _measure(
        self,
        ctx: "RunContext",
        mode: str,
        load: float,
        label: str,
        send: Any,
        traffic: dict,
        processes: int,
        keys: dict[int, str] | None = None,
    ) -> dict:
        """Run ``send`` (it returns the step's results), judge the step and write its requests;
        ``keys``: a single-turn step's prompt digests by request index (``prompt_key``), which the
        requests file and the cache guard's count of repeated prompts read."""
        from perfsuite.workloads.inference.serving.loadgen import write_requests
        from perfsuite.workloads.inference.serving.sweep import StepRules, judge
        from perfsuite.workloads.inference.serving.traffic import hit_rate

        p = self.params
        from perfsuite.workloads.inference.serving.curve import PowerSampler, point

        watch = self._watch(ctx, traffic)
        send = watch.start(send)  # the cache probe before the step, the engine's scrape during it
        e0 = ctx.energy_j() if self.energy_local else None
        with ctx.gpu_sampler() as sampler, PowerSampler(self.curve_basis.power_gpus) as power:
            results = send()
        e1 = ctx.energy_j() if self.energy_local else None
        energy = e1 - e0 if e0 is not None and e1 is not None and e1 > e0 else None
        rules = StepRules(self._slo(), p.goodput_target, p.error_budget, self._capacity(), self._rate_check(mode, load))
        row = judge(mode, load, results, rules, energy)
        row["gpu"] = sampler.summary()
        row["client_processes"] = processes
        row["requests"] = len(results)
        row["traffic"] = traffic
        row["prefix_cache"] = hit_rate(results)
        row["server_power"] = power.summary()
        row["curve"] = point(row, self.curve_basis, row["server_power"])
        name = f"{label or mode}-{load:g}".replace("/", "_").replace(" ", "_")
        folder = ctx.artifact_dir() / "sweeps"
        folder.mkdir(exist_ok=True)
        write_requests(folder / f"{name}.jsonl", results, keys)
        row["requests_file"] = f"sweeps/{name}.jsonl"
        row["case"] = f"{label or mode} {load:g}" + ("/s" if mode == "rate" else "")
        watch.finish(row, results, self._sent_prompts(traffic), keys)  # the engine's figures, the cache's state
        if self.accuracy is not None:  # after the timed requests, outside the step's figures
            ctx.log(f"{row['case']}: scoring {self.accuracy.data.source}")
            answers = f"{name}.accuracy.jsonl"
            self.accuracy.score_step(row, self.pool.run, folder / answers, f"sweeps/{answers}")
        return row

    def _shared_prefix(self) -> Any:
        from perfsuite.workloads.inference.serving.traffic import SharedPrefix

        p = self.params
        return SharedPrefix(p.prefixes, p.suffixes_per_prefix, p.prefix_tokens, p.input_tokens, p.output_tokens)

    def _watch(self, ctx: "RunContext", traffic: dict) -> Any:
        """The engine's side of the next step: its scraped metrics and its cache state
        (``serving.step_watch``)."""
        from perfsuite.workloads.inference.serving.step_watch import StepWatch

        p = self.params
        metrics = self.details.get("engine_metrics") or {}
        folder = ctx.artifact_dir() / "sweeps"
        return StepWatch(
            self.endpoint, self.timeouts(), self.tokenizer, metrics, p.metrics_interval_s, p.api_key_env,
            p.cache_guard, traffic, self.steps_run, p.input_tokens, folder,
        )  # fmt: skip

    def _sent_prompts(self, traffic: dict) -> set[str] | None:
        """The digests (``prompt_key``) of the prompts sent before a single-turn step (the
        warm-up's, LoadGen's whole library, earlier steps'), which the engine may have cached;
        None for other shapes, whose design the guard judges by their hit rate alone."""
        if traffic.get("shape") != "single_turn":
            return None
        if self.prompts_sent is None:
            p, n = self.params, len(self.prompts)
            sent = range(n) if p.scenarios else sorted({i % n for i in range(p.warmup_requests)})
            self.prompts_sent = {prompt_key(self.prompts[i].text) for i in sent}
        return self.prompts_sent

    def _session_step(self, ctx: "RunContext", concurrency: int, label: str) -> dict:
        """One multi-turn step: ``sessions`` sessions, ``concurrency`` in flight (``serving.sessions``)."""
        from perfsuite.workloads.inference.serving.sessions import Conversation, run_sessions, summarize_turns

        p = self.params
        conv = Conversation(p.sessions, p.turns, p.think_time_s, p.input_tokens, p.output_tokens)
        seed = p.prompt_seed * 1_000 + self.steps_run
        ctx.log(f"concurrency {concurrency}: {p.sessions} sessions of {p.turns} turns (multi_turn)")
        turns: list = []

        def send() -> list:
            turns.extend(run_sessions(conv, concurrency, self.endpoint, self.timeouts(), seed, self.tokenizer))
            return [t.result for t in turns]

        row = self._measure(ctx, "concurrency", concurrency, label, send, conv.describe(concurrency), 1)
        import json

        row["sessions"] = summarize_turns(conv, turns)
        path = ctx.artifact_dir() / row["requests_file"]
        with open(path, "w") as f:  # the requests with their session and turn
            for t in turns:
                f.write(json.dumps({**t.result.to_row(), "session": t.session, "turn": t.turn + 1}) + "\n")
        return row

    def _trace_replay(self, ctx: "RunContext") -> None:
        """The trace's requests at its timestamps x ``trace_time_scale`` (``serving.traffic``)."""
        from perfsuite.workloads.inference.serving.load import Job
        from perfsuite.workloads.inference.serving.sweep import record_sweep
        from perfsuite.workloads.inference.serving.traffic import TraceError, load_trace, trace_prompt

        p = self.params
        trace = load_trace(p.trace, p.trace_format)
        if trace.sha256 != p.trace_sha256:  # the parameters pinned the file's bytes: the record names them
            raise TraceError(
                f"trace {p.trace} changed since the run started (sha256 {trace.sha256}, not {p.trace_sha256})"
            )
        scale = p.trace_time_scale
        bodies = {
            k: self.endpoint.body(trace_prompt(r, k, p.prompt_seed), r.output_tokens)
            for k, r in enumerate(trace.requests)
        }
        order = list(range(len(trace.requests)))
        job = Job(self.endpoint, self.timeouts(), bodies, order, trace.offsets_s(scale), 1, self.tokenizer)
        design = {"shape": "trace", **trace.describe(scale)}
        ctx.log(f"trace {trace.path.name}: {len(order)} requests over {design['scaled_span_s']:.3f} s")
        self.steps_run += 1
        row = self._measure(ctx, "trace", scale, "trace", lambda: self.pool.run(job), design, self.pool.senders(job))
        row["case"] = f"trace x{scale:g}"
        row["trace_lines"] = [r.line for r in trace.requests]  # request k of the requests file: this line
        self.details["trace_replay"] = {**design, "steps": [row]}
        record_sweep(ctx, "trace replay", [row], row if row["within_slo"] else None, "trace_time_scale", "x")

    def _rate_sweep(self, ctx: "RunContext") -> None:
        from perfsuite.workloads.inference.serving.sweep import find_peak, record_sweep

        p = self.params
        rows = [self._step(ctx, "rate", r) for r in p.rates]
        out: dict[str, Any] = {
            "burstiness": p.burstiness,
            "requests_per_step": p.sweep_requests,
            "least_seconds_per_step": p.sweep_duration_s,
            "steps": rows,
        }
        if p.find_peak:
            search = find_peak(lambda r: self._step(ctx, "rate", r, "find_peak"), p.peak_start_rps, p.peak_steps)
            out["find_peak"] = {k: v for k, v in search.items() if k != "steps"}
            rows = rows + search["steps"]
            out["steps"] = rows
        good = [r for r in rows if r["within_slo"]]
        peak = max(good, key=lambda r: r["load"]) if good else None
        out["peak_rps"] = peak["load"] if peak else None
        self.details["rate_sweep"] = out
        record_sweep(ctx, "rate sweep", rows, peak, "peak_rate_within_slo_rps", "requests/s")

    def _concurrency_sweep(self, ctx: "RunContext") -> None:
        from perfsuite.workloads.inference.serving.sweep import record_sweep

        p = self.params
        rows = [self._step(ctx, "concurrency", c) for c in p.concurrencies]
        good = [r for r in rows if r["within_slo"]]
        best = max(good, key=lambda r: r["goodput_rps"]) if good else None
        self.details["concurrency_sweep"] = {
            "requests_per_step": p.sweep_requests,
            "steps": rows,
            "best_concurrency": best["load"] if best else None,
        }
        record_sweep(ctx, "concurrency sweep", rows, best, "best_concurrency_within_slo", "requests")

    # -- the cross-check -------------------------------------------------------------------
    def _crosscheck(self, ctx: "RunContext") -> None:
        """The same load from the suite's client and from the reference tool (AIPerf, else the
        bare asyncio reference), in turns (``perfsuite.crosscheck.aiperf``)."""
        from perfsuite.workloads.inference.serving.load import arrival_offsets_s
        from perfsuite.workloads.inference.serving.metrics import summarize

        p = self.params
        n = p.crosscheck_requests
        prompts = [self.prompts[i % len(self.prompts)] for i in range(n)]
        rate, seed = p.crosscheck_rate, ctx.controls.seed
        offsets = arrival_offsets_s(n, rate, p.gamma_shape, seed) if rate else None

        def suite_once() -> dict:
            job = self._job(n, p.crosscheck_concurrency, offsets)
            # first send to last end, as AIPerf and the bare reference divide: the same span on both sides
            s = summarize(self.pool.run(job), self._slo())
            return {
                "token_count_source": s["token_count_source"],
                "rate_span": s["rate_span"],
                "client_processes": self.pool.senders(job),
                "ttft_p50_ms": s["ttft_ms"].get("p50"),
                "ttft_p99_ms": s["ttft_ms"].get("p99"),
                "itl_p50_ms": s["tpot_ms"].get("p50"),
                "output_tokens_per_s": s["output_tokens_per_s"],
                "completed": s["completed"],
                "failed": s["errors"]["count"],
            }

        spec = {
            "base_url": self.endpoint.base_url,
            "model": self.endpoint.model,
            "api": self.endpoint.api,
            "prompts": [(pr.text, pr.output_tokens) for pr in prompts],
            "offsets_s": offsets,  # a rate's arrival times: both sides send on this schedule
            "requests": n,
            "concurrency": None if p.crosscheck_rate else p.crosscheck_concurrency,
            "rate": p.crosscheck_rate or None,
            "burstiness": p.burstiness,
            "seed": ctx.controls.seed,
            "tokenizer": self.tokenizer,
            "server_token_counts": self.server_usage,
            "ignore_eos": p.ignore_eos,
            "api_key_env": p.api_key_env or None,
            "timeout_s": p.request_timeout_s,
            "workdir": str(ctx.artifact_dir() / "crosscheck"),
        }
        ctx.details["crosscheck"] = ctx.crosscheck.serving(suite_once, spec)

    def teardown(self, ctx: "RunContext") -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self.server is not None:
            self.details.setdefault("endpoint", {})["stop"] = self.server.stop()
            self.server = None

    @classmethod
    def render_details(cls, record: Mapping[str, Any]) -> Any:
        from perfsuite.workloads.inference.serving.report import render

        return render(record)


def prompt_key(text: str) -> str:
    """A prompt's digest (sha256 of its text, hex): what the requests file and the cache guard
    know a prompt by, so that two steps' requests of one index are told apart."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _versions(names: tuple[str, ...]) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not installed: absent from the record
    return out
