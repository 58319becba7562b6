"""The machine's temp root as this test process found it, before the session moved TMPDIR and
``tempfile.tempdir`` under pytest's own folder (tests/conftest.py, ``session_temp_root``).

Only for a folder another user must enter or that holds a UNIX socket: a PostgreSQL cluster
started as root runs as ``postgres``, which pytest's 0700 folders shut out, and munge's socket
path must stay under the 108 bytes a socket address holds. Those fixtures remove their folder
when they stop. Imported by tests/conftest.py, so it is read before the session moves it.
"""

from __future__ import annotations

import tempfile

MACHINE_TEMP_ROOT = tempfile.gettempdir()
