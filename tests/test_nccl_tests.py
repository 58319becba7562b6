"""nccl-tests beside the suite (``perfsuite.crosscheck.nccl_tests`` and the collectives'
cross-check): its printed table parsed (captures from 2xH200, one thread or one process per
GPU, cycles folded into each size's median), its command line matching the sweep, its run
under a thread per GPU or an MPI launcher with stand-in binaries, killed with its processes
past the timeout, and its rows compared with the suite's per size and mode, over rounds."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from perfsuite.crosscheck import nccl_tests

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_parser_reads_an_all_reduce_capture():
    """The fixture is written in nccl-tests 2.19.6's print format (src/util.cu), with the
    2xH200 in-place figures of DESIGN.md at 1, 4, 8, 16, 32, 64 and 512 MiB."""
    out = nccl_tests.parse((FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text())
    assert out.version == "2.19.6" and out.nccl_library == 22809 and out.collective == "all_reduce_perf"
    assert out.config["gpus"] == 2 and out.config["iters"] == 20 and out.config["warmup_iters"] == 5
    assert [d["name"] for d in out.devices] == ["NVIDIA H200", "NVIDIA H200"]
    assert len(out.rows) == 27 and out.rows[0]["size_bytes"] == 8 and out.rows[-1]["size_bytes"] == 512 << 20
    first = out.rows[0]
    assert first["count"] == 2 and first["dtype"] == "float" and first["redop"] == "sum" and first["root"] == -1
    assert first["ip"]["time_us"] == 17.62 and first["ip"]["wrong"] == 0
    mib = out.row(1 << 20)
    assert mib["ip"]["busbw_gbps"] == pytest.approx(70.09, abs=0.01)
    assert out.row(512 << 20)["ip"]["busbw_gbps"] == pytest.approx(315.25)
    assert out.row(512 << 20)["oop"]["time_us"] == pytest.approx(1709.81)
    assert out.wrong_total == 0 and out.avg_busbw_gbps == pytest.approx(79.5515)
    for r in out.rows:  # the columns mean what nccl-tests means: algbw = size / time, busbw = x 2(n-1)/n
        for mode in ("oop", "ip"):
            assert r[mode]["algbw_gbps"] == pytest.approx(
                r["size_bytes"] / r[mode]["time_us"] / 1e3, rel=2e-3, abs=0.006
            )
            assert r[mode]["busbw_gbps"] == pytest.approx(r[mode]["algbw_gbps"], abs=0.006)


def test_parser_reads_a_run_captured_as_one_process_per_gpu():
    """Captured on 2xH200 (round 1 of an all_reduce cross-check): nccl-tests 2.19.6
    built with MPI=1 under MPICH's mpiexec -n 2, -g 1 in each process, -N 3. Each process is
    one rank on its own GPU, the three cycles fold into each size's median, and the ranks
    listed are exactly the sweep's."""
    out = nccl_tests.parse((FIXTURES / "nccl_tests_all_reduce_perf_2xh200_mpi.txt").read_text())
    assert out.config["threads"] == 1 and out.config["gpus"] == 1 and out.config["cycles"] == 3
    assert out.config["iters"] == 500 and out.nccl_library == 22809
    assert [(d["rank"], d["device"]) for d in out.devices] == [(0, 0), (1, 1)]
    assert len({d["host"] for d in out.devices}) == 1 and len(out.rows) == 27
    nccl_tests.check_ranks(out, 2)
    with pytest.raises(nccl_tests.ParseError, match="listed ranks \\[0, 1\\] where the sweep has 4"):
        nccl_tests.check_ranks(out, 4)
    mib = out.row(1 << 20)["ip"]
    assert mib["time_us_cycles"] == [15.16, 15.17, 15.17] and mib["time_us"] == 15.17
    assert out.wrong_total == 0


def test_parser_reads_unchecked_in_place_all_to_all_as_none():
    out = nccl_tests.parse((FIXTURES / "nccl_tests_alltoall_perf_2xh200.txt").read_text())
    assert all(r["ip"]["wrong"] is None and r["oop"]["wrong"] == 0 for r in out.rows)
    assert out.rows[0]["redop"] == "none"


def test_parser_skips_log_lines_and_refuses_text_without_a_table():
    text = (FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text()
    noisy = text.replace("#  Rank  1", "gpu-node-07:48213:48213 [1] NCCL INFO Bootstrap : Using eth0\n#  Rank  1")
    assert len(nccl_tests.parse(noisy).rows) == 27
    with pytest.raises(nccl_tests.ParseError):
        nccl_tests.parse("NCCL WARN something [1] went wrong\n# nothing else\n")


def test_nccl_tests_command_line_matches_the_sweep(tmp_path):
    binary = tmp_path / "build" / "all_reduce_perf"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert nccl_tests.find_binary(tmp_path, "all_reduce") == binary
    with pytest.raises(FileNotFoundError, match="alltoall_perf"):
        nccl_tests.find_binary(tmp_path, "all_to_all")
    args = nccl_tests.argv(
        binary,
        min_bytes=8,
        max_bytes=512 << 20,
        step_factor=2,
        iters=20,
        warmup=5,
        gpus=2,
        dtype="float",
        redop="sum",
        root=None,
        graph=False,
        check=True,
    )
    assert args[1:] == [
        "-b",
        "8",
        "-e",
        str(512 << 20),
        "-f",
        "2",
        "-n",
        "20",
        "-w",
        "5",
        "-g",
        "2",
        "-d",
        "float",
        "-c",
        "1",
        "-o",
        "sum",
    ]
    threads = nccl_tests.argv(
        binary,
        min_bytes=8,
        max_bytes=64,
        step_factor=2,
        iters=20,
        warmup=5,
        gpus=4,
        dtype="float",
        redop=None,
        root=None,
        graph=True,
        check=False,
        placement=nccl_tests.THREAD_PER_GPU,
    )
    assert threads[11:15] == ["-t", "4", "-g", "1"] and threads[-2:] == ["-G", "1"]
    # one process per GPU: each of the launcher's processes drives one GPU, no threads
    procs = nccl_tests.argv(
        binary,
        min_bytes=8,
        max_bytes=64,
        step_factor=2,
        iters=20,
        warmup=5,
        gpus=4,
        dtype="float",
        redop="sum",
        root=None,
        graph=False,
        check=True,
        placement=nccl_tests.PROCESS_PER_GPU,
    )
    assert procs[11:13] == ["-g", "1"] and "-t" not in procs
    assert nccl_tests.command(procs, ["mpiexec", "--bind-to", "none"], 4) == [
        "mpiexec",
        "--bind-to",
        "none",
        "-n",
        "4",
        *procs,
    ]
    assert nccl_tests.command(procs, None, 4) == procs


def test_nccl_tests_cycles_fold_into_each_sizes_median():
    """-N 3 prints the sweep three times: one row per size, each mode the median cycle."""
    text = (FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text()
    one = nccl_tests.parse(text)
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if nccl_tests._row(line, False)]
    body = lines[rows[0] : rows[-1] + 1]

    def scaled(factor):  # the same table with every time multiplied (bandwidths divided)
        out = []
        for line in body:
            t = line.split()
            for k in (5, 9):
                t[k], t[k + 1], t[k + 2] = (
                    f"{float(t[k]) * factor:.2f}",
                    f"{float(t[k + 1]) / factor:.2f}",
                    f"{float(t[k + 2]) / factor:.2f}",
                )
            out.append("  ".join(t))
        return out

    three = "\n".join(lines[: rows[0]] + scaled(1.2) + body + scaled(0.9) + lines[rows[-1] + 1 :])
    parsed = nccl_tests.parse(three)
    assert parsed.config["cycles"] == 3 and one.config["cycles"] == 1
    assert [r["size_bytes"] for r in parsed.rows] == [r["size_bytes"] for r in one.rows]
    for mine, ref in zip(parsed.rows, one.rows):
        assert mine["ip"]["time_us"] == ref["ip"]["time_us"]  # the middle cycle: the original
        assert mine["ip"]["busbw_gbps"] == ref["ip"]["busbw_gbps"]
        assert len(mine["ip"]["time_us_cycles"]) == 3
    binary = Path("/bin/true")
    args = nccl_tests.argv(
        binary,
        min_bytes=8,
        max_bytes=64,
        step_factor=2,
        iters=20,
        warmup=5,
        gpus=2,
        dtype="float",
        redop="sum",
        root=None,
        graph=False,
        check=True,
        cycles=5,
    )
    assert args[-2:] == ["-N", "5"]


def test_nccl_tests_gives_each_gpu_a_thread_unless_told_and_takes_extra_environment():
    layout = nccl_tests.layout
    assert layout({}) == layout({"PERFSUITE_NCCL_TESTS_THREADS": "1"}) == nccl_tests.THREAD_PER_GPU
    assert layout({"PERFSUITE_NCCL_TESTS_THREADS": "0"}) == nccl_tests.ONE_THREAD
    # an MPI launcher puts each GPU in a process of its own, whatever the thread setting says
    mpi = {
        "PERFSUITE_NCCL_TESTS_MPIRUN": "'/opt/my mpi/bin/mpiexec' -bind-to none",
        "PERFSUITE_NCCL_TESTS_THREADS": "0",
    }
    assert layout(mpi) == nccl_tests.PROCESS_PER_GPU
    assert nccl_tests.mpirun(mpi) == ["/opt/my mpi/bin/mpiexec", "-bind-to", "none"]
    assert (
        nccl_tests.mpirun({"PERFSUITE_NCCL_TESTS_MPIRUN": "  "}) is None
        and layout({"PERFSUITE_NCCL_TESTS_MPIRUN": ""}) == nccl_tests.THREAD_PER_GPU
    )
    env = {"PERFSUITE_NCCL_TESTS_ENV": "NCCL_P2P_DIRECT_DISABLE=1  NCCL_DEBUG=INFO"}
    assert nccl_tests.extra_env(env) == {"NCCL_P2P_DIRECT_DISABLE": "1", "NCCL_DEBUG": "INFO"}
    assert nccl_tests.extra_env({}) == {}
    with pytest.raises(ValueError, match="'NCCL_DEBUG' is not KEY=VALUE"):
        nccl_tests.extra_env({"PERFSUITE_NCCL_TESTS_ENV": "NCCL_DEBUG"})


def test_suite_rows_are_compared_with_nccl_tests_rows_per_size_and_mode():
    from perfsuite.crosscheck.collectives import collective_vs_nccl_tests

    ref = nccl_tests.parse((FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text()).to_dict()
    mine = [
        {
            "size_bytes": 1 << 20,
            "oop": None,
            "ip": {"time_us": 15.0, "algbw_gbps": 69.9, "busbw_gbps": 69.9, "wrong": 0},
        }
    ]
    (c,) = collective_vs_nccl_tests(mine, ref)
    assert c["mode"] == "ip" and c["busbw_ratio"] == pytest.approx(69.9 / 70.09, abs=1e-3)


def test_a_sweeps_rounds_pool_their_loops_and_nccl_tests_rounds_fold_together():
    """Cross-checked collectives take turns with nccl-tests: each side's figure per size is
    the median over every round's loops (cycles)."""
    from perfsuite.crosscheck.collectives import compare_nccl_tests
    from perfsuite.workloads.collectives import _sweep

    r1 = [
        {
            "size_bytes": 1 << 20,
            "modes": {"ip": {"samples_s": [1.0, 2.0], "launch_s": [0.1, 0.1], "unheld": 0, "wrong": 0}},
        }
    ]
    r2 = [
        {
            "size_bytes": 1 << 20,
            "modes": {"ip": {"samples_s": [3.0, 4.0], "launch_s": [0.2, 0.2], "unheld": 1, "wrong": None}},
        }
    ]
    (pooled,) = _sweep.pool_rounds([r1, r2])
    assert pooled["modes"]["ip"] == {
        "samples_s": [1.0, 2.0, 3.0, 4.0],
        "launch_s": [0.1, 0.1, 0.2, 0.2],
        "unheld": 1,
        "wrong": 0,
        "checked": None,  # neither round counted the elements it checked
    }
    text = (FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text()
    one = {"tool": "nccl-tests", "status": "measured", "argv": ["-n", "20"], "raw": text}
    slower = text.replace("14.96   70.09", "15.96   70.09")  # the 1 MiB in-place time, round 2
    assert slower != text
    rows = [
        {
            "size_bytes": 1 << 20,
            "oop": None,
            "ip": {"time_us": 15.2, "algbw_gbps": 69.0, "busbw_gbps": 69.0, "wrong": 0},
        }
    ]
    out = compare_nccl_tests([one, {**one, "raw": slower}, one], rows)
    assert out["rounds"] == 3 and out["table"]["config"]["cycles"] == 3
    ip = next(r for r in out["table"]["rows"] if r["size_bytes"] == 1 << 20)["ip"]
    assert sorted(ip["time_us_cycles"]) == [14.96, 14.96, 15.96] and ip["time_us"] == 14.96
    assert out["raw"].count("# ---- round") == 3
    # a round that did not measure is the answer
    failed = {"tool": "nccl-tests", "status": "failed", "reason": "TimeoutExpired"}
    assert compare_nccl_tests([one, failed], rows) is failed


# the suite's 1 MiB in-place row that the cross-check tests compare with the fixture's 70.09 GB/s
_MIB_ROWS = [
    {"size_bytes": 1 << 20, "oop": None, "ip": {"time_us": 15.2, "algbw_gbps": 69.0, "busbw_gbps": 69.0, "wrong": 0}}
]


def _cuda_ctx(world: int):
    import types

    from perfsuite.controls import Controls

    return types.SimpleNamespace(
        device="cuda", world_size=world, rank=0, controls=Controls(device="cuda", warmup=5, timeout_s=60.0)
    )


def _versus_nccl_tests_on_one_process(ctx, rows):
    """``versus_nccl_tests`` with this test's single gloo rank standing in for the sweep's ranks."""
    import torch.distributed as dist

    from perfsuite.crosscheck.collectives import versus_nccl_tests

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        return versus_nccl_tests(
            ctx,
            "all_reduce",
            rows,
            min_bytes=8,
            max_bytes=512 << 20,
            step_factor=2,
            iters=20,
            dtype="float",
            redop="sum",
            root=None,
            check=True,
        )
    finally:
        dist.destroy_process_group()


def test_nccl_tests_runs_beside_a_sweep_and_its_table_is_compared(tmp_path, monkeypatch):
    """The GPU path of the collectives' cross-check, with a stand-in binary that records its
    arguments and prints a captured table: rank 0 runs it, all ranks meet at a host barrier."""
    fixture = FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt"
    args_file = tmp_path / "args.txt"
    binary = tmp_path / "all_reduce_perf"
    binary.write_text(
        f'#!/bin/sh\necho "$@" > {args_file}\necho "$NCCL_P2P_DIRECT_DISABLE" > {args_file}.env\ncat {fixture}\n'
    )
    binary.chmod(0o755)
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS", str(tmp_path))
    monkeypatch.delenv("PERFSUITE_NCCL_TESTS_THREADS", raising=False)
    monkeypatch.delenv("NCCL_P2P_DIRECT_DISABLE", raising=False)
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS_ENV", "NCCL_P2P_DIRECT_DISABLE=1")
    monkeypatch.delenv("PERFSUITE_NCCL_TESTS_MPIRUN", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # the fixture's two ranks (this test's process group has one)
    out = _versus_nccl_tests_on_one_process(_cuda_ctx(2), _MIB_ROWS)
    assert out["status"] == "measured", out
    # one thread per GPU by default; the extra environment reached the binary and the record
    assert args_file.read_text().split() == [
        "-b",
        "8",
        "-e",
        str(512 << 20),
        "-f",
        "2",
        "-n",
        "20",
        "-w",
        "5",
        "-t",
        "2",
        "-g",
        "1",
        "-d",
        "float",
        "-c",
        "1",
        "-o",
        "sum",
    ]
    assert out["layout"] == nccl_tests.THREAD_PER_GPU and out["launcher"] is None
    assert out["argv"] == args_file.read_text().split()
    assert out["env"] == {"NCCL_P2P_DIRECT_DISABLE": "1"}
    assert Path(f"{args_file}.env").read_text().strip() == "1"
    assert out["version"] == "2.19.6" and len(out["table"]["rows"]) == 27
    (c,) = out["compare"]
    assert c["busbw_ratio"] == pytest.approx(69.0 / 70.09, abs=1e-3)


def _launcher(tmp_path, body: str) -> Path:
    """A stand-in MPI launcher: takes ``-n N BINARY ARGS``, records them, then runs ``body``."""
    launcher = tmp_path / "bin" / "fake-mpiexec"
    launcher.parent.mkdir(exist_ok=True)
    launcher.write_text(
        f'#!/bin/sh\nprintf "%s " "$@" > {tmp_path}/launcher-args.txt\n[ "$1" = "-n" ] || exit 9\n'
        f"n=$2; shift 2\n{body}\n"
    )
    launcher.chmod(0o755)
    return launcher


def test_nccl_tests_runs_as_one_process_per_gpu_under_an_mpi_launcher(tmp_path, monkeypatch):
    """With ``PERFSUITE_NCCL_TESTS_MPIRUN`` rank 0 starts the launcher with one process per
    rank, each driving one GPU (-g 1), and the record says so."""
    fixture = FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt"
    binary = tmp_path / "all_reduce_perf"
    binary.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/binary-args.txt\ncat {fixture}\n')
    binary.chmod(0o755)
    launcher = _launcher(tmp_path, 'exec "$@"')  # MPI=1: one table, printed by rank 0
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS", str(tmp_path))
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS_MPIRUN", str(launcher))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    out = _versus_nccl_tests_on_one_process(_cuda_ctx(2), _MIB_ROWS)
    assert out["status"] == "measured", out
    assert (tmp_path / "launcher-args.txt").read_text().split()[:3] == ["-n", "2", str(binary)]
    flags = (tmp_path / "binary-args.txt").read_text().split()
    assert flags[10:12] == ["-g", "1"] and "-t" not in flags and out["argv"] == flags
    assert out["layout"] == nccl_tests.PROCESS_PER_GPU and out["launcher"] == [str(launcher)]
    (c,) = out["compare"]
    assert c["busbw_ratio"] == pytest.approx(69.0 / 70.09, abs=1e-3)


def test_a_binary_built_without_mpi_under_the_launcher_is_refused_not_compared(tmp_path, monkeypatch):
    """An MPI=0 binary under mpiexec runs one single-GPU test per process: two tables, each
    with its own rank 0. That is no communicator of two GPUs: the cross-check fails, saying
    why, instead of folding the two tables as if they were cycles."""
    one_rank = "\n".join(
        line
        for line in (FIXTURES / "nccl_tests_all_reduce_perf_2xh200.txt").read_text().splitlines()
        if "Rank  1" not in line
    )
    (tmp_path / "table.txt").write_text(one_rank)
    binary = tmp_path / "all_reduce_perf"
    binary.write_text(f"#!/bin/sh\ncat {tmp_path}/table.txt\n")
    binary.chmod(0o755)
    launcher = _launcher(tmp_path, 'i=0; while [ $i -lt $n ]; do "$@" || exit 1; i=$((i+1)); done')
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS", str(tmp_path))
    monkeypatch.setenv("PERFSUITE_NCCL_TESTS_MPIRUN", str(launcher))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    out = _versus_nccl_tests_on_one_process(_cuda_ctx(2), [])
    assert out["status"] == "failed"
    assert "listed ranks [0, 0] where the sweep has 2" in out["reason"] and "MPI=1" in out["reason"]


def test_an_nccl_tests_run_past_its_timeout_is_killed_with_the_processes_it_started(tmp_path):
    """A launcher whose ranks hang: the timeout kills the launcher and its ranks (they hold GPUs)."""
    import psutil

    pids = tmp_path / "pids.txt"
    launcher = _launcher(tmp_path, f"sleep 300 & echo $! >> {pids}\nsleep 300 & echo $! >> {pids}\nwait")
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    with pytest.raises(subprocess.TimeoutExpired):
        nccl_tests.run([str(binary)], timeout_s=1.0, launcher=[str(launcher)], ranks=2)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    for pid in started:  # gone, or a zombie left for init to reap: either way no longer running
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_launcher_that_does_not_parse_is_refused_before_anything_runs(cli):
    proc = cli("crosscheck", "collectives.all_reduce", "--device", "cpu", "--mpirun", "mpiexec 'unclosed", timeout=120)
    assert proc.returncode == 2 and "--mpirun: No closing quotation" in proc.stderr, proc.stderr
    assert "running collectives.all_reduce" not in proc.stdout


def test_a_missing_mpi_launcher_is_named(tmp_path):
    binary = tmp_path / "all_reduce_perf"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    with pytest.raises(FileNotFoundError, match="MPI launcher /nonexistent/mpiexec not found"):
        nccl_tests.run([str(binary)], timeout_s=5.0, launcher=["/nonexistent/mpiexec"], ranks=2)
