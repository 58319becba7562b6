"""``data.storage_read``: ``.npy`` shards from storage into GPU memory, by four paths:

- ``numpy``: ``np.load`` (plain reads) + ``torch.from_numpy`` + a copy to the device;
- ``dali_cpu``: DALI ``fn.readers.numpy(device="cpu")`` + a copy to the device;
- ``dali_gpu``: DALI ``fn.readers.numpy(device="gpu")``, which reads through cuFile
  (GPUDirect Storage) into GPU memory;
- ``kvikio``: KvikIO (RAPIDS' cuFile library) ``CuFile.pread`` straight into the device
  buffer; it uses GDS where cuFile works and its POSIX compatibility mode otherwise, and the
  record says which (``details["gds"]``).

On the CPU the shards stay in host memory (no copy), and the GPU-only paths are skipped with
their reason. Where GDS does not work, ``dali_gpu`` is skipped with cuFile's own error and
the other paths run.

Work: one sample is one pass over every shard (bytes = the shards' payload), after the page
cache of every shard was dropped (``posix_fadvise(POSIX_FADV_DONTNEED)``, untimed, no root
needed; ``page_cache=keep`` measures warm reads instead). The record states the method and
the share of pages still resident after a drop (``details["page_cache"]``). DALI builds a
fresh pipeline for every pass (untimed), so no pass reads ahead into the next one.

Verified per path on a separate pass: every shard bit-equal to its values regenerated from
the data set's seed, after the destination was poisoned with NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from perfsuite import Check, Requirements, param
from perfsuite.inputs import datasets
from perfsuite.workloads.data._base import (
    PAGE_CACHE_METHOD,
    DataWorkload,
    cufile_reason,
    drop_page_cache,
    first_line,
    record_passes,
    resident_fraction,
    time_passes,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from perfsuite import RunContext

PATHS = ("numpy", "dali_cpu", "dali_gpu", "kvikio")
MIB = 1024**2
DALI_ERROR_CHARS = 2000  # of DALI's error text kept in the record beside the one-line reason
Deliver = Callable[[int, Any], None]  # (shard index, its data as a torch tensor)


@dataclass(frozen=True)
class StorageReadParams:
    count: int = param(16, "shards in the data set")
    shard_bytes: int = param(64 * MIB, "bytes of float32 data per shard (K/M/G suffixes)")
    paths: tuple[str, ...] = param(PATHS, "read paths to run, one case each", choices=PATHS)
    page_cache: str = param(
        "drop", "drop each shard's page cache before every pass, or keep it warm", choices=("drop", "keep")
    )
    passes: int = param(5, "timed passes over every shard per path (one sample each)")
    warmup_passes: int = param(1, "untimed passes before the timed ones")
    dali_batch: int = param(1, "shards per DALI batch; must divide count")

    def __post_init__(self) -> None:
        if self.count < 1 or self.shard_bytes < 4 or self.shard_bytes % 4:
            raise ValueError("count must be positive and shard_bytes a positive multiple of 4")
        if self.passes < 1 or self.warmup_passes < 0:
            raise ValueError("passes must be positive, warmup_passes not negative")
        if self.dali_batch < 1 or self.count % self.dali_batch:
            raise ValueError(f"dali_batch ({self.dali_batch}) must divide count ({self.count})")
        if not self.paths:
            raise ValueError("paths names no read path")


def dali_unavailable() -> str | None:
    try:
        if find_spec("nvidia.dali") is None:
            return "needs NVIDIA DALI (pip install 'perfsuite[dali]': nvidia-dali-cuda130)"
    except ImportError:
        return "needs NVIDIA DALI (pip install 'perfsuite[dali]': nvidia-dali-cuda130)"
    return None


def kvikio_unavailable() -> str | None:
    try:
        import kvikio  # noqa: F401
    except ImportError as exc:
        return f"needs KvikIO (pip install 'perfsuite[kvikio]': kvikio-cu13): {first_line(exc)}"
    except Exception as exc:  # noqa: BLE001 - e.g. its loader finds no libcufile: recorded as the reason
        return f"KvikIO does not import: {first_line(exc)}"
    return None


class StorageRead(DataWorkload):
    name = "data.storage_read"
    controls_honoured = ()  # timed in passes of its own (its params), not by the harness's timing loop
    version = 1
    description = ".npy shards into GPU memory: numpy + copy, DALI cpu + copy, DALI gpu (GDS), KvikIO"
    Params = StorageReadParams
    quick = {"count": 4, "shard_bytes": 1 * MIB, "passes": 3}
    requirements = Requirements(packages=("torch",))
    primary_metric = "gbps"

    def setup(self, ctx: "RunContext") -> None:
        import torch

        p = self.params
        self.shards = datasets.npy_shards(datasets.ShardSpec(count=p.count, shard_bytes=p.shard_bytes, seed=0))
        self.on_gpu = ctx.device == "cuda"
        self.dst: Any = torch.empty((p.count, self.shards.elements), device=ctx.torch_device) if self.on_gpu else None
        files = [str(f) for f in self.shards.files]
        page = {"mode": p.page_cache}
        if p.page_cache == "drop":
            drop_page_cache(files)
            resident = [resident_fraction(f) for f in files]
            page.update(method=PAGE_CACHE_METHOD, resident_after_drop=None if None in resident else max(resident))
        else:
            page["method"] = "none: the shards are read warm from the page cache"
        ctx.details["page_cache"] = page
        ctx.details["dataset"] = {
            "root": str(self.shards.root),
            "shards": p.count,
            "shard_bytes": p.shard_bytes,
            "data_bytes": self.shards.data_bytes,
        }
        ctx.details["gds"] = {}

    def before_pass(self) -> None:
        if self.params.page_cache == "drop":
            drop_page_cache([str(f) for f in self.shards.files])

    # -- deliveries: where a shard read by a path ends up ----------------------------------
    def timed_delivery(self) -> Deliver:
        """On a GPU: into the shard's slot of the device buffer (the copy, for host reads).
        On the CPU: the shard stays where the path put it (no copy)."""

        def to_device(i: int, data: Any) -> None:
            if data.data_ptr() != self.dst[i].data_ptr():
                self.dst[i].copy_(data)

        return to_device if self.on_gpu else (lambda i, data: None)

    def checking_delivery(self, wrong: dict[int, int]) -> Deliver:
        """The timed delivery, then each shard compared element by element with its values
        regenerated from the seed: ``wrong`` gets shard index -> elements that differ."""
        timed = self.timed_delivery()

        def check(i: int, data: Any) -> None:
            import torch

            timed(i, data)
            got = self.dst[i] if self.on_gpu else data
            want = torch.from_numpy(self.shards.expected(i)).to(got.device)
            if got.shape != want.shape:
                wrong[i] = int(want.numel())
            elif not torch.equal(got, want):
                wrong[i] = int((got != want).sum())  # NaN != anything: an element never written counts

        return check

    # -- the paths -------------------------------------------------------------------------
    def read_numpy(self, deliver: Deliver) -> None:
        import numpy as np
        import torch

        for i, f in enumerate(self.shards.files):
            deliver(i, torch.from_numpy(np.load(f)))

    def dali_pipeline(self, device: str) -> Any:
        from nvidia.dali import fn, pipeline_def

        @pipeline_def
        def pipeline():
            return fn.readers.numpy(
                device=device, file_root=str(self.shards.root), files=[f.name for f in self.shards.files], name="reader"
            )

        device_id = None
        if self.on_gpu:
            import torch

            device_id = torch.cuda.current_device()
        pipe = pipeline(batch_size=self.params.dali_batch, num_threads=2, device_id=device_id, prefetch_queue_depth=1)
        pipe.build()
        return pipe

    def read_dali(self, device: str, pipe: Any, deliver: Deliver) -> None:
        import numpy as np
        import torch

        batch = self.params.dali_batch
        for it in range(self.params.count // batch):
            (out,) = pipe.run()
            for k in range(batch):
                i = it * batch + k
                if device == "gpu":
                    from nvidia.dali.plugin.pytorch import feed_ndarray

                    feed_ndarray(out[k], self.dst[i], cuda_stream=torch.cuda.current_stream())
                    deliver(i, self.dst[i])
                else:
                    deliver(i, torch.from_numpy(np.asarray(out[k])))

    def read_kvikio(self, deliver: Deliver, host: list) -> None:
        import kvikio
        import torch

        for i, f in enumerate(self.shards.files):
            target = self.dst[i] if self.on_gpu else host[i]
            with kvikio.CuFile(f, "r") as fh:
                got = fh.pread(target, self.params.shard_bytes, self.header_bytes[i]).get()
            if got != self.params.shard_bytes:
                raise RuntimeError(f"KvikIO read {got} of {self.params.shard_bytes} bytes of {f}")
            deliver(i, target if self.on_gpu else torch.from_numpy(target))

    # -- running -----------------------------------------------------------------------------
    def execute(self, ctx: "RunContext") -> None:
        for path in dict.fromkeys(self.params.paths):
            reader = self.prepare(ctx, path)
            if reader is None:
                continue

            def before() -> None:  # untimed: a fresh DALI pipeline, then the page cache dropped
                reader.before_pass()
                self.before_pass()

            seconds = time_passes(
                ctx, lambda: reader.read(self.timed_delivery()), self.params.passes, self.params.warmup_passes, before
            )
            record_passes(ctx, path, seconds, data_bytes=float(self.shards.data_bytes))
            ctx.log(f"{path}: {self.shards.data_bytes / min(seconds) / 1e9:.2f} GB/s at best")
            before()
            if self.on_gpu:
                self.dst.fill_(float("nan"))
            wrong: dict[int, int] = {}
            reader.read(self.checking_delivery(wrong))
            ctx.synchronize()
            failed = sum(wrong.values())
            ctx.add_check(
                Check(
                    label=path,
                    passed=not wrong,
                    error=float(len(wrong)),
                    tolerance=0.0,
                    method="bit equality of every shard with its values regenerated from the seed, "
                    "destination poisoned with NaN first",
                    detail=f"{failed} wrong elements in shards {sorted(wrong)}" if wrong else "",
                    elements_checked=self.shards.elements * len(self.shards.files),
                    elements_failed=failed,
                )
            )

    def prepare(self, ctx: "RunContext", path: str) -> "ReadPath | None":
        """How ``path`` reads one pass, or None after recording why it cannot run here."""
        if path == "numpy":
            return ReadPath(self.read_numpy)
        if path in ("dali_cpu", "dali_gpu"):
            why = dali_unavailable()
            if why is None and path == "dali_gpu" and not self.on_gpu:
                why = "reads into GPU memory through cuFile: needs a CUDA device"
            if why:
                ctx.skip_case(path, why)
                return None
            device = path.split("_")[1]
            if device == "gpu":
                refused = self.probe_dali_gds()
                ctx.details["gds"]["dali"] = "works" if refused is None else cufile_reason(refused)
                if refused is not None:
                    # DALI's whole message too, for the record: its first line is only a wrapper
                    ctx.details["gds"]["dali_message"] = str(refused)[:DALI_ERROR_CHARS]
                    ctx.skip_case(path, f"GPUDirect Storage unavailable: {ctx.details['gds']['dali']}")
                    return None
            return DaliPasses(self, device).read_path()
        why = kvikio_unavailable()
        if why:
            ctx.skip_case(path, why)
            return None
        read = self.prepare_kvikio(ctx)
        return None if read is None else ReadPath(read)

    def probe_dali_gds(self) -> Exception | None:
        """DALI's error when its GPU numpy reader cannot read here (cuFile's message inside), else None."""
        try:
            pipe = self.dali_pipeline("gpu")
            pipe.run()
        except Exception as exc:  # noqa: BLE001 - DALI raises RuntimeError with cuFile's message: recorded by the caller
            return exc
        return None

    def prepare_kvikio(self, ctx: "RunContext") -> Callable[[Deliver], None] | None:
        """Probe KvikIO in its default mode (GDS where cuFile works, else POSIX); if that
        fails, in POSIX compatibility mode; record which mode read the data."""
        import kvikio
        import kvikio.defaults
        import numpy as np

        self.header_bytes = [_npy_header_bytes(f) for f in self.shards.files]
        host = [] if self.on_gpu else [np.empty(self.shards.elements, dtype=np.float32) for _ in self.shards.files]
        report: dict = {"compat_mode_setting": _mode_name(kvikio.defaults.get("compat_mode"))}

        def run(deliver: Deliver) -> None:
            self.read_kvikio(deliver, host)

        try:
            run(lambda i, data: None)
        except Exception as exc:  # noqa: BLE001 - KvikIO raises RuntimeError with cuFile's message: recorded
            report["default_mode_error"] = first_line(exc)
            kvikio.defaults.set({"compat_mode": kvikio.CompatMode.ON})
            report["compat_mode_setting"] = _mode_name(kvikio.defaults.get("compat_mode"))
            try:
                run(lambda i, data: None)
            except Exception as exc2:  # noqa: BLE001 - no mode works: the case is skipped with both reasons
                ctx.details["gds"]["kvikio"] = report
                again = first_line(exc2)
                first = report["default_mode_error"]
                ctx.skip_case(
                    "kvikio",
                    f"KvikIO cannot read here: {again}" + ("" if again == first else f" (default mode: {first})"),
                )
                return None
        posix = bool(kvikio.defaults.is_compat_mode_preferred())
        report["mode"] = "POSIX compatibility mode (no GDS)" if posix else "GPUDirect Storage (cuFile)"
        ctx.details["gds"]["kvikio"] = report
        return run

    def teardown(self, ctx: "RunContext") -> None:
        self.dst = None


@dataclass
class ReadPath:
    """One path: ``read`` reads a pass into a delivery; ``before_pass`` runs untimed first."""

    read: Callable[[Deliver], None]
    before_pass: Callable[[], None] = lambda: None


class DaliPasses:
    """A fresh DALI pipeline for every pass, built before the pass is timed, so no pass
    reads ahead into the next one and no build is timed."""

    def __init__(self, workload: StorageRead, device: str) -> None:
        self.workload, self.device, self.pipe = workload, device, None

    def rebuild(self) -> None:
        self.pipe = None  # free the previous pipeline's buffers first
        self.pipe = self.workload.dali_pipeline(self.device)

    def read(self, deliver: Deliver) -> None:
        self.workload.read_dali(self.device, self.pipe, deliver)

    def read_path(self) -> ReadPath:
        return ReadPath(self.read, self.rebuild)


def _mode_name(mode: Any) -> str:
    """KvikIO's CompatMode as its name (ON, OFF, AUTO), not the enum's number."""
    return getattr(mode, "name", str(mode))


def _npy_header_bytes(path: Any) -> int:
    """Offset of the array's data in a .npy file."""
    import numpy as np

    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(
            version
        )
        if read_header is None:
            raise ValueError(f"{path}: .npy format version {version} is not one KvikIO's path reads")
        read_header(fh)
        return fh.tell()
