"""The ``perfsuite_record_stored`` hook: a sink plugin gets every record the runner stores, once,
with the registry's URL; a plugin that raises (or tampers with its copy) is one warning line and
the stored record is untouched. Real CLI subprocesses, a real SQLite registry, real plugins."""

from __future__ import annotations

import json
from pathlib import Path

from perfsuite.schemas.canonical import record_sha256

WORKLOAD = """
from dataclasses import dataclass
from perfsuite import hookimpl, Workload, Case, Work, Check, param

@dataclass(frozen=True)
class P:
    n: int = param(100, "items per call")

class Sum(Workload):
    name = "sink.sum"
    category = "kernels"
    Params = P
    def cases(self, ctx):
        def fn():
            self.out = sum(range(self.params.n))
        verify = lambda: Check("sum", self.out == self.params.n * (self.params.n - 1) // 2, "closed form")
        return [Case("sum", fn, Work(items=self.params.n), verify=verify)]

@hookimpl
def perfsuite_register_workloads(register):
    register(Sum)
"""

JSONL_SINK = """
import json, os
from perfsuite import hookimpl

@hookimpl
def perfsuite_record_stored(record, registry_url):
    with open(os.environ["SINK_PATH"], "a") as f:
        f.write(json.dumps({"url": registry_url, "record": record}) + "\\n")
"""

BROKEN_SINK = """
from perfsuite import hookimpl

@hookimpl
def perfsuite_record_stored(record, registry_url):
    record["status"] = "tampered"
    record["metrics"].clear()
    raise RuntimeError("sink is down")
"""

RUN = ("run", "sink.sum", "--device", "cpu", "--iterations", "3", "--warmup", "0")


def _sunk(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_sink_plugin_gets_each_stored_record_once_with_the_registry_url(cli, add_plugin, perfsuite_env, tmp_path):
    sink = tmp_path / "sink.jsonl"
    perfsuite_env["SINK_PATH"] = str(sink)
    add_plugin("sinkwork", WORKLOAD)
    add_plugin("jsonlsink", JSONL_SINK)
    cli(*RUN, "--repeat", "2", check=True)
    stored = json.loads(cli("results", "--json", check=True).stdout)
    lines = _sunk(sink)
    assert sorted(line["record"]["run_id"] for line in lines) == sorted(r["run_id"] for r in stored)
    assert len(lines) == 2
    assert {line["url"] for line in lines} == {perfsuite_env["PERFSUITE_DB"]}
    first = lines[0]["record"]
    assert first["status"] == "success" and first["sha256"] and first["metrics"]
    on_disk = json.loads((Path(perfsuite_env["PERFSUITE_RECORDS"]) / f"{first['run_id']}.json").read_text())
    assert first["sha256"] == on_disk["sha256"] == record_sha256(first)  # the whole record, not a summary


def test_a_raising_sink_is_a_warning_and_the_record_stays_stored_and_whole(cli, add_plugin, perfsuite_env, tmp_path):
    sink = tmp_path / "sink.jsonl"
    perfsuite_env["SINK_PATH"] = str(sink)
    add_plugin("sinkwork", WORKLOAD)
    add_plugin("brokensink", BROKEN_SINK)
    add_plugin("jsonlsink", JSONL_SINK)
    proc = cli(*RUN)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "perfsuite_record_stored" in line]
    assert warnings == ["Warning: plugin brokensink failed in perfsuite_record_stored: RuntimeError: sink is down"]
    (summary,) = json.loads(cli("results", "--json", check=True).stdout)
    record = json.loads(cli("show", summary["run_id"], "--json", check=True).stdout)
    assert record["status"] == "success" and record["metrics"]  # the tampering touched its own copy only
    (line,) = _sunk(sink)  # the other sink still got it, untampered
    assert line["record"]["status"] == "success" and line["record"]["metrics"]
