"""The training family: deterministic learnable data, the fixed global batch across ranks,
schedules, MLPerf scoring of repeats, the MLLOG lines, the goodput split; and, through
the real CLI, both workloads reaching their quick targets on the CPU (one process, and
DDP over gloo at world size 2), a run that exhausts its step budget recorded as
``aborted`` and never ranked, and every MLLOG file passing mlperf_logging's compliance
checker (its common training rules plus the suite's rules file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfsuite.analysis import scoring  # noqa: E402
from perfsuite.engine import mllog  # noqa: E402
from perfsuite.inputs.tensors import RankBatches, batches  # noqa: E402
from perfsuite.workloads.training import MLPERF_RULES  # noqa: E402
from perfsuite.workloads.training._images import EVAL_STREAM, TRAIN_STREAM, ImageTask  # noqa: E402
from perfsuite.workloads.training._language import IGNORE, SEP, SequenceTask  # noqa: E402
from perfsuite.workloads.training._optim import lr_factor  # noqa: E402
from perfsuite.workloads.training._phases import PhaseClock  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


# -- data ---------------------------------------------------------------------------------
def test_image_task_is_deterministic_and_its_splits_differ():
    task = ImageTask(classes=4, size=8, noise=0.3, jitter=0.5, data_seed=3)
    x1, y1 = task.split(64, TRAIN_STREAM)
    x2, y2 = task.split(64, TRAIN_STREAM)
    xe, _ = task.split(64, EVAL_STREAM)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, xe)
    assert x1.shape == (64, 3, 8, 8) and set(y1.tolist()) == {0, 1, 2, 3}


def test_image_labels_are_in_the_pixels():
    """Without noise, a class's images share an orientation: the gradient direction of the
    grating separates the classes almost perfectly (random labels would give 1/classes)."""
    task = ImageTask(classes=4, size=16, noise=0.0, jitter=0.0, data_seed=0)
    x, y = task.split(400, TRAIN_STREAM)
    g = x.mean(1)
    gx, gy = g[:, :, 1:] - g[:, :, :-1], g[:, 1:, :] - g[:, :-1, :]
    # orientation of the structure tensor, doubled to fold the sign of the gradient
    sxx, syy = (gx[:, :-1, :] ** 2).sum((1, 2)), (gy[:, :, :-1] ** 2).sum((1, 2))
    sxy = (gx[:, :-1, :] * gy[:, :, :-1]).sum((1, 2))
    angle = 0.5 * torch.atan2(2 * sxy, sxx - syy)  # normal direction in (-pi/2, pi/2]
    predicted = torch.round((angle % torch.pi) / (torch.pi / 4)).long() % 4
    assert (predicted == y).float().mean() > 0.9


@pytest.mark.parametrize("task,expect", [("copy", [3, 1, 2]), ("reverse", [2, 1, 3]), ("sort", [1, 2, 3])])
def test_sequence_answers_follow_the_task(task, expect):
    t = SequenceTask(task, vocab=4, context=6, data_seed=0)
    x, y = t.split(200, 0)
    full = torch.cat([x, y[:, -1:]], dim=1)
    row = next(i for i in range(200) if full[i, :3].tolist() == [3, 1, 2])
    assert full[row, 3] == SEP and full[row, 4:].tolist() == expect
    assert (y[:, :3] == IGNORE).all() and (y[:, 3:] != IGNORE).all()


def test_symbols_narrow_the_language_not_the_vocabulary():
    wide = SequenceTask("reverse", vocab=50304, context=64, data_seed=0)
    narrow = SequenceTask("reverse", vocab=50304, context=64, data_seed=0, symbols=64)
    x, y = narrow.split(256, 0)
    question = x[:, :32]
    assert int(question.min()) == 1 and int(question.max()) == 64  # SEP is never a symbol
    assert (y[:, 32:] == question.flip(1)).all()  # the answer is still the reversal
    assert int(wide.split(256, 0)[0][:, :32].max()) > 64
    with pytest.raises(ValueError, match="symbols must be 0 or from 2 to vocab - 1"):
        SequenceTask("copy", vocab=16, context=8, data_seed=0, symbols=16).split(1, 0)


def test_ranks_share_a_fixed_global_batch():
    one = iter(RankBatches(100, 20, 0, 1, seed=7))
    halves = [iter(RankBatches(100, 20, r, 2, seed=7)) for r in (0, 1)]
    for _ in range(12):  # across an epoch boundary (5 steps per epoch)
        assert next(one) == next(halves[0]) + next(halves[1])


def test_pipelines_deliver_the_same_batches():
    x, y = torch.randn(64, 3, 4, 4), torch.arange(64)
    order = RankBatches(64, 16, 1, 2, seed=1)
    got = {}
    for kind in ("tensor", "dataloader"):
        it = batches(kind, x, y, order, torch.device("cpu"), 0)
        got[kind] = [next(it)[1].tolist() for _ in range(5)]
    assert got["tensor"] == got["dataloader"]


@dataclass(frozen=True)
class _Sched:
    schedule: str
    warmup_steps: int = 2
    max_steps: int = 12


def test_learning_rate_schedules_warm_up_then_decay_to_zero_at_the_budget():
    assert [lr_factor(_Sched("cosine"), s) for s in (0, 1)] == [0.5, 1.0]
    assert lr_factor(_Sched("cosine"), 12) == pytest.approx(0.0)
    assert lr_factor(_Sched("linear"), 7) == pytest.approx(0.5)
    assert lr_factor(_Sched("constant"), 11) == 1.0


def test_goodput_other_is_the_unnamed_rest_of_the_wall_time():
    clock = PhaseClock(cuda=False)
    clock.seconds.update(forward=1.0, backward=2.0, optimizer=0.5, evaluation=1.5)
    split = clock.split(10.0)
    assert split["seconds"]["other"] == pytest.approx(5.0)
    assert split["goodput"] == pytest.approx(0.35)
    assert sum(split["fraction"].values()) == pytest.approx(1.0)


class _FakeEvent:
    """A CUDA timing event's stand-in: counts how many were made and how often each was recorded."""

    made = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        type(self).made += 1
        self.records = 0

    def record(self) -> None:
        self.records += 1

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "_FakeEvent") -> float:
        return 2.0  # ms


def test_timed_steps_record_events_made_before_the_timing_and_reuse_them_after_each_read_back(monkeypatch):
    """On a GPU the phase clock makes a block's events up front (``reserve``, each recorded once so
    that CUDA makes it) and hands them back after each read-back: a timed step makes none."""
    import torch

    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("S", (), {"synchronize": lambda self: None})())
    _FakeEvent.made = 0
    clock = PhaseClock(cuda=True)
    clock.reserve(4)
    assert _FakeEvent.made == 24  # 4 steps x 3 compute phases x a start and an end
    for block in range(3):
        for _ in range(4):
            for phase in ("forward", "backward", "optimizer"):
                with clock.compute(phase):
                    pass
        clock.drain()
        clock.reserve(4)  # nothing more to make: the pool holds a block's events again
        assert _FakeEvent.made == 24, block
    assert clock.seconds["forward"] == pytest.approx(3 * 4 * 0.002)
    clock.reserve(5)  # a longer block makes only the difference
    assert _FakeEvent.made == 30
    for _ in range(5):
        with clock.compute("forward"):
            pass
    clock.reserve(5)  # events not yet read back are not free: the next block's are made
    assert _FakeEvent.made == 40


# -- scoring ------------------------------------------------------------------------------
def _rec(seed, status, t=None, world=1, key="k"):
    """A time-to-target record; ``key`` is a parameter, so records of different ``key`` differ in key."""
    from support.factories import make_metric, make_record

    metrics = [make_metric("target", "time_to_target_s", "s", [t], higher_is_better=False)] if t is not None else []
    return make_record(
        workload_name="training.gpt",
        params={"task": key},
        status=status,
        metrics=metrics,
        run_id=f"{seed:032x}",
        controls={"seed": seed},
        launch={"world_size": world, "nproc_per_node": world},
    )


def test_olympic_mean_drops_fastest_and_slowest_and_an_aborted_run_counts_as_slowest():
    (s,) = scoring.scores(
        [
            _rec(1, "success", 10),
            _rec(2, "success", 30),
            _rec(3, "success", 20),
            _rec(4, "success", 12),
            _rec(5, "aborted"),
        ]
    )
    assert s["olympic_mean_s"] == pytest.approx((12 + 20 + 30) / 3)
    assert [r["seed"] for r in s["runs"]] == [1, 2, 3, 4, 5]


def test_no_score_with_too_few_runs_or_two_runs_short_of_the_target():
    few, two_missed, other_world = scoring.scores(
        [_rec(1, "success", 1, key="a"), _rec(2, "success", 1, key="a")]
        + [_rec(i, "aborted", key="b") for i in (3, 4)]
        + [_rec(5, "success", 1, key="b")]
        + [_rec(6, "success", 1, key="a", world=2)]
    )
    assert few["olympic_mean_s"] is None and "at least 3" in few["reason"]
    assert two_missed["olympic_mean_s"] is None and "2 of 3" in two_missed["reason"]
    assert other_world["world_size"] == 2 and len(other_world["runs"]) == 1


def test_mllog_puts_the_submission_keys_before_the_workloads_own_events():
    events = [{"time_ms": 5.0, "event_type": "INTERVAL_START", "key": "init_start", "value": None, "metadata": {}}]
    record = {
        "workload": {"name": "training.gpt", "division": "open"},
        "environment": {"measured_device": {"name": "cpu"}},
        "details": {"mllog": events},
    }
    keys = [json.loads(line.split(" ", 1)[1])["key"] for line in mllog.lines(record)]
    assert keys == [
        "submission_benchmark",
        "submission_org",
        "submission_division",
        "submission_status",
        "submission_platform",
        "init_start",
    ]


# -- end to end through the CLI -------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Quick runs of both workloads, a DDP run and a repeat that exhausts its budget."""
    tmp = tmp_path_factory.mktemp("training")
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp / 'registry.db'}",
        PERFSUITE_RECORDS=str(tmp / "records"),
        XDG_DATA_HOME=str(tmp / "data"),
        PERFSUITE_PLUGINS="",
        COLUMNS="200",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )

    def run(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "perfsuite", "run", *args, "--device", "cpu", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc, json.loads(proc.stdout)

    _, single = run("training.resnet", "training.gpt", "--quick", "--seed", "11")
    _, ddp = run("training.gpt", "--quick", "--nproc-per-node", "2", "--seed", "12")
    text = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite",
            "run",
            "training.resnet",
            "--quick",
            "-p",
            "max_steps=2",
            "-p",
            "eval_every=1",
            "--repeat",
            "3",
            "--seed",
            "20",
            "--device",
            "cpu",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert text.returncode == 0, text.stderr[-3000:]
    return {"env": env, "records": tmp / "records", "single": single, "ddp": ddp, "aborted_out": text.stdout}


def _metric(record, name):
    return next(m for m in record["metrics"] if m["name"] == name)


def test_both_workloads_reach_their_quick_targets_on_the_cpu(trained):
    for record in trained["single"]:
        assert record["status"] == "success", record["error"]
        assert record["verification"]["status"] == "passed"
        p = record["workload"]["params"]
        assert _metric(record, "eval_accuracy")["value"] >= p["target_accuracy"]
        assert _metric(record, "time_to_target_s")["value"] > 0
        assert (
            _metric(record, "samples_to_target")["value"]
            == _metric(record, "steps_to_target")["value"] * p["global_batch"]
        )
        tflops = _metric(record, "tflops")
        assert tflops["value"] > 0 and tflops["roofline"]["resource"] == "matmul.fp32"
        goodput = record["details"]["goodput"]
        assert 0 < goodput["goodput"] <= 1 and goodput["seconds"]["evaluation"] > 0
        assert record["details"]["training"]["flops_per_sample"] > 0
    gpt = next(r for r in trained["single"] if r["workload"]["name"] == "training.gpt")
    assert _metric(gpt, "tokens_per_s")["value"] == pytest.approx(_metric(gpt, "samples_per_s")["value"] * 16)


def test_ddp_with_gloo_reaches_the_same_target_on_a_fixed_global_batch(trained):
    (record,) = trained["ddp"]
    assert record["status"] == "success", record["error"]
    assert record["launch"]["world_size"] == 2 and record["launch"]["backend"] == "gloo"
    t = record["details"]["training"]
    assert (t["world_size"], t["global_batch"], t["per_rank_batch"]) == (2, 64, 32)
    assert _metric(record, "eval_accuracy")["value"] >= record["workload"]["params"]["target_accuracy"]
    assert _metric(record, "samples_per_s")["per_rank"] is not None


def test_a_run_out_of_budget_is_aborted_and_never_ranked(trained):
    from perfsuite.registry import open_registry

    records = [json.loads(p.read_text()) for p in trained["records"].glob("*.json")]
    aborted = [r for r in records if r["status"] == "aborted"]
    assert len(aborted) == 3 and len({r["controls"]["seed"] for r in aborted}) == 3
    for r in aborted:
        assert "step budget" in r["error"] and r["verification"]["status"] != "passed"
        assert _metric(r, "steps_run")["value"] == 2
    assert "did not reach the target" in trained["aborted_out"]
    with open_registry(trained["env"]["PERFSUITE_DB"]) as reg:
        assert (
            reg.latest_passed("training.resnet", aborted[0]["environment"]["measured_device"]["key"])["status"]
            == "success"
        )


def test_every_mllog_file_passes_mlperfs_compliance_checker(trained):
    pytest.importorskip("mlperf_logging")
    from perfsuite.engine.mllog_compliance import check

    files = sorted(trained["records"].glob("*.mllog"))
    assert len(files) == 6
    for f in files:
        assert check(f, [MLPERF_RULES]) == [], f.read_text()[:2000]


def test_the_checker_rejects_a_log_whose_status_contradicts_its_evaluations(trained, tmp_path):
    pytest.importorskip("mlperf_logging")
    from perfsuite.engine.mllog_compliance import check

    src = next(f for f in trained["records"].glob("*.mllog") if '"status": "aborted"' in f.read_text())
    bad = tmp_path / "bad.mllog"
    bad.write_text(src.read_text().replace('"status": "aborted"', '"status": "success"'))
    assert any("reached" in m for m in check(bad, [MLPERF_RULES]))


# -- the bare loop beside the workload ------------------------------------------------------
def test_a_crosscheck_takes_turns_with_the_bare_loop_and_records_the_instrumentations_cost(tmp_path):
    """``perfsuite crosscheck training.gpt``: perfsuite/crosscheck/training_reference.py trains the same model
    (same parameter count) in a served subprocess; after the run, its blocks and the suite's take
    turns, and the ratio of throughputs is stored as the instrumentation's cost. The run's own
    figures and its goodput split are untouched by it."""
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'r.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "records"),
        PERFSUITE_PLUGINS="",
        OMP_NUM_THREADS="1",  # two torch processes on a shared CPU: no spinning thread pools
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    command = ["crosscheck", "training.gpt", "--quick", "--device", "cpu", "--rounds", "2", "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *command, "-p", "max_steps=20", "-p", "eval_every=10"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = json.loads(proc.stdout)
    assert record["status"] in ("success", "aborted"), record["error"]
    cc = record["details"]["crosscheck"]["train"]
    assert cc["status"] == "measured", cc.get("reason")
    assert cc["reference"]["parameters"] == record["details"]["training"]["model"]["parameters"]
    assert [r["order"] for r in cc["rounds"]] == ["suite first", "reference first"]
    assert cc["rounds"][0]["suite_samples_per_s"] == _metric(record, "samples_per_s")["value"]  # the run's own
    assert cc["rate_ratio"] == pytest.approx(cc["suite_samples_per_s"] / cc["reference_samples_per_s"])
    assert cc["instrumentation_cost"] == pytest.approx(1 - cc["rate_ratio"])
    assert cc["agrees"] == (abs(cc["rate_ratio"] - 1) <= 0.03)
    # a turn times at least one evaluation interval, more where that lasts under 3 s, after 3 warm steps
    assert cc["steps_per_block"] >= 10 and cc["warm_steps_per_block"] == 3
    goodput = record["details"]["goodput"]
    assert sum(goodput["seconds"].values()) == pytest.approx(goodput["wall_s"] + goodput["overlap_s"])
    assert (tmp_path / "records" / "artifacts" / record["run_id"] / "bare-loop.log").is_file()


@pytest.mark.gpu
@pytest.mark.perf
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_a_compiled_gpt_runs_beside_its_bare_loop_and_prints_the_ratio(tmp_path):
    """A small GPT (bf16, compiled, fused AdamW) and its bare loop on one GPU: the cross-check
    measures (same model, fused optimizer on both sides) and prints the throughput ratio; the
    3% bar is the plan's (gpu-training) to show at GPT-2 124M, not this test's to assert."""
    env = dict(
        os.environ,
        PERFSUITE_DB=f"sqlite:///{tmp_path / 'r.db'}",
        PERFSUITE_RECORDS=str(tmp_path / "records"),
        PERFSUITE_PLUGINS="",
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    params = ("layers=4", "width=256", "heads=4", "context=256", "vocab=4096", "global_batch=16")
    params += ("precision=bf16", "compile=true", "max_steps=80", "eval_every=20", "eval_samples=64")
    command = ["crosscheck", "training.gpt", "--device", "cuda", "--rounds", "2", "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *command, *(x for p in params for x in ("-p", p))],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = json.loads(proc.stdout)
    cc = record["details"]["crosscheck"]["train"]
    assert cc["status"] == "measured", cc.get("reason")
    assert (
        record["details"]["training"]["optimizer"] == "adamw (fused)"
        and cc["reference"]["optimizer"] == "adamw (fused)"
    )
    print(
        f"\nsmall GPT on the GPU: suite {cc['suite_samples_per_s']:,.0f} vs bare loop "
        f"{cc['reference_samples_per_s']:,.0f} sequences/s, ratio {cc['rate_ratio']:.3f} ({cc['note']})"
    )


def test_a_bare_loop_that_cannot_run_is_recorded_with_its_reason(tmp_path):
    from perfsuite.crosscheck import take_turns
    from perfsuite.crosscheck.training import BareLoop, BareLoopCheck

    missing = BareLoopCheck(BareLoop(["gpt"], tmp_path / "a.log", script=tmp_path / "nowhere.py"), take_turns)
    out = missing.compare(1, [1.0], lambda steps: 1.0, 1, 1, 2)
    assert out["status"] == "failed" and "nowhere.py is not there" in out["reason"]
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nprint('no such model: gpt', file=sys.stderr)\nsys.exit(3)\n")
    check = BareLoopCheck(BareLoop(["gpt"], tmp_path / "b.log", script=broken), take_turns)
    out = check.compare(1, [1.0], lambda steps: 1.0, 1, 1, 2)
    assert out["status"] == "failed" and out["reason"] == "the bare loop exited with code 3: no such model: gpt"
    check.close()  # closing twice is harmless


# -- models -------------------------------------------------------------------------------
def test_resnet_depth_and_width_shape_the_torchvision_model():
    pytest.importorskip("torchvision")
    from perfsuite.engine import params
    from perfsuite.workloads.training.resnet import ResNetTraining

    for depth, blocks in ((10, 4), (50, 16)):
        w = ResNetTraining(
            params.resolve(ResNetTraining, {"depth": depth, "width": 8, "image_size": 16, "classes": 5}, quick=False)
        )
        model = w.build_model()
        assert sum(len(getattr(model, f"layer{i}")) for i in range(1, 5)) == blocks
        assert model.conv1.out_channels == 8 and model.layer4[0].conv1.in_channels in (8 * 4, 8 * 4 * 4)
        assert model(torch.randn(2, 3, 16, 16)).shape == (2, 5)


def test_llama_config_builds_and_its_flops_are_counted():
    pytest.importorskip("transformers")
    from perfsuite.engine import params
    from perfsuite.workloads.training.gpt import GPTTraining

    w = GPTTraining(
        params.resolve(
            GPTTraining, {"arch": "llama", "layers": 1, "width": 32, "heads": 2, "context": 8, "vocab": 8}, quick=False
        )
    )
    model = w.build_model()
    assert type(model).__name__ == "LlamaForCausalLM"
    flops = w._count_flops(model, torch.device("cpu"), lambda: torch.autocast("cpu", enabled=False))
    # at least the matmuls of one forward and backward of the block's projections (6 x params x tokens)
    block = sum(t.numel() for n, t in model.named_parameters() if "layers.0" in n and t.dim() == 2)
    assert flops >= 6 * block * 8
