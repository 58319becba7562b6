"""A ``perfsuite`` command run in a real process that reports what it loaded: the tests that hold
a command to its own imports (no plugins, scipy.stats, torch, the PostgreSQL dialect, numpy
where it is not needed) read back ``sys.modules`` from the process that ran it, not from the
test's own, which has imported everything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Runs the command as ``perfsuite`` does, then writes its exit code, its output and the names of
# the modules it loaded.
MODULES_AFTER = """
import contextlib, io, json, sys
from perfsuite.cli import cli
out, args = sys.argv[1], sys.argv[2:]
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    try:
        cli(args, prog_name="perfsuite")
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
with open(out, "w") as f:
    json.dump({"code": code, "stdout": printed.getvalue(), "modules": sorted(sys.modules)}, f)
"""


def run_reporting_modules(env: dict, tmp_path: Path, *args: str) -> dict:
    """``perfsuite ARGS`` under ``env``: its ``code`` (asserted 0), ``stdout`` and ``modules``."""
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_AFTER, str(out), *args], env=env, capture_output=True, text=True, timeout=120
    )
    found = json.loads(out.read_text())
    assert found["code"] == 0, proc.stderr
    return found
