"""nccl-tests, the reference for collective figures: run its binaries and read their table.

``parse`` reads the text an ``*_perf`` binary prints (nccl-tests 2.x, ``src/util.cu``):
the ``#`` header (version, nThread/nGpus, sizes, warm-up and timed iterations, graph),
the devices, then one line per size::

    size  count  type  redop  root  | time algbw busbw #wrong (out-of-place) | time algbw busbw #wrong (in-place)

and the footer (``Out of bounds values``, ``Avg bus bandwidth``). ``#wrong`` is ``N/A``
where nccl-tests does not check (in-place all-to-all). Rows come out in the same shape as
the collectives' own table (``size_bytes``, ``count``, ``dtype``, ``redop``, ``root``,
``oop``/``ip`` with ``time_us``, ``algbw_gbps``, ``busbw_gbps``, ``wrong``), so the two
can be printed side by side and divided.

``run`` starts a binary from a directory of them (``PERFSUITE_NCCL_TESTS`` or a parameter)
with the flags that match a perfsuite sweep, and parses its output.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ENV_DIR = "PERFSUITE_NCCL_TESTS"
# "0": one nccl-tests thread drives every GPU (-g N); unset or "1": one thread per GPU (-t N -g 1)
ENV_THREADS = "PERFSUITE_NCCL_TESTS_THREADS"
# "K=V K=V": environment for the nccl-tests process only (e.g. NCCL_P2P_DIRECT_DISABLE=1), recorded
ENV_EXTRA = "PERFSUITE_NCCL_TESTS_ENV"


def thread_per_gpu(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> bool:
    """Whether nccl-tests gives each GPU its own host thread (the default). The suite has one
    process per GPU, as nccl-tests under MPI; with ``-g N`` one thread launches for every GPU,
    and on 2xH200 that launch bounds its 1-4 MiB figures (all_reduce 1 MiB: 19.9 us with -g 2,
    13.2 us with -t 2 -g 1, both at 200 calls)."""
    return environ.get(ENV_THREADS, "1").strip() != "0"


def extra_env(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> dict[str, str]:
    """``PERFSUITE_NCCL_TESTS_ENV`` as a dict; a word without ``=`` is an error."""
    out = {}
    for word in environ.get(ENV_EXTRA, "").split():
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ValueError(f"{ENV_EXTRA}: {word!r} is not KEY=VALUE")
        out[key] = value
    return out
# perfsuite collective -> nccl-tests binary
BINARIES = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
            "reduce_scatter": "reduce_scatter_perf", "all_to_all": "alltoall_perf",
            "broadcast": "broadcast_perf", "reduce": "reduce_perf", "send_recv": "sendrecv_perf"}
MODE_KEYS = ("oop", "ip")
_HEADER = re.compile(r"^#\s*nThread (?P<threads>\d+) nGpus (?P<gpus>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+)"
                     r" step: (?P<step>\d+)\((?P<kind>factor|bytes)\) warmup iters: (?P<warmup>\d+)"
                     r" iters: (?P<iters>\d+) agg iters: (?P<agg>\d+) validation: (?P<check>\d+)"
                     r" graph: (?P<graph>\d+)")
_VERSION = re.compile(r"^# nccl-tests version (?P<version>\S+) nccl-headers=(?P<headers>\d+) nccl-library=(?P<lib>\d+)")
_DEVICE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+) Group\s+\d+ Pid\s+\d+ on\s+(?P<host>\S+) device\s+(?P<dev>\d+)"
                     r" \[(?P<bus>[^\]]*)\] (?P<name>.+)$")


class ParseError(ValueError):
    """Text that is not an nccl-tests table."""


@dataclass
class NcclTestsOutput:
    version: str | None = None
    nccl_library: int | None = None
    config: dict = field(default_factory=dict)
    devices: list[dict] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    wrong_total: int | None = None
    avg_busbw_gbps: float | None = None
    collective: str | None = None  # the program name, e.g. all_reduce_perf

    def row(self, size_bytes: int) -> dict | None:
        return next((r for r in self.rows if r["size_bytes"] == size_bytes), None)

    def to_dict(self) -> dict:
        return {"version": self.version, "nccl_library": self.nccl_library, "config": self.config,
                "devices": self.devices, "rows": self.rows, "wrong_total": self.wrong_total,
                "avg_busbw_gbps": self.avg_busbw_gbps, "collective": self.collective}


def _mode(tokens: list[str]) -> dict:
    time_us, algbw, busbw, wrong = tokens
    return {"time_us": float(time_us), "algbw_gbps": float(algbw), "busbw_gbps": float(busbw),
            "wrong": None if wrong == "N/A" else int(float(wrong))}


def _row(line: str, per_iteration: bool) -> dict | None:
    """One size's line, or None when the line is not one (NCCL log lines, warnings)."""
    t = line.split()
    if len(t) < 9 or not (t[0].isdigit() and t[1].isdigit()):
        return None
    head = {"size_bytes": int(t[0]), "count": int(t[1]), "dtype": t[2], "redop": t[3], "root": int(t[4])}
    body = t[5:]
    width = 8 if per_iteration else 4  # -R adds i_min i_max i_p99 i_cv% after each mode's four
    try:
        if len(body) >= 2 * width:
            return {**head, "oop": _mode(body[0:4]), "ip": _mode(body[width:width + 4])}
        if len(body) >= width:  # only one mode printed (trace replay: in place only)
            return {**head, "oop": None, "ip": _mode(body[0:4])}
    except ValueError:
        return None
    return None


def parse(text: str) -> NcclTestsOutput:
    """The table of one nccl-tests run; ParseError if there is no table in ``text``."""
    out = NcclTestsOutput()
    per_iteration = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _VERSION.match(line):
                out.version, out.nccl_library = m["version"], int(m["lib"])
            elif m := _HEADER.match(line):
                out.config = {"threads": int(m["threads"]), "gpus": int(m["gpus"]), "min_bytes": int(m["min"]),
                              "max_bytes": int(m["max"]), "step": int(m["step"]), "step_kind": m["kind"],
                              "warmup_iters": int(m["warmup"]), "iters": int(m["iters"]),
                              "agg_iters": int(m["agg"]), "validation": int(m["check"]), "graph": int(m["graph"])}
            elif m := _DEVICE.match(line):
                out.devices.append({"rank": int(m["rank"]), "host": m["host"], "device": int(m["dev"]),
                                    "pci": m["bus"], "name": m["name"].strip()})
            elif "Per-Iteration Report" in line:
                per_iteration = True
            elif line.startswith("# Out of bounds values"):
                out.wrong_total = int(line.split(":", 1)[1].split()[0])
            elif line.startswith("# Avg bus bandwidth"):
                out.avg_busbw_gbps = float(line.split(":", 1)[1].split()[0])
            elif line.startswith("# Collective test starting:"):
                out.collective = line.split(":", 1)[1].strip()
            continue
        row = _row(line, per_iteration)
        if row is not None:
            out.rows.append(row)
    if not out.rows:
        raise ParseError("no nccl-tests result lines found (expected lines of size, count, type, redop, root, "
                         "time, algbw, busbw, #wrong)")
    out.rows, cycles = fold_cycles(out.rows)
    out.config["cycles"] = cycles
    return out


def fold_cycles(rows: list[dict]) -> tuple[list[dict], int]:
    """``-N`` cycles print the whole sweep again: one row per size, each mode the cycle with
    the median time (the lower middle one for an even count; its bandwidths are that
    cycle's), every cycle's time kept in ``time_us_cycles``, and the most wrong elements
    seen. Returns the rows and the cycles per size (1 when no size repeats)."""
    by_size: dict[int, list[dict]] = {}
    for r in rows:
        by_size.setdefault(r["size_bytes"], []).append(r)
    cycles = max(len(v) for v in by_size.values())
    if cycles == 1:
        return rows, 1
    out = []
    for size, seen in by_size.items():
        row = dict(seen[0])
        for mode in MODE_KEYS:
            entries = [r[mode] for r in seen if r.get(mode) is not None]
            if not entries:
                continue
            ordered = sorted(entries, key=lambda e: e["time_us"])
            wrong = [e["wrong"] for e in entries if e["wrong"] is not None]
            row[mode] = {**ordered[(len(ordered) - 1) // 2], "time_us_cycles": [e["time_us"] for e in entries],
                         "wrong": max(wrong) if wrong else None}
        out.append(row)
    return out, cycles


def find_binary(directory: str | os.PathLike, collective: str) -> Path:
    """The ``*_perf`` binary of ``collective`` in ``directory`` or its ``build/``."""
    if collective not in BINARIES:
        raise ValueError(f"nccl-tests has no binary for {collective!r} (known: {', '.join(BINARIES)})")
    base = Path(directory)
    for cand in (base / BINARIES[collective], base / "build" / BINARIES[collective]):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError(f"no executable {BINARIES[collective]} in {base} or {base / 'build'} "
                            f"(build nccl-tests: make MPI=0 NCCL_HOME=... src.build)")


def argv(binary: Path, *, min_bytes: int, max_bytes: int, step_factor: int, iters: int, warmup: int, gpus: int,
         dtype: str, redop: str | None, root: int | None, graph: bool, check: bool,
         thread_per_gpu: bool = False, cycles: int = 1) -> list[str]:
    """nccl-tests flags for the same sweep as a perfsuite collective's parameters. With
    ``thread_per_gpu`` each GPU has its own thread (``-t N -g 1``), which divides nccl-tests'
    own launch time per call among the threads; without it one thread drives every GPU
    (``-g N``). ``cycles`` > 1 runs the sweep that many times (``-N``; ``parse`` keeps each
    size's median), as the suite times ``repeats`` loops per size."""
    placement = ["-t", str(gpus), "-g", "1"] if thread_per_gpu else ["-g", str(gpus)]
    args = [str(binary), "-b", str(min_bytes), "-e", str(max_bytes), "-f", str(step_factor), "-n", str(iters),
            "-w", str(warmup), *placement, "-d", dtype, "-c", "1" if check else "0"]
    if redop:
        args += ["-o", redop]
    if root is not None and root >= 0:
        args += ["-r", str(root)]
    if graph:
        args += ["-G", "1"]
    if cycles > 1:
        args += ["-N", str(cycles)]
    return args


def run(args: list[str], timeout_s: float, env: dict | None = None) -> tuple[NcclTestsOutput, str]:
    """Run an nccl-tests command line; (parsed table, raw text). A failed run raises
    RuntimeError with the end of its output (as plain text)."""
    if shutil.which(args[0]) is None and not Path(args[0]).is_file():
        raise FileNotFoundError(f"{args[0]} not found")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, env=env,
                          stdin=subprocess.DEVNULL)
    text = proc.stdout
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"{Path(args[0]).name} exited with code {proc.returncode}: {tail}")
    return parse(text), text
