"""bf16 collectives keep their correctness check: at 4 ranks over gloo (which reduces bf16),
every output element is compared exactly, the record says how many, and a wrong element is
caught in bf16 as in fp32."""

from __future__ import annotations

import json

import pytest

# the sizes below give every rank whole elements at 4 ranks: 16 B..4 KiB by x16 is 3 sizes
SWEEP = ("-p", "min_bytes=16", "-p", "max_bytes=4K", "-p", "step_factor=16", "-p", "iters=2", "-p", "repeats=1")


def _run(cli, *args: str) -> list[dict]:
    proc = cli("run", *args, "--device", "cpu", "--nproc-per-node", "4", "--warmup", "1", "--json", timeout=600)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def _expected_elements(name: str, sizes: list[int], modes: list[str], world: int = 4) -> int:
    """Output elements each rank compares (bf16: 2 bytes), summed over ranks, sizes and modes."""
    per_rank = {  # output elements of one rank for a size of n elements
        "all_reduce": lambda n: n,
        "all_to_all": lambda n: n // world * world,
    }[name]
    return sum(per_rank(s // 2) * world for s in sizes) * len(modes)


@pytest.mark.parametrize("name", ["all_reduce", "all_to_all"])  # a reduction and a copy
def test_a_bf16_sweep_at_4_ranks_is_checked_element_by_element_and_says_how_many(cli, name):
    (record,) = _run(cli, f"collectives.{name}", "-p", "dtype=bf16", *SWEEP)
    assert record["status"] == "success", record.get("error")
    (check,) = record["verification"]["checks"]
    d = record["details"]
    sizes = [r["size_bytes"] for r in d["rows"]]
    assert sizes == [16, 256, 4096] and d["dtype"] == "bf16"
    modes = [m for m in ("oop", "ip") if d["rows"][0][m] is not None]
    assert check["passed"] is True and check["elements_failed"] == 0
    assert check["elements_checked"] == _expected_elements(name, sizes, modes)
    assert all(r[m]["checked"] and r[m]["wrong"] == 0 for r in d["rows"] for m in modes)


def test_a_wrong_bf16_element_is_counted_and_fails_the_run(cli):
    (record,) = _run(
        cli, "collectives.all_reduce", "-p", "dtype=bf16", *SWEEP, "-p", "inject=wrong_element", "-p", "inject_rank=1"
    )
    (check,) = record["verification"]["checks"]
    assert check["passed"] is False
    assert check["elements_failed"] == record["details"]["wrong_total"] > 0
    assert check["elements_checked"] > check["elements_failed"]
