"""Data-parallel training beside its bare loop at the run's world size, MLPerf's clock rules
(untimed initialisation) and the reference-convergence-point check, through the real CLI on
the CPU: a 2-rank gloo run stores the bare DDP loop's throughput and the ratio; a run with
untimed initialisation starts its timed run from the state it would have had without it and
never shares a comparability key with one that compiles on the clock; a run that converges in
fewer samples than the reference points allow is flagged and never ranked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfsuite import convergence  # noqa: E402
from perfsuite.analysis import scoring  # noqa: E402
from perfsuite.schemas.comparability import comparability_key  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
QUICK_GPT = ["training.gpt", "--quick", "--device", "cpu"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'r.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "records"),
        PERFSUITE_PLUGINS="",
        OMP_NUM_THREADS="1",  # several torch processes on a shared CPU: no spinning thread pools
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
        **extra,
    )


def _perfsuite(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args], env=env, capture_output=True, text=True, timeout=600
    )


def _records(env: dict[str, str], *args: str) -> list[dict]:
    proc = _perfsuite(env, *args, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _metric(record: dict, name: str) -> float:
    return next(m["value"] for m in record["metrics"] if m["name"] == name)


# -- the bare DDP loop at the run's world size -------------------------------------------------
def test_a_two_rank_gloo_run_stores_the_bare_ddp_loops_throughput_and_the_ratio(tmp_path):
    env = _env(tmp_path)
    args = ["crosscheck", *QUICK_GPT, "--nproc-per-node", "2", "--rounds", "2", "-p", "max_steps=20"]
    (record,) = _records(env, *args, "-p", "eval_every=10")
    assert record["launch"]["world_size"] == 2 and record["launch"]["backend"] == "gloo"
    cc = record["details"]["crosscheck"]["train"]
    assert cc["status"] == "measured", cc.get("reason")
    # the bare loop trained one data-parallel model over both ranks, of the run's global batch
    assert cc["reference"]["world_size"] == 2 and cc["reference"]["per_rank_batch"] == 32
    assert cc["reference"]["parameters"] == record["details"]["training"]["model"]["parameters"]
    assert cc["rate_ratio"] == pytest.approx(cc["suite_samples_per_s"] / cc["reference_samples_per_s"])
    assert cc["reference_samples_per_s"] > 0 and len(cc["rounds"]) == 2
    # every rank timed the same warmed block (a rank that timed more steps would hang the other)
    assert cc["steps_per_block"] >= 10 and cc["warm_steps_per_block"] == 3
    artifacts = tmp_path / "records" / "artifacts" / record["run_id"]
    assert (artifacts / "bare-loop.rank0.log").is_file() and (artifacts / "bare-loop.rank1.log").is_file()
    assert record["details"]["training"]["data_parallel"].startswith("torch.compile(DistributedDataParallel")


# -- MLPerf's clock rules ------------------------------------------------------------------------
def test_untimed_initialisation_restores_the_state_and_never_shares_a_key(tmp_path):
    """The warm-up on synthetic batches before run_start leaves the model, optimizer, schedule and
    random generators as they were: the same seed reaches the target on the same evaluations
    either way; the untimed seconds are recorded and shown beside the time; the two runs' keys differ."""
    env = _env(tmp_path)
    (mlperf,) = _records(env, "run", *QUICK_GPT, "--seed", "7")
    (on_clock,) = _records(env, "run", *QUICK_GPT, "--seed", "7", "-p", "untimed_init=false")
    for r in (mlperf, on_clock):
        assert r["status"] == "success", r["error"]
    assert mlperf["workload"]["params"]["untimed_init"] is True
    assert [e["accuracy"] for e in mlperf["details"]["evals"]] == [e["accuracy"] for e in on_clock["details"]["evals"]]
    assert _metric(mlperf, "samples_to_target") == _metric(on_clock, "samples_to_target")
    t = mlperf["details"]["training"]
    assert t["clock_rules"] == "mlperf" and t["untimed_warmup_s"] > 0
    assert _metric(mlperf, "untimed_init_s") >= t["untimed_warmup_s"]
    assert mlperf["details"]["goodput"]["seconds"]["compile_warmup"] == 0.0  # nothing compiled on the clock
    assert on_clock["details"]["training"]["untimed_warmup_s"] is None
    assert on_clock["details"]["goodput"]["seconds"]["compile_warmup"] > 0
    assert comparability_key(mlperf) != comparability_key(on_clock)
    assert mlperf["comparability_key"] != on_clock["comparability_key"]
    shown = _perfsuite(env, "show", mlperf["run_id"])
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "untimed_init_s" in shown.stdout and "time_to_target_s" in shown.stdout


# -- reference convergence points -------------------------------------------------------------------
def _synthetic(run_id: str, seed: int, batch: int, samples: float, params: dict | None = None) -> dict:
    p = {"layers": 12, "width": 768, "task": "reverse", "target_accuracy": 0.9, "lr": 6e-4}
    p.update(params or {}, global_batch=batch)
    return {
        "run_id": run_id,
        "status": "success",
        "verification": {"status": "passed"},
        "workload": {"name": "training.gpt", "params": p},
        "controls": {"seed": seed},
        "metrics": [{"name": "samples_to_target", "value": samples}],
    }


def test_reference_points_flag_a_run_at_a_larger_batch_that_converges_too_fast():
    seeds = [8000.0, 8800.0, 9600.0, 10400.0, 7200.0, 9600.0]
    points = convergence.build([_synthetic(f"r{i}", i, 16, s) for i, s in enumerate(seeds)])
    ((point,),) = [b["points"] for b in points["benchmarks"]]
    assert point["runs"] == 6 and point["global_batch"] == 16
    params = _synthetic("x", 1, 64, 0, {"lr": 1e-3})["workload"]["params"]  # a tuned lr: the same benchmark
    too_fast = convergence.verdict("training.gpt", params, [3200.0], points)
    assert too_fast["status"] == "failed" and too_fast["min_samples"] > 3200
    assert "largest reference batch, 16" in too_fast["basis"]
    fine = convergence.verdict("training.gpt", params, [19200.0, 17600.0, 22400.0, 17600.0, 30400.0], points)
    assert fine["status"] == "passed" and fine["samples_to_target"] == pytest.approx((17600 + 19200 + 22400) / 3)
    # five runs are held to a tighter floor than one (the one-sided t-test's standard error)
    assert fine["min_samples"] > too_fast["min_samples"]
    assert convergence.verdict("training.gpt", dict(params, global_batch=8), [100.0], points)["status"] == "unchecked"
    other = dict(params, layers=2)  # another model: another benchmark, no reference
    assert convergence.verdict("training.gpt", other, [100.0], points)["status"] == "unchecked"
    both = convergence.build(
        [_synthetic(f"a{i}", i, 16, 9000.0 + 100 * i) for i in range(3)]
        + [_synthetic(f"b{i}", i, 64, 21000.0 + 100 * i) for i in range(3)]
    )
    between = convergence.verdict("training.gpt", dict(params, global_batch=40), [15000.0], both)
    assert between["reference"]["mean_samples"] == pytest.approx(15100.0) and "interpolated" in between["basis"]


def test_a_run_below_its_reference_points_is_invalid_and_never_ranked(tmp_path):
    """A quick GPT run checked against a points file whose reference at its batch needed far more
    samples: its record fails the convergence check, so it is ``invalid`` and scores nothing."""
    env = _env(tmp_path)
    (plain,) = _records(env, "run", *QUICK_GPT, "--seed", "3")
    assert plain["status"] == "success" and plain["details"]["convergence"]["status"] == "unchecked"
    slow = [dict(plain, run_id=f"ref{i}", controls={"seed": i}) for i in range(3)]
    for i, r in enumerate(slow):
        r["metrics"] = [{"name": "samples_to_target", "value": 1e6 + 1000 * i}]
    points = tmp_path / "points.json"
    points.write_text(json.dumps(convergence.build(slow)))
    env[convergence.ENV_POINTS] = str(points)
    proc = _perfsuite(env, "run", *QUICK_GPT, "--seed", "3", "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]  # a run that did not verify fails the command
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "invalid" and record["verification"]["status"] == "failed"
    check = next(c for c in record["verification"]["checks"] if c["label"] == "convergence")
    assert check["passed"] is False and check["error"] < check["tolerance"]
    assert "fewer than" in record["error"] or "convergence" in record["error"]
    assert record["details"]["convergence"]["status"] == "failed"
    assert scoring.scores([record]) == []  # an invalid run is not a time to target at all
    assert len(scoring.scores([plain])) == 1
