"""Which side of the collectives cross-check was launch-bound, judged from each side's own
per-size times: on the 4xH200 records filed under submissions/ (the suite one process per GPU;
nccl-tests as one process driving four GPUs from threads on two nodes, as one process per GPU
through MPI on a third), on the 4xH100 node's (nccl-tests one process per GPU) and on tables
that isolate each rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.crosscheck import launch_floor
from perfsuite.crosscheck.launch_floor import AGREES, attribute

REPO = Path(__file__).resolve().parents[1]
FILED = REPO / "submissions" / "perfsuite" / "results" / "h200-x4"
FILED_H100 = REPO / "submissions" / "perfsuite" / "results" / "h100-x4"
MiB = 1 << 20
KEYS = ("size_bytes", "mode", "suite_time_us", "nccl_tests_time_us", "suite_busbw_gbps", "nccl_tests_busbw_gbps")


def _filed(folder: Path = FILED) -> list[tuple[str, list[dict]]]:
    """Each filed 4-GPU collectives record whose cross-check ran nccl-tests in a recorded
    layout: its per-size times as measured, stripped of the judgement stored with them."""
    out = []
    for path in sorted(folder.glob("collectives.*/*.json")):
        cc = json.loads(path.read_text())["details"].get("crosscheck") or {}
        if cc.get("status") == "measured" and cc.get("layout"):
            out.append((f"{path.parent.name}/{path.stem[:8]}", [{k: c[k] for k in KEYS} for c in cc["compare"]]))
    return out


FILED_RUNS = _filed()
# The second 4 x H200 node's sweeps (the shipped scaleout-collectives-x4 plan: fp32 and bf16, eager and
# graphed, 16 B-1 GiB by x4), judged in the test after the next; the others came from the first node.
SECOND_NODE = {
    "53c29a48", "bec60a00", "9f9a1d73", "ac1ba3a5", "123f45b0", "b92ec723", "c4404068", "4432678d", "a3da9212",
    "aa7f387c", "3b37b1fc", "3077d555", "926a28e4", "905eb743", "fb750e20", "5e0ab5b5", "36809d7e", "8f475e44",
    "3d5c0150", "20b13583",
}  # fmt: skip
# The third node's: the same plan, nccl-tests built with MPI=1 and run as one process per GPU.
THIRD_NODE = {
    "769297fb", "a5b5c1fb", "939aa3ef", "4f4d9435", "c65a7b7b", "99cca735", "0ff26c32", "65a12f48", "c4d1f09c",
    "3459f060", "9bed8cbd", "5cbf085a", "169e0d17", "92d01f7c", "df172a10", "0869c614", "af7e18fd", "121c6478",
    "040e896e", "fae13b03",
}  # fmt: skip
FIRST_NODE_RUNS = [(n, c) for n, c in FILED_RUNS if n.split("/")[1] not in SECOND_NODE | THIRD_NODE]


def _layouts(runs: list[tuple[str, list[dict]]], folder: Path) -> set[str]:
    """How the records of ``runs`` under ``folder`` ran their reference (their cross-check's layout)."""
    return {
        json.loads(next(folder.glob(f"{name}*.json")).read_text())["details"]["crosscheck"]["layout"]
        for name, _ in runs
    }


def _open_and_named(runs: list[tuple[str, list[dict]]]) -> tuple[set[tuple], list[str | None]]:
    """Each size from 1 MiB up that differs with no side named, as (run, MiB, mode, time ratio),
    each such record's judgement saying so; and the side named at every other size that differs."""
    unexplained, named = set(), []
    for name, compare in runs:
        rows, verdict = attribute(compare)
        for r in rows:
            if r["size_bytes"] >= MiB and r["verdict"] != AGREES:
                if r["launch_bound"] is None:
                    unexplained.add((name.split("/")[1], r["size_bytes"] // MiB, r["mode"], round(r["time_ratio"], 3)))
                    assert verdict["explained"] is False and "neither side is launch-bound" in verdict["summary"]
                else:
                    named.append(r["launch_bound"])
    return unexplained, named


def test_the_filed_records_hold_the_sizes_this_judges():
    names = {name.split("/")[0] for name, _ in FILED_RUNS}
    assert {"collectives.all_reduce", "collectives.all_gather", "collectives.reduce_scatter"} <= names
    assert len(FILED_RUNS) >= 6


@pytest.mark.parametrize("name,compare", FIRST_NODE_RUNS, ids=[n for n, _ in FIRST_NODE_RUNS])
def test_on_filed_4_gpu_records_every_size_from_1_to_4_mib_that_differs_names_its_side(name, compare):
    """The 1-4 MiB sizes that read 1.03-1.30 apart were left as 'neither side is launch-bound';
    each now names nccl-tests with its reason, and the large sizes that agree name no side."""
    rows, verdict = attribute(compare)
    mid = [r for r in rows if MiB <= r["size_bytes"] <= 4 * MiB]
    assert mid
    for r in mid:
        if r["verdict"] != AGREES:
            assert r["launch_bound"] == "reference", r
            assert r["verdict"] == "differs, nccl-tests launch-bound"
            assert r["launch_bound_why"].startswith("nccl-tests")
    for r in rows:
        if r["size_bytes"] >= 16 * MiB and r["verdict"] == AGREES:
            assert (r["launch_bound"], r["launch_bound_why"]) == (None, None), r
    assert verdict["explained"] is True and "neither side" not in verdict["summary"]


def test_on_the_second_nodes_records_three_sizes_from_1_mib_up_differ_with_no_side_named():
    """The second node's 20 sweeps: from 1 MiB up every size agrees within 3% or names its
    launch-bound side, except three, which the judgement leaves unexplained and says so: the graphed
    fp32 all_reduce and reduce_scatter in place at 1 MiB, where nccl-tests read 4.5 and 3.8 us more
    than the suite, past its fixed cost over the suite's at small sizes (3.4 and 3.1 us) give or
    take 3%, and bf16 send_recv at 4 MiB, where the suite read 0.947 of nccl-tests' busbw."""
    runs = [(n, c) for n, c in FILED_RUNS if n.split("/")[1] in SECOND_NODE]
    assert len(runs) == len(SECOND_NODE)
    unexplained, _ = _open_and_named(runs)
    assert unexplained == {("3b37b1fc", 1, "ip", 1.286), ("926a28e4", 1, "ip", 1.378), ("aa7f387c", 4, "oop", 0.947)}


def test_against_nccl_tests_as_one_process_per_gpu_every_named_side_is_nccl_tests_and_five_sizes_stay_open():
    """The third node's 20 sweeps, nccl-tests run as one process per GPU: its fixed cost per call
    (8-11 µs eagerly against the suite's 5.6-7.1) still decides every size from 1 MiB up that
    differs and names a side. Five sizes differ with no side named, and the judgement says so:
    send_recv at 4 MiB in all four sweeps, the suite the slower (as on the second node in bf16),
    and the eager bf16 all_to_all at 256 MiB."""
    runs = [(n, c) for n, c in FILED_RUNS if n.split("/")[1] in THIRD_NODE]
    assert len(runs) == len(THIRD_NODE)
    assert _layouts(runs, FILED) == {"process per GPU"}
    unexplained, named = _open_and_named(runs)
    assert named and set(named) == {"reference"}
    assert unexplained == {
        ("c65a7b7b", 4, "oop", 0.9), ("3459f060", 4, "oop", 0.892), ("df172a10", 4, "oop", 0.962),
        ("fae13b03", 4, "oop", 0.953), ("c4d1f09c", 256, "oop", 0.966),
    }  # fmt: skip


def test_on_the_4_gpu_h100_node_every_named_side_is_nccl_tests_and_seven_sizes_stay_open():
    """The 4xH100 node's 20 sweeps, nccl-tests one process per GPU as on the third H200 node. Its
    fixed cost per call (11.3-16.1 µs eagerly, 8.2-10.3 graphed, against the suite's 6.7-8.3 and
    5.2-7.0) decides every size from 1 MiB up that differs and names a side. Seven stay open with
    no side named, and the judgement says so: send_recv at 4 MiB in three of the four sweeps (the
    suite the slower, as on both H200 nodes), bf16 send_recv at 1 MiB, bf16 all_to_all at 16 MiB,
    and two graphed sizes at 1 MiB where nccl-tests read 0.8-1.0 µs past its own fixed cost over the
    suite's (in-place fp32 all_reduce, as on the second H200 node, and out-of-place bf16
    all_gather)."""
    runs = _filed(FILED_H100)
    assert len(runs) == 20
    assert _layouts(runs, FILED_H100) == {"process per GPU"}
    unexplained, named = _open_and_named(runs)
    assert named and set(named) == {"reference"}
    assert unexplained == {
        ("2c54f887", 4, "oop", 0.95), ("ed7a8c55", 4, "oop", 0.924), ("de47d89c", 4, "oop", 0.884),
        ("ed7a8c55", 1, "oop", 0.964), ("58b313cd", 16, "oop", 0.963),
        ("7b398cd8", 1, "ip", 1.287), ("3049693f", 1, "oop", 1.328),
    }  # fmt: skip


def test_the_filed_cuda_graph_all_gather_names_nccl_tests_fixed_cost_up_to_16_mib():
    """nccl-tests' all_gather under -G 1 read 2.2-3.0 µs more than the suite at every size to
    16 MiB, as much as at its floor (8.49 against 5.55 µs): its fixed cost, not its bytes."""
    (compare,) = [c for n, c in FILED_RUNS if n == "collectives.all_gather/f7b3b53f"]
    rows, verdict = attribute(compare)
    by = {r["size_bytes"]: r for r in rows if r["mode"] == "oop"}
    assert [round(by[s]["time_ratio"], 3) for s in (MiB, 4 * MiB, 16 * MiB)] == [1.252, 1.084, 1.035]
    assert all(by[s]["launch_bound"] == "reference" for s in (MiB, 4 * MiB, 16 * MiB))
    assert "no more than its fixed cost over the suite's" in by[MiB]["launch_bound_why"]
    assert by[64 * MiB]["verdict"] == AGREES and by[64 * MiB]["launch_bound"] is None
    assert verdict["fixed_excess_us"]["oop"]["nccl_tests"] == pytest.approx(3.17, abs=0.01)
    assert verdict["agrees_from_bytes"] == {"oop": 64 * MiB, "ip": 64 * MiB}


def _row(size: int, suite_us: float, ref_us: float, mode: str = "ip") -> dict:
    return {
        "size_bytes": size,
        "mode": mode,
        "suite_time_us": suite_us,
        "nccl_tests_time_us": ref_us,
        "suite_busbw_gbps": size / suite_us / 1e3,
        "nccl_tests_busbw_gbps": size / ref_us / 1e3,
    }


def test_a_side_whose_time_stays_flat_while_the_other_grows_is_named_though_its_floor_is_low():
    """Both floors 10 µs, so neither fixed cost explains anything; nccl-tests then sits at 40 µs
    from 3 to 6 MiB (as the bf16 all_gather of the 4xH200 report did) while the suite's time
    grows with the bytes."""
    rows, _ = attribute([_row(1024, 10.0, 10.0), _row(3 * MiB, 22.0, 40.0), _row(6 * MiB, 36.0, 40.5)])
    by = {r["size_bytes"]: r for r in rows}
    assert by[3 * MiB]["launch_bound"] is None and by[3 * MiB]["verdict"] == "differs"
    assert by[6 * MiB]["launch_bound"] == "reference"
    assert by[6 * MiB]["nccl_tests_growth"] <= launch_floor.FLAT_GROWTH < by[6 * MiB]["suite_growth"]
    assert by[6 * MiB]["launch_bound_why"] == (
        "nccl-tests stayed flat: its time x1.01 for x2 the bytes (size**0.02), the suite's x1.64 (size**0.71)"
    )


def test_a_side_slower_at_moving_bytes_is_not_excused_by_its_higher_floor():
    """nccl-tests' floor is 3 µs higher, but from 16 MiB up it is 10% slower, a gap that grows
    with the size: those sizes differ with no side named."""
    table = [_row(1024, 7.0, 10.0), _row(MiB, 12.0, 15.0), _row(16 * MiB, 60.0, 69.0), _row(64 * MiB, 180.0, 201.0)]
    rows, verdict = attribute(table)
    by = {r["size_bytes"]: r for r in rows}
    assert by[MiB]["launch_bound"] == "reference"
    assert [by[s]["launch_bound"] for s in (16 * MiB, 64 * MiB)] == [None, None]
    assert by[64 * MiB]["verdict"] == "differs"
    assert verdict["explained"] is False and verdict["differs"]["none"] == [16 * MiB, 64 * MiB]


def test_the_faster_side_is_never_named_for_a_gap_it_did_not_cause():
    """The suite's floor is the higher one, yet nccl-tests is the slower at 1 MiB: the suite's
    fixed cost cannot explain that, and nccl-tests' time grows there, so no side is named."""
    rows, _ = attribute([_row(1024, 10.0, 7.0), _row(256 << 10, 11.0, 9.0), _row(MiB, 14.0, 20.0)])
    row = next(r for r in rows if r["size_bytes"] == MiB)
    assert (row["launch_bound"], row["verdict"]) == (None, "differs")
