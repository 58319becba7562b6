"""The comparability key from a record's own content (perfsuite.schemas.comparability), the regime
from NVML readings (perfsuite.schemas.regime), the headline rows of every family
(perfsuite.schemas.headline), and the registry recomputing keys on store and in migration 0004."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.factories import gemm_metrics, make_record, sign

from perfsuite.registry import open_registry
from perfsuite.schemas.comparability import comparability_key, is_self_test, iteration_policy, key_settings
from perfsuite.schemas.headline import headline_rows
from perfsuite.schemas.regime import case_regime, regime

RESULTS = Path(__file__).resolve().parent.parent / "submissions/perfsuite/results"


def _submitted(system: str, workload: str, prefix: str) -> dict:
    (path,) = (RESULTS / system / workload).glob(f"{prefix}*.json")
    return json.loads(path.read_text())


def _summary(**kw) -> dict:
    base = {"samples": 100, "duration_s": 2.0, "power_capped": False, "thermal_slowdown": False}
    return base | {"sm_clock_mhz_median": 1980.0, "sm_clock_mhz_max": 1980.0, "clock_events": []} | kw


def _gpu_record(**throttle) -> dict:
    return make_record(device="cuda", details={"throttle": throttle})


# -- regime ---------------------------------------------------------------------------------
def test_the_regime_follows_the_clocks_nvml_saw_while_timing():
    capped = _summary(power_capped=True, sm_clock_mhz_median=1455.0, sm_clock_mhz_min=1305.0)
    blip = _summary(power_capped=True, sm_clock_mhz_median=1875.0, duration_s=0.016, samples=2)  # one sampled event
    assert regime(_gpu_record(bf16=capped)) == "power-capped"
    assert regime(_gpu_record(bf16=_summary(duration_s=1.0))) == "sustained"
    assert regime(_gpu_record(bf16=_summary(duration_s=0.03, samples=3))) == "burst"
    assert regime(_gpu_record(bf16=blip)) == "burst"
    assert regime(_gpu_record(bf16=_summary(thermal_slowdown=True, sm_clock_mhz_median=1200.0))) == "power-capped"
    assert regime(make_record()) == "unobserved"  # a CPU run: nothing sampled
    mixed = _gpu_record(bf16=_summary(duration_s=0.03), fp8=capped)
    assert regime(mixed) == "power-capped" and case_regime(mixed, "bf16") == "burst"
    assert case_regime(_gpu_record(run=capped), "in-place") == "power-capped"  # a driver's run-wide summary


def test_submitted_gemm_runs_of_each_setting_carry_their_own_key():
    """The four submitted H200 GEMM runs (20 calls, 2 s power-capped, and each again with L2
    flushed) all carried one stored key; recomputed, each has its own."""
    runs = [_submitted("h200-x1", "kernels.gemm", r) for r in ("34a93c24", "65f60dc3", "8389d613", "2e33e1b0")]
    assert {r["comparability_key"][:12] for r in runs} == {"2539c71a6c67"}
    assert [regime(r) for r in runs] == ["burst", "power-capped", "burst", "power-capped"]
    assert len({comparability_key(r) for r in runs}) == 4
    assert [key_settings(r)["timing"]["l2_flush"] for r in runs] == [False, False, True, True]


# -- key settings -----------------------------------------------------------------------------
def test_iteration_policy_is_count_or_min_time_by_value_class():
    assert iteration_policy({"iterations": 20}) == iteration_policy({"iterations": 16}) == "count ~16"
    assert iteration_policy({"iterations": 50}) == "count ~64"
    one, two = ({"iterations": None, "min_time_s": s, "max_iterations": 10000} for s in (1.0, 2.0))
    assert iteration_policy(one) == "min-time ~1 s, <=10000 calls" and iteration_policy(two).startswith("min-time ~2 s")
    assert iteration_policy({"iterations": None, "min_time_s": None}) is None  # a driver that times its own way


def test_the_key_holds_every_setting_that_moves_the_figure_and_nothing_else():
    base = make_record(params={"m": 1024})
    same = make_record(params={"m": 1024}, controls={"seed": 99, "repeat_index": 3, "warmup": 7})
    assert comparability_key(base) == comparability_key(same)  # seeds, repeats, warm-up: not in the key
    for changed in (
        make_record(params={"m": 2048}),
        make_record(params={"m": 1024}, version=2),
        make_record(params={"m": 1024}, controls={"l2_flush": True}),
        make_record(params={"m": 1024}, controls={"cuda_graph": True}),
        make_record(params={"m": 1024}, controls={"iterations": None, "min_time_s": 1.0}),
        make_record(params={"m": 1024}, controls={"deterministic": True}),
        make_record(params={"m": 1024}, launch={"world_size": 2, "nproc_per_node": 2}),
        make_record(params={"m": 1024}, device="cuda"),
    ):
        assert comparability_key(changed) != comparability_key(base)


def test_harness_parameters_stay_out_of_the_key_and_mark_a_self_test():
    declared = {"inject": "none", "inject_rank": 0}
    real = make_record(params={"m": 1, "inject": "none", "inject_rank": 0}, workload={"harness_params": declared})
    other_rank = make_record(params={"m": 1, "inject": "none", "inject_rank": 1}, workload={"harness_params": declared})
    planted = make_record(params={"m": 1, "inject": "wrong_element", "inject_rank": 0})  # an older record
    assert "inject" not in key_settings(real)["params"] and not is_self_test(real)
    assert is_self_test(other_rank) and comparability_key(other_rank) != comparability_key(real)
    assert is_self_test(planted) and key_settings(planted)["self_test"] == {"inject": "wrong_element"}


def test_an_output_parameter_stays_out_of_the_key_and_ranks():
    """A run that saves its trained model shares its key with the filed runs that did not."""
    filed = _submitted("h200-x4", "training.gpt", "192096ba")
    saving = json.loads(json.dumps(filed))
    saving["workload"]["params"]["save_to"] = "/somewhere/model"
    saving["workload"]["output_params"] = ["save_to"]
    assert comparability_key(saving) == comparability_key(filed) and not is_self_test(saving)
    undeclared = json.loads(json.dumps(saving))
    del undeclared["workload"]["output_params"]
    assert comparability_key(undeclared) != comparability_key(filed)  # only a declared one stays out


def test_a_workload_declares_its_output_parameters_in_its_records():
    from perfsuite.workload import harness_params, output_params
    from perfsuite.workloads.training.gpt import GPTTraining

    assert output_params(GPTTraining) == ["save_to"] and "save_to" not in harness_params(GPTTraining)


def test_versions_that_measure_the_same_thing_share_a_key():
    old = make_record(params={"m": 1})
    new = make_record(params={"m": 1}, version=2, workload={"comparable_since": 1})
    assert comparability_key(old) == comparability_key(new)
    assert comparability_key(make_record(params={"m": 1}, version=2)) != comparability_key(old)


# -- the registry never trusts a stored key -------------------------------------------------
def test_store_recomputes_a_planted_key_and_keeps_its_settings_beside_it(tmp_path):
    planted = "ab" * 32
    records = []
    for m in (1024, 2048, 4096, 8192):  # four parameter sets claiming one key
        r = make_record(params={"m": m}, metrics=gemm_metrics())
        r["comparability_key"] = planted
        records.append(sign(r))
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store_all(records)
        from sqlalchemy import select

        from perfsuite.registry.models import Run

        with reg.session() as s:
            rows = s.execute(select(Run.comparability_key, Run.key_settings, Run.regime)).all()
    assert len({row.comparability_key for row in rows}) == 4 and planted not in {row.comparability_key for row in rows}
    assert sorted(row.key_settings["params"]["m"] for row in rows) == [1024, 2048, 4096, 8192]
    assert {row.regime for row in rows} == {"unobserved"}
    assert {row.comparability_key for row in rows} == {comparability_key(r) for r in records}


def test_migration_0004_recomputes_the_keys_of_stored_runs(tmp_path):
    from alembic import command
    from sqlalchemy import text

    from perfsuite.registry.db import alembic_config

    url = f"sqlite:///{tmp_path / 'r.db'}"
    record = _submitted("h200-x1", "kernels.gemm", "65f60dc3")
    with open_registry(url) as reg:
        reg.store(record)
        with reg.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0003")
            connection.execute(text("UPDATE runs SET comparability_key = :k"), {"k": record["comparability_key"]})
    with open_registry(url) as reg, reg.engine.connect() as connection:  # opening migrates to head
        key, settings, kind = connection.execute(text("SELECT comparability_key, key_settings, regime FROM runs")).one()
    assert key == comparability_key(record) != record["comparability_key"]
    assert kind == "power-capped" and json.loads(settings)["timing"]["l2_flush"] is False


# -- headlines --------------------------------------------------------------------------------
def test_inference_headlines_are_loadgen_metrics_per_scenario_never_accuracy():
    (path,) = sorted((RESULTS / "h200-x1" / "inference.generate").glob("8157a68a*.json"))
    rows = headline_rows(json.loads(path.read_text()))
    assert [(r["case"], r["metric"], r["valid"]) for r in rows] == [
        ("SingleStream", "latency_p90_ms", True),
        ("Server", "tokens_per_s", True),
        ("Offline", "tokens_per_s", True),
    ]
    assert {b["metric"] for b in rows[0]["beside"]} >= {"ttft_p90_ms", "tpot_p90_ms"}
    assert not any("accuracy" in r["metric"] for r in rows)


def test_a_collective_headlines_busbw_at_every_size_of_its_sweep():
    record = _submitted("h200-x2", "collectives.all_reduce", "a57a566b")
    rows = headline_rows(record)
    sizes = [r["size_bytes"] for r in rows]
    assert sizes == sorted(sizes) and sizes[0] == 8 and sizes[-1] == 512 * 1024**2 and len(rows) == 27
    assert {(r["case"], r["metric"], r["unit"], r["valid"]) for r in rows} == {("in-place", "busbw_gbps", "GB/s", True)}
    assert rows[-1]["value"] == pytest.approx(record["details"]["peak"]["ip"]["busbw_gbps"])
    assert [b["metric"] for b in rows[-1]["beside"]] == ["time_us", "algbw_gbps"]


def test_kernels_and_training_headlines():
    gemm = headline_rows(_submitted("h200-x1", "kernels.gemm", "34a93c24"))
    assert [(r["case"], r["metric"]) for r in gemm] == [("bf16", "tflops"), ("fp8", "tflops")]
    assert gemm[0]["ci95"][0] <= gemm[0]["value"] <= gemm[0]["ci95"][1]
    training = make_record(
        workload_name="training.gpt",
        category="training",
        metrics=[
            *gemm_metrics(case="train"),
            {**gemm_metrics(case="target")[0], "name": "eval_accuracy", "unit": "fraction"},
            {**gemm_metrics(case="target")[0], "name": "time_to_target_s", "unit": "s"},
        ],
    )
    assert [(r["case"], r["metric"]) for r in headline_rows(training)] == [("target", "time_to_target_s")]


def test_built_in_declarations_match_the_family_headlines_older_records_get():
    from perfsuite.plugins import get_host
    from perfsuite.schemas.headline import LOADGEN, LOADGEN_LLM, SWEEP, TIME_TO_TARGET
    from perfsuite.workload import headline_declaration

    host = get_host()
    assert headline_declaration(host.workloads["inference.classifier"].cls) == LOADGEN
    assert headline_declaration(host.workloads["inference.generate"].cls) == LOADGEN_LLM
    assert headline_declaration(host.workloads["collectives.all_reduce"].cls) == SWEEP
    assert headline_declaration(host.workloads["training.gpt"].cls) == TIME_TO_TARGET
