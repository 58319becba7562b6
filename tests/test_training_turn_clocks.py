"""The training cross-check's view of the GPU in each turn: every block of either side is read at
its two ends (``perfsuite.measure.nvml_sampler.Endpoints``), so each round shows the clocks and
the mean power each side ran at, while nothing runs beside either side's steps."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_each_later_round_shows_both_sides_clocks_and_mean_power_read_at_the_blocks_ends(tmp_path: Path):
    from perfsuite.crosscheck import take_turns
    from perfsuite.crosscheck.training import BareLoop, versus_bare_loop
    from perfsuite.measure.nvml_sampler import Endpoints, Reading

    counter = itertools.count(step=50_000)  # millijoules: 50 J between any two reads

    def ends() -> Endpoints:
        return Endpoints(
            0, read=lambda t: Reading(t, 1935.0, 690.0, ("software power cap",)), energy=lambda: next(counter)
        )

    tiny = ["gpt", "--layers", "1", "--width", "16", "--heads", "2", "--context", "8", "--vocab", "32"]
    bare = BareLoop([*tiny, "--batch", "4", "--device", "cpu", "--precision", "fp32"], tmp_path / "bare.log")
    try:
        bare.start()
        bare.ready(timeout_s=120)
        found = versus_bare_loop(bare, [100.0], lambda n: 0.01 * n, 2, 4, 2, take_turns, ends)
    finally:
        bare.close()
    first, later = found["rounds"]
    assert first["suite_clocks"] is None  # round 1's suite side is the run's own blocks, read by nobody
    assert first["reference_clocks"]["sm_clock_mhz_median"] == 1935.0
    for side in ("suite_clocks", "reference_clocks"):
        clocks = later[side]
        assert clocks["sm_clock_mhz_median"] == 1935.0 and clocks["clock_events"] == ["software power cap"]
        assert clocks["power_w_mean"] > 0 and clocks["power_w_median"] == 690.0
    assert found["status"] == "measured" and found["reference_samples_per_s"] > 0
