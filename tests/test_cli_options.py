"""Finding one's way: ``--db`` after the command as before it, ``perfsuite describe`` (and
``list NAME``) with parameters, quick preset, requirements and examples, and an unknown
parameter or workload answered with the valid names. Real CLI processes."""

from __future__ import annotations

import json

from support.factories import make_record

from perfsuite.registry import open_registry


def test_db_works_after_the_command_and_the_later_one_wins(cli, perfsuite_env, tmp_path):
    url = f"sqlite:///{tmp_path / 'other.db'}"
    record = make_record()
    with open_registry(url) as reg:
        reg.store(record)
    del perfsuite_env["PERFSUITE_DB"]
    after = json.loads(cli("results", "--json", "--db", url, check=True).stdout)
    assert [r["run_id"] for r in after] == [record["run_id"]]
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    both = json.loads(cli("--db", empty, "results", "--json", "--db", url, check=True).stdout)
    assert [r["run_id"] for r in both] == [record["run_id"]]
    before = json.loads(cli("--db", empty, "results", "--json", check=True).stdout)
    assert before == []
    assert "--db URL" in cli("show", "--help", check=True).stdout


def test_describe_and_list_name_show_parameters_quick_preset_and_examples(cli):
    info = json.loads(cli("describe", "kernels.gemm", "--device", "cpu", "--json", check=True).stdout)
    params = {p["name"]: p for p in info["params"]}
    assert params["dtypes"]["type"] == "str list" and params["dtypes"]["default"] == ["bf16"]
    assert "fp8" in params["dtypes"]["choices"] and params["m"]["quick"] == 256
    assert info["requirements"]["devices"] == ["cpu", "cuda"] and info["available"] is True
    assert info["examples"][0] == "perfsuite run kernels.gemm --quick"
    listed = json.loads(cli("list", "kernels.gemm", "--device", "cpu", "--json", check=True).stdout)
    assert listed == info
    text = cli("list", "collectives.all_reduce", "--device", "cpu", check=True).stdout
    assert "--nproc-per-node 2" in text and "min_bytes" in text and "parameters (-p NAME=VALUE)" in text


def test_unknown_names_are_one_line_with_the_valid_ones(cli):
    wrong = cli("run", "kernels.gemm", "-p", "dtype=bf16", "--device", "cpu")
    assert wrong.returncode == 2
    (line,) = wrong.stderr.strip().splitlines()
    assert "unknown parameter 'dtype'" in line and "did you mean 'dtypes'?" in line
    assert "valid: dtypes, k, m, n" in line
    typo = cli("describe", "kernels.gem")
    assert typo.returncode == 2 and "did you mean kernels.gemm" in typo.stderr
