"""Roofline fractions: each metric that names a ceiling resource is divided by that
resource's figure in the latest ``kernels.ceilings`` run of the same device."""
from __future__ import annotations

CEILINGS_WORKLOAD = "kernels.ceilings"


def roofline_metric_name(resource: str) -> str:
    """Which throughput metric a ceiling resource judges: FLOP ceilings judge TFLOP/s,
    every other ceiling (memory, host-device, peer links) judges GB/s."""
    return "tflops" if resource.startswith("matmul.") else "gbps"


def ceiling_table(ceilings_record: dict) -> dict[str, dict]:
    """resource -> its ceiling metric, from a ceilings record (case label == resource)."""
    out = {}
    for m in ceilings_record["metrics"]:
        if m["name"] == roofline_metric_name(m["case"]):
            out[m["case"]] = m
    return out


def resolve(metrics: list[dict], ceilings_record: dict | None, own_workload: str) -> None:
    """Fill each metric's ``roofline`` block in place (fraction, ceiling, its run), or say why not."""
    table = ceiling_table(ceilings_record) if ceilings_record else {}
    for m in metrics:
        roof = m.get("roofline")
        if roof is None:
            continue
        if own_workload == CEILINGS_WORKLOAD:
            m["roofline"] = None  # a ceiling is not judged against itself
            continue
        ceiling = table.get(roof["resource"])
        if ceilings_record is None:
            roof["reason"] = f"no {CEILINGS_WORKLOAD} run of this device in the registry; run it first"
        elif ceiling is None:
            roof["reason"] = f"ceilings run {ceilings_record['run_id']} has no {roof['resource']!r} figure"
        else:
            roof.update(fraction=m["value"] / ceiling["value"] if ceiling["value"] > 0 else None,
                        ceiling=ceiling["value"], ceiling_unit=ceiling["unit"],
                        ceiling_run_id=ceilings_record["run_id"], reason=None)
