"""Summary of the training records of one bench run (bench/gpu_training.sh): one row per
run with time to target, throughput, MFU (the tflops metric's fraction of the measured
matmul ceiling; MFUspec: of the vendor's datasheet peak, where perfsuite.measure.specs knows the GPU),
energy and the goodput split; then the scaling efficiency of each DDP run, both ways:

- at a fixed global batch (strong scaling): samples/s per GPU against the 1-GPU run of
  the same comparability key. Each GPU's share of a step shrinks as GPUs are added, so a
  small model becomes launch- or communication-bound: this is what time to target sees;
- at a fixed batch per GPU (weak scaling): against the 1-GPU run whose parameters differ
  only in ``global_batch`` and whose batch per GPU is the same, so the efficiency lost is
  the cost of DDP's gradient all-reduce, not of a smaller share of work.

Then the olympic mean of repeats.

    python bench/training_summary.py RECORDS_DIR [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfsuite.analysis.scoring import scores  # noqa: E402

PHASES = ("forward", "backward", "optimizer", "data_wait", "evaluation", "compile_warmup", "other")


def _m(record: dict, *names: str) -> dict | None:
    return next((m for m in record["metrics"] if m["name"] in names), None)


def measured_mfu(record: dict, ceilings: list[dict]) -> float | None:
    """The tflops metric over the matching ceiling of the newest passed kernels.ceilings record
    of the same device: what the runner fills in for successful runs, here for aborted ones too."""
    from perfsuite.measure.roofline import ceiling_table

    tflops = _m(record, "tflops")
    if tflops is None or not tflops.get("roofline"):
        return None
    if tflops["roofline"].get("fraction") is not None:
        return tflops["roofline"]["fraction"]
    key = record["environment"]["measured_device"]["key"]
    for c in sorted(ceilings, key=lambda c: c["started_at"], reverse=True):
        if c["environment"]["measured_device"]["key"] == key and c["status"] == "success":
            found = ceiling_table(c).get(tflops["roofline"]["resource"])
            if found and found["value"] > 0:
                return tflops["value"] / found["value"]
    return None


def rows(records: list[dict], ceilings: list[dict]) -> list[dict]:
    out = []
    for r in records:
        p = r["workload"]["params"]
        row = {
            "run_id": r["run_id"],
            "workload": r["workload"]["name"],
            "status": r["status"],
            "error": r["error"],
            "world_size": r["launch"]["world_size"],
            "precision": p.get("precision"),
            "compile": p.get("compile"),
            "key": r["comparability_key"],
            "global_batch": p.get("global_batch"),
            "same_but_batch": same_but_batch(r),
        }
        if r["status"] in ("success", "aborted"):
            t = _m(r, "time_to_target_s", "run_time_s")
            rate = _m(r, "tokens_per_s") or _m(r, "samples_per_s")
            per_dev = _m(r, "samples_per_s_per_device")
            tflops = _m(r, "tflops")
            energy = _m(r, "energy_to_target_j", "energy_run_j")
            d = r["details"]
            row.update(
                {
                    "time_s": t["value"] if t else None,
                    "reached": r["status"] == "success",
                    "steps": d["training"]["steps"],
                    "parameters": d["training"]["model"]["parameters"],
                    "rate": rate["value"] if rate else None,
                    "rate_unit": rate["unit"] if rate else "",
                    "samples_per_s_per_device": per_dev["value"] if per_dev else None,
                    "tflops_per_device": tflops["value"] if tflops else None,
                    "mfu": measured_mfu(r, ceilings),
                    "mfu_reason": (tflops.get("roofline") or {}).get("reason") if tflops else "no throughput",
                    "mfu_spec": spec_mfu(r),
                    "energy_j": energy["value"] if energy else None,
                    "goodput": d["goodput"]["goodput"],
                    "phases_s": d["goodput"]["seconds"],
                    "accuracy": _m(r, "eval_accuracy")["value"],
                    "per_rank_batch": d["training"]["per_rank_batch"],
                }
            )
        out.append(row)
    ones = [o for o in out if o["world_size"] == 1 and o.get("samples_per_s_per_device")]
    for row in out:  # per-device rate at N ranks over the rate of a 1-rank run (see the docstring)
        if row["world_size"] == 1 or not row.get("samples_per_s_per_device"):
            continue
        strong = [o for o in ones if o["key"] == row["key"]]
        weak = [
            o
            for o in ones
            if o["same_but_batch"] == row["same_but_batch"] and o["per_rank_batch"] == row["per_rank_batch"]
        ]
        for name, base in (("scaling_efficiency", strong), ("weak_scaling_efficiency", weak)):
            if base:
                row[name] = row["samples_per_s_per_device"] / base[0]["samples_per_s_per_device"]
    return out


def same_but_batch(record: dict) -> str:
    """The workload, its version and every parameter but ``global_batch`` and the budgets
    (which only say when the run stops): runs equal in this differ in batch alone."""
    params = {
        k: v for k, v in record["workload"]["params"].items() if k not in ("global_batch", "max_steps", "time_budget_s")
    }
    return json.dumps([record["workload"]["name"], record["workload"]["version"], params], sort_keys=True)


def spec_mfu(record: dict) -> float | None:
    """TFLOP/s per GPU over the vendor's datasheet peak (perfsuite.measure.specs, where this suite has it)."""
    try:
        from perfsuite.measure import specs
    except ImportError:
        return None
    tflops = _m(record, "tflops")
    if tflops is None or not tflops.get("roofline"):
        return None
    found = specs.spec_fraction(
        record["environment"]["measured_device"]["name"], tflops["roofline"]["resource"], tflops["value"]
    )
    return found[0] if found else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("records", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    # records are named by run id; an evidence folder also holds this script's own JSON
    every = [
        json.loads(f.read_text()) for f in sorted(args.records.glob("*.json")) if re.fullmatch(r"[0-9a-f]{32}", f.stem)
    ]
    ceilings = [r for r in every if r["workload"]["name"] == "kernels.ceilings"]
    records = sorted((r for r in every if r["workload"]["category"] == "training"), key=lambda r: r["started_at"])
    table = rows(records, ceilings)
    print(
        f"{'workload':16} {'world':>5} {'prec':5} {'compile':7} {'status':8} {'params M':>8} {'steps':>6} "
        f"{'to target s':>11} {'throughput':>22} {'TFLOP/s/dev':>11} {'MFU':>6} {'MFUspec':>7} {'energy kJ':>9} "
        f"{'goodput':>7}  split s (" + " / ".join(PHASES) + ")"
    )
    for r in table:
        if "time_s" not in r:
            print(
                f"{r['workload']:16} {r['world_size']:>5} {r['precision'] or '':5} {str(r['compile']):7} "
                f"{r['status']:8} {r['error']}"
            )
            continue
        split = " / ".join(f"{r['phases_s'][p]:.1f}" for p in PHASES)
        time_s = fmt(r["time_s"], ".1f") + ("" if r["reached"] else " (no)")
        print(
            f"{r['workload']:16} {r['world_size']:>5} {r['precision']:5} {str(r['compile']):7} {r['status']:8} "
            f"{r['parameters'] / 1e6:8.1f} {r['steps']:>6} {time_s:>11} "
            f"{fmt(r['rate'], ',.0f'):>10} {r['rate_unit']:11} {fmt(r['tflops_per_device'], '.1f'):>11} "
            f"{fmt(r['mfu'], '.1%'):>6} {fmt(r['mfu_spec'], '.1%'):>7} {fmt(r['energy_j'] / 1e3 if r['energy_j'] else None, '.2f'):>9} "
            f"{r['goodput']:7.1%}  {split}"
        )
        if r["mfu"] is None:
            print(f"{'':16} MFU unavailable: {r['mfu_reason']}")
        if "scaling_efficiency" in r:
            print(
                f"{'':16} scaling efficiency at {r['world_size']} GPUs, global batch {r['global_batch']} fixed: "
                f"{r['scaling_efficiency']:.1%} (samples/s per GPU against the 1-GPU run of the same key)"
            )
        if "weak_scaling_efficiency" in r:
            print(
                f"{'':16} scaling efficiency at {r['world_size']} GPUs, batch per GPU {r['per_rank_batch']} fixed: "
                f"{r['weak_scaling_efficiency']:.1%} (samples/s per GPU against the 1-GPU run of that batch)"
            )
    for s in scores(records):
        if len(s["runs"]) > 1:
            print(
                f"{s['workload']} x{s['world_size']}: olympic mean "
                f"{fmt(s['olympic_mean_s'], '.2f') if s['olympic_mean_s'] is not None else s['reason']}"
            )
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    return 0 if all(r["status"] in ("success", "aborted") for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
