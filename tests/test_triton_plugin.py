"""The separately packaged plugin ``plugins/perfsuite-triton``: its kernels against torch,
its workloads through the contract and through the runner, and its packaging in a fresh
virtual environment.

Triton decides when a kernel module is imported whether its kernels are compiled for a
GPU or run by its CPU interpreter (``TRITON_INTERPRET=1``). So everything that imports
the kernels runs in a subprocess started with the variable set, never in this process,
where another test may already have imported triton without it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

import pytest
from support.suite_copy import IGNORE, copy_suite

import perfsuite
from tests.conftest import REPO, run_cli

PLUGIN = REPO / "plugins" / "perfsuite-triton"
PACKAGE = PLUGIN / "perfsuite_triton"
WORKLOADS = ("triton.fused_chain", "triton.softmax", "triton.matmul")
HOOKS = ["perfsuite_collect_environment", "perfsuite_register_commands", "perfsuite_register_workloads"]
# What a plugin may import from perfsuite: the names it exports, and the checks helpers.
PUBLIC_SUITE_NAMES = set(perfsuite.__all__)  # the public API, as it declares it
PUBLIC_SUITE_MODULES = {"perfsuite.checks", "perfsuite.dtypes", "perfsuite.fused_chain"}

needs_triton = pytest.mark.skipif(
    find_spec("torch") is None or find_spec("triton") is None,
    reason="needs torch and triton installed (the plugin's dependencies)",
)


def interpreter_env(**extra: str) -> dict:
    """This checkout's suite and plugin first on the path, triton's interpreter on."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(PLUGIN), str(REPO), env.get("PYTHONPATH", "")] if p)
    env["TRITON_INTERPRET"] = "1"
    env.update(extra)
    return env


def run_python(code: str, env: dict, timeout: float = 300) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


# -- the plugin module stays light and uses only the public API ---------------------------------
def test_plugin_import_needs_neither_torch_nor_triton():
    out = run_python(
        """
        import json, sys
        import perfsuite_triton.plugin as plugin
        found = []
        plugin.perfsuite_register_workloads(register=found.append)
        print(json.dumps({"heavy": [m for m in ("torch", "triton") if m in sys.modules],
                          "workloads": [(c.name, c.category, c.requirements.packages) for c in found]}))
    """,
        interpreter_env(),
    )
    result = json.loads(out)
    assert result["heavy"] == []
    assert [w[0] for w in result["workloads"]] == list(WORKLOADS)
    for _, category, packages in result["workloads"]:
        assert category == "kernels" and "triton" in packages


def test_plugin_imports_only_the_public_suite_api():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(PLUGIN)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                offenders += [
                    f"{where} import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] == "perfsuite" and a.name not in PUBLIC_SUITE_MODULES
                ]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "perfsuite":
                if node.module == "perfsuite":
                    offenders += [
                        f"{where} from perfsuite import {a.name}"
                        for a in node.names
                        if a.name not in PUBLIC_SUITE_NAMES
                    ]
                elif node.module not in PUBLIC_SUITE_MODULES:
                    offenders.append(f"{where} from {node.module} import ...")
    assert offenders == [], "the plugin reaches past perfsuite's public API:\n" + "\n".join(offenders)


def test_collect_environment_adds_triton_without_rewriting():
    sys.path.insert(0, str(PLUGIN))
    try:
        from perfsuite_triton import plugin
    finally:
        sys.path.remove(str(PLUGIN))
    env = {"packages": {"torch": "2.13.0"}}
    plugin.perfsuite_collect_environment(env=env)
    expected = metadata.version("triton") if find_spec("triton") else None
    assert env["packages"] == {"torch": "2.13.0", "triton": expected, "perfsuite-triton": "0.1.0"}
    assert env["perfsuite_triton"]["version"] == "0.1.0"
    already = {"packages": {"triton": "9.9"}}
    plugin.perfsuite_collect_environment(env=already)
    assert already["packages"]["triton"] == "9.9"  # recorded by the host: never rewritten


# -- kernels against torch, and the workloads through the contract, under the interpreter ------
KERNEL_CHECKS = """
import json, torch
from perfsuite_triton.kernels import fused_chain as fc, softmax as sm, matmul as mm
from perfsuite.fused_chain import reference as chain_reference

def rel(out, ref):
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm()) if torch.isfinite(out).all() else float("inf")

torch.manual_seed(0)
res = {"interpreted": [fc.INTERPRETED, sm.INTERPRETED, mm.INTERPRETED],
       "fused_chain": [], "softmax": [], "matmul": [], "errors": []}
# Odd sizes leave partial blocks, so the masks are exercised; 1 x 1 is the degenerate row.
for dtype, rows, hidden in (("float32", 1, 1), ("float32", 7, 200), ("float32", 33, 1000),
                            ("bfloat16", 16, 512), ("float16", 16, 384)):
    dt = getattr(torch, dtype)
    x, r = torch.randn(rows, hidden).to(dt), torch.randn(rows, hidden).to(dt)
    b, w, be = (torch.randn(hidden).to(dt) for _ in range(3))
    out = torch.full_like(x, float("nan"))
    fc.fused_chain(x, b, r, w, be, eps=1e-5, out=out)
    res["fused_chain"].append([dtype, rows, hidden, rel(out, chain_reference(x, b, r, w, be, 1e-5))])
    # Logits up to ~500: exp overflows float32 unless the row max is subtracted first.
    logits = (100 * torch.randn(rows, hidden)).to(dt)
    res["softmax"].append([dtype, rows, hidden, rel(sm.softmax(logits), torch.softmax(logits.double(), -1))])
# Several rows per program: 7 rows leave a last tile of 1 (2 per program) or 3 (4 per program)
# rows, whose missing rows must be neither read nor written; 16 is one whole tile.
for dtype, rows, hidden, rows_per_program in (("float32", 7, 200, 1), ("float32", 7, 200, 2),
                                              ("float32", 7, 200, 4), ("float32", 16, 96, 16),
                                              ("bfloat16", 11, 384, 4)):
    dt = getattr(torch, dtype)
    x, r = torch.randn(rows, hidden).to(dt), torch.randn(rows, hidden).to(dt)
    b, w, be = (torch.randn(hidden).to(dt) for _ in range(3))
    out = torch.full_like(x, float("nan"))
    fc.fused_chain(x, b, r, w, be, eps=1e-5, out=out, rows_per_program=rows_per_program)
    res["fused_chain"].append([dtype, rows, hidden, rows_per_program, rel(out, chain_reference(x, b, r, w, be, 1e-5))])
res["launch"] = {h: fc.launch_config(h) for h in (1, 200, 1024, 4096, 8192, 32768)}
for dtype, m, n, k in (("float32", 1, 1, 1), ("float32", 67, 45, 93), ("float32", 130, 257, 64),
                       ("float16", 64, 64, 64)):
    dt = getattr(torch, dtype)
    a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
    res["matmul"].append([dtype, m, n, k, rel(mm.matmul(a, b), a.double() @ b.double())])
# Arguments the launchers must refuse rather than compute something else.
long_rows, long_vec = torch.randn(2, 40000), torch.randn(40000)
x1024, v1024 = torch.randn(4, 1024), torch.randn(1024)
for call in (lambda: fc.fused_chain(long_rows, long_vec, long_rows, long_vec, long_vec),
             lambda: fc.fused_chain(x1024, v1024, x1024, v1024, v1024, rows_per_program=3),
             lambda: fc.fused_chain(x1024, v1024, x1024, v1024, v1024, rows_per_program=64),
             lambda: fc.fused_chain(x1024, v1024, x1024, v1024, v1024, num_warps=3),
             lambda: sm.softmax(torch.randn(8, 16).t()),
             lambda: mm.matmul(torch.randn(4, 5), torch.randn(6, 4))):
    try:
        call()
        res["errors"].append(None)
    except ValueError as exc:
        res["errors"].append(str(exc))
print(json.dumps(res))
"""

WORKLOAD_RUNS = """
import json, torch
from perfsuite.engine import params as params_mod
from perfsuite.context import RunContext
from perfsuite.controls import Controls, apply_seeds
import perfsuite_triton.plugin as plugin

found = []
plugin.perfsuite_register_workloads(register=found.append)
out = {}
for cls in found:
    apply_seeds(0, False)
    ctx = RunContext(params=params_mod.resolve(cls, {}, quick=True),
                     controls=Controls(device="cpu", iterations=3, warmup=1, min_time_s=None), quick=True)
    w = cls(ctx.params)
    cuda_ctx = RunContext(params=ctx.params, controls=Controls(device="cuda"))
    rec = {"unmet": w.unmet(ctx), "unmet_cuda": w.unmet(cuda_ctx)}
    w.setup(ctx)
    w.execute(ctx)
    rec["metrics"] = [[m["case"], m["name"], m["unit"], len(m["samples"]), m["value"],
                       m["roofline"] and m["roofline"]["resource"]] for m in ctx.metrics]
    rec["checks"] = [vars(c) for c in ctx.checks]
    rec["details"] = ctx.details
    rec["baseline"] = [c.label for c in w.cases(ctx) if c.baseline]
    # Deliberately wrong outputs through the workload's own verification.
    good = w.cases(ctx)[0].fn
    wrong = {
        # A launch that writes nothing: the poisoned buffer must not pass as last call's result.
        "unwritten": lambda: w.out,
        # A classic indexing bug: every row holds its neighbour's result.
        "rows_shifted": lambda: w.out.copy_(torch.roll(good().clone(), 1, 0)),
    }
    rec["wrong"] = {k: vars(w.verify_output("triton", fn, w.out)) for k, fn in wrong.items()}
    rec["right_again"] = vars(w.verify_output("triton", good, w.out))
    if cls.name == "triton.fused_chain":
        # Sensitivity: in fp32, GELU's tanh approximation (max error ~5e-4) must fail.
        p32 = params_mod.resolve(cls, {"dtype": "fp32"}, quick=True)
        ctx32 = RunContext(params=p32, controls=ctx.controls, quick=True)
        w32 = cls(p32)
        w32.setup(ctx32)
        x, b, r, wt, be, eps = w32.args
        def tanh_gelu():
            h = torch.nn.functional.gelu(x + b, approximate="tanh") + r
            return torch.nn.functional.layer_norm(h, (h.shape[-1],), wt, be, eps)
        rec["tanh_gelu_fp32"] = vars(w32.verify_output("torch_tanh_gelu", tanh_gelu))
        rec["erf_gelu_fp32"] = vars(w32.verify_output("triton", w32.cases(ctx32)[0].fn, w32.out))
        w32.teardown(ctx32)
        # A launch given as parameters, 2 rows per program over 63 rows: a partial last tile.
        p2 = params_mod.resolve(cls, {"rows": 63, "rows_per_program": 2, "num_warps": 2}, quick=True)
        ctx2 = RunContext(params=p2, controls=ctx.controls, quick=True)
        w2 = cls(p2)
        w2.setup(ctx2)
        rec["given_launch"] = {"details": ctx2.details["triton"],
                               "check": vars(w2.verify_output("triton", w2.cases(ctx2)[0].fn, w2.out))}
        w2.teardown(ctx2)
    if cls.name == "triton.matmul":
        # The interpreter's bf16 dot: the workload's probe must agree with a direct measurement.
        from perfsuite_triton.kernels import matmul as mm
        a, b = torch.randn(48, 40).bfloat16(), torch.randn(40, 24).bfloat16()
        c = mm.matmul(a, b).double()
        rec["bf16_dot_error"] = float((c - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm())
        rec["bf16_unmet"] = cls(params_mod.resolve(cls, {"dtype": "bf16"}, quick=True)).unmet(ctx)
    w.teardown(ctx)
    out[cls.name] = rec
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def kernel_results():
    return json.loads(run_python(KERNEL_CHECKS, interpreter_env()))


@pytest.fixture(scope="module")
def workload_results():
    return json.loads(run_python(WORKLOAD_RUNS, interpreter_env(), timeout=600))


@needs_triton
def test_kernels_run_on_the_interpreter(kernel_results):
    assert kernel_results["interpreted"] == [True, True, True]


@needs_triton
@pytest.mark.parametrize("kernel", ["fused_chain", "softmax", "matmul"])
def test_kernel_matches_torch(kernel_results, kernel):
    # Tolerances of the workloads (perfsuite_triton/workloads/_shared.py): 4 unit
    # roundoffs of 16-bit outputs; 1e-5 for fp32, whose measured errors are ~1e-7.
    tolerance = {"float32": 1e-5, "bfloat16": 4 * 2**-8, "float16": 4 * 2**-11}
    for dtype, *shape, err in kernel_results[kernel]:
        assert err <= tolerance[dtype], f"{kernel} {dtype} {shape}: relative error {err}"
    assert any(dtype != "float32" for dtype, *_ in kernel_results[kernel])


@needs_triton
def test_fused_chain_with_several_rows_per_program_covers_every_row(kernel_results):
    # Each output was NaN-filled first: a row of a partial last tile left unwritten gives inf.
    tolerance = {"float32": 1e-5, "bfloat16": 4 * 2**-8}
    tiles = {
        (rows, rpp): (dtype, err)
        for dtype, rows, _, rpp, err in (e for e in kernel_results["fused_chain"] if len(e) == 5)
    }
    assert set(tiles) == {(7, 1), (7, 2), (7, 4), (16, 16), (11, 4)}
    for (rows, rpp), (dtype, err) in tiles.items():
        assert err <= tolerance[dtype], f"{rows} rows, {rpp} per program, {dtype}: relative error {err}"


@needs_triton
def test_fused_chain_default_launch_fills_a_tile_by_whole_rows(kernel_results):
    launch = {int(h): cfg for h, cfg in kernel_results["launch"].items()}
    # Hidden 1024: 4 rows x 1024 columns, 4 warps (one row per program left programs short of work).
    assert launch[1024] == {"BLOCK": 1024, "ROWS": 4, "num_warps": 4}
    for hidden, cfg in launch.items():
        assert cfg["BLOCK"] >= hidden and cfg["BLOCK"] & (cfg["BLOCK"] - 1) == 0
        assert cfg["ROWS"] & (cfg["ROWS"] - 1) == 0 and cfg["ROWS"] * cfg["BLOCK"] <= 32768
        assert 1 <= cfg["num_warps"] <= 16
    assert launch[4096]["ROWS"] == launch[32768]["ROWS"] == 1  # long rows: one per program
    assert launch[1]["ROWS"] == 16  # tiny rows: capped, not 4096 of them


@needs_triton
def test_launchers_refuse_bad_arguments(kernel_results):
    too_long, rows_not_pow2, tile_too_big, warps_not_pow2, transposed, mismatch = kernel_results["errors"]
    assert too_long and "hidden must be in 1..32768" in too_long
    assert rows_not_pow2 and "rows_per_program must be a power of two" in rows_not_pow2
    assert tile_too_big and "<= 32768, got 64" in tile_too_big  # 64 x 1024 elements would spill
    assert warps_not_pow2 and "num_warps must be a power of two" in warps_not_pow2
    assert transposed and "unit stride" in transposed
    assert mismatch and "do not multiply" in mismatch


@needs_triton
@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_runs_and_verifies_through_the_contract(workload_results, name):
    rec = workload_results[name]
    assert rec["unmet"] is None
    assert "unset it" in rec["unmet_cuda"]  # the interpreter cannot time a GPU
    metric = "tflops" if name == "triton.matmul" else "gbps"
    roofline = "matmul.fp32" if name == "triton.matmul" else "memory"  # quick matmul is fp32
    for case in ("triton", "torch_eager", "torch_compile"):
        rows = {m[1]: m for m in rec["metrics"] if m[0] == case}
        # Every case but the baseline gets its speed-up against torch_eager.
        assert set(rows) == {"time_ms", metric} | ({"speedup"} if case != "torch_eager" else set()), rows
        assert rows["time_ms"][3] == 3 and rows["time_ms"][4] > 0
        assert rows[metric][4] > 0 and rows[metric][5] == roofline
    assert [c["label"] for c in rec["checks"]] == ["triton", "torch_eager", "torch_compile"]
    assert all(c["passed"] for c in rec["checks"]), rec["checks"]
    assert rec["baseline"] == ["torch_eager"]
    assert rec["details"]["triton"]["interpreter"] is True
    assert rec["details"]["torch_compile"]["first_call_s"] > 0
    if name == "triton.fused_chain":  # quick: 64 rows of 256, compiled without autotuning
        launch = {k: rec["details"]["triton"][k] for k in ("BLOCK", "ROWS", "num_warps", "programs")}
        assert launch == {"BLOCK": 256, "ROWS": 16, "num_warps": 4, "programs": 4}
        assert rec["details"]["torch_compile"]["mode"] == "default"
    if name == "triton.matmul":
        assert rec["details"]["triton"]["config"]["BLOCK_M"] == 128
        assert "first config" in rec["details"]["triton"]["source"]


@needs_triton
@pytest.mark.parametrize("name", WORKLOADS)
def test_wrong_output_fails_verification(workload_results, name):
    rec = workload_results[name]
    unwritten, shifted = rec["wrong"]["unwritten"], rec["wrong"]["rows_shifted"]
    assert not unwritten["passed"] and unwritten["error"] == float("inf")
    assert not shifted["passed"] and shifted["error"] > 10 * shifted["tolerance"]
    assert rec["right_again"]["passed"]


@needs_triton
def test_fused_chain_runs_the_launch_given_as_parameters(workload_results):
    given = workload_results["triton.fused_chain"]["given_launch"]
    assert {k: given["details"][k] for k in ("ROWS", "num_warps", "programs")} == {
        "ROWS": 2,
        "num_warps": 2,
        "programs": 32,
    }
    assert given["check"]["passed"], given["check"]


def test_fused_chain_parameters_default_to_the_shape_both_fusers_can_fill():
    from perfsuite.engine import params as params_mod
    from perfsuite.engine.params import ParamError
    from perfsuite_triton.workloads.fused_chain import FusedChain

    p = params_mod.resolve(FusedChain, {}, quick=False)
    assert (p.rows, p.hidden, p.dtype) == (262144, 1024, "bf16")
    assert (p.compile_mode, p.rows_per_program, p.num_warps) == ("max-autotune-no-cudagraphs", None, None)
    assert params_mod.resolve(FusedChain, {}, quick=True).compile_mode == "default"
    given = params_mod.resolve(
        FusedChain, {"rows_per_program": "8", "num_warps": "none", "compile_mode": "reduce-overhead"}, quick=False
    )
    assert (given.rows_per_program, given.num_warps, given.compile_mode) == (8, None, "reduce-overhead")
    for bad in ({"rows_per_program": "3"}, {"num_warps": "3"}, {"compile_mode": "max-autotune"}):
        with pytest.raises(ParamError):
            params_mod.resolve(FusedChain, bad, quick=False)


@needs_triton
def test_fp32_verification_tells_tanh_gelu_from_erf_gelu(workload_results):
    rec = workload_results["triton.fused_chain"]
    assert rec["erf_gelu_fp32"]["passed"], rec["erf_gelu_fp32"]
    assert not rec["tanh_gelu_fp32"]["passed"], rec["tanh_gelu_fp32"]


@needs_triton
def test_matmul_refuses_bf16_exactly_when_the_interpreter_gets_it_wrong(workload_results):
    rec = workload_results["triton.matmul"]
    if rec["bf16_dot_error"] > 4 * 2**-8:  # triton 3.9: ~1e10
        assert rec["bf16_unmet"] and "dot on bf16 wrongly" in rec["bf16_unmet"]
    else:
        assert rec["bf16_unmet"] is None


# -- end to end through the CLI and the runner -------------------------------------------------
@pytest.fixture
def triton_plugin_env(perfsuite_env, tmp_path):
    """The plugin from this checkout, discovered through its real entry point: a
    ``.dist-info`` like pip writes, first on PYTHONPATH (ahead of any installed copy), next
    to the plugin's source folder. Works on a clean clone where it is not pip-installed."""
    site = tmp_path / "triton-plugin-site"
    dist = site / "perfsuite_triton-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: perfsuite-triton\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[perfsuite]\ntriton = perfsuite_triton.plugin\n")
    perfsuite_env["PYTHONPATH"] = os.pathsep.join([str(site), str(PLUGIN), perfsuite_env["PYTHONPATH"]])
    perfsuite_env["PERFSUITE_PLUGINS"] = "triton"
    return perfsuite_env


@needs_triton
def test_run_quick_on_cpu_through_the_runner(triton_plugin_env):
    proc = run_cli(
        {**triton_plugin_env, "TRITON_INTERPRET": "1"},
        "run",
        "triton.softmax",
        "--quick",
        "--device",
        "cpu",
        "--json",
        check=True,
    )
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "success", record["error"]
    assert record["workload"]["plugin"] == {"name": "triton", "distribution": "perfsuite-triton", "version": "0.1.0"}
    assert record["workload"]["params"] == {"rows": 64, "cols": 256, "dtype": "bf16", "num_warps": 0}
    assert record["verification"]["status"] == "passed"
    cases = {(m["case"], m["name"]) for m in record["metrics"]}
    assert cases == (
        {(c, n) for c in ("triton", "torch_eager", "torch_compile") for n in ("time_ms", "gbps")}
        | {("triton", "speedup"), ("torch_compile", "speedup")}
    )
    assert record["details"]["baseline_case"] == "torch_eager"
    assert record["workload"]["primary_metric"] == "gbps"
    assert record["environment"]["perfsuite_triton"] == {"version": "0.1.0", "TRITON_INTERPRET": "1"}


@needs_triton
def test_run_on_cpu_without_the_interpreter_is_skipped_with_the_reason(triton_plugin_env):
    env = {k: v for k, v in triton_plugin_env.items() if k != "TRITON_INTERPRET"}
    proc = run_cli(env, "run", "triton.softmax", "--quick", "--device", "cpu", "--json", check=True)
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "skipped"
    assert "TRITON_INTERPRET=1" in record["error"]


@needs_triton
def test_triton_info_command_comes_from_the_plugin(triton_plugin_env):
    proc = run_cli({**triton_plugin_env, "TRITON_INTERPRET": "1"}, "triton-info", "--json", check=True)
    info = json.loads(proc.stdout)
    assert info["triton"] == metadata.version("triton")
    assert info["interpreted"] is True and info["TRITON_INTERPRET"] == "1"
    assert (info["driver"] is None) != (info["driver_error"] is None)
    assert len(info["matmul_configs"]) == 9 and info["matmul_configs"][0]["BLOCK_M"] == 128
    hidden = run_cli({**triton_plugin_env, "PERFSUITE_PLUGINS": ""}, "triton-info")
    assert hidden.returncode != 0 and "No such command" in hidden.stderr


# -- packaging: a fresh virtual environment with the suite and the plugin, no torch ------------
# The suite's core dependencies as its pyproject.toml declares them, read rather than copied, so
# the fresh environment is the one a user's ``pip install perfsuite`` makes without extras.
CORE_DEPS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def _copy_sources(dest: Path) -> tuple[Path, Path]:
    """Copies of the suite and the plugin to build from: pip builds in the source tree, and
    its build/ and egg-info must not land in the checkout (or race another test)."""
    suite_src, plugin_src = copy_suite(dest / "perfsuite"), dest / "perfsuite-triton"
    shutil.copytree(PLUGIN, plugin_src, ignore=IGNORE)
    return suite_src, plugin_src


@pytest.mark.slow
def test_plugin_installs_into_a_fresh_venv_and_registers(tmp_path):
    suite_src, plugin_src = _copy_sources(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]

    def pip_install(*args: str) -> None:
        proc = subprocess.run([*pip, "install", *args], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"pip install {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"

    # The suite's light core only, from the package index (setuptools to build without
    # isolation); the suite and plugin without their dependencies: no torch, no triton.
    pip_install("setuptools>=77", *CORE_DEPS)
    pip_install("--no-deps", "--no-build-isolation", str(suite_src), str(plugin_src))

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PERFSUITE_PLUGINS", "TRITON_INTERPRET") and not k.startswith("VIRTUAL_ENV")
    }
    env.update(
        {
            "PERFSUITE_DB": f"sqlite:///{tmp_path / 'registry.db'}",
            "PERFSUITE_RECORDS": str(tmp_path / "records"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
        }
    )
    perfsuite = str(venv / "bin" / "perfsuite")

    def perfsuite_json(*args: str, **extra: str):
        proc = subprocess.run(
            [perfsuite, *args, "--json"],
            env={**env, **extra},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"perfsuite {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    no_torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True)
    assert no_torch.returncode != 0, "the fresh venv must not have torch: the test is about listing without it"

    listed = {row["name"]: row for row in perfsuite_json("list", "--device", "cpu") if "name" in row}
    for name in WORKLOADS:
        row = listed[name]
        assert row["plugin"] == {"name": "triton", "distribution": "perfsuite-triton", "version": "0.1.0"}
        assert row["category"] == "kernels" and row["params"]
        assert row["available"] is False and "not installed" in row["reason"]  # torch/triton absent

    allowed = {row.get("name") for row in perfsuite_json("list", "--device", "cpu", PERFSUITE_PLUGINS="triton")}
    assert set(WORKLOADS) <= allowed
    gone = [row.get("name") for row in perfsuite_json("list", "--device", "cpu", PERFSUITE_PLUGINS="")]
    assert not set(WORKLOADS) & set(gone)

    plugins = {p["name"]: p for p in perfsuite_json("plugins")}
    assert plugins["triton"] == {
        "name": "triton",
        "distribution": "perfsuite-triton",
        "version": "0.1.0",
        "builtin": False,
        "hooks": HOOKS,
        "workloads": list(WORKLOADS),
        "error": None,
        "disabled": [],
    }
    assert "triton" not in {p["name"] for p in perfsuite_json("plugins", PERFSUITE_PLUGINS="")}


@needs_triton
def test_both_erf_implementations_match_the_float64_chain():
    """The A&S 7.1.26 erf (the default) and libdevice's, each with and without cache hints,
    agree with the float64 chain to fp32 accuracy (TRITON_INTERPRET, so in a subprocess)."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from perfsuite_triton.kernels.fused_chain import fused_chain\n"
        "from perfsuite.fused_chain import reference\n"
        "torch.manual_seed(0)\n"
        "x = 3 * torch.randn(11, 96); r = torch.randn(11, 96)\n"
        "b, w, be = torch.randn(96), torch.randn(96), torch.randn(96)\n"
        "ref = reference(x, b, r, w, be)\n"
        "for fast in (True, False):\n"
        "    for evict in (True, False):\n"
        "        y = fused_chain(x, b, r, w, be, rows_per_program=4, fast_erf=fast, evict=evict)\n"
        "        err = float((y.double() - ref).norm() / ref.norm())\n"
        "        assert err < 1e-6, (fast, evict, err)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(PLUGIN), str(REPO)]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
