"""The data workloads on the CPU, driven through a real RunContext as the worker drives them:
every path that runs without a GPU runs and verifies at small sizes, the GPU-only paths are
skipped cases with their reason, and a broken path is caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfsuite.inputs import images as ip  # noqa: E402
from perfsuite.workloads.data import host_to_device, storage_read  # noqa: E402
from perfsuite.workloads.data.host_to_device import HostToDevice, size_label  # noqa: E402
from perfsuite.workloads.data.image_pipeline import ImagePipeline  # noqa: E402
from perfsuite.workloads.data.loader_stall import LoaderStall  # noqa: E402
from perfsuite.workloads.data.storage_read import StorageRead  # noqa: E402
from tests.test_kernels import REPO, check, metric, run  # noqa: E402

CPU_PATHS = [p for p in ip.PATHS if ip.unavailable(p, "cpu") is None]
FAST_IMAGES = {
    "count": 16,
    "width": 96,
    "height": 72,
    "out_size": 32,
    "batch_size": 4,
    "workers": 1,
    "epochs": 2,
    "warmup_epochs": 0,
    "verify_images": 8,
}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))


def test_image_pipeline_runs_and_verifies_every_cpu_path():
    ctx = run(ImagePipeline, FAST_IMAGES)
    for path in CPU_PATHS:
        assert metric(ctx, path, "items_per_s")["unit"] == "images/s"
        mbps = metric(ctx, path, "encoded_mbps")
        assert mbps["unit"] == "MB/s" and len(mbps["samples"]) == 2
        # MB/s is images/s times the data set's mean file size
        per_image = ctx.details["dataset"]["encoded_bytes"] / ctx.details["dataset"]["images"]
        assert mbps["value"] == pytest.approx(metric(ctx, path, "items_per_s")["value"] * per_image / 1e6)
        c = check(ctx, path)
        assert c.passed and c.error <= c.tolerance == ip.PIXEL_TOLERANCE, c
    skipped = ctx.details["skipped_cases"]
    assert set(skipped) == set(ip.PATHS) - set(CPU_PATHS)
    assert "CUDA" in skipped["torchvision_gpu_decode"] and "CUDA" in skipped["dali_mixed"]


class _RecordingLoader:
    """A loader that notes the labels of every timed epoch, in the order it yields them."""

    def __init__(self, loader, epochs: list[list[int]]):
        self.loader, self.epochs = loader, epochs

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def __enter__(self):
        self.loader.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self.loader.__exit__(*exc_info)

    def __iter__(self):
        labels: list[int] = []
        for batch in self.loader:
            labels += batch.labels.tolist()
            yield batch
        self.epochs.append(labels)


def _epoch_orders(monkeypatch, overrides: dict) -> tuple[dict[str, list[list[int]]], list[int]]:
    """Run data.image_pipeline; return each path's timed epochs (labels in order) and the
    data set's labels in file order."""
    epochs: dict[str, list[list[int]]] = {}
    real_build = ip.build_loader

    def recording(dataset, spec):
        loader = real_build(dataset, spec)
        if not spec.random_crop:  # the fixed-crop verification pass
            return loader
        return _RecordingLoader(loader, epochs.setdefault(spec.path, []))

    monkeypatch.setattr(ip, "build_loader", recording)
    ctx = run(ImagePipeline, {**FAST_IMAGES, **overrides})
    monkeypatch.setattr(ip, "build_loader", real_build)
    manifest = json.loads((Path(ctx.details["dataset"]["root"]) / "manifest.json").read_text())
    return epochs, list(manifest["labels"])


def test_image_pipeline_reads_each_epoch_in_a_new_order_on_every_cpu_path(monkeypatch):
    # As training does, data.loader_stall does and bench/dali_reference.py does: version 1
    # read the files in order, so DALI's figure was checked against a different loop.
    epochs, in_order = _epoch_orders(monkeypatch, {"count": 32, "epochs": 3})
    assert set(epochs) == set(CPU_PATHS)
    for path, seen in epochs.items():
        assert len(seen) == 3 and all(sorted(e) == sorted(in_order) for e in seen), path
        assert in_order not in seen and len({tuple(e) for e in seen}) == 3, (path, seen)
    epochs, in_order = _epoch_orders(monkeypatch, {"count": 32, "paths": "torch_dataloader", "shuffle": "false"})
    assert epochs["torch_dataloader"] == [in_order, in_order]


def test_a_pipeline_that_flips_every_image_fails_verification(monkeypatch):
    honest = ip.TorchDataLoader.__iter__

    def flipped(self):
        for batch in honest(self):
            yield ip.Batch(batch.images.flip(-1), batch.labels)

    monkeypatch.setattr(ip.TorchDataLoader, "__iter__", flipped)
    ctx = run(ImagePipeline, {**FAST_IMAGES, "paths": "torch_dataloader", "epochs": 1})
    c = check(ctx, "torch_dataloader")
    assert not c.passed and c.error > c.tolerance


def test_storage_read_runs_the_cpu_paths_and_says_why_not_the_others():
    ctx = run(StorageRead, {"count": 2, "shard_bytes": 4096, "passes": 2, "warmup_passes": 0})
    assert check(ctx, "numpy").passed
    assert metric(ctx, "numpy", "gbps")["value"] > 0
    skipped = ctx.details["skipped_cases"]
    assert "CUDA" in skipped["dali_gpu"] or "DALI" in skipped["dali_gpu"]
    if storage_read.dali_unavailable() is None:
        assert check(ctx, "dali_cpu").passed
    for path in ("dali_cpu", "kvikio"):  # each either ran and verified, or says why not
        assert path in skipped or check(ctx, path).passed
    page = ctx.details["page_cache"]
    assert page["mode"] == "drop" and "posix_fadvise" in page["method"]
    assert page["resident_after_drop"] is None or 0.0 <= page["resident_after_drop"] <= 1.0


def test_a_read_that_loses_a_shard_fails_verification(monkeypatch):
    honest = StorageRead.read_numpy

    def lossy(self, deliver):
        def wrap(i, data):
            deliver(i, torch.zeros_like(data) if i == 1 else data)

        honest(self, wrap)

    monkeypatch.setattr(StorageRead, "read_numpy", lossy)
    ctx = run(StorageRead, {"count": 3, "shard_bytes": 4096, "passes": 1, "warmup_passes": 0, "paths": "numpy"})
    c = check(ctx, "numpy")
    assert not c.passed and c.error == 1 and "[1]" in c.detail


def test_loader_stall_measures_the_share_of_step_time_waiting():
    ctx = run(
        LoaderStall,
        {
            "count": 16,
            "width": 96,
            "height": 72,
            "out_size": 32,
            "batch_size": 4,
            "workers": 1,
            "steps": 4,
            "warmup_steps": 1,
            "matmul_size": 64,
        },
    )
    for label in ["compute_only", *CPU_PATHS]:
        share = metric(ctx, label, "stall_share")
        assert 0.0 <= share["value"] <= 1.0 and share["higher_is_better"] is False
        assert len(metric(ctx, label, "step_ms")["samples"]) == 4
        assert check(ctx, label).passed, check(ctx, label)
    assert ctx.details["consumer"]["flops_per_step"] == 2.0 * 64**3 * 2


def test_host_to_device_needs_cuda_and_labels_its_sizes():
    assert HostToDevice.requirements.devices == ("cuda",)
    assert [size_label(s) for s in (64 * 1024, 2**20, 3 * 2**30, 100)] == ["64KiB", "1MiB", "3GiB", "100B"]
    assert host_to_device.CEILING == "h2d.pinned"  # kernels.ceilings' name for the link
    with pytest.raises(ValueError, match="multiples of 4"):
        host_to_device.HostToDeviceParams(sizes=(6,))


def test_params_reject_bad_input():
    with pytest.raises(ValueError, match="divide count"):
        storage_read.StorageReadParams(count=5, dali_batch=2)
    with pytest.raises(ValueError, match="fill at least one batch"):
        ImagePipeline.Params(count=8, batch_size=64)


# What importing the data family may not load: torch (the CLI lists the family without it) and
# the optional readers, DALI and KvikIO, which only the workload that runs them imports. Which
# modules of the namespace the family may import (no other family, no registry) is
# test_layering's rule, checked there on every import statement, function-local ones included.
HEAVY = ("torch", "nvidia", "kvikio")


def heavy_modules_loaded(package: str, where: Path, pythonpath: Path | None = None) -> list[str]:
    """The top-level names of ``HEAVY`` in ``sys.modules`` after a fresh interpreter, started in
    ``where``, imports ``package`` (``pythonpath`` first on its path)."""
    code = (
        f"import importlib, sys; importlib.import_module({package!r}); "
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    env = {**os.environ, "PYTHONPATH": str(pythonpath or "")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_importing_the_data_family_loads_no_torch_dali_or_kvikio(tmp_path):
    assert heavy_modules_loaded("perfsuite.workloads.data", tmp_path) == []


def test_the_heavy_import_check_catches_a_module_level_torch_or_dali_import(tmp_path):
    """A copy of the family under another name, its own modules importing each other, with
    ``import torch`` and ``import nvidia.dali`` planted at module level in two of its workloads."""
    copy = tmp_path / "datacopy"
    shutil.copytree(REPO / "workloads" / "data", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.glob("*.py"):
        path.write_text(path.read_text().replace("perfsuite.workloads.data", "datacopy"))
    assert heavy_modules_loaded("datacopy", tmp_path, pythonpath=tmp_path) == []  # the copy is as clean
    for module, planted in (("storage_read.py", "import torch\n"), ("host_to_device.py", "import nvidia.dali\n")):
        text = (copy / module).read_text()
        (copy / module).write_text(
            text.replace("from __future__ import annotations\n", "from __future__ import annotations\n" + planted, 1)
        )
    assert heavy_modules_loaded("datacopy", tmp_path, pythonpath=tmp_path) == ["nvidia", "torch"]


def test_the_gds_reason_is_cufiles_own_line_not_dalis_wrapper():
    from perfsuite.workloads.data._base import cufile_reason

    # DALI 2.4.0's message on an H200 without GDS, word for word as a stored storage-read record holds it
    dali = RuntimeError(
        "Critical error in pipeline:\nCritical error in pipeline:\n"
        "Error in GPU operator `nvidia.dali.fn.readers.numpy`,\n"
        "which was used in the pipeline definition with the following traceback:\n\n"
        '  File "/work/main/workloads/data/storage_read.py", line 156, in pipeline\n'
        "    return fn.readers.numpy(device=device, file_root=str(self.shards.root),\n\n"
        "encountered:\n\n"
        "CUFile import failed: /tmp/cache/00000.npy. file descriptor is not registered.\n"
        "C++ context: [/opt/dali/dali/util/std_cufile.cc:73] \n"
        "Current pipeline object is no longer valid.\nCurrent pipeline object is no longer valid."
    )
    assert cufile_reason(dali) == (
        "RuntimeError: CUFile import failed: /tmp/cache/00000.npy. file descriptor is not registered."
    )
    assert cufile_reason(OSError("disk gone\nmore")) == "OSError: disk gone"
