"""Roofline fractions: each metric that names a ceiling resource is divided by that
resource's figure in the latest full run of the same device by a ceiling workload (a quick
run's ceilings judge only quick runs, until a full one exists):
``kernels.ceilings`` (matrix rates, memory, host-device links) and
``collectives.copy_bandwidth`` (the peer link, ``p2p``)."""

from __future__ import annotations

from perfsuite.schemas import CEILINGS_WORKLOAD

CEILING_SOURCES = (CEILINGS_WORKLOAD, "collectives.copy_bandwidth")


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


def resolve(metrics: list[dict], ceiling_records: list[dict], own_workload: str) -> None:
    """Fill each metric's ``roofline`` block in place (fraction, ceiling, its run), or say why not.
    ``ceiling_records``: the latest record of each ceiling source for this device."""
    table: dict[str, tuple[dict, str]] = {}
    for record in ceiling_records:
        for resource, metric in ceiling_table(record).items():
            table.setdefault(resource, (metric, record["run_id"]))
    for m in metrics:
        roof = m.get("roofline")
        if roof is None:
            continue
        if own_workload in CEILING_SOURCES:
            m["roofline"] = None  # a ceiling is not judged against itself
            continue
        found = table.get(roof["resource"])
        if found is None:
            sources = " or ".join(CEILING_SOURCES)
            roof["reason"] = (
                f"no {roof['resource']!r} ceiling measured on this device yet "
                f"(run {sources}; a quick run's ceilings judge only quick runs)"
            )
            continue
        ceiling, run_id = found
        roof.update(
            fraction=m["value"] / ceiling["value"] if ceiling["value"] > 0 else None,
            ceiling=ceiling["value"],
            ceiling_unit=ceiling["unit"],
            ceiling_run_id=run_id,
            reason=None,
        )
