"""The registry at scale: import N synthetic records (10 metrics each, so N x 10 metric rows)
into SQLite and into a throwaway PostgreSQL cluster, then time the leaderboard, history and
compare queries.

    python bench/registry_scale.py --records 100000 [--backends sqlite,postgresql] [--out DIR]

The records are schema-valid and hashed like real ones (20 workloads x 50 hosts x 5 cases,
time and TFLOP/s per case, 8 raw samples per metric); the import goes through
``perfsuite.registry.bulk.store_many`` with the full schema and hash checks. Query times are the
median of 7 warm calls; the goal is under 200 ms each. Prints a table; writes
``registry_scale.json`` into ``--out`` when given.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import pg_cluster  # noqa: E402
from factories import make_metric, make_record  # noqa: E402

from perfsuite.registry import open_registry  # noqa: E402
from perfsuite.registry.records import record_sha256  # noqa: E402

WORKLOADS = 20
HOSTS = 50
CASES = ("fp32", "tf32", "bf16", "fp16", "fp8")
SAMPLES = 8
QUERY_REPEATS = 7
START = datetime(2026, 1, 1, tzinfo=UTC)


def _templates() -> dict:
    """One full record per (workload, host): the generator only changes ids, times, seeds, samples."""
    import numpy as np

    rng = np.random.default_rng(0)
    per_host = []
    for h in range(HOSTS):
        metrics = []
        for c in CASES:
            t = list(rng.normal(1.0 + 0.01 * h, 0.01, SAMPLES))
            metrics.append(make_metric(c, "time_ms", "ms", t, higher_is_better=False))
            metrics.append(make_metric(c, "tflops", "TFLOP/s", [2.0 / x for x in t], higher_is_better=True))
        per_host.append(metrics)
    return {
        (w, h): make_record(
            workload_name=f"bench.w{w:02d}",
            category="kernels",
            host=f"host{h:02d}",
            device="cuda",
            params={"m": 4096},
            metrics=per_host[h],
        )
        for w in range(WORKLOADS)
        for h in range(HOSTS)
    }


def records(n: int):
    templates = _templates()
    for i in range(n):
        w, h = i % WORKLOADS, (i // WORKLOADS) % HOSTS
        record = copy.copy(templates[(w, h)])
        record["run_id"] = uuid.UUID(int=i + 1).hex
        started = START + timedelta(minutes=i)
        record["started_at"] = started.isoformat()
        record["finished_at"] = (started + timedelta(seconds=30)).isoformat()
        record["controls"] = {**record["controls"], "seed": i}
        scale = 1.0 + (i % 7) * 0.001
        record["metrics"] = [
            {**m, "value": m["value"] * scale, "samples": [s * scale for s in m["samples"]]} for m in record["metrics"]
        ]
        record.pop("sha256", None)
        record["sha256"] = record_sha256(record)
        if i and i % 10_000 == 0:
            print(f"  {i} records made and imported so far ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
        yield record


def _median_ms(fn) -> float:
    fn()  # warm
    times = []
    for _ in range(QUERY_REPEATS):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def run_backend(url: str, n: int, label: str) -> dict:
    from perfsuite.analysis.compare import compare_records
    from perfsuite.registry.bulk import store_many
    from perfsuite.registry.compare import latest_run
    from perfsuite.registry.history import metric_history
    from perfsuite.registry.leaderboard.data import load

    with open_registry(url) as reg:
        outcome = store_many(reg, records(n))
        wall = outcome.validate_s + outcome.write_s  # the import itself, not the making of the records
        assert outcome.stored == n, outcome
        if reg.engine.dialect.name == "postgresql":
            from sqlalchemy import text

            with reg.engine.connect() as c:
                c.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
        else:
            from sqlalchemy import text

            with reg.engine.connect() as c:
                c.execute(text("ANALYZE"))
                c.commit()
        workload = "bench.w07"

        def leaderboard():
            with reg.session() as s:
                boards, *_ = load(s, workload=workload)
                assert len(boards) == len(CASES) and len(boards[0].rows) == HOSTS

        def history():
            with reg.session() as s:
                points = metric_history(s, workload, case="bf16", metric="tflops", system="host03")
                assert len(points) == n // (WORKLOADS * HOSTS)

        def compare():
            with reg.session() as s:
                a = latest_run(s, workload, system="host03")
                b = latest_run(s, workload, system="host04", comparability_key=a["comparability_key"])
            compare_records(a, b)

        figures = {
            "backend": label,
            "records": n,
            "metric_rows": n * 2 * len(CASES),
            "import_s": wall,
            "import_s_per_1000": wall / n * 1000,
            "validate_s_per_1000": outcome.validate_s / n * 1000,
            "write_s_per_1000": outcome.write_s / n * 1000,
            "leaderboard_ms": _median_ms(leaderboard),
            "history_ms": _median_ms(history),
            "compare_ms": _median_ms(compare),
        }
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    results = []
    work = Path(tempfile.mkdtemp(prefix="perfsuite-scale-"))
    try:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                results.append(run_backend(f"sqlite:///{work / 'scale.db'}", args.records, "sqlite"))
            elif backend == "postgresql":
                cluster = pg_cluster.start(prefix="perfsuite-scale-pg-")
                try:
                    results.append(run_backend(cluster.url(), args.records, "postgresql"))
                finally:
                    cluster.remove()
            else:
                raise SystemExit(f"unknown backend {backend!r}")
            print(json.dumps(results[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{'backend':12} {'records':>8} {'import s/1000':>14} {'(validate':>10} {'write)':>8} "
        f"{'leaderboard ms':>15} {'history ms':>11} {'compare ms':>11}"
    )
    for r in results:
        print(
            f"{r['backend']:12} {r['records']:>8} {r['import_s_per_1000']:>14.2f} {r['validate_s_per_1000']:>10.2f} "
            f"{r['write_s_per_1000']:>8.2f} {r['leaderboard_ms']:>15.1f} {r['history_ms']:>11.1f} "
            f"{r['compare_ms']:>11.1f}"
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "registry_scale.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
