"""The sbatch script of a perfsuite job, in the shape MLPerf's ``run.sub`` scripts have:
``#SBATCH`` lines for the allocation (nodes, tasks per node, GPUs per node, partition,
account, QOS, time limit, ``--exclusive``), the first node of the job found with
``scontrol show hostnames`` as the rendezvous, a pyxis/enroot container imported once per
node and then used by name, and one ``srun`` step whose tasks are the ranks (one per GPU).
A job array runs one ``perfsuite`` command per index (one ``[[run]]`` of a plan each).

Rendering is pure: the same options give the same text, which ``--dry-run`` prints and the
job folder keeps.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from perfsuite.engine.slurm.jobs import STORE_BESIDE, Job

DEFAULT_MPI = "pmix"  # srun's --mpi for nccl-tests' ranks, as MLPerf's scripts use it


@dataclass(frozen=True)
class JobOptions:
    """The allocation asked of sbatch and the layout of the ranks' step."""

    nodes: int = 1
    ntasks: int | None = None  # every task of the job (sbatch --ntasks), instead of per node
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None  # SLURM's time limit, as sbatch reads it ("30", "1:00:00", "1-0")
    exclusive: bool = False
    container_image: str | None = None
    container_mounts: str | None = None
    mpi: str = DEFAULT_MPI
    job_name: str = "perfsuite"
    array_parallel: int | None = None  # at most this many array tasks at once (--array=0-N%K)

    def layout(self, ntasks_per_node: int | None = None) -> list[str]:
        """The task layout (sbatch's and srun's words): the job's, or a step's with fewer
        tasks per node than the job holds (a plan's run at 2 of 8 GPUs)."""
        out = [f"--nodes={self.nodes}"]
        if ntasks_per_node is not None:
            return [*out, f"--ntasks-per-node={ntasks_per_node}"]
        if self.ntasks is not None:
            out.append(f"--ntasks={self.ntasks}")
        if self.ntasks_per_node is not None:
            out.append(f"--ntasks-per-node={self.ntasks_per_node}")
        return out

    def nccl_tests_launcher(self) -> str:
        """The ``--mpirun`` of a cross-check in this job: nccl-tests as one process per GPU of
        rank 0's node, a step that overlaps the suite's own (whose ranks wait meanwhile);
        the suite adds ``-n N``."""
        words = ["srun", "--overlap", f"--mpi={self.mpi}", "--nodes=1"]
        if self.gpus_per_node is not None:
            words.append(f"--gpus-per-node={self.gpus_per_node}")
        return shlex.join(words)


def render(job: Job, options: JobOptions, program: list[str]) -> str:
    """The whole script. ``program``: how the job starts perfsuite on a node (the
    submitting interpreter, or ``perfsuite`` inside a container)."""
    q = shlex.quote
    directives = [f"--job-name={options.job_name}", *options.layout()]
    if options.gpus_per_node is not None:
        directives.append(f"--gpus-per-node={options.gpus_per_node}")
    for flag, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
        ("time", options.time),
    ):
        if value is not None:
            directives.append(f"--{flag}={value}")
    if options.exclusive:
        directives.append("--exclusive")
    directives.append("--export=ALL")  # the submitter's environment (PATH, PYTHONPATH, PERFSUITE_*) reaches the ranks
    directives.append("--no-requeue")  # a job that lost a node stops and says so; it never measures again unasked
    if job.is_array:
        throttle = f"%{options.array_parallel}" if options.array_parallel else ""
        directives += [f"--array=0-{len(job.tasks) - 1}{throttle}", f"--output={job.logs}/%A_%a.out"]
    else:
        directives.append(f"--output={job.logs}/%j.out")
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives)]
    lines += [
        f"# perfsuite job: {_summary(job)}",
        "set -euo pipefail",
        "",
        f"job_dir={q(str(job.folder))}",
        "# the ranks' step-watch marks rank 0 live there, and a rank that dies leaves its exit there",
        'export PERFSUITE_SLURM_JOB_DIR="$job_dir"',
        'index="${SLURM_ARRAY_TASK_ID:-0}"',
        "# this index's records land beside the script, on storage the submitting host shares",
        'export PERFSUITE_RECORDS="$job_dir/records/$index"',
    ]
    if job.store == STORE_BESIDE:
        lines += [
            "# the registry named at submission is a SQLite file the nodes may not reach: rank 0 stores into",
            "# one beside the records, which 'perfsuite slurm wait' loads into it",
            'export PERFSUITE_DB="sqlite:///$job_dir/registry/$index.db"',
            'mkdir -p "$job_dir/registry"',
        ]
    else:
        lines += [
            "# rank 0 stores into the registry named at submission: PERFSUITE_DB comes from sbatch's",
            "# environment (not written here: a URL may hold a password)",
        ]
    lines += [
        'mkdir -p "$PERFSUITE_RECORDS"',
        "# the scheduler's version, for the records (launch.slurm.version)",
        'export PERFSUITE_SLURM_VERSION="$(scontrol --version)"',
        "# the job's first node is rank 0's, the rendezvous of every run's ranks (torch.distributed env://)",
        'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        'echo "perfsuite: job $SLURM_JOB_ID index $index on $SLURM_JOB_NODELIST, rendezvous $MASTER_ADDR"',
    ]
    container: list[str] = []
    if options.container_image:
        mounts = ",".join(m for m in (options.container_mounts, f"{job.folder}:{job.folder}") if m)
        lines += [
            "",
            "# the container image, imported once per node (pyxis/enroot); the steps below run in it by name",
            'container="perfsuite-$SLURM_JOB_ID"',
            f'srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 '
            f'--container-image={q(options.container_image)} --container-name="$container" true',
        ]
        container = ['--container-name="$container"', f"--container-mounts={q(mounts)}"]
    lines += ["", "# one task per rank; a rank that fails ends the step rather than leaving the others waiting"]
    commands = {
        t.index: " ".join(
            [
                "srun",
                *(q(w) for w in options.layout(t.ntasks_per_node)),
                "--kill-on-bad-exit=1",
                *container,
                *(q(w) for w in [*program, t.command, *t.argv]),
            ]
        )
        for t in job.tasks
    }
    if not job.is_array:
        lines.append(commands[job.tasks[0].index])
    else:
        lines.append('case "$index" in')
        for index, text in commands.items():
            lines += [f"  {index})", f"    {text}", "    ;;"]
        lines += ["  *)", '    echo "perfsuite: no run for array index $index" >&2', "    exit 2", "    ;;", "esac"]
    return "\n".join(lines) + "\n"


def _summary(job: Job) -> str:
    runs = "; ".join(
        f"[{t.index}] {t.command} {' '.join(t.workloads)}" + (f" x{t.repeat}" if t.repeat > 1 else "")
        for t in job.tasks
    )
    return (f"plan {job.plan}: " if job.plan else "") + runs
