"""Runs workloads: one measuring subprocess per run, in its own process group, with a
timeout that kills the whole tree; assembles, validates, writes and stores the record.

Order of writing: the JSON record file (and its MLLOG twin) first, atomically, then the
registry commit, so that a crash between the two leaves a file ``perfsuite import`` can load.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from schemas import RESULT_SCHEMA_VERSION
from suite import distributed, launcher, mllog, roofline
from suite import params as params_mod
from suite.controls import Controls
from suite.files import write_atomic
from suite.worker import now
from suite.plugins import WorkloadEntry

LOG_TAIL_LINES = 15


@dataclass
class RunRequest:
    entry: WorkloadEntry
    params: Any
    quick: bool
    controls: Controls
    launch: launcher.LaunchOptions
    division: str = "open"
    scenario: str | None = None
    reproduces: str | None = None  # the run id this run re-runs ('perfsuite reproduce')


def comparability_key(name: str, version: int, params: dict, scenario: str | None, division: str) -> str:
    """Apples to apples: runs compare only when this key is equal."""
    basis = json.dumps({"name": name, "version": version, "params": params, "scenario": scenario,
                        "division": division}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(basis.encode()).hexdigest()


def static_unmet(req: RunRequest) -> str | None:
    """Requirements checked before any process starts (cheap, no torch import)."""
    r = req.entry.cls.requirements
    if req.controls.device not in r.devices:
        return f"runs on {', '.join(r.devices)} only, not {req.controls.device}"
    for pkg in r.packages:
        try:
            found = find_spec(pkg) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"needs the Python package {pkg!r}, which is not installed"
    world = req.launch.nproc_per_node * req.launch.nnodes
    if world < r.min_world_size and launcher.slurm_world() < r.min_world_size:
        return f"needs a world size of at least {r.min_world_size} (this launch has {world})"
    if r.max_world_size is not None and max(world, launcher.slurm_world()) > r.max_world_size:
        return f"runs as at most {r.max_world_size} process(es) (this launch has {max(world, launcher.slurm_world())})"
    return None


def kill_tree(proc: subprocess.Popen, tag: str) -> None:
    """SIGKILL the process group and every descendant (torchrun's ranks included)."""
    launcher.kill_tree(proc.pid, tag)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # already gone: nothing to kill
    proc.wait()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Runner:
    """Runs requests one after another and stores each record as soon as it is complete."""

    def __init__(self, open_registry: Callable[[], Any], records_dir: Path,
                 echo: Callable[[str], None] = lambda s: None) -> None:
        self._open_registry = open_registry
        self._registry = None
        self.records_dir = records_dir
        self.echo = echo

    @property
    def registry(self) -> Any:
        """Opened on first use: SLURM tasks other than rank 0 never touch the registry."""
        if self._registry is None:
            self._registry = self._open_registry()
        return self._registry

    def run(self, req: RunRequest) -> dict | None:
        run_id = uuid.uuid4().hex
        started = now()
        unmet = static_unmet(req)
        if unmet:
            return self._finish(req, run_id, started, {"status": "skipped", "error": unmet}, None)
        workdir = Path(tempfile.mkdtemp(prefix=f"perfsuite-{run_id[:8]}-"))
        try:
            result, launch = self._launch(req, run_id, workdir)
            if not launch.records:
                return None  # another node's rank 0 writes the record
            return self._finish(req, run_id, started, result, launch)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _launch(self, req: RunRequest, run_id: str, workdir: Path) -> tuple[dict, launcher.Launch]:
        spec_path = workdir / "spec.json"
        result_path = workdir / "result.json"
        spec = {"run_id": run_id, "workload": req.entry.name, "params": params_mod.to_dict(req.params),
                "quick": req.quick, "controls": req.controls.to_dict(), "result_path": str(result_path),
                "artifact_dir": str(self.records_dir / "artifacts" / run_id)}
        spec_path.write_text(json.dumps(spec))
        launch = launcher.build(str(spec_path), req.launch, req.controls.device)
        log_path = workdir / "worker.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(launch.argv, env=launch.env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.wait(timeout=req.controls.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_tree(proc, launch.tag)
                timed_out = True
            finally:
                if proc.poll() is None:  # interrupted (Ctrl-C): leave no orphan ranks behind
                    kill_tree(proc, launch.tag)
        # Anything the launch started and left behind (a rank that outlived torchrun) goes too.
        launcher.kill_tree(proc.pid, launch.tag)
        if not launch.records:
            return {}, launch  # a rank of another node's record: nothing to report here
        rank_errors = distributed.read_rank_errors(spec_path)
        if timed_out:
            msg = f"timed out after {req.controls.timeout_s:g} s; process tree killed"
            where = rank_errors + (distributed.read_rank_progress(spec_path) if launch.world_size > 1 else [])
            if where:
                msg += "; " + "; ".join(where)
            return {"status": "timeout", "error": msg}, launch
        if result_path.exists():
            result = json.loads(result_path.read_text())
            if result["status"] == "failed" and rank_errors:
                result["error"] = "; ".join(rank_errors)
            return result, launch
        why = "; ".join(rank_errors) if rank_errors else f"measuring process {_exit_reason(proc.returncode)}"
        tail = _tail(log_path)
        self.echo(f"{req.entry.name}: {why}" + (f"\n{tail}" if tail else ""))
        return {"status": "failed", "error": why + (f" (last output: {tail.splitlines()[-1]})" if tail else "")}, launch

    def _finish(self, req: RunRequest, run_id: str, started: str, result: dict,
                launch: launcher.Launch | None) -> dict:
        from suite.environment import collect

        cls = req.entry.cls
        params = params_mod.to_dict(req.params)
        # A run that never reached its measuring process still gets a fingerprint (light: no torch).
        environment = result.get("environment") or collect(req.controls.device, deep=False)
        checks = result.get("checks", [])
        status = result["status"]
        if checks and not all(c["passed"] for c in checks):
            verification = "failed"
        elif checks and status == "success":
            verification = "passed"
        else:
            verification = "skipped"
        metrics = result.get("metrics", [])
        if status == "success":
            key = environment["measured_device"]["key"]
            ceilings = [r for r in (self.registry.latest_passed(w, key) for w in roofline.CEILING_SOURCES) if r]
            roofline.resolve(metrics, ceilings, cls.name)
        world = launch.world_size if launch else 1
        record = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "run_id": run_id,
            "started_at": result.get("started_at", started),
            "finished_at": result.get("finished_at", now()),
            "status": status,
            "error": result.get("error"),
            "workload": {
                "name": cls.name, "version": cls.version, "category": cls.category,
                "plugin": {"name": req.entry.plugin.name, "distribution": req.entry.plugin.distribution,
                           "version": req.entry.plugin.version},
                "params": params, "quick": req.quick, "scenario": req.scenario, "division": req.division,
                "primary_metric": cls.primary_metric,
            },
            "comparability_key": comparability_key(cls.name, cls.version, params, req.scenario, req.division),
            "controls": req.controls.to_dict(),
            "launch": {
                "launcher": launch.launcher if launch else "local", "world_size": world,
                "nnodes": launch.nnodes if launch else 1,
                "nproc_per_node": launch.nproc_per_node if launch else 1,
                "backend": result.get("backend"),
                "rdzv_endpoint": launch.rdzv_endpoint if launch else None,
                "topology": result.get("details", {}).get("topology") if world > 1 else None,
            },
            "environment": environment,
            "gpu_state": result.get("gpu_state"),
            "metrics": metrics,
            "verification": {"status": verification, "checks": checks},
            "details": result.get("details", {}),
        }
        if req.reproduces:
            record["reproduces"] = req.reproduces
        return self.store(record)

    def store(self, record: dict) -> dict:
        """Hash, validate, write the JSON file and MLLOG, then commit to the registry."""
        from registry import record_sha256, validate_record

        record.pop("sha256", None)
        record["sha256"] = record_sha256(record)
        validate_record(record)
        self.records_dir.mkdir(parents=True, exist_ok=True)
        path = self.records_dir / f"{record['run_id']}.json"
        write_atomic(path, json.dumps(record, indent=1, sort_keys=True))
        mllog.write(record, path.with_suffix(".mllog"))
        self.registry.store(record)
        return record


def resolve_controls(**kwargs: Any) -> Controls:
    """Controls from CLI options; None means 'the default from Controls'."""
    fields = {f.name for f in dataclasses.fields(Controls)}
    return Controls(**{k: v for k, v in kwargs.items() if k in fields and v is not None})


def repeat_seeds(seed: int | None, repeat: int) -> list[int]:
    """Unique seeds for the N runs of a repeat (MLPerf asks for them): the given seed and the
    next ones, or fresh random ones recorded in each record."""
    if seed is None:
        base = int.from_bytes(os.urandom(4), "little") & 0x3FFFFFFF
    else:
        base = seed
    return [base + i for i in range(repeat)]


