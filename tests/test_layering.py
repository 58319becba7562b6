"""The import graph points one way: ``registry`` knows records, never the host (``suite``)
or a workload. Read from the source with ``ast``, so a lazy import inside a function
counts as much as one at the top of a module."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN_FROM_REGISTRY = ("suite", "workloads", "plugins", "perfsuite_triton")


def imported_modules(path: Path) -> set[str]:
    """Absolute module names imported anywhere in ``path`` (relative imports are its own package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
    return names


def test_registry_imports_nothing_of_suite_or_workloads():
    files = sorted((REPO / "registry").rglob("*.py"))
    assert len(files) >= 6
    offending = {
        f"{path.relative_to(REPO)}: {name}"
        for path in files for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN_FROM_REGISTRY
    }
    assert not offending, sorted(offending)


def test_the_import_reader_sees_lazy_and_from_imports(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import os\nfrom . import x\ndef f():\n    from suite.cli import cli\n"
                      "    importlib.import_module('workloads.kernels')\n")
    assert imported_modules(sample) == {"os", "suite.cli", "workloads.kernels"}
