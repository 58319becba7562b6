"""Fuzzing ``perfsuite import``: records generated from a valid one by mutating keys,
values, types, nesting and bytes. Whatever the input, the import either stores records
that validate, or refuses with a one-line error and stores nothing; never a traceback.

Bounded: a fixed number of examples per test, derandomised so that CI sees the same
inputs every time (and a failure is reproducible), no example database written.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.factories import make_record, sign
from support.registry_support import table_counts

from perfsuite.registry import (
    RegistryError,
    open_registry,
)
from perfsuite.schemas.reading import load_record_file
from perfsuite.schemas.validate import check_record

FUZZ = settings(
    max_examples=150,
    deadline=10_000,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BASE = make_record()

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _containers(document, path=()):
    """Every (path, container) in the document, the root included."""
    yield path, document
    items = document.items() if isinstance(document, dict) else enumerate(document)
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from _containers(value, (*path, key))


@st.composite
def mutated_records(draw) -> bytes:
    """A valid record with a few structural mutations, re-signed or not, maybe byte-flipped."""
    record = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        places = list(_containers(record))
        _, container = places[draw(st.integers(0, len(places) - 1))]
        keys = list(container) if isinstance(container, dict) else list(range(len(container)))
        action = draw(st.sampled_from(["delete", "replace", "wrap", "add", "retype"]))
        if not keys or action == "add":
            if isinstance(container, dict):
                container[draw(st.text(max_size=8))] = draw(json_values)
            else:
                container.append(draw(json_values))
            continue
        key = draw(st.sampled_from(keys))
        if action == "delete":
            del container[key]
        elif action == "replace":
            container[key] = draw(json_values)
        elif action == "wrap":
            container[key] = [container[key]] if draw(st.booleans()) else {"x": container[key]}
        else:  # the same value as another JSON type
            value = container[key]
            container[key] = str(value) if not isinstance(value, str) else draw(st.integers())
    if draw(st.booleans()):
        sign(record)
    data = json.dumps(record).encode()
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=0, max_size=3)) + data[at + 1 :]
    return data


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'registry.db'}"


def _import_in_process(registry, path: Path) -> str | None:
    """What ``perfsuite import`` does: load, check, store all. Returns the refusal or None."""
    try:
        record = load_record_file(path)
        check_record(record)
        registry.store_all([record])
    except RegistryError as exc:  # RecordInvalid included
        return str(exc)
    return None


def test_fuzzed_records_are_stored_valid_or_refused_leaving_nothing(tmp_path, registry_url):
    stored_or_refused = set()

    @FUZZ
    @given(data=mutated_records())
    def import_one(data: bytes) -> None:
        path = tmp_path / "record.json"
        path.write_bytes(data)
        with open_registry(registry_url) as registry:
            before = table_counts(registry)
            refusal = _import_in_process(registry, path)
            if refusal is not None:
                assert "\n" not in refusal
                assert table_counts(registry) == before
            else:
                stored = registry.get(json.loads(data)["run_id"])
                assert stored == json.loads(data)
                check_record(stored)
        stored_or_refused.add(refusal is None)

    import_one()
    assert stored_or_refused == {True, False}  # the generator reaches both outcomes


@settings(FUZZ, max_examples=30)
@given(data=mutated_records())
def test_fuzzed_import_through_the_cli_is_one_line_or_stored(tmp_path, perfsuite_env, registry_url, data):
    from perfsuite.cli import cli

    path = tmp_path / "record.json"
    path.write_bytes(data)
    result = CliRunner().invoke(cli, ["--db", registry_url, "import", str(path)], prog_name="perfsuite")
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    if result.exit_code == 1:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: "), result.stderr
    else:
        with open_registry(registry_url) as registry:
            check_record(registry.get(json.loads(data)["run_id"]))


@pytest.mark.parametrize(
    "content", [b"\xff\xfe{}", b"[" * 50_000, b'{"run_id": 1e999}', json.dumps(BASE).encode()[:-1]]
)
def test_fuzz_style_inputs_in_a_real_process_are_one_line(tmp_path, perfsuite_env, content):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", "import", str(path)],
        env=perfsuite_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(f"Error: {path}: ")
