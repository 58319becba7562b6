"""``data.image_pipeline``: JPEG decode, random-resized-crop, flip and normalise into batches
on the device, through every input pipeline of :mod:`perfsuite.inputs.images` side by side:
torch ``DataLoader`` (PIL in worker processes, pinned memory), ``torchvision.io.decode_jpeg``
on the GPU, DALI on the CPU, DALI ``mixed`` (nvJPEG).

Work: one sample is one epoch over the suite's JPEG data set (``perfsuite.inputs.datasets``; full
batches only, in a new random order each epoch unless ``shuffle=false``), timed with the
host clock and the device synchronised at its end, after ``warmup_epochs`` untimed epochs
(DataLoader workers start, DALI allocates). Metrics per path: images/s and MB/s of encoded
input (images/s x the data set's mean file size).

Verified per path on a separate pass: the fixed centre square (no flip) resized to
``out_size``, against PIL's decode and bilinear resize of the same box: each image's mean
absolute error in 0-255 units within ``perfsuite.inputs.images.PIXEL_TOLERANCE`` (image by
image, so one wrong image fails however many right ones surround it; see :func:`pixel_check`). A path that cannot run
here (no GPU, DALI not installed) is a skipped case with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfsuite import Check, Requirements, param
from perfsuite.inputs import datasets
from perfsuite.inputs import images as pipelines
from perfsuite.workloads.data._base import (
    JPEG_QUICK,
    MB,
    DataWorkload,
    JpegDataParams,
    record_passes,
    time_passes,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

PATHS = pipelines.PATHS


@dataclass(frozen=True)
class ImagePipelineParams(JpegDataParams):
    quality: int = param(90, "JPEG quality the data set is encoded at")
    out_size: int = param(224, "side of the square crop each image is resized to")
    batch_size: int = param(64, "images per batch")
    workers: int = param(8, "DataLoader worker processes; DALI CPU threads")
    shuffle: bool = param(
        True,
        "read the images in a new random order each epoch, as training does "
        "(and data.loader_stall, and the bare DALI loop it is checked against)",
    )
    paths: tuple[str, ...] = param(PATHS, "input pipelines to run, one case each", choices=PATHS)
    epochs: int = param(5, "timed epochs per path (one sample each)")
    warmup_epochs: int = param(1, "untimed epochs before the timed ones")
    verify_images: int = param(64, "images compared with PIL on the centre-crop verification pass")

    def __post_init__(self) -> None:
        if self.count < self.batch_size:
            raise ValueError(f"count ({self.count}) must fill at least one batch of {self.batch_size}")
        if self.epochs < 1 or self.warmup_epochs < 0 or self.verify_images < 1:
            raise ValueError("epochs and verify_images must be positive, warmup_epochs not negative")
        if not self.paths:
            raise ValueError("paths names no input pipeline")


class ImagePipeline(DataWorkload):
    name = "data.image_pipeline"
    controls_honoured = ()  # timed in passes of its own (its params), not by the harness's timing loop
    version = 3  # 3: labels reach the GPU without a stream sync per batch (DALI copies them, the
    # torchvision path pins them); 2: shuffled reads by default (1 read the files in order)
    description = "JPEG decode + random-resized-crop + flip + normalise: DataLoader, GPU decode, DALI cpu/mixed"
    Params = ImagePipelineParams
    quick = {
        **JPEG_QUICK,
        "out_size": 64,
        "batch_size": 8,
        "workers": 2,
        "epochs": 3,
        "verify_images": 16,
    }
    # PIL decodes the reference; scikit-image's package holds the photographs the data set is made from
    requirements = Requirements(packages=("torch", "PIL", "skimage"))
    primary_metric = "items_per_s"

    def setup(self, ctx: "RunContext") -> None:
        p = self.params
        self.dataset = datasets.jpeg_images(
            datasets.JpegSpec(count=p.count, width=p.width, height=p.height, quality=p.quality, seed=0)
        )
        ctx.details["dataset"] = {
            "root": str(self.dataset.root),
            "images": len(self.dataset),
            "width": p.width,
            "height": p.height,
            "quality": p.quality,
            "encoded_bytes": self.dataset.encoded_bytes,
            "mean_file_kb": round(self.dataset.encoded_bytes / len(self.dataset) / 1e3, 2),
        }
        ctx.details["pixel_tolerance"] = pipelines.PIXEL_TOLERANCE

    def execute(self, ctx: "RunContext") -> None:
        p = self.params
        for path in dict.fromkeys(p.paths):
            why = pipelines.unavailable(path, ctx.device)
            if why:
                ctx.skip_case(path, why)
                continue
            spec = pipelines.LoaderSpec(
                path,
                batch_size=p.batch_size,
                out_size=p.out_size,
                workers=p.workers,
                shuffle=p.shuffle,
                seed=ctx.controls.seed,
                device=ctx.device,
            )
            with pipelines.build_loader(self.dataset, spec) as loader:

                def epoch() -> None:
                    for _batch in loader:
                        pass

                seconds = time_passes(ctx, epoch, p.epochs, p.warmup_epochs)
                record_passes(
                    ctx,
                    path,
                    seconds,
                    items=loader.images_per_epoch,
                    item_unit="images",
                    data_bytes=loader.encoded_bytes_per_epoch,
                    bytes_metric="encoded_mbps",
                )
            ctx.log(
                f"{path}: {loader.images_per_epoch / min(seconds):,.0f} images/s at best, "
                f"{loader.encoded_bytes_per_epoch / min(seconds) / MB:,.1f} MB/s"
            )
            got, ref = pipelines.centre_crop_outputs(self.dataset, spec, p.verify_images)
            ctx.add_check(pixel_check(path, got, ref))


def pixel_check(label: str, got: Any, ref: Any) -> Check:
    """The verification of one path's centre-crop output ``got`` against PIL's ``ref`` (float64
    NCHW, 0-255 units, image for image): every image's mean absolute error within
    ``PIXEL_TOLERANCE``. The element judged is the image: decoders and resamplers differ by a
    level or so on every pixel (far more at a few edges), so a per-pixel bound would either
    fail correct decoders or pass anything; but a wrong, flipped or misplaced image is tens of
    levels off on average, and judged alone it cannot hide in the mean of the others.
    ``error`` is the worst image's mean absolute error."""
    if got.shape != ref.shape:
        return Check(
            label=label,
            passed=False,
            method=PIXEL_METHOD,
            error=float("inf"),
            tolerance=pipelines.PIXEL_TOLERANCE,
            detail=f"shape {tuple(got.shape)} != reference {tuple(ref.shape)}",
        )
    per_image = (got - ref).abs().flatten(1).mean(dim=1)
    bad = [i for i, e in enumerate(per_image.tolist()) if not e <= pipelines.PIXEL_TOLERANCE]  # NaN fails
    worst = int(per_image.nan_to_num(nan=float("inf")).argmax()) if len(per_image) else 0
    worst_error = float(per_image[worst]) if len(per_image) else 0.0
    n = int(per_image.numel())
    return Check(
        label=label,
        passed=n > 0 and not bad,
        method=PIXEL_METHOD,
        error=worst_error if worst_error == worst_error else float("inf"),
        tolerance=pipelines.PIXEL_TOLERANCE,
        detail=(f"{len(bad)} of {n} images over the tolerance: {bad[:10]}" if bad else f"{n} images")
        + f"; worst image {worst}: {worst_error:.3g} levels; mean over all {float((got - ref).abs().mean()):.3g}",
        elements_checked=n,
        elements_failed=len(bad),
        worst_element={"index": [worst], "got": worst_error, "expected": 0.0} if n else None,
    )


PIXEL_METHOD = (
    "mean absolute error, 0-255 units, of each image's centre square (no flip) resized to out_size, "
    "against PIL decode + bilinear resize of the same box"
)
