"""The parameters of ``inference.serving`` and its quick preset: what a user sets, each
checked when the parameters are made, so that a bad value is a one-line refusal before a server
starts or a request is sent (``perfsuite describe inference.serving`` lists them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from perfsuite import param
from perfsuite.workloads.inference.serving.accuracy import METRICS
from perfsuite.workloads.inference.serving.prompts import DISTRIBUTIONS
from perfsuite.workloads.inference.serving.traffic import MAX_INPUT_TOKENS, TRACE_FORMATS, load_trace

SCENARIOS = ("Server", "Offline", "SingleStream")
APIS = ("completions", "chat")
TRANSFORMERS_SERVE = "transformers.cli.transformers"  # `python -m` of the `transformers` command


@dataclass(frozen=True)
class ServingParams:
    # -- the endpoint
    url: str = param("", "base URL of a running server (http://host:port); empty: start server_command")
    server_command: str = param(
        "",
        "command that starts the server; {port}, {model_dir} and {python} are "
        "filled in (e.g. '{python} -m transformers.cli.transformers serve {model_dir} "
        "--port {port}')",
    )
    model: str = param(
        "", "model name in requests (default: the built model's folder, else the server's first /v1/models entry)"
    )
    api: str = param("completions", "OpenAI API: completions or chat", choices=APIS)
    api_key_env: str = param("", "environment variable holding an API key (sent as a bearer token, never recorded)")
    health_path: str = param(
        "", "GET path that answers 200 once the server is ready ('': /health, else /v1/models, whichever answers)"
    )
    server_ready_timeout_s: float = param(900.0, "longest wait for a started server's health endpoint")
    ignore_eos: bool = param(False, "send ignore_eos (vLLM, SGLang): answers run to max_tokens")
    tokenizer: str = param(
        "",
        "tokenizer.json (or its folder) counting output tokens where the server gives no "
        "usage, and AIPerf's tokenizer (default: the built model's)",
    )
    # -- a model written from a config (for {model_dir})
    build_model: bool = param(False, "write a Llama model + word-level tokenizer from a config for {model_dir}")
    model_layers: int = param(2, "built model: decoder layers")
    model_hidden: int = param(64, "built model: hidden size")
    model_heads: int = param(4, "built model: attention heads")
    model_intermediate: int = param(128, "built model: feed-forward size")
    # -- prompts
    num_prompts: int = param(
        256, "distinct synthetic prompts: LoadGen's sample library, the warm-up's and the cross-check's"
    )
    input_tokens: int = param(128, "mean prompt length (words: tokens under the built model's tokenizer)")
    input_stddev: float = param(0.0, "standard deviation of prompt lengths (0: fixed)")
    output_tokens: int = param(64, "mean max_tokens asked for")
    output_stddev: float = param(0.0, "standard deviation of max_tokens (0: fixed)")
    length_distribution: str = param("normal", "distribution of lengths", choices=DISTRIBUTIONS)
    prompt_seed: int = param(
        0,
        "seed of the prompts (fixed across repeats: the same prompts every run); each sweep step draws prompts "
        "of its own from it and the step's number, none the warm-up or another step sent",
    )
    # -- LoadGen
    scenarios: tuple[str, ...] = param(SCENARIOS, "LoadGen scenarios (none: sweeps only)", choices=SCENARIOS)
    target_qps: float = param(2.0, "LoadGen Server: target queries per second")
    min_duration_ms: int = param(10_000, "LoadGen min_duration_ms of each scenario")
    min_query_count: int = param(100, "LoadGen min_query_count of each scenario")
    target_latency_percentile: float | None = param(
        None, "LoadGen latency percentile (None: LoadGen's 0.9 SingleStream, 0.99 Server/Offline)"
    )
    # -- sweeps
    rates: tuple[float, ...] = param((), "request-rate sweep (requests/s, open loop)")
    burstiness: str = param("1", "gamma shape of the gaps between arrivals (1: Poisson; inf: even), a number above 0")
    concurrencies: tuple[int, ...] = param((), "concurrency sweep (requests in flight, closed loop)")
    sweep_requests: int = param(200, "requests per sweep step")
    sweep_duration_s: float = param(
        0.0,
        "a rate step sends at least this many seconds of arrivals (rate x duration requests, when more "
        "than sweep_requests): long enough for a queue to build past saturation (0: sweep_requests alone)",
    )
    find_peak: bool = param(False, "search the highest request rate that is VALID and within the SLOs")
    peak_start_rps: float = param(1.0, "find_peak: first rate tried")
    peak_steps: int = param(8, "find_peak: most steps (doubling, then bisection)")
    # -- traffic shapes (serving.traffic, serving.sessions); single-turn prompts when none is given
    trace: str = param("", "JSONL trace to replay at its timestamps (one request a line, see trace_format; '': none)")
    trace_sha256: str = param(
        "",
        "sha256 of the trace file's bytes: '' fills it in from the file, a value pins it (a file that differs is "
        "refused); the comparability key holds it, so two files at one path never share a key",
    )
    trace_format: str = param(
        "mooncake",
        "trace's format: mooncake (timestamp ms, input_length, output_length, hash_ids) or jsonl "
        "(timestamp_s, input_tokens, output_tokens)",
        choices=TRACE_FORMATS,
    )
    trace_time_scale: float = param(1.0, "trace replay: a request leaves at its trace time x this (0.5: twice as fast)")
    prefixes: int = param(
        0, "shared-prefix traffic: N prefixes (0: none), each followed by suffixes_per_prefix suffixes of input_tokens"
    )
    suffixes_per_prefix: int = param(4, "shared-prefix traffic: M suffixes (requests) per prefix")
    prefix_tokens: int = param(256, "shared-prefix traffic: words of each prefix")
    turns: int = param(0, "multi-turn sessions of this many turns (0: single-turn); sessions in flight: concurrencies")
    think_time_s: float = param(0.0, "multi-turn: a session waits this long after an answer before its next turn")
    sessions: int = param(8, "multi-turn: sessions per concurrency step")
    # -- accuracy beside speed (serving.accuracy): a scored pass at every sweep step's load
    accuracy_data: str = param(
        "",
        "JSONL of questions with reference answers ({prompt, answer or answers, max_tokens?} a line), "
        "or a shipped set (gpt-reverse: training.gpt's synthetic language); '': none",
    )
    accuracy_data_sha256: str = param(
        "", "sha256 of accuracy_data's file (a user's or a shipped set's): as trace_sha256, filled in or pinned"
    )
    accuracy_metric: str = param(
        "exact", "exact: equal to a reference after normalisation; contains: a reference within it", choices=METRICS
    )
    accuracy_min: float = param(0.0, "least accuracy of a step that may rank (0: scored, no step flagged)")
    accuracy_requests: int = param(
        100, "questions a step's scored pass sends: the file's first, cycled if it holds fewer (0: every line)"
    )
    accuracy_max_tokens: int = param(32, "max_tokens of a question whose line gives none")
    # -- SLOs and validity
    slo_ttft_ms: float = param(2000.0, "SLO on time to first token (also LoadGen Server's TTFT bound)")
    slo_tpot_ms: float = param(200.0, "SLO on time per output token (also LoadGen Server's TPOT bound)")
    slo_e2e_ms: float = param(0.0, "SLO on end-to-end latency (0: none)")
    goodput_target: float = param(0.9, "least share of requests meeting every SLO for a step within the SLOs")
    error_budget: float = param(0.01, "most failed requests (share of those sent) of a VALID scenario or step")
    # -- the client
    client_processes: int = param(
        1, "client processes of open loops (one streams ~2,000 short requests/s); a closed loop is sent from one"
    )
    stall_timeout_s: float = param(60.0, "a stream silent this long between two reads fails its request (stall)")
    request_timeout_s: float = param(
        600.0,
        "whole-request deadline, first byte to last, trickled or not (timeout); a run whose endpoint never "
        "answers in time ends within it plus a grace of 15 s (the health probe's, the self-report's and the metrics "
        "probe's 5 s each), and a cold-cache step within it plus its cache probe's 5 s at most",
    )
    warmup_requests: int = param(4, "requests sent and discarded before measuring (a server's first is slow)")
    measure_client: bool = param(True, "measure the client's capacity against the null server first")
    # -- the engine's side of each step (serving.engine_metrics, serving.cache_guard)
    metrics_path: str = param(
        "/metrics", "the engine's Prometheus metrics, scraped during every step ('none': not scraped)"
    )
    metrics_interval_s: float = param(1.0, "seconds between scrapes of metrics_path in a step (and one at each end)")
    cache_guard: bool = param(
        True, "flag, and never rank, a step whose prefix-cache state departs from its traffic's design"
    )
    # -- the curve: tokens/s per GPU against tokens/s per user, cost and energy (serving.curve)
    gpus: int = param(0, "GPUs the engine uses, the curve's per-GPU divisor (0: the server command's, else 1, assumed)")
    price_per_gpu_hour: float = param(0.0, "price of one GPU-hour, for the cost per million output tokens (0: none)")
    currency: str = param("USD", "currency of price_per_gpu_hour")
    power_w_per_gpu: float = param(0.0, "watts per GPU when NVML cannot sample the server's GPUs (0: unknown)")
    # -- the cross-check (perfsuite crosscheck)
    crosscheck_concurrency: int = param(4, "cross-check load: requests in flight (used when crosscheck_rate is 0)")
    crosscheck_rate: float = param(0.0, "cross-check load: open-loop requests/s (0: use crosscheck_concurrency)")
    crosscheck_requests: int = param(64, "requests per cross-check round, each side")

    def __post_init__(self) -> None:
        if bool(self.url) == bool(self.server_command):
            raise ValueError("give exactly one of url (a running server) and server_command (one to start)")
        if self.url and urlparse(self.url).scheme not in ("http", "https"):
            raise ValueError(f"url {self.url!r} is not an http:// or https:// URL")
        if self.build_model and not self.server_command:
            raise ValueError("build_model writes a model for server_command's {model_dir}: give server_command")
        if self.health_path and not self.health_path.startswith("/"):
            raise ValueError(f"health_path must start with '/', not {self.health_path!r}")
        positive = {
            "num_prompts": self.num_prompts,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "target_qps": self.target_qps,
            "min_query_count": self.min_query_count,
            "sweep_requests": self.sweep_requests,
            "peak_start_rps": self.peak_start_rps,
            "peak_steps": self.peak_steps,
            "slo_ttft_ms": self.slo_ttft_ms,
            "slo_tpot_ms": self.slo_tpot_ms,
            "client_processes": self.client_processes,
            "stall_timeout_s": self.stall_timeout_s,
            "request_timeout_s": self.request_timeout_s,
            "server_ready_timeout_s": self.server_ready_timeout_s,
            "crosscheck_concurrency": self.crosscheck_concurrency,
            "crosscheck_requests": self.crosscheck_requests,
            "model_layers": self.model_layers,
            "model_hidden": self.model_hidden,
            "model_heads": self.model_heads,
            "model_intermediate": self.model_intermediate,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, not {value:g}")
        for name, value in (
            ("input_stddev", self.input_stddev),
            ("output_stddev", self.output_stddev),
            ("slo_e2e_ms", self.slo_e2e_ms),
            ("min_duration_ms", self.min_duration_ms),
            ("warmup_requests", self.warmup_requests),
            ("crosscheck_rate", self.crosscheck_rate),
            ("sweep_duration_s", self.sweep_duration_s),
            ("gpus", self.gpus),
            ("price_per_gpu_hour", self.price_per_gpu_hour),
            ("power_w_per_gpu", self.power_w_per_gpu),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, not {value:g}")
        if not self.currency.strip() or len(self.currency) > 16:
            raise ValueError(f"currency must be a short name (USD, EUR, ...), not {self.currency!r}")
        self.gamma_shape  # noqa: B018 (a bad burstiness is refused here, before anything runs)
        if self.metrics_path != "none" and not self.metrics_path.startswith("/"):
            raise ValueError(f"metrics_path must start with '/' or be none, not {self.metrics_path!r}")
        if not 0 < self.metrics_interval_s <= 3600:
            raise ValueError(f"metrics_interval_s must lie above 0 and at most 3600, not {self.metrics_interval_s:g}")
        for r in self.rates:
            if not (r > 0 and math.isfinite(r)):
                raise ValueError(f"rates must be finite and greater than 0, not {r:g}")
        for c in self.concurrencies:
            if c < 1:
                raise ValueError(f"concurrencies must be at least 1, not {c}")
        if not 0.0 <= self.goodput_target <= 1.0 or not 0.0 <= self.error_budget < 1.0:
            raise ValueError("goodput_target must lie in [0, 1] and error_budget in [0, 1)")
        pct = self.target_latency_percentile
        if pct is not None and not 0.0 < pct < 1.0:
            raise ValueError(f"target_latency_percentile must lie strictly between 0 and 1, not {pct:g}")
        if len(set(self.scenarios)) != len(self.scenarios):
            raise ValueError(f"scenarios repeat: {','.join(self.scenarios)}")
        if self.api_key_env and self.api_key_env not in os.environ:
            raise ValueError(f"api_key_env names {self.api_key_env}, which is not set in the environment")
        self._check_traffic()
        self._check_accuracy()
        if self.build_model:
            from perfsuite.workloads.inference.serving.model import refuse_unless_it_fits

            refuse_unless_it_fits(self.model_shape)

    def _check_traffic(self) -> None:
        """One traffic shape at a time, with the load it runs under; a trace is read and checked
        here, so that a bad line is refused before a server starts."""
        given = [n for n, on in (("trace", bool(self.trace)), ("prefixes", self.prefixes), ("turns", self.turns)) if on]
        if len(given) > 1:
            raise ValueError(f"one traffic shape at a time: {' and '.join(given)} were both given")
        for name, value, low, top in (
            ("prefixes", self.prefixes, 0, 100_000),
            ("suffixes_per_prefix", self.suffixes_per_prefix, 1, 100_000),
            ("prefix_tokens", self.prefix_tokens, 1, MAX_INPUT_TOKENS),
            ("turns", self.turns, 0, 1_000),
            ("sessions", self.sessions, 1, 100_000),
        ):
            if not low <= value <= top:
                raise ValueError(f"{name} must lie from {low} to {top}, not {value}")
        if not (0 <= self.think_time_s <= 3600):
            raise ValueError(f"think_time_s must lie from 0 to 3600, not {self.think_time_s:g}")
        if not (self.trace_time_scale > 0 and math.isfinite(self.trace_time_scale)):
            raise ValueError(f"trace_time_scale must be a finite number above 0, not {self.trace_time_scale:g}")
        if self.prefixes * self.suffixes_per_prefix > 1_000_000:
            raise ValueError("prefixes x suffixes_per_prefix must be at most 1,000,000 requests a step")
        shape = self.traffic_shape
        if shape != "single_turn" and self.scenarios:
            raise ValueError(f"LoadGen's scenarios send single-turn prompts: give scenarios= (none) with {given[0]}")
        if shape == "trace":
            if self.rates or self.concurrencies or self.find_peak:
                raise ValueError("a trace sets its own arrival times: give no rates, concurrencies or find_peak")
            self._pin("trace", load_trace(self.trace, self.trace_format).sha256)
        elif self.trace_sha256:
            raise ValueError("trace_sha256 pins a trace's content: give trace= too")
        if shape == "shared_prefix" and not (self.rates or self.concurrencies or self.find_peak):
            raise ValueError("shared-prefix traffic runs at each of rates and concurrencies: give one")
        if shape == "multi_turn" and (self.rates or self.find_peak or not self.concurrencies):
            raise ValueError("multi-turn sessions run at each of concurrencies (sessions in flight): give those only")

    def _check_accuracy(self) -> None:
        """The accuracy data read and checked here, so that a bad line is refused before a server starts."""
        if not 0.0 <= self.accuracy_min <= 1.0:
            raise ValueError(f"accuracy_min must lie from 0 to 1, not {self.accuracy_min:g}")
        if not 0 <= self.accuracy_requests <= 100_000 or not 1 <= self.accuracy_max_tokens <= 100_000:
            raise ValueError("accuracy_requests must lie from 0 to 100,000 and accuracy_max_tokens from 1 to 100,000")
        if not self.accuracy_data:
            if self.accuracy_data_sha256:
                raise ValueError("accuracy_data_sha256 pins accuracy data's content: give accuracy_data= too")
            return
        if not (self.rates or self.concurrencies or self.find_peak or self.trace):
            raise ValueError(
                "accuracy_data is scored at each sweep step: give rates, concurrencies, find_peak or trace"
            )
        from perfsuite.workloads.inference.serving.accuracy import load

        self._pin("accuracy_data", load(self.accuracy_data).sha256)

    def _pin(self, name: str, sha256: str) -> None:
        """``<name>_sha256``: the file's digest filled in where none was given (the resolved
        parameters, so the record and its comparability key name the content, not only the
        path), or checked against the file where one was (a record re-run, a pinned file)."""
        given = getattr(self, f"{name}_sha256")
        if given and given.lower() != sha256:
            raise ValueError(
                f"{name} {getattr(self, name)} holds bytes of sha256 {sha256}, not {name}_sha256={given}: "
                "the file changed, or another file is named"
            )
        object.__setattr__(self, f"{name}_sha256", sha256)  # frozen: the one value resolution fills in

    @property
    def traffic_shape(self) -> str:
        """single_turn, trace, shared_prefix or multi_turn."""
        if self.trace:
            return "trace"
        if self.prefixes:
            return "shared_prefix"
        return "multi_turn" if self.turns else "single_turn"

    @property
    def measures_alone(self) -> bool:
        """Whether the run measures something without a cross-check (under ``perfsuite
        crosscheck`` the cross-check's rounds are a measurement of their own)."""
        return bool(self.scenarios or self.rates or self.concurrencies or self.find_peak or self.trace)

    @property
    def gamma_shape(self) -> float:
        """``burstiness`` as a number: ``inf`` (evenly spaced arrivals) is a value a record cannot
        hold as a number, so the parameter is text and this is its reading."""
        text = str(self.burstiness).strip().lower()
        if text in ("inf", "+inf", "infinity", "even"):
            return math.inf
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"burstiness must be a number above 0 or inf, not {self.burstiness!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"burstiness must be a number above 0 or inf, not {self.burstiness!r}")
        return value

    @property
    def model_shape(self) -> Any:
        """The shape ``build_model`` writes (``serving.model.ModelShape``)."""
        from perfsuite.workloads.inference.serving.model import ModelShape

        return ModelShape(self.model_layers, self.model_hidden, self.model_heads, self.model_intermediate)


# The CPU smoke run: a tiny model written from a config, served by transformers (no continuous
# batching: its warm-up costs about 40 s on the CPU) with one torch thread (two requests at once
# on two cores otherwise oversubscribe them and run at half speed or full speed by chance),
# LoadGen's latency percentile at 0.5 so that 16 queries can satisfy early stopping (p90 needs
# about 50, p99 about 460), the cross-check one request at a time.
QUICK: Mapping[str, Any] = {
    "server_command": f"env OMP_NUM_THREADS=1 {{python}} -m {TRANSFORMERS_SERVE} serve {{model_dir}} --port {{port}} "
    "--device cpu --host 127.0.0.1",
    "build_model": True,
    "num_prompts": 32,
    "input_tokens": 12,
    "input_stddev": 3.0,
    "output_tokens": 6,
    "target_qps": 3.0,
    "min_duration_ms": 1500,
    "min_query_count": 16,
    "target_latency_percentile": 0.5,
    "concurrencies": (1, 2),
    "sweep_requests": 8,
    "slo_ttft_ms": 5000.0,
    "slo_tpot_ms": 1000.0,
    "warmup_requests": 2,
    "server_ready_timeout_s": 300.0,
    "stall_timeout_s": 30.0,
    "request_timeout_s": 60.0,
    "error_budget": 0.0,
    "crosscheck_concurrency": 1,
    "crosscheck_requests": 32,
}
# What `transformers serve` needs besides transformers (transformers.utils.is_serve_available).
SERVE_MODULES = ("fastapi", "uvicorn", "openai", "pydantic")
