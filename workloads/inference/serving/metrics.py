"""What a set of requests measured: latency percentiles, rates, SLO goodput, errors by reason.

Definitions (those of vLLM's ``bench serve`` and AIPerf, which agree on them):

- TTFT: request sent to first content chunk received.
- TPOT: (end of stream - first token) / (output tokens - 1), per request (AIPerf calls it
  inter-token latency; LoadGen's TPOT is the same quotient).
- ITL: the gaps between consecutive content chunks, all requests pooled (vLLM's ITL).
- E2E: request sent to end of stream.
- Duration: first request sent to last one ended. Rates are completed requests and output
  tokens over the rate span (:func:`rate_span`): an open-loop step is judged in its steady-state
  window, from its first request's end to its last scheduled arrival; where the server delivered
  what the schedule offered in that window it kept its schedule, and the rates divide by the
  schedule (n requests at r per second: n / r); where it delivered less, by its delivered rate
  (the step's output tokens over the tokens per second delivered in the window); where the
  window is too short (the step's arrivals last less than its requests) there is no steady
  state, and, as a step without a schedule, by the duration. ``rate_span`` says which and why,
  ``kept_schedule`` whether the server kept up, ``steady_state`` whether the step had one.
- Goodput (DistServe's, vLLM's ``--goodput``): requests that completed and met every SLO given
  (TTFT, TPOT, E2E), per second of the rate span, and their output tokens per second; SLO
  attainment: that count over every request sent (failed ones count against it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from perfsuite.serving_steady import STEADY_WINDOW_SHARE
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


# A server kept its schedule when it delivered, in the step's steady-state window, at least this
# share less than the schedule offered in it: timer wake-ups, the client's send jitter and the
# requests in flight at the window's two ends move a server that kept up by a few percent; one
# more than a tenth short reads its own delivered rate.
SCHEDULE_SLACK = 0.1


@dataclass(frozen=True)
class RateSpan:
    """What a step's rates divide by (``span_s``), why (``why``), and the figures that decided it."""

    span_s: float
    why: str
    kept_schedule: bool | None  # None: no schedule, or no steady state to judge it in
    arrival_spread_s: float | None = None  # the drawn schedule, first to last
    completion_spread_s: float | None = None  # the completed requests' ends, first to last
    steady_state: bool | None = None  # None: the step had no schedule (a concurrency step)
    window: dict | None = None  # the steady-state window: its span, start and what was delivered and offered in it


def _token_times(ok: list[RequestResult]) -> tuple[Any, Any]:
    """Each content chunk's time (ns) and the output tokens it carried (a request's count spread
    evenly over its chunks: an engine may send several tokens in one); an answer without chunks
    delivers its tokens at its end."""
    import numpy as np

    times: list[int] = []
    weights: list[float] = []
    for r in ok:
        chunks = r.chunk_ns or [r.done_ns]
        times += chunks
        weights += [r.output_tokens / len(chunks)] * len(chunks)
    return np.asarray(times, dtype=np.int64), np.asarray(weights, dtype=float)


def rate_span(results: list[RequestResult], scheduled_span_s: float | None, duration_s: float) -> RateSpan:
    """The span a step's rates divide by, from what the server delivered in the step's steady state.

    Without a schedule (a concurrency step, a cross-check's own figures): the duration, first
    request sent to last one ended.

    With one (an open-loop step of n requests drawn at r per second: ``scheduled_span_s`` = n / r),
    the steady-state window runs from the first request's end (until then requests only arrive:
    the in-flight population is still filling) to the last scheduled arrival (from then on it only
    drains). In it, the server delivered the output tokens whose chunks arrived in the window
    (start excluded, end included) and was offered those of the requests the schedule sent in it
    (start included, end excluded: the last arrival's tokens all come after the window; a failed
    request counts the completed ones' mean). Three readings:

    - the window covers less than ``STEADY_WINDOW_SHARE`` of the arrivals' spread (the step's
      arrivals last less than its requests): no steady state, and the rates read the duration,
      first sent to last ended (AIPerf's and GuideLLM's definition), which never reads above what
      was delivered; ``kept_schedule`` is None;
    - the server delivered at least ``1 - SCHEDULE_SLACK`` of what was offered in the window: it
      kept its schedule, and the rates read the schedule's span, n / r, so that a fixed-rate step
      reads r exactly (first sent to last ended would read n / (n - 1) r);
    - else it fell behind, and the rates read its delivered rate: the span is the step's output
      over the tokens per second delivered in the window (every rate of the step divides by it,
      so requests/s is the delivered tokens/s over the step's tokens per request), never shorter
      than the schedule's.

    Why not the completions' spread against the arrivals' (the rule this replaces): a
    continuous-batching engine admits every request at once and slows all of them (processor
    sharing), so its completions stay spread like the arrivals while every request's stream grows
    with the overload; a 5 s step offered 128 requests/s read 8,192 tokens/s where the server
    delivered 1,444. Counting what arrived in a window needs no allowance for the requests' own
    time. ``why`` blames the client where its sends in the window fell short of the schedule by
    more than half the delivery's shortfall (it sent late), else the server."""
    import numpy as np

    if not scheduled_span_s or not results:
        return RateSpan(duration_s, "duration: first request sent to last one ended", None)
    ok = [r for r in results if r.ok]
    duration = "duration: first request sent to last one ended"
    if len(ok) < 2:
        why = f"{duration} ({len(ok)} request(s) completed: too few to judge a schedule by)"
        return RateSpan(duration_s, why, None, steady_state=False)
    due = np.asarray([r.scheduled_ns for r in results], dtype=np.int64)
    ends = [r.done_ns for r in ok]
    arrivals_s = float(due.max() - due.min()) * 1e-9
    figures: dict[str, Any] = {
        "arrival_spread_s": arrivals_s,
        "completion_spread_s": (max(ends) - min(ends)) * 1e-9,
    }
    start, end = min(ends), int(due.max())
    sent = [r.sent_ns for r in results if r.sent_ns]
    window_s = (end - start) * 1e-9
    window = {"span_s": window_s, "first_end_s": (start - min(sent)) * 1e-9 if sent else None}
    e2e_p50 = float(np.percentile([r.e2e_s for r in ok], 50))
    if not window_s > 0 or window_s < arrivals_s * STEADY_WINDOW_SHARE:
        why = (
            f"{duration} (no steady state: arrivals {arrivals_s:.3g} s, requests' E2E p50 {e2e_p50:.3g} s; "
            f"the first request ended {window['first_end_s']:.3g} s after the first was sent, so the window from "
            f"there to the last arrival covers less than {STEADY_WINDOW_SHARE:.0%} of the arrivals)"
        )
        return RateSpan(duration_s, why, None, steady_state=False, window=window, **figures)
    tokens = sum(r.output_tokens for r in ok)
    in_window = (due >= start) & (due < end)
    if tokens:  # tokens, finely grained; requests where the answers carried none
        unit = "tokens"
        times, weights = _token_times(ok)
        delivered = float(weights[(times > start) & (times <= end)].sum())
        mean = tokens / len(ok)
        due_tokens = [r.output_tokens if r.ok else mean for r in results]  # a failed request: the mean
        offered = float(np.asarray(due_tokens)[in_window].sum())
    else:
        unit = "requests"
        delivered = float(sum(start < e <= end for e in ends))
        offered = float(in_window.sum())
    sent_in = sum(start <= s < end for s in sent)
    window.update(delivered_per_s=delivered / window_s, offered_per_s=offered / window_s, unit=unit)
    where = f"in the steady-state window, {window_s:.3g} s from the first request's end to the last arrival"
    rates = f"{delivered / window_s:.4g} {unit}/s delivered against {offered / window_s:.4g} offered {where}"
    if not offered:
        why = f"{duration} (no steady state: no request was due {where})"
        return RateSpan(duration_s, why, None, steady_state=False, window=window, **figures)
    if delivered >= offered * (1 - SCHEDULE_SLACK):
        why = f"schedule: requests / offered rate (the server kept up: {rates})"
        return RateSpan(scheduled_span_s, why, True, steady_state=True, window=window, **figures)
    due_in = int(in_window.sum())
    if due_in and (due_in - sent_in) / due_in > (1 - delivered / offered) / 2:  # most of the shortfall left late
        who = f"the client fell behind its schedule ({rates}; it sent {sent_in} of the {due_in} requests due)"
    else:
        who = f"the server fell behind its schedule ({rates})"
    total = tokens if unit == "tokens" else len(ok)
    own = total / (delivered / window_s) if delivered else duration_s
    why = f"delivered: {who}; the step's {total:g} {unit} over that rate"
    return RateSpan(max(own, scheduled_span_s), why, False, steady_state=True, window=window, **figures)


def summarize(results: list[RequestResult], slo: SLO, scheduled_span_s: float | None = None) -> dict:
    """The figures of one measured load step (JSON-ready; times in ms).

    Rates divide by ``rate_span_s`` (:func:`rate_span`): the schedule's span where the step had
    one (``scheduled_span_s``, n / r) and the server delivered it in the step's steady state, the
    span of its delivered rate where it fell behind (``kept_schedule`` false), else the duration,
    first request sent to last one ended; ``rate_span`` says which and why, ``steady_window`` what
    was delivered and offered in the window."""
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
        "steady_state": spanned.steady_state,
        "steady_window": spanned.window,
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
