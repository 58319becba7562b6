"""Cost per result: an accelerator-hour price turned into cost per unit of work.

The price comes from ``perfsuite run --price-per-hour`` (or a system description's
``accelerator_hour_price_usd``); the accelerators are those the run held (world size on
GPUs, one on the CPU). Throughput metrics give the cost of a million items (samples,
tokens, images); time-to-target gives the cost of one run, as MLPerf Training scores it.
Energy stays beside it in the record: the two together are what a result costs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

# Throughput units whose cost reads naturally per million items.
PER_MILLION = {"items_per_s"}
TIME_TO_TARGET = "time_to_target_s"


@dataclass(frozen=True)
class CostLine:
    case: str
    metric: str  # the metric the cost is derived from
    usd: float
    per: str  # what the cost buys: "1M tokens", "run"


def validate_price(price: float | None) -> None:
    if price is not None and not (price > 0 and price < 1e6):
        raise ValueError(f"price per accelerator-hour must be a positive number of USD, got {price}")


def cost_lines(metrics: list[dict], price_per_hour: float, accelerators: int) -> list[CostLine]:
    """Cost per unit of work for every metric it makes sense for."""
    usd_per_s = price_per_hour * accelerators / 3600.0
    out = []
    for m in metrics:
        value = m.get("value")
        if not value or value <= 0:
            continue
        if m["name"] in PER_MILLION:
            unit = m["unit"].removesuffix("/s") or "items"
            out.append(CostLine(m["case"], m["name"], usd_per_s / value * 1e6, f"1M {unit}"))
        elif m["name"] == TIME_TO_TARGET:
            out.append(CostLine(m["case"], m["name"], usd_per_s * value, "run"))
    return out


def cost_section(metrics: list[dict], price_per_hour: float, accelerators: int, source: str) -> dict:
    """The record's ``cost`` object."""
    validate_price(price_per_hour)
    return {"price_per_accelerator_hour_usd": price_per_hour, "accelerators": accelerators, "source": source,
            "lines": [asdict(c) for c in cost_lines(metrics, price_per_hour, accelerators)]}
