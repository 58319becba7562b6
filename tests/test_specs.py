"""Vendor datasheet peaks (``perfsuite.measure.specs``): matched by the device's exact name,
never guessed for a variant the table does not hold, and dense (not the sparsity figures)."""

from __future__ import annotations

import pytest

from perfsuite.measure import specs


@pytest.mark.parametrize(
    "name,expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA A100-SXM4-40GB", None),
        ("NVIDIA GeForce RTX 4090", None),
        (None, None),
    ],
)
def test_datasheets_are_matched_by_device_name_and_never_guessed(name, expected):
    spec = specs.lookup(name)
    assert (spec.name if spec else None) == expected


def test_datasheet_peaks_are_dense():
    # dense = half of the "with sparsity" figures NVIDIA prints for tensor cores
    assert specs.H100_SXM.bf16 == 1979 / 2 and specs.H200_SXM.fp8 == 3958 / 2 and specs.A100_SXM_80GB.tf32 == 156
    for s in specs.SPECS:
        # each precision doubles the rate of the one above it (the datasheets round)
        assert s.fp8 is None or s.fp8 == pytest.approx(2 * s.bf16, rel=1e-2)
        assert s.bf16 == pytest.approx(2 * s.tf32, rel=1e-2)
