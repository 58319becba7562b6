"""Image input pipelines over a :class:`perfsuite.inputs.datasets.JpegDataset`: decode, crop and resize,
flip, normalise, delivered as batches on the target device. One home for them, in the host's
public API, so that the data family measures them and a training workload feeds a model
from them without importing the data family.

Paths (``PATHS``), the same work each: decode every JPEG in full, crop (random-resized-crop
with torchvision's area and aspect ranges, or a fixed centre square for verification),
resize to ``out_size`` x ``out_size`` (bilinear with antialiasing), flip horizontally with
probability 1/2, and normalise with ImageNet's mean and std into float32 NCHW:

- ``torch_dataloader``: a torch ``DataLoader`` with ``workers`` processes, PIL decode and
  resize in the workers, uint8 batches in pinned memory, copied and normalised on the device;
- ``torchvision_gpu_decode``: file bytes read on the host, ``torchvision.io.decode_jpeg`` of
  the batch's list on the GPU (nvJPEG), crop/resize/flip/normalise on the GPU;
- ``dali_cpu``: NVIDIA DALI, ``fn.decoders.image(device="cpu")`` with ``workers`` threads,
  crop and resize on the CPU, then (on a GPU) normalised on the GPU; without a GPU the
  pipeline runs with ``device_id=None`` and batches stay on the CPU;
- ``dali_mixed``: DALI with ``device="mixed"``: nvJPEG decode, resize and normalise on the GPU.

Use (a training workload)::

    from perfsuite.inputs import datasets, images as ip
    data = datasets.jpeg_images(datasets.JpegSpec(count=2048, width=500, height=375, seed=0))
    why = ip.unavailable("dali_mixed", "cuda")          # None, or why not (e.g. DALI missing)
    with ip.build_loader(data, ip.LoaderSpec("dali_mixed", batch_size=64, shuffle=True)) as loader:
        for epoch in range(3):
            for batch in loader:                         # one epoch; full batches only
                step(batch.images, batch.labels)         # float32 NCHW and int64, on the device

Verification (:func:`centre_crop_error`): with ``random_crop=False`` every path crops the
same centre square (no flip), and its output is compared with PIL's decode + bilinear
resize of the same box, as mean absolute error in 0-255 pixel units. Decoders (libjpeg-turbo,
nvJPEG) and resamplers differ slightly, hence :data:`PIXEL_TOLERANCE`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite.inputs.datasets import JpegDataset

PATHS = ("torch_dataloader", "torchvision_gpu_decode", "dali_cpu", "dali_mixed")
GPU_ONLY_PATHS = ("torchvision_gpu_decode", "dali_mixed")
DALI_PATHS = ("dali_cpu", "dali_mixed")
MEAN = (0.485, 0.456, 0.406)  # ImageNet's, in 0-1 units: what torchvision's models expect
STD = (0.229, 0.224, 0.225)
RANDOM_AREA = (0.08, 1.0)  # torchvision's RandomResizedCrop defaults, which DALI's match
RANDOM_RATIO = (3 / 4, 4 / 3)
# Mean absolute error, 0-255 units, of a path's centre-crop output against PIL's: decoders
# differ by about one level per pixel (IDCT and chroma upsampling) and resamplers by a
# little more; a wrong channel order, a flip or a misplaced crop is tens of levels.
PIXEL_TOLERANCE = 3.0


@dataclass(frozen=True)
class LoaderSpec:
    """How to load: which path, batch size, output size, worker processes (DataLoader) or
    threads (DALI), random crop and flip or the fixed centre crop, shuffling, and where
    the batches land."""

    path: str
    batch_size: int = 64
    out_size: int = 224
    workers: int = 4
    random_crop: bool = True  # False: the centre square, no flip (verification)
    shuffle: bool = False
    seed: int = 0
    device: str = "cuda"

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"unknown input pipeline {self.path!r}; one of {', '.join(PATHS)}")
        if self.batch_size < 1 or self.out_size < 1 or self.workers < 0:
            raise ValueError("batch_size and out_size must be positive, workers not negative")


@dataclass
class Batch:
    images: Any  # float32 (N, 3, out_size, out_size), normalised, on the target device
    labels: Any  # int64 (N,), on the target device


def unavailable(path: str, device: str) -> str | None:
    """Why ``path`` cannot run with batches on ``device`` here, or None."""
    if path in GPU_ONLY_PATHS and device != "cuda":
        return "decodes on the GPU (nvJPEG): needs a CUDA device"
    if path == "torchvision_gpu_decode" and find_spec("torchvision") is None:
        return "needs torchvision (pip install 'perfsuite[data]')"
    if path not in DALI_PATHS:
        return None
    try:
        installed = find_spec("nvidia.dali") is not None
    except ImportError:  # no "nvidia" namespace package at all
        installed = False
    if not installed:
        return "needs NVIDIA DALI (pip install 'perfsuite[dali]': nvidia-dali-cuda130)"
    try:
        import nvidia.dali  # noqa: F401
    except ImportError as exc:
        return f"NVIDIA DALI does not import: {exc}"
    return None


def build_loader(dataset: "JpegDataset", spec: LoaderSpec) -> "ImageLoader":
    """An iterable of epochs over ``dataset``; raises RuntimeError when the path is unavailable."""
    why = unavailable(spec.path, spec.device)
    if why:
        raise RuntimeError(f"{spec.path}: {why}")
    cls = {
        "torch_dataloader": TorchDataLoader,
        "torchvision_gpu_decode": TorchvisionDecode,
        "dali_cpu": DaliLoader,
        "dali_mixed": DaliLoader,
    }[spec.path]
    return cls(dataset, spec)


def crop_box(width: int, height: int, rng: Any | None) -> tuple[int, int, int, int]:
    """(left, top, crop width, crop height): torchvision's RandomResizedCrop draw when ``rng``
    (a numpy Generator) is given, else the centred square of side min(width, height)."""
    if rng is None:
        side = min(width, height)
        return (width - side) // 2, (height - side) // 2, side, side
    area = width * height
    log_ratio = (math.log(RANDOM_RATIO[0]), math.log(RANDOM_RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*RANDOM_AREA)
        ratio = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h
    # fallback, as torchvision: the whole image clamped to the ratio range, centred
    in_ratio = width / height
    if in_ratio < RANDOM_RATIO[0]:
        w, h = width, round(width / RANDOM_RATIO[0])
    elif in_ratio > RANDOM_RATIO[1]:
        w, h = round(height * RANDOM_RATIO[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def pil_transform(path: Any, out_size: int, rng: Any | None) -> Any:
    """Decode ``path`` with PIL, crop (random when ``rng`` is given, else centre), resize
    bilinear with antialiasing, maybe flip: uint8 CHW tensor. The reference for every path."""
    import numpy as np
    import torch
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")
        left, top, w, h = crop_box(img.width, img.height, rng)
        out = img.resize((out_size, out_size), Image.BILINEAR, box=(left, top, left + w, top + h))
    if rng is not None and rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return torch.from_numpy(np.array(out, dtype=np.uint8)).permute(2, 0, 1)


def normalise(images_uint8: Any) -> Any:
    """uint8 NCHW -> float32 NCHW, (x/255 - mean) / std, on the tensor's device."""
    import torch

    mean = torch.tensor(MEAN, device=images_uint8.device).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=images_uint8.device).view(1, 3, 1, 1) * 255
    return images_uint8.float().sub_(mean).div_(std)


def to_pixels(images: Any) -> Any:
    """Normalised float NCHW back to 0-255 units (float64, CPU): what verification compares."""
    import torch

    x = images.detach().to("cpu", torch.float64)
    mean = torch.tensor(MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float64).view(1, 3, 1, 1)
    return (x * std + mean) * 255


def centre_crop_error(dataset: "JpegDataset", spec: LoaderSpec, count: int) -> tuple[float, int]:
    """(mean absolute error in 0-255 units, images compared) of ``spec.path`` with the fixed
    centre crop against PIL's, over the first ``count`` images (at least one batch)."""
    got, ref = centre_crop_outputs(dataset, spec, count)
    return float((got - ref).abs().mean()), int(got.shape[0])


def centre_crop_outputs(dataset: "JpegDataset", spec: LoaderSpec, count: int) -> tuple[Any, Any]:
    """(``spec.path``'s output, PIL's) with the fixed centre crop over the first ``count``
    images (at least one batch): float64 NCHW tensors in 0-255 units, image for image."""
    import torch

    n = min(count, len(dataset))
    subset = dataclasses.replace(dataset, files=dataset.files[:n], labels=dataset.labels[:n])
    fixed = dataclasses.replace(spec, random_crop=False, shuffle=False, batch_size=min(spec.batch_size, n))
    outputs: list[Any] = []
    labels: list[Any] = []
    with build_loader(subset, fixed) as loader:
        for batch in loader:
            outputs.append(to_pixels(batch.images))
            labels.extend(int(v) for v in batch.labels.cpu())
    got = torch.cat(outputs)
    ref = torch.stack([pil_transform(f, spec.out_size, None) for f in subset.files[: got.shape[0]]])
    if labels != list(subset.labels[: got.shape[0]]):
        raise RuntimeError(f"{spec.path}: labels out of order in the verification pass")
    return got, ref.to(torch.float64)


class ImageLoader:
    """One epoch per ``iter()``: full batches only (the tail that does not fill one is dropped)."""

    def __init__(self, dataset: "JpegDataset", spec: LoaderSpec) -> None:
        if len(dataset) < spec.batch_size:
            raise ValueError(f"{len(dataset)} images do not fill one batch of {spec.batch_size}")
        self.dataset = dataset
        self.spec = spec

    @property
    def batches_per_epoch(self) -> int:
        return len(self.dataset) // self.spec.batch_size

    @property
    def images_per_epoch(self) -> int:
        return self.batches_per_epoch * self.spec.batch_size

    @property
    def encoded_bytes_per_epoch(self) -> float:
        """The epoch's share of the data set's encoded bytes (mean file size x images)."""
        return self.dataset.encoded_bytes / len(self.dataset) * self.images_per_epoch

    def __iter__(self) -> Iterator[Batch]:
        raise NotImplementedError

    def close(self) -> None:
        """Stop workers and free the pipeline."""

    def __enter__(self) -> "ImageLoader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _PilImages:
    """The DataLoader's data set: PIL decode and transform in the worker processes. Each
    worker draws crops from its own generator seeded by (seed, worker id)."""

    def __init__(self, files: tuple, labels: tuple, spec: LoaderSpec) -> None:
        self.files, self.labels, self.spec = files, labels, spec
        self._rng: Any = None

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import numpy as np
        import torch.utils.data

        rng = None
        if self.spec.random_crop:
            if self._rng is None:
                info = torch.utils.data.get_worker_info()
                self._rng = np.random.default_rng([self.spec.seed, info.id if info else 0])
            rng = self._rng
        return pil_transform(self.files[index], self.spec.out_size, rng), self.labels[index]


class TorchDataLoader(ImageLoader):
    def __init__(self, dataset: "JpegDataset", spec: LoaderSpec) -> None:
        super().__init__(dataset, spec)
        import torch
        from torch.utils.data import DataLoader

        gen = torch.Generator().manual_seed(spec.seed)
        self.device = torch.device(spec.device)
        self.loader = DataLoader(
            _PilImages(dataset.files, dataset.labels, spec),
            batch_size=spec.batch_size,
            shuffle=spec.shuffle,
            generator=gen,
            num_workers=spec.workers,
            pin_memory=spec.device == "cuda",
            drop_last=True,
            persistent_workers=spec.workers > 0,
        )

    def __iter__(self) -> Iterator[Batch]:
        for images, labels in self.loader:
            images = images.to(self.device, non_blocking=True)
            yield Batch(normalise(images), labels.to(self.device, non_blocking=True))

    def close(self) -> None:
        self.loader = None  # its persistent workers stop when the loader is collected


class TorchvisionDecode(ImageLoader):
    """Reads the batch's files on the host, decodes the list in one ``decode_jpeg`` call on
    ``spec.device`` (nvJPEG on a GPU), then crops, resizes and flips each image there."""

    def __init__(self, dataset: "JpegDataset", spec: LoaderSpec) -> None:
        super().__init__(dataset, spec)
        import numpy as np

        self._rng = np.random.default_rng([spec.seed, 1])

    def __iter__(self) -> Iterator[Batch]:
        import numpy as np
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        from torchvision.transforms.v2 import functional as F

        spec, dev = self.spec, torch.device(self.spec.device)
        n = len(self.dataset)
        order = self._rng.permutation(n) if spec.shuffle else np.arange(n)
        size = [spec.out_size, spec.out_size]
        for b in range(self.batches_per_epoch):
            index = order[b * spec.batch_size : (b + 1) * spec.batch_size]
            encoded = [read_file(str(self.dataset.files[i])) for i in index]
            decoded = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=dev)
            out = torch.empty((len(index), 3, spec.out_size, spec.out_size), dtype=torch.uint8, device=dev)
            for k, img in enumerate(decoded):
                rng = self._rng if spec.random_crop else None
                left, top, w, h = crop_box(img.shape[2], img.shape[1], rng)
                crop = F.resized_crop(img, top, left, h, w, size, antialias=True)
                if rng is not None and rng.random() < 0.5:
                    crop = crop.flip(-1)
                out[k] = crop
            # pinned, so the copy is asynchronous (from pageable memory CUDA synchronises the stream first)
            labels = torch.tensor([self.dataset.labels[i] for i in index], dtype=torch.int64)
            if dev.type == "cuda":
                labels = labels.pin_memory()
            yield Batch(normalise(out), labels.to(dev, non_blocking=True))


class DaliLoader(ImageLoader):
    """DALI's file reader, decoder (``cpu`` or ``mixed``), random-resized-crop (or the fixed
    centre crop through ``fn.resize``'s region of interest), and ``crop_mirror_normalize``.
    With batches on a GPU, ``dali_cpu`` moves the resized uint8 images to the GPU before
    normalising, as the DataLoader path does."""

    def __init__(self, dataset: "JpegDataset", spec: LoaderSpec) -> None:
        super().__init__(dataset, spec)
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        self.pipe = dali_image_pipeline(dataset, spec)
        self.pipe.build()
        self.iterator = DALIGenericIterator(
            self.pipe,
            ["images", "labels"],
            reader_name="reader",
            last_batch_policy=LastBatchPolicy.DROP,
            auto_reset=True,
        )

    def __iter__(self) -> Iterator[Batch]:
        import torch

        dev = torch.device(self.spec.device)
        for out in self.iterator:
            images, labels = out[0]["images"], out[0]["labels"]  # both on the batches' device
            yield Batch(images, labels.view(-1).to(dev, torch.int64, non_blocking=True))

    def close(self) -> None:
        self.iterator = self.pipe = None


def dali_image_pipeline(dataset: "JpegDataset", spec: LoaderSpec) -> Any:
    """The DALI pipeline of ``spec`` (not built): outputs ``images`` (float32 CHW, normalised)
    and ``labels``."""
    from nvidia.dali import fn, pipeline_def, types

    decoder = "mixed" if spec.path == "dali_mixed" else "cpu"
    on_gpu = spec.device == "cuda"
    size = (spec.out_size, spec.out_size)
    left, top, w, h = crop_box(dataset.spec.width, dataset.spec.height, None)  # the fixed crop

    @pipeline_def
    def pipeline():
        jpegs, labels = fn.readers.file(
            files=[str(f) for f in dataset.files],
            labels=list(dataset.labels),
            random_shuffle=spec.shuffle,
            seed=spec.seed,
            name="reader",
        )
        images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB)
        if spec.random_crop:
            images = fn.random_resized_crop(
                images, size=size, random_area=RANDOM_AREA, random_aspect_ratio=RANDOM_RATIO, antialias=True
            )
            mirror = fn.random.coin_flip(probability=0.5)
        else:  # PIL's box exactly: (y, x) order, as the HWC tensor's shape
            images = fn.resize(
                images,
                size=size,
                roi_start=(top, left),
                roi_end=(top + h, left + w),
                antialias=True,
                interp_type=types.INTERP_LINEAR,
            )
            mirror = 0
        if on_gpu and decoder == "cpu":
            images = images.gpu()
        if on_gpu:
            # DALI's own copy, in the pipeline: a label tensor handed over in pageable host memory
            # costs the consumer a stream synchronisation per batch (CUDA stages such a copy only
            # after the stream's earlier work)
            labels = labels.gpu()
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="CHW",
            mean=[m * 255 for m in MEAN],
            std=[s * 255 for s in STD],
            mirror=mirror,
        )
        return images, labels

    device_id = None
    if on_gpu:
        import torch

        device_id = torch.cuda.current_device()
    return pipeline(batch_size=spec.batch_size, num_threads=max(spec.workers, 1), device_id=device_id, seed=spec.seed)
