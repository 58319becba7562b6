"""What one step of ``inference.serving`` met on the engine's side, joined to the step's row: the
engine's ``/metrics`` scraped while the step ran (``serving.engine_metrics``) and the state of
its prefix cache against the traffic's design (``serving.cache_guard``).

The order keeps both out of the client's figures: the cache probe's first send goes before the
step (and before its energy window), the scraper is started and ready before the step's first
request and stopped after its last, and the probe's second send goes after the step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfsuite.workloads.inference.serving import cache_guard, engine_metrics


class StepWatch:
    def __init__(
        self,
        endpoint: Any,
        timeouts: Any,
        tokenizer: str | None,
        metrics: dict,
        interval_s: float,
        api_key_env: str,
        guard: bool,
        traffic: dict,
        step: int,
        probe_words: int,
        folder: Path,
    ) -> None:
        self.endpoint, self.timeouts, self.tokenizer = endpoint, timeouts, tokenizer
        self.metrics, self.interval_s, self.api_key_env = metrics, interval_s, api_key_env
        self.guard, self.traffic, self.step = guard, traffic, step
        self.plan = cache_guard.design(traffic)
        self.folder = folder
        self.scrape: engine_metrics.StepScrape | None = None
        self.probe_bodies: list[bytes] = []
        self.before: Any = None
        self.probe_words = probe_words

    def start(self, send: Callable[[], list]) -> Callable[[], list]:
        """Send the cache probe (a cold design's), and return ``send`` wrapped in the engine's
        scrape (where its metrics are available)."""
        if self.guard and self.plan["cache"] == "cold":
            self.probe_bodies = [
                self.endpoint.body(cache_guard.probe_prompt(self.probe_words), 1)
                for _ in range(2 + cache_guard.PROBE_PAIRS)
            ]  # the probe, a warm-up, then a fresh prompt for each pair
            (self.before,) = cache_guard.send_probes(
                self.endpoint, self.timeouts, self.probe_bodies[:1], self.tokenizer
            )
        if not self.metrics.get("available"):
            return send
        self.folder.mkdir(parents=True, exist_ok=True)
        self.scrape = engine_metrics.StepScrape(
            self.metrics["url"], self.interval_s, self.folder / f"step-{self.step}.metrics.jsonl", self.api_key_env
        )

        def scraped() -> list:
            assert self.scrape is not None
            with self.scrape:
                return send()

        return scraped

    def finish(
        self, row: dict, results: list, sent_before: set[str] | None, keys: Mapping[int, str] | None = None
    ) -> None:
        """Join the engine's figures and the cache state to ``row`` (flagging it where the cache
        departs from the design); ``sent_before``: the digests of the prompts sent earlier in the
        run (single-turn), updated with this step's, whose digests ``keys`` gives by request index."""
        if self.scrape is not None:
            row["engine_metrics"] = self.scrape.summary()
            path = self.scrape.out
            if path.exists() and row.get("requests_file"):
                final = path.with_name(Path(row["requests_file"]).stem + ".metrics.jsonl")
                path.replace(final)
                row["engine_metrics"]["scrapes_file"] = f"{path.parent.name}/{final.name}"
        else:
            row["engine_metrics"] = engine_metrics.not_available(self.metrics.get("reason", "not scraped"))
        if not self.guard:
            row["cache_state"] = {"state": "not checked (cache_guard off)", "flagged": False}
            return
        probe = None
        if self.before is not None and not self.before.ok:  # no answer before the step: no evidence after it
            probe = cache_guard.probe_from(self.before, [], [])
        elif self.before is not None:  # a fresh prompt warms the connection, then pairs of the repeat and a fresh one
            repeat, warm, *fresh = self.probe_bodies
            order = cache_guard.probe_order(len(fresh))
            bodies = [{"warm": warm, "repeat": repeat}.get(kind) or fresh[i] for kind, i in order]
            sent = cache_guard.send_probes(self.endpoint, self.timeouts, bodies, self.tokenizer)
            kinds = [kind for kind, _ in order]
            probe = cache_guard.probe_from(
                self.before,
                [r for r, k in zip(sent, kinds) if k == "fresh"],
                [r for r, k in zip(sent, kinds) if k == "repeat"],
            )
        repeated = 0
        if sent_before is not None and keys is not None:
            seen = set(sent_before)
            for r in sorted(results, key=lambda r: r.sent_ns):
                repeated += keys[r.index] in seen
                seen.add(keys[r.index])
            sent_before |= seen
        state = cache_guard.judge(
            self.plan, row.get("prefix_cache") or {}, row["engine_metrics"], probe, repeated, len(results)
        )
        cache_guard.apply(row, state)
