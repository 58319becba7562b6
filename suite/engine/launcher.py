"""How the measuring process is started: one local process, ranks through torchrun
(``torch.distributed.run``), or a rank of a SLURM job step (``srun perfsuite run ...``).

- One process: ``python -m perfsuite.engine.worker SPEC``.
- torchrun: ``--standalone`` on one node; across nodes a static rendezvous at
  ``--rdzv-endpoint`` with ``--node-rank``, so that global rank 0 is always on node 0,
  the node that stores the record (c10d rendezvous hands out ranks in order of arrival).
  The k-th launch of one command (several workloads, --repeat) uses port + k.
- SLURM: inside a step of several tasks each task is one rank; rank, world size, local
  rank and the master address come from SLURM's variables, the port from the job id.

On GPUs every process is started with NVLink multicast (NVLS) and NCCL's flight recorder off,
unless the user set those variables: a setting the user made is never overridden, and the
record says which settings were the suite's and which the user's. torch's elastic agent
starts each rank in a session of its own, so killing the launcher's process group does not
reach the ranks: :func:`perfsuite.processes.kill_tree` kills every descendant, and every
process that carries this launch's tag in its environment (a rank re-parented after its agent
died).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.engine.slurm import stepwatch
from perfsuite.files import write_atomic
from perfsuite.processes import SPEC_ENV, TAG_ENV

NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
# torch's NCCL flight recorder (a trace entry per collective) costs 20-25 us of host time per
# Python-launched collective: measured on 2xH200 with torch 2.11, an 8 B all_reduce loop took
# 47 us per call with it and 21 us without, which made eager collectives up to 32 MiB
# launch-bound against nccl-tests. Off for measuring processes unless the user set it.
# torch 2.11 reads TORCH_FR_BUFFER_SIZE and still honours the older name, with a deprecation warning.
FLIGHT_RECORDER_OFF = {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}
# NCCL's support for mixing graph and eager launches on one communicator puts an EVENT_RECORD
# node after every captured kernel. Measured on 2xH200 (NCCL 2.28.9, tools/probes/graph_probe.py):
# a graph of 20 all_reduces of 8 B-64 KiB ran 9.3-11.3 us per call with it and 4.8-6.2 us
# without; a graph of 200, 27-31 us with it (the gaps between kernels grow along the graph)
# and 4.7-5.9 without. NCCL's rule with it off: no graph launch still running when an
# eager NCCL call is issued. The suite's CUDA-graph loops keep it: every timed replay is
# synchronised before any eager call. Off for --cuda-graph runs unless the user set it;
# nccl-tests, started by rank 0 in the cross-check, inherits the same setting.
GRAPH_MIXING_OFF = {"NCCL_GRAPH_MIXING_SUPPORT": "0"}


# Names that set one thing (torch's new and deprecated spelling of the flight recorder's size):
# where the user set any of them, the suite sets none, or its spelling could win over the user's.
ALIASES = (tuple(FLIGHT_RECORDER_OFF),)


def _defaults(device: str, cuda_graph: bool) -> dict[str, str]:
    """Every variable the suite would set for measuring processes on ``device``, with its value."""
    if device != "cuda":
        return {}
    env = dict(NVLS_OFF)  # NVLink multicast off on shared hosts, unless the user turned it on
    env.update(FLIGHT_RECORDER_OFF)
    if cuda_graph:
        env.update(GRAPH_MIXING_OFF)
    return env


def _user_set(name: str) -> bool:
    """Whether the user set ``name``, or another name for the same setting."""
    group = next((g for g in ALIASES if name in g), (name,))
    return any(n in os.environ for n in group)


def suite_env(device: str, cuda_graph: bool = False) -> dict[str, str]:
    """The variables the suite sets for measuring processes on ``device`` (recorded in each
    record's ``launch.env``): its defaults, each only where the user set nothing. What they are
    is part of what was measured."""
    return {k: v for k, v in _defaults(device, cuda_graph).items() if not _user_set(k)}


def user_env(device: str, cuda_graph: bool = False) -> dict[str, str]:
    """The user's own settings of the variables the suite would otherwise set (recorded in each
    record's ``launch.user_env``): they stand, and are passed on to every rank unchanged."""
    return {k: os.environ[k] for k in _defaults(device, cuda_graph) if k in os.environ}


# Rendezvous ports of SLURM steps: below Linux's ephemeral range (32768-60999), where other
# jobs' stores and connections come and go and a rank could join a stranger's store.
SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 12000


# Ranks of a rank-per-GPU workload (the collectives) on the CPU, where no GPU count says how
# many: two gloo processes, the fewest between which a collective moves anything.
CPU_RANKS = 2


def gpus_visible(environ: "os._Environ[str] | dict[str, str]" = os.environ, count: int | None = None) -> int:
    """The GPUs a process started here may use: NVML's count (``count`` when given), narrowed by
    ``CUDA_VISIBLE_DEVICES`` as CUDA reads it: an empty value hides every GPU, and the list ends
    at its first entry that names no GPU (an index past the count, ``-1``, anything else)."""
    if count is None:
        from perfsuite.measure import nvml

        count = nvml.device_count()
    spec = environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return count
    seen = 0
    for item in (s.strip() for s in spec.split(",")):
        named = int(item) < count if item.isdigit() else item.startswith(("GPU-", "MIG-"))
        if not named:
            break
        seen += 1
    return min(seen, count)


def default_nproc_per_node(requirements: Any, device: str, gpus: int) -> int:
    """Ranks a run gets on one node when ``--nproc-per-node`` is not given, from the workload's
    requirements (``perfsuite.Requirements``) and the GPUs visible: one process, or for a
    rank-per-GPU workload one rank per GPU on ``cuda`` (``CPU_RANKS`` gloo ranks on the CPU).
    On ``cuda`` never more ranks than GPUs: NCCL refuses two ranks on one GPU ("Duplicate GPU
    detected"), so a workload that needs more ranks than there are GPUs gets the GPUs there are
    and is skipped with its reason (``perfsuite.engine.runner.static_unmet``), never failed."""
    wanted = (gpus if device == "cuda" else CPU_RANKS) if requirements.rank_per_gpu else 1
    wanted = max(wanted, requirements.min_world_size, 1)
    if device == "cuda" and gpus >= 1:
        wanted = min(wanted, gpus)
    if requirements.max_world_size is not None:
        wanted = min(wanted, requirements.max_world_size)
    return wanted


class LaunchError(ValueError):
    """Launch options that cannot work together; the message is one line."""


@dataclass(frozen=True)
class LaunchOptions:
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    launcher: str  # local | torchrun | slurm
    world_size: int
    nnodes: int
    nproc_per_node: int
    rdzv_endpoint: str | None
    records: bool  # whether this process stores the record (rank 0's side only)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)  # in every process's env, for kill_tree
    index: int = 0  # the how-manieth launch of this process (rendezvous ports, the ranks' exit notes)


# Launches made by this process so far: consecutive runs of one SLURM step (several
# workloads, --repeat) each get their own rendezvous port, identical on every task because
# every task runs the same command line.
_launch_counter = itertools.count()


def build(spec_path: str, opts: LaunchOptions, device: str, cuda_graph: bool = False) -> Launch:
    """The command that runs ``python -m perfsuite.engine.worker SPEC`` as the options ask."""
    env = dict(os.environ)
    env.update(suite_env(device, cuda_graph))
    env[SPEC_ENV] = str(spec_path)
    index = next(_launch_counter)
    worker = [sys.executable, "-m", "perfsuite.engine.worker", str(spec_path)]
    if opts.nnodes == 1 and opts.rdzv_endpoint is None and slurm_world() > 1:
        launch = _slurm(worker, env, index)
    elif opts.nproc_per_node * opts.nnodes == 1:
        launch = Launch(worker, env, "local", 1, 1, 1, None, True)
    else:
        launch = _torchrun(worker, env, opts, index)
    launch.env[TAG_ENV] = launch.tag
    launch.index = index
    if stepwatch.in_step():
        stepwatch.start()  # this task ends its measuring processes once its step is gone
    return launch


def validate(opts: LaunchOptions) -> None:
    """Raise :class:`LaunchError` for options that cannot work together, before any run
    starts (the same checks :func:`build` makes when it launches)."""
    if opts.nnodes > 1 and opts.rdzv_endpoint is None:
        raise LaunchError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address)")
    if opts.rdzv_endpoint is not None:
        endpoint_for_launch(opts.rdzv_endpoint, 0)
        if "SLURM_NODEID" not in os.environ and not 0 <= opts.node_rank < opts.nnodes:
            raise LaunchError(f"--node-rank {opts.node_rank} is outside 0..{opts.nnodes - 1}")


def stores_records(opts: LaunchOptions) -> bool:
    """Whether this process stores the records of runs launched with ``opts``: rank 0's
    side only (the same decision :func:`build` makes in ``Launch.records``)."""
    if opts.nnodes == 1 and opts.rdzv_endpoint is None and slurm_world() > 1:
        return int(os.environ["SLURM_PROCID"]) == 0
    if opts.nnodes > 1 or opts.rdzv_endpoint is not None:
        node_rank = opts.node_rank
        if node_rank == 0 and "SLURM_NODEID" in os.environ:
            node_rank = int(os.environ["SLURM_NODEID"])
        return node_rank == 0
    return True


def _torchrun(worker: list[str], env: dict[str, str], opts: LaunchOptions, index: int) -> Launch:
    # torchrun runs under perfsuite.engine.lifeline: it and its ranks end when the runner dies.
    argv = [
        sys.executable,
        "-m",
        "perfsuite.engine.lifeline",
        "torch.distributed.run",
        f"--nproc-per-node={opts.nproc_per_node}",
        f"--nnodes={opts.nnodes}",
        "--max-restarts=0",
    ]
    node_rank = opts.node_rank
    if opts.nnodes == 1 and opts.rdzv_endpoint is None:
        argv.append("--standalone")
    else:
        if opts.rdzv_endpoint is None:
            raise LaunchError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address)")
        if node_rank == 0 and "SLURM_NODEID" in os.environ:
            node_rank = int(os.environ["SLURM_NODEID"])  # one torchrun per node of a SLURM step
        if not 0 <= node_rank < opts.nnodes:
            raise LaunchError(f"--node-rank {node_rank} is outside 0..{opts.nnodes - 1}")
        endpoint = endpoint_for_launch(opts.rdzv_endpoint, index)
        argv += [
            "--rdzv-backend=static",
            f"--rdzv-endpoint={endpoint}",
            f"--node-rank={node_rank}",
            f"--rdzv-id=perfsuite-{index}",
        ]
        return Launch(
            argv + worker[1:],
            env,
            "torchrun",
            opts.nproc_per_node * opts.nnodes,
            opts.nnodes,
            opts.nproc_per_node,
            endpoint,
            node_rank == 0,
        )
    return Launch(
        argv + worker[1:], env, "torchrun", opts.nproc_per_node * opts.nnodes, 1, opts.nproc_per_node, None, True
    )


def endpoint_for_launch(endpoint: str, index: int) -> str:
    """``host:port`` of this process's ``index``-th launch: port + index, so that a node still
    busy with the previous workload never serves the next one's rendezvous (every node runs
    the same command line, so the indices agree)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise LaunchError(f"--rdzv-endpoint {endpoint!r} is not HOST:PORT")
    return f"{host}:{int(port) + index}"


# -- SLURM ------------------------------------------------------------------------------
def slurm_world() -> int:
    """Tasks of the SLURM job step (``srun``) this process is one of; 1 outside a step.

    SLURM_STEP_NUM_TASKS is set by srun only: a batch script itself (SLURM_NTASKS=8,
    SLURM_PROCID=0 there too) is not one of eight ranks and must not wait for seven more."""
    if "SLURM_PROCID" not in os.environ or "SLURM_STEP_NUM_TASKS" not in os.environ:
        return 1
    return int(os.environ["SLURM_STEP_NUM_TASKS"])


def _slurm(worker: list[str], env: dict[str, str], index: int) -> Launch:
    """This task is one rank: torch.distributed's env:// variables from SLURM's."""
    rank, world = int(os.environ["SLURM_PROCID"]), slurm_world()
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise LaunchError("SLURM step without SLURM_STEP_NODELIST / SLURM_JOB_NODELIST: cannot find rank 0's host")
    hosts = expand_hostlist(nodelist)
    nnodes = int(os.environ.get("SLURM_STEP_NUM_NODES") or os.environ.get("SLURM_NNODES") or len(hosts))
    local_world = _tasks_on_this_node(world, nnodes)
    env.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": os.environ.get("SLURM_LOCALID", "0"),
            "LOCAL_WORLD_SIZE": str(local_world),
            "MASTER_ADDR": env.get("MASTER_ADDR") or hosts[0],  # block distribution: task 0 on the first host
            "MASTER_PORT": str(slurm_port(index)),
        }
    )
    return Launch(
        worker, env, "slurm", world, nnodes, local_world, f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}", rank == 0
    )


def slurm_port(index: int) -> int:
    """Rendezvous port of this task's ``index``-th launch: the same on every task of the step
    (derived from the job and step ids), different for consecutive launches and steps."""
    job = os.environ.get("SLURM_JOB_ID", "0")
    step = os.environ.get("SLURM_STEP_ID", "0")
    base = (
        int(os.environ["MASTER_PORT"])
        if os.environ.get("MASTER_PORT")
        else (SLURM_PORT_BASE + zlib.crc32(f"{job}.{step}".encode()) % SLURM_PORT_SPAN)
    )
    return base + index


def _tasks_on_this_node(world: int, nnodes: int) -> int:
    """SLURM_NTASKS_PER_NODE, else this node's entry of SLURM_STEP_TASKS_PER_NODE ("4(x2),3")."""
    if os.environ.get("SLURM_NTASKS_PER_NODE"):
        return int(os.environ["SLURM_NTASKS_PER_NODE"])
    spec = os.environ.get("SLURM_STEP_TASKS_PER_NODE") or os.environ.get("SLURM_TASKS_PER_NODE")
    node = int(os.environ.get("SLURM_NODEID", "0"))
    if spec:
        per_node = expand_tasks_per_node(spec)
        if node < len(per_node):
            return per_node[node]
    return max(1, world // max(1, nnodes))


def expand_tasks_per_node(spec: str) -> list[int]:
    """SLURM's compressed tasks per node in full, one entry per node: ``4(x2),3`` -> 4, 4, 3."""
    per_node = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m is None:
            raise LaunchError(f"cannot read SLURM tasks per node {spec!r}")
        per_node += [int(m.group(1))] * int(m.group(2) or 1)
    return per_node


def slurm_job() -> dict | None:
    """The SLURM job (and step) this process runs in, as the record's ``launch.slurm`` states
    it; None outside a job. The nodes and tasks per node are the step's where this is a task
    of one (where the ranks ran), else the job's."""
    env = os.environ
    if not env.get("SLURM_JOB_ID"):
        return None
    in_step = "SLURM_STEP_ID" in env and "SLURM_STEP_NODELIST" in env
    nodelist = (env.get("SLURM_STEP_NODELIST") if in_step else None) or env.get("SLURM_JOB_NODELIST") or ""
    tasks = (env.get("SLURM_STEP_TASKS_PER_NODE") if in_step else None) or env.get("SLURM_TASKS_PER_NODE")
    index = env.get("SLURM_ARRAY_TASK_ID")
    return {
        "job_id": env["SLURM_JOB_ID"],
        "array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "array_index": int(index) if index is not None else None,
        "step_id": env.get("SLURM_STEP_ID") if in_step else None,
        "nodelist": expand_hostlist(nodelist),
        "tasks_per_node": expand_tasks_per_node(tasks) if tasks else [],
        "partition": env.get("SLURM_JOB_PARTITION"),
        "cluster": env.get("SLURM_CLUSTER_NAME"),
        "version": slurm_version(),
    }


SLURM_VERSION_ENV = "PERFSUITE_SLURM_VERSION"  # set by perfsuite's job scripts from `scontrol --version`


@functools.lru_cache(maxsize=1)
def slurm_version() -> str | None:
    """The scheduler's version ("22.05.8"): from the job script's ``PERFSUITE_SLURM_VERSION``,
    else ``scontrol --version``; None where neither answers (no scontrol on this node)."""
    text = os.environ.get(SLURM_VERSION_ENV)
    if not text:
        scontrol = shutil.which("scontrol")
        if scontrol is None:
            return None
        try:
            text = subprocess.run([scontrol, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None  # the record says "not known" rather than losing a finished measurement
    m = re.search(r"(\d+\.\d+\.\d+\S*)", text)
    return m.group(1) if m else None


def expand_hostlist(text: str) -> list[str]:
    """SLURM's compressed host list in full: ``node[01-03,07],gpu7`` -> node01, node02,
    node03, node07, gpu7 (zero padding kept; several bracket groups multiply out)."""
    hosts: list[str] = []
    for item in _split_top_level(text):
        hosts += _expand_one(item)
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, cur = [], 0, ""
    for ch in text.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise LaunchError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise LaunchError(f"unbalanced '[' in host list {text!r}")
    items.append(cur)
    return [i for i in (s.strip() for s in items) if i]


def _expand_one(item: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if m is None:
        return [item]
    prefix, rest = item[: m.start()], item[m.end() :]
    out = []
    for part in m.group(1).split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise LaunchError(f"cannot read range {part!r} in host list item {item!r}")
        width = len(lo)
        for n in range(int(lo), int(hi or lo) + 1):
            out += [f"{prefix}{n:0{width}d}{tail}" for tail in _expand_one(rest)]
    return out


# -- which rank died ---------------------------------------------------------------------------
# How long rank 0's side waits for the other ranks of a SLURM step to say how their measuring
# process ended, once its own run failed: each says so as soon as its process is gone.
RANK_EXIT_WAIT_S = 5.0
LOG_READ_BYTES = 1 << 16
# torchrun's report of a failed rank (torch.distributed.elastic's ChildFailedError):
#   rank      : 1 (local_rank: 1)
#   exitcode  : -9 (pid: 4242)
TORCHRUN_ROOT_CAUSE = "Root Cause (first observed failure)"
TORCHRUN_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def rank_exit_folder(launch: Launch) -> Path | None:
    """Where the ranks of one SLURM launch leave how their measuring process ended: the job's
    folder (shared by its nodes), one folder per step and launch; None outside perfsuite's jobs."""
    job_dir = os.environ.get(stepwatch.JOB_DIR_ENV)
    if launch.launcher != "slurm" or not job_dir:
        return None
    step = f"{os.environ.get('SLURM_JOB_ID', '0')}.{os.environ.get('SLURM_STEP_ID', '0')}.{launch.index}"
    return Path(job_dir) / "ranks" / step


def note_rank_exit(launch: Launch, returncode: int) -> None:
    """A rank of a SLURM step whose measuring process did not exit 0 says so for rank 0's side,
    which only sees its own collective fail ("Connection reset by peer")."""
    folder = rank_exit_folder(launch)
    if folder is None or returncode == 0:
        return
    rank = int(launch.env.get("RANK", "0"))
    note = {"rank": rank, "returncode": returncode, "host": socket.gethostname()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"rank-{rank}.exit.json", json.dumps(note))
    except OSError as exc:  # rank 0's record then names only what it saw itself
        print(f"perfsuite: cannot leave rank {rank}'s exit in {folder}: {exc.strerror or exc}", file=sys.stderr)


def dead_ranks(launch: Launch, log_path: Path, wait_s: float = RANK_EXIT_WAIT_S) -> list[str]:
    """The other ranks of a failed multi-rank launch that died, first in the run's error:
    "rank 1 died (SIGKILL)", from torchrun's report of its ranks' exit codes, or from the exit
    notes the tasks of a SLURM step leave (waited for up to ``wait_s``)."""
    if launch.world_size <= 1:
        return []
    if launch.launcher == "torchrun":
        # its "Root Cause (first observed failure)": the ranks listed before it are mostly those
        # the agent itself stopped (SIGTERM) once the first had failed
        text = _log_tail(log_path)
        cause = TORCHRUN_FAILURE.search(text, max(text.rfind(TORCHRUN_ROOT_CAUSE), 0))
        return [_died(int(cause.group(1)), int(cause.group(2)))] if cause and int(cause.group(2)) < 0 else []
    folder = rank_exit_folder(launch)
    if folder is None:
        return []
    own = int(launch.env.get("RANK", "0"))
    deadline = time.monotonic() + wait_s
    while True:
        notes = []
        for path in sorted(folder.glob("rank-*.exit.json")):
            try:
                data = json.loads(path.read_text())
                notes.append((int(data["rank"]), int(data["returncode"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a note caught as it is replaced, or not ours
        others = sorted(n for n in notes if n[0] != own)
        if others or time.monotonic() >= deadline:
            # a rank that exited with an error of its own often only saw a peer go: the deaths by signal are the cause
            return [_died(rank, code) for rank, code in others if code < 0]
        time.sleep(0.2)


def _died(rank: int, code: int) -> str:
    try:
        return f"rank {rank} died ({signal.Signals(-code).name})"
    except ValueError:
        return f"rank {rank} died (signal {-code})"


def _log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_READ_BYTES))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
