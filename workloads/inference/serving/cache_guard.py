"""The cache-state guard of ``inference.serving``: a step whose prefix-cache state departs from
its traffic's design is flagged with the reason and never ranked, because a warm prefix cache
moves TTFT and throughput by multiples (a step that served its prompts from the cache cannot be
compared with one that computed them).

What each design implies (:func:`design`):

- **cold** (single-turn synthetic prompts; a trace without Mooncake ``hash_ids``): prompts
  share no prefix, so the engine's prefix cache should serve none of them. A never-seen prompt
  may still hit a little (a chat template's shared opening): a *probe* prompt of the step's
  length, never sent before, is sent once before the step; its ``cached_tokens`` share is the
  floor. The step is flagged when its hit rate passes the floor by more than
  ``COLD_MAX_EXTRA_HIT_RATE``: it met a warm cache. Every single-turn step draws prompts of its
  own (``serving.prompts.step_prompts``), never the warm-up's or another step's, so within a run
  none repeats; an earlier run of the same ``prompt_seed`` against the same engine sent the same
  prompts, and such a step is flagged.
- **shared prefix** (N prefixes x M suffixes): a cache that keeps every prefix serves
  ``(M-1)P / (M(P+S))`` of the prompt tokens; a step below ``SHARED_MIN_SHARE`` of that met a
  cache that is off or too small, and is flagged.
- multi-turn sessions and traces with ``hash_ids`` are warm by design by an amount that depends
  on the engine's cache size and eviction: their hit rate is recorded, not judged.

The step's hit rate comes from ``usage.prompt_tokens_details.cached_tokens`` where the engine
streams it, else from its scraped prefix-cache counters (hits / queries over the step), else the
probe decides: after the step the probe prompt is sent ``PROBE_PAIRS`` times more, each time
beside a prompt of its length that the engine never saw, the two in turn first (and all after one
more that warms the connection); every repeat's first token coming in under ``PROBE_TTFT_RATIO``
of the fastest fresh prompt's time, and at least ``PROBE_MIN_SAVING_MS`` sooner, shows an engine
that keeps prompts in its cache (slow answers cannot pass for a hit unless every fresh prompt met
one, nor can the jitter of a first token a few milliseconds long); a cold step
that repeats prompts sent earlier then met a warm cache. With none of
these the cache state is "unknown" (recorded, not flagged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COLD_MAX_EXTRA_HIT_RATE = 0.10  # a cold step's hit rate may pass a never-seen prompt's by this much
SHARED_MIN_SHARE = 0.5  # a shared-prefix step below half the rate its design implies met a cold cache
PROBE_TTFT_RATIO = 0.5  # a probe's second TTFT under half its first: the engine served it from its cache
# ... and sooner by at least this: a short prompt's TTFT of a few ms moves by its own size with the host's
# scheduling (an 8-token probe on a CPU engine: 2.6 to 3.5 ms fresh, 3.0 to 12.7 ms repeated, idle host)
PROBE_MIN_SAVING_MS = 10.0
# fresh and repeated probes after the step: on a host crowded by other work (a test suite's workers
# beside a CPU engine) two fresh probes both met a stall of 10 ms or more while both repeats did not
PROBE_PAIRS = 4
PROBE_TIMEOUT_S = 5.0  # one probe request (one token), whole: an engine that cannot answer it gives no evidence


def design(traffic: dict) -> dict:
    """The cache state a step's traffic (its ``traffic`` record) implies."""
    shape = traffic.get("shape", "single_turn")
    if shape == "single_turn" or (shape == "trace" and not traffic.get("with_hash_ids")):
        return {"cache": "cold", "why": "distinct prompts sharing no prefix: the prefix cache should serve none"}
    if shape == "shared_prefix":
        expected = traffic["expected_hit_rate_if_every_prefix_stays_cached"]
        return {
            "cache": "shared_prefix",
            "expected_hit_rate": expected,
            "why": f"{traffic['prefixes']} prefixes x {traffic['suffixes_per_prefix']} suffixes: a cache that keeps "
            f"every prefix serves {expected:.0%} of the prompt tokens",
        }
    return {
        "cache": "not judged",
        "why": f"{shape} traffic is warm by design, by an amount the engine's cache size and eviction decide",
    }


@dataclass(frozen=True)
class Probe:
    """One probe prompt sent before the step and again after it; ``ttft_ms``: the fastest of the
    fresh prompts' after the step (sent beside the repeats) and the slowest of the repeats'."""

    ttft_ms: tuple[float | None, float | None]
    cached_tokens: tuple[int | None, int | None]
    prompt_tokens: int | None
    failed: str | None = None

    def describe(self) -> dict:
        return {
            "ttft_ms_fresh_fastest": self.ttft_ms[0],
            "ttft_ms_repeat_slowest": self.ttft_ms[1],
            "cached_tokens_before": self.cached_tokens[0],
            "cached_tokens_after": self.cached_tokens[1],
            "prompt_tokens": self.prompt_tokens,
            "failed": self.failed,
            "floor_hit_rate": self.floor,
            "engine_keeps_prompts": self.engine_keeps_prompts,
        }

    @property
    def floor(self) -> float:
        """The hit rate of a prompt the engine never saw (a chat template's shared opening)."""
        before = self.cached_tokens[0]
        return before / self.prompt_tokens if before is not None and self.prompt_tokens else 0.0

    @property
    def engine_keeps_prompts(self) -> bool | None:
        """Whether the engine served the probe's second send from its cache: by its cached
        tokens where it reports them, else by its TTFT (None: no evidence either way)."""
        if self.failed:
            return None
        before, after = self.cached_tokens
        if before is not None and after is not None:
            return after > before
        t0, t1 = self.ttft_ms
        if t0 and t1 is not None and t1 < PROBE_TTFT_RATIO * t0 and t0 - t1 >= PROBE_MIN_SAVING_MS:
            return True
        return None


def probe_prompt(words: int) -> str:
    """A prompt of ``words`` words that no run sent before: seeded at random, because a prompt
    seeded by the run (as the step's are) is the same in the next run against the same engine,
    which may still hold it."""
    import secrets

    from perfsuite.workloads.inference.serving.prompts import words_text

    return words_text(max(words, 1), secrets.randbits(63))


def send_probes(endpoint: Any, timeouts: Any, bodies: list[bytes], tokenizer: str | None) -> list:
    """Probe requests from this process, one after another on one connection, each within
    ``PROBE_TIMEOUT_S`` (or the run's shorter timeouts): their results."""
    from dataclasses import replace

    from perfsuite.workloads.inference.serving.load import Job, run_here

    bound = PROBE_TIMEOUT_S
    short = replace(
        timeouts, stall_s=min(timeouts.stall_s, bound), request_s=min(timeouts.request_s, bound),
        connect_s=min(timeouts.connect_s, bound),
    )  # fmt: skip
    job = Job(endpoint, short, dict(enumerate(bodies)), list(range(len(bodies))), None, 1, tokenizer)
    return sorted(run_here(job), key=lambda r: r.index)


def probe_order(pairs: int) -> list[tuple[str, int]]:
    """The probes sent after the step, in order: ``("warm", 0)``, then ``pairs`` pairs of a
    repeat of the probe and a fresh prompt (``("repeat", i)``, ``("fresh", i)``), the repeat first
    in even pairs and second in odd ones, so that nothing tied to a place in the sequence (the
    request after a given one) falls on one kind alone."""
    order = [("warm", 0)]
    for i in range(pairs):
        pair = [("repeat", i), ("fresh", i)]
        order += pair if i % 2 == 0 else pair[::-1]
    return order


def probe_from(before: Any, fresh: list, repeats: list) -> Probe:
    """The probe's results (``RequestResult``: its first send, the fresh prompts after the step,
    its repeats after the step) as evidence: the slowest repeat's TTFT is set against the fastest
    fresh prompt's, so that a hit needs every repeat quicker than every fresh prompt."""
    sends = (("before", before), *(("fresh", r) for r in fresh), *(("repeat", r) for r in repeats))
    failed = "; ".join(f"{when}: {r.reason}: {r.detail}" for when, r in sends if not r.ok)
    if failed:
        return Probe((None, None), (before.cached_tokens, None), before.prompt_tokens, failed)
    return Probe(
        (min(r.ttft_s for r in fresh) * 1e3, max(r.ttft_s for r in repeats) * 1e3),
        (before.cached_tokens, repeats[0].cached_tokens),
        before.prompt_tokens or repeats[0].prompt_tokens,
    )


def measured_hit_rate(prefix_cache: dict, engine: dict) -> tuple[float | None, str]:
    """The step's hit rate and where it came from: the stream's cached tokens, else the engine's
    scraped prefix-cache counters."""
    if prefix_cache.get("hit_rate") is not None:
        return prefix_cache["hit_rate"], "usage.prompt_tokens_details.cached_tokens"
    rate = (engine.get("summary") or {}).get("prefix_cache_hit_rate")
    if rate is not None:
        return rate, f"the engine's prefix-cache counters ({engine.get('family')}: hits / queries over the step)"
    return None, "not reported"


def judge(plan: dict, prefix_cache: dict, engine: dict, probe: Probe | None, repeated: int, requests: int) -> dict:
    """The step's cache state against its design: ``{design, hit_rate, source, probe, flagged,
    reason}``; ``repeated``: how many of its ``requests`` send a prompt sent earlier in the run."""
    rate, source = measured_hit_rate(prefix_cache, engine)
    out: dict[str, Any] = {"design": plan, "hit_rate": rate, "source": source, "flagged": False, "reason": None}
    if probe is not None:
        out["probe"] = probe.describe()
    if repeated:
        out["repeated_prompts"] = repeated
    kind = plan["cache"]
    if kind == "cold":
        floor = probe.floor if probe is not None else 0.0
        if rate is not None:
            if rate > floor + COLD_MAX_EXTRA_HIT_RATE:
                out["reason"] = (
                    f"a cold-cache design met a warm cache: {rate:.0%} of its prompt tokens came from the engine's "
                    f"prefix cache ({source}), more than a never-seen prompt's {floor:.0%} plus "
                    f"{COLD_MAX_EXTRA_HIT_RATE:.0%}" + _repeats(repeated, requests)
                )
            out["state"] = "warm" if out["reason"] else "cold"
        elif probe is not None and probe.engine_keeps_prompts and repeated:
            out["reason"] = (
                f"a cold-cache design met a warm cache: the engine kept the probe prompt in its cache (first token "
                f"{probe.ttft_ms[1]:.1f} ms on its repeats against {probe.ttft_ms[0]:.1f} ms for fresh prompts)"
                + _repeats(repeated, requests)
            )
            out["state"] = "warm"
        else:
            out["state"] = "unknown" if rate is None and not (probe and probe.engine_keeps_prompts) else "cold"
    elif kind == "shared_prefix":
        expected = plan["expected_hit_rate"]
        if rate is None:
            out["state"] = "unknown"
        elif rate < SHARED_MIN_SHARE * expected:
            out["reason"] = (
                f"a shared-prefix design met a cold cache: {rate:.0%} of its prompt tokens came from the engine's "
                f"prefix cache ({source}) where the design implies {expected:.0%}; under "
                f"{SHARED_MIN_SHARE:.0%} of it, the engine's prefix cache is off or too small for the prefixes"
            )
            out["state"] = "cold"
        else:
            out["state"] = "warm"
    else:
        out["state"] = "not judged"
    out["flagged"] = out["reason"] is not None
    if out["flagged"]:
        out["reason"] += "; the step is not ranked"
    return out


def _repeats(repeated: int, requests: int) -> str:
    if not repeated:
        # every step draws prompts of its own, so a run repeats none of its own: an earlier run of
        # the same prompt_seed against this engine sent them, or the engine caches what it never saw
        return (
            "; none of its prompts was sent earlier in this run: an earlier run with the same prompt_seed "
            "may have left them in the engine's cache (change prompt_seed, or restart the engine)"
        )
    return f"; {repeated} of its {requests} requests repeat prompts sent earlier in the run"


def apply(row: dict, state: dict) -> None:
    """Write the guard's verdict into a step row: a flagged step is INVALID (the reason beside
    the others) and never within the SLOs, so no sweep ranks it."""
    row["cache_state"] = state
    if state["flagged"]:
        row["invalid_reasons"] = [*row.get("invalid_reasons", []), state["reason"]]
        row["valid"] = False
        row["within_slo"] = False
