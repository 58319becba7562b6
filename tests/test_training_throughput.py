"""Training runs whose goal is throughput (``goal=throughput``): through the real CLI on the CPU,
a run trains for its whole budget (reaching the target on the way does not stop it) and ends
``success`` with its throughput as its headline, no time to target, and its training checked
finite; the goal is in the comparability key; MLPerf scoring and the leaderboard's
time-to-target chart never take it for a time to target, the scaling view draws it, and
``perfsuite submit`` files it (one run a configuration is a complete one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO, cli_env, run_cli

pytest.importorskip("torch")
pytest.importorskip("transformers")

from perfsuite.analysis import scoring
from perfsuite.schemas.comparability import comparability_key, flat_settings, key_settings
from perfsuite.schemas.headline import headline_rows

BUDGET_STEPS = 60  # the quick GPT passes its 0.9 target in 20 to 30 steps: the budget is what stops it
QUICK = ("training.gpt", "--quick", "-p", f"max_steps={BUDGET_STEPS}", "--device", "cpu", "--json")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One process and two gloo ranks with goal=throughput, and the same run with goal=target."""
    folder = tmp_path_factory.mktemp("throughput")
    env = dict(cli_env(folder), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")

    def run(*args: str) -> dict:
        proc = run_cli(env, "run", *QUICK, *args, timeout=400, check=True)
        (record,) = json.loads(proc.stdout)
        return record

    return {
        "env": env,
        "folder": folder,
        "one": run("-p", "goal=throughput", "--seed", "31"),
        "two": run("-p", "goal=throughput", "--nproc-per-node", "2", "--seed", "32"),
        "target": run("--seed", "33"),
    }


def _metrics(record: dict) -> dict[str, dict]:
    return {m["name"]: m for m in record["metrics"]}


def test_a_throughput_run_trains_its_budget_and_succeeds_with_its_throughput_as_headline(runs):
    for record in (runs["one"], runs["two"]):
        assert record["status"] == "success", record["error"]
        assert record["verification"]["status"] == "passed"
        (check,) = record["verification"]["checks"]
        assert check["label"] == "finite training" and check["passed"]
        m = _metrics(record)
        assert m["steps_run"]["value"] == BUDGET_STEPS  # the budget, though the target was passed on the way
        assert m["samples_run"]["value"] == BUDGET_STEPS * record["workload"]["params"]["global_batch"]
        target = record["workload"]["params"]["target_accuracy"]
        passed_on_the_way = [e["step"] for e in record["details"]["evals"][:-1] if e["accuracy"] >= target]
        assert passed_on_the_way, record["details"]["evals"]  # and yet it went on
        assert m["run_time_s"]["value"] > 0 and m["samples_per_s"]["value"] > 0
        assert m["tokens_per_s"]["value"] == pytest.approx(m["samples_per_s"]["value"] * 16)
        assert not {"time_to_target_s", "steps_to_target", "samples_to_target"} & set(m)
        training = record["details"]["training"]
        assert training["goal"] == "throughput" and training["steps"] == BUDGET_STEPS
        assert "convergence" not in record["details"]  # no reference convergence points: no target claimed
        rows = headline_rows(record)
        assert [(r["case"], r["metric"], r["unit"]) for r in rows] == [("throughput", "tokens_per_s", "tokens/s")]
    assert runs["two"]["launch"]["world_size"] == 2


def test_a_time_to_target_run_of_the_same_settings_still_stops_at_its_target(runs):
    target = runs["target"]
    assert target["status"] == "success", target["error"]
    m = _metrics(target)
    assert m["steps_to_target"]["value"] < BUDGET_STEPS and target["details"]["training"]["goal"] == "target"
    assert [r["metric"] for r in headline_rows(target)] == ["time_to_target_s"]
    assert [c["label"] for c in target["verification"]["checks"]] == ["target"]


def test_the_goal_is_in_the_comparability_key_and_nothing_else_differs(runs):
    one, target = runs["one"], runs["target"]
    assert comparability_key(one) != comparability_key(target)
    a, b = flat_settings(key_settings(one)), flat_settings(key_settings(target))
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"param.goal"}


def test_a_new_time_to_target_run_meets_the_reference_points_filed_before_the_goal_existed():
    """The shipped reference convergence points were built from records without ``goal`` or
    ``save_to``: a run of the same benchmark now (both set) still finds them."""
    from perfsuite.convergence import benchmark_id, load
    from perfsuite.workloads.training._base import convergence_params
    from perfsuite.workloads.training.gpt import GPTParams

    filed = sorted((REPO / "submissions").glob("*/results/*/training.gpt/*.json"))
    params = [json.loads(f.read_text())["workload"]["params"] for f in filed]
    # the tree also holds runs filed since (throughput runs, with goal and save_to): not these
    before = [old for old in params if "goal" not in old and "save_to" not in old]
    assert before
    shipped = {b["id"] for b in load()["benchmarks"]}
    for old in before:
        now = convergence_params(GPTParams(**old))
        assert now["goal"] == "target"
        assert benchmark_id("training.gpt", now) == benchmark_id("training.gpt", old) in shipped


def test_scoring_never_counts_a_throughput_run_as_a_time_to_target(runs):
    found = scoring.scores([runs["one"], runs["two"], runs["target"]])
    assert [[r["run_id"] for r in s["runs"]] for s in found] == [[runs["target"]["run_id"]]]
    aborted = dict(runs["one"], status="aborted")  # whatever its status, a throughput run is never scored
    assert scoring.scores([aborted]) == []


def test_the_leaderboard_draws_throughput_runs_in_the_scaling_view_not_as_times_to_target(runs):
    from perfsuite.publish.leaderboard.data import load
    from perfsuite.publish.leaderboard.scaling import scaling_charts
    from perfsuite.publish.leaderboard.site import _family_charts
    from perfsuite.registry import open_registry

    with open_registry(runs["env"]["PERFSUITE_DB"]) as reg, reg.session() as s:
        (board,), _ = load(s, "training.gpt")
        charts = scaling_charts(s, board)
        family = _family_charts(s, board)
    throughput = [c for c in board.configs if c.settings["params"]["goal"] == "throughput"]
    (target,) = [c for c in board.configs if c.settings["params"]["goal"] == "target"]
    assert sorted(int(c.shown["world.world_size"]) for c in throughput) == [1, 2]
    for config in throughput:
        assert {case: h.metric for case, h in config.heads.items()} == {"throughput": "tokens_per_s"}
        assert config.id not in family  # no time-to-target chart of a throughput figure
        chart = charts[config.id]
        assert chart["metric"] == "tokens_per_s"
        (series,) = chart["series"]
        assert series["kind"] == "strong" and [p[0] for p in series["points"]] == [1, 2]
        assert series["points"][0][2] == 1.0  # efficiency against one GPU
    assert family[target.id]["kind"] == "time_to_target" and target.id not in charts


def test_submit_files_throughput_runs_and_the_tree_checks_complete_with_one_run_each(runs, tmp_path):
    root = tmp_path / "tree"
    ids = [runs["one"]["run_id"], runs["two"]["run_id"]]
    out = run_cli(runs["env"], "submit", "--org", "lab", "--system", "cpu-box", "--root", str(root), *ids, check=True)
    assert "ok: " in out.stdout
    for run_id in ids:
        filed = root / "lab" / "results" / "cpu-box" / "training.gpt" / f"{run_id}.json"
        assert json.loads(filed.read_text())["details"]["training"]["goal"] == "throughput"
        assert filed.with_suffix(".mllog").is_file()
    checked = run_cli(runs["env"], "check", str(root))
    assert checked.returncode == 0, checked.stdout + checked.stderr  # a time-to-target key would need 5 runs


def test_the_mllog_of_a_throughput_run_passes_the_compliance_rules_and_a_false_status_does_not(runs, tmp_path):
    pytest.importorskip("mlperf_logging")
    from perfsuite.engine.mllog_compliance import check
    from perfsuite.workloads.training import MLPERF_RULES

    source = Path(runs["env"]["PERFSUITE_RECORDS"]) / f"{runs['one']['run_id']}.mllog"
    text = source.read_text()
    assert '"key": "run_goal", "value": "throughput"' in text and '"status": "success"' in text
    assert check(source, [MLPERF_RULES]) == []
    # below the target at every evaluation, a throughput run is still a success at its budget's end ...
    missed = tmp_path / "missed.mllog"
    missed.write_text(re.sub(r'("key": "eval_accuracy", "value": )[0-9.e-]+', r"\g<1>0.5", text))
    assert check(missed, [MLPERF_RULES]) == []
    # ... but a time-to-target run that says success there is not
    claimed = tmp_path / "claimed.mllog"
    claimed.write_text(missed.read_text().replace('"value": "throughput"', '"value": "target"'))
    assert check(claimed, [MLPERF_RULES]) != []


def test_a_throughput_run_beside_the_bare_loop_stores_its_ratio(tmp_path):
    """``perfsuite crosscheck`` of a throughput run: the bare loop's throughput and the ratio are
    in its record as in a time-to-target run's, and the run is still its budget's success."""
    env = dict(cli_env(tmp_path), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    args = ("-p", "goal=throughput", "-p", "max_steps=20", "-p", "eval_every=10", "--rounds", "2", "--json")
    proc = run_cli(env, "crosscheck", "training.gpt", "--quick", "--device", "cpu", *args, timeout=400, check=True)
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "success" and record["verification"]["status"] == "passed", record["error"]
    assert _metrics(record)["steps_run"]["value"] == 20
    cc = record["details"]["crosscheck"]["train"]
    assert cc["status"] == "measured", cc.get("reason")
    assert cc["rounds"][0]["suite_samples_per_s"] == _metrics(record)["samples_per_s"]["value"]  # the run's own
    assert cc["rate_ratio"] == pytest.approx(cc["suite_samples_per_s"] / cc["reference_samples_per_s"])
