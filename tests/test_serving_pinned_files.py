"""inference.serving's files named by their content: a trace's and accuracy data's sha256 are
resolved parameters (``trace_sha256``, ``accuracy_data_sha256``), so a record and its
comparability key name the bytes replayed and scored, not only the path; a pinned digest refuses
a file that differs. Real files in the test's folder, a real replay against the null server."""

from __future__ import annotations

import hashlib
import json

import pytest
from support.factories import make_record

from perfsuite.engine import params as params_mod
from perfsuite.schemas.comparability import comparability_key, key_settings
from perfsuite.workloads.inference.serving import Serving
from perfsuite.workloads.inference.serving.capacity import null_server

pytest.importorskip("httptools")


def _write(path, input_length: int) -> str:
    lines = [
        {"timestamp": 0, "input_length": input_length, "output_length": 2},
        {"timestamp": 20, "input_length": 4, "output_length": 2},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _key(**over) -> tuple[object, str]:
    """The resolved parameters and the key of a record that holds them (as the runner frames one)."""
    params = params_mod.resolve(Serving, dict(url="http://127.0.0.1:1", scenarios="", **over), quick=False)
    record = make_record(workload_name="inference.serving", version=Serving.version, params=params_mod.to_dict(params))
    return params, comparability_key(record)


def test_two_traces_at_one_path_never_share_a_key_and_the_same_bytes_do(tmp_path):
    path = tmp_path / "trace.jsonl"
    first = _write(path, 8)
    params, key = _key(trace=str(path))
    assert params.trace_sha256 == first  # filled in from the file
    assert _key(trace=str(path))[1] == key  # the same bytes at the same path: one key
    second = _write(path, 9)  # other bytes at the same path
    params, other = _key(trace=str(path))
    assert params.trace_sha256 == second != first and other != key
    # the path stays in the key beside the bytes: the same bytes elsewhere are a run of their own
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    params, elsewhere = _key(trace=str(copy))
    assert params.trace_sha256 == second and elsewhere != other
    # a pinned digest: the file must hold it (a record re-run finds the bytes it replayed, or stops)
    assert _key(trace=str(path), trace_sha256=second.upper())[0].trace_sha256 == second
    with pytest.raises(params_mod.ParamError, match=f"holds bytes of sha256 {second}, not trace_sha256={first}"):
        _key(trace=str(path), trace_sha256=first)
    with pytest.raises(params_mod.ParamError, match="trace_sha256 pins a trace's content: give trace= too"):
        _key(trace_sha256=first, rates="1")


def test_accuracy_data_is_named_by_its_bytes_too(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text('{"prompt": "one", "answer": "1"}\n')
    params, key = _key(rates="1", accuracy_data=str(data))
    assert params.accuracy_data_sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    data.write_text('{"prompt": "two", "answer": "2"}\n')
    assert _key(rates="1", accuracy_data=str(data))[1] != key
    shipped = _key(rates="1", accuracy_data="gpt-reverse")[0]
    assert len(shipped.accuracy_data_sha256) == 64  # a shipped set's file too
    with pytest.raises(params_mod.ParamError, match="accuracy_data_sha256 pins accuracy data's content"):
        _key(rates="1", accuracy_data_sha256=shipped.accuracy_data_sha256)


def test_a_run_records_the_digest_and_refuses_a_trace_that_differs_from_its_pin(tmp_path, cli):
    path = tmp_path / "trace.jsonl"
    digest = _write(path, 8)
    with null_server() as server:
        over = {"url": server.url, "model": "null", "scenarios": "", "measure_client": "false", "trace": str(path)}
        proc = cli("run", "inference.serving", *(f"-p{k}={v}" for k, v in over.items()), "--json")
        assert proc.returncode == 0, proc.stderr
        (record,) = json.loads(proc.stdout)
        assert record["workload"]["params"]["trace_sha256"] == digest
        assert record["details"]["serving"]["trace_replay"]["sha256"] == digest  # the bytes replayed
        assert key_settings(record)["params"]["trace_sha256"] == digest  # in the key the record holds
        _write(path, 9)
        proc = cli("run", "inference.serving", *(f"-p{k}={v}" for k, v in over.items()), f"-ptrace_sha256={digest}")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"not trace_sha256={digest}: the file changed, or another file is named" in line
