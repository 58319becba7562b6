"""The engine's own view of each step: its Prometheus ``/metrics`` scraped at a stated interval
while the step runs, and reduced to the figures that explain the client's (queueing or
decoding, the KV cache full or not, how much of the prompts the prefix cache served).

Only metrics this module knows are kept, under the engine's own names (:data:`KNOWN`): vLLM's
``vllm:``, SGLang's ``sglang:`` and llama.cpp's ``llamacpp:``; an engine whose ``/metrics``
holds none of them is "no known metrics", and unknown names are never recorded. Per step:

- the engine's TTFT and queue-time histograms: p50/p99 from the bucket counts the step added
  (last scrape minus first, interpolated within a bucket as Prometheus' ``histogram_quantile``
  does, so a figure is as coarse as the engine's buckets), and their count;
- running and waiting requests and KV-cache usage: mean and max over the scrapes;
- preemptions, prefix-cache hits and queries: what the step added (hits / queries: the
  engine's hit rate).

Why a process of its own: the client sends from this process's event loop, and a scrape's
parse (tens of KiB of text for vLLM) would hold the interpreter that loop runs in, a delay the
client's TTFT would show; in a process of its own (started and ready before the step's first
request) it costs the client nothing but a share of a core once per interval, which
``bench/serving_metrics_overhead.py`` measures. Every scrape (its time on the client's
monotonic clock, its duration, the known values or the error) is written to a JSONL file beside
the step's requests. Every wait is bounded: a scrape by ``SCRAPE_TIMEOUT_S`` and
``MAX_METRICS_BYTES``, the scraper's start by ``READY_TIMEOUT_S``, its end by its last scrape.

    python -m perfsuite.workloads.inference.serving.engine_metrics --url URL --interval-s S --out FILE
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCRAPE_TIMEOUT_S = 5.0  # one GET of /metrics, connect to last byte (the run's grace counts it once: the probe)
MAX_METRICS_BYTES = 16 * 1024 * 1024  # vLLM's whole /metrics is some tens of KiB
READY_TIMEOUT_S = 20.0 + SCRAPE_TIMEOUT_S  # the scraper starts (imports, on a busy machine) and scrapes once
QUANTILES = (0.5, 0.99)

# role -> (kind, names in order of preference); a counter's names are its samples' (``_total``).
KNOWN: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "vllm": {
        "running": ("gauge", ("vllm:num_requests_running",)),
        "waiting": ("gauge", ("vllm:num_requests_waiting",)),
        "kv_cache_usage": ("fraction", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
        "preemptions": ("counter", ("vllm:num_preemptions_total",)),
        "prefix_cache_hits": ("counter", ("vllm:prefix_cache_hits_total",)),
        "prefix_cache_queries": ("counter", ("vllm:prefix_cache_queries_total",)),
        "ttft": ("histogram", ("vllm:time_to_first_token_seconds",)),
        "queue_time": ("histogram", ("vllm:request_queue_time_seconds",)),
    },
    "sglang": {
        "running": ("gauge", ("sglang:num_running_reqs",)),
        "waiting": ("gauge", ("sglang:num_queue_reqs",)),
        "kv_cache_usage": ("fraction", ("sglang:token_usage",)),
        "preemptions": ("counter", ("sglang:num_retracted_requests_total",)),
        "prefix_cache_hits": ("counter", ("sglang:cached_tokens_total",)),
        "prefix_cache_queries": ("counter", ("sglang:prompt_tokens_total",)),
        "ttft": ("histogram", ("sglang:time_to_first_token_seconds",)),
        "queue_time": ("histogram", ("sglang:queue_time_seconds",)),
    },
    "llamacpp": {
        "running": ("gauge", ("llamacpp:requests_processing",)),
        "waiting": ("gauge", ("llamacpp:requests_deferred",)),
        "kv_cache_usage": ("fraction", ("llamacpp:kv_cache_usage_ratio",)),
    },
}
ROLES = (
    "ttft",
    "queue_time",
    "running",
    "waiting",
    "kv_cache_usage",
    "preemptions",
    "prefix_cache_hits",
    "prefix_cache_queries",
)


class ScrapeError(RuntimeError):
    """A scrape that gave no figures (one line: the URL and why)."""


def fetch(url: str, headers: dict[str, str], timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    """The text of one GET of ``url``, whole within ``timeout_s`` (connecting, every read, the
    end: a server trickling its answer meets it too) and ``MAX_METRICS_BYTES``
    (``serving.http.get``, the bounded GET of the server's other probes)."""
    from perfsuite.workloads.inference.serving.http import get

    try:
        outcome, data = get(url, timeout_s, tuple(headers.items()), max_body=MAX_METRICS_BYTES + 1)
    except ValueError as exc:
        raise ScrapeError(f"GET {url}: {exc}") from None
    if outcome.failure is not None:
        reason, detail = outcome.failure
        raise ScrapeError(f"GET {url} failed: {reason}: {detail}"[:300])
    if outcome.status != 200:
        raise ScrapeError(f"GET {url} answered HTTP {outcome.status}")
    if len(data) > MAX_METRICS_BYTES:
        raise ScrapeError(f"GET {url} answered more than {MAX_METRICS_BYTES:,} bytes")
    return data.decode("utf-8", "replace")


def reduce(text: str) -> dict:
    """The known metrics of one ``/metrics`` text: ``{"family", "values": {name: number or
    {"buckets": {le: count}, "count"}}}``; label sets are summed (a fraction: averaged), so an
    engine that labels by model or by data-parallel rank reads as one. Raises
    :class:`ScrapeError` for text that is not Prometheus' format."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted: dict[str, tuple[str, str]] = {}  # sample name -> (kind, metric name)
    for family in KNOWN.values():
        for kind, names in family.values():
            for name in names:
                if kind == "histogram":
                    wanted[name + "_bucket"] = (kind, name)
                    wanted[name + "_count"] = (kind, name)
                else:
                    wanted[name] = (kind, name)
    values: dict[str, Any] = {}
    seen: dict[str, int] = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                hit = wanted.get(s.name)
                if hit is None or not math.isfinite(s.value):
                    continue
                kind, name = hit
                if kind == "histogram":
                    h = values.setdefault(name, {"buckets": {}, "count": 0.0})
                    if s.name.endswith("_count"):
                        h["count"] += s.value
                    else:
                        le = s.labels.get("le", "+Inf")
                        h["buckets"][le] = h["buckets"].get(le, 0.0) + s.value
                else:
                    values[name] = values.get(name, 0.0) + s.value
                    seen[name] = seen.get(name, 0) + 1
    except ValueError as exc:
        raise ScrapeError(f"not Prometheus text: {str(exc)[:160]}") from None
    for name, n in seen.items():  # a fraction per label set (one per engine): their mean
        if n > 1 and _kind(name) == "fraction":
            values[name] /= n
    present = {f: sum(n in values for _, names in roles.values() for n in names) for f, roles in KNOWN.items()}
    best = max(present, key=lambda f: present[f])
    if not present[best]:
        return {"family": None, "values": {}}
    return {"family": best, "values": values}


def _kind(name: str) -> str:
    for family in KNOWN.values():
        for kind, names in family.values():
            if name in names:
                return kind
    return "unknown"


def scrape_once(url: str, headers: dict[str, str]) -> dict:
    """One scrape as a JSON-ready row: its time on the shared monotonic clock, how long it took,
    and the reduced values or the error."""
    t0 = time.perf_counter_ns()
    try:
        out: dict[str, Any] = reduce(fetch(url, headers))
    except ScrapeError as exc:
        out = {"error": str(exc)}
    # the scraping process's CPU seconds so far: what the scrape costs the machine the client shares
    return {"t_ns": t0, "scrape_ms": (time.perf_counter_ns() - t0) * 1e-6, "cpu_s": time.process_time(), **out}


def probe(base_url: str, path: str, headers: dict[str, str]) -> dict:
    """Whether the endpoint has engine metrics to scrape (``metrics_path`` 'none': not asked).
    Never raises: a server without ``/metrics`` is recorded as not available."""
    if path == "none":
        return {"available": False, "reason": "not scraped (metrics_path=none)"}
    import importlib.util

    if importlib.util.find_spec("prometheus_client") is None:
        return {"available": False, "reason": "prometheus_client is not installed (pip install 'perfsuite[serving]')"}
    url = base_url.rstrip("/") + path
    row = scrape_once(url, headers)
    if "error" in row:
        return {"available": False, "url": url, "reason": row["error"]}
    if row["family"] is None:
        return {"available": False, "url": url, "reason": f"{url} holds none of the engine metrics known here"}
    names = sorted(row["values"])
    return {"available": True, "url": url, "family": row["family"], "metrics": names, "scrape_ms": row["scrape_ms"]}


# -- the scraper process and the step's summary --------------------------------------------


class StepScrape:
    """Scrapes ``url`` every ``interval_s`` from a process of its own while the ``with`` block
    runs: once before the block (the step's baseline), at every interval, and once after it.
    ``summary()`` is the step's record of the engine's view."""

    def __init__(self, url: str, interval_s: float, out: Path, api_key_env: str = "") -> None:
        self.url, self.interval_s, self.out, self.api_key_env = url, interval_s, out, api_key_env
        self.proc: subprocess.Popen | None = None
        self.failure: str | None = None

    def __enter__(self) -> "StepScrape":
        argv = [sys.executable, "-m", __name__, "--url", self.url, "--interval-s", repr(self.interval_s)]
        argv += ["--out", str(self.out)]
        if self.api_key_env:
            argv += ["--api-key-env", self.api_key_env]
        self.out.unlink(missing_ok=True)
        # its stderr to a file: a pipe nobody reads during a long step could fill and stop it
        with open(self._stderr, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        line = _read_line(self.proc, READY_TIMEOUT_S)
        if line != "ready":
            self._stop()  # where it exited, says how
            why = f"; {self.failure}" if self.failure else ""
            self.failure = f"the scraper did not start: {line or 'it said nothing'}{why}"
        return self

    @property
    def _stderr(self) -> Path:
        return self.out.with_name(self.out.name + ".stderr")

    def _stderr_tail(self) -> str:
        """The scraper's last line of stderr (``: LINE``), its file removed; '' if it wrote none."""
        try:
            lines = self._stderr.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        self._stderr.unlink()
        return f": {lines[-1][:200]}" if lines else ""

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:  # its stdin closed: one last scrape, then it exits
            proc.communicate(timeout=SCRAPE_TIMEOUT_S + 5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.failure = self.failure or "the scraper did not end within its last scrape's timeout (killed)"
        tail = self._stderr_tail()
        if proc.returncode and not self.failure:
            self.failure = f"the scraper exited with code {proc.returncode}{tail}"

    def rows(self) -> list[dict]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def summary(self, interval_s: float | None = None) -> dict:
        return summarize(self.rows(), interval_s or self.interval_s, self.failure)


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    """The child's first line of stdout, waited for at most ``timeout_s`` (by poll: the client's
    connections may hold descriptors past the 1,024 that select takes)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    data = b""
    deadline = time.monotonic() + timeout_s
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"the scraper was not ready within {timeout_s:g} s"
        if poller.poll(left * 1e3):
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8", "replace").split("\n", 1)[0].strip()


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """``histogram_quantile`` of Prometheus over cumulative ``buckets`` (upper bound -> count):
    linear within the bucket the rank falls in; in the +Inf bucket, the highest finite bound."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for b in bounds:
        count = buckets[b]
        if count >= rank:
            if math.isinf(b):
                return lower
            if count == below:
                return b
            return lower + (b - lower) * (rank - below) / (count - below)
        lower, below = b, count
    return lower


def _histogram(first: dict, last: dict) -> dict:
    """A histogram's step: the counts the step added, their p50/p99 in ms (None if none)."""
    deltas: dict[float, float] = {}
    for le, count in last.get("buckets", {}).items():
        deltas[float(le)] = count - first.get("buckets", {}).get(le, 0.0)
    n = last.get("count", 0.0) - first.get("count", 0.0)
    if any(v < 0 for v in deltas.values()) or n < 0:
        return {"count": None, "note": "the counts went back during the step (did the engine restart?)"}
    out: dict[str, Any] = {"count": n}
    for q in QUANTILES:
        v = quantile(q, deltas)
        out[f"p{round(q * 100)}_ms"] = None if v is None else v * 1e3
    finite = sorted(b for b in deltas if not math.isinf(b))
    if finite and deltas.get(math.inf, 0.0) > deltas[finite[-1]]:
        out["above_top_bucket"] = deltas[math.inf] - deltas[finite[-1]]
    return out


def summarize(rows: list[dict], interval_s: float, failure: str | None = None) -> dict:
    """One step's engine figures from its scrapes (``rows`` in time order), under the engine's
    metric names, with a flat ``summary`` by role for tables."""
    good = [r for r in rows if "values" in r and r.get("family")]
    errors = [r["error"] for r in rows if "error" in r]
    out: dict[str, Any] = {
        "available": bool(good),
        "interval_s": interval_s,
        "scrapes": len(rows),
        "failed_scrapes": len(errors),
    }
    if errors:
        out["errors"] = errors[:3]
    if failure:
        out["scraper"] = failure
    if not good:
        out["reason"] = failure or (errors[0] if errors else "no scrape answered")
        return out
    family = good[-1]["family"]
    first, last = good[0]["values"], good[-1]["values"]
    out["family"] = family
    out["window_s"] = (good[-1]["t_ns"] - good[0]["t_ns"]) * 1e-9
    out["scrape_ms"] = {"mean": sum(r["scrape_ms"] for r in good) / len(good), "max": max(r["scrape_ms"] for r in good)}
    if len(rows) > 1 and "cpu_s" in rows[0]:  # the first scrape's CPU holds the scraper's start
        out["scraper_cpu_ms_per_scrape"] = (rows[-1]["cpu_s"] - rows[0]["cpu_s"]) * 1e3 / (len(rows) - 1)
    figures: dict[str, dict] = {}
    summary: dict[str, Any] = {}
    for role, (kind, names) in KNOWN[family].items():
        name = next((n for n in names if n in last), None)
        if name is None:
            continue
        if kind == "histogram":
            fig = _histogram(first.get(name, {}), last[name])
            summary.update({f"{role}_{k}": v for k, v in fig.items() if k.endswith("_ms")})
        elif kind == "counter":
            delta = last[name] - first.get(name, 0.0)
            fig = {"delta": delta} if delta >= 0 else {"delta": None, "note": "the counter went back (a restart?)"}
            summary[role] = fig["delta"]
        else:
            seen = [r["values"][name] for r in good if name in r["values"]]
            fig = {"mean": sum(seen) / len(seen), "max": max(seen), "samples": len(seen)}
            summary[f"{role}_mean"], summary[f"{role}_max"] = fig["mean"], fig["max"]
        figures[name] = {"role": role, **fig}
    hits, queries = summary.get("prefix_cache_hits"), summary.get("prefix_cache_queries")
    summary["prefix_cache_hit_rate"] = hits / queries if hits is not None and queries else None
    out["metrics"] = figures
    out["summary"] = summary
    return out


def not_available(reason: str) -> dict:
    """A step's record where nothing was scraped."""
    return {"available": False, "reason": reason}


# -- the scraper process --------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the metrics URL (base URL and metrics_path)")
    ap.add_argument("--interval-s", type=float, required=True)
    ap.add_argument("--out", required=True, help="JSONL file: one row a scrape")
    ap.add_argument("--api-key-env", default="", help="environment variable holding a bearer token")
    a = ap.parse_args(argv)
    if not (a.interval_s > 0 and math.isfinite(a.interval_s)):
        print("error: --interval-s must be a finite number above 0", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {os.environ[a.api_key_env]}"} if a.api_key_env else {}
    import prometheus_client.parser  # noqa: F401 - imported before the first scrape, which the step waits for

    with open(a.out, "a") as out:

        def scrape() -> None:
            out.write(json.dumps(scrape_once(a.url, headers)) + "\n")
            out.flush()

        scrape()
        print("ready", flush=True)
        stdin = sys.stdin.fileno()
        poller = select.poll()
        poller.register(stdin, select.POLLIN | select.POLLHUP)
        t0 = time.monotonic()
        k = 1
        while True:  # scrapes on a fixed grid (a slow scrape does not shift the next) until stdin closes
            wait = max(0.0, t0 + k * a.interval_s - time.monotonic())
            ready = poller.poll(wait * 1e3)
            if ready and not os.read(stdin, 4096):
                scrape()  # the step has ended: its last figures
                return 0
            if not ready:
                scrape()
                k = max(k + 1, math.ceil((time.monotonic() - t0) / a.interval_s))


if __name__ == "__main__":
    sys.exit(main())
