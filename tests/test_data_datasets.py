"""The suite's own data sets (perfsuite.inputs.datasets) and the image input pipelines over them
(perfsuite.inputs.images): deterministic, cached atomically, and every CPU path's output
agrees with PIL's on the fixed centre crop."""

from __future__ import annotations

import dataclasses
import hashlib
from importlib.util import find_spec

import numpy as np
import pytest

from perfsuite.inputs import datasets
from perfsuite.inputs import images as ip

SMALL = datasets.JpegSpec(count=16, width=96, height=72, quality=85, seed=3)


def _digest(files) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "datasets"


def test_jpeg_images_are_deterministic_cached_and_labelled(cache, tmp_path, monkeypatch):
    data = datasets.jpeg_images(SMALL, processes=1)
    assert data.root.parent == cache and len(data) == 16
    assert data.labels == tuple(i % len(data.classes) for i in range(16))
    assert data.classes[0] == "astronaut" and data.classes[-2:] == ("gradient", "texture")
    assert data.encoded_bytes == sum(f.stat().st_size for f in data.files)
    from PIL import Image

    with Image.open(data.files[5]) as img:
        assert (img.format, img.size, img.mode) == ("JPEG", (96, 72), "RGB")
    # reused: nothing is made again
    monkeypatch.setattr(datasets, "_make_image", lambda job: pytest.fail("remade a cached data set"))
    assert datasets.jpeg_images(SMALL).files == data.files
    monkeypatch.undo()
    # the same bytes from a fresh cache, made by two worker processes instead of one
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "other"))
    monkeypatch.setattr(datasets, "POOL_MIN_IMAGES", 8)
    again = datasets.jpeg_images(SMALL, processes=2)
    assert again.root != data.root and _digest(again.files) == _digest(data.files)
    # another seed, another data set
    other = datasets.jpeg_images(dataclasses.replace(SMALL, seed=4), processes=1)
    assert _digest(other.files) != _digest(data.files)


def test_images_are_not_noise_alone(cache):
    """Photograph-like: JPEG compresses them well below noise of the same size."""
    data = datasets.jpeg_images(datasets.JpegSpec(count=14, width=128, height=96, quality=90), processes=1)
    from io import BytesIO

    from PIL import Image

    noise = BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)).save(
        noise, "JPEG", quality=90
    )
    assert data.encoded_bytes / len(data) < 0.6 * len(noise.getvalue())


def test_a_failed_make_leaves_nothing_behind(cache, monkeypatch):
    def broken(job):
        raise OSError("disk full")

    monkeypatch.setattr(datasets, "_make_image", broken)
    with pytest.raises(OSError, match="disk full"):
        datasets.jpeg_images(SMALL, processes=1)
    assert list(cache.iterdir()) == []


def test_npy_shards_match_their_seed(cache):
    shards = datasets.npy_shards(datasets.ShardSpec(count=3, shard_bytes=4096, seed=1))
    assert len(shards) == 3 and shards.elements == 1024 and shards.data_bytes == 3 * 4096
    for i, f in enumerate(shards.files):
        arr = np.load(f)
        assert arr.dtype == np.float32 and np.array_equal(arr, shards.expected(i))
    assert not np.array_equal(shards.expected(0), shards.expected(1))
    with pytest.raises(ValueError, match="multiple of 4"):
        datasets.ShardSpec(count=1, shard_bytes=6)


def test_crop_box_follows_torchvisions_ranges():
    rng = np.random.default_rng(0)
    for _ in range(200):
        left, top, w, h = ip.crop_box(500, 375, rng)
        assert 0 <= left <= 500 - w and 0 <= top <= 375 - h
        assert ip.RANDOM_AREA[0] * 500 * 375 * 0.9 <= w * h <= 500 * 375
    assert ip.crop_box(500, 375, None) == (62, 0, 375, 375)


def test_gpu_paths_say_why_they_cannot_run_on_the_cpu():
    assert "CUDA" in ip.unavailable("torchvision_gpu_decode", "cpu")
    assert "CUDA" in ip.unavailable("dali_mixed", "cpu")
    assert ip.unavailable("torch_dataloader", "cpu") is None
    with pytest.raises(RuntimeError, match="CUDA"):
        ip.build_loader(None, ip.LoaderSpec("dali_mixed", device="cpu"))
    with pytest.raises(ValueError, match="unknown input pipeline"):
        ip.LoaderSpec("opencv")


CPU_PATHS = [p for p in ip.PATHS if ip.unavailable(p, "cpu") is None]


@pytest.mark.parametrize("path", CPU_PATHS)
def test_cpu_paths_match_pil_on_the_centre_crop(cache, path):
    data = datasets.jpeg_images(SMALL, processes=1)
    spec = ip.LoaderSpec(path, batch_size=4, out_size=32, workers=1, device="cpu")
    error, compared = ip.centre_crop_error(data, spec, 8)
    assert compared == 8 and error <= ip.PIXEL_TOLERANCE
    with ip.build_loader(data, spec) as loader:  # the random crop: shapes, dtypes, label order
        batches = list(loader)
    assert len(batches) == loader.batches_per_epoch == 4
    assert batches[0].images.shape == (4, 3, 32, 32) and str(batches[0].images.dtype) == "torch.float32"
    assert [int(v) for b in batches for v in b.labels] == list(data.labels)


def test_torchvision_decode_logic_on_the_cpu(cache):
    """The GPU-decode path's code run with decode_jpeg on the CPU: same crop, same answer."""
    data = datasets.jpeg_images(SMALL, processes=1)
    sub = dataclasses.replace(data, files=data.files[:8], labels=data.labels[:8])
    spec = ip.LoaderSpec("torchvision_gpu_decode", batch_size=4, out_size=32, random_crop=False, device="cpu")
    import torch

    got = torch.cat([ip.to_pixels(b.images) for b in ip.TorchvisionDecode(sub, spec)])
    ref = torch.stack([ip.pil_transform(f, 32, None) for f in sub.files]).double()
    assert float((got - ref).abs().mean()) <= ip.PIXEL_TOLERANCE
    flipped = torch.stack([ip.pil_transform(f, 32, None).flip(-1) for f in sub.files]).double()
    assert float((got - flipped).abs().mean()) > ip.PIXEL_TOLERANCE  # the check can fail


@pytest.mark.skipif(find_spec("nvidia.dali") is None if find_spec("nvidia") else True, reason="DALI not installed")
def test_dali_cpu_pipeline_is_checked_against_the_same_box(cache):
    data = datasets.jpeg_images(SMALL, processes=1)
    spec = ip.LoaderSpec("dali_cpu", batch_size=4, out_size=32, workers=1, device="cpu")
    error, _ = ip.centre_crop_error(data, spec, 8)
    assert error < 1.0  # libjpeg-turbo on both sides; only the resamplers differ
