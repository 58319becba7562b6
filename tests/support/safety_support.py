"""What the safety tests (and ``tools/safety_tally.py``) share: a plugin of workloads that
break the records folder or the registry while they measure, a real tmpfs to fill or
remount read-only, the loop that signals ``perfsuite run`` in the window between writing a
record and storing it, hostile submission trees, extreme records, and the bad inputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.factories import gemm_metrics, make_metric, make_record, sign

PLUGIN = '''
import os, subprocess
from dataclasses import dataclass
from pathlib import Path
from perfsuite import hookimpl, Workload, Case, Work, Check, Requirements, param

@dataclass(frozen=True)
class P:
    n: int = param(100, "items per call")

class Ok(Workload):
    name = "survive.ok"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        def fn():
            self.out = sum(range(self.params.n))
        return [Case("sum", fn, Work(items=self.params.n),
                     verify=lambda: Check("sum", self.out == self.params.n * (self.params.n - 1) // 2, "closed form"))]

class OkPair(Ok):
    name = "survive.ok_pair"
    category = "collectives"
    requirements = Requirements(devices=("cpu",), min_world_size=2)

class FillRecords(Ok):
    """Fills the filesystem of the records folder while the run measures."""
    name = "survive.fill_records"
    def setup(self, ctx):
        with open(Path(os.environ["SURVIVE_FILL"]) / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass  # full: what this workload is for

class Remount(Ok):
    """Remounts the records folder's filesystem read-only while the run measures."""
    name = "survive.remount"
    def setup(self, ctx):
        subprocess.run(["mount", "-o", "remount,ro", os.environ["SURVIVE_REMOUNT"]], check=True)

class HangPair(OkPair):
    """Two ranks that say they are measuring (a marker file each) and then wait to be killed."""
    name = "survive.hang_pair"
    def setup(self, ctx):
        marker = Path(os.environ["SURVIVE_MARKER"] + "." + os.environ.get("RANK", "0"))
        marker.write_text(os.environ["PERFSUITE_WORKDIR"])
        import time
        time.sleep(3600)

class BreakFolders(Ok):
    """Puts a file in the place of each folder named in SURVIVE_BREAK while the run measures."""
    name = "survive.break_folders"
    def setup(self, ctx):
        for folder in map(Path, os.environ["SURVIVE_BREAK"].split(os.pathsep)):
            folder.rename(folder.with_name(folder.name + ".moved"))
            folder.write_text("not a folder any more")

@hookimpl
def perfsuite_register_workloads(register):
    for w in (Ok, OkPair, HangPair, FillRecords, Remount, BreakFolders):
        register(w)
'''

RUN_ARGS = ("--device", "cpu", "--warmup", "0", "--iterations", "1")


RUN = ("run", "kernels.memory", "--device", "cpu", "--quick")
# Options and parameters refused before anything runs: name -> (arguments, what the one line says).
BAD_OPTIONS = {
    "--timeout nan": ([*RUN, "--timeout", "nan"], "Invalid value for '--timeout': 'nan' is not a finite number"),
    "--timeout inf": ([*RUN, "--timeout", "inf"], "Invalid value for '--timeout': 'inf' is not a finite number"),
    "--timeout 0": ([*RUN, "--timeout", "0"], "Invalid value for '--timeout': 0 is not above 0"),
    "--timeout 1e300": ([*RUN, "--timeout", "1e300"], "Invalid value for '--timeout': 1e300 is above the limit"),
    "--min-time nan": ([*RUN, "--min-time", "nan"], "Invalid value for '--min-time': 'nan' is not a finite number"),
    "--min-time inf": ([*RUN, "--min-time", "inf"], "Invalid value for '--min-time': 'inf' is not a finite number"),
    "--min-time -1": ([*RUN, "--min-time", "-1"], "Invalid value for '--min-time': -1 is not at least 0"),
    "--repeat 1000000000": (
        [*RUN, "--repeat", "1000000000"],
        "Invalid value for '--repeat': 1000000000 is not in the range 1<=x<=1000",
    ),
    "--repeat full-width 5": (
        [*RUN, "--repeat", "\uff15"],
        "Invalid value for '--repeat': '５' is not written in ASCII",
    ),
    "--seed 2**32": ([*RUN, "--seed", str(2**32)], "is not in the range 0<=x<=4294967295"),
    "--seed -1": ([*RUN, "--seed", "-1"], "is not in the range 0<=x<=4294967295"),
    "--seed 10**30": ([*RUN, "--seed", str(10**30)], "is not in the range 0<=x<=4294967295"),
    "--seed full-width 12": ([*RUN, "--seed", "\uff11\uff12"], "is not written in ASCII digits"),
    "--seed 2**32-1 --repeat 2": (
        [*RUN, "--seed", str(2**32 - 1), "--repeat", "2"],
        "--seed 4294967295 with --repeat 2: the last run's seed would be 4294967296, above 4294967295",
    ),
    "--iterations 10**12": ([*RUN, "--iterations", str(10**12)], "is not in the range 1<=x<=2147483647"),
    "--warmup 5000 digits": (
        [*RUN, "--warmup", "9" * 5000],
        "Invalid value for '--warmup': a value of 5,000 characters is not a number it takes",
    ),
    "--nproc-per-node 10**6": ([*RUN, "--nproc-per-node", str(10**6)], "is not in the range 1<=x<=4096"),
    "--price-per-hour nan": ([*RUN, "--price-per-hour", "nan"], "'nan' is not a finite number"),
    "-p lr=nan": (
        ["run", "training.gpt", "--device", "cpu", "-p", "lr=nan"],
        "training.gpt parameter lr: 'nan' is not a finite number",
    ),
    "-p time_budget_s=inf": (
        ["run", "training.resnet", "--device", "cpu", "-p", "time_budget_s=inf"],
        "training.resnet parameter time_budget_s: 'inf' is not a finite number",
    ),
    "-p sustained_s=nan": (
        ["run", "kernels.ceilings", "--device", "cpu", "-p", "sustained_s=nan"],
        "kernels.ceilings parameter sustained_s: 'nan' is not a finite number",
    ),
    "-p latency_ms=inf": (
        ["run", "inference.classifier", "--device", "cpu", "-p", "latency_ms=inf"],
        "inference.classifier parameter latency_ms: 'inf' is not a finite number",
    ),
    "-p size_bytes=full-width": (
        [*RUN, "-p", "size_bytes=\uff11\uff10\uff12\uff14"],
        "kernels.memory parameter size_bytes: '１０２４' is not written in ASCII digits",
    ),
    "-p size_bytes=2**70": (
        [*RUN, "-p", f"size_bytes={2**70}"],
        "kernels.memory parameter size_bytes: '1180591620717411303424' is outside the 64-bit integer range",
    ),
    # ASCII digits alone: Python's int() and float() read "1_0" as 10
    "--timeout 1_0": ([*RUN, "--timeout", "1_0"], "Invalid value for '--timeout': '1_0' is not a number"),
    "--seed 1_0": ([*RUN, "--seed", "1_0"], "Invalid value for '--seed': '1_0' is not an integer"),
    "-p size_bytes=1_000": (
        [*RUN, "-p", "size_bytes=1_000"],
        "kernels.memory parameter size_bytes: '1_000' is not an integer (ASCII digits only",
    ),
    # a list parameter names each item once: two cases recorded, one measured
    "-p ops=copy,copy": ([*RUN, "-p", "ops=copy,copy"], "kernels.memory parameter ops: copy given more than once"),
    # endpoints parsed: torchrun fails only after its rendezvous timeout
    "--rdzv-endpoint host:99999": (
        [*RUN, "--rdzv-endpoint", "host:99999"],
        "Invalid value for '--rdzv-endpoint': 'host:99999': the port '99999' is not a number from 1 to 65535",
    ),
    "--rdzv-endpoint host:65535 --repeat 2": (
        [*RUN, "--rdzv-endpoint", "127.0.0.1:65535", "--repeat", "2"],
        "--rdzv-endpoint 127.0.0.1:65535: 2 runs take ports 65535 to 65536, above 65535",
    ),
    # non-finite numbers and integers beyond 64 bits, on the registry's commands too
    "reproduce --threshold nan": (
        ["reproduce", "0" * 32, "--threshold", "nan"],
        "Invalid value for '--threshold': 'nan' is not a finite number",
    ),
    "history --min-step nan": (
        ["history", "--workload", "kernels.memory", "--min-step", "nan"],
        "Invalid value for '--min-step': 'nan' is not a finite number",
    ),
    "results --limit 10**23": (
        ["results", "--limit", "99999999999999999999999"],
        "Invalid value for '--limit': 99999999999999999999999 is not in the range 1<=x<=9223372036854775807",
    ),
    # names hold no control characters
    "history --system with a newline": (
        ["history", "--workload", "kernels.memory", "--system", "box\nInjected: line"],
        "Invalid value for '--system': 'box\\nInjected: line' holds a control character (0x0a)",
    ),
}

# Plan files refused before anything runs: name -> (the plan's text, what the one line says).
# None as the text: the name says what stands in the plan's place (bad_plan makes it).
ENTRY = '[[run]]\nworkloads = ["kernels.memory"]\nquick = true\ndevice = "cpu"\n'
BAD_PLANS = {
    "a FIFO": (None, "not a regular file"),
    "/dev/zero": (None, "plan /dev/zero: not a regular file"),
    "over 1 MiB": (ENTRY + "#" * (1024 * 1024) + "\n", "over the 1,048,576-byte limit of a plan"),
    "nested 100,000 deep": (
        ENTRY + "params = { ops = " + "[" * 100_000 + "]" * 100_000 + " }\n",
        "nests tables or arrays too deeply to read",
    ),
    "200,000 runs": (
        '[defaults]\nrepeat = 1000\ndevice = "cpu"\n' + '[[run]]\nworkloads = ["kernels.memory"]\n' * 200,
        "200,000 runs, over the limit of 10,000 runs a plan may make",
    ),
    "workloads = 5": ("[[run]]\nworkloads = 5\n", "run 1: workloads is an array of workload names, not an integer"),
    "seed = true": (ENTRY + "seed = true\n", "run 1: seed is a boolean, not an integer"),
    "repeat = 2.5": (ENTRY + "repeat = 2.5\n", "run 1: repeat is a number, not an integer"),
    "a table as label": (ENTRY + "label = { a = 1 }\n", "run 1: label is a table, not a string"),
    "a newline in a label": (ENTRY + 'label = "a\\nb"\n', "run 1: label 'a\\nb': holds a control character"),
    "slurm = true": (
        ENTRY + "slurm = true\n",
        "run 1: slurm cannot be set in a plan: give --slurm on the command line",
    ),
    "db = ...": (
        ENTRY + 'db = "sqlite:///other.db"\n',
        "run 1: db cannot be set in a plan: give --db on the command line",
    ),
}


def bad_plan(folder: Path, name: str) -> str:
    """The path to give ``--plan`` for the bad plan ``name`` of :data:`BAD_PLANS`, made in ``folder``."""
    text, _ = BAD_PLANS[name]
    if name == "/dev/zero":
        return "/dev/zero"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"plan-{sum(map(ord, name))}.toml"
    if name == "a FIFO":
        os.mkfifo(path)
    else:
        assert text is not None
        path.write_text(text)
    return str(path)


# Records whose dates no clock that was right can stamp: name -> the year of both timestamps.
BAD_DATES = {"dated year 9999": "9999", "dated year 0001": "0001"}


def dated_record(year: str) -> dict:
    """A record, otherwise valid, started and finished in ``year``."""
    record = make_record(device="cuda", host="box1")
    record["started_at"] = f"{year}-06-01T12:00:00+00:00"
    record["finished_at"] = f"{year}-06-01T12:00:05+00:00"
    return sign(record)


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "4m") -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``path`` (root only), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def can_mount(tmp: Path) -> bool:
    """Whether this process may mount a tmpfs (root in a container may not)."""
    if not is_root():
        return False
    probe = tmp / "mount-probe"
    probe.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
    if done.returncode != 0:
        return False
    subprocess.run(["umount", str(probe)], check=True)
    return True


def leftovers(tmpdir: Path) -> list[str]:
    """The run's temporary folders still in ``tmpdir``: ``perfsuite-*`` and torchrun's ``torchelastic_*``."""
    if not tmpdir.exists():
        return []
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith(("perfsuite-", "torchelastic_")))


def wait_for_no_leftovers(tmpdir: Path, deadline_s: float = 20.0) -> list[str]:
    deadline = time.monotonic() + deadline_s
    while leftovers(tmpdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leftovers(tmpdir)


# -- signals in the window between writing a record and storing it -----------------------------
@dataclass
class Try:
    """One ``perfsuite run`` signalled after its record file appeared."""

    signal: int
    record: Path | None  # the record file that appeared (None: none did before it ended)
    signalled: bool  # whether it was still running when the signal was sent
    returncode: int
    stderr: str


def signal_in_window(
    env: dict, records: Path, sig: int, tries: int, budget_s: float, workload: str = "survive.ok"
) -> list[Try]:
    """Run ``workload`` again and again; each time its record file appears in ``records``, wait
    0-50 ms and send ``sig``. At least two tries, at most ``tries``, and no new one after
    ``budget_s`` seconds."""
    done: list[Try] = []
    rng = random.Random(24)
    deadline = time.monotonic() + budget_s
    while len(done) < tries and (len(done) < 2 or time.monotonic() < deadline):
        before = set(records.glob("*.json")) if records.exists() else set()
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfsuite", "run", workload, *RUN_ARGS],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        appeared = None
        while proc.poll() is None and appeared is None:
            found = set(records.glob("*.json")) - before if records.exists() else set()
            if found:
                appeared = found.pop()
            else:
                time.sleep(0.002)
        signalled = False
        if appeared is not None and proc.poll() is None:
            time.sleep(rng.uniform(0.0, 0.05))
            if proc.poll() is None:
                proc.send_signal(sig)
                signalled = True
        _, err = proc.communicate(timeout=300)
        if appeared is None:  # it ended before the poll saw the file
            found = set(records.glob("*.json")) - before if records.exists() else set()
            appeared = found.pop() if found else None
        done.append(Try(sig, appeared, signalled, proc.returncode, err))
    return done


# -- hostile submission trees -------------------------------------------------------------------
ANSI_NAME = "\x1b[2J\x1b[31mred\nline.json"  # clears the screen, turns red, splits a line


def hostile_tree(root: Path) -> dict[str, str]:
    """A submissions tree with one clean record and each hostile thing of the issue; returns
    what each hostile entry is -> its path relative to ``root``."""
    from perfsuite.publish.submissions.tree import record_text, system_description

    record = make_record(device="cuda", gpu_count=1, host="box1")
    org = root / "acme"
    results = org / "results" / "box" / "kernels.gemm"
    results.mkdir(parents=True)
    (org / "systems").mkdir()
    (results / f"{record['run_id']}.json").write_text(record_text(record))
    (org / "systems" / "box.json").write_text(json.dumps(system_description(record, "acme", "box")))
    entries = {}
    loop = results / "0123456789abcdef0123456789abcdef.json"
    os.symlink(loop.name, loop)  # a symlink to itself
    entries["symlink loop"] = str(loop.relative_to(root))
    fifo = results / "fedcba9876543210fedcba9876543210.json"
    os.mkfifo(fifo)
    entries["FIFO"] = str(fifo.relative_to(root))
    deep = org / "systems" / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    entries["200,000-deep system JSON"] = str(deep.relative_to(root))
    big = org / "systems" / "big.json"
    big.write_text('{"system_name": "big", "number_of_nodes": ' + "7" * 5000 + "}")
    entries["5,000-digit integer"] = str(big.relative_to(root))
    odd = org / "results" / "box" / ANSI_NAME
    odd.write_text("{}")
    entries["ANSI codes and a newline in a name"] = str(odd.relative_to(root))
    return entries


# -- extreme but schema-valid records ---------------------------------------------------------------
def extreme_records() -> dict[str, dict]:
    """Records that follow the schema and carry figures no measurement can produce."""
    huge = gemm_metrics()
    huge[1] = make_metric("bf16", "tflops", "TFLOP/s", [1e300] * 5, higher_is_better=True)
    near_overflow = gemm_metrics()
    near_overflow.append(make_metric("bf16", "gbps", "GB/s", [1e308], higher_is_better=True))
    negative = gemm_metrics(time_ms=(-1.0, -2.0, -1.5, -1.2, -1.1))
    negative[1] = make_metric("bf16", "tflops", "TFLOP/s", [2.0] * 5, higher_is_better=True)
    reversed_times = make_record(device="cuda", host="box1")
    reversed_times["started_at"] = "9999-01-15T12:00:00+00:00"
    reversed_times["finished_at"] = "1999-01-15T12:00:00+00:00"
    return {
        "1e300 TFLOP/s": make_record(device="cuda", host="box1", metrics=huge),
        "1e308 GB/s": make_record(device="cuda", host="box1", metrics=near_overflow),
        "negative durations": make_record(device="cuda", host="box1", metrics=negative),
        "finished 8,000 years before it started": sign(reversed_times),
    }
