"""Tries the safety faults and bad inputs against the installed perfsuite, with real processes
and real filesystems, and prints their tally:

    faults tried, survived, records lost
    bad inputs tried, one-line refusals, tracebacks, hangs

Usage (as root for the tmpfs faults; elsewhere they are left out and said so):

    python tools/safety_tally.py [--kills N] [--timeout S] [--inputs-only]

Each fault runs ``perfsuite run`` of a small plugin workload that breaks something while it
measures (fills or remounts the records folder, replaces the records folder and the registry
with files, blocks the fallback folders too), or signals it (SIGKILL, SIGTERM) 0-50 ms after
its record file appears. A fault is survived when its record ends up in the registry, in a
file a line named, or printed whole on stderr (``perfsuite import`` of that file stores it);
a record is lost when none of those holds. Each bad input runs as its own process under a
timeout (and its address space capped at 4 GiB, so that one reading forever fails rather
than taking the machine): a refusal is one line (a tree's problems one line each), exit
non-zero, no traceback; a process still running at the timeout is a hang. ``--inputs-only``
leaves the faults out (seconds rather than minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.factories import make_record  # noqa: E402
from support.safety_support import (  # noqa: E402
    BAD_DATES,
    BAD_OPTIONS,
    BAD_PLANS,
    PLUGIN,
    RUN_ARGS,
    bad_plan,
    can_mount,
    dated_record,
    extreme_records,
    hostile_tree,
    leftovers,
    signal_in_window,
    tmpfs,
    wait_for_no_leftovers,
)

# The heading each fault and bad input is tallied under.
KEPT = "records folder full, read-only or gone mid-run: the measurement kept"
WINDOW = "kill -9 / SIGTERM between writing a record and storing it: stored or named, then imported"
TEMPORARIES = "no perfsuite-* or torchelastic_* folder after a torchrun run or a kill"
SYMLINKS = "submit into a tree with planted symlinks: refused before writing"
HOSTILE = "hostile trees and files for check and import"
OPTIONS = "non-finite, out-of-range and non-ASCII options and parameters: refused before the run"
PLANS = "plan files that block, never end, nest, run too much or break the schema: refused before the run"
EXTREMES = "extreme but schema-valid records: refused by import"
REGISTRIES = "--db that is not a database, or cannot be reached"


@dataclass
class Outcome:
    item: str
    name: str
    ok: bool
    detail: str


def environment(base: Path) -> dict:
    """A registry, records folder, data folder and TMPDIR of their own, and the plugin."""
    site = base / "site"
    site.mkdir(parents=True)
    (site / "ps_test_survive.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "perfsuite_test_survive-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: perfsuite-test-survive\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[perfsuite]\nsurvive = ps_test_survive\n")
    (base / "tmp").mkdir()
    env = dict(os.environ)
    env.update(
        {
            "PERFSUITE_DB": f"sqlite:///{base / 'registry.db'}",
            "PERFSUITE_RECORDS": str(base / "records"),
            "XDG_DATA_HOME": str(base / "data"),
            "PERFSUITE_PLUGINS": "survive",
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO), env.get("PYTHONPATH", "")]),
            "TMPDIR": str(base / "tmp"),
            "COLUMNS": "200",
        }
    )
    return env


MEMORY_CAP = 4 * 1024**3  # of a bad input's process: one that reads forever fails, not the machine


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(env: dict, *args: str, timeout: float = 600, capped: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_capped if capped else None,
    )


def stored(env: dict) -> set[str]:
    return {r["run_id"] for r in json.loads(cli(env, "results", "--json", "--limit", "100000").stdout or "[]")}


def _named_file(stderr: str) -> Path | None:
    for marker in ("its file is at ", "its record is at "):
        for line in stderr.splitlines():
            if marker in line:
                return Path(line.split(marker, 1)[1].split(": ", 1)[0])
    return None


def _survived(env: dict, proc: subprocess.CompletedProcess, base: Path, name: str) -> Outcome:
    """Whether the run's record is in the registry, in a named file, or printed whole."""
    if "Traceback" in proc.stderr:
        return Outcome(KEPT, name, False, "traceback: " + proc.stderr.strip().splitlines()[-1])
    later = dict(env, PERFSUITE_DB=f"sqlite:///{base / (name.replace(' ', '-') + '-later.db')}")
    named = _named_file(proc.stderr)
    if named is not None and named.is_file():
        done = cli(later, "import", str(named))
        return Outcome(KEPT, name, done.returncode == 0, f"named file {named}: {done.stdout.strip()}")
    printed = [line for line in proc.stderr.splitlines() if line.startswith("{")]
    if printed:
        saved = base / f"{name.replace(' ', '-')}-printed.json"
        saved.write_text(printed[-1])
        done = cli(later, "import", str(saved))
        return Outcome(KEPT, name, done.returncode == 0, f"printed on stderr: {done.stdout.strip()}")
    if stored(env):
        return Outcome(KEPT, name, True, "in the registry")
    return Outcome(KEPT, name, False, "nowhere: " + proc.stderr.strip()[-300:])


def faults(base: Path, kills: int) -> tuple[list[Outcome], list[str]]:
    outcomes, skipped = [], []
    mountable = can_mount(base)
    for fault in ("records folder full", "records folder remounted read-only"):
        if not mountable:
            skipped.append(f"{fault} (needs root allowed to mount a tmpfs)")
            continue
        case = base / fault.replace(" ", "-")
        env = environment(case)
        with tmpfs(case / "records", size="1m") as records:
            env["PERFSUITE_RECORDS"] = str(records)
            if "full" in fault:
                env["SURVIVE_FILL"], workload = str(records), "survive.fill_records"
            else:
                env["SURVIVE_REMOUNT"], workload = str(records), "survive.remount"
            proc = cli(env, "run", workload, *RUN_ARGS)
            outcomes.append(_survived(env, proc, case, fault))
            if list(records.rglob("*.tmp")):
                outcomes[-1] = Outcome(KEPT, fault, False, "a .tmp file left in the records folder")
        if leftovers(case / "tmp"):
            outcomes[-1] = Outcome(KEPT, fault, False, f"temporary folders left: {leftovers(case / 'tmp')}")
    for fault, block_fallbacks in (("records folder and registry gone", False), ("every folder gone", True)):
        case = base / fault.replace(" ", "-")
        env = environment(case)
        registry_dir = case / "registry"
        registry_dir.mkdir()
        env["PERFSUITE_DB"] = f"sqlite:///{registry_dir / 'registry.db'}"
        env["SURVIVE_BREAK"] = os.pathsep.join([str(case / "records"), str(registry_dir)])
        if block_fallbacks:
            for blocked in (
                case / "data" / "perfsuite" / "rescued-records",
                case / "tmp" / f"rescued-records-{os.getuid()}",
            ):
                blocked.parent.mkdir(parents=True, exist_ok=True)
                blocked.write_text("a file where the fallback folder would go")
        proc = cli(env, "run", "survive.break_folders", *RUN_ARGS)
        outcomes.append(_survived(env, proc, case, fault))
    for sig in (signal.SIGKILL, signal.SIGTERM):
        case = base / f"signal-{sig.name}"
        env = environment(case)
        records = case / "records"
        tries = signal_in_window(env, records, sig, kills, budget_s=float("inf"))
        cli(env, "import", str(records))
        have = stored(env)
        for i, t in enumerate(tries):
            name = f"{sig.name} {i + 1} ({'in the window' if t.signalled else 'after it ended'})"
            if t.record is None:
                outcomes.append(Outcome(WINDOW, name, False, "no record file appeared: " + t.stderr.strip()[-200:]))
            elif "Traceback" in t.stderr:
                outcomes.append(Outcome(WINDOW, name, False, "traceback"))
            else:
                ok = t.record.stem in have
                outcomes.append(Outcome(WINDOW, name, ok, "stored after import" if ok else "not stored after import"))
        left = wait_for_no_leftovers(case / "tmp")
        outcomes.append(Outcome(TEMPORARIES, f"{len(tries)} runs signalled with {sig.name}", not left, f"left: {left}"))
    outcomes += torchrun_temporaries(base, skipped)
    return outcomes, skipped


def torchrun_temporaries(base: Path, skipped: list[str]) -> list[Outcome]:
    """A torchrun run of two ranks that ends, and one whose runner is killed (-9) while both
    ranks measure: neither leaves a ``perfsuite-*`` or ``torchelastic_*`` folder in TMPDIR."""
    try:
        import torch  # noqa: F401
    except ImportError:
        skipped.append("torchrun runs (torch is not installed)")
        return []
    out = []
    case = base / "torchrun-ends"
    env = environment(case)
    proc = cli(env, "run", "survive.ok_pair", "--nproc-per-node", "2", *RUN_ARGS)
    left = leftovers(case / "tmp")
    ok = proc.returncode == 0 and not left
    out.append(Outcome(TEMPORARIES, "a torchrun run of 2 ranks that ends", ok, f"exit {proc.returncode}, left: {left}"))
    case = base / "torchrun-killed"
    env = environment(case)
    env["SURVIVE_MARKER"] = str(case / "marker")
    runner = subprocess.Popen(
        [sys.executable, "-m", "perfsuite", "run", "survive.hang_pair", "--nproc-per-node", "2", *RUN_ARGS],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    markers = [case / "marker.0", case / "marker.1"]
    deadline = time.monotonic() + 300
    while not all(m.exists() for m in markers) and runner.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    measuring = all(m.exists() for m in markers)
    runner.kill()
    runner.communicate()
    left = wait_for_no_leftovers(case / "tmp", deadline_s=60)
    detail = f"left: {left}" if measuring else "the ranks never started measuring"
    out.append(Outcome(TEMPORARIES, "kill -9 of a torchrun run while 2 ranks measure", measuring and not left, detail))
    return out


def _one_line(proc: subprocess.CompletedProcess) -> tuple[bool, str]:
    lines = proc.stderr.strip().splitlines()
    ok = proc.returncode != 0 and "Traceback" not in proc.stderr and len(lines) == 1 and lines[0].startswith("Error:")
    return ok, lines[-1] if lines else f"exit {proc.returncode}, no message"


def bad_inputs(base: Path, timeout: float) -> list[tuple[str, str, str]]:
    """(item, name, verdict): verdict is 'one line', 'traceback', 'hang' or 'other: ...'."""
    env = environment(base / "inputs")
    out: list[tuple[str, str, str]] = []

    def judge(item: str, name: str, args: list[str], expected_lines: int | None = None) -> None:
        try:
            proc = cli(env, *args, timeout=timeout, capped=True)
        except subprocess.TimeoutExpired:
            out.append((item, name, "hang"))
            return
        if "Traceback" in proc.stderr + proc.stdout:
            out.append((item, name, "traceback"))
            return
        if expected_lines is None:
            ok, line = _one_line(proc)
        else:  # a tree: one line per problem, each starting "problem: ", and no raw control character
            problems = [x for x in proc.stderr.splitlines() if x.startswith("problem: ")]
            ok = proc.returncode != 0 and len(problems) == expected_lines and "\x1b" not in proc.stderr
            line = f"{len(problems)} problem lines"
        out.append((item, name, "one line" if ok else f"other: {line}"))

    for name, (args, _) in BAD_OPTIONS.items():
        judge(OPTIONS, name, list(args))
    for name in BAD_PLANS:
        judge(PLANS, f"--plan: {name}", ["run", "--plan", bad_plan(base / "plans", name)])
    tree = base / "tree"
    entries = hostile_tree(tree)
    for command in ("check", "import"):
        judge(
            HOSTILE, f"{command} of a tree with {', '.join(entries)}", [command, str(tree)], expected_lines=len(entries)
        )
    for what, rel in entries.items():
        if what == "FIFO":
            judge(HOSTILE, f"import of a {what} named as a record", ["import", str(tree / rel)])
    for i, (what, record) in enumerate(extreme_records().items()):
        path = base / f"extreme{i}.json"
        path.write_text(json.dumps(record))
        judge(EXTREMES, f"import of a record with {what}", ["import", str(path)])
    for what, year in BAD_DATES.items():
        path = base / f"dated-{year}.json"
        path.write_text(json.dumps(dated_record(year)))
        judge(EXTREMES, f"import of a record {what}", ["import", str(path)])
    fifo = base / "registry-fifo.db"
    os.mkfifo(fifo)
    for url in ("sqlite:////dev/null", f"sqlite:///{fifo}", "postgresql+psycopg2://u@127.0.0.1:1/db"):
        judge(REGISTRIES, f"--db {url} results", ["--db", url, "results"])
    run = make_record(device="cuda", gpu_count=1, host="box1")
    stored_file = base / "to-submit.json"
    stored_file.write_text(json.dumps(run))
    cli(env, "import", str(stored_file))
    for planted in ("results folder", "system file", "record file"):
        root = base / f"subs-{planted.replace(' ', '-')}"
        victim = base / f"victim-{planted.replace(' ', '-')}.txt"
        victim.write_text("precious")
        org = root / "acme"
        if planted == "results folder":
            org.mkdir(parents=True)
            (org / "results").symlink_to(victim.parent)
        elif planted == "system file":
            (org / "systems").mkdir(parents=True)
            (org / "systems" / "box.json").symlink_to(victim)
        else:
            folder = org / "results" / "box" / run["workload"]["name"]
            folder.mkdir(parents=True)
            (folder / f"{run['run_id']}.json").symlink_to(victim)
        judge(
            SYMLINKS,
            f"submit into a tree with a planted {planted} symlink",
            ["submit", run["run_id"], "--org", "acme", "--system", "box", "--root", str(root)],
        )
        if victim.read_text() != "precious":
            out[-1] = (SYMLINKS, out[-1][1], "other: the file behind the symlink was written")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=12, help="signals of each kind in the write-to-commit window")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a bad input counts as a hang")
    parser.add_argument("--inputs-only", action="store_true", help="leave the faults out: the bad inputs alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="safety-tally-") as tmp:
        base = Path(tmp)
        fault_outcomes, skipped = (
            ([], ["every fault (--inputs-only)"]) if args.inputs_only else faults(base, args.kills)
        )
        inputs = bad_inputs(base, args.timeout)
    for item in (KEPT, WINDOW, TEMPORARIES):
        mine = [o for o in fault_outcomes if o.item == item]
        print(f"{item}: {len(mine)} tried, {sum(o.ok for o in mine)} survived")
        for o in mine:
            print(f"  {'survived' if o.ok else 'LOST':8}  {o.name}: {o.detail}")
    for reason in skipped:
        print(f"fault skipped: {reason}")
    for item in (OPTIONS, PLANS, HOSTILE, SYMLINKS, EXTREMES, REGISTRIES):
        mine = [(name, verdict) for it, name, verdict in inputs if it == item]
        print(f"{item}: {len(mine)} tried, {sum(v == 'one line' for _, v in mine)} refused in one line")
        for name, verdict in mine:
            print(f"  {verdict:10}  {name}")
    survived = sum(o.ok for o in fault_outcomes)
    print()
    print(f"faults tried: {len(fault_outcomes)}, survived: {survived}, records lost: {len(fault_outcomes) - survived}")
    verdicts = [v for _, _, v in inputs]
    print(
        f"bad inputs tried: {len(inputs)}, one-line refusals: {verdicts.count('one line')}, "
        f"tracebacks: {verdicts.count('traceback')}, hangs: {verdicts.count('hang')}, "
        f"other: {sum(v.startswith('other') for v in verdicts)}"
    )


if __name__ == "__main__":
    main()
