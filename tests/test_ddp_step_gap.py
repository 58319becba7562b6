"""``bench/ddp_step_gap.py``, the experiment that splits the suite's data-parallel step from the bare
DDP loop's one difference at a time, run as the lead runs it on GPUs: under torchrun (two gloo
ranks here, a tiny GPT on the CPU), then alone, then summarised as weak-scaling efficiencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "ddp_step_gap.py"
TINY = [
    *("--device", "cpu", "--per-gpu", "4", "--seconds", "0.05", "--rounds", "1"),
    *("--set", "layers=1", "--set", "width=16", "--set", "heads=2", "--set", "context=8", "--set", "vocab=32"),
    *("--set", "symbols=4", "--set", "precision=fp32", "--set", "compile=false"),
    *("--set", "train_samples=64", "--set", "eval_samples=8"),
]
VARIANTS = [
    *("bare", "vocab", "suite-data", "epoch-sync", "events", "scheduler", "sampler", "lifeline"),
    *("suite", "suite-now", "evals", "suite-evals"),
]


def _why(done: subprocess.CompletedProcess) -> str:
    """A failed run's own words: the lines of any rank that name an error or an abort, then the end."""
    said = [
        line for line in done.stderr.splitlines() if any(w in line for w in ("failed:", "Error", "terminate", "Fatal"))
    ]
    return "\n".join([*said[:20], "...", done.stderr[-1500:]])


def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def test_two_ranks_time_every_variant_alike_and_one_rank_summarises_them(tmp_path):
    two, one = tmp_path / "gap-2.json", tmp_path / "gap-1.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = _run([*torchrun, str(SCRIPT), *TINY, "--out", str(two)], tmp_path)
    assert done.returncode == 0, _why(done)
    found = json.loads(two.read_text())
    assert found["world_size"] == 2 and found["global_batch"] == 8 and found["per_rank_batch"] == 4
    restored = ["bare after restore", "suite after restore", "suite-now after restore"]
    assert list(found["variants"]) == [*VARIANTS, *restored]
    for name, v in found["variants"].items():
        assert len(v["block_seconds"]) == 1 and v["block_seconds"][0] > 0, name
        assert len(v["power_w"][0]) == 2, name  # both ranks reported their block
        assert [len(counts) for counts in v["gc_collections"][0]] == [3, 3], name  # by generation, each rank
    # the phase split is taken only where the events ran, on every rank
    assert all(v["phases_ms"][0][0] is None for n, v in found["variants"].items() if n in ("bare", "sampler"))
    assert set(found["variants"]["events"]["phases_ms"][0][0]) == {"forward", "backward", "optimizer"}
    # the bare loop's block has no Python thread beside the steps; the suite's has the lifeline's
    assert found["variants"]["bare"]["python_threads"] == ["MainThread"]
    assert "perfsuite-lifeline" in found["variants"]["suite"]["python_threads"]
    assert "bare" in done.stdout and "suite after restore" in done.stdout

    alone = _run([sys.executable, str(SCRIPT), *TINY, "--variants", "bare,suite", "--out", str(one)], tmp_path)
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert json.loads(one.read_text())["world_size"] == 1
    summary = _run([sys.executable, str(SCRIPT), "--summarize", str(one), str(two)], tmp_path)
    assert summary.returncode == 0, summary.stderr[-2000:]
    rows = {line[:22].strip(): line[22:].split() for line in summary.stdout.splitlines()[2:]}
    # the variants the one-rank file has, each at two ranks: its efficiency, and that less bare's
    assert set(rows) == {"bare", "suite", "bare after restore", "suite after restore"}
    assert rows["bare"][1] == "+0.000" and all(len(cells) == 2 for cells in rows.values())


def test_built_as_a_run_the_model_is_counted_warmed_on_synthetic_batches_and_restored_first(tmp_path):
    out = tmp_path / "gap-as-run.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv = [*torchrun, str(SCRIPT), *TINY, "--variants", "bare,suite-evals", "--as-run", "--out", str(out)]
    done = _run(argv, tmp_path)
    assert done.returncode == 0, _why(done)
    found = json.loads(out.read_text())
    assert found["as_run"] is True and found["untimed_init_s"] > 0
    # an evaluation before each block, all-reduced over both ranks: every block still ran on both
    assert list(found["variants"]) == ["bare", "suite-evals", "bare after restore"]
    assert all(len(v["power_w"][0]) == 2 for v in found["variants"].values())
    assert "built as a run" in done.stdout.splitlines()[0]


def test_beside_the_bare_loops_processes_each_named_variant_takes_turns_as_a_runs_cross_check_does(tmp_path):
    """Two ranks, each with its own rank of the cross-check's bare loop as a child process: the
    bare step and the suite's each take two rounds of turns with it, both sides timed every round."""
    out = tmp_path / "gap-turns.json"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    argv = [*torchrun, str(SCRIPT), *TINY, "--variants", "bare", "--beside-bare", "bare,suite-now"]
    done = _run([*argv, "--rounds", "2", "--out", str(out)], tmp_path)
    assert done.returncode == 0, _why(done)
    turns = json.loads(out.read_text())["beside_bare"]
    assert list(turns) == ["bare", "suite-now"]
    for name, found in turns.items():
        assert [r["order"] for r in found["rounds"]] == ["suite first", "reference first"], name
        assert all(r["suite_samples_per_s"] > 0 and r["reference_samples_per_s"] > 0 for r in found["rounds"]), name
        low, high = found["round_ratio_ci95"]
        assert low <= found["round_ratio_median"] <= high, name
    # the bare loop ran as a run's does: one process per rank, each with its own log beside the results
    logs = sorted(p.name for p in (tmp_path / "gap-turns.bare-loop").iterdir())
    assert logs == ["bare-loop.rank0.log", "bare-loop.rank1.log"]
    assert "beside the bare loop's processes, suite-now:" in done.stdout


def test_an_unknown_variant_to_take_turns_with_the_bare_loop_is_refused(tmp_path):
    done = _run([sys.executable, str(SCRIPT), *TINY, "--beside-bare", "fast"], tmp_path)
    assert done.returncode == 2 and "unknown variant(s) fast" in done.stderr


def test_a_summary_without_a_one_rank_file_is_refused(tmp_path):
    lone = tmp_path / "gap-2.json"
    lone.write_text(json.dumps({"world_size": 2, "model": "gpt", "variants": {}}))
    done = _run([sys.executable, str(SCRIPT), "--summarize", str(lone)], tmp_path)
    assert done.returncode != 0
    assert "no one-rank file" in done.stderr and len(done.stderr.strip().splitlines()) == 1
