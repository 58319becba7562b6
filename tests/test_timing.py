"""The timed loop (``perfsuite.measure.timing``): one interval around the whole loop after an
untimed call, as nccl-tests times, and on a GPU a stream hold that lets tiny kernels run back
to back instead of at the launch rate."""

from __future__ import annotations

import pytest


def test_time_loop_times_the_whole_loop_once_after_its_untimed_call():
    from perfsuite.measure.timing import time_loop

    calls = []
    lt = time_loop(lambda: calls.append("timed"), 7, "cpu", before=lambda: calls.append("before"))
    assert calls == ["before"] + ["timed"] * 7
    assert lt.seconds >= 0 and lt.launch_s == lt.seconds and lt.held is None  # nothing to hold on the CPU


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_a_stream_hold_lets_the_gpu_run_a_loop_of_tiny_kernels_back_to_back():
    import torch

    from perfsuite.measure.timing import StreamHold, time_loop

    x = torch.zeros(1, device="cuda")
    unheld = time_loop(lambda: x.add_(1), 200, "cuda")
    held = time_loop(lambda: x.add_(1), 200, "cuda", StreamHold())
    assert unheld.held is None and held.held is True
    assert held.seconds < unheld.seconds  # the held loop measures the kernels, not their launches
    print(f"200 tiny kernels: {unheld.seconds * 1e6 / 200:.2f} us each unheld, {held.seconds * 1e6 / 200:.2f} held")
