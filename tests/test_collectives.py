"""The collectives family: nccl-tests' definitions (sizes, counts, bus-bandwidth factors)
checked against hand-computed values, and every collective run for real with gloo through
the suite's torchrun path at world sizes 2 and 4: records, tables, the correctness count
catching an injected wrong element, a failing and a hanging rank ending the run cleanly,
and a SLURM step's tasks acting as ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from perfsuite.workloads.collectives import _plan, _report, _sweep
from perfsuite.workloads.collectives._ops import OPS, Counts
from perfsuite.workloads.collectives.collective import COLLECTIVES
from tests.conftest import run_cli

NAMES = [c.name for c in COLLECTIVES]
# nccl-tests' factors, by hand: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall
# (n-1)/n; broadcast, reduce, sendrecv 1.
HAND_FACTOR = {
    # one rank, as nccl-tests -g 1 prints it: nothing crosses a bus
    1: {
        "all_reduce": 0.0,
        "all_gather": 0.0,
        "reduce_scatter": 0.0,
        "all_to_all": 0.0,
        "broadcast": 1.0,
        "reduce": 1.0,
        "send_recv": 1.0,
    },
    2: {
        "all_reduce": 1.0,
        "all_gather": 0.5,
        "reduce_scatter": 0.5,
        "all_to_all": 0.5,
        "broadcast": 1.0,
        "reduce": 1.0,
        "send_recv": 1.0,
    },
    4: {
        "all_reduce": 1.5,
        "all_gather": 0.75,
        "reduce_scatter": 0.75,
        "all_to_all": 0.75,
        "broadcast": 1.0,
        "reduce": 1.0,
        "send_recv": 1.0,
    },
    8: {
        "all_reduce": 1.75,
        "all_gather": 0.875,
        "reduce_scatter": 0.875,
        "all_to_all": 0.875,
        "broadcast": 1.0,
        "reduce": 1.0,
        "send_recv": 1.0,
    },
}
# Which of out-of-place / in-place torch.distributed can express, per collective.
MODES = {
    "all_reduce": {"ip"},
    "all_gather": {"oop", "ip"},
    "reduce_scatter": {"oop", "ip"},
    "all_to_all": {"oop"},
    "broadcast": {"ip"},
    "reduce": {"ip"},
    "send_recv": {"oop"},
}


def params(**kw):
    base = dict(
        min_bytes=8,
        max_bytes=4096,
        step_factor=2,
        dtype="fp32",
        iters=3,
        in_place="both",
        check=True,
        rank_time="mean",
        inject="none",
        inject_rank=0,
        redop="sum",
        root=0,
    )
    base.update(kw)
    return SimpleNamespace(**base)


# -- nccl-tests' definitions, no processes --------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_bus_factors_are_nccl_tests(n):
    for name, op in OPS.items():
        assert op.bus_factor(n) == pytest.approx(HAND_FACTOR[n][name], rel=1e-15), name


def test_counts_and_sizes_follow_nccl_tests():
    """4096 B of float32 over 4 ranks: 1024 elements, split as nccl-tests splits them."""
    expect = {
        "all_reduce": Counts(1024, 1024, 1024),
        "all_gather": Counts(256, 256, 1024),
        "reduce_scatter": Counts(256, 1024, 256),
        "all_to_all": Counts(256, 1024, 1024),
        "broadcast": Counts(1024, 1024, 1024),
        "reduce": Counts(1024, 1024, 1024),
        "send_recv": Counts(1024, 1024, 1024),
    }
    for name, op in OPS.items():
        assert op.counts(1024, 4) == expect[name], name
        pl = _plan.plan(op, params(min_bytes=4096, max_bytes=4096), 4)
        assert pl.sizes == [(4096, expect[name])]
    # 8 B of float32 is two elements: not one per rank for a scatter over 4 ranks.
    pl = _plan.plan(OPS["all_gather"], params(min_bytes=8, max_bytes=64), 4)
    assert pl.skipped_sizes == [8] and [s for s, _ in pl.sizes] == [16, 32, 64]
    # 24 B over 3 ranks rounds to whole elements per rank, as nccl-tests does.
    assert _plan.plan(OPS["reduce_scatter"], params(min_bytes=28, max_bytes=28), 3).sizes[0][0] == 24


def test_modes_torch_cannot_express_are_reported_not_faked():
    for name, op in OPS.items():
        pl = _plan.plan(op, params(), 2)
        assert set(pl.modes) == MODES[name], name
        for m in set(_plan.MODES) - MODES[name]:
            assert pl.unavailable[m]


def test_merge_derives_algbw_and_busbw_from_the_time():
    op = OPS["all_reduce"]
    pl = _plan.plan(op, params(min_bytes=1 << 20, max_bytes=1 << 20), 4)
    per_rank = [
        [{"size_bytes": 1 << 20, "modes": {"ip": {"samples_s": list(s), "wrong": w}}}]
        for s, w in (((1e-3, 1e-3), 0), ((2e-3, 2e-3), 1), ((3e-3, 3e-3), 0), ((2e-3, 2e-3), 2))
    ]
    row = _sweep.merge(pl, per_rank, "mean", 4)[0]
    assert row["oop"] is None and row["count"] == (1 << 18) and row["dtype"] == "float" and row["root"] == -1
    ip = row["ip"]
    assert ip["time_us"] == pytest.approx(2000.0)
    assert ip["algbw_gbps"] == pytest.approx((1 << 20) / 2e-3 / 1e9)
    assert ip["busbw_gbps"] == pytest.approx((1 << 20) / 2e-3 / 1e9 * 1.5)
    assert ip["wrong"] == 3 and ip["time_us_per_rank"] == pytest.approx([1000.0, 2000.0, 3000.0, 2000.0])
    slowest = _sweep.merge(pl, per_rank, "max", 4)[0]["ip"]
    assert slowest["time_us"] == pytest.approx(3000.0)


def test_a_ranks_time_is_the_median_of_its_loops_as_nccl_tests_cycles_are_folded():
    """One slow loop of several moves neither side of the cross-check: the suite takes the
    median of its loops as perfsuite.crosscheck.nccl_tests.fold_cycles takes the median of nccl-tests' -N
    cycles (the lower middle one of an even count, on both sides)."""
    from perfsuite.crosscheck.nccl_tests import fold_cycles

    pl = _plan.plan(OPS["all_reduce"], params(min_bytes=1 << 20, max_bytes=1 << 20), 2)
    loops = [15e-6, 15.2e-6, 19e-6, 15.1e-6]  # the third loop was slow
    per_rank = [[{"size_bytes": 1 << 20, "modes": {"ip": {"samples_s": loops, "wrong": 0}}}]] * 2
    row = _sweep.merge(pl, per_rank, "mean", 2, "loop")[0]
    assert row["ip"]["time_us"] == pytest.approx(15.1)  # not the mean, 16.075
    cycles = [
        {"size_bytes": 1 << 20, "ip": {"time_us": s * 1e6, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0}}
        for s in loops
    ]
    folded, n = fold_cycles(cycles)
    assert n == 4 and folded[0]["ip"]["time_us"] == pytest.approx(row["ip"]["time_us"])
    # per-call samples are single calls: their mean is the loop's interval / iters
    per_call = _sweep.merge(pl, per_rank, "mean", 2, "per_call")[0]
    assert per_call["ip"]["time_us"] == pytest.approx(sum(loops) / 4 * 1e6)


@pytest.mark.parametrize(
    "name,dtype,redop,ok,bad",
    [
        ("all_reduce", "bf16", "sum", 84, 85),  # 3(n-1)+7 <= 2^8
        ("all_reduce", "fp16", "prod", 13, 14),  # 8 * 2^(n-1) <= 65504
        ("reduce_scatter", "int8", "sum", 41, 42),  # 3(n-1)+7 <= 127
    ],
)
def test_exactness_limits(name, dtype, redop, ok, bad):
    assert _plan.exactness_problem(OPS[name], dtype, redop, ok) is None
    assert "exactly" in _plan.exactness_problem(OPS[name], dtype, redop, bad)


def test_table_reads_like_nccl_tests():
    from rich.console import Console

    record = {
        "details": {
            "collective": "all_gather",
            "world_size": 2,
            "backend": "nccl",
            "nccl_version": "2.27.3",
            "wrong_total": 0,
            "avg_busbw_gbps": 12.5,
            "modes": {"out-of-place": "measured", "in-place": "measured"},
            "rows": [
                {
                    "size_bytes": 1024,
                    "count": 128,
                    "dtype": "float",
                    "redop": "none",
                    "root": -1,
                    "oop": {"time_us": 12.345, "algbw_gbps": 0.08, "busbw_gbps": 0.04, "wrong": 0},
                    "ip": None,
                }
            ],
        }
    }
    console = Console(record=True, width=250)
    console.print(_report.render_table(record))
    text = console.export_text()
    header = [
        "size (B)",
        "count (elements)",
        "type",
        "redop",
        "root",
        "time (us)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        "#wrong",
    ]
    positions = [text.index(h) for h in header]
    assert positions == sorted(positions)
    assert "12.35" in text and "n/a" in text and "NCCL 2.27.3" in text and "Avg bus bandwidth" in text
    assert _report.render_table({"details": {}}) is None


# -- the launch decision: ranks from the GPUs visible -----------------------------------------------
def _quick_suite_launches(monkeypatch, gpus: int, device: str | None, visible: str | None) -> dict[str, tuple]:
    """{workload: (device, ranks per node, why it cannot start or None)} of the quick suite as
    ``perfsuite run --quick`` plans it on a node where NVML counts ``gpus`` GPUs and
    ``CUDA_VISIBLE_DEVICES`` is ``visible``."""
    from perfsuite.cli.run import build_requests
    from perfsuite.engine.runner import static_unmet
    from perfsuite.measure import nvml
    from perfsuite.plugins import get_host

    monkeypatch.setattr(nvml, "device_count", lambda: gpus)  # this machine has no GPU to count
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    requests = build_requests(get_host(), (), (), {"quick": True, "device": device})
    return {r.entry.name: (r.controls.device, r.launch.nproc_per_node, static_unmet(r)) for r in requests}


@pytest.mark.parametrize(("gpus", "visible", "ranks"), [(1, None, 1), (8, "0,1", 2), (8, None, 8)])
def test_a_gpu_quick_suite_gives_collectives_a_rank_per_gpu_visible_and_never_two_on_one(
    monkeypatch, gpus, visible, ranks
):
    plan = _quick_suite_launches(monkeypatch, gpus, "cuda", visible)
    for name in NAMES:
        assert plan[name][:2] == ("cuda", ranks), name
        assert plan[name][2] is None or "world size" not in plan[name][2], name
    others = {name: nproc for name, (_, nproc, _) in plan.items() if name not in NAMES}
    assert others and set(others.values()) == {1}  # kernels, training, inference, the copy ceilings: one process


def test_with_cuda_visible_devices_empty_the_quick_suite_runs_on_the_cpu_with_two_gloo_ranks(monkeypatch):
    plan = _quick_suite_launches(monkeypatch, 8, None, "")
    assert {device for device, _, _ in plan.values()} == {"cpu"}
    assert {plan[name][1] for name in NAMES} == {2}
    assert not [name for name, (_, _, why) in plan.items() if why and "world size" in why]


def test_a_workload_that_needs_more_ranks_than_gpus_visible_is_skipped_with_the_reason():
    from perfsuite import Requirements
    from perfsuite.engine.launcher import default_nproc_per_node

    pair = Requirements(min_world_size=2)
    assert default_nproc_per_node(pair, "cuda", 1) == 1  # not two ranks on one GPU: NCCL refuses that
    assert default_nproc_per_node(pair, "cuda", 4) == 2
    assert default_nproc_per_node(pair, "cpu", 0) == 2


@pytest.mark.parametrize(
    ("visible", "seen"),
    [(None, 4), ("", 0), ("0", 1), ("2,3", 2), ("1,7,2", 1), ("1,-1,2", 1), ("GPU-8a1b,GPU-77c0", 2)],
)
def test_gpus_visible_reads_cuda_visible_devices_as_cuda_does(visible, seen):
    from perfsuite.engine.launcher import gpus_visible

    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert gpus_visible(env, count=4) == seen


# -- real gloo runs through the CLI and torchrun ---------------------------------------------------
def _records(env):
    proc = run_cli(env, "results", "--json", "--limit", "100", check=True)
    return {r["run_id"]: r for r in json.loads(proc.stdout)}


def _run_json(cli, *args, timeout=600):
    proc = cli("run", *args, "--device", "cpu", "--json", timeout=timeout)
    try:
        return json.loads(proc.stdout), proc
    except json.JSONDecodeError:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}") from None


def _our_leftovers(env) -> list[psutil.Process]:
    """Measuring processes started under this test's registry that are still alive."""
    left = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "perfsuite.engine.worker" not in cmd and "torch.distributed.run" not in cmd:
            continue
        try:
            if p.environ().get("PERFSUITE_DB") == env["PERFSUITE_DB"]:
                left.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return left


# At four ranks, the collectives whose bus factor depends on the world size; the others (factor 1)
# run at two ranks, where every collective runs.
SCALED = [n for n in NAMES if HAND_FACTOR[2][n.split(".", 1)[1]] != HAND_FACTOR[4][n.split(".", 1)[1]]]


@pytest.mark.parametrize("world, names", [(2, NAMES), (4, SCALED)], ids=["2", "4"])
def test_every_collective_runs_with_gloo_through_torchrun(cli, perfsuite_env, world, names):
    max_bytes = "4K" if world == 2 else "1K"
    records, proc = _run_json(
        cli,
        *names,
        "--quick",
        "--nproc-per-node",
        str(world),
        "--param",
        f"max_bytes={max_bytes}",
        "--param",
        "iters=3",
        "--warmup",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["workload"]["name"] for r in records) == sorted(names)
    for r in records:
        op = r["workload"]["name"].split(".", 1)[1]
        assert r["status"] == "success" and r["verification"]["status"] == "passed", (op, r["error"])
        assert r["launch"]["launcher"] == "torchrun" and r["launch"]["world_size"] == world
        assert r["launch"]["backend"] == "gloo"
        # the record states the controls the sweep applied; the others as not applied
        assert r["controls"]["not_applied"] == ["iterations", "min_time_s", "max_iterations", "l2_flush"]
        assert r["controls"]["warmup"] == 1 and r["controls"]["cuda_graph"] is False
        assert r["controls"]["iterations"] is None and r["controls"]["l2_flush"] is None
        d = r["details"]
        assert d["world_size"] == world and d["backend"] == "gloo" and d["nccl_version"] is None
        assert d["busbw_factor"] == pytest.approx(HAND_FACTOR[world][op])
        assert d["wrong_total"] == 0 and d["rows"]
        for row in d["rows"]:
            for mode in ("oop", "ip"):
                m = row[mode]
                if mode not in MODES[op]:
                    assert m is None
                    continue
                assert m["wrong"] == 0
                assert m["algbw_gbps"] == pytest.approx(row["size_bytes"] / (m["time_us"] * 1e-6) / 1e9, rel=1e-12)
                assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * HAND_FACTOR[world][op], rel=1e-12)
                assert len(m["time_us_per_rank"]) == world
        peaks = [m for m in r["metrics"] if m["name"] == "busbw_gbps"]
        assert {m["case"] for m in peaks} == {_plan.MODE_LABELS[x] for x in MODES[op]}
        assert all(len(m["per_rank"]) == world and m["aggregate"] == "mean" for m in peaks)
    # perfsuite show prints the nccl-tests table of a stored record
    shown = run_cli(perfsuite_env, "show", records[0]["run_id"], check=True).stdout
    assert "busbw (GB/s)" in shown and "#wrong" in shown and "Avg bus bandwidth" in shown


def test_at_world_size_one_a_collective_runs_as_nccl_tests_with_one_gpu_or_says_why_not(cli, perfsuite_env):
    """One GPU visible gives one rank: the sweep runs on a group of one rank, as nccl-tests -g 1
    (bus factor 0 for all_reduce, 1 for broadcast); gloo cannot send to its own rank, so the
    one-rank ring of send_recv is skipped with the reason on the CPU, never failed."""
    records, proc = _run_json(
        cli,
        "collectives.all_reduce",
        "collectives.send_recv",
        "--quick",
        "--nproc-per-node",
        "1",
        "--param",
        "max_bytes=1K",
        "--param",
        "iters=3",
    )
    assert proc.returncode == 0, proc.stderr
    by = {r["workload"]["name"]: r for r in records}
    ar = by["collectives.all_reduce"]
    assert (ar["status"], ar["launch"]["world_size"], ar["launch"]["launcher"]) == ("success", 1, "local"), ar["error"]
    d = ar["details"]
    assert (d["world_size"], d["backend"], d["busbw_factor"], d["wrong_total"]) == (1, "gloo", 0.0, 0)
    assert all(row["ip"]["busbw_gbps"] == 0.0 and row["ip"]["algbw_gbps"] > 0 for row in d["rows"])
    sr = by["collectives.send_recv"]
    assert sr["status"] == "skipped" and "gloo cannot" in sr["error"] and "--nproc-per-node 2" in sr["error"]


def test_the_correctness_count_catches_an_injected_wrong_element(cli, perfsuite_env):
    """Rank 1 corrupts element 0 of its input before each check call. all_reduce: element 0
    is then wrong on both ranks; reduce_scatter: only rank 0's output holds element 0;
    send_recv: rank 1 sends to rank 0 only."""
    records, _ = _run_json(
        cli,
        "collectives.all_reduce",
        "collectives.reduce_scatter",
        "collectives.send_recv",
        "--quick",
        "--nproc-per-node",
        "2",
        "--param",
        "max_bytes=256",
        "--param",
        "iters=2",
        "--param",
        "inject=wrong_element",
        "--param",
        "inject_rank=1",
        "--warmup",
        "1",
    )
    expected_per_row = {"all_reduce": 2, "reduce_scatter": 1, "send_recv": 1}
    for r in records:
        op = r["workload"]["name"].split(".", 1)[1]
        assert r["status"] == "invalid" and r["verification"]["status"] == "failed", op  # never ranked
        check = r["verification"]["checks"][0]
        rows = r["details"]["rows"]
        assert check["label"] == "correctness" and not check["passed"]
        assert check["error"] == expected_per_row[op] * len(rows) * len(MODES[op])
        for row in rows:
            for mode in MODES[op]:
                assert row[mode]["wrong"] == expected_per_row[op]
    # A failed verification is a failed run for the exit status.
    assert (
        cli(
            "run",
            "collectives.all_reduce",
            "--device",
            "cpu",
            "--quick",
            "--nproc-per-node",
            "2",
            "--param",
            "max_bytes=64",
            "--param",
            "inject=wrong_element",
        ).returncode
        == 1
    )


def test_a_rank_that_raises_fails_the_run_naming_it(cli, perfsuite_env):
    t0 = time.monotonic()
    records, proc = _run_json(
        cli,
        "collectives.all_gather",
        "--quick",
        "--nproc-per-node",
        "2",
        "--param",
        "max_bytes=256",
        "--param",
        "inject=raise",
        "--param",
        "inject_rank=1",
        "--timeout",
        "60",
    )
    elapsed = time.monotonic() - t0
    (r,) = records
    assert proc.returncode == 1 and r["status"] == "failed"
    assert r["error"].startswith("rank 1: RuntimeError: injected failure on rank 1"), r["error"]
    assert elapsed < 60
    assert not _our_leftovers(perfsuite_env)


def test_a_rank_that_hangs_ends_the_run_at_its_timeout_without_orphans(cli, perfsuite_env):
    t0 = time.monotonic()
    records, _proc = _run_json(
        cli,
        "collectives.broadcast",
        "--quick",
        "--nproc-per-node",
        "2",
        "--param",
        "max_bytes=256",
        "--param",
        "inject=hang",
        "--param",
        "inject_rank=1",
        "--timeout",
        "12",
    )
    elapsed = time.monotonic() - t0
    (r,) = records
    assert r["status"] == "timeout" and "timed out after 12 s" in r["error"]
    assert elapsed < 12 + 30  # the timeout plus process start-up and teardown
    assert not _our_leftovers(perfsuite_env)


def test_requests_a_collective_cannot_honour_are_skipped_with_the_reason(cli, perfsuite_env):
    records, _ = _run_json(
        cli,
        "collectives.all_reduce",
        "collectives.reduce_scatter",
        "--nproc-per-node",
        "2",
        "--param",
        "collectives.all_reduce:in_place=oop",
        "--param",
        "collectives.reduce_scatter:redop=avg",
        "--param",
        "collectives.reduce_scatter:dtype=int32",
    )
    by = {r["workload"]["name"]: r for r in records}
    assert by["collectives.all_reduce"]["status"] == "skipped"
    assert "no out-of-place form" in by["collectives.all_reduce"]["error"]
    assert by["collectives.reduce_scatter"]["status"] == "skipped"
    assert "floating-point" in by["collectives.reduce_scatter"]["error"]


def test_slurm_tasks_are_ranks(perfsuite_env, tmp_path):
    """Two processes with the variables srun gives two tasks of one step: each runs the CLI
    as one rank (no torchrun); rank 0 stores the record, rank 1 none."""
    procs = []
    for rank in (0, 1):
        env = dict(
            perfsuite_env,
            SLURM_PROCID=str(rank),
            SLURM_NTASKS="2",
            SLURM_STEP_NUM_TASKS="2",
            SLURM_LOCALID=str(rank),
            SLURM_NODEID="0",
            SLURM_JOB_NODELIST="localhost",
            SLURM_TASKS_PER_NODE="2",
            SLURM_NNODES="1",
            SLURM_JOB_ID=str(os.getpid()),
            SLURM_STEP_ID="0",
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "perfsuite",
                    "run",
                    "collectives.all_reduce",
                    "--quick",
                    "--device",
                    "cpu",
                    "--param",
                    "max_bytes=256",
                    "--param",
                    "iters=2",
                    "--timeout",
                    "120",
                    "--json",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:  # a task that outlived the other must not outlive the test
            if p.poll() is None:
                for child in psutil.Process(p.pid).children(recursive=True):
                    child.kill()
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], outs
    rank0, rank1 = (json.loads(o[0]) for o in outs)
    assert rank1 == []
    (r,) = rank0
    assert r["status"] == "success" and r["verification"]["status"] == "passed"
    assert r["launch"]["launcher"] == "slurm" and r["launch"]["world_size"] == 2
    assert r["launch"]["rdzv_endpoint"].startswith("localhost:")
    assert len(_records(perfsuite_env)) == 1


# -- GPUs --------------------------------------------------------------------------------------
def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 1, reason="needs a CUDA GPU")
def test_on_one_gpu_every_collective_runs_at_world_size_one_with_nccl(cli, perfsuite_env):
    """The one-GPU machine's quick suite: no rank shares a GPU, every collective runs on a group
    of one rank as nccl-tests -g 1 does (send_recv sends to itself), and the peer copy, which
    needs two GPUs, is skipped with the reason."""
    perfsuite_env["CUDA_VISIBLE_DEVICES"] = "0"
    proc = cli("run", *NAMES, "collectives.copy_bandwidth", "--quick", "--device", "cuda", "--json", timeout=900)
    by = {r["workload"]["name"]: r for r in json.loads(proc.stdout)}
    for name in NAMES:
        r = by[name]
        assert (r["status"], r["launch"]["world_size"], r["details"]["backend"]) == ("success", 1, "nccl"), r["error"]
        assert r["verification"]["status"] == "passed" and r["details"]["wrong_total"] == 0
    copy = by["collectives.copy_bandwidth"]
    assert copy["status"] == "skipped" and "needs 2 GPUs" in copy["error"]


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_nccl_collectives_and_copy_bandwidth_on_two_gpus(cli, perfsuite_env):
    proc = cli(
        "run",
        "collectives.copy_bandwidth",
        "collectives.all_reduce",
        "collectives.all_to_all",
        "--quick",
        "--device",
        "cuda",
        "--nproc-per-node",
        "2",
        "--json",
        timeout=900,
    )
    records = json.loads(proc.stdout)
    by = {r["workload"]["name"]: r for r in records}
    copy = by["collectives.copy_bandwidth"]
    assert copy["status"] == "success" and copy["verification"]["status"] == "passed"
    assert {m["case"] for m in copy["metrics"] if m["name"] == "gbps"} == {"p2p", "h2d.pinned"}
    for name in ("collectives.all_reduce", "collectives.all_to_all"):
        r = by[name]
        assert r["status"] == "success" and r["verification"]["status"] == "passed", r["error"]
        assert r["launch"]["backend"] == "nccl" and r["details"]["nccl_version"]
        assert r["details"]["wrong_total"] == 0
    # CUDA-graph capture of the timed loop
    proc = cli(
        "run",
        "collectives.all_reduce",
        "--quick",
        "--device",
        "cuda",
        "--nproc-per-node",
        "2",
        "--cuda-graph",
        "--json",
        timeout=900,
    )
    (r,) = json.loads(proc.stdout)
    assert r["status"] == "success" and r["verification"]["status"] == "passed", r["error"]
    assert r["details"]["cuda_graph"] is True


# -- the nccl-tests cross-check judged size by size: which side was launch-bound ----------------------
def _nccl_tests_text(rows: list[dict], collective: str = "all_gather_perf", ranks: int = 4) -> str:
    """An nccl-tests table (the text its ``*_perf`` binaries print) of ``rows``: per size
    ``(size_bytes, count, dtype, time_us_oop or None, time_us_ip)``, bandwidths derived as
    nccl-tests derives them."""
    factor = (ranks - 1) / ranks
    lines = [
        "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809",
        f"# Collective test starting: {collective}",
        "# Using devices",
        *(f"#  Rank  {i} Group  0 Pid  100 on node device  {i} [0000:{i:02d}:00] NVIDIA H200" for i in range(ranks)),
    ]
    for size, count, dtype, oop, ip in rows:
        cells = [str(size), str(count), dtype, "none", "-1"]
        for t in (oop, ip):
            if t is None:
                cells += ["0.00", "0.00", "0.00", "N/A"]
                continue
            algbw = size / (t * 1e-6) / 1e9
            cells += [f"{t:.2f}", f"{algbw:.2f}", f"{algbw * factor:.2f}", "0"]
        lines.append("  ".join(cells))
    lines.append("# Out of bounds values : 0 OK")
    return "\n".join(lines) + "\n"


def _suite_rows(times: list[tuple[int, float]], ranks: int = 4) -> list[dict]:
    """The suite's all_gather table: in place only, ``(size_bytes, time_us)`` per size."""
    return [
        {
            "size_bytes": s,
            "oop": None,
            "ip": {
                "time_us": t,
                "algbw_gbps": s / t / 1e3,
                "busbw_gbps": s / t / 1e3 * (ranks - 1) / ranks,
                "wrong": 0,
            },
        }
        for s, t in times
    ]


MiB = 1 << 20
# An all_gather at 4 ranks shaped like the 4xH200 cross-check that nccl-tests ran as one process
# with a thread per GPU: its times flat at 40 us through 3 and 6 MiB, where the suite read 1.35
# and 1.02 of its busbw, and within 1.1% from 12 MiB up. Below, each side at its own floor
# (nccl-tests' threads 40 us, the suite's processes 12 us).
FOUR_RANKS = [  # size, suite us, nccl-tests us
    (1024, 12.0, 40.0),
    (65536, 12.6, 40.4),
    (3 * MiB, 29.63, 40.0),
    (6 * MiB, 39.22, 40.0),
    (12 * MiB, 70.0, 70.7),
    (24 * MiB, 130.0, 131.3),
    (48 * MiB, 250.0, 252.7),
]


def _judged(table: list[tuple[int, float, float]]) -> dict:
    from perfsuite.crosscheck.collectives import compare_nccl_tests

    text = _nccl_tests_text([(s, s // 2 // 4, "bfloat16", None, ref) for s, _, ref in table])
    measured = {"tool": "nccl-tests", "status": "measured", "layout": "thread per GPU", "raw": text}
    return compare_nccl_tests([measured], _suite_rows([(s, t) for s, t, _ in table]))


def test_where_nccl_tests_sits_at_its_launch_floor_and_the_suite_does_not_the_record_names_nccl_tests():
    from perfsuite.crosscheck import launch_floor

    out = _judged(FOUR_RANKS)
    by = {c["size_bytes"]: c for c in out["compare"]}
    assert [round(by[s]["busbw_ratio"], 2) for s in (3 * MiB, 6 * MiB)] == [1.35, 1.02]
    assert by[3 * MiB]["time_ratio"] == pytest.approx(40.0 / 29.63)
    # each side's floor is its own shortest time per call up to 64 KiB
    assert out["verdict"]["floors_us"] == {"ip": {"suite": 12.0, "nccl_tests": 40.0}}
    assert {s: by[s]["launch_bound"] for s in by} == {
        1024: "both",
        65536: "both",
        3 * MiB: "reference",
        6 * MiB: "reference",  # still at its floor, though the two agree within 3% there
        12 * MiB: None,
        24 * MiB: None,
        48 * MiB: None,
    }
    assert by[3 * MiB]["verdict"] == "differs, nccl-tests launch-bound"
    assert by[3 * MiB]["nccl_tests_over_floor"] == pytest.approx(1.0)
    assert by[3 * MiB]["suite_over_floor"] == pytest.approx(29.63 / 12.0)
    assert by[1024]["verdict"] == "differs, both sides launch-bound"
    assert all(by[s]["verdict"] == launch_floor.AGREES for s in (6 * MiB, 12 * MiB, 24 * MiB, 48 * MiB))
    v = out["verdict"]
    assert (v["agrees"], v["explained"], v["agrees_from_bytes"]) == (False, True, {"ip": 6 * MiB})
    assert v["differs"] == {"both": [1024, 65536], "reference": [3 * MiB]}
    assert v["summary"] == (
        "agrees within 3% from 6 MiB up; differs where both sides are launch-bound at 1 KiB-64 KiB; "
        "nccl-tests is launch-bound at 3 MiB"
    )
    assert "1.25 x its own floor" in v["rule"] and v["tolerance"] == 0.03
    # perfsuite show prints each size's verdict beside its ratio
    from perfsuite.cli._reference import crosscheck_rows

    record = {"workload": {"name": "collectives.all_gather"}, "status": "success", "details": {"crosscheck": out}}
    shown = {row[1]: (row[5], row[6]) for row in crosscheck_rows(record)}
    assert shown[f"{3 * MiB} B in-place"] == ("1.350", "differs, nccl-tests launch-bound")
    assert shown[f"{12 * MiB} B in-place"][1] == launch_floor.AGREES


def test_the_suite_at_its_floor_where_nccl_tests_is_not_is_named_the_suite():
    """The rule is the same for both sides: swap them and the suite is named."""
    swapped = [(s, ref, mine) for s, mine, ref in FOUR_RANKS]
    by = {c["size_bytes"]: c for c in _judged(swapped)["compare"]}
    assert by[3 * MiB]["launch_bound"] == "suite" and by[3 * MiB]["verdict"] == "differs, the suite launch-bound"


def test_a_difference_with_neither_side_at_its_floor_is_reported_as_unexplained():
    # nccl-tests' 130 us over the suite at 12 MiB is far more than its fixed cost over the
    # suite's (28 us at the floor sizes) and grows with the bytes: nothing excuses it
    table = [*FOUR_RANKS[:2], (12 * MiB, 70.0, 200.0), (48 * MiB, 250.0, 252.7)]
    out = _judged(table)
    row = next(c for c in out["compare"] if c["size_bytes"] == 12 * MiB)
    assert (row["launch_bound"], row["verdict"]) == (None, "differs")
    v = out["verdict"]
    assert v["explained"] is False and v["differs"]["none"] == [12 * MiB]
    assert "neither side is launch-bound at 12 MiB" in v["summary"]


def test_a_sweep_without_a_small_size_says_the_floors_were_not_measured_rather_than_guess():
    """From 3 MiB up neither side's launch floor is in the table: no side is named, and the
    verdict says why instead of a bare 'differs'."""
    out = _judged(FOUR_RANKS[2:])
    by = {c["size_bytes"]: c for c in out["compare"]}
    assert all(c["launch_bound"] is None for c in by.values())
    assert by[3 * MiB]["verdict"] == "differs, launch floors not measured"
    assert out["verdict"]["floors_us"] == {"ip": {"suite": None, "nccl_tests": None}}
    assert out["verdict"]["explained"] is False
    assert "launch floors were not measured (no size up to 65536 B) at 3 MiB" in out["verdict"]["summary"]


def test_every_size_within_3_percent_is_the_verdict_agrees():
    table = [(s, t, t * 1.02) for s, t, _ in FOUR_RANKS]
    v = _judged(table)["verdict"]
    assert (v["summary"], v["agrees"], v["differs"]) == ("agrees within 3%", True, {})


def test_a_real_gloo_sweep_is_judged_against_a_reference_flat_at_its_floor(cli, perfsuite_env):
    """A real 2-rank gloo all_reduce, judged against nccl-tests tables built from its own rows:
    the same times agree at every size; a reference held at three times the suite's floor
    (a layout that cannot issue calls faster) is named launch-bound exactly where it sits
    at that floor and the suite does not."""
    from perfsuite.crosscheck import launch_floor
    from perfsuite.crosscheck.collectives import compare_nccl_tests

    records, proc = _run_json(
        cli,
        "collectives.all_reduce",
        "--quick",
        "--nproc-per-node",
        "2",
        "--param",
        "min_bytes=8",
        "--param",
        "max_bytes=4M",
        "--param",
        "step_factor=8",
        "--param",
        "iters=3",
        "--warmup",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    (record,) = records
    rows = record["details"]["rows"]
    times = [(r["size_bytes"], r["ip"]["time_us"]) for r in rows]

    def measured(ref_times):
        text = _nccl_tests_text(
            [(s, s // 4, "float", None, t) for s, t in ref_times], collective="all_reduce_perf", ranks=2
        )
        return compare_nccl_tests([{"tool": "nccl-tests", "status": "measured", "raw": text}], rows)

    same = measured(times)
    assert same["verdict"]["summary"] == launch_floor.AGREES
    assert [c["size_bytes"] for c in same["compare"]] == [s for s, _ in times]
    floor = min(t for s, t in times if s <= launch_floor.FLOOR_MAX_BYTES)
    assert same["verdict"]["floors_us"]["ip"]["suite"] == pytest.approx(floor)

    held = 3 * floor
    slow = measured([(s, max(t, held)) for s, t in times])
    for c in slow["compare"]:
        ref_at_floor = max(c["suite_time_us"], held) <= launch_floor.LAUNCH_FACTOR * held
        suite_at_floor = c["suite_time_us"] <= launch_floor.LAUNCH_FACTOR * floor
        expected = launch_floor.launch_bound(suite_at_floor, ref_at_floor)
        assert c["launch_bound"] == expected, c
        if c["verdict"] != launch_floor.AGREES:
            assert expected is not None and c["verdict"] == f"differs, {launch_floor.SIDE_NAMES[expected]} launch-bound"
    assert slow["verdict"]["explained"] is True
    # every named side comes with its reason, and only a named side
    assert all((c["launch_bound"] is None) == (c["launch_bound_why"] is None) for c in slow["compare"])
    # a size whose own time is far above the held floor (its bytes dominate) names no side; which
    # sizes those are is the machine's (4 MiB over loopback on a busy machine may not be one)
    above = [c for c in slow["compare"] if c["suite_time_us"] > launch_floor.LAUNCH_FACTOR * held]
    assert all(c["launch_bound"] is None for c in above), above


def test_collectives_time_one_loop_per_repeat_by_default_and_per_call_on_request(cli):
    proc = cli(
        "crosscheck",
        "collectives.all_reduce",
        "collectives.all_gather",
        "--device",
        "cpu",
        "--quick",
        "--nproc-per-node",
        "2",
        "-p",
        "max_bytes=1K",
        "-p",
        "iters=4",
        "-p",
        "repeats=3",
        "-p",
        "collectives.all_gather:timing=per_call",
        "--warmup",
        "1",
        "--json",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    records = {r["workload"]["name"]: r for r in json.loads(proc.stdout)}
    loop, per_call = records["collectives.all_reduce"], records["collectives.all_gather"]
    assert loop["workload"]["version"] == 5
    d = loop["details"]
    assert d["timing"] == "loop" and d["repeats"] == 3 and "nccl-tests" in d["timing_method"]
    busbw = [m for m in loop["metrics"] if m["name"] == "busbw_gbps"]
    assert busbw and all(len(m["samples"]) == 3 for m in busbw)  # one sample per timed loop
    assert per_call["details"]["timing"] == "per_call" and per_call["details"]["repeats"] == 1
    assert all(len(m["samples"]) == 4 for m in per_call["metrics"] if m["name"] == "busbw_gbps")
    # the cross-check ran and said why nccl-tests could not (CPU, no binaries)
    assert loop["details"]["crosscheck"]["status"] == "skipped"
    assert "PERFSUITE_NCCL_TESTS" in loop["details"]["crosscheck"]["reason"]


def test_a_host_loop_records_its_launch_time_and_the_caption_names_where_python_is_host_bound(cli):
    proc = cli(
        "run",
        "collectives.all_reduce",
        "--device",
        "cpu",
        "--quick",
        "--nproc-per-node",
        "2",
        "-p",
        "max_bytes=256",
        "-p",
        "iters=3",
        "-p",
        "repeats=2",
        "-p",
        "timing=host_loop",
        "--warmup",
        "1",
        "--json",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)[0]["details"]
    assert d["timing"] == "host_loop" and "no hold" in d["timing_method"] and "hold_s" not in d
    assert all(r["ip"]["launch_us"] > 0 and r["ip"]["unheld_loops"] == 0 for r in d["rows"])


def test_the_caption_names_the_host_bound_sizes_and_loops_whose_hold_ran_out():
    from perfsuite.workloads.collectives import _report

    def row(size, time_us, launch_us, unheld=0):
        m = {"time_us": time_us, "launch_us": launch_us, "unheld_loops": unheld}
        return {"size_bytes": size, "oop": None, "ip": m}

    rows = [row(8, 10.0, 22.0), row(1 << 20, 24.0, 23.0, unheld=2), row(1 << 22, 35.0, 21.0)]
    assert _report.host_bound(rows) == ([8], 22.0)
    caption = _report._caption({"rows": rows, "hold_s": 0.002})
    assert "22.0 us per call (median); a Python loop is host-bound (issuing > running) up to 8 B" in caption
    assert "ran out before the calls were issued in 2 loops" in caption
    assert "queued behind a stream hold" in _report.timing_label(
        {"timing": "loop", "iters": 20, "repeats": 5, "hold_s": 0.002}
    )
