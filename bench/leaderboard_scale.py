"""``perfsuite leaderboard`` at the scale of a public round: a registry of N synthetic records
(SQLite), the site built by the CLI in a fresh process under ``/usr/bin/time -v``, and the
figures a publisher cares about printed beside their targets: build time, peak memory, the
site's size and its file count; optionally screenshots of the pages a reader opens first.

    python bench/leaderboard_scale.py --records 100000 --db DB [--site DIR] [--shots DIR]

The kernels records are ``bench/cli_scale.py``'s (20 workloads x 50 hosts x 5 cases, imported
from it, not copied); beside them, so that the serving and training pages are drawn from a
round too, 50 hosts each file ``inference.serving`` rate sweeps (two output lengths, 10 runs
each) and ``training.gpt`` at 1, 2, 4 and 8 of their 8 GPUs with 5 seeds each (50 eight-GPU
nodes beside the 50 one-GPU hosts of the kernels). The registry is filled
once through the library's bulk import (not timed: ``bench/cli_scale.py`` times the import)
and kept at ``--db`` for the next call.

Targets: the build under 60 s, the site under 100 MB.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from cli_scale import HOSTS, PERFSUITE  # noqa: E402
from cli_scale import records as kernel_records  # noqa: E402
from support.factories import make_metric, make_record  # noqa: E402

SERVING_RUNS = 10  # per host and output length
OUTPUT_TOKENS = (64, 128)
WORLDS = (1, 2, 4, 8)
SEEDS = 5
RATES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
START = datetime(2026, 6, 1, tzinfo=UTC)


def _run_id(kind: str, i: int) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"perfsuite-leaderboard-scale/{kind}/{i}").hex


def serving_records():
    """``inference.serving`` rate sweeps: each host saturates at its own throughput, the latency
    climbing past it, as an engine's does."""
    i = 0
    for h in range(HOSTS):
        capacity = 8.0 - 0.1 * h  # requests/s where this host saturates
        for output_tokens in OUTPUT_TOKENS:
            for run in range(SERVING_RUNS):
                jitter = 1.0 + 0.002 * ((run * 7) % 5)
                steps = []
                for k, rate in enumerate(RATES):
                    achieved = min(rate, capacity) * jitter
                    over = max(rate / capacity, 1.0)
                    tpot_p50 = 8.0 * over * (1.0 + 0.5 * min(rate, capacity) / capacity)  # batching: slower per user
                    steps.append(
                        {
                            "case": f"rate {rate:g}/s",
                            "mode": "rate",
                            "load": rate,
                            "offered_rps": rate,
                            "completed_rps": achieved,
                            "output_tokens_per_s": achieved * output_tokens,
                            "ttft_ms": {"p50": 40.0 * over**2, "p99": (60.0 + 2 * h) * over**2 * (1 + k * 0.1)},
                            "tpot_ms": {"p50": tpot_p50, "p99": (10.0 + 0.2 * h) * over * (1 + k * 0.05)},
                            # InferenceMAX's view: per GPU (8 a node) against per user
                            "curve": {
                                "output_tokens_per_s_per_gpu": achieved * output_tokens / 8,
                                "output_tokens_per_s_per_user": 1000.0 / tpot_p50,
                            },
                            "valid": True,
                            "within_slo": over < 2.0,
                        }
                    )
                goodput = capacity * jitter
                yield make_record(
                    workload_name="inference.serving",
                    category="inference",
                    host=f"node{h:02d}",
                    device="cuda",
                    gpu_count=8,
                    run_id=_run_id("serving", i),
                    started_at=START + timedelta(hours=i),
                    params={
                        "rates": list(RATES),
                        "output_tokens": output_tokens,
                        "slo_ttft_ms": 1000.0,
                        "slo_tpot_ms": 100.0,
                    },
                    metrics=[
                        make_metric("rate sweep", "goodput_at_slo_rps", "requests/s", [goodput], higher_is_better=True)
                    ],
                    details={
                        "serving": {
                            "slo": {"ttft_ms": 1000.0, "tpot_ms": 100.0, "error_budget": 0.01, "goodput_target": 0.9},
                            "rate_sweep": {"steps": steps},
                        }
                    },
                    controls={"seed": run},
                )
                i += 1


def training_records():
    """``training.gpt`` at each world size, global batch held (strong scaling), five seeds each:
    time to target and tokens/s."""
    i = 0
    for h in range(HOSTS):
        for world in WORLDS:
            efficiency = 1.0 - 0.02 * (world - 1) - 0.001 * h
            for seed in range(SEEDS):
                spread = 1.0 + 0.03 * ((seed * 3) % 5 - 2)
                tokens = 350_000.0 * world * efficiency * (1.0 - 0.004 * h)
                seconds = 3600.0 / (world * efficiency) * spread
                yield make_record(
                    workload_name="training.gpt",
                    category="training",
                    host=f"node{h:02d}",
                    device="cuda",
                    gpu_count=8,
                    run_id=_run_id("training", i),
                    started_at=START + timedelta(hours=i, minutes=30),
                    params={"global_batch": 64, "precision": "bf16"},
                    launch={"world_size": world},
                    controls={"seed": seed},
                    metrics=[
                        make_metric("target", "time_to_target_s", "s", [seconds], higher_is_better=False),
                        make_metric("train", "tokens_per_s", "tokens/s", [tokens / spread], higher_is_better=True),
                    ],
                )
                i += 1


def fill(db: Path, n: int) -> None:
    """The registry at ``db``: n records in all (kernels the rest after serving and training)."""
    from perfsuite.registry import open_registry
    from perfsuite.registry.bulk import store_many

    extra = HOSTS * len(OUTPUT_TOKENS) * SERVING_RUNS + HOSTS * len(WORLDS) * SEEDS

    def everything():
        yield from serving_records()
        yield from training_records()
        yield from kernel_records(n - extra)

    start = time.perf_counter()
    with open_registry(f"sqlite:///{db}") as reg:
        outcome = store_many(reg, everything(), total=n)
    print(f"registry: {n} records stored in {time.perf_counter() - start:.0f} s ({outcome})", flush=True)


def timed_build(db: Path, site: Path, extra: list[str]) -> dict:
    """``perfsuite leaderboard --out SITE`` in a fresh process under /usr/bin/time -v."""
    if site.exists():
        shutil.rmtree(site)
    cmd = ["/usr/bin/time", "-v", PERFSUITE, "--db", f"sqlite:///{db}", "leaderboard", "--out", str(site), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"leaderboard: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    clock = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", proc.stderr)
    assert clock, proc.stderr
    wall = int(clock[1] or 0) * 3600 + int(clock[2]) * 60 + float(clock[3])
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)[1])
    cpu = sum(float(re.search(rf"{what} time \(seconds\): ([\d.]+)", proc.stderr)[1]) for what in ("User", "System"))
    files = [p for p in site.rglob("*") if p.is_file()]
    size = int(subprocess.run(["du", "-sb", str(site)], capture_output=True, text=True).stdout.split()[0])
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "max_rss_mb": rss / 1024,
        "bytes": size,
        "du": subprocess.run(["du", "-sh", str(site)], capture_output=True, text=True).stdout.split()[0],
        "files": len(files),
        "stdout": proc.stdout.strip(),
    }


def shots(site: Path, folder: Path, prefix: str) -> list[Path]:
    """The front page, a kernels page, the serving page and the training page at 1280 and 390 px."""
    from playwright.sync_api import sync_playwright

    pages = {
        "front": "index.html",
        "kernels": "workloads/bench.w07.html",
        "serving": "workloads/inference.serving.html",
        "training": "workloads/training.gpt.html",
    }
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            for name, rel in pages.items():
                page.goto((site / rel).as_uri())
                page.wait_for_load_state("load")
                page.wait_for_timeout(1500)
                path = folder / f"{prefix}-{name}-{width}.png"
                page.screenshot(path=str(path), full_page=True)
                wide = page.evaluate("document.documentElement.scrollWidth")
                print(f"  {path} (page width {wide} px at a {width} px viewport)", flush=True)
                out.append(path)
            if errors:
                print(f"  console errors at {width} px: {errors}", flush=True)
            context.close()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--db", type=Path, required=True, help="The SQLite registry: filled when missing, then kept.")
    ap.add_argument("--site", type=Path, default=None, help="Build the site here (replaced); without it, fill only.")
    ap.add_argument("--shots", type=Path, default=None, help="Write screenshots of the built site here.")
    ap.add_argument("--prefix", default="lb100k", help="Screenshot file names' prefix.")
    ap.add_argument("--per-run", action="store_true", help="Build with --per-run (every record's page).")
    args = ap.parse_args()
    if not args.db.exists():
        fill(args.db, args.records)
    if args.site is None:
        return
    result = timed_build(args.db, args.site, ["--per-run"] if args.per_run else [])
    print(result["stdout"])
    print(
        f"leaderboard --out: {result['wall_s']:.1f} s (target < 60 s; {result['cpu_s']:.1f} CPU-s, its workers "
        f"included), peak RSS {result['max_rss_mb']:.0f} MB (the largest process)"
    )
    print(
        f"site: {result['du']} ({result['bytes'] / 1e6:.1f} MB, target < 100 MB) in {result['files']} files "
        f"(load average {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())})"
    )
    if args.shots:
        shots(args.site, args.shots, args.prefix)


if __name__ == "__main__":
    main()
