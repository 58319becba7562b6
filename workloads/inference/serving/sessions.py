"""Multi-turn sessions of ``inference.serving`` (``turns``, ``think_time_s``): chat sessions whose
history grows turn by turn, as an engine's users send them.

A session has ``turns`` turns. Turn k sends the session's whole history, every earlier turn's
user message and the engine's answer to it, followed by a new user message of ``input_tokens``
words (completions API: one prompt, the history's texts in order; chat API: the messages with
their roles), asking for ``output_tokens``; the session waits ``think_time_s`` after an answer
before its next turn. A turn that fails ends its session (its history would be a lie). A step
runs ``sessions`` sessions, ``concurrency`` of them at a time (a closed loop over sessions: a
slot starts its next session when its last one ends), from one event loop.

Recorded per turn (TTFT, E2E, prompt tokens, prefix-cache hit rate of every session's k-th turn)
and per session (its turns, its wall time from first send to last answer, think time included).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import orjson

from perfsuite.workloads.inference.serving.client import Endpoint, RequestResult, Timeouts, stream_request
from perfsuite.workloads.inference.serving.load import Sender, token_counter
from perfsuite.workloads.inference.serving.prompts import words_text
from perfsuite.workloads.inference.serving.traffic import hit_rate


@dataclass(frozen=True)
class Conversation:
    sessions: int
    turns: int
    think_time_s: float
    message_tokens: int  # words of each new user message
    output_tokens: int  # max_tokens of each turn

    def describe(self, concurrency: int) -> dict:
        return {
            "shape": "multi_turn",
            "sessions": self.sessions,
            "turns": self.turns,
            "think_time_s": self.think_time_s,
            "message_tokens": self.message_tokens,
            "output_tokens": self.output_tokens,
            "sessions_in_flight": concurrency,
            "history": "turn k sends turns 1..k-1's messages and answers, then a new message",
        }


@dataclass
class Turn:
    session: int
    turn: int  # from 0
    prompt: str  # the whole prompt sent (completions) or the messages' texts joined (chat)
    result: RequestResult


def turn_body(endpoint: Endpoint, history: list[tuple[str, str]], message: str, max_tokens: int) -> tuple[bytes, str]:
    """The request of a turn after ``history`` ((message, answer) pairs), and its prompt's text."""
    if endpoint.api == "chat":
        messages: list[dict[str, str]] = []
        for said, answer in history:
            messages += [{"role": "user", "content": said}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": message})
        return orjson.dumps(endpoint.fields("", max_tokens, messages)), "\n".join(m["content"] for m in messages)
    prompt = "".join(said + "\n" + answer + "\n" for said, answer in history) + message
    return endpoint.body(prompt, max_tokens), prompt


async def _run(
    conv: Conversation,
    concurrency: int,
    endpoint: Endpoint,
    timeouts: Timeouts,
    seed: int,
    sender: Sender,
    count: Callable[[str], int] | None,
) -> list[Turn]:
    turns: list[Turn] = []
    todo = iter(range(conv.sessions))

    async def one(s: int) -> None:
        history: list[tuple[str, str]] = []
        for k in range(conv.turns):
            message = words_text(conv.message_tokens, (seed * 1_000_003 + s) * 1_000 + k, first=s)
            body, prompt = turn_body(endpoint, history, message, conv.output_tokens)
            index = s * conv.turns + k
            r = await stream_request(
                sender.session, endpoint, body, RequestResult(index, perf_counter_ns()), timeouts, count_tokens=count
            )
            turns.append(Turn(s, k, prompt, r))
            if not r.ok:
                return
            history.append((message, r.text))
            if k + 1 < conv.turns and conv.think_time_s > 0:
                await asyncio.sleep(conv.think_time_s)

    async def slot() -> None:
        for s in todo:  # one iterator shared by every slot: each session runs once
            await one(s)

    await asyncio.gather(*(slot() for _ in range(max(1, min(concurrency, conv.sessions)))))
    return turns


def run_sessions(
    conv: Conversation, concurrency: int, endpoint: Endpoint, timeouts: Timeouts, seed: int, tokenizer: str | None
) -> list[Turn]:
    """Every session of ``conv``, ``concurrency`` at a time, from one event loop of its own."""
    with Sender() as sender:
        return sender.loop.run_until_complete(
            _run(conv, concurrency, endpoint, timeouts, seed, sender, token_counter(tokenizer))
        )


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    import numpy as np

    return float(np.percentile(values, q))


def summarize_turns(conv: Conversation, turns: list[Turn]) -> dict:
    """Per-turn and per-session figures of a step (JSON-ready)."""
    per_turn = []
    for k in range(conv.turns):
        rows = [t.result for t in turns if t.turn == k]
        ok = [r for r in rows if r.ok]
        prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        per_turn.append(
            {
                "turn": k + 1,
                "sent": len(rows),
                "completed": len(ok),
                "ttft_p50_ms": _pct([r.ttft_s * 1e3 for r in ok], 50),
                "ttft_p99_ms": _pct([r.ttft_s * 1e3 for r in ok], 99),
                "e2e_p50_ms": _pct([r.e2e_s * 1e3 for r in ok], 50),
                "e2e_p99_ms": _pct([r.e2e_s * 1e3 for r in ok], 99),
                "prompt_tokens_mean": sum(prompts) / len(prompts) if prompts else None,
                "prompt_words_mean": sum(len(t.prompt.split()) for t in turns if t.turn == k) / len(rows)
                if rows
                else None,
                "prefix_cache": hit_rate(rows),
            }
        )
    per_session: list[dict[str, Any]] = []
    for s in range(conv.sessions):
        rows = sorted((t for t in turns if t.session == s), key=lambda t: t.turn)
        if not rows:
            continue
        per_session.append(
            {
                "session": s,
                "turns_completed": sum(t.result.ok for t in rows),
                "complete": len(rows) == conv.turns and all(t.result.ok for t in rows),
                "wall_ms": (rows[-1].result.done_ns - rows[0].result.sent_ns) * 1e-6,
                "e2e_ms": [round(t.result.e2e_s * 1e3, 3) for t in rows],
                "ttft_ms": [round(t.result.ttft_s * 1e3, 3) if t.result.first_ns else None for t in rows],
            }
        )
    walls = [s["wall_ms"] for s in per_session if s["complete"]]
    return {
        "per_turn": per_turn,
        "per_session": per_session,
        "sessions_complete": sum(s["complete"] for s in per_session),
        "session_wall_p50_ms": _pct(walls, 50),
        "session_wall_p99_ms": _pct(walls, 99),
    }
