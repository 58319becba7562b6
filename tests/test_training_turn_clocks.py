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


class _Bare:
    """A bare loop's stand-in: each block answers the next of ``rates`` (samples/s)."""

    def __init__(self, rates: list[float]) -> None:
        self.rates = iter(rates)

    def block(self, steps: int) -> dict:
        return {"samples_per_s": next(self.rates) if steps > 3 else 0.0}  # 3: the warm-up block


def test_each_rounds_two_sides_are_divided_and_the_median_ratio_has_a_bootstrap_interval():
    """A drift that moves both sides of a round (clocks falling under a power cap) leaves the
    round's ratio alone: the suite at 0.95 of the bare loop in every round reads 0.95 per round,
    while the ratio of the sides' medians depends on which side met which round."""
    from perfsuite.crosscheck import take_turns
    from perfsuite.crosscheck.training import versus_bare_loop
    from perfsuite.measure.stats import bootstrap_ci

    clocks = [1.0, 0.9, 0.8, 0.9, 1.0]  # each round's speed, the same for both of its sides
    bare = _Bare([1000.0 * c for c in clocks])
    later = iter(clocks[1:])
    samples_per_step, steps = 10, 20

    def suite_block(n: int) -> float:
        if n == 3:
            return 1.0  # warm-up, untimed
        rate = 950.0 * next(later)
        return n * samples_per_step / rate

    found = versus_bare_loop(bare, [950.0], suite_block, steps, samples_per_step, 5, take_turns)
    assert found["round_ratios"] == pytest.approx([0.95] * 5)
    assert found["round_ratio_median"] == pytest.approx(0.95)
    assert found["round_ratio_ci95"] == pytest.approx([0.95, 0.95])
    assert "per round, throughput 0.950 of the bare loop's (95% CI 0.950-0.950)" in found["note"]

    uneven = versus_bare_loop(
        _Bare([1000.0, 1000.0, 1000.0]), [900.0], lambda n: 1.0 if n == 3 else n * 10 / 1000.0, 20, 10, 3, take_turns
    )
    ratios = uneven["round_ratios"]
    assert ratios == pytest.approx([0.9, 1.0, 1.0])
    assert uneven["round_ratio_ci95"] == pytest.approx(list(bootstrap_ci(ratios)))
    assert uneven["round_ratio_ci95"][0] <= uneven["round_ratio_median"] <= uneven["round_ratio_ci95"][1]
