"""What a set of requests measured: latency percentiles, rates, SLO goodput, errors by reason.

Definitions (those of vLLM's ``bench serve`` and AIPerf, which agree on them):

- TTFT: request sent to first content chunk received.
- TPOT: (end of stream - first token) / (output tokens - 1), per request (AIPerf calls it
  inter-token latency; LoadGen's TPOT is the same quotient).
- ITL: the gaps between consecutive content chunks, all requests pooled (vLLM's ITL).
- E2E: request sent to end of stream.
- Duration: first request sent to last one ended. Rates are completed requests and output
  tokens over the rate span: an open-loop step that kept its schedule divides by the schedule
  (n requests at r per second: n / r); one whose server fell behind by the completions' own span
  (n - 1 completions between the first and the last, never shorter than the schedule's); a step
  without a schedule by the duration; ``rate_span`` says which and why, ``kept_schedule`` whether
  the server kept up (:func:`rate_span`).
- Goodput (DistServe's, vLLM's ``--goodput``): requests that completed and met every SLO given
  (TTFT, TPOT, E2E), per second of the rate span, and their output tokens per second; SLO
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


# A server kept its schedule when its completions spread at most this share more than the arrivals
# (beside its requests' own time): timer wake-ups and the client's send jitter of a few percent
# leave a step that kept up its exact offered rate; a server more than a tenth short reads its own.
SCHEDULE_SLACK = 0.1


@dataclass(frozen=True)
class RateSpan:
    """What a step's rates divide by (``span_s``), why (``why``), and the spreads that decided it."""

    span_s: float
    why: str
    kept_schedule: bool | None  # None: the step had no schedule, or too few completions to judge
    arrival_spread_s: float | None = None  # the drawn schedule, first to last
    completion_spread_s: float | None = None  # the completed requests' ends, first to last
    allowance_s: float | None = None  # the requests' own time the completions may add (TTFT p10 + stream p90)


def rate_span(results: list[RequestResult], scheduled_span_s: float | None, duration_s: float) -> RateSpan:
    """The span a step's rates divide by.

    Without a schedule (a concurrency step, a cross-check's own figures): the duration, first
    request sent to last one ended.

    With one (an open-loop step of n requests drawn at r per second: ``scheduled_span_s`` = n / r),
    the schedule's span where the server kept up, so that such a step reads r exactly (first sent
    to last ended would read n / (n - 1) r); where the server fell behind, the completions' own
    rate: n - 1 completions between the first completed request's end and the last's (a span of
    that spread x n / (n - 1) for the n completed), never shorter than the schedule's, so never
    above the offered rate. The server kept up when

        completion spread <= arrival spread x (1 + SCHEDULE_SLACK) + TTFT p10 + stream p90

    the arrival spread being the drawn schedule's first to last (``scheduled_ns``, Poisson or
    even), the completion spread the completed requests' ends first to last, a request's stream
    its first token to its end. Why that allowance: a server that keeps up ends each request its
    own time after it arrived, so its completions spread more than the arrivals by the
    difference of two requests' times, at most one request's time without waiting: its time to
    first token unqueued (TTFT p10) and a long stream (stream p90). Waiting is what grows when a
    server falls behind, and it shows in TTFT, so only TTFT's low percentile is allowed: with a
    backlog growing through the step it rises by a tenth of the excess spread, and a server
    that fell behind passes only within about 11% of the offered rate plus one request's time.
    E2E's own spread (p90 - p10) would not do: it grows with the backlog, and a server at two
    thirds of the offered rate would pass. ``why`` blames the client where the sends themselves
    spread past the arrivals by more than half the completions' excess (it sent late), else the
    server."""
    import numpy as np

    if not scheduled_span_s or not results:
        return RateSpan(duration_s, "duration: first request sent to last one ended", None)
    schedule = "schedule: requests / offered rate"
    ok = [r for r in results if r.ok]
    if len(ok) < 2:
        return RateSpan(
            scheduled_span_s, f"{schedule} ({len(ok)} request(s) completed: no completions' spread to judge by)", None
        )
    due = [r.scheduled_ns for r in results]
    ends = [r.done_ns for r in ok]
    arrivals_s = (max(due) - min(due)) * 1e-9
    completions_s = (max(ends) - min(ends)) * 1e-9
    first = [r.first_ns or r.done_ns for r in ok]  # an answer without content streams nothing after it
    ttft_p10 = float(np.percentile([(f - r.sent_ns) * 1e-9 for f, r in zip(first, ok, strict=True)], 10))
    stream_p90 = float(np.percentile([(r.done_ns - f) * 1e-9 for f, r in zip(first, ok, strict=True)], 90))
    allowance_s = max(ttft_p10, 0.0) + max(stream_p90, 0.0)
    spreads = f"completions spread {completions_s:.3g} s against the arrivals' {arrivals_s:.3g} s"
    figures = {"arrival_spread_s": arrivals_s, "completion_spread_s": completions_s, "allowance_s": allowance_s}
    if completions_s <= arrivals_s * (1 + SCHEDULE_SLACK) + allowance_s:
        return RateSpan(scheduled_span_s, f"{schedule} (the server kept up: {spreads})", True, **figures)
    own = completions_s * len(ok) / (len(ok) - 1)
    sent = [r.sent_ns for r in results if r.sent_ns]
    sends_s = (max(sent) - min(sent)) * 1e-9 if sent else 0.0
    behind = f"{spreads}, beside {allowance_s:.3g} s of the requests' own time"
    if sends_s - arrivals_s > (completions_s - arrivals_s) / 2:  # most of the excess is the requests leaving late
        who = f"the client fell behind its schedule (sends spread {sends_s:.3g} s; {behind})"
    else:
        who = f"the server fell behind its schedule ({behind})"
    why = f"completions: {who}; {len(ok) - 1} completions over their spread"
    return RateSpan(max(own, scheduled_span_s), why, False, **figures)


def summarize(results: list[RequestResult], slo: SLO, scheduled_span_s: float | None = None) -> dict:
    """The figures of one measured load step (JSON-ready; times in ms).

    Rates divide by ``rate_span_s`` (:func:`rate_span`): the schedule's span where the step had
    one (``scheduled_span_s``, n / r) and the server kept up, the completions' own span where it
    fell behind (``kept_schedule`` false), else the duration, first request sent to last one
    ended; ``rate_span`` says which and why."""
    ok = [r for r in results if r.ok]
    if results:
        start = min(r.sent_ns for r in results if r.sent_ns) if any(r.sent_ns for r in results) else 0
        end = max((r.done_ns for r in results), default=start)
        duration_s = max((end - start) * 1e-9, 1e-9)
    else:
        duration_s = 0.0
    spanned = rate_span(results, scheduled_span_s, duration_s)
    span_s = spanned.span_s
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
        "rate_span": spanned.why,
        "kept_schedule": spanned.kept_schedule,
        "arrival_spread_s": spanned.arrival_spread_s,
        "completion_spread_s": spanned.completion_spread_s,
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
