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
with the flags that match a perfsuite sweep, and parses its output. Where its ranks live
(``layout``): one process per GPU under an MPI launcher (``PERFSUITE_NCCL_TESTS_MPIRUN``, a
binary built with ``MPI=1``), as nccl-tests' own README runs it and as the suite's ranks are
laid out, so both sides use the same NCCL transport between processes; else one process with
a thread per GPU (``-t N -g 1``, the default) or one thread for every GPU (``-g N``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ENV_DIR = "PERFSUITE_NCCL_TESTS"
# an MPI launcher command ("mpirun", "/opt/mpich/bin/mpiexec"): nccl-tests, built with MPI=1,
# runs as one process per GPU (LAUNCHER -n N BINARY ... -g 1)
ENV_MPIRUN = "PERFSUITE_NCCL_TESTS_MPIRUN"
# without a launcher, "0": one nccl-tests thread drives every GPU (-g N); unset or "1": one thread per GPU (-t N -g 1)
ENV_THREADS = "PERFSUITE_NCCL_TESTS_THREADS"
# "K=V K=V": environment for the nccl-tests process only (e.g. NCCL_P2P_DIRECT_DISABLE=1), recorded
ENV_EXTRA = "PERFSUITE_NCCL_TESTS_ENV"

# Where nccl-tests' ranks live (``layout``), as the record names it.
PROCESS_PER_GPU = "process per GPU"
THREAD_PER_GPU = "thread per GPU"
ONE_THREAD = "one thread"


def mpirun(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> list[str] | None:
    """The MPI launcher's words from ``PERFSUITE_NCCL_TESTS_MPIRUN`` (shell quoting), or None."""
    return shlex.split(environ.get(ENV_MPIRUN, "")) or None


def layout(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> str:
    """Where nccl-tests' ranks live. With an MPI launcher, one process per GPU: the suite's own
    layout, so both sides reach the peer through the same NCCL transport (between processes
    NCCL cannot use the peer's buffers directly), and each rank issues its calls from a process
    of its own. Without one, one process: a thread per GPU by default; ``-g N`` (one thread
    launching for every GPU) bounds its 1-4 MiB figures on 2xH200 (all_reduce 1 MiB: 19.9 us
    with -g 2, 13.2 us with -t 2 -g 1, both at 200 calls), and even with a thread per GPU the
    host issues a call every 7.3-11.5 us (``-C 1``) with stalls of 66-260 us in a 500-call loop
    (``-I 1``), which bound its 1 MiB figures against 10-15 us of GPU time."""
    if mpirun(environ):
        return PROCESS_PER_GPU
    return ONE_THREAD if environ.get(ENV_THREADS, "1").strip() == "0" else THREAD_PER_GPU


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
BINARIES = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "all_to_all": "alltoall_perf",
    "broadcast": "broadcast_perf",
    "reduce": "reduce_perf",
    "send_recv": "sendrecv_perf",
}
MODE_KEYS = ("oop", "ip")
_HEADER = re.compile(
    r"^#\s*nThread (?P<threads>\d+) nGpus (?P<gpus>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+)"
    r" step: (?P<step>\d+)\((?P<kind>factor|bytes)\) warmup iters: (?P<warmup>\d+)"
    r" iters: (?P<iters>\d+) agg iters: (?P<agg>\d+) validation: (?P<check>\d+)"
    r" graph: (?P<graph>\d+)"
)
_VERSION = re.compile(r"^# nccl-tests version (?P<version>\S+) nccl-headers=(?P<headers>\d+) nccl-library=(?P<lib>\d+)")
_DEVICE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+) Group\s+\d+ Pid\s+\d+ on\s+(?P<host>\S+) device\s+(?P<dev>\d+)"
    r" \[(?P<bus>[^\]]*)\] (?P<name>.+)$"
)


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
        return {
            "version": self.version,
            "nccl_library": self.nccl_library,
            "config": self.config,
            "devices": self.devices,
            "rows": self.rows,
            "wrong_total": self.wrong_total,
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "collective": self.collective,
        }


def _mode(tokens: list[str]) -> dict:
    time_us, algbw, busbw, wrong = tokens
    return {
        "time_us": float(time_us),
        "algbw_gbps": float(algbw),
        "busbw_gbps": float(busbw),
        "wrong": None if wrong == "N/A" else int(float(wrong)),
    }


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
            return {**head, "oop": _mode(body[0:4]), "ip": _mode(body[width : width + 4])}
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
                out.config = {
                    "threads": int(m["threads"]),
                    "gpus": int(m["gpus"]),
                    "min_bytes": int(m["min"]),
                    "max_bytes": int(m["max"]),
                    "step": int(m["step"]),
                    "step_kind": m["kind"],
                    "warmup_iters": int(m["warmup"]),
                    "iters": int(m["iters"]),
                    "agg_iters": int(m["agg"]),
                    "validation": int(m["check"]),
                    "graph": int(m["graph"]),
                }
            elif m := _DEVICE.match(line):
                out.devices.append(
                    {
                        "rank": int(m["rank"]),
                        "host": m["host"],
                        "device": int(m["dev"]),
                        "pci": m["bus"],
                        "name": m["name"].strip(),
                    }
                )
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
        raise ParseError(
            "no nccl-tests result lines found (expected lines of size, count, type, redop, root, "
            "time, algbw, busbw, #wrong)"
        )
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
    for _size, seen in by_size.items():
        row = dict(seen[0])
        for mode in MODE_KEYS:
            entries = [r[mode] for r in seen if r.get(mode) is not None]
            if not entries:
                continue
            ordered = sorted(entries, key=lambda e: e["time_us"])
            wrong = [e["wrong"] for e in entries if e["wrong"] is not None]
            row[mode] = {
                **ordered[(len(ordered) - 1) // 2],
                "time_us_cycles": [e["time_us"] for e in entries],
                "wrong": max(wrong) if wrong else None,
            }
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
    raise FileNotFoundError(
        f"no executable {BINARIES[collective]} in {base} or {base / 'build'} "
        f"(build nccl-tests: make MPI=0 NCCL_HOME=... src.build)"
    )


def argv(
    binary: Path,
    *,
    min_bytes: int,
    max_bytes: int,
    step_factor: int,
    iters: int,
    warmup: int,
    gpus: int,
    dtype: str,
    redop: str | None,
    root: int | None,
    graph: bool,
    check: bool,
    placement: str = ONE_THREAD,
    cycles: int = 1,
) -> list[str]:
    """nccl-tests flags for the same sweep as a perfsuite collective's parameters, for ranks
    placed as ``placement`` says (``layout``): ``-g 1`` in each of the launcher's processes,
    ``-t N -g 1`` for a thread per GPU, ``-g N`` for one thread. ``cycles`` > 1 runs the
    sweep that many times (``-N``; ``parse`` keeps each size's median), as the suite times
    ``repeats`` loops per size. The launcher's own words are ``command``'s."""
    placement_flags = {
        PROCESS_PER_GPU: ["-g", "1"],
        THREAD_PER_GPU: ["-t", str(gpus), "-g", "1"],
        ONE_THREAD: ["-g", str(gpus)],
    }[placement]
    args = [
        str(binary),
        "-b",
        str(min_bytes),
        "-e",
        str(max_bytes),
        "-f",
        str(step_factor),
        "-n",
        str(iters),
        "-w",
        str(warmup),
        *placement_flags,
        "-d",
        dtype,
        "-c",
        "1" if check else "0",
    ]
    if redop:
        args += ["-o", redop]
    if root is not None and root >= 0:
        args += ["-r", str(root)]
    if graph:
        args += ["-G", "1"]
    if cycles > 1:
        args += ["-N", str(cycles)]
    return args


def command(args: list[str], launcher: list[str] | None, ranks: int) -> list[str]:
    """The whole command line: ``args`` (binary and flags) as they are, or under the MPI
    launcher as ``ranks`` processes."""
    return [*launcher, "-n", str(ranks), *args] if launcher else list(args)


def check_ranks(out: NcclTestsOutput, ranks: int) -> None:
    """ParseError unless nccl-tests listed exactly ranks 0..ranks-1: a binary built with
    ``MPI=0`` under an MPI launcher runs one single-GPU test per process, each printing its
    own rank 0, and its figures are not those of one communicator of ``ranks`` GPUs."""
    listed = sorted(d["rank"] for d in out.devices)
    if listed != list(range(ranks)):
        raise ParseError(
            f"nccl-tests listed ranks {listed} where the sweep has {ranks} "
            f"(under an MPI launcher the binaries must be built with MPI=1)"
        )


def run(
    args: list[str],
    timeout_s: float,
    env: dict | None = None,
    launcher: list[str] | None = None,
    ranks: int | None = None,
) -> tuple[NcclTestsOutput, str]:
    """Run an nccl-tests command line (under ``launcher`` as ``ranks`` processes, if given);
    (parsed table, raw text). With ``ranks`` the table must list exactly that many ranks
    (``check_ranks``). A failed run raises RuntimeError with the end of its output (as plain
    text); one that outlives ``timeout_s`` is killed with every process it started (the
    launcher's ranks hold GPUs) and raises subprocess.TimeoutExpired."""
    if shutil.which(args[0]) is None and not Path(args[0]).is_file():
        raise FileNotFoundError(f"{args[0]} not found")
    if launcher and shutil.which(launcher[0]) is None:
        raise FileNotFoundError(f"MPI launcher {launcher[0]} not found ({ENV_MPIRUN})")
    cmd = command(args, launcher, ranks or 1)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL
    )
    try:
        text, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        from perfsuite.processes import kill_family

        kill_family(proc.pid)
        proc.communicate()
        raise
    if proc.returncode != 0:
        tail = "\n".join((text + err).strip().splitlines()[-5:])
        raise RuntimeError(f"{Path(cmd[0]).name} exited with code {proc.returncode}: {tail}")
    parsed = parse(text)
    if ranks is not None:
        check_ranks(parsed, ranks)
    return parsed, text
