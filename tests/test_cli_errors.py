"""Bad input is one line on stderr and a non-zero exit, never a traceback: registry URLs
that cannot be opened, record files that must not be stored (and then nothing is), and
text from a record that must print as itself, not as markup or terminal control."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.factories import make_record, sign

from perfsuite.registry import RegistryError, check_url, open_registry
from perfsuite.schemas.reading import MAX_RECORD_BYTES


@pytest.fixture
def cli_fast(perfsuite_env):
    """The CLI in this process (CliRunner): the same code as ``cli`` without a Python start-up,
    for the many cases; the main ones also run as real processes through ``cli``."""
    import subprocess

    from click.testing import CliRunner

    from perfsuite.cli import cli as perfsuite

    def _run(*args: str, check: bool = False) -> subprocess.CompletedProcess:
        result = CliRunner().invoke(perfsuite, list(args), prog_name="perfsuite")
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        proc = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    return _run


def one_error_line(proc) -> str:
    """The single stderr line of a refused command (no traceback, non-zero exit)."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: "), lines[0]
    return lines[0]


def bad_urls(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (URL, what the one line must say)."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database\n")
    return {
        "not a url": ("not a url", "'not a url' is not a database URL"),
        "postgres refuses": ("postgresql://perfsuite@127.0.0.1:1/perfsuite", "Connection refused"),
        "under /proc": ("sqlite:////proc/nope/x.db", "cannot create registry /proc/nope/x.db"),
        "a folder": (f"sqlite:///{folder}", "is a folder, not a SQLite database file"),
        "a text file": (f"sqlite:///{text_file}", "is not a SQLite database"),
        "under a file": (f"sqlite:///{text_file}/x.db", "is not a folder"),
    }


BAD_URL_NAMES = ["not a url", "postgres refuses", "under /proc", "a folder", "a text file", "under a file"]


@pytest.mark.parametrize("name", BAD_URL_NAMES)
def test_check_url_refuses_in_one_line_and_creates_nothing(tmp_path, name):
    if name == "postgres refuses":
        pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")
    url, expected = bad_urls(tmp_path)[name]
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(RegistryError) as info:
        check_url(url)
    assert expected in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(RegistryError, match=expected):
        open_registry(url)
    assert sorted(tmp_path.rglob("*")) == before


def test_check_url_accepts_a_new_file_without_creating_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'new' / 'registry.db'}"
    check_url(url)
    assert not (tmp_path / "new").exists()
    open_registry(url).close()
    check_url(url)  # an existing registry too


@pytest.mark.parametrize("name", BAD_URL_NAMES)
def test_every_registry_command_refuses_a_bad_db_in_one_line(cli_fast, tmp_path, name):
    if name == "postgres refuses":
        pytest.importorskip("psycopg", reason="the psycopg driver is not installed (the 'postgres' extra)")
    url, expected = bad_urls(tmp_path)[name]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(make_record()))
    for args in (
        ["results"],
        ["show", "abcd"],
        ["import", str(good)],
        ["history", "--workload", "kernels.gemm"],
        ["compare", "abcd", "ef01"],
        ["leaderboard", "--out", str(tmp_path / "site")],
        ["reproduce", "abcd"],
    ):
        line = one_error_line(cli_fast("--db", url, *args))
        assert expected in line, (args, line)


@pytest.mark.parametrize("name", ["not a url", "a text file"])
def test_a_bad_db_in_a_real_process_is_one_line(cli, tmp_path, name):
    url, expected = bad_urls(tmp_path)[name]
    assert expected in one_error_line(cli("--db", url, "results"))


# -- import: all or nothing ---------------------------------------------------------------


def stored_run_ids(cli) -> list[str]:
    return [r["run_id"] for r in json.loads(cli("results", "--json", check=True).stdout)]


def write(path: Path, record: dict) -> Path:
    path.write_text(json.dumps(record))
    return path


def test_import_of_a_good_and_a_tampered_file_stores_nothing(cli, tmp_path):
    good = write(tmp_path / "good.json", make_record())
    tampered_record = make_record()
    tampered_record["metrics"][0]["value"] *= 2  # the hash no longer matches
    tampered = write(tmp_path / "tampered.json", tampered_record)
    line = one_error_line(cli("import", str(good), str(tampered)))
    assert line.startswith(f"Error: {tampered}: $.sha256: record says")
    assert line.endswith("(nothing imported: 1 of 2 files refused)")
    assert stored_run_ids(cli) == []
    proc = cli("import", str(good), check=True)
    assert proc.stdout.strip() == f"stored: {json.loads(good.read_text())['run_id']} ({good})"


def test_import_names_every_refused_file(cli_fast, tmp_path):
    bad1 = tmp_path / "a.json"
    bad1.write_text("{")
    bad2 = write(tmp_path / "b.json", {"run_id": "x"})
    good = write(tmp_path / "good.json", make_record())
    proc = cli_fast("import", str(bad1), str(good), str(bad2))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"Error: {bad1}: not JSON:")
    assert lines[1].startswith(f"Error: {bad2}: $:") and lines[1].endswith("(nothing imported: 2 of 3 files refused)")
    assert stored_run_ids(cli_fast) == []


def test_import_stores_many_files_in_one_go_and_is_idempotent(cli_fast, tmp_path):
    files = [write(tmp_path / f"r{i}.json", make_record()) for i in range(3)]
    out = cli_fast("import", *map(str, files), check=True).stdout.splitlines()
    assert [line.split(":")[0] for line in out] == ["stored"] * 3
    again = cli_fast("import", *map(str, files), check=True).stdout.splitlines()
    assert [line.split(":")[0] for line in again] == ["duplicate"] * 3


def test_import_conflicting_with_a_stored_run_stores_nothing(cli_fast, tmp_path):
    first = make_record()
    write(tmp_path / "first.json", first)
    cli_fast("import", str(tmp_path / "first.json"), check=True)
    other = sign({**first, "status": "failed", "error": "changed", "metrics": []})
    good = write(tmp_path / "good.json", make_record())
    line = one_error_line(cli_fast("import", str(good), str(write(tmp_path / "other.json", other))))
    assert f"run {first['run_id']} is already stored" in line and line.endswith("(nothing imported)")
    assert stored_run_ids(cli_fast) == [first["run_id"]]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b'{"run_id": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at offset 15)"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply to parse"),
        (b"[" * 200 + b"]" * 200, "nests objects or arrays more than 64 deep"),
        (b"1" * 5000, "not JSON: an integer of 5,000 digits (at most 40)"),
        (b'"\\ud800"', "a run record must be a JSON object"),
        (b"", "not JSON: Expecting value"),
    ],
    ids=["not-utf8", "recursion", "too-deep", "huge-int", "surrogate", "empty"],
)
def test_import_refuses_a_hostile_file_in_one_line(cli_fast, tmp_path, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    line = one_error_line(cli_fast("import", str(bad)))
    assert line.startswith(f"Error: {bad}: ") and expected in line, line


def test_import_refuses_a_file_over_the_size_limit_before_reading_it(cli_fast, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)  # sparse: costs no disk, and is never read
    line = one_error_line(cli_fast("import", str(big)))
    assert line.startswith(
        f"Error: {big}: {MAX_RECORD_BYTES + 1:,} bytes is over the {MAX_RECORD_BYTES:,}-byte limit of a record file"
    )


def test_a_lone_surrogate_inside_a_record_is_refused_not_a_crash(tmp_path):
    from perfsuite.registry import RecordInvalid
    from perfsuite.schemas.validate import check_record

    record = make_record()
    record["error"] = "\ud800"
    with pytest.raises(RecordInvalid, match="not valid Unicode"):
        check_record(record)


# -- text from a record is data -------------------------------------------------------------

HOSTILE = "gloo: [/__w/pytorch/torch/csrc/x.cpp:1] \x1b[31mred\x1b[0m\rback [bold]x[/bold] \x07"


def test_error_text_with_markup_and_escapes_shows_as_plain_text(cli, cli_fast, tmp_path):
    record = make_record(status="failed", metrics=[], verification="skipped")
    record["error"] = HOSTILE
    cli_fast("import", str(write(tmp_path / "r.json", sign(record))), check=True)
    shown = "gloo: [/__w/pytorch/torch/csrc/x.cpp:1] \\x1b[31mred\\x1b[0m\\x0dback [bold]x[/bold] \\x07"
    for args in (["show", record["run_id"]], ["results"]):
        proc = cli(*args)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert "\x1b" not in proc.stdout and "\r" not in proc.stdout and "\x07" not in proc.stdout
        flat = "".join(line.strip(" │┃|") for line in proc.stdout.splitlines())  # undo table folding
        assert shown.replace(" ", "") in flat.replace(" ", ""), proc.stdout
    assert json.loads(cli_fast("show", record["run_id"], "--json", check=True).stdout)["error"] == HOSTILE


def test_plain_keeps_brackets_and_shows_control_characters():
    from rich.console import Console

    from perfsuite.text import clean, plain

    assert clean("a\tb\nc\x1b[1m\x00\x7f\x9b") == "a\tb\nc\\x1b[1m\\x00\\x7f\\x9b"
    console = Console(record=True, width=200, color_system=None)
    console.print(plain("[/x] [red]not red[/red]"))
    assert console.export_text().strip() == "[/x] [red]not red[/red]"


def test_a_database_error_escaping_a_command_is_one_line(cli_fast):
    """A command that queries through ``Registry.session()`` and loses its server mid-way."""
    from sqlalchemy.exc import OperationalError

    from perfsuite.cli import cli as group

    @group.command("lose-the-server")
    def lose_the_server():
        raise OperationalError(
            "SELECT 1",
            {},
            Exception("server closed the connection unexpectedly\n\tThis probably means the server terminated"),
        )

    try:
        line = one_error_line(cli_fast("lose-the-server"))
    finally:
        group.commands.pop("lose-the-server")
    assert line == "Error: registry: server closed the connection unexpectedly"
