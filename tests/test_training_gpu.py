"""The training workloads on a CUDA GPU (``pytest -m gpu``): bf16 autocast, torch.compile,
the goodput split from CUDA events, NVML energy, the device-side batch order. Skipped
cleanly without a GPU. No timed assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize(
    "name,extra",
    [
        ("training.gpt", ["-p", "compile=true"]),
        ("training.resnet", ["-p", "pipeline=dataloader", "-p", "loader_workers=2"]),
    ],
)
def test_quick_training_on_the_gpu_in_bf16(tmp_path, name, extra):
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'r.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "rec"),
        PERFSUITE_PLUGINS="",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            name,
            "--quick",
            "-p",
            "precision=bf16",
            *extra,
            "--device",
            "cuda",
            "--json",
            "--seed",
            "3",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "success", record["error"]
    names = {m["name"]: m for m in record["metrics"]}
    assert names["tflops"]["roofline"]["resource"] == "matmul.bf16"
    seconds = record["details"]["goodput"]["seconds"]
    assert seconds["forward"] > 0 and seconds["backward"] > 0 and seconds["optimizer"] > 0
    print(
        name,
        {k: round(v, 3) for k, v in seconds.items()},
        "energy J:",
        names.get("energy_to_target_j", {}).get("value"),
    )


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_a_compiled_ddp_run_on_two_gpus_stores_its_bare_ddp_loops_ratio(tmp_path):
    """Two ranks, compiled, bf16, beside the bare DDP loop at world size 2 on the same GPUs: the
    untimed compile leaves nothing of it in the goodput split, and the record holds the ratio."""
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'r.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "rec"),
        PERFSUITE_PLUGINS="",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    args = ["crosscheck", "training.gpt", "--quick", "--nproc-per-node", "2", "--rounds", "2", "--device", "cuda"]
    params = ["-p", "precision=bf16", "-p", "compile=true", "-p", "max_steps=40", "-p", "eval_every=10"]
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *args, *params, "--json", "--seed", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = json.loads(proc.stdout)
    cc = record["details"]["crosscheck"]["train"]
    assert cc["status"] == "measured", cc.get("reason")
    assert cc["reference"]["world_size"] == 2 and cc["rate_ratio"] > 0
    assert record["details"]["goodput"]["seconds"]["compile_warmup"] == 0.0
    print("suite / bare DDP loop at 2 GPUs:", round(cc["rate_ratio"], 3))
