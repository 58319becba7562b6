"""``perfsuite results`` names the records of the records folder the registry lacks, and
remembers a folder found complete until the folder or the registry changes: a record file
added, a registry replaced by another are noticed at once; an unchanged folder is not listed
again (at 100,000 records that listing and the stored ids are a quarter of a second a call)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.factories import make_record

from perfsuite.registry import open_registry


def _write(folder: Path, record: dict) -> None:
    (folder / f"{record['run_id']}.json").write_text(json.dumps(record))


def _settle(folder: Path) -> int:
    """Date the folder's last change a minute back, as a folder left alone would be."""
    past = folder.stat().st_mtime_ns - 60 * 10**9
    os.utime(folder, ns=(past, past))
    return past


def _notice(cli) -> str:
    proc = cli("results")
    assert proc.returncode == 0, proc.stderr
    return "\n".join(line for line in proc.stderr.splitlines() if "not in the registry" in line)


def test_a_complete_folder_is_remembered_until_the_folder_or_the_registry_changes(cli, perfsuite_env):
    folder = Path(perfsuite_env["PERFSUITE_RECORDS"])
    folder.mkdir(parents=True)
    stored, loose = make_record(), make_record()
    for record in (stored, loose):
        _write(folder, record)
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as registry:
        registry.store(stored)
    settled = _settle(folder)
    assert "Note: 1 record in" in _notice(cli)
    cache = Path(perfsuite_env["XDG_DATA_HOME"]) / "perfsuite" / "cache"
    assert not cache.exists()  # a folder with a record to import is checked every time

    cli("import", str(folder), check=True)
    settled = _settle(folder)
    assert _notice(cli) == ""
    assert len(list(cache.iterdir())) == 1  # remembered

    late = make_record()
    _write(folder, late)  # the folder changes: checked again at once
    assert "Note: 1 record in" in _notice(cli)
    (folder / f"{late['run_id']}.json").unlink()
    settled = _settle(folder)
    assert _notice(cli) == ""

    Path(perfsuite_env["PERFSUITE_DB"].removeprefix("sqlite:///")).unlink()  # another registry
    assert "Note: 2 records in" in _notice(cli)
    cli("import", str(folder), check=True)
    settled = _settle(folder)
    assert _notice(cli) == ""

    # The remembered answer is what the next call gives while neither side changes: a file put
    # there with the folder's time set back by hand is not looked for (the folder was not listed).
    _write(folder, make_record())
    os.utime(folder, ns=(settled, settled))
    assert _notice(cli) == ""
