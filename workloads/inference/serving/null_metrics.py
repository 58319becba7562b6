"""The null server's ``/metrics`` (``--metrics``): Prometheus text under vLLM's names, with
figures that move with the traffic it serves, so that the suite's scrape of an engine's metrics
(``serving.engine_metrics``) can be tested against a real server without a model:

- ``vllm:num_requests_running`` / ``vllm:num_requests_waiting``: streams under way (waiting:
  those a ``--batching`` engine has not yet admitted to a step);
- ``vllm:time_to_first_token_seconds``: request parsed to first token written, as the server
  sees it; ``vllm:request_queue_time_seconds``: parsed to admitted (0 without ``--batching``);
- ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total``: prompt words looked up
  in and served from ``--prefix-cache`` (absent without it);
- ``null:metrics_scrapes_total``: how often ``/metrics`` was read (a name no engine uses: the
  suite keeps it out of the record).

Counted per server process: with ``--processes`` above 1 an answer is one process's figures.
Without ``--metrics`` none of this is counted (the server's cost per request stays what the
client-capacity measurement assumes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# vLLM's TTFT buckets (seconds), cut at 10 s
TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
QUEUE_BUCKETS_S = (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bucket, the last one +Inf
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        for k, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[k] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value

    def lines(self, name: str, help_text: str) -> list[str]:
        out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        running = 0
        for bound, count in zip((*self.bounds, None), self.counts, strict=True):
            running += count
            le = "+Inf" if bound is None else repr(float(bound))
            out.append(f'{name}_bucket{{le="{le}",model_name="null"}} {running}')
        out.append(f'{name}_count{{model_name="null"}} {running}')
        out.append(f'{name}_sum{{model_name="null"}} {self.total!r}')
        return out


@dataclass
class NullMetrics:
    streams: int = 0  # streamed answers under way
    scrapes: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS_S))
    queue: Histogram = field(default_factory=lambda: Histogram(QUEUE_BUCKETS_S))

    def text(self, waiting: int, cache_counts: tuple[int, int] | None) -> str:
        """The exposition: ``waiting`` requests not yet admitted, ``cache_counts`` (queried,
        hit) prompt words of the prefix cache, None without one."""
        self.scrapes += 1
        running = max(0, self.streams - waiting)
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{model_name="null"}} {running}',
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f'vllm:num_requests_waiting{{model_name="null"}} {waiting}',
            *self.ttft.lines("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds."),
            *self.queue.lines("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase."),
        ]
        if cache_counts is not None:
            queries, hits = cache_counts
            lines += [
                "# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.",
                "# TYPE vllm:prefix_cache_queries counter",
                f'vllm:prefix_cache_queries_total{{model_name="null"}} {queries}',
                "# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.",
                "# TYPE vllm:prefix_cache_hits counter",
                f'vllm:prefix_cache_hits_total{{model_name="null"}} {hits}',
            ]
        lines += [
            "# HELP null:metrics_scrapes Reads of this endpoint.",
            "# TYPE null:metrics_scrapes counter",
            f"null:metrics_scrapes_total {self.scrapes}",
        ]
        return "\n".join(lines) + "\n"
