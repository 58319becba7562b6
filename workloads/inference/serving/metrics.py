"""What a set of requests measured: latency percentiles, rates, SLO goodput, errors by reason.

Definitions (those of vLLM's ``bench serve`` and AIPerf, which agree on them):

- TTFT: request sent to first content chunk received.
- TPOT: (end of stream - first token) / (output tokens - 1), per request (AIPerf calls it
  inter-token latency; LoadGen's TPOT is the same quotient).
- ITL: the gaps between consecutive content chunks, all requests pooled (vLLM's ITL).
- E2E: request sent to end of stream.
- Duration: first request sent to last one ended. Rates are completed requests and output
  tokens over the rate span: an open-loop step's schedule (n requests at r per second: n / r),
  else the duration; ``rate_span`` says which.
- Goodput (DistServe's, vLLM's ``--goodput``): requests that completed and met every SLO given
  (TTFT, TPOT, E2E), per second of the duration, and their output tokens per second; SLO
  attainment: that count over every request sent (failed ones count against it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from perfsuite.workloads.inference.serving.client import REASONS, RequestResult

PERCENTILES = (50, 90, 99)
EXAMPLES_PER_REASON = 3


@dataclass(frozen=True)
class SLO:
    """Latency objectives per request in ms; None: not an objective."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and not value > 0:
                raise ValueError(f"SLO {name} must be greater than 0, not {value:g}")

    def met(self, r: RequestResult) -> bool:
        if not r.ok:
            return False
        if self.ttft_ms is not None and r.ttft_s * 1e3 > self.ttft_ms:
            return False
        tpot = r.tpot_s
        if self.tpot_ms is not None and tpot is not None and tpot * 1e3 > self.tpot_ms:
            return False  # one output token has no TPOT: vLLM counts it as met
        return not (self.e2e_ms is not None and r.e2e_s * 1e3 > self.e2e_ms)

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p90/p99 (numpy's linear interpolation, as vLLM and AIPerf report), mean, min, max."""
    import numpy as np

    if not values:
        return {}
    a = np.asarray(values, dtype=float)
    out = {f"p{p}": float(np.percentile(a, p)) for p in PERCENTILES}
    out.update(mean=float(a.mean()), min=float(a.min()), max=float(a.max()))
    return out


def errors(results: Iterable[RequestResult]) -> dict:
    """Failed requests counted by reason, with a few examples of each."""
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for r in results:
        if r.reason is None:
            continue
        counts[r.reason] += 1
        if len(examples.setdefault(r.reason, [])) < EXAMPLES_PER_REASON:
            examples[r.reason].append(r.detail)
    return {
        "count": sum(counts.values()),
        "by_reason": {k: counts[k] for k in REASONS if counts[k]},
        "examples": examples,
    }


TOKEN_COUNT_SOURCES = {
    "usage": "the server's usage in the stream",
    "tokenizer": "the named tokenizer over each answer's text (the stream carried no usage)",
    "chunks": "one token per content chunk (the stream carried no usage and no tokenizer was given): a stated guess",
}


def token_count_source(sources: Counter[str]) -> str | None:
    """Where a step's output token counts came from, in words (mixed sources named with counts)."""
    if not sources:
        return None
    if len(sources) == 1:
        return next(iter(sources))
    return "mixed: " + ", ".join(f"{k} {v}" for k, v in sorted(sources.items()))


def summarize(results: list[RequestResult], slo: SLO, scheduled_span_s: float | None = None) -> dict:
    """The figures of one measured load step (JSON-ready; times in ms).

    Rates divide by ``rate_span_s``: the schedule's span where the step had one
    (``scheduled_span_s``: n requests at r per second span n / r, so a step that kept its
    schedule reads r, not n / (n - 1) r as first-sent to last-ended would), else the duration,
    first request sent to last one ended; ``rate_span`` says which."""
    ok = [r for r in results if r.ok]
    if results:
        start = min(r.sent_ns for r in results if r.sent_ns) if any(r.sent_ns for r in results) else 0
        end = max((r.done_ns for r in results), default=start)
        duration_s = max((end - start) * 1e-9, 1e-9)
    else:
        duration_s = 0.0
    span_s = scheduled_span_s if scheduled_span_s and results else duration_s
    good = [r for r in ok if slo.met(r)]
    tokens = sum(r.output_tokens for r in ok)
    itl = [x * 1e3 for r in ok for x in r.itl_s]
    lag = [(r.sent_ns - r.scheduled_ns) * 1e-6 for r in results if r.sent_ns and r.scheduled_ns]
    sources = Counter(r.token_source for r in ok)
    rate = (lambda n: n / span_s) if span_s else (lambda n: 0.0)
    return {
        "requests": len(results),
        "completed": len(ok),
        "duration_s": duration_s,
        "rate_span_s": span_s,
        "rate_span": "schedule: requests / offered rate"
        if scheduled_span_s and results
        else "duration: first request sent to last one ended",
        "completed_rps": rate(len(ok)),
        "output_tokens": tokens,
        "output_tokens_per_s": rate(tokens),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok) or None,
        "ttft_ms": percentiles([r.ttft_s * 1e3 for r in ok]),
        "tpot_ms": percentiles([t * 1e3 for r in ok if (t := r.tpot_s) is not None]),
        "itl_ms": percentiles(itl),
        "e2e_ms": percentiles([r.e2e_s * 1e3 for r in ok]),
        "send_lag_ms": percentiles(lag),
        "good": len(good),
        "goodput_rps": rate(len(good)),
        "goodput_tokens_per_s": rate(sum(r.output_tokens for r in good)),
        "slo_attainment": len(good) / len(results) if results else 0.0,
        "token_sources": dict(sources),
        "token_count_source": token_count_source(sources),
        "token_count_note": TOKEN_COUNT_SOURCES.get(token_count_source(sources) or ""),
        "errors": errors(results),
    }
