"""A throwaway PostgreSQL cluster on 127.0.0.1, for the PostgreSQL registry tests, the
run-safety test that stops its server mid-run, and ``bench/cli_scale.py``.

Made with the server binaries found on this machine (initdb + pg_ctl), run as the
``postgres`` OS user when the caller is root (initdb refuses root), in a fresh folder that
user owns, listening on a free port with its sockets in that folder; fsync off, since
nothing in it outlives the caller.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support.temp_root import MACHINE_TEMP_ROOT

BIN_CANDIDATES = ["/usr/lib/postgresql/15/bin", *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]


def server_bin() -> Path | None:
    """The folder holding initdb and pg_ctl, or None where the server is not installed."""
    for candidate in BIN_CANDIDATES:
        if os.access(os.path.join(candidate, "initdb"), os.X_OK) and os.access(
            os.path.join(candidate, "pg_ctl"), os.X_OK
        ):
            return Path(candidate)
    return None


@dataclass
class Cluster:
    root: Path
    port: int
    as_user: list[str]  # runuser -u postgres -- when the caller is root
    bin: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def stop_argv(self) -> list[str]:
        """The command that stops the server at once (tests run it from other processes too)."""
        return [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "stop", "-m", "immediate"]

    def remove(self) -> None:
        """Stop the server if it runs, and delete the cluster's folder."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(self.stop_argv, capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


def start(prefix: str = "perfsuite-pg-", max_connections: int | None = None) -> Cluster:
    """initdb and start a cluster in a new folder (not under pytest's 0700 tmp folders, which
    the postgres user could not enter); RuntimeError with the server's log if either fails."""
    pg_bin = server_bin()
    if pg_bin is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=MACHINE_TEMP_ROOT))
    as_user: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cluster = Cluster(root, port, as_user, pg_bin)
    options = f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off"
    if max_connections is not None:
        options += f" -c max_connections={max_connections}"
    try:
        for argv in (
            [
                str(pg_bin / "initdb"),
                "-D",
                str(cluster.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            [
                str(pg_bin / "pg_ctl"),
                "-D",
                str(cluster.data),
                "-l",
                str(root / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
                "-o",
                options,
            ],
        ):
            result = subprocess.run([*as_user, *argv], capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
                raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr}{result.stdout}\n{log}")
    except BaseException:
        cluster.remove()
        raise
    return cluster
