"""The registry at scale: import N synthetic record files (10 metrics each, so N x 10 metric
rows) into SQLite and into a throwaway PostgreSQL cluster, time the leaderboard, history and
compare queries, and build the leaderboard site from them.

    python bench/registry_scale.py --records 100000 [--backends sqlite,postgresql] [--out DIR]

The records are schema-valid and hashed like real ones (20 workloads x 50 hosts x 5 cases,
time and TFLOP/s per case, 8 raw samples per metric), written once as files (not timed);
the import reads them back through ``registry.bulk.store_many``, which reads, parses and
checks each file (schema, sha256) in worker processes, with a progress bar. Query times are
the median of 7 warm calls. Targets: import under 60 s, each query under 200 ms, the site
under 120 s. Prints a table; writes ``registry_scale.json`` into ``--out`` when given.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
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
from perfsuite.schemas.canonical import record_sha256  # noqa: E402

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
        yield record


def write_files(n: int, folder: Path) -> list[Path]:
    """The records as files, as a round's submitters would hand them in (made once, not timed)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, record in enumerate(records(n)):
        path = folder / f"{record['run_id']}.json"
        path.write_text(json.dumps(record, sort_keys=True))
        paths.append(path)
        if i and i % 20_000 == 0:
            print(f"  {i} record files written ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)
    return paths


def _median_ms(fn) -> float:
    """Median wall milliseconds of warm calls; also kept: their median CPU milliseconds in this
    process (:data:`CPU_MS`), a figure that a loaded machine distorts less."""
    fn()  # warm
    times, cpu = [], []
    for _ in range(QUERY_REPEATS):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
    CPU_MS[fn.__name__] = statistics.median(cpu)
    return statistics.median(times)


CPU_MS: dict[str, float] = {}


def server_cpu_s(cluster) -> float:
    """CPU-seconds the PostgreSQL server has spent so far: its postmaster, the backends it has
    reaped and the ones alive (the server shares this machine's cores with the import)."""
    ticks = os.sysconf("SC_CLK_TCK")
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])

    def stat(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    fields = stat(postmaster)
    total = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                child = stat(int(entry.name))
            except OSError:  # gone meanwhile
                continue
            if int(child[1]) == postmaster:
                total += int(child[11]) + int(child[12])
    return total / ticks


def run_backend(url: str, paths: list[Path], label: str, site_dir: Path | None, server=None) -> dict:
    from rich.progress import Progress

    from perfsuite.analysis.compare import compare_records
    from perfsuite.publish.leaderboard.data import load
    from perfsuite.registry.bulk import store_many
    from perfsuite.registry.compare import latest_run
    from perfsuite.registry.history import metric_history

    n = len(paths)
    with open_registry(url) as reg:
        cpu_before = os.times()
        server_before = server_cpu_s(server) if server is not None else 0.0
        with Progress(transient=True) as bar:
            task = bar.add_task(f"importing into {label}", total=n)
            outcome = store_many(reg, paths, total=n, progress=lambda k: bar.advance(task, k))
        cpu_after = os.times()
        cpu = sum(
            getattr(cpu_after, f) - getattr(cpu_before, f)
            for f in ("user", "system", "children_user", "children_system")
        )
        server_cpu = server_cpu_s(server) - server_before if server is not None else None
        wall = outcome.wall_s
        on_server = f", and {server_cpu:.1f} in the database server" if server_cpu is not None else ""
        print(
            f"{label}: {n} records imported in {wall:.1f} s ({cpu:.1f} CPU-seconds in this process and its "
            f"workers{on_server}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)",
            flush=True,
        )
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
                boards, _systems = load(s, workload=workload, series=False)
                assert len(boards[0].configs[0].cases) == len(CASES) and len(boards[0].configs[0].rows) == HOSTS

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
            "import_cpu_s": cpu,
            "import_server_cpu_s": server_cpu,
            "load_average": os.getloadavg()[0],
            "check_wait_s": outcome.check_s,
            "write_s": outcome.write_s,
            "leaderboard_ms": _median_ms(leaderboard),
            "history_ms": _median_ms(history),
            "compare_ms": _median_ms(compare),
        }
        figures.update({f"{name}_cpu_ms": ms for name, ms in CPU_MS.items()})
        print(json.dumps(figures), flush=True)  # the queries' figures, before the site is built
        if site_dir is not None:
            from perfsuite.publish.leaderboard import build_site

            start, cpu_start = time.perf_counter(), time.process_time()
            build_site(reg, site_dir)
            figures["site_s"] = time.perf_counter() - start
            figures["site_cpu_s"] = time.process_time() - cpu_start
            figures["site_files"] = sum(len(files) for _, _, files in os.walk(site_dir))
            figures["site_bytes"] = sum(p.stat().st_size for p in site_dir.rglob("*") if p.is_file())
            figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            figures["site_load_average"] = os.getloadavg()[0]
            print(
                f"{label}: site built in {figures['site_s']:.1f} s ({figures['site_cpu_s']:.1f} CPU-seconds, "
                f"{figures['site_files']} files, {figures['site_bytes'] / 1e6:.0f} MB; peak RSS "
                f"{figures['peak_rss_mb']:.0f} MB; load average {figures['site_load_average']:.1f})",
                flush=True,
            )
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-site", action="store_true", help="Skip building the leaderboard site.")
    ap.add_argument(
        "--files",
        type=Path,
        default=None,
        help="Keep the generated record files in this folder, and reuse them when already there.",
    )
    args = ap.parse_args()
    results = []
    work = Path(tempfile.mkdtemp(prefix="perfsuite-scale-"))
    try:
        folder = args.files or work / "records"
        paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if len(paths) != args.records:
            paths = write_files(args.records, folder)
        for backend in args.backends.split(","):
            site = None if args.no_site else work / f"site-{backend}"
            if backend == "sqlite":
                results.append(run_backend(f"sqlite:///{work / 'scale.db'}", paths, "sqlite", site))
            elif backend == "postgresql":
                cluster = pg_cluster.start(prefix="perfsuite-scale-pg-")
                try:
                    results.append(run_backend(cluster.url(), paths, "postgresql", site, server=cluster))
                finally:
                    cluster.remove()
            else:
                raise SystemExit(f"unknown backend {backend!r}")
            print(json.dumps(results[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{'backend':12} {'records':>8} {'import s':>9} {'(target 60)':>11} {'leaderboard ms':>15} "
        f"{'history ms':>11} {'compare ms':>11} {'(target 200)':>12} {'site s':>7} {'(target 120)':>12}"
    )
    for r in results:
        site = f"{r['site_s']:>7.1f}" if "site_s" in r else f"{'-':>7}"
        print(
            f"{r['backend']:12} {r['records']:>8} {r['import_s']:>9.1f} {'':>11} {r['leaderboard_ms']:>15.1f} "
            f"{r['history_ms']:>11.1f} {r['compare_ms']:>11.1f} {'':>12} {site} {'':>12}"
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "registry_scale.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
