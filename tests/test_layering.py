"""The import graph holds: built-in workloads and the Triton plugin import only the host's
public API (``suite.__all__``, ``suite.checks``), never a plugin, another family or the
registry; the registry imports nothing of the host; and without torch, the torch workloads
are listed unavailable with the reason instead of failing when run."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import suite

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "plugins" / "perfsuite-triton" / "perfsuite_triton"
# This repository's own top-level packages besides the host: a workload imports none of them
# (registry, record format internals, tests, scripts, plugins, other families); anything not
# from this repository (the standard library, torch, DALI, transformers ...) it may import.
REPO_PACKAGES = {"registry", "schemas", "tests", "bench", "scripts", "workloads", "perfsuite_triton"}
PUBLIC_MODULES = {name for name in suite.__all__ if not name[0].isupper()} | {"checks"}


def imports(path: Path, top: Path = REPO) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module, names) of every import in a file, typing-only ones included;
    ``top``: the folder the file's top-level package lives in (relative imports resolve)."""
    package = list(path.relative_to(top).parent.parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module, tuple(a.name for a in node.names)))
    return found


def host_violation(module: str, names: tuple[str, ...]) -> str | None:
    """Why an import of the host is not its public API, or None."""
    parts = module.split(".")
    if parts == ["suite"]:
        private = [n for n in names if n not in suite.__all__] if names else []
        return f"suite names {private} are not in suite.__all__" if private or not names else None
    if len(parts) == 2 and parts[1] in PUBLIC_MODULES:
        return None
    return f"{module} is not the host's public API"


def violations(root: Path, own: str, top: Path) -> list[str]:
    """Imports under ``root`` of this repository's packages other than the public host API and
    ``own`` (``top``: the folder of the files' top-level package)."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(top)
        for line, module, names in imports(path, top):
            first = module.split(".")[0]
            if module == own or module.startswith(own + "."):
                continue
            if first == "suite":
                why = host_violation(module, names)
            elif first in REPO_PACKAGES:
                why = f"imports {module}"
            else:
                why = None
            if why:
                bad.append(f"{where}:{line}: {why}")
    return bad


@pytest.mark.parametrize("family", sorted(p.name for p in (REPO / "workloads").iterdir()
                                          if (p / "__init__.py").exists()))
def test_builtin_families_import_only_the_public_host_api_and_themselves(family):
    assert violations(REPO / "workloads" / family, f"workloads.{family}", REPO) == []


def test_the_workloads_package_itself_imports_nothing_of_its_families():
    assert [m for _, m, _ in imports(REPO / "workloads" / "__init__.py") if m != "__future__"] == []


def test_the_triton_plugin_imports_only_the_public_host_api():
    assert violations(PLUGIN, "perfsuite_triton", PLUGIN.parent) == []


def test_the_checker_catches_what_it_forbids(tmp_path):
    (tmp_path / "bad.py").write_text("from perfsuite_triton.kernels import fused_chain\n"
                                     "from workloads.kernels.memory import copy_case\n"
                                     "from suite.roofline import ceiling_table\n"
                                     "from suite import Case, roofline\n"
                                     "import registry\n"
                                     "from suite.dtypes import torch_dtype\n"
                                     "from suite import RunContext, copy_case\n"
                                     "from schemas.headline import headline\n"
                                     "import numpy, torch, transformers, os\n")
    found = [v.split(": ", 1)[1] for v in violations(tmp_path, "workloads.collectives", tmp_path)]
    assert found == ["imports perfsuite_triton.kernels", "imports workloads.kernels.memory",
                     "suite.roofline is not the host's public API", "suite names ['roofline'] are not in suite.__all__",
                     "imports registry", "imports schemas.headline"]


def test_registry_imports_nothing_of_the_host_or_the_workloads():
    bad = [f"{path.relative_to(REPO)}:{line}: {module}"
           for path in sorted((REPO / "registry").rglob("*.py"))
           for line, module, _ in imports(path)
           if module.split(".")[0] in ("suite", "workloads", "perfsuite_triton")]
    assert bad == []


# -- without torch ---------------------------------------------------------------------------------
# A meta path finder first in line that refuses torch: importlib.util.find_spec and import
# both fail as they do where torch is not installed.
HIDE_TORCH = '''
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch' (hidden by the test)", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''


# Its system under test is an HTTP server (which may run elsewhere): the client needs no torch.
NEEDS_NO_TORCH = {"inference.serving"}


def test_without_torch_the_torch_workloads_are_listed_unavailable_with_the_reason(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "PERFSUITE_PLUGINS": ""}
    proc = subprocess.run([sys.executable, "-m", "suite", "list", "--json", "--device", "cpu"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout) if "name" in r}
    assert {"kernels.gemm", "kernels.fusion", "collectives.all_reduce"} <= set(rows)
    for name, row in rows.items():
        if name in NEEDS_NO_TORCH:
            assert "torch" not in (row.get("reason") or ""), (name, row)
            continue
        assert row["available"] is False, name
        if name not in ("collectives.copy_bandwidth", "data.host_to_device"):  # these say first: needs a GPU
            assert row["reason"] == "needs the Python package 'torch', which is not installed", (name, row)
