"""``training.gpt -p save_to=DIR`` writes where the user points, so it follows the rule of every
output folder (``perfsuite.owned_output``): a folder holding files perfsuite did not write is
refused before training starts, with a one-line error and exit 2, and its files are untouched; a
folder of an earlier save is written again and keeps the file the user added to it. Through the
real CLI, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parent.parent
MODEL_FILES = {"config.json", "model.safetensors", "tokenizer.json", "perfsuite-trained.json"}


def _run(tmp: Path, save_to: Path) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp / 'registry.db'}",
        PERFSUITE_RECORDS=str(tmp / "records"),
        XDG_DATA_HOME=str(tmp / "data"),
        PERFSUITE_PLUGINS="",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    command = ["run", "training.gpt", "--quick", "--device", "cpu", "--json", "-p", f"save_to={save_to}"]
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *command],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=400,
    )


def test_a_folder_holding_someone_elses_file_is_refused_before_training(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir()
    (folder / "config.json").write_text("their own config\n")
    proc = _run(tmp_path, folder)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip()
    assert "\n" not in error and "save_to" in error and "did not write" in error, error
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]
    assert (folder / "config.json").read_text() == "their own config\n"
    records = tmp_path / "records"
    assert not records.exists() or not list(records.glob("*.json"))  # refused, not run


def test_a_save_owns_its_folder_and_a_later_save_keeps_the_users_file(tmp_path):
    folder = tmp_path / "models" / "gpt"  # a missing parent is created, as before
    first = _run(tmp_path, folder)
    assert first.returncode == 0, first.stderr[-3000:]
    (record,) = json.loads(first.stdout)
    assert record["details"]["training"]["saved_to"] == str(folder)
    assert {p.name for p in folder.iterdir()} >= MODEL_FILES
    manifest = json.loads((folder / ".perfsuite-manifest.json").read_text())
    assert set(manifest["files"]) >= MODEL_FILES and "notes.txt" not in manifest["files"]
    stamp = (folder / "perfsuite-trained.json").stat().st_mtime_ns

    (folder / "notes.txt").write_text("my notes\n")
    second = _run(tmp_path, folder)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert (folder / "perfsuite-trained.json").stat().st_mtime_ns != stamp  # the model was saved again
    assert not [p for p in folder.parent.iterdir() if p.name != "gpt"]  # no staging folder left behind
