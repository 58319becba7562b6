"""Stored values within physics: records that follow the schema but claim what no measurement
can produce (1e300 TFLOP/s, 1e308 GB/s, negative durations, a run that finished 8,000 years
before it started) are refused by ``import``, by the registry's store and by ``check``, each
with one line; the repository's own records all pass; and every command renders a registry
whose stored values are extreme (written there by an older perfsuite) without crashing, the
leaderboard included."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from support.factories import gemm_metrics, make_metric, make_record
from support.safety_support import extreme_records

from perfsuite.registry import RecordInvalid, open_registry
from perfsuite.schemas import physics
from tests.conftest import REPO, run_cli


@pytest.mark.parametrize("what", list(extreme_records()))
def test_the_store_refuses_an_impossible_record(perfsuite_env, what):
    record = extreme_records()[what]
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as registry:
        with pytest.raises(RecordInvalid, match=r"^impossible figure: "):
            registry.store(record)
        assert registry.results() == []


def test_import_refuses_each_extreme_record_in_one_line_and_the_leaderboard_builds(perfsuite_env, tmp_path):
    files = []
    for i, record in enumerate(extreme_records().values()):
        path = tmp_path / f"extreme{i}.json"
        path.write_text(json.dumps(record))
        files.append(path)
    proc = run_cli(perfsuite_env, "import", *map(str, files))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(files)
    for path, line in zip(files, lines):
        assert line.startswith(f"Error: {path}: impossible figure: "), line
    assert "is beyond 10x the H200 SXM datasheet" in lines[0] and "TFLOP/s" in lines[0]
    assert "is beyond 10x the H200 SXM datasheet" in lines[1] and "GB/s" in lines[1]
    assert "negative duration" in lines[2]
    assert "$.finished_at 1999-01-15T12:00:00+00:00 is before $.started_at 9999-01-15T12:00:00+00:00" in lines[3]
    assert json.loads(run_cli(perfsuite_env, "results", "--json", check=True).stdout) == []
    good = tmp_path / "good.json"
    good.write_text(json.dumps(make_record(device="cuda", host="box1")))
    run_cli(perfsuite_env, "import", str(good), check=True)
    site = tmp_path / "site"
    built = run_cli(perfsuite_env, "leaderboard", "--out", str(site))
    assert built.returncode == 0 and "Traceback" not in built.stderr, built.stderr
    assert (site / "index.html").is_file()


def test_check_names_an_impossible_record_in_a_tree(tmp_path):
    from perfsuite.publish.submissions.tree import check_tree, record_text, system_description

    record = extreme_records()["1e300 TFLOP/s"]
    folder = tmp_path / "subs" / "acme" / "results" / "box" / "kernels.gemm"
    folder.mkdir(parents=True)
    (folder / f"{record['run_id']}.json").write_text(record_text(record))
    (tmp_path / "subs" / "acme" / "systems").mkdir()
    (tmp_path / "subs" / "acme" / "systems" / "box.json").write_text(
        json.dumps(system_description(record, "acme", "box"))
    )
    problems = [str(p) for p in check_tree(tmp_path / "subs").problems]
    assert len(problems) == 1 and "impossible figure: $.metrics[1] bf16/tflops: value 1e+300 TFLOP/s" in problems[0]


def test_real_figures_pass_and_a_multi_gpu_launch_scales_the_bound():
    ceiling = make_record(device="cuda", host="box1")
    assert physics.problems(ceiling) == []
    # 25,000 TFLOP/s: beyond 10x one H200's highest datasheet figure (fp8, 1,979) for one
    # process, within it for eight.
    many = [make_metric("bf16", "tflops", "TFLOP/s", [25_000.0] * 3, higher_is_better=True)]
    one = make_record(device="cuda", host="box1", metrics=gemm_metrics()[:1] + many)
    assert any("beyond 10x the H200 SXM datasheet" in p for p in physics.problems(one))
    eight = make_record(device="cuda", host="box1", metrics=gemm_metrics()[:1] + many, launch={"world_size": 8})
    assert physics.problems(eight) == []
    # A CPU has no datasheet here: the fastest part of the table bounds it.
    cpu = make_record(device="cpu", metrics=[make_metric("x", "tflops", "TFLOP/s", [1e6] * 3, higher_is_better=True)])
    assert "the fastest datasheet known" in physics.problems(cpu)[0]


def test_the_repositorys_own_records_are_all_physical():
    from perfsuite.schemas.reading import load_record_file

    paths = sorted((REPO / "submissions").rglob("results/**/*.json"))
    assert paths
    bad = {str(p): physics.problems(load_record_file(p)) for p in paths}
    assert {k: v for k, v in bad.items() if v} == {}


def test_every_command_renders_extreme_values_stored_before_the_rules(perfsuite_env, tmp_path):
    """Values an older perfsuite stored (written here beneath the store's checks): 1e300
    throughputs, negative times, reversed timestamps."""
    a, b = make_record(device="cuda", host="box1"), make_record(device="cuda", host="box1")
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as registry:
        registry.store(a)
        registry.store(b)
        with registry.engine.begin() as connection:
            connection.execute(text("UPDATE metrics SET value = 1e300, samples = '[1e300, -1e300, 1e300]'"))
            for record in (a, b):
                extreme = json.loads(json.dumps(record))
                extreme["metrics"][0]["value"] = -5.0
                extreme["metrics"][1]["value"] = 1e300
                extreme["metrics"][1]["samples"] = [1e300] * 5
                extreme["finished_at"] = "1999-01-01T00:00:00+00:00"
                connection.execute(
                    text("UPDATE runs SET record = :r WHERE run_id = :id"),
                    {"r": json.dumps(extreme), "id": record["run_id"]},
                )
    for args in (
        ["results"],
        ["results", "--json"],
        ["show", a["run_id"]],
        ["history", "--workload", "kernels.gemm"],
        ["compare", a["run_id"], b["run_id"]],
        ["leaderboard", "--out", str(tmp_path / "site")],
    ):
        proc = run_cli(perfsuite_env, *args)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), (args, proc.stderr)
