"""A command that writes one file where a user points it (``export --out``, ``history --plot``,
``roofline --out``, ``compare --junit``) replaces only a file perfsuite wrote there, and knows it
by the record beside it (``.NAME.perfsuite.json``: the bytes' size and SHA-256). A user's file
of that name, or perfsuite's file the user changed since, is refused in one line (exit 2) and
left byte for byte; perfsuite's own earlier output is replaced, so running the same command
again keeps working; ``--replace`` is the user's say-so for a file perfsuite cannot recognise.

The CLI runs in a fresh process on a registry and a folder the test made.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from support.factories import make_record
from support.safety_support import can_mount, tmpfs

from perfsuite.owned_file import RECORD_FORMAT, Content, record_path, write_owned_file
from perfsuite.owned_output import OutputRefused
from perfsuite.registry import open_registry
from tests.test_hostile_writes import ok, perfsuite, refused  # a CLI process, its exit, its one error line
from tests.test_kernels_roofline import ceilings_record, gemm_record

PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # a user's picture, as far as names go


def listing(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry of ``folder``: its mode, mtime and bytes (nothing here is not a regular file)."""
    found = {}
    for entry in sorted(folder.iterdir()):
        st = os.lstat(entry)
        assert stat.S_ISREG(st.st_mode), entry
        found[entry.name] = (st.st_mode, st.st_mtime_ns, entry.read_bytes())
    return found


def store_run(env: dict, seed: int) -> None:
    with open_registry(env["PERFSUITE_DB"]) as reg:
        reg.store(make_record(controls={"seed": seed}))


@pytest.fixture
def env(perfsuite_env):
    """A registry of two comparable runs (enough for export, history and compare)."""
    for seed in (1, 2):
        store_run(perfsuite_env, seed)
    return perfsuite_env


@pytest.fixture
def world(tmp_path) -> Path:
    folder = tmp_path / "world"
    folder.mkdir()
    return folder


# -- export --out -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt,name", [("csv", "notes.csv"), ("jsonl", "notes.jsonl"), ("parquet", "notes.parquet")])
def test_export_refuses_a_users_file_of_that_name_and_leaves_it_byte_for_byte(env, world, fmt, name):
    out = world / name
    out.write_bytes(b"my own notes, not an export\n")
    before = listing(world)
    line = refused(perfsuite(env, "export", "--format", fmt, "--out", str(out), cwd=world))
    assert str(out) in line and "perfsuite did not write it" in line and "--replace" in line
    assert listing(world) == before


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_run_again_replaces_its_own_earlier_file(env, world, fmt):
    out = world / f"results.{fmt}"
    ok(perfsuite(env, "export", "--format", fmt, "--out", str(out), cwd=world))
    first = out.read_bytes()
    store_run(env, 3)  # a third run: the second export holds other bytes
    ok(perfsuite(env, "export", "--format", fmt, "--out", str(out), cwd=world))
    second = out.read_bytes()
    assert second != first
    if fmt == "csv":
        assert len(second.decode().splitlines()) > len(first.decode().splitlines())
    record = json.loads(record_path(out).read_text())
    assert (
        record["format"] == RECORD_FORMAT and record["file"] == out.name and record["written_by"] == "perfsuite export"
    )
    assert record["contents"] == [{"bytes": len(second), "sha256": hashlib.sha256(second).hexdigest()}]
    assert sorted(p.name for p in world.iterdir()) == sorted([out.name, record_path(out).name])  # no staging left


def test_export_of_the_same_bytes_again_is_replaced_and_recorded_once(env, world):
    out = world / "results.csv"
    ok(perfsuite(env, "export", "--out", str(out), cwd=world))
    ok(perfsuite(env, "export", "--out", str(out), cwd=world))
    assert len(json.loads(record_path(out).read_text())["contents"]) == 1


def test_an_export_the_user_edited_since_is_theirs_and_refused(env, world):
    out = world / "results.csv"
    ok(perfsuite(env, "export", "--out", str(out), cwd=world))
    with out.open("a") as f:
        f.write("my note about the last row\n")
    before = listing(world)
    line = refused(perfsuite(env, "export", "--out", str(out), cwd=world))
    assert str(out) in line and "changed since perfsuite wrote it" in line
    assert listing(world) == before


def test_replace_is_the_users_say_so_and_the_file_is_perfsuites_from_then_on(env, world):
    out = world / "results.csv"
    out.write_text("an export from before perfsuite kept records\n")
    ok(perfsuite(env, "export", "--out", str(out), "--replace", cwd=world))
    assert out.read_text().startswith("run_id,")
    store_run(env, 3)
    ok(perfsuite(env, "export", "--out", str(out), cwd=world))  # recorded: no --replace needed again
    assert out.read_text().count("\n") > 2


def test_a_record_perfsuite_did_not_write_is_refused_with_the_file_left(env, world):
    out = world / "results.csv"
    ok(perfsuite(env, "export", "--out", str(out), cwd=world))
    record_path(out).write_text('{"format": "something else"}\n')
    before = listing(world)
    line = refused(perfsuite(env, "export", "--out", str(out), cwd=world))
    assert str(record_path(out)) in line and "not a record perfsuite wrote" in line
    assert listing(world) == before


def test_a_record_that_is_a_fifo_or_a_symlink_is_refused_without_being_opened(env, world):
    out = world / "results.csv"
    os.mkfifo(record_path(out))
    line = refused(perfsuite(env, "export", "--out", str(out), cwd=world, timeout=60))  # a blocking open times out
    assert "FIFO" in line and not out.exists()
    os.unlink(record_path(out))
    precious = world / "precious.txt"
    precious.write_text("someone's file\n")
    record_path(out).symlink_to(precious)
    line = refused(perfsuite(env, "export", "--out", str(out), cwd=world))
    assert "symlink" in line and not out.exists() and precious.read_text() == "someone's file\n"


def test_a_symlink_or_a_fifo_at_out_is_still_refused_with_replace(env, world):
    precious = world / "precious.csv"
    precious.write_text("someone's file\n")
    link = world / "out.csv"
    link.symlink_to(precious)
    assert "symlink" in refused(perfsuite(env, "export", "--out", str(link), "--replace", cwd=world))
    fifo = world / "pipe.csv"
    os.mkfifo(fifo)
    assert "FIFO" in refused(perfsuite(env, "export", "--out", str(fifo), "--replace", cwd=world, timeout=60))
    assert precious.read_text() == "someone's file\n" and os.path.islink(link)
    assert sorted(p.name for p in world.iterdir()) == ["out.csv", "pipe.csv", "precious.csv"]


# -- history --plot, roofline --out, compare --junit ----------------------------------------------


def test_history_plot_refuses_a_users_picture_and_replaces_its_own(env, world):
    pytest.importorskip("matplotlib")
    photo = world / "holiday.png"
    photo.write_bytes(PHOTO)
    before = listing(world)
    args = ("history", "--workload", "kernels.gemm", "--plot")
    line = refused(perfsuite(env, *args, str(photo), cwd=world))
    assert str(photo) in line and "perfsuite did not write it" in line and "--replace" in line
    assert listing(world) == before
    plot = world / "gemm.svg"
    ok(perfsuite(env, *args, str(plot), cwd=world))
    store_run(env, 3)
    ok(perfsuite(env, *args, str(plot), cwd=world))
    assert b"<svg" in plot.read_bytes()[:2000]
    assert (
        json.loads(record_path(plot).read_text())["contents"][0]["sha256"]
        == hashlib.sha256(plot.read_bytes()).hexdigest()
    )


def test_roofline_plot_refuses_a_users_picture_and_replaces_its_own(perfsuite_env, world):
    pytest.importorskip("matplotlib")
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for record in (ceilings_record(), gemm_record()):
            reg.store(record)
    photo = world / "roof.png"
    photo.write_bytes(PHOTO)
    before = listing(world)
    line = refused(perfsuite(perfsuite_env, "roofline", "--out", str(photo), cwd=world))
    assert str(photo) in line and "--replace" in line
    assert listing(world) == before
    plot = world / "roof.svg"
    ok(perfsuite(perfsuite_env, "roofline", "--out", str(plot), cwd=world))
    ok(perfsuite(perfsuite_env, "roofline", "--out", str(plot), cwd=world))
    ok(perfsuite(perfsuite_env, "roofline", "--out", str(photo), "--replace", cwd=world))
    assert photo.read_bytes().startswith(b"\x89PNG") and photo.read_bytes() != PHOTO
    deep = world / "plots" / "roof.svg"
    assert "--parents" in refused(perfsuite(perfsuite_env, "roofline", "--out", str(deep), cwd=world))
    ok(perfsuite(perfsuite_env, "roofline", "--out", str(deep), "--parents", cwd=world))
    assert deep.is_file()


def test_compare_junit_refuses_a_users_report_and_replaces_its_own(env, world):
    rows = json.loads(ok(perfsuite(env, "results", "--json", cwd=world)).stdout)
    a, b = (r["run_id"] for r in rows)
    report = world / "report.xml"
    report.write_text("<testsuites><!-- the user's own CI report --></testsuites>\n")
    before = listing(world)
    line = refused(perfsuite(env, "compare", a, b, "--junit", str(report), cwd=world))
    assert str(report) in line and "perfsuite did not write it" in line and "--replace" not in line
    assert listing(world) == before
    junit = world / "compare.xml"
    for _ in range(2):
        ok(perfsuite(env, "compare", a, b, "--junit", str(junit), cwd=world))
    assert junit.read_bytes().startswith(b"<?xml")


# -- the rule itself, on files in states a cut-off write leaves ---------------------------------


def test_a_file_holding_either_digest_a_cut_off_write_recorded_is_still_perfsuites(world):
    """The record names the bytes there and the new ones before the file is placed: cut off
    between the two, the file still holds bytes the record names, and the next write goes on."""
    out = world / "x.csv"
    write_owned_file(out, "a,b\n1,2\n", command="export")
    old, new = Content.of(b"a,b\n1,2\n"), Content.of(b"a,b\n3,4\n")
    document = json.loads(record_path(out).read_text())
    document["contents"] = [new.to_dict(), old.to_dict()]
    record_path(out).write_text(json.dumps(document))
    write_owned_file(out, "a,b\n5,6\n", command="export")
    assert out.read_text() == "a,b\n5,6\n"
    assert json.loads(record_path(out).read_text())["contents"] == [Content.of(b"a,b\n5,6\n").to_dict()]


def test_a_file_of_the_recorded_size_but_other_bytes_is_refused(world):
    out = world / "x.csv"
    write_owned_file(out, "a,b\n1,2\n", command="export")
    out.write_text("a,b\n9,9\n")  # same length, other bytes
    with pytest.raises(OutputRefused, match="changed since perfsuite wrote it"):
        write_owned_file(out, "a,b\n5,6\n", command="export")
    assert out.read_text() == "a,b\n9,9\n"


def test_a_record_of_another_file_name_does_not_make_this_one_perfsuites(world):
    """A record copied beside a renamed file names the old name: the file is not recognised."""
    out = world / "x.csv"
    write_owned_file(out, "a\n", command="export")
    moved = world / "y.csv"
    os.rename(out, moved)
    os.rename(record_path(out), record_path(moved))
    with pytest.raises(OutputRefused, match="not a record perfsuite wrote"):
        write_owned_file(moved, "b\n", command="export")
    assert moved.read_text() == "a\n"


def test_a_write_cut_off_by_a_full_disk_leaves_no_file_and_no_record(tmp_path):
    """A new name on a filesystem too small for the file: the write fails in one line, and the
    record made for it goes with it; a file perfsuite wrote there before is still its own."""
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")
    with tmpfs(tmp_path / "small", size="64k") as small:
        out = small / "big.csv"
        with pytest.raises(OutputRefused, match=str(out)):
            write_owned_file(out, b"x" * 200_000, command="export")
        assert sorted(p.name for p in small.iterdir()) == []
        write_owned_file(out, b"a,b\n", command="export")
        with pytest.raises(OutputRefused, match=str(out)):
            write_owned_file(out, b"x" * 200_000, command="export")
        assert out.read_bytes() == b"a,b\n"
        write_owned_file(out, b"a,b\n1,2\n", command="export")  # still recognised
        assert sorted(p.name for p in small.iterdir()) == [".big.csv.perfsuite.json", "big.csv"]
