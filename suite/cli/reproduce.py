"""``perfsuite reproduce RUN_ID``: re-run a stored record on this machine with its exact
workload version, parameters, controls and seed, then compare.

The re-run goes through ``perfsuite run`` itself (a subprocess of this same CLI, so the
runner, its isolation and its storing are the normal ones); the new record says which
run it reproduces (``reproduces``). Verdict: "reproduced" when, for every case's headline
metric, the new median lies inside the stored run's 95% CI or the difference is not a
significant change (Mann-Whitney p < 0.05 and beyond the threshold, as in ``compare``);
else "did not reproduce", with the ratio and the environment differences.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click

from perfsuite.cli._types import FiniteFloat

REPRODUCED, NOT_REPRODUCED = "reproduced", "did not reproduce"


def _cli_value(value) -> str:
    if isinstance(value, list):
        return ",".join(_cli_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


def run_arguments(record: dict) -> list[str]:
    """The ``perfsuite run`` arguments that repeat ``record``'s run."""
    w, c, launch = record["workload"], record["controls"], record["launch"]
    args = [
        "run",
        w["name"],
        "--device",
        c["device"],
        "--seed",
        str(c["seed"]),
        "--timeout",
        repr(float(c["timeout_s"])),
        "--division",
        w["division"],
        "--json",
        "--reproduces",
        record["run_id"],
    ]
    if c["warmup"] is not None:  # None: a control the workload does not honour (controls.not_applied)
        args += ["--warmup", str(c["warmup"])]
    for name, value in w["params"].items():
        args += ["-p", f"{name}={_cli_value(value)}"]
    if c["iterations"] is not None:
        args += ["--iterations", str(c["iterations"])]
    if c["min_time_s"] is not None:
        args += ["--min-time", repr(float(c["min_time_s"]))]
    for flag in ("deterministic", "l2_flush", "cuda_graph"):
        if c[flag]:
            args.append("--" + flag.replace("_", "-"))
    if launch["world_size"] > 1:
        args += ["--nproc-per-node", str(launch["nproc_per_node"])]
    return args


def verdict_for(original: dict, comparison) -> tuple[str, list[dict]]:
    """Per case: (its headline metric, new median inside the stored CI?, change verdict)."""
    from perfsuite.analysis.compare import NO_CHANGE

    stored = {(m["case"], m["name"]): m for m in original["metrics"]}
    cases = []
    for m in comparison.metrics:
        if not m.headline:
            continue
        s = stored[(m.case, m.metric)]["statistics"] or {}
        inside = s.get("ci95_low") is not None and s["ci95_low"] <= m.median_b <= s["ci95_high"]
        ok = inside or m.verdict == NO_CHANGE
        cases.append(
            {
                "case": m.case,
                "metric": m.metric,
                "ratio": m.ratio,
                "p_value": m.p_value,
                "inside_stored_ci": inside,
                "change": m.verdict,
                "reproduced": ok,
            }
        )
    return (REPRODUCED if cases and all(c["reproduced"] for c in cases) else NOT_REPRODUCED), cases


@click.command("reproduce")
@click.argument("run_id")
@click.option(
    "--threshold",
    type=FiniteFloat(low=0),
    default=None,
    help="Smallest relative change called a change (default 0.02 = 2%).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def reproduce_cmd(ctx: click.Context, run_id: str, threshold: float | None, as_json: bool) -> None:
    """Re-run RUN_ID here with its workload version, parameters, controls and seed, then
    say whether it reproduced."""
    from perfsuite.analysis.compare import (
        DEFAULT_THRESHOLD,
        NotComparable,
        compare_records,
    )
    from perfsuite.cli._common import emit_json, fail, load_host, open_db, verdict_text
    from perfsuite.cli.compare import print_comparison
    from perfsuite.plugins import UnknownWorkload
    from perfsuite.registry import RegistryError

    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    try:
        original = open_db(ctx).get(run_id)
    except RegistryError as exc:
        fail(str(exc), 1)
    w = original["workload"]
    if original["status"] != "success":
        fail(f"run {original['run_id']} has status {original['status']}: nothing measured to reproduce", 1)
    if original["launch"]["nnodes"] > 1:
        fail(
            f"run {original['run_id']} ran on {original['launch']['nnodes']} nodes: reproduce it with "
            f"'perfsuite run' under the same launcher",
            1,
        )
    try:
        installed = load_host().get(w["name"]).cls
    except UnknownWorkload as exc:
        fail(str(exc), 1)
    if installed.version != w["version"]:
        fail(
            f"{w['name']} is version {installed.version} here, the record is version {w['version']}: "
            f"results of different versions never compare",
            1,
        )
    env = dict(os.environ)
    if ctx.obj.get("db_url"):
        env["PERFSUITE_DB"] = ctx.obj["db_url"]
    click.echo(f"re-running {w['name']} ({original['run_id'][:8]}) with seed {original['controls']['seed']}", err=True)
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *run_arguments(original)], env=env, capture_output=True, text=True
    )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        fail(f"the re-run failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}", 1)
    try:
        new = json.loads(proc.stdout)[0]
    except (json.JSONDecodeError, IndexError) as exc:
        fail(f"the re-run printed no record ({exc}): {proc.stderr.strip()[-2000:]}", 1)
    if new["status"] != "success" or new["verification"]["status"] == "failed":
        fail(
            f"the re-run {new['run_id']} ended {new['status']} (verification {new['verification']['status']})"
            + (f": {new['error']}" if new["error"] else ""),
            1,
        )
    try:
        comparison = compare_records(original, new, threshold=threshold)
    except (NotComparable, ValueError) as exc:
        fail(str(exc), 1)
    verdict, cases = verdict_for(original, comparison)
    if as_json:
        emit_json(
            {
                "verdict": verdict,
                "original": original["run_id"],
                "reproduction": new["run_id"],
                "cases": cases,
                "comparison": comparison.to_dict(),
            }
        )
    else:
        print_comparison(
            comparison,
            original,
            new,
            title=f"reproduction {new['run_id'][:8]} of {original['run_id'][:8]} ({w['name']})",
        )
        from rich.text import Text

        from perfsuite.cli._common import console

        line = Text(f"{original['run_id'][:8]}: ")
        line.append_text(verdict_text(verdict))
        line.append(
            " (the new median inside the stored 95% CI, or no significant change, on every case's headline metric)"
        )
        console().print(line)
    if verdict != REPRODUCED:
        sys.exit(1)
