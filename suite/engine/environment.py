"""The environment fingerprint: what a result depends on besides the workload itself.

Taken in the measuring process (it has torch loaded already) and stored in every record;
``perfsuite env`` prints the same. Plugins add their own facts through the
``perfsuite_collect_environment`` hook.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from perfsuite.measure import nvml

# Distributions whose versions change results; plugins add theirs through the hook.
TRACKED_PACKAGES = (
    "torch",
    "triton",
    "numpy",
    "nvidia-ml-py",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-cublas-cu12",
    "nvidia-cublas",
    "transformers",
    "nvidia-dali-cuda130",
    "mlcommons-loadgen",
    "pluggy",
    "sqlalchemy",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux: fall back to what platform knows
    return platform.processor() or platform.machine()


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def suite_source() -> dict:
    """Version of the suite, and the git commit and dirty flag of its checkout if it is one."""
    from perfsuite import version

    __version__ = version.__version__
    root = Path(version.__file__).resolve().parent.parent  # the checkout that holds suite/ (or site-packages)
    commit = dirty = None
    if (root / ".git").exists():
        try:
            commit = (
                subprocess.run(
                    ["git", "-C", str(root), "rev-parse", "HEAD"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=True,
                ).stdout.strip()
                or None
            )
            status = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
            dirty = bool(status.strip())
        except (OSError, subprocess.SubprocessError):
            commit = dirty = None  # git missing, or a partial copy of .git: fall through
    if commit is None and os.environ.get("PERFSUITE_GIT_COMMIT"):
        # A copy of a checkout whose git history did not travel (shipped to a GPU host):
        # the sender states its commit.
        commit = os.environ["PERFSUITE_GIT_COMMIT"]
        dirty = os.environ.get("PERFSUITE_GIT_DIRTY", "1") != "0"
    return {"version": __version__, "git_commit": commit, "git_dirty": dirty}


def torch_runtime() -> dict:
    """CUDA, cuDNN and NCCL versions as torch sees them (imports torch)."""
    try:
        import torch
    except ImportError:
        return {}
    out = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        out["cudnn"] = str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
    except RuntimeError as exc:
        out["cudnn"] = f"unavailable: {exc}"
    if torch.cuda.is_available():
        from perfsuite.distributed import nccl_version

        try:
            out["nccl"] = nccl_version()
        except (RuntimeError, AttributeError) as exc:
            out["nccl"] = f"unavailable: {exc}"
    return out


def gpus(with_torch: bool) -> list[dict]:
    out = nvml.describe_gpus()
    if with_torch and out:
        import torch

        if torch.cuda.is_available():
            props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
            for g in out:
                p = next((p for p in props if nvml.same_uuid(str(getattr(p, "uuid", "")), g["uuid"])), None)
                if p is not None:
                    g["sm_count"] = p.multi_processor_count
                    g["l2_cache_bytes"] = getattr(p, "L2_cache_size", None)
    return out


def device_key(kind: str, name: str, uuid: str | None, host: str) -> str:
    """Identity of the measured device: a GPU by its UUID, a CPU by host and model."""
    basis = f"cuda|{uuid}" if kind == "cuda" and uuid else f"{kind}|{host}|{name}"
    return hashlib.sha256(basis.encode()).hexdigest()[:32]


def measured_device(device: str, gpu_list: list[dict], host: str, cpu: str, deep: bool) -> dict:
    """The device the run measured. On CUDA, torch's current device when ``deep``; without
    torch (a run that never reached its measuring process) NVML's first GPU."""
    if device == "cuda" and deep:
        import torch

        uuid, gpu = nvml.current_cuda_gpu(gpu_list)
        uuid = gpu["uuid"] if gpu is not None else uuid.removeprefix("GPU-")  # NVML's form when it knows the GPU
        name = torch.cuda.get_device_name()
        return {"kind": "cuda", "name": name, "uuid": uuid or None, "key": device_key("cuda", name, uuid, host)}
    if device == "cuda" and gpu_list:
        g = gpu_list[0]
        return {
            "kind": "cuda",
            "name": g["name"],
            "uuid": g["uuid"],
            "key": device_key("cuda", g["name"], g["uuid"], host),
        }  # as the deep path: NVML's UUID
    return {"kind": "cpu", "name": cpu, "uuid": None, "key": device_key("cpu", cpu, None, host)}


COMM_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "NVSHMEM_")


def comm_env(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> dict[str, str]:
    """The NCCL (and torch's NCCL, NVSHMEM) variables set where the run was started: a user's
    NCCL_ALGO or NCCL_GRAPH_MIXING_SUPPORT changes what a collective measures. The suite's own
    settings for its measuring processes are in the record's ``launch.env``."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(COMM_ENV_PREFIXES)}


def collect(device: str = "cpu", deep: bool = True) -> dict:
    """The full fingerprint. ``deep`` imports torch for CUDA/cuDNN/NCCL versions and SM counts."""
    from perfsuite.plugins import get_host

    host = socket.gethostname()
    cpu = cpu_model()
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
        memory = int(psutil.virtual_memory().total)
    except ImportError:
        physical, memory = None, int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    gpu_list = gpus(with_torch=deep)
    env: dict[str, Any] = {
        "host": host,
        "os": f"{platform.system()} {platform.release()} ({platform.platform()})",
        "python": sys.version.split()[0],
        "cpu": {"model": cpu, "logical_cores": os.cpu_count() or 1, "physical_cores": physical},
        "memory_bytes": memory,
        "packages": package_versions(),
        "runtime": torch_runtime() if deep else {},
        "gpus": gpu_list,
        "nvml": nvml.init()[1] or "available",
        "suite": suite_source(),
        "plugins": [
            {"name": p.name, "distribution": p.distribution, "version": p.version, "error": p.error}
            for p in get_host().plugins.values()
        ],
        "measured_device": measured_device(device, gpu_list, host, cpu, deep),
        "comm_env": comm_env(),
    }
    # A plugin's fingerprint bug is recorded, not fatal to the run.
    for failure in get_host().call_each("perfsuite_collect_environment", env=env):
        env.setdefault("plugin_errors", {})[failure.plugin] = failure.error
    return env
