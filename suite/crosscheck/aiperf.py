"""The serving cross-check: NVIDIA's AIPerf against the same endpoint as ``inference.serving``,
with the same prompts (AIPerf's single-turn JSONL: each prompt's text and output length), the
same load and the same request count, taking turns with the suite's own client as the other
cross-checks do (``perfsuite.crosscheck.take_turns``). A concurrency is passed as is. A request
rate is passed as the suite's own arrival times (each prompt's ``timestamp``), replayed with
AIPerf's ``--fixed-schedule`` and by the bare reference. Two clients drawing their own Poisson
arrivals do not send the same load: the span of 96 arrivals varies by some 10% (one standard
deviation), and output tokens per second follow the span: only the same schedule compares
the clients.

Each side's figures are medians over rounds: TTFT p50 and p99, inter-token latency p50
(AIPerf's definition: (end - first token) / (tokens - 1) per request, the suite's TPOT) and
output tokens per second. The ratios (suite / reference) are the
medians of each round's ratio: a round's two runs are adjacent in time, and a server's own speed
drifts between rounds more than two clients differ (``transformers serve`` on two busy cores:
41 to 224 output tokens/s between rounds of one run), so pairing within rounds cancels the drift
that a ratio of the two sides' medians keeps (both are recorded).

AIPerf is an optional extra with a heavy set of dependencies (``pip install
'perfsuite[aiperf]'``, best in a virtual environment of its own): it is found as
``$PERFSUITE_AIPERF`` or ``aiperf`` on the PATH. Where it is absent, or cannot run against this
endpoint (it needs a local tokenizer: no download is made), the reference is the bare asyncio
client in the repository (``perfsuite.crosscheck.serving_reference``, the standard library only), and the
record says which ran and why.

AIPerf counts tokens with the server's own counts (``--use-server-token-count``) only where the
server streams them (the serving run's warm-up saw usage in the stream); otherwise with the
tokenizer, since a server without counts leaves AIPerf with no tokens/s and no inter-token
latency. Each figure is compared only where both sides produced it; one the reference did not
produce is named (``not produced by aiperf``), never counted as a difference.

AIPerf 0.13 resolves a local tokenizer folder as a hub repository id when ``HF_HUB_OFFLINE`` is
set, so it runs with that variable removed from its environment; the tokenizer is a local folder
and nothing is downloaded (recorded as ``env_removed``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_AIPERF = "PERFSUITE_AIPERF"
TOOLS = ("aiperf", "bare asyncio reference")  # the reference of a serving cross-check, as its record names it
AGREEMENT = 0.10  # the bar: within 10% on TTFT p50 and output tokens/s
FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "output_tokens_per_s")
COMPARED = ("ttft_p50_ms", "output_tokens_per_s")  # the figures whose ratio decides "agrees"
START_SLACK_S = 120.0  # AIPerf starts a dozen services before its first request
TAIL_CHARS = 1500
WARMUP_REQUESTS = 4  # the fewest untimed requests a reference turn begins with (warmup_requests)


def write_prompts_file(path: Path, prompts: list[tuple[str, int]], offsets_s: list[float] | None) -> None:
    """The prompts both sides send, in AIPerf's single-turn JSONL: text and output length a line,
    and with ``offsets_s`` (a request-rate load) each request's send time in milliseconds."""
    lines = []
    for i, (text, output_length) in enumerate(prompts):
        row: dict[str, Any] = {"text": text, "output_length": output_length}
        if offsets_s is not None:
            row["timestamp"] = round(offsets_s[i] * 1e3, 3)
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines))


def aiperf_path() -> str | None:
    return os.environ.get(ENV_AIPERF) or shutil.which("aiperf")


def aiperf_unavailable(spec: dict) -> str | None:
    """Why AIPerf cannot be the reference for ``spec``, or None."""
    if aiperf_path() is None:
        return f"AIPerf is not installed (no ${ENV_AIPERF}, no aiperf on the PATH)"
    tok = spec.get("tokenizer")
    if not tok or not Path(tok).is_dir():
        return "AIPerf needs a local tokenizer folder (tokenizer=...; no download is made)"
    return None


def warmup_requests(spec: dict) -> int:
    """Untimed requests the reference sends before its timed ones: it starts cold each turn (a new
    process, new connections) where the suite's client pool has served before. On a CPU-served
    model a cold reference's first answers took 5-6 ms to a first token against about 3 ms for
    the rest. One a slot, and at least ``WARMUP_REQUESTS``."""
    return max(WARMUP_REQUESTS, spec.get("concurrency") or 1)


def aiperf_argv(spec: dict, out_dir: Path) -> list[str]:
    argv = [
        str(aiperf_path()),
        "profile",
        "--model",
        spec["model"],
        "--url",
        spec["base_url"],
        "--endpoint-type",
        "chat" if spec["api"] == "chat" else "completions",
        "--streaming",
        "--input-file",
        spec["prompts_file"],
        "--custom-dataset-type",
        "single_turn",
        "--dataset-sampling-strategy",
        "sequential",
        "--request-count",
        str(spec["requests"]),
        "--tokenizer",
        spec["tokenizer"],
        "--use-legacy-max-tokens",
        "--random-seed",
        str(spec["seed"]),
        "--warmup-request-count",
        str(warmup_requests(spec)),
        "--ui",
        "none",
        "--artifact-dir",
        str(out_dir),
        "--request-timeout-seconds",
        str(spec["timeout_s"]),
        "--extra-inputs",
        "temperature:0.0",
    ]
    if spec.get("server_token_counts") is True:  # only a server that streams usage has counts to give
        argv.append("--use-server-token-count")
    if spec.get("ignore_eos"):
        argv += ["--extra-inputs", "ignore_eos:true"]
    if spec.get("rate"):
        argv += ["--fixed-schedule"]  # the suite's arrival times, each prompt's timestamp
    else:
        argv += ["--concurrency", str(spec["concurrency"])]
    return argv


def parse_aiperf(out_dir: Path) -> dict:
    """The compared figures from AIPerf's ``profile_export_aiperf.json``."""
    path = out_dir / "profile_export_aiperf.json"
    data = json.loads(path.read_text())

    def stat(tag: str, key: str) -> float | None:
        entry = data.get(tag) or {}
        value = entry.get(key)
        return float(value) if value is not None else None

    return {
        "ttft_p50_ms": stat("time_to_first_token", "p50"),
        "ttft_p99_ms": stat("time_to_first_token", "p99"),
        "itl_p50_ms": stat("inter_token_latency", "p50"),
        "output_tokens_per_s": stat("output_token_throughput", "avg"),
        "completed": stat("request_count", "avg"),
        "failed": stat("error_request_count", "avg") or 0.0,
        "aiperf_version": data.get("aiperf_version"),
    }


def reference_argv(spec: dict, output: Path) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "perfsuite.crosscheck.serving_reference",
        "--url",
        spec["base_url"],
        "--model",
        spec["model"],
        "--api",
        spec["api"],
        "--input-file",
        spec["prompts_file"],
        "--request-count",
        str(spec["requests"]),
        "--seed",
        str(spec["seed"]),
        "--warmup-request-count",
        str(warmup_requests(spec)),
        "--timeout",
        str(spec["timeout_s"]),
        "--output",
        str(output),
    ]
    if spec.get("ignore_eos"):
        argv += ["--extra-body", json.dumps({"ignore_eos": True})]
    if spec.get("api_key_env"):
        argv += ["--api-key-env", spec["api_key_env"]]
    if spec.get("rate"):
        argv += ["--fixed-schedule"]
    else:
        argv += ["--concurrency", str(spec["concurrency"])]
    return argv


def _run(argv: list[str], env: dict, timeout_s: float, log: Path) -> None:
    with open(log, "w") as f:
        proc = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-TAIL_CHARS:]
        raise RuntimeError(f"{Path(argv[0]).name} exited with {proc.returncode}: {tail.strip()}")


def reference_once(tool: str, spec: dict, workdir: Path, k: int) -> dict:
    """One run of the reference tool; its figures."""
    timeout_s = spec["timeout_s"] + START_SLACK_S + (spec["requests"] + warmup_requests(spec)) * 2.0
    if tool == "aiperf":
        out = workdir / f"aiperf-{k}"
        env = {key: v for key, v in os.environ.items() if key != "HF_HUB_OFFLINE"}
        secret = ["--api-key", os.environ[spec["api_key_env"]]] if spec.get("api_key_env") else []  # never recorded
        _run(aiperf_argv(spec, out) + secret, env, timeout_s, workdir / f"aiperf-{k}.log")
        return parse_aiperf(out)
    output = workdir / f"reference-{k}.json"
    _run(reference_argv(spec, output), dict(os.environ), timeout_s, workdir / f"reference-{k}.log")
    return json.loads(output.read_text())


def versus_reference(
    suite_once: Callable[[], dict], spec: dict, n_rounds: int, take_turns: Callable[..., list[dict]]
) -> dict:
    """``n_rounds`` turns (``take_turns``: ``perfsuite.crosscheck.take_turns``, handed in by the
    package, which imports this module) of the suite's client (``suite_once``: one run, its
    figures) and the reference tool against the same endpoint; both sides' medians and ratios."""
    workdir = Path(spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    if "prompts" in spec:  # written here, for both sides
        path = workdir / "prompts.jsonl"
        write_prompts_file(path, spec["prompts"], spec.get("offsets_s"))
        spec = {k: v for k, v in spec.items() if k not in ("prompts", "offsets_s")} | {"prompts_file": str(path)}
    why = aiperf_unavailable(spec)
    tool = TOOLS[0] if why is None else TOOLS[1]
    out: dict[str, Any] = {
        "tool": tool,
        "load": {
            **{k: spec[k] for k in ("concurrency", "rate", "burstiness", "requests")},
            "schedule": "the suite's arrival times, replayed by both sides" if spec.get("rate") else "closed loop",
        },
        "prompts_file": Path(spec["prompts_file"]).name,
        "tolerance": AGREEMENT,
        "reference_warmup_requests": warmup_requests(spec),  # untimed, before each of the reference's turns
        # whether the server streamed usage token counts (the suite's warm-up saw): AIPerf is asked
        # to use the server's counts only then (--use-server-token-count), else counts with the tokenizer
        "server_token_counts": spec.get("server_token_counts"),
    }
    if why is not None:
        out["aiperf_not_used"] = why
    else:
        out["env_removed"] = ["HF_HUB_OFFLINE"]
        out["argv"] = aiperf_argv(spec, workdir / "aiperf-N")[1:]
    counter = iter(range(1, 1000))
    try:
        turns = take_turns(
            n_rounds, suite_once(), suite_once, lambda: reference_once(tool, spec, workdir, next(counter))
        )
    except (OSError, RuntimeError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        return {**out, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
    rounds = [{"order": t["order"], "suite": t["suite"], "reference": t["reference"]} for t in turns]
    mine = {f: _median([t["suite"].get(f) for t in turns]) for f in FIGURES}
    theirs = {f: _median([t["reference"].get(f) for t in turns]) for f in FIGURES}
    of_medians = {f: _ratio(mine[f], theirs[f]) for f in FIGURES}
    ratios = {f: _median([_ratio(t["suite"].get(f), t["reference"].get(f)) for t in turns]) for f in FIGURES}
    reference = "aiperf" if tool == TOOLS[0] else "the reference"
    verdict = compare(mine, theirs, ratios, reference)
    apart = counted_apart(turns, reference)
    if apart is not None:  # figures of different answers: shown, never a verdict of agreement
        verdict["verdicts"] = dict.fromkeys(verdict["verdicts"], f"not comparable: {apart}")
        verdict["agrees"] = False
        out["counted_apart"] = apart
    agrees = verdict["agrees"]
    version = next((t["reference"].get("aiperf_version") for t in turns if t["reference"].get("aiperf_version")), None)
    return {
        **out,
        "status": "measured",
        "tool_version": version,
        "rounds": rounds,
        "suite": mine,
        "reference": theirs,
        "ratios": ratios,
        "ratios_of_medians": of_medians,
        "agrees": agrees,
        "compared": verdict["compared"],
        "not_produced": verdict["not_produced"],
        "verdicts": verdict["verdicts"],
    }


def compare(mine: dict, theirs: dict, ratios: dict, reference: str) -> dict:
    """Each figure's verdict, compared only where both sides produced it: ``agrees`` (within
    ``AGREEMENT``), ``differs by more than 10%``, ``not produced by <reference>`` (AIPerf gives no
    tokens/s or inter-token latency where it was told to count tokens the server did not send),
    ``not produced by the suite``. The run agrees when every figure of :data:`COMPARED` that both
    produced agrees and at least one was compared; a figure the reference did not produce is
    named, never counted as a difference."""
    verdicts: dict[str, str] = {}
    for f in FIGURES:
        if theirs.get(f) is None:
            verdicts[f] = f"not produced by {reference}"
        elif mine.get(f) is None:
            verdicts[f] = "not produced by the suite"
        else:
            r = ratios.get(f)
            ok = r is not None and abs(r - 1.0) <= AGREEMENT
            verdicts[f] = "agrees" if ok else f"differs by more than {AGREEMENT:.0%}"
    compared = [f for f in COMPARED if mine.get(f) is not None and theirs.get(f) is not None]
    agrees = bool(compared) and all(verdicts[f] == "agrees" for f in compared)
    return {
        "agrees": agrees,
        "compared": compared,
        "not_produced": [f for f in FIGURES if theirs.get(f) is None],
        "verdicts": verdicts,
    }


def counted_apart(turns: list[dict], reference: str) -> str | None:
    """Why the two sides' figures describe different answers, where in some round they completed
    different numbers of requests: the suite fails an answer cut short (no finish reason, or short
    of max_tokens under ignore_eos) that a reference may count, so their TTFT and tokens/s are
    over different requests and agreeing on them would say nothing. None where every round's
    counts match."""
    for k, t in enumerate(turns, 1):
        mine, theirs = t["suite"].get("completed"), t["reference"].get("completed")
        if mine is None or theirs is None or round(mine) == round(theirs):
            continue
        return (
            f"in round {k} the suite completed {round(mine)} requests ({round(t['suite'].get('failed') or 0)} "
            f"failed) and {reference} {round(theirs)} ({round(t['reference'].get('failed') or 0)} failed): "
            "the figures are of different answers"
        )
    return None


def _ratio(mine: float | None, theirs: float | None) -> float | None:
    return mine / theirs if mine is not None and theirs else None


def _median(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None
