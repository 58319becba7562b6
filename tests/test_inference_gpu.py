"""The inference family on a CUDA GPU: transformers' compiled static-cache decoding (CUDA
graphs) generates what eager dynamic-cache decoding does, and reports first tokens."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_compiled_static_cache_matches_dynamic_on_cuda():
    from transformers import AutoModelForCausalLM

    from perfsuite.engine import params as params_mod
    from perfsuite.workloads.inference._models import (
        GeneratorBackend,
        float32_and_measured,
        synthetic_sequences,
    )
    from perfsuite.workloads.inference.generate import Generate, build_config

    p = params_mod.resolve(Generate, {"dtype": "fp32", "max_batch": "4"}, quick=True)
    device = torch.device("cuda")
    ref, _ = float32_and_measured(lambda: AutoModelForCausalLM.from_config(build_config(p)), "fp32", device, 0)
    samples = synthetic_sequences(6, p.min_prompt, p.max_prompt, p.vocab, 0)
    first: list = []
    outs = {}
    for cache in ("dynamic", "static"):
        backend = GeneratorBackend(ref, samples, p.new_tokens, cache, p.max_prompt, p.max_batch, device)
        backend.warm_up()
        outs[cache] = backend.run_batch([0, 1, 2], first.append) + backend.run_batch([5], None)
    assert len(first) == 2 and all(len(t) == 3 for t in first)
    match = sum(int((d.value == s.value).sum()) for d, s in zip(outs["dynamic"], outs["static"]))
    assert match >= 0.9 * 4 * p.new_tokens  # float32 both ways; kernels differ, near-ties may flip
