"""A Ctrl-C or SIGTERM that lands while the registry closes a connection is the command's to
report in its summary: SQLAlchemy's pool logs such an interrupt with a traceback before it
re-raises it, and perfsuite keeps that traceback off stderr (any other pool error is one line)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sqlite3, sys
from perfsuite.registry import db

class Cut(sqlite3.Connection):
    def close(self):
        super().close()
        raise {error}

from sqlalchemy import create_engine
engine = create_engine(
    "sqlite://", creator=lambda: sqlite3.connect(sys.argv[1], factory=Cut)
)
db._pool_errors_as_lines()
with engine.connect() as connection:
    connection.exec_driver_sql("SELECT 1")
try:
    engine.dispose()
except KeyboardInterrupt:
    print("interrupt reached the caller")
"""


def _close_with(error: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(error=error), str(tmp_path / "r.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_interrupt_while_a_connection_closes_reaches_the_caller_with_no_traceback(tmp_path):
    done = _close_with('KeyboardInterrupt("signal SIGTERM")', tmp_path)
    assert done.stdout.strip() == "interrupt reached the caller", done.stderr
    assert done.stderr == ""


def test_another_error_while_a_connection_closes_is_one_warning_line(tmp_path):
    done = _close_with('OSError("disk gone")', tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Warning: registry connection pool: Exception closing connection ")
    assert line.endswith(": OSError: disk gone")
