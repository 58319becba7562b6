"""The summary of bench/gpu_measure.sh, read from the records it stored (nothing measured
here): collectives side by side with nccl-tests from the same call, small messages
against a plain torch.distributed loop, graph mode against nccl-tests; ceilings burst and
sustained with the clocks and % of spec; GEMM burst and sustained against the ceilings and
do_bench, with the throttle flag. Prints the issue's targets as met / NOT met; exit 1 if a
target is not met or a run failed.

    python3 bench/measure_summary.py x2 --since ISO --dist-loop FILE.json   # x4, x8 likewise
    python3 bench/measure_summary.py x1 --since ISO
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUSBW_TOLERANCE = 0.03  # eager busbw within 3% of nccl-tests from 1 MiB up
SMALL_RATIO = 1.2  # small-message eager time within 1.2x of a plain torch.distributed loop
SMALL_BYTES = 64 * 1024
MIB = 1 << 20


def load(since: str) -> list[dict]:
    from perfsuite.registry import open_registry

    with open_registry() as reg:
        rows = reg.results(since=dt.datetime.fromisoformat(since), limit=None)
        return [reg.get(r["run_id"]) for r in reversed(rows)]


def nccl_tests_mode(cc: dict) -> str:
    """How nccl-tests ran, from its command line and extra environment: its launcher and
    processes (one per GPU) or threads, GPUs per thread, calls per loop and any NCCL setting
    of its own."""
    argv = cc.get("argv") or []
    flags = {a: b for a, b in zip(argv, argv[1:]) if a.startswith("-")}
    if cc.get("launcher"):  # one process per GPU, as many as the ranks it listed
        ranks = len({d["rank"] for d in (cc.get("table") or {}).get("devices") or []}) or "?"
        placement = f"{Path(cc['launcher'][0]).name} -n {ranks} "
    else:
        placement = f"-t {flags['-t']} " if "-t" in flags else ""
    shown = dict(cc.get("env") or {})
    mixing = (cc.get("nccl_env") or {}).get("NCCL_GRAPH_MIXING_SUPPORT")
    if mixing is not None:  # set for both sides of a --cuda-graph comparison (perfsuite.engine.launcher)
        shown.setdefault("NCCL_GRAPH_MIXING_SUPPORT", mixing)
    env = "".join(f" {k}={v}" for k, v in shown.items())
    return f"{placement}-g {flags.get('-g', '?')} -n {flags.get('-n', '?')}{env}"


def collectives(records: list[dict], dist_loop: dict | None) -> bool:
    ok = True
    busbw_met: dict[str, dict[str, bool]] = {}  # nccl-tests mode -> collective -> within 3% from 1 MiB up
    for rec in records:
        name = rec["workload"]["name"]
        if not name.startswith("collectives.") or name == "collectives.copy_bandwidth":
            continue
        graph = rec["controls"]["cuda_graph"]
        label = f"{name} {rec['details'].get('dtype', '')} {'graph' if graph else 'eager'}"
        if rec["status"] != "success":
            print(f"{label}: {rec['status']}: {rec['error']}")
            ok = False
            continue
        d = rec["details"]
        cc = d.get("crosscheck") or {}
        print(
            f"\n{label} vs nccl-tests {nccl_tests_mode(cc)}  world {d.get('world_size')}  timing: {d.get('timing')} "
            f"({d.get('iters')} calls x {d.get('repeats')} repeats x {d.get('rounds', 1)} rounds in turns)  "
            f"#wrong {d.get('wrong_total')}  NCCL {d.get('nccl_version')}  nccl-tests {cc.get('version')} "
            f"{' '.join(cc.get('argv') or [])}"
        )
        if cc.get("status") != "measured":
            print(f"  nccl-tests: {cc.get('status')}: {cc.get('reason')}")
            ok = False
            continue
        ref = {r["size_bytes"]: r for r in cc["table"]["rows"]}
        print(
            f"  {'size B':>10} {'mode':>4} {'suite us':>9} {'nccl us':>9} {'suite busbw':>11} {'nccl busbw':>10} "
            f"{'ratio':>6}"
        )
        worst = None  # the ratio furthest from 1, either way: faster than nccl-tests disagrees too
        for c in cc["compare"]:
            ratio = c["busbw_ratio"]
            mark = ""
            if c["size_bytes"] >= MIB and not graph and ratio is not None:
                within = abs(ratio - 1) <= BUSBW_TOLERANCE
                mark = (
                    ""
                    if within
                    else ("  <-- suite faster by over 3%" if ratio > 1 else "  <-- suite slower by over 3%")
                )
                worst = ratio if worst is None or abs(ratio - 1) > abs(worst - 1) else worst
            print(
                f"  {c['size_bytes']:>10} {c['mode']:>4} {c['suite_time_us']:9.2f} {c['nccl_tests_time_us']:9.2f} "
                f"{c['suite_busbw_gbps']:11.2f} {c['nccl_tests_busbw_gbps']:10.2f} "
                f"{'' if ratio is None else f'{ratio:6.3f}'}{mark}"
            )
        if not graph:
            met = worst is not None and abs(worst - 1) <= BUSBW_TOLERANCE
            busbw_met.setdefault(nccl_tests_mode(cc), {})[name] = met
            print(
                f"  TARGET busbw within 3% of nccl-tests from 1 MiB up: furthest ratio "
                f"{'-' if worst is None else f'{worst:.3f}'}: {'met' if met else 'NOT met'}"
            )
        else:  # against nccl-tests' own graph mode (-G 1), from this record's cross-check
            # every mode the collective has (in place and out of place), each against its own column
            small = [
                (r, mode) for r in d["rows"] if r["size_bytes"] < SMALL_BYTES for mode in ("oop", "ip") if r.get(mode)
            ]
            slower = [
                (r["size_bytes"], mode, round(r[mode]["time_us"], 2), ref[r["size_bytes"]][mode]["time_us"])
                for r, mode in small
                if r["size_bytes"] in ref
                and ref[r["size_bytes"]].get(mode)
                and r[mode]["time_us"] > ref[r["size_bytes"]][mode]["time_us"]
            ]
            met = bool(small) and not slower
            ok &= met
            print(
                f"  TARGET graph mode no slower than nccl-tests -G 1 below 64 KiB: "
                f"{'met' if met else 'NOT met'}" + (f" (slower at {slower})" if slower else "")
            )
        if name == "collectives.all_reduce" and not graph and dist_loop:
            if dist_loop.get("iters") != d.get("iters"):
                print(
                    f"  small messages: not compared (plain loop of {dist_loop.get('iters')} calls, this run "
                    f"{d.get('iters')})"
                )
                continue
            if dist_loop.get("unheld_loops"):  # the reference then timed Python, not NCCL
                print(
                    f"  TARGET small messages: not judged (the plain loop's hold ran out in "
                    f"{dist_loop['unheld_loops']} loops)"
                )
                ok = False
                continue
            plain = {r["size_bytes"]: r["time_us"] for r in dist_loop["rows"]}
            print(f"  {'size B':>10} {'suite eager us':>14} {'plain loop us':>13} {'ratio':>6}")
            worst_small = 0.0
            for r in d["rows"]:
                if r["size_bytes"] in plain and r.get("ip"):
                    ratio = r["ip"]["time_us"] / plain[r["size_bytes"]]
                    worst_small = max(worst_small, ratio)
                    print(
                        f"  {r['size_bytes']:>10} {r['ip']['time_us']:14.2f} {plain[r['size_bytes']]:13.2f} {ratio:6.3f}"
                    )
            met = 0 < worst_small <= SMALL_RATIO
            ok &= met
            print(
                f"  TARGET small messages within {SMALL_RATIO}x of a plain torch.distributed loop: worst "
                f"{worst_small:.3f}: {'met' if met else 'NOT met'}"
            )
    print()
    for mode, per in busbw_met.items():
        print(
            f"busbw within 3% of nccl-tests {mode} from 1 MiB up: "
            + ", ".join(f"{n.split('.', 1)[1]} {'met' if m else 'NOT met'}" for n, m in per.items())
        )
    # the target holds where one nccl-tests mode agrees for every collective measured against it
    ok &= any(all(per.values()) for per in busbw_met.values())
    return ok


def _clock_cell(clocks: dict | None) -> str:
    """A round's SM clock (min-median MHz) and clock events, or '-' where none was sampled."""
    if not clocks:
        return "-"
    events = ", ".join(clocks.get("clock_events") or []) or "no events"
    return f"SM {clocks['sm_clock_mhz_min']:.0f}-{clocks['sm_clock_mhz_median']:.0f} MHz, {events}"


def kernels(records: list[dict]) -> bool:
    from perfsuite.analysis import figures

    ok = True
    for rec in records:
        name = rec["workload"]["name"]
        if not name.startswith("kernels."):
            continue
        c = rec["controls"]
        regime = (f"{c['iterations']} calls" if c["iterations"] else f"min {c['min_time_s']} s") + (
            ", L2 flushed between calls" if c["l2_flush"] else ""
        )
        if rec["status"] != "success":
            print(f"{name} ({regime}): {rec['status']}: {rec['error']}")
            ok = False
            continue
        if name == "kernels.ceilings":
            print(f"\nkernels.ceilings run {rec['run_id'][:8]} on {rec['environment']['measured_device']['name']}")
            print(
                f"  {'resource':12} {'ceiling':>9} {'won by':>22} {'burst':>9} {'sustained':>9} "
                f"{'burst SM MHz':>13} {'sust. SM MHz':>13} {'sust. events':>24} {'% of spec':>18}"
            )
            metrics = {(m["case"], m["name"]): m for m in rec["metrics"]}
            for res, cd in rec["details"]["ceilings"].items():
                b, s = cd["burst"], cd["sustained"]
                bn, sn = b.get("nvml") or {}, s.get("nvml") or {}
                spec = figures.spec_cell(rec, metrics[(res, cd["metric"])])
                print(
                    f"  {res:12} {cd['value']:9.1f} {cd['regime'] + ' ' + cd['shape']:>22} {b['value']:9.1f} "
                    f"{s['value']:9.1f} {str(bn.get('sm_clock_mhz_median')):>13} "
                    f"{str(sn.get('sm_clock_mhz_min')) + '-' + str(sn.get('sm_clock_mhz_max')):>13} "
                    f"{', '.join(sn.get('clock_events') or []) or 'none':>24} {spec:>18}"
                    + (
                        f"  {b['other_l2']['regime']}: median {b['other_l2']['value']:.1f}, fastest "
                        f"{b['other_l2']['fastest']:.1f}"
                        if b.get("other_l2")
                        else ""
                    )
                )
            continue
        print(f"\n{name} run {rec['run_id'][:8]} ({regime})")
        cross = rec["details"].get("crosscheck") or {}
        for m in rec["metrics"]:
            if m["name"] not in ("tflops", "gbps") or not m.get("roofline"):
                continue
            cc = cross.get(m["case"]) or {}
            ratio = cc.get("time_ratio")
            frac = (m.get("roofline") or {}).get("fraction")
            over = frac is not None and frac > 1
            ok &= not over
            agrees = cc.get("agrees")
            ok &= agrees is not False
            print(
                f"  {m['case']:6} {m['value']:9.1f} {m['unit']:8} {figures.ceiling_cell(m) or '-':>30} "
                f"{figures.spec_cell(rec, m) or '-':>20} throttled: {figures.throttle_cell(rec, m['case']) or 'no':34} "
                f"do_bench {cc.get('reference_median_ms', float('nan')):.4f} ms vs {cc.get('suite_median_ms', float('nan')):.4f} "
                f"ratio {'' if ratio is None else f'{ratio:.3f}'} {'agrees' if agrees else cc.get('reason', 'differs')}"
                f" (medians of {len(cc.get('rounds') or [1])} rounds in turns)"
            )
            for rd in cc.get("rounds") or []:  # each round's two timings and the clocks NVML saw during them
                print(
                    f"      {rd['order']:15} suite {rd['suite_ms']:.4f} ms {_clock_cell(rd.get('suite_clocks')):28} "
                    f"do_bench {rd['reference_ms']:.4f} ms {_clock_cell(rd.get('reference_clocks'))}"
                )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("x1", "x2", "x4", "x8"))
    ap.add_argument("--since", required=True)
    ap.add_argument("--dist-loop", type=Path, default=None)
    args = ap.parse_args()
    records = load(args.since)
    if args.kind != "x1":
        loop = json.loads(args.dist_loop.read_text()) if args.dist_loop and args.dist_loop.exists() else None
        ok = collectives(records, loop)
    else:
        ok = kernels(records)
    print(f"\nsummary: {'all targets met' if ok else 'some target NOT met or a run failed'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
