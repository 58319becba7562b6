"""A bare DALI loop, outside the suite: the reference that ``data.image_pipeline``'s DALI
figures are checked against. It reads the suite's JPEG data set folder (its manifest.json),
builds the pipeline the way DALI's own examples do (file reader, decoder, random resized
crop, crop_mirror_normalize with a random flip), calls ``pipe.run()`` back to back and
times whole epochs with the host clock; then, on a fresh pipeline, the same epochs through
DALI's own PyTorch iterator (``DALIGenericIterator``, as DALI's PyTorch examples and the
suite consume it), so that what the iterator costs shows apart from the suite. No suite code
is imported.

    python3 bench/dali_reference.py DATASET_DIR --decoder mixed --json out.json
    python3 bench/dali_reference.py DATASET_DIR --device cpu --decoder cpu --threads 2   # no GPU:
        batches stay on the host, as the suite's dali_cpu path with device=cpu
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="a data set folder made by perfsuite.inputs.datasets (holds manifest.json)")
    ap.add_argument("--decoder", choices=("mixed", "cpu"), action="append", help="repeat for both")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the batches end")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    decoders = args.decoder or (["mixed"] if args.device == "cuda" else ["cpu"])
    if args.device == "cpu" and "mixed" in decoders:
        ap.error("--device cpu takes --decoder cpu only (the mixed decoder is nvJPEG on the GPU)")
    manifest = json.loads((args.root / "manifest.json").read_text())
    files = [str(args.root / n) for n in manifest["files"]]
    out = {}
    for decoder in decoders:
        out[decoder] = time_epochs(files, manifest["labels"], decoder, args, iterator=False)
        out[decoder]["iterator"] = time_epochs(files, manifest["labels"], decoder, args, iterator=True)
        for how, fig in (("pipe.run()", out[decoder]), ("DALIGenericIterator", out[decoder]["iterator"])):
            print(
                f"bare DALI {decoder:5} {how:19}: {fig['images_per_s']:,.0f} images/s "
                f"(median of {args.epochs} epochs of {fig['images_per_epoch']} images)"
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


def time_epochs(files: list[str], labels: list[int], decoder: str, args: argparse.Namespace, iterator: bool) -> dict:
    import torch
    from nvidia.dali import fn, pipeline_def, types

    on_gpu = args.device == "cuda"

    def synchronize() -> None:
        if on_gpu:
            torch.cuda.synchronize()  # every stream of the device, DALI's included

    @pipeline_def(batch_size=args.batch, num_threads=args.threads, device_id=0 if on_gpu else None, seed=0)
    def pipe_def():
        # the suite's data.image_pipeline pipeline, option for option (perfsuite.inputs.images)
        jpegs, lab = fn.readers.file(files=files, labels=labels, random_shuffle=True, seed=0, name="reader")
        images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB)
        images = fn.random_resized_crop(
            images,
            size=(args.size, args.size),
            random_area=(0.08, 1.0),
            random_aspect_ratio=(3 / 4, 4 / 3),
            antialias=True,
        )
        if decoder == "cpu" and on_gpu:
            images = images.gpu()
        if on_gpu:
            lab = lab.gpu()
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="CHW",
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            mirror=fn.random.coin_flip(probability=0.5),
        )
        return images, lab

    pipe = pipe_def()
    pipe.build()
    per_epoch = len(files) // args.batch
    if iterator:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        loader = DALIGenericIterator(
            pipe, ["images", "labels"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
        )

        def one_epoch() -> None:
            for _batch in loader:
                pass
    else:

        def one_epoch() -> None:
            for _ in range(per_epoch):
                pipe.run()

    seconds = []
    for epoch in range(1 + args.epochs):  # the first epoch warms up
        synchronize()
        t0 = time.perf_counter()
        one_epoch()
        synchronize()
        if epoch:
            seconds.append(time.perf_counter() - t0)
    n = per_epoch * args.batch
    return {"images_per_epoch": n, "epoch_s": seconds, "images_per_s": n / statistics.median(seconds)}


if __name__ == "__main__":
    main()
