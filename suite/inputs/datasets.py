"""Data sets the suite makes itself: no downloads, deterministic from a seed, written once to
a cache folder keyed by their parameters and reused by every later run.

Two kinds:

- :func:`jpeg_images`: JPEG files of a chosen size, count and quality whose decode cost
  resembles photographs: crops, scales, colour shifts and sensor-like grain of the natural
  images that scikit-image ships inside its package (read with PIL from the package's
  ``data`` folder; nothing is fetched), plus generated gradients and textures. Each image's
  label is the index of its source (``classes``): a learnable classification task, so a
  training workload can use the same files (see :mod:`perfsuite.inputs.images`).
- :func:`npy_shards`: ``.npy`` files of float32 values, one 1-D array per shard.

The cache folder is ``$PERFSUITE_CACHE/datasets`` or ``$XDG_CACHE_HOME/perfsuite/datasets``
(``~/.cache/perfsuite/datasets``). A data set is written into a temporary folder beside its
final one and renamed into place when complete, so a crash or a concurrent writer never
leaves a half-written data set that a later run would trust. Every image is made from a
generator seeded by ``(seed, index)`` alone, so the files do not depend on how many
processes made them.

Public API (``perfsuite.inputs.datasets``): :class:`JpegSpec`, :class:`JpegDataset`,
:func:`jpeg_images`, :class:`ShardSpec`, :class:`ShardDataset`, :func:`npy_shards`,
:func:`cache_root`. No torch here; numpy and PIL are imported when a data set is made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.inputs.cache import cache_folder, made_once

# Bump when the images or shards a spec produces change: the cache key includes it.
GENERATOR_VERSION = 1
MANIFEST = "manifest.json"
# Natural colour and grey images of scikit-image's package data (file name -> class name).
NATURAL_SOURCES = (
    "astronaut.png",
    "coffee.png",
    "chelsea.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "hubble_deep_field.jpg",
    "retina.jpg",
    "ihc.png",
    "camera.png",
    "grass.png",
    "gravel.png",
    "brick.png",
)
GENERATED_SOURCES = ("gradient", "texture")
# Images per worker process below which a process pool costs more than it saves.
POOL_MIN_IMAGES = 64


def cache_root() -> Path:
    """Where data sets live: ``$PERFSUITE_CACHE/datasets``, else the XDG cache folder's."""
    return cache_folder("datasets")


# -- JPEG images ------------------------------------------------------------------------


@dataclass(frozen=True)
class JpegSpec:
    """Which JPEG data set: ``count`` images of ``width`` x ``height`` at JPEG ``quality``."""

    count: int
    width: int = 500
    height: int = 375
    quality: int = 90
    seed: int = 0

    def __post_init__(self) -> None:
        if self.count < 1 or self.width < 16 or self.height < 16:
            raise ValueError("a JPEG data set needs count >= 1 and images of at least 16 x 16")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"JPEG quality must be 1..100, not {self.quality}")


@dataclass(frozen=True)
class JpegDataset:
    """A made JPEG data set: ``files[i]`` has label ``labels[i]``, a name in ``classes``."""

    spec: JpegSpec
    root: Path
    files: tuple[Path, ...]
    labels: tuple[int, ...]
    classes: tuple[str, ...]
    encoded_bytes: int  # sum of the files' sizes: the "MB/s of encoded input" basis

    def __len__(self) -> int:
        return len(self.files)


def classes() -> tuple[str, ...]:
    """Class names, in label order: one per natural source, then the generated kinds."""
    return tuple(name.rsplit(".", 1)[0] for name in NATURAL_SOURCES) + GENERATED_SOURCES


def skimage_data_dir() -> Path:
    """scikit-image's package data folder, found without importing scikit-image (which
    needs scipy and more): only its image files are used."""
    from importlib.util import find_spec

    spec = find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the JPEG data set is made from scikit-image's sample images: "
            "install scikit-image (pip install 'perfsuite[data]')"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    missing = [n for n in NATURAL_SOURCES if not (folder / n).is_file()]
    if missing:
        raise RuntimeError(f"scikit-image's data folder {folder} lacks {', '.join(missing)}")
    return folder


def jpeg_images(spec: JpegSpec, processes: int | None = None) -> JpegDataset:
    """The data set of ``spec``, made now if the cache does not hold it yet.
    ``processes``: worker processes used to make it (default: up to 16, one per CPU)."""
    folder = skimage_data_dir()  # fail before any work when the sources are missing
    target = _dataset_dir("jpeg", spec, f"{spec.width}x{spec.height}-q{spec.quality}-n{spec.count}-seed{spec.seed}")

    def make(tmp: Path) -> dict:
        names = [f"{i:07d}.jpg" for i in range(spec.count)]
        jobs = [(spec, i, str(folder), str(tmp / name)) for i, name in enumerate(names)]
        labels = _map(_make_image, jobs, processes)
        return {"files": names, "labels": labels}

    manifest = _cached(target, spec, make)
    files = tuple(target / n for n in manifest["files"])
    return JpegDataset(
        spec=spec,
        root=target,
        files=files,
        labels=tuple(manifest["labels"]),
        classes=tuple(manifest["classes"]),
        encoded_bytes=int(manifest["total_bytes"]),
    )


def _make_image(job: tuple[JpegSpec, int, str, str]) -> int:
    """Make image ``index`` of ``spec`` at ``path``; return its label."""
    import numpy as np
    from PIL import Image

    spec, index, folder, path = job
    rng = np.random.default_rng([spec.seed, index, GENERATOR_VERSION])
    n_classes = len(NATURAL_SOURCES) + len(GENERATED_SOURCES)
    label = index % n_classes  # balanced classes
    size = (spec.width, spec.height)
    if label < len(NATURAL_SOURCES):
        rgb = _natural_view(_source(folder, NATURAL_SOURCES[label]), size, rng)
    elif GENERATED_SOURCES[label - len(NATURAL_SOURCES)] == "gradient":
        rgb = _gradient(size, rng)
    else:
        rgb = _texture(size, rng)
    # Sensor-like grain: photographs are never smooth at the pixel level, and grain is what
    # gives a JPEG its photographic entropy (decode cost) without being pure noise.
    grain = rng.normal(0.0, rng.uniform(1.5, 4.0), rgb.shape)
    pixels = np.clip(rgb + grain, 0, 255).astype(np.uint8)
    Image.fromarray(pixels, "RGB").save(path, format="JPEG", quality=spec.quality)
    return label


_SOURCES: dict[str, Any] = {}


def _source(folder: str, name: str) -> Any:
    """A natural source image as an RGB PIL image (loaded once per process)."""
    from PIL import Image

    if name not in _SOURCES:
        with Image.open(Path(folder) / name) as img:
            _SOURCES[name] = img.convert("RGB")
    return _SOURCES[name]


def _natural_view(src: Any, size: tuple[int, int], rng: Any) -> Any:
    """A random crop of ``src`` (35-100% of its area, the output's aspect ratio), scaled to
    ``size``, maybe mirrored, with a colour shift; float RGB array. Grey sources get a tint."""
    import numpy as np
    from PIL import Image

    sw, sh = src.size
    aspect = size[0] / size[1]
    area = rng.uniform(0.35, 1.0) * sw * sh
    cw = int(min(sw, round((area * aspect) ** 0.5)))
    ch = int(min(sh, round(cw / aspect)))
    cw = int(min(cw, round(ch * aspect))) or 1
    left = int(rng.integers(0, sw - cw + 1))
    top = int(rng.integers(0, sh - ch + 1))
    view = src.resize(size, Image.BICUBIC, box=(left, top, left + cw, top + ch))
    if rng.random() < 0.5:
        view = view.transpose(Image.FLIP_LEFT_RIGHT)
    rgb = np.asarray(view, dtype=np.float64)
    gain = rng.uniform(0.8, 1.2, 3)  # white balance / colour shift per channel
    offset = rng.uniform(-20, 20)  # exposure
    return rgb * gain + offset


def _gradient(size: tuple[int, int], rng: Any) -> Any:
    """A linear gradient between two random colours with a few soft ellipses on it."""
    import numpy as np

    w, h = size
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    angle = rng.uniform(0, 2 * np.pi)
    t = x * np.cos(angle) + y * np.sin(angle)
    t = (t - t.min()) / max(t.max() - t.min(), 1.0)
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    rgb = c0 + t[..., None] * (c1 - c0)
    for _ in range(int(rng.integers(3, 8))):
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.05, 0.3) * w, rng.uniform(0.05, 0.3) * h
        d = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        alpha = 1.0 / (1.0 + np.exp(np.minimum((d - 1.0) * 8.0, 50.0)))  # soft edge
        rgb = rgb * (1 - alpha[..., None]) + rng.uniform(0, 255, 3) * alpha[..., None]
    return rgb


def _texture(size: tuple[int, int], rng: Any) -> Any:
    """Multi-octave value noise (smooth at coarse scales, detailed at fine ones) with stripes,
    coloured by a random palette."""
    import numpy as np
    from PIL import Image

    w, h = size
    field = np.zeros((h, w))
    for octave in range(1, 6):
        cells = 2 ** (octave + 1)
        coarse = rng.uniform(0, 1, (cells, cells)).astype(np.float32)
        up = np.asarray(Image.fromarray(coarse, "F").resize((w, h), Image.BICUBIC), dtype=np.float64)
        field += up / octave
    y, x = np.mgrid[0:h, 0:w]
    field += 0.3 * np.sin(x * rng.uniform(0.05, 0.3) + y * rng.uniform(0.05, 0.3))
    field = (field - field.min()) / max(field.max() - field.min(), 1e-9)
    dark, light = rng.uniform(0, 110, 3), rng.uniform(145, 255, 3)  # contrast guaranteed
    return dark + field[..., None] * (light - dark)


# -- .npy shards ------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardSpec:
    """Which shard set: ``count`` .npy files of ``shard_bytes`` float32 data each."""

    count: int
    shard_bytes: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.count < 1 or self.shard_bytes < 4 or self.shard_bytes % 4:
            raise ValueError("a shard set needs count >= 1 and shard_bytes a positive multiple of 4 (float32)")


@dataclass(frozen=True)
class ShardDataset:
    """A made shard set: every file holds one 1-D float32 array of ``elements`` values."""

    spec: ShardSpec
    root: Path
    files: tuple[Path, ...]
    elements: int
    data_bytes: int  # payload bytes of all shards (headers excluded)

    def __len__(self) -> int:
        return len(self.files)

    def expected(self, index: int) -> Any:
        """Shard ``index``'s values, regenerated from the seed: the reference a read is checked against."""
        return _shard_values(self.spec, index)


def npy_shards(spec: ShardSpec) -> ShardDataset:
    """The shard set of ``spec``, made now if the cache does not hold it yet."""
    target = _dataset_dir("npy", spec, f"{spec.shard_bytes}B-n{spec.count}-seed{spec.seed}")

    def make(tmp: Path) -> dict:
        import numpy as np

        names = [f"{i:05d}.npy" for i in range(spec.count)]
        for i, name in enumerate(names):
            np.save(tmp / name, _shard_values(spec, i))
        return {"files": names}

    manifest = _cached(target, spec, make)
    elements = spec.shard_bytes // 4
    return ShardDataset(
        spec=spec,
        root=target,
        files=tuple(target / n for n in manifest["files"]),
        elements=elements,
        data_bytes=elements * 4 * spec.count,
    )


def _shard_values(spec: ShardSpec, index: int) -> Any:
    import numpy as np

    rng = np.random.default_rng([spec.seed, index, GENERATOR_VERSION])
    return rng.random(spec.shard_bytes // 4, dtype=np.float32)


# -- the cache --------------------------------------------------------------------------


def _dataset_dir(kind: str, spec: Any, readable: str) -> Path:
    """``<cache>/<kind>-<readable>-<hash of kind, spec and generator version>``."""
    basis = json.dumps({"kind": kind, "spec": dataclasses.asdict(spec), "generator": GENERATOR_VERSION}, sort_keys=True)
    key = hashlib.sha256(basis.encode()).hexdigest()[:12]
    return cache_root() / f"{kind}-{readable}-{key}"


def _cached(target: Path, spec: Any, make: Callable[[Path], dict]) -> dict:
    """The manifest of ``target``; made first (in a temporary folder renamed into place)
    when absent. A concurrent maker that finishes first wins; ours is discarded."""

    def fill(tmp: Path) -> None:
        manifest = make(tmp)
        manifest.update(
            spec=dataclasses.asdict(spec),
            generator=GENERATOR_VERSION,
            classes=list(classes()),
            total_bytes=sum((tmp / n).stat().st_size for n in manifest["files"]),
        )
        (tmp / MANIFEST).write_text(json.dumps(manifest))

    made_once(target, MANIFEST, fill)
    return json.loads((target / MANIFEST).read_text())


def _map(fn: Callable[[Any], Any], jobs: list, processes: int | None) -> list:
    """``[fn(job) for job in jobs]``, across worker processes when there are many jobs."""
    if processes is None:
        processes = min(os.cpu_count() or 1, 16)
    processes = min(processes, len(jobs) // POOL_MIN_IMAGES)
    if processes <= 1:
        return [fn(job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: the caller may hold CUDA state, which a forked child must not inherit
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(fn, jobs, chunksize=32))
