"""The import graph holds: no import cycle anywhere in the ``perfsuite`` namespace; built-in
workloads and the Triton plugin import only the host's public API (``perfsuite.__all__`` and
its public modules), never a plugin, another family or the registry; the registry imports
nothing of the host but the record rules (``perfsuite.schemas``); publishing
(``perfsuite.publish``) reads the registry, the record rules and the analysis, and only the CLI
imports it; only the CLI imports the CLI; no import runs up the host's floors (measurement <
the plugin API < what reads results < the engine < the front doors: ``FLOORS``); and without torch, the torch workloads are listed unavailable with the reason instead of
failing when run."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import perfsuite

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "plugins" / "perfsuite-triton" / "perfsuite_triton"
# The folders of the repository and the names they have in the one namespace.
ROOTS = {
    "perfsuite.registry": REPO / "registry",
    "perfsuite.schemas": REPO / "schemas",
    "perfsuite.workloads": REPO / "workloads",
    "perfsuite": REPO / "suite",
}
# The host's public modules: those named in __all__, the check helpers, the inputs, testing and
# the rules for writing where a user points (a workload that saves a model keeps them too).
PUBLIC_MODULES = {f"perfsuite.{name}" for name in perfsuite.__all__ if not name[0].isupper() and name[0] != "_"} | {
    "perfsuite.checks",
    "perfsuite.convergence",
    "perfsuite.owned_output",
    "perfsuite.serving_steady",
    "perfsuite.inputs.cache",
    "perfsuite.inputs.datasets",
    "perfsuite.inputs.images",
    "perfsuite.inputs.tensors",
    "perfsuite.testing",
}
# Not this repository's: a workload may import them (the standard library, torch, DALI ...).
OWN = ("perfsuite", "perfsuite_triton", "tests", "bench", "scripts", "tools")


def module_name(path: Path) -> str:
    """The dotted name a file of the repository has in the ``perfsuite`` namespace."""
    for package, root in ROOTS.items():
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            return ".".join([package] + (parts[:-1] if parts[-1] == "__init__" else parts))
    raise ValueError(f"{path} is not in the namespace")


def imports(path: Path, name: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module, names) of every import in a file, typing-only and function-local
    ones included; ``name``: the file's own dotted name (relative imports resolve against it)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module, tuple(a.name for a in node.names)))
    return found


def namespace_files() -> dict[str, Path]:
    return {
        module_name(path): path
        for root in ROOTS.values()
        for path in sorted(root.rglob("*.py"))
        if not any(path.is_relative_to(r) for r in ROOTS.values() if r != root and r.is_relative_to(root))
    }


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the namespace it imports (``from a import b`` names ``a.b`` where
    that is a module, else ``a``)."""
    files = namespace_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = set()
        for _, module, names in imports(path, name):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in files]
            deps.update(subs)
            if module in files and (len(subs) < len(names) or not names):
                deps.add(module)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere_in_the_namespace():
    graph = import_graph()
    assert len(graph) > 100  # the whole namespace was read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_typing_only_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def host_violation(module: str, names: tuple[str, ...]) -> str | None:
    """Why an import of the host is not its public API, or None."""
    if module == "perfsuite":
        private = [n for n in names if n not in perfsuite.__all__]
        return f"perfsuite names {private} are not in perfsuite.__all__" if private or not names else None
    if module in PUBLIC_MODULES:
        return None
    return f"{module} is not the host's public API"


def violations(root: Path, own: str, name_of) -> list[str]:
    """Imports under ``root`` of this repository's packages other than the public host API and
    ``own``; ``name_of(path)`` gives a file's dotted name."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        for line, module, names in imports(path, name_of(path)):
            if module == own or module.startswith(own + "."):
                continue
            first = module.split(".")[0]
            if first not in OWN:
                continue
            inside_host = first == "perfsuite" and not module.startswith(
                ("perfsuite.registry", "perfsuite.schemas", "perfsuite.workloads")
            )
            why = host_violation(module, names) if inside_host else f"imports {module}"
            if why:
                bad.append(f"{path.relative_to(root.parent)}:{line}: {why}")
    return bad


@pytest.mark.parametrize(
    "family", sorted(p.name for p in (REPO / "workloads").iterdir() if (p / "__init__.py").exists())
)
def test_builtin_families_import_only_the_public_host_api_and_themselves(family):
    assert violations(REPO / "workloads" / family, f"perfsuite.workloads.{family}", module_name) == []


def test_the_workloads_package_itself_imports_nothing_of_its_families():
    path = REPO / "workloads" / "__init__.py"
    assert [m for _, m, _ in imports(path, "perfsuite.workloads") if m != "__future__"] == []


def test_the_triton_plugin_imports_only_the_public_host_api():
    def name_of(path: Path) -> str:
        parts = list(path.relative_to(PLUGIN.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    assert violations(PLUGIN, "perfsuite_triton", name_of) == []


def test_the_checker_catches_what_it_forbids(tmp_path):
    family = tmp_path / "collectives"
    family.mkdir()
    (family / "bad.py").write_text(
        "from perfsuite_triton.kernels import fused_chain\n"
        "from perfsuite.workloads.kernels.memory import copy_case\n"
        "from perfsuite.measure.roofline import ceiling_table\n"
        "from perfsuite import Case, roofline\n"
        "from perfsuite import registry\n"
        "from perfsuite.dtypes import torch_dtype\n"
        "from perfsuite import RunContext, copy_case\n"
        "from perfsuite.schemas.headline import headline\n"
        "from . import _ops\n"
        "import numpy, torch, transformers, os\n"
    )
    found = [
        v.split(": ", 1)[1]
        for v in violations(family, "perfsuite.workloads.collectives", lambda p: "perfsuite.workloads.collectives.bad")
    ]
    assert found == [
        "imports perfsuite_triton.kernels",
        "imports perfsuite.workloads.kernels.memory",
        "perfsuite.measure.roofline is not the host's public API",
        "perfsuite names ['roofline'] are not in perfsuite.__all__",
        "perfsuite names ['registry'] are not in perfsuite.__all__",
        "imports perfsuite.schemas.headline",
    ]


def test_registry_imports_nothing_of_the_host_but_the_record_rules():
    files = namespace_files()
    bad = []
    for path in sorted((REPO / "registry").rglob("*.py")):
        for line, module, names in imports(path, module_name(path)):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in files] or [module]
            bad += [
                f"{path.relative_to(REPO)}:{line}: {t}"
                for t in targets
                if t.split(".")[0] in OWN and not t.startswith(("perfsuite.registry", "perfsuite.schemas"))
            ]
    assert bad == []


PUBLISH = "perfsuite.publish"
# What publishing reads: the registry, the record rules, the analysis and statistics it shows
# (compare's verdict, history's change points, the roofline's points), and the one way a
# command writes where a user points it. Never the engine, a workload or the CLI.
PUBLISH_READS = (
    PUBLISH,
    "perfsuite.registry",
    "perfsuite.schemas",
    "perfsuite.analysis",
    "perfsuite.measure",
    "perfsuite.owned_output",
)


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def publish_violations(graph: dict[str, set[str]]) -> list[str]:
    """Arrows into publishing from outside it and the CLI, and arrows out of publishing to
    anything but what it reads (:data:`PUBLISH_READS`)."""
    bad = []
    for name, deps in graph.items():
        publishing = _inside(name, PUBLISH)
        for dep in sorted(deps):
            if publishing and not any(_inside(dep, p) for p in PUBLISH_READS):
                bad.append(f"{name} -> {dep}: publishing reads only {', '.join(PUBLISH_READS[1:])}")
            elif not publishing and _inside(dep, PUBLISH) and not _inside(name, "perfsuite.cli"):
                bad.append(f"{name} -> {dep}: only the CLI imports publishing")
    return sorted(bad)


def test_only_the_cli_imports_publishing_and_publishing_reads_only_the_registry_and_analysis():
    graph = import_graph()
    assert {"perfsuite.publish.submissions.tree", "perfsuite.publish.leaderboard.site"} <= set(graph)
    assert publish_violations(graph) == []


def test_the_publishing_rule_catches_what_it_forbids():
    graph = {
        "perfsuite.cli.submit": {"perfsuite.publish.submissions.filing"},
        "perfsuite.api": {"perfsuite.publish.leaderboard"},
        "perfsuite.registry.store": {"perfsuite.publish.submissions.tree"},
        "perfsuite.publish.leaderboard.site": {"perfsuite.analysis.history", "perfsuite.engine.runner"},
        "perfsuite.publish.submissions.filing": {"perfsuite.publish.submissions.tree", "perfsuite.schemas.seal"},
    }
    assert [v.split(":")[0] for v in publish_violations(graph)] == [
        "perfsuite.api -> perfsuite.publish.leaderboard",
        "perfsuite.publish.leaderboard.site -> perfsuite.engine.runner",
        "perfsuite.registry.store -> perfsuite.publish.submissions.tree",
    ]


def test_only_the_cli_imports_the_cli():
    graph = import_graph()
    bad = sorted(
        f"{name} -> {dep}"
        for name, deps in graph.items()
        if not name.startswith("perfsuite.cli") and name != "perfsuite.__main__"
        for dep in deps
        if dep == "perfsuite.cli" or dep.startswith("perfsuite.cli.")
    )
    assert bad == []


# -- without torch ---------------------------------------------------------------------------------
# A meta path finder first in line that refuses torch: importlib.util.find_spec and import
# both fail as they do where torch is not installed.
HIDE_TORCH = """
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch' (hidden by the test)", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
"""


# Its system under test is an HTTP server (which may run elsewhere): the client needs no torch.
NEEDS_NO_TORCH = {"inference.serving"}


def test_without_torch_the_torch_workloads_are_listed_unavailable_with_the_reason(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "PERFSUITE_PLUGINS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", "list", "--json", "--device", "cpu"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
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


def test_nothing_imports_the_source_folders_by_their_folder_names():
    """``suite``, ``registry``, ``schemas`` and ``workloads`` are folders, not packages: code
    (tests' subprocess snippets included) that imports them by those names works only from the
    repository root and never for an installed perfsuite. An old commit's code, imported on
    purpose, says so on its line ("not perfsuite.")."""
    folder_import = re.compile(r"^\s*(from|import) (suite|registry|schemas|workloads)\b")
    offenders = [
        f"{path.relative_to(REPO)}: {line.strip()}"
        for path in sorted(REPO.glob("**/*.py"))
        if not {".venv", "build", "site"} & set(path.relative_to(REPO).parts)
        for line in path.read_text(encoding="utf-8").splitlines()
        if folder_import.match(line) and "not perfsuite." not in line
    ]
    assert offenders == []


# -- the floors of the host ------------------------------------------------------------------------
# Bottom to top; a module imports only modules on its own floor or below. A name is a package
# (everything under it) or a module; ``perfsuite`` itself is only the package's __init__.
FLOORS = (
    (
        "measurement and the basics",
        (
            "perfsuite.measure",  # timing, statistics, NVML, roofline, profiling
            "perfsuite.processes",  # what a launch tags and how it is killed
            "perfsuite.files",  # atomic writes
            "perfsuite.owned_output",
            "perfsuite.owned_file",  # which single file a command may replace
            "perfsuite.controls",
            "perfsuite.dtypes",
            "perfsuite.text",
            "perfsuite.version",
            "perfsuite.plans",  # data
        ),
    ),
    (
        "the plugin API",
        (
            "perfsuite.case",
            "perfsuite.checks",
            "perfsuite.convergence",  # MLPerf's reference convergence points, which training checks against
            "perfsuite.context",
            "perfsuite.workload",
            "perfsuite.distributed",
            "perfsuite.inputs",
            "perfsuite.copies",
            "perfsuite.fused_chain",
            "perfsuite.headlines",
            "perfsuite.serving_steady",  # the serving workload's steady-state rule, the record rules' own
            "perfsuite.hookspecs",
            "perfsuite.plugins",
            # the reference tools a workload reaches through RunContext.crosscheck and the
            # do_bench comparison of RunContext.measure: the context imports them
            "perfsuite.crosscheck",
        ),
    ),
    ("what reads results", ("perfsuite.analysis", "perfsuite.doctor", "perfsuite.publish")),
    ("the engine", ("perfsuite.engine",)),
    ("the front doors", ("perfsuite.cli", "perfsuite.api", "perfsuite.testing", "perfsuite", "perfsuite.__main__")),
)
# Folders of the namespace with rules of their own above (the families, the registry, the record rules).
OWN_RULES = ("perfsuite.workloads", "perfsuite.registry", "perfsuite.schemas")


def floor_of(module: str) -> int | None:
    """The floor of a module (the longest name of :data:`FLOORS` it is inside), None if on none."""
    held = [
        (len(name), index)
        for index, (_, names) in enumerate(FLOORS)
        for name in names
        if module == name or (name != "perfsuite" and module.startswith(name + "."))
    ]
    return max(held)[1] if held else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every arrow from a module to one on a higher floor, naming both floors."""
    bad = []
    for name, deps in sorted(graph.items()):
        own = floor_of(name)
        for dep in sorted(deps):
            up = floor_of(dep)
            if own is not None and up is not None and up > own:
                bad.append(f"{name} -> {dep}: {FLOORS[own][0]} imports {FLOORS[up][0]}")
    return bad


def test_no_import_runs_up_the_floors():
    """The host's floors, bottom to top: measurement and the basics (``perfsuite.measure``,
    ``processes``, ``files``, ``controls`` ...) < the plugin API (``case``, ``checks``,
    ``context``, ``workload``, ``distributed``, ``inputs``, ``plugins`` and the cross-checks the
    context reaches) < what reads results (``analysis``, ``doctor``, ``publish``) < the engine <
    the front doors (``cli``, ``perfsuite.run`` in ``api``, ``testing``, the package itself). A
    module imports its own floor and those below, never one above: the plugin API never
    imports the engine, measurement never imports the API. Every module of the host is on a floor."""
    graph = import_graph()
    host = {name for name in graph if name == "perfsuite" or not name.startswith(OWN_RULES)}
    assert {"perfsuite.processes", "perfsuite.measure.profiling", "perfsuite.engine.requests"} <= host
    assert sorted(name for name in host if floor_of(name) is None) == []
    assert upward_imports(graph) == []


def test_the_floors_rule_catches_what_it_forbids(tmp_path):
    """Modules planted with the imports that ran up the floors (typing-only and function-local
    ones included) are each caught; the imports down the floors beside them are not."""
    planted = {
        "perfsuite.distributed": "from perfsuite.engine.launcher import SPEC_ENV\nfrom perfsuite.files import write_atomic\n",
        "perfsuite.context": "def profile():\n    from perfsuite.engine import launcher\n    from perfsuite.measure import profiling\n",
        "perfsuite.crosscheck.nccl_tests": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from perfsuite.engine.runner import Runner\nfrom perfsuite.processes import kill_family\n",
        "perfsuite.measure.timing": "import perfsuite.checks\nfrom perfsuite import text\n",
        "perfsuite.engine.runner": "from perfsuite.cli import run\nfrom perfsuite import processes\n",
        "perfsuite.cli.run": "from perfsuite.engine.requests import build_requests\n",
    }
    files = namespace_files()
    graph = import_graph()
    for name, source in planted.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        deps = set()
        for _, module, names in imports(path, name):
            subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in files}
            deps |= subs or {module}
        graph[name] = deps
    assert [v.split(":")[0] for v in upward_imports(graph)] == [
        "perfsuite.context -> perfsuite.engine.launcher",
        "perfsuite.crosscheck.nccl_tests -> perfsuite.engine.runner",
        "perfsuite.distributed -> perfsuite.engine.launcher",
        "perfsuite.engine.runner -> perfsuite.cli.run",
        "perfsuite.measure.timing -> perfsuite.checks",
    ]
