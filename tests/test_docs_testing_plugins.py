"""The "Testing your plugin" page says what is true: its example plugin module and its tests,
read from the page's titled code blocks, are written into a fresh folder and the page's
pytest command runs them there, in a process of its own; every test passes, the one that
plants a wrong element included."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import REPO
from tests.test_docs import TITLED_BLOCK

PAGE = REPO / "docs" / "testing-plugins.md"


def test_the_pages_example_plugin_and_its_tests_pass_as_written(tmp_path):
    text = PAGE.read_text()
    files = {m["path"]: m["body"] for m in TITLED_BLOCK.finditer(text)}
    assert set(files) == {"perfsuite_demo.py", "tests/test_demo.py"}
    for path, body in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body)
    command = re.search(r"^```bash\n(?P<line>python -m pytest [^\n]*)\n```$", text, re.MULTILINE)
    assert command, "the page's pytest command is missing"
    args = command["line"].split()[1:]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]), PERFSUITE_PLUGINS="")
    done = subprocess.run(
        [sys.executable, *args, "-p", "no:cacheprovider", "-n", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout, done.stdout[-2000:]
