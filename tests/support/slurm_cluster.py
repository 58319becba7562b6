"""A throwaway one-node SLURM cluster on 127.0.0.1, for the tests of ``perfsuite run --slurm``
and ``perfsuite slurm``.

Made with the daemons found on this machine (Debian's ``slurm-wlm`` and ``munge``; installed
by ``scripts/test.sh`` where it can, never here): ``munged`` with its own key and socket,
``slurmctld`` and ``slurmd`` from a ``slurm.conf`` in a fresh folder, on ports of their own,
with every state and log file in that folder. The one node is this host (``slurmd`` finds
itself by its short host name), with 2 CPUs and one partition, ``debug``, whose time limit
is 30 minutes and enforced at submission (``EnforcePartLimits=ALL``), as sites that refuse
a job outright do.

Clients reach it through ``SLURM_CONF`` (:meth:`Cluster.env`). The daemons run in the
foreground as children of the caller, each with a parent-death signal, so that even a
test process killed outright leaves none behind; :meth:`Cluster.stop` cancels what still
runs, stops the daemons and removes the folder. Starting needs root (``slurmd`` runs jobs
as their users) and the binaries: :func:`unavailable` says why not, for a skip.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from support.temp_root import MACHINE_TEMP_ROOT

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")
PARTITION = "debug"
PARTITION_MAX_TIME = "30:00"
NODE_CPUS = 2
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
SLURMD_TIMEOUT_S = 10
PR_SET_PDEATHSIG = 1


def _find(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )


def _binary(name: str) -> str:
    found = _find(name)
    if found is None:
        raise RuntimeError(f"SLURM test cluster: {name} is not installed")
    return found


def unavailable() -> str | None:
    """Why a cluster cannot be started here, or None."""
    missing = [n for n in DAEMONS + CLIENTS if _find(n) is None]
    if missing:
        return (
            f"SLURM test cluster: {', '.join(missing)} not installed "
            "(scripts/test.sh installs them as root: apt-get install slurm-wlm munge)"
        )
    if os.geteuid() != 0:
        return "SLURM test cluster: slurmd must run as root to start jobs"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the daemon, before exec: SIGKILL when the process that started it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Cluster:
    root: Path
    node: str
    ctld_port: int
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)  # by name, in the order started

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the cluster's ``SLURM_CONF``."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def client(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A client command (sinfo, squeue, scancel ...) against this cluster."""
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout)

    def wait_until_idle(self) -> None:
        """Return once ``sinfo`` shows the node idle; RuntimeError with the logs after
        :data:`START_TIMEOUT_S`."""
        _wait_for(
            lambda: self.client("sinfo", "-h", "-N", "-o", "%N %t").stdout.split() == [self.node, "idle"],
            self,
            f"node {self.node} idle in sinfo",
        )

    def log(self, name: str) -> str:
        path = self.root / "log" / name
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one daemon and reap it (a daemon that dies, as a node's slurmd may);
        :meth:`restart` starts it again."""
        daemon = self.daemons[name]
        daemon.send_signal(sig)
        daemon.wait(timeout=STOP_TIMEOUT_S)

    def restart(self, name: str) -> None:
        """Start a daemon that :meth:`kill` ended, as before (its state kept in the folder:
        slurmctld recovers its jobs, slurmd its node)."""
        if self.daemons[name].poll() is None:
            return
        _spawn(self, name, _argv(self, name))

    def stop(self) -> None:
        """Cancel every job, wait until none runs, stop the daemons (SIGTERM, then SIGKILL
        after a bound) and delete the folder."""
        if self.daemons and all(d.poll() is None for d in self.daemons.values()):
            self.client("scancel", "--full", f"--partition={PARTITION}")
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while time.monotonic() < deadline and self.client("squeue", "-h", "-o", "%i").stdout.strip():
                time.sleep(0.2)
        for daemon in reversed(list(self.daemons.values())):  # slurmd, slurmctld, then munged
            if daemon.poll() is None:
                daemon.terminate()
            try:
                daemon.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        self.daemons.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def _conf(root: Path, node: str, ctld_port: int, slurmd_port: int) -> str:
    return "\n".join(
        [
            "ClusterName=perfsuite-test",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "EnforcePartLimits=ALL",
            "KillWait=10",
            # A slurmd that stops answering is declared down (its jobs NODE_FAIL) within seconds,
            # not the default five minutes: the tests kill one on purpose.
            f"SlurmdTimeout={SLURMD_TIMEOUT_S}",
            "MinJobAge=600",
            "InactiveLimit=0",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime={PARTITION_MAX_TIME} State=UP",
            "",
        ]
    )


def start(prefix: str = "perfsuite-slurm-") -> Cluster:
    """munged, slurmctld and slurmd in a new folder; returns once ``sinfo`` shows the node
    idle. RuntimeError with the daemons' logs if that does not happen within
    :data:`START_TIMEOUT_S` (and nothing is left running)."""
    why = unavailable()
    if why:
        raise RuntimeError(why)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=MACHINE_TEMP_ROOT))
    os.chmod(root, 0o755)  # jobs' processes read slurm.conf and reach the munge socket
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    (root / "munge").mkdir(mode=0o755)
    (root / "munge-key").mkdir(mode=0o700)
    node = socket.gethostname().split(".")[0]
    cluster = Cluster(root, node, _free_port())
    cluster.conf.write_text(_conf(root, node, cluster.ctld_port, _free_port()))
    key = root / "munge-key" / "munge.key"
    try:
        subprocess.run(
            [_binary("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True, timeout=30
        )
        munged = [
            _binary("munged"),
            "--foreground",
            "--force",
            f"--key-file={key}",
            f"--socket={cluster.munge_socket}",
            f"--pid-file={root / 'munge' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--seed-file={root / 'munge-key' / 'munged.seed'}",
        ]
        _spawn(cluster, "munged", munged)
        _wait_for(lambda: cluster.munge_socket.exists(), cluster, "munged's socket")
        _spawn(cluster, "slurmctld", _argv(cluster, "slurmctld"))
        _spawn(cluster, "slurmd", _argv(cluster, "slurmd"))
        cluster.wait_until_idle()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _argv(cluster: Cluster, name: str) -> list[str]:
    """How slurmctld and slurmd are started: in the foreground, from the folder's slurm.conf."""
    if name == "slurmctld":
        return [_binary("slurmctld"), "-D", "-i", "-f", str(cluster.conf)]
    return [_binary("slurmd"), "-D", "-f", str(cluster.conf)]


def _spawn(cluster: Cluster, name: str, argv: list[str]) -> None:
    with open(cluster.root / "log" / f"{name}.out", "ab") as out:
        cluster.daemons[name] = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=cluster.env(),
            preexec_fn=_die_with_parent,
        )


def _wait_for(ready, cluster: Cluster, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        dead = [name for name, d in cluster.daemons.items() if d.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "\n".join(
                f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                for p in sorted((cluster.root / "log").iterdir())
            )
            reason = f"{', '.join(dead)} exited" if dead else f"not within {START_TIMEOUT_S:g} s"
            raise RuntimeError(f"SLURM test cluster: waiting for {what}: {reason}\n{logs}")
        time.sleep(0.2)


def submitted(proc: subprocess.CompletedProcess) -> tuple[str, Path]:
    """(job id, job folder) from 'Submitted batch job ID: FOLDER/job.sbatch'."""
    line = next(s for s in proc.stdout.splitlines() if s.startswith("Submitted batch job "))
    job_id, _, script = line.removeprefix("Submitted batch job ").partition(": ")
    return job_id, Path(script).parent


def stored_records(env: dict) -> list[dict]:
    """Every record in the test's registry (read here: what the job stored is under test)."""
    from perfsuite.registry import open_registry

    with open_registry(env["PERFSUITE_DB"]) as reg:
        return [reg.get(r["run_id"]) for r in reg.results(limit=1000)]
