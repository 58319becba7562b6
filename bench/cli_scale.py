"""The commands a user types, at the scale of a public round: N synthetic record files on disk,
``perfsuite import`` of the folder, then ``results``, ``show``, ``compare``, ``history`` and
``export``, each the ``perfsuite`` CLI in a fresh process, against SQLite and against a
throwaway PostgreSQL cluster; each figure printed beside its target.

    python bench/cli_scale.py --records 100000 [--backends sqlite,postgresql] [--files DIR]
                              [--reimport] [--leaderboard] [--out DIR]

The records are schema-valid and hashed like real ones (20 workloads x 50 hosts x 5 cases,
time and TFLOP/s per case, 8 raw samples per metric: 100,000 records are 5,000 runs of each
workload, 100 of each workload on each host), written once as ``<run_id>.json`` files (not
timed; ``--files`` keeps them for the next call). ``$PERFSUITE_RECORDS`` points at that folder,
as a user's own records folder would, so ``results`` also looks for records it lacks.

The import's peak memory is measured two ways: the largest single process (``wait4``'s
``ru_maxrss``, which covers the worker processes it reaped) and the sum of the resident memory
of the command and its workers, sampled every 0.5 s. Every other command is timed three times
(each a fresh process; the median printed, with the first of the three, a user's first call,
and the median's CPU-seconds, a figure a loaded machine distorts less). The machine's load
average is printed with each figure: the cores are shared. perfsuite's data folder is the
bench's own (``results`` remembers there a records folder it found complete, so its first call
lists the folder and reads every stored id, and the next ones do not).

Targets: import under 60 s and under 1 GB; every other command under 1 s;
``leaderboard --out`` (with ``--leaderboard``) under 60 s.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import pg_cluster  # noqa: E402
from support.factories import make_metric, make_record  # noqa: E402

from perfsuite.schemas.canonical import record_sha256  # noqa: E402

WORKLOADS = 20
HOSTS = 50
CASES = ("fp32", "tf32", "bf16", "fp16", "fp8")
SAMPLES = 8
REPEATS = 3
START = datetime(2026, 1, 1, tzinfo=UTC)
PERFSUITE = str(Path(sys.executable).with_name("perfsuite"))


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


def run_id(i: int) -> str:
    """Random-looking (as uuid4 ids are) and the same on every call."""
    return uuid.UUID(bytes=hashlib.md5(str(i).encode()).digest(), version=4).hex


def records(n: int):
    templates = _templates()
    for i in range(n):
        w, h = i % WORKLOADS, (i // WORKLOADS) % HOSTS
        record = copy.copy(templates[(w, h)])
        record["run_id"] = run_id(i)
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


def write_files(n: int, folder: Path) -> None:
    """The records as a records folder (made once, not timed)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, record in enumerate(records(n)):
        (folder / f"{record['run_id']}.json").write_text(json.dumps(record, sort_keys=True))
        if i and i % 20_000 == 0:
            print(f"  {i} record files written ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)


def _tree_rss_kb(root: int) -> int:
    """Resident kB of ``root`` and every process below it, found through /proc/PID/task/*/children
    (not a walk of all of /proc, which costs the loaded machine more than the import's writer)."""
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            for task in Path(f"/proc/{pid}/task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:  # gone meanwhile
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total


def perfsuite(args: list[str], env: dict, sample_memory: bool = False) -> dict:
    """One ``perfsuite`` command in a fresh process: wall and CPU seconds, exit status, the
    largest process's peak RSS (wait4) and, when asked, the sampled peak RSS of its whole tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [PERFSUITE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    tree_peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            tree_peak[0] = max(tree_peak[0], _tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True) if sample_memory else None
    if sampler:
        sampler.start()
    out = {"stdout": b"", "stderr": b""}

    def drain(name: str, stream) -> None:
        out[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(k, getattr(proc, k))) for k in ("stdout", "stderr")]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    for r in readers:
        r.join()
    if sampler:
        sampler.join()
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_mb": usage.ru_maxrss / 1024,
        "tree_rss_mb": tree_peak[0] / 1024,
        "rc": proc.returncode,
        "stdout": out["stdout"].decode(errors="replace"),
        "stderr": out["stderr"].decode(errors="replace"),
        "load": os.getloadavg()[0],
    }


def _checked(name: str, result: dict) -> dict:
    if result["rc"] != 0:
        raise SystemExit(f"{name}: exit {result['rc']}: {result['stderr'].strip()[-2000:]}")
    return result


def commands(n: int) -> list[tuple[str, list[str]]]:
    """The read commands timed, as a user types them, with the records' own names."""
    workload = "bench.w07"
    last_w07 = max(i for i in range(n) if i % WORKLOADS == 7)
    a = next(i for i in range(n) if i % WORKLOADS == 7 and (i // WORKLOADS) % HOSTS == 3)
    b = next(i for i in range(n) if i % WORKLOADS == 7 and (i // WORKLOADS) % HOSTS == 4)
    since = (START + timedelta(minutes=max(n - 10_000, 0))).strftime("%Y-%m-%dT%H:%M")
    return [
        ("results", ["results"]),
        ("results --limit 20", ["results", "--limit", "20"]),
        ("show RUN", ["show", run_id(last_w07)[:12]]),
        ("compare A B", ["compare", run_id(a)[:12], run_id(b)[:12]]),
        ("history --system S", ["history", "--workload", workload, "--system", "host03"]),
        (
            f"history --workload W --case C ({n // WORKLOADS} runs)",
            ["history", "--workload", workload, "--case", "bf16", "--metric", "tflops"],
        ),
        (
            f"export --workload W --since D ({min(n, 10_000) // WORKLOADS} runs)",
            ["export", "--workload", workload, "--since", since],
        ),
    ]


def run_backend(
    label: str, url: str, folder: Path, n: int, site: Path | None, data: Path, reimport: bool = False
) -> list[dict]:
    # perfsuite's data folder (where results remembers a records folder found complete) is the
    # bench's own, fresh for each backend: the first call of each command is a user's first
    env = {**os.environ, "PERFSUITE_DB": url, "PERFSUITE_RECORDS": str(folder), "COLUMNS": "120"}
    env["XDG_DATA_HOME"] = str(data)
    rows = []
    imported = _checked("import", perfsuite(["import", str(folder)], env, sample_memory=True))
    summary = imported["stdout"].strip().splitlines()[-1] if imported["stdout"].strip() else ""
    print(f"{label}: import: {summary}", flush=True)
    rows.append(
        {
            "command": f"import <folder of {n} records>",
            **{k: v for k, v in imported.items() if k not in ("stdout", "stderr")},
            "target_s": 60.0,
        }
    )
    if reimport:
        again = _checked("import again", perfsuite(["import", str(folder)], env))
        rows.append(
            {
                "command": "import again (all already there)",
                **{k: v for k, v in again.items() if k not in ("stdout", "stderr")},
                "target_s": 60.0,
            }
        )
    for name, args in commands(n):
        runs = [_checked(name, perfsuite(args, env)) for _ in range(REPEATS)]
        rows.append(
            {
                "command": name,
                "wall_s": statistics.median(r["wall_s"] for r in runs),
                "first_s": runs[0]["wall_s"],
                "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "max_rss_mb": max(r["max_rss_mb"] for r in runs),
                "load": runs[-1]["load"],
                "out_lines": runs[-1]["stdout"].count("\n"),
                "target_s": 1.0,
            }
        )
        print(f"{label}: {name}: {rows[-1]['wall_s']:.2f} s ({rows[-1]['out_lines']} lines out)", flush=True)
    if site is not None:
        board = _checked("leaderboard", perfsuite(["leaderboard", "--out", str(site)], env, sample_memory=True))
        rows.append(
            {
                "command": "leaderboard --out SITE",
                **{k: v for k, v in board.items() if k not in ("stdout", "stderr")},
                "target_s": 60.0,
            }
        )
    for r in rows:
        r["backend"] = label
    return rows


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'backend':10} {'command':52} {'wall s':>7} {'target':>7} {'':4} {'first s':>7} {'CPU s':>6} "
        f"{'peak MB':>8} {'load':>5}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        ok = "ok" if r["wall_s"] < r["target_s"] else "OVER"
        memory = max(r["max_rss_mb"], r.get("tree_rss_mb", 0.0))
        first = format(r["first_s"], ">7.2f") if "first_s" in r else " " * 7
        print(
            f"{r['backend']:10} {r['command']:52} {r['wall_s']:>7.2f} {'< ' + format(r['target_s'], 'g'):>7} "
            f"{ok:4} {first} {r['cpu_s']:>6.2f} {memory:>8.0f} {r['load']:>5.1f}"
        )
        if r.get("tree_rss_mb"):
            verdict = "ok" if r["tree_rss_mb"] < 1024 else "OVER"
            print(
                f"{'':10} {'  peak RSS: largest process / command + workers':52} "
                f"{r['max_rss_mb']:>7.0f} MB / {r['tree_rss_mb']:.0f} MB (target < 1024 MB: {verdict})"
            )
    print(f"({os.cpu_count()} cores, shared; load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--out", type=Path, default=None, help="Write cli_scale.json here.")
    ap.add_argument("--leaderboard", action="store_true", help="Also time 'perfsuite leaderboard --out'.")
    ap.add_argument("--reimport", action="store_true", help="Also time a second import (every record already there).")
    ap.add_argument(
        "--files", type=Path, default=None, help="Keep the record files in this folder; reuse them when there."
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="perfsuite-cli-scale-"))
    rows: list[dict] = []
    try:
        folder = args.files or work / "records"
        have = sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0
        if have != args.records:
            if have:
                raise SystemExit(f"{folder} holds {have} record files, not {args.records}: give another --files")
            write_files(args.records, folder)
        for backend in args.backends.split(","):
            site = work / f"site-{backend}" if args.leaderboard else None
            if backend == "sqlite":
                rows += run_backend(
                    "sqlite", f"sqlite:///{work / 'scale.db'}", folder, args.records, site, work / "data-sqlite",
                    args.reimport,
                )  # fmt: skip
            elif backend == "postgresql":
                cluster = pg_cluster.start(prefix="perfsuite-cli-scale-pg-")
                try:
                    rows += run_backend(
                        "postgresql", cluster.url(), folder, args.records, site, work / "data-postgresql", args.reimport
                    )
                finally:
                    cluster.remove()
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if rows:
            print_table(rows)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cli_scale.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
