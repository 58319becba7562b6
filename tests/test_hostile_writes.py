"""Every command that writes where a user points it writes only what it owns: regular files,
never through a device, a FIFO or a symlink, never over a folder of someone else's files, and a
refusal is one line and exit 2 with everything on disk as it was.

Each case runs the real CLI in a fresh process against a real filesystem the test made: a
scratch tree under ``tmp_path``, a tmpfs mounted there (root only), device nodes made with
``mknod`` (root only) and FIFOs. The snapshot a case compares holds every entry's kind, mode,
mtime and, for a regular file, its bytes: "unchanged" means nothing was replaced, moved,
deleted or touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.factories import make_record
from support.safety_support import can_mount, is_root, tmpfs

from perfsuite.registry import open_registry

MANIFEST = ".perfsuite-manifest.json"


def perfsuite(env: dict, *args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """``perfsuite ARGS`` in a fresh process of the venv's interpreter, in ``cwd`` (default: the
    test's own folder, never the repository)."""
    return subprocess.run(
        [sys.executable, "-m", "perfsuite", *args],
        env=env,
        cwd=cwd or Path(env["PERFSUITE_RECORDS"]).parent,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one error line of a refusal: exit 2, no traceback, a single ``Error:`` line on stderr."""
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def snapshot(folder: Path, folder_mtimes: bool = True) -> dict[str, tuple]:
    """Every entry below ``folder`` (itself included), never following a symlink: its kind and
    mode, its mtime, and its bytes (a regular file), its target (a symlink) or its device.
    ``folder_mtimes=False``: a folder's mtime is left out (a command that made and removed
    its own entries in it changed that, and nothing else)."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                content: object = Path(path).read_bytes()
            elif stat.S_ISLNK(st.st_mode):
                content = os.readlink(path)
            else:
                content = st.st_rdev
            mtime = st.st_mtime_ns if folder_mtimes or not stat.S_ISDIR(st.st_mode) else None
            found[os.path.relpath(path, folder)] = (st.st_mode, mtime, content)
    return found


@pytest.fixture
def env(perfsuite_env):
    """A registry holding two comparable runs of one workload (enough for every writing command)."""
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for seed in (1, 2):
            reg.store(make_record(controls={"seed": seed}))
    return perfsuite_env


def run_ids(env: dict) -> list[str]:
    rows = json.loads(ok(perfsuite(env, "results", "--json")).stdout)
    return [r["run_id"] for r in rows]


@pytest.fixture
def world(tmp_path) -> Path:
    """The folder a test points commands into, apart from the registry and records beside it
    (which a command may change): its snapshot before and after must be equal."""
    folder = tmp_path / "world"
    folder.mkdir()
    return folder


@pytest.fixture
def scratch(world) -> Path:
    """A tree of someone else's files: scratch/notes.txt, scratch/a/keep.txt, scratch/a/b/deep.txt."""
    root = world / "scratch"
    (root / "a" / "b").mkdir(parents=True)
    (root / "notes.txt").write_text("the user's notes\n")
    (root / "a" / "keep.txt").write_text("keep me\n")
    (root / "a" / "b" / "deep.txt").write_text("deep\n")
    return root


@contextlib.contextmanager
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder this process cannot write into: a tmpfs remounted read-only (root), else mode 0555."""
    folder = tmp_path / "ro"
    if is_root():
        if not can_mount(tmp_path):
            pytest.skip("root that may not mount: no folder is read-only to it")
        with tmpfs(folder, size="1m"):
            (folder / "already.txt").write_text("was here\n")
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
            yield folder
        return
    folder.mkdir()
    (folder / "already.txt").write_text("was here\n")
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)


# -- leaderboard --out --------------------------------------------------------------------------


def test_leaderboard_refuses_a_folder_holding_a_users_file(env, scratch):
    before = snapshot(scratch.parent)
    line = refused(perfsuite(env, "leaderboard", "--out", str(scratch)))
    assert str(scratch) in line and MANIFEST in line
    assert snapshot(scratch.parent) == before


@pytest.mark.parametrize("out", ["", ".", "..", "../.."])
def test_leaderboard_refuses_the_current_folder_and_its_parents(env, scratch, out):
    """Run from scratch/a/b: '' and '.' are that folder, '..' and '../..' hold it."""
    before = snapshot(scratch.parent)
    line = refused(perfsuite(env, "leaderboard", "--out", out, cwd=scratch / "a" / "b"))
    assert "current folder" in line
    assert snapshot(scratch.parent) == before


def test_leaderboard_refuses_the_home_folder(env, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("the user's profile\n")
    before = snapshot(tmp_path / "home")
    line = refused(perfsuite({**env, "HOME": str(home)}, "leaderboard", "--out", str(home)))
    assert "home folder" in line
    line = refused(perfsuite({**env, "HOME": str(home)}, "leaderboard", "--out", "~"))
    assert "home folder" in line
    assert snapshot(home) == before


def test_leaderboard_refuses_a_mount_point(env, tmp_path, world):
    """A tmpfs mounted in the scratch tree (root), empty and not: refused before anything is
    written, beside it or in it. /sys/fs/cgroup, where it is a mount point, is refused as one
    (its parent cannot take a new folder, so a regression could not write there)."""
    if os.path.ismount("/sys/fs/cgroup"):
        line = refused(perfsuite(env, "leaderboard", "--out", "/sys/fs/cgroup", cwd=world))
        assert "mount point" in line
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")
    with tmpfs(world / "mnt", size="4m") as mnt:
        before = snapshot(world)
        assert "mount point" in refused(perfsuite(env, "leaderboard", "--out", str(mnt)))
        assert snapshot(world) == before
        (mnt / "theirs.txt").write_text("on the mounted filesystem\n")
        before = snapshot(world)
        assert "mount point" in refused(perfsuite(env, "leaderboard", "--out", str(mnt)))
        assert snapshot(world) == before


def test_leaderboard_rebuild_replaces_only_its_own_files(env, world):
    site = world / "site"
    ok(perfsuite(env, "leaderboard", "--out", str(site)))
    manifest = json.loads((site / MANIFEST).read_text())
    assert "index.html" in manifest["files"]
    (site / "README.user").write_text("my notes about the board\n")
    (site / "workloads" / "mine.html").write_text("<p>my page</p>\n")
    ok(perfsuite(env, "leaderboard", "--out", str(site)))
    assert (site / "README.user").read_text() == "my notes about the board\n"
    assert (site / "workloads" / "mine.html").read_text() == "<p>my page</p>\n"
    assert (site / "index.html").is_file()
    rebuilt = json.loads((site / MANIFEST).read_text())["files"]
    assert "README.user" not in rebuilt and "workloads/mine.html" not in rebuilt
    assert sorted(p.name for p in world.iterdir() if p.name.startswith(".")) == []  # no staging left


def test_a_manifest_naming_files_outside_its_folder_is_refused(env, world):
    """A manifest edited to list ``../victim.txt``: not perfsuite's, so the folder is refused
    and the file it names survives."""
    site = world / "site"
    ok(perfsuite(env, "leaderboard", "--out", str(site)))
    victim = world / "victim.txt"
    victim.write_text("outside the site\n")
    manifest = json.loads((site / MANIFEST).read_text())
    manifest["files"].append("../victim.txt")
    (site / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(world)
    line = refused(perfsuite(env, "leaderboard", "--out", str(site)))
    assert "not a manifest perfsuite wrote" in line
    assert snapshot(world) == before


def test_leaderboard_refuses_a_missing_parent_unless_asked(env, world):
    out = world / "no" / "such" / "site"
    line = refused(perfsuite(env, "leaderboard", "--out", str(out)))
    assert str(world / "no" / "such") in line and "--parents" in line
    assert not (world / "no").exists()
    ok(perfsuite(env, "leaderboard", "--out", str(out), "--parents"))
    assert (out / "index.html").is_file()


# -- export --out -------------------------------------------------------------------------------


def test_export_refuses_a_character_device(env, world):
    if not is_root():
        pytest.skip("mknod of a character device needs root")
    dev = world / "full"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # the /dev/full device
    except PermissionError:
        pytest.skip("mknod not permitted here (no CAP_MKNOD)")
    before = snapshot(world)
    line = refused(perfsuite(env, "export", "--out", str(dev), timeout=60))
    assert str(dev) in line and "character device" in line
    assert snapshot(world) == before


def test_export_refuses_a_fifo_without_opening_it(env, world):
    fifo = world / "pipe.csv"
    os.mkfifo(fifo)
    before = snapshot(world)
    line = refused(perfsuite(env, "export", "--out", str(fifo), timeout=60))  # a blocking open would time out
    assert str(fifo) in line and "FIFO" in line
    assert snapshot(world) == before


def test_export_refuses_a_symlink(env, world):
    target = world / "precious.txt"
    target.write_text("not a CSV\n")
    link = world / "out.csv"
    link.symlink_to(target)
    before = snapshot(world)
    line = refused(perfsuite(env, "export", "--out", str(link)))
    assert str(link) in line and "symlink" in line
    assert snapshot(world) == before


def test_export_refuses_a_missing_parent_unless_asked(env, world):
    out = world / "no" / "such" / "x.csv"
    line = refused(perfsuite(env, "export", "--out", str(out)))
    assert str(world / "no" / "such") in line and "--parents" in line
    assert not (world / "no").exists()
    ok(perfsuite(env, "export", "--out", str(out), "--parents"))
    assert out.read_text().startswith("run_id,")


def test_export_replaces_a_regular_file_it_wrote_and_refuses_one_it_did_not(env, world):
    out = world / "x.csv"
    out.write_text("old\n")
    before = snapshot(world)
    line = refused(perfsuite(env, "export", "--out", str(out)))
    assert str(out) in line and "perfsuite did not write it" in line
    assert snapshot(world) == before
    out.unlink()
    for _ in range(2):  # the second replaces what the first wrote
        ok(perfsuite(env, "export", "--out", str(out)))
    assert out.read_text().startswith("run_id,") and stat.S_ISREG(os.lstat(out).st_mode)
    assert sorted(p.name for p in world.iterdir() if p.name.startswith(".")) == [".x.csv.perfsuite.json"]


def test_export_into_proc_or_a_read_only_folder_is_one_line(env, tmp_path):
    line = refused(perfsuite(env, "export", "--out", "/proc/x.csv"))
    assert "/proc/x.csv" in line
    with read_only_folder(tmp_path) as ro:
        before = snapshot(ro)
        line = refused(perfsuite(env, "export", "--out", str(ro / "x.csv")))
        assert str(ro / "x.csv") in line
        line = refused(perfsuite(env, "export", "--out", str(ro / "already.txt")))
        assert snapshot(ro) == before


# -- compare --junit and history --plot ---------------------------------------------------------


@pytest.mark.parametrize("command", ["compare", "history"])
def test_junit_and_plot_into_proc_or_a_read_only_folder_are_one_line(env, tmp_path, world, command):
    def args(path: str) -> list[str]:
        if command == "compare":
            a, b = run_ids(env)
            return ["compare", a, b, "--junit", path]
        return ["history", "--workload", "kernels.gemm", "--plot", path]

    suffix = ".xml" if command == "compare" else ".svg"
    assert f"/proc/x{suffix}" in refused(perfsuite(env, *args(f"/proc/x{suffix}")))
    with read_only_folder(tmp_path) as ro:
        before = snapshot(ro)
        assert str(ro / f"x{suffix}") in refused(perfsuite(env, *args(str(ro / f"x{suffix}"))))
        assert snapshot(ro) == before
    fifo = world / f"pipe{suffix}"
    os.mkfifo(fifo)
    before = snapshot(world)
    assert "FIFO" in refused(perfsuite(env, *args(str(fifo)), timeout=30))  # an open for writing would block
    assert snapshot(world) == before


# -- submit -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["acme\nevil", "acme\tx", "a\x1b[31mb", "a\\b", "acme\x7f"])
def test_submit_refuses_a_name_with_a_control_character_or_a_separator(env, tmp_path, name):
    root = tmp_path / "tree"
    first = run_ids(env)[0]
    line = refused(perfsuite(env, "submit", "--org", name, "--system", "box", "--root", str(root), first))
    assert "--org" in line
    line = refused(perfsuite(env, "submit", "--org", "acme", "--system", name, "--root", str(root), first))
    assert "--system" in line
    assert not root.exists()


def test_submit_that_would_fail_its_own_check_writes_nothing(perfsuite_env, tmp_path):
    """Two runs of one configuration with the same seed: the check refuses them together, so
    submit refuses before writing, and a tree already there is left exactly as it was."""
    with open_registry(perfsuite_env["PERFSUITE_DB"]) as reg:
        for _ in range(2):
            reg.store(make_record(controls={"seed": 5}))
    root = tmp_path / "tree"
    root.mkdir()
    (root / "README").write_text("the tree's readme\n")
    before = snapshot(root)
    proc = perfsuite(
        perfsuite_env, "submit", "--org", "acme", "--system", "box", "--root", str(root), *run_ids(perfsuite_env)
    )
    line = refused(proc)
    assert "seed 5" in line and "nothing written" in line
    assert snapshot(root) == before


def test_submit_cut_off_by_a_full_disk_leaves_none_of_its_files(env, tmp_path):
    if not can_mount(tmp_path):
        pytest.skip("needs root allowed to mount a tmpfs")
    with tmpfs(tmp_path / "small", size="12k") as small:
        (small / "theirs.txt").write_text("someone else's\n")
        before = snapshot(small, folder_mtimes=False)
        proc = perfsuite(
            env, "submit", "--org", "acme", "--system", "box", "--root", str(small / "tree"), *run_ids(env)
        )
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert snapshot(small, folder_mtimes=False) == before
