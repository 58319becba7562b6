"""``perfsuite.checks.close`` judges every element (``|out - ref| <= atol + rtol * |ref|``, NaN and
infinity handled) as well as the norm, and every built-in family's verification fails when one
element of a real output is wrong: the kernels (gemm, attention, fusion, memory), the data
family (storage reads, image pipelines) and the inference family's accuracy check. The counts
of elements checked and failed land in the record, and the record schema accepts them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from support.factories import make_record, sign

from perfsuite.checks import close, equal

torch = pytest.importorskip("torch")

from perfsuite.testing import run_in_process  # noqa: E402
from perfsuite.workloads.kernels import _verify  # noqa: E402
from perfsuite.workloads.kernels.attention import Attention  # noqa: E402
from perfsuite.workloads.kernels.fusion import Fusion  # noqa: E402
from perfsuite.workloads.kernels.gemm import Gemm  # noqa: E402
from perfsuite.workloads.kernels.memory import Memory  # noqa: E402

N = 512 * 512  # 262,144 elements


def _output(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((512, 512)).astype(np.float32)


# -- the rule itself ----------------------------------------------------------------------------
def test_close_fails_on_one_wrong_element_in_262144_that_the_norm_lets_through():
    out = _output()
    ref = out.astype(np.float64)
    assert close("ok", out, ref, 1e-5).passed
    out[300, 17] = ref[300, 17] + 0.5  # one element off by about half the data's spread
    c = close("one wrong", out, ref, 2e-3)
    assert c.error < 2e-3, "the norm alone would pass it"
    assert not c.passed
    assert (c.elements_checked, c.elements_failed) == (N, 1)
    assert c.worst_element["index"] == [300, 17]
    assert c.worst_element["got"] == pytest.approx(float(out[300, 17]))
    assert c.worst_element["expected"] == pytest.approx(float(ref[300, 17]))
    assert "1 of 262,144 elements outside" in c.detail and "[300, 17]" in c.detail


def test_close_fails_on_one_nan_and_passes_matching_nans_only_when_allowed():
    ref = _output().astype(np.float64)
    out = ref.astype(np.float32)
    out[5, 6] = np.nan
    c = close("nan", out, ref)
    assert not c.passed and c.elements_failed == 1 and c.error == float("inf")
    assert c.worst_element["index"] == [5, 6] and c.worst_element["got"] == "nan"
    ref_nan = ref.copy()
    ref_nan[5, 6] = np.nan
    assert not close("nan both", out, ref_nan).passed
    assert close("nan both, allowed", out, ref_nan, equal_nan=True).passed


def test_close_requires_infinities_to_match_exactly():
    ref = np.array([1.0, np.inf, -np.inf, 2.0])
    assert close("same", ref.copy(), ref).passed
    wrong_sign = ref.copy()
    wrong_sign[1] = -np.inf
    assert close("sign", wrong_sign, ref).elements_failed == 1
    finite = ref.copy()
    finite[2] = -1e308
    assert not close("finite for inf", finite, ref).passed
    overflow = ref.copy()
    overflow[3] = np.inf
    c = close("inf for finite", overflow, ref)
    assert not c.passed and c.worst_element["index"] == [3]


def test_close_takes_torch_tensors_with_torch_testings_bf16_tolerances():
    ref = torch.from_numpy(_output().astype(np.float64))
    out = ref.to(torch.bfloat16)
    assert close("bf16", out, ref).passed  # one rounding to bf16 is within rtol 1.6e-2
    out[100, 200] = 5.0
    c = close("bf16 wrong", out, ref, 2e-2)
    assert not c.passed and c.error < 2e-2 and c.elements_failed == 1
    assert c.worst_element["index"] == [100, 200]


def test_a_wrong_tile_moves_the_norm_less_than_the_bf16_tolerance_but_fails_per_element():
    """A 16x16 tile of 1024x1024 is the share of a 128x128 tile of 8192x8192 (1/4096)."""
    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(1024, 1024, generator=gen, dtype=torch.float64)
    out = ref.to(torch.bfloat16)
    out[512:528, 256:272] = 0  # the tile's elements never computed
    c = close("tile", out, ref, 2e-2)
    assert c.error < 2e-2, c.error
    assert not c.passed and c.elements_failed >= 250


def test_close_and_equal_on_numpy_never_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from perfsuite.checks import close, equal\n"
        "a = np.ones(1000, dtype=np.float32); b = a.copy(); b[7] = 2\n"
        "c = close('x', b, a.astype(np.float64)); e = equal('y', b, a)\n"
        "assert not c.passed and c.elements_failed == 1 and e.elements_failed == 1, (c, e)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_equal_counts_wrong_elements_and_names_the_first():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = a.copy()
    b[2, 1] = np.nan
    b[2, 3] = 0
    c = equal("copy", b, a)
    assert not c.passed and c.error == 2.0 and (c.elements_checked, c.elements_failed) == (12, 2)
    assert c.worst_element["index"] == [2, 1]
    assert equal("copy", a, a.copy()).passed


def test_a_close_refuses_a_float8_output_without_tolerances():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8")
    out = torch.ones(4).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="no default tolerance for float8_e4m3fn"):
        close("fp8", out, torch.ones(4, dtype=torch.float64))
    assert close("fp8", out, torch.ones(4, dtype=torch.float64), rtol=0.1, atol=0.0).passed


def test_the_counts_land_in_a_schema_valid_record():
    from perfsuite.schemas.validate import validate_record

    c = close("bf16", _output(), _output().astype(np.float64) + 1.0)
    record = make_record(verification="failed")
    record["verification"]["checks"] = [vars(c)]
    validate_record(sign(record))
    assert record["verification"]["checks"][0]["elements_failed"] == N
    old = make_record()  # a record written before the fields existed stays valid
    assert "elements_checked" not in old["verification"]["checks"][0]
    validate_record(old)


def test_a_failing_element_check_names_the_count_in_the_runs_error():
    from perfsuite.engine.record import verdict
    from perfsuite.engine.runspec import WorkerResult

    out = _output()
    ref = out.astype(np.float64)
    out[1, 2] += 3
    c = close("fp32", out, ref, 1e-2)
    result = WorkerResult(status="success", started_at="", finished_at="", checks=[vars(c)])
    status, verification, error = verdict(result)
    assert (status, verification) == ("invalid", "failed")
    assert "1 of 262,144 elements outside" in error


# -- the kernels family ------------------------------------------------------------------------
def _run(cls, params=None):
    return run_in_process(cls, params or {}, iterations=2, warmup=1)


class OneWrongGemm(Gemm):
    """A kernel that writes one wrong element."""

    def kernel(self, ops):
        def fn():
            ops.run()
            ops.out[201, 77] += 0.25 * float(ops.out.abs().max())

        return fn


def test_gemm_verification_fails_on_one_wrong_element():
    ctx = _run(OneWrongGemm, {"dtypes": "fp32,bf16"})
    for c in ctx.checks:
        assert not c.passed, c
        assert c.elements_checked == 256 * 256 and c.elements_failed == 1
        assert c.worst_element["index"] == [201, 77]


def test_the_gemm_grid_cannot_miss_a_tile_two_bands_wide():
    """At 4096x4096 the grid takes one row in each band of 32; a 64x64 tile (the share of a
    128x128 tile of 8192x8192) always holds sampled elements, wherever it sits."""
    gen = torch.Generator().manual_seed(0)
    for seed in range(3):
        rows = _verify.stratified(4096, _verify.GRID, gen)
        for start in (0, 1000, 4096 - 64):
            assert ((rows >= start) & (rows < start + 64)).sum() >= 1, (seed, start)
    a = torch.randn(4096, 16, dtype=torch.float32)
    b = torch.randn(16, 4096, dtype=torch.float32)
    out = (a @ b).to(torch.bfloat16)
    assert _verify.check_matmul("bf16", out, a, b, tolerance=2e-2, rtol=2**-7, atol_rms=4e-2, seed=0).passed
    out[1024:1088, 2048:2112] = 0
    c = _verify.check_matmul("bf16", out, a, b, tolerance=2e-2, rtol=2**-7, atol_rms=4e-2, seed=0)
    assert c.error < 2e-2 and not c.passed, c
    i, j = c.worst_element["index"]
    assert 1024 <= i < 1088 and 2048 <= j < 2112


class OneWrongAttention(Attention):
    def setup(self, ctx):
        super().setup(ctx)
        self._fns = {b: self._broken(fn) for b, fn in self._fns.items()}

    @staticmethod
    def _broken(fn):
        def wrong():
            out = fn().clone()
            out[0, 1, 100, 3] += 0.1  # about twice the output's RMS
            return out

        return wrong


def test_attention_verification_fails_on_one_wrong_element():
    ctx = _run(OneWrongAttention, {"backends": "math"})
    (c,) = ctx.checks
    assert not c.passed and c.elements_failed == 1 and c.worst_element["index"] == [0, 1, 100, 3]
    assert c.error < c.tolerance, "the norm alone would pass it"
    assert _run(Attention, {"backends": "math"}).checks[0].passed


class OneWrongFusion(Fusion):
    def setup(self, ctx):
        super().setup(ctx)
        eager = self._impls["eager"]

        def wrong(*inputs):
            out = eager(*inputs)
            out[17, 5] += 0.5
            return out

        self._impls["eager"] = wrong


def test_fusion_verification_fails_on_one_wrong_element():
    ctx = _run(OneWrongFusion, {"impls": "eager"})
    (c,) = ctx.checks
    assert not c.passed and c.elements_failed == 1 and c.worst_element["index"] == [17, 5]
    assert c.error < c.tolerance, "the norm alone would pass it"


class OneWrongMemory(Memory):
    def copy(self):
        super().copy()
        self.a[4321] += 1

    def triad(self):
        super().triad()
        self.a[4321] += 1


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_memory_verification_fails_on_one_wrong_element(dtype):
    ctx = _run(OneWrongMemory, {"dtype": dtype, "size_bytes": "1M"})
    assert {c.label for c in ctx.checks} == {"copy", "triad"}
    for c in ctx.checks:
        assert not c.passed and c.elements_failed == 1 and c.worst_element["index"] == [4321], c
    assert all(c.passed for c in _run(Memory, {"dtype": dtype, "size_bytes": "1M"}).checks)


# -- the data family ------------------------------------------------------------------------
def test_storage_read_verification_fails_on_one_wrong_element_on_disk(tmp_path, monkeypatch):
    from perfsuite.workloads.data.storage_read import StorageRead

    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))
    params = {"paths": "numpy", "page_cache": "keep", "passes": 1, "warmup_passes": 0}
    ctx = _run(StorageRead, params)
    (c,) = ctx.checks
    assert c.passed and c.elements_failed == 0 and c.elements_checked == 4 * 1024 * 1024 // 4
    shard = sorted((tmp_path / "cache").rglob("00002.npy"))[0]
    values = np.load(shard)
    values[1000] += 1.0
    np.save(shard, values)  # one element of one shard changed where the reader reads it
    (c,) = _run(StorageRead, params).checks
    assert not c.passed and c.elements_failed == 1 and "shards [2]" in c.detail


def test_image_pipeline_verification_fails_on_one_wrong_image(tmp_path, monkeypatch):
    from perfsuite.inputs import datasets
    from perfsuite.inputs import images as ip
    from perfsuite.workloads.data.image_pipeline import pixel_check

    monkeypatch.setenv("PERFSUITE_CACHE", str(tmp_path / "cache"))
    data = datasets.jpeg_images(datasets.JpegSpec(count=16, width=96, height=72, quality=85, seed=3), processes=1)
    spec = ip.LoaderSpec("torch_dataloader", batch_size=4, out_size=32, workers=0, device="cpu")
    got, ref = ip.centre_crop_outputs(data, spec, 16)
    c = pixel_check("torch_dataloader", got, ref)
    assert c.passed and c.elements_checked == 16 and c.elements_failed == 0
    got[9] = got[9].flip(-1)  # one image mirrored: the mean over all sixteen stays small
    c = pixel_check("torch_dataloader", got, ref)
    assert float((got - ref).abs().mean()) <= ip.PIXEL_TOLERANCE, "the old all-image mean would pass it"
    assert not c.passed and c.elements_failed == 1 and c.worst_element["index"] == [9]


# -- the inference family ------------------------------------------------------------------------
def _model(score, threshold):
    from perfsuite.workloads.inference._driver import Model

    return Model(backend=None, reference=None, decode=None, score=score, score_method="m", threshold=threshold)


def test_inference_accuracy_counts_differing_tokens_and_fails_on_a_malformed_output():
    from perfsuite.workloads.inference._driver import accuracy_check
    from perfsuite.workloads.inference._models import decode_tokens, score_token_match

    rng = np.random.default_rng(0)
    reference = {i: rng.integers(0, 1000, 16).astype(np.int32) for i in range(32)}
    logged = {i: ref.tobytes() for i, ref in reference.items()}  # what LoadGen's log holds
    outputs = {i: decode_tokens(b) for i, b in logged.items()}
    model = _model(score_token_match, 0.9)
    c = accuracy_check("Offline accuracy", model, outputs, reference, [])
    assert c.passed and (c.elements_checked, c.elements_failed) == (512, 0)
    outputs[3] = outputs[3].copy()
    outputs[3][5] += 1  # one token differs: counted; the rate (511/512) stays above 0.9
    c = accuracy_check("Offline accuracy", model, outputs, reference, [])
    assert c.passed and c.elements_failed == 1
    outputs[7] = decode_tokens(logged[7][:-4])  # one sequence a token short: malformed
    c = accuracy_check("Offline accuracy", model, outputs, reference, [])
    assert not c.passed and "malformed output (first [7])" in c.detail
    assert c.error >= 0.9, "the rate alone would pass it"


def test_inference_classifier_agreement_counts_each_sample():
    from perfsuite.workloads.inference._driver import accuracy_check
    from perfsuite.workloads.inference._models import decode_class, score_agreement

    reference = {i: i % 3 for i in range(64)}
    outputs = {i: decode_class(int(c).to_bytes(4, "little", signed=True)) for i, c in reference.items()}
    outputs[10] = (outputs[10] + 1) % 3
    c = accuracy_check("Offline accuracy", _model(score_agreement, 1.0), outputs, reference, [])
    assert not c.passed and (c.elements_checked, c.elements_failed) == (64, 1)
    c = accuracy_check("Offline accuracy", _model(score_agreement, 0.97), outputs, reference, [])
    assert c.passed and c.elements_failed == 1  # MLPerf's rule: a few differing samples are allowed
