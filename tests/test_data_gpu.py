"""The data workloads on a CUDA GPU (``pytest -m gpu``): every quick preset verifies, the
GPU paths (torchvision's GPU decode, DALI mixed, DALI's GDS reader, KvikIO) run and verify or
say why not, and host-to-device copies are bit-exact. Skipped cleanly without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perfsuite.inputs import images as ip  # noqa: E402
from perfsuite.workloads.data import WORKLOADS  # noqa: E402
from perfsuite.workloads.data.image_pipeline import ImagePipeline  # noqa: E402
from perfsuite.workloads.data.storage_read import StorageRead, kvikio_unavailable  # noqa: E402
from tests.test_kernels import check, metric, run  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("cls", WORKLOADS, ids=lambda c: c.name)
def test_quick_preset_verifies_on_the_gpu(cls):
    ctx = run(cls, device="cuda")
    assert ctx.checks and all(c.passed for c in ctx.checks), [c for c in ctx.checks if not c.passed]
    for label, reason in ctx.details.get("skipped_cases", {}).items():
        print(f"{cls.name} {label} skipped: {reason}")


def test_every_image_path_this_machine_has_matches_pil():
    ctx = run(ImagePipeline, device="cuda")
    ran = [p for p in ip.PATHS if ip.unavailable(p, "cuda") is None]
    assert "torchvision_gpu_decode" in ran
    for path in ran:
        c = check(ctx, path)
        print(f"{path}: {metric(ctx, path, 'items_per_s')['value']:.0f} images/s, error {c.error:.3f} of {c.tolerance}")
        assert c.passed, c


def test_storage_paths_run_or_state_gds_status():
    ctx = run(StorageRead, device="cuda")
    assert check(ctx, "numpy").passed
    skipped = ctx.details.get("skipped_cases", {})
    if "dali_gpu" in skipped:
        assert "GPUDirect Storage unavailable" in skipped["dali_gpu"] or "DALI" in skipped["dali_gpu"]
    else:
        assert check(ctx, "dali_gpu").passed
    if kvikio_unavailable() is None:
        assert "kvikio" in skipped or check(ctx, "kvikio").passed
        print("kvikio:", ctx.details["gds"].get("kvikio"), skipped.get("kvikio"))
    print("gds:", ctx.details["gds"], "page cache:", ctx.details["page_cache"])
