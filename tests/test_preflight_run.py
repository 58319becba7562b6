"""The run path around a measurement: the doctor's pre-flight checks stored in the record
and refused on with ``--strict``, ``--profile torch`` after the timed loop, and the cost
section from ``--price-per-hour``. The CLI runs in this process (CliRunner),
so a failing check can be planted where the rule really reads it (the load average)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.factories import make_record, sign

from perfsuite.doctor import host_facts
from perfsuite.doctor.host_facts import Fact
from perfsuite.registry import RecordInvalid
from perfsuite.schemas.validate import validate_record
from tests.test_cli_errors import one_error_line

GEMM_CPU = ["run", "kernels.gemm", "--quick", "-p", "dtypes=fp32", "--device", "cpu"]


@pytest.fixture
def cli_here(perfsuite_env):
    from click.testing import CliRunner

    from perfsuite.cli import cli as perfsuite

    def _run(*args: str) -> subprocess.CompletedProcess:
        result = CliRunner().invoke(perfsuite, list(args), prog_name="perfsuite")
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)

    return _run


@pytest.fixture
def overloaded(monkeypatch):
    """A load average far above the core count: the doctor's "load average" check fails."""
    monkeypatch.setattr(host_facts, "load_1m", lambda: Fact(1000.0))


def test_strict_refuses_on_a_failed_check_before_anything_starts(cli_here, overloaded, perfsuite_env, monkeypatch):
    import perfsuite.engine.runner

    def no_process(*args, **kwargs):
        raise AssertionError("a measuring process was started")

    monkeypatch.setattr(perfsuite.engine.runner.subprocess, "Popen", no_process)
    line = one_error_line(cli_here(*GEMM_CPU, "--strict"))
    assert "--strict" in line and "load average" in line and "1000.00" in line
    records = Path(perfsuite_env["PERFSUITE_RECORDS"])
    assert not list(records.glob("*.json"))  # nothing recorded


def test_profiled_priced_run_records_preflight_profile_and_cost(cli_here, overloaded, perfsuite_env):
    """Without --strict the failed check is measured anyway, stored and shown; the profile
    names the measured operator and its trace lies beside the record."""
    proc = cli_here(*GEMM_CPU, "--profile", "torch", "--price-per-hour", "2.5", "--json")
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "success", record["error"]
    pre = record["preflight"]
    assert pre["verdict"] == "fail"
    load = next(c for c in pre["checks"] if c["check"] == "load average")
    assert load["verdict"] == "fail" and load["value"].startswith("1000.00")
    assert not any(c["scope"].startswith("gpu") for c in pre["checks"])  # a CPU run judges no GPU
    assert record["controls"]["profile"] == "torch"
    summary = record["details"]["profile"]["fp32"]
    assert summary["tool"] == "torch" and summary["calls"] >= 1
    assert summary["top"][0]["name"] in ("aten::mm", "aten::addmm", "aten::matmul")
    trace = Path(perfsuite_env["PERFSUITE_RECORDS"]) / "artifacts" / record["run_id"] / summary["trace"]
    assert trace.stat().st_size > 0 and json.loads(trace.read_text())["traceEvents"]
    assert record["cost"] == {
        "price_per_accelerator_hour_usd": 2.5,
        "accelerators": 1,
        "source": "--price-per-hour",
        "lines": [],
    }  # GEMM reports no items/s
    shown = cli_here("show", record["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "pre-flight: fail" in shown.stdout
    assert "FAIL host load average: 1000.00" in shown.stdout
    assert "aten::mm" in shown.stdout and "profile (torch" in shown.stdout
    assert "cost: 2.5 USD per accelerator-hour x 1" in shown.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--price-per-hour", "-1"], "Invalid value for '--price-per-hour': -1 is not at least 0"),
        (["--price-per-hour", "nan"], "Invalid value for '--price-per-hour': 'nan' is not a finite number"),
        (["--profile", "ncu"], "--profile ncu: Nsight Compute profiles CUDA kernels"),
    ],
)
def test_bad_profile_or_price_is_one_line_before_the_run(cli_here, perfsuite_env, args, needle):
    line = one_error_line(cli_here(*GEMM_CPU, *args))
    assert needle in line
    assert not list(Path(perfsuite_env["PERFSUITE_RECORDS"]).glob("*.json"))


def test_a_bad_db_is_one_line_before_the_run(cli_here, tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    line = one_error_line(cli_here("--db", f"sqlite:///{folder}", *GEMM_CPU))
    assert "registry" in line


def test_ncu_refuses_several_ranks(monkeypatch):
    from perfsuite.controls import Controls
    from perfsuite.engine.launcher import LaunchOptions
    from perfsuite.engine.session import profile_unmet
    from perfsuite.measure import profiling

    monkeypatch.setattr(profiling.shutil, "which", lambda name: f"/usr/bin/{name}")
    one = SimpleNamespace(controls=Controls(device="cuda", profile="ncu"), launch=LaunchOptions(nproc_per_node=1))
    two = SimpleNamespace(controls=Controls(device="cuda", profile="ncu"), launch=LaunchOptions(nproc_per_node=2))
    assert profile_unmet(one) is None
    assert "single local measuring process" in profile_unmet(two)


def _with(record: dict, **fields) -> dict:
    record.update(fields)
    return sign(record)


GOOD_COST = {
    "price_per_accelerator_hour_usd": 3.0,
    "accelerators": 8,
    "source": "--price-per-hour",
    "lines": [{"case": "gpt", "metric": "items_per_s", "usd": 0.42, "per": "1M tokens"}],
}
GOOD_PREFLIGHT = {
    "verdict": "warn",
    "checks": [{"check": "swap", "scope": "host", "verdict": "warn", "value": "12 MiB", "why": "pages may be swapped"}],
}


def test_schema_accepts_cost_and_preflight_and_records_without_them():
    validate_record(make_record())  # an old record: neither section
    validate_record(_with(make_record(), cost=GOOD_COST, preflight=GOOD_PREFLIGHT))


@pytest.mark.parametrize(
    "fields",
    [
        {"cost": {**GOOD_COST, "price_per_accelerator_hour_usd": -1.0}},
        {"cost": {**GOOD_COST, "accelerators": 0}},
        {"cost": {k: v for k, v in GOOD_COST.items() if k != "lines"}},
        {"cost": {**GOOD_COST, "lines": [{"case": "gpt", "metric": "items_per_s", "usd": "cheap", "per": "1M"}]}},
        {"preflight": {"verdict": "maybe", "checks": []}},
        {
            "preflight": {
                "verdict": "ok",
                "checks": [{"check": "swap", "scope": "host", "verdict": "fine", "value": "0", "why": ""}],
            }
        },
        {"controls_profile": "nsys"},
    ],
)
def test_schema_refuses_malformed_sections(fields):
    record = make_record()
    if "controls_profile" in fields:
        record["controls"]["profile"] = fields.pop("controls_profile")
    with pytest.raises(RecordInvalid):
        validate_record(_with(record, **fields))


def test_leaderboard_shows_cost_per_unit_where_the_record_has_it(tmp_path):
    from perfsuite.publish.leaderboard import build_site
    from perfsuite.registry import open_registry

    cost = {**GOOD_COST, "lines": [{"case": "bf16", "metric": "items_per_s", "usd": 0.4242, "per": "1M tokens"}]}
    priced = _with(make_record(host="priced"), cost=cost)
    plain_run = make_record(host="unpriced")
    with open_registry(f"sqlite:///{tmp_path / 'lb.db'}") as reg:
        reg.store(priced)
        reg.store(plain_run)
        build_site(reg, tmp_path / "site")
    page = (tmp_path / "site" / "workloads" / "kernels.gemm.html").read_text()
    rows = {
        name: next(r.split("</tr>")[0] for r in page.split("<tr") if f">{name}<" in r)
        for name in ("priced", "unpriced")
    }
    assert "0.4242 USD per 1M tokens" in rows["priced"] and "USD" not in rows["unpriced"]


def test_ncu_log_becomes_the_record_summary_and_show_prints_it(tmp_path, cli_here, perfsuite_env):
    """The runner's side of --profile ncu, on a captured ncu CSV: the summary in
    details["profile"], the log kept beside the record, and show's table with mem% and SM%."""
    from perfsuite.engine.runner import Runner
    from perfsuite.engine.runspec import WorkerResult
    from perfsuite.registry import open_registry
    from tests.test_profiling_cost import NCU_CSV

    log = tmp_path / "ncu.csv"
    log.write_text(NCU_CSV)
    result = WorkerResult(status="success", started_at="", finished_at="", details={"ncu_cases": ["bf16"]})
    Runner._ncu_summary(result, log, tmp_path / "artifacts")
    summary = result.details["profile"]["ncu"]
    assert summary["cases"] == ["bf16"] and "ncu_cases" not in result.details
    assert summary["top"][0]["name"].startswith("nvjet_hsh") and summary["top"][0]["sm_throughput_pct"] > 88
    assert (tmp_path / "artifacts" / "ncu.csv").read_text() == NCU_CSV
    record = make_record()
    record["details"]["profile"] = result.details["profile"]
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        reg.store(sign(record))
    shown = cli_here("show", record["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "profile (ncu, 3 calls after the timed loop, cases bf16)" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if "nvjet_hsh" in line)
    assert "88.6" in row and "10.0" in row  # SM % and memory %


def test_an_unreadable_ncu_log_is_stated_in_the_record(tmp_path):
    from perfsuite.engine.runner import Runner
    from perfsuite.engine.runspec import WorkerResult

    log = tmp_path / "ncu.csv"
    log.write_text(
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters\n"
    )
    result = WorkerResult(status="success", started_at="", finished_at="")
    Runner._ncu_summary(result, log, tmp_path / "artifacts")
    entry = result.details["profile"]["ncu"]
    assert entry["top"] == [] and "no ncu CSV header" in entry["error"]
