"""Cost per result: an accelerator-hour price turned into cost per unit of work. One rule
for every place a cost is computed: the runner (``perfsuite run --price-per-hour``), and
``perfsuite submit`` and the leaderboard (a system description's ``accelerator_hour_price_usd``,
for a result without its own cost).

The accelerators are those the run held (world size on GPUs, one on the CPU). Throughput
metrics give the cost of a million items (samples, tokens, images); time-to-target gives
the cost of one run, as MLPerf Training scores it. Energy stays beside it in the record:
the two together are what a result costs.

Plain functions on metric dicts: the registry uses them without importing the host.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Throughput units whose cost reads naturally per million items.
PER_MILLION = {"items_per_s"}
TIME_TO_TARGET = "time_to_target_s"
# Below the schemas' exclusiveMaximum: a larger price is a typo (cents, or a total), not a rate.
MAX_PRICE_USD = 1e6
# Where a cost's price came from (the cost section's ``source``).
RUN_OPTION_SOURCE = "--price-per-hour"
SYSTEM_PRICE_SOURCE = "system description's accelerator_hour_price_usd"


@dataclass(frozen=True)
class CostLine:
    case: str
    metric: str  # the metric the cost is derived from
    usd: float
    per: str  # what the cost buys: "1M tokens", "run"


def validate_price(price: float | None) -> None:
    """Refuse a price that is not a positive, finite number of USD below MAX_PRICE_USD."""
    if price is None:
        return
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not (0 < price < MAX_PRICE_USD):
        raise ValueError(
            f"price per accelerator-hour must be a positive number of USD below {MAX_PRICE_USD:g}, got {price!r}"
        )


def accelerators_held(device: str, world_size: int) -> int:
    """How many accelerators a run is charged for: its world size on GPUs, one on the CPU."""
    return world_size if device == "cuda" else 1


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
    return {
        "price_per_accelerator_hour_usd": price_per_hour,
        "accelerators": accelerators,
        "source": source,
        "lines": [asdict(c) for c in cost_lines(metrics, price_per_hour, accelerators)],
    }


def result_cost(
    own: dict | None, system_price: float | None, metrics: list[dict], device: str, world_size: int
) -> dict | None:
    """What a result costs: its own cost section (from ``run --price-per-hour``) where it has
    one, else one from its system description's price, labelled by its ``source``, else None."""
    if own:
        return own
    if system_price is None:
        return None
    return cost_section(metrics, system_price, accelerators_held(device, world_size), SYSTEM_PRICE_SOURCE)


def cost_text(cost: dict | None, case: str | None = None) -> str | None:
    """A cost section's lines (of one case, or all, each naming its case) as one line of
    text; a cost from the system description's price says so."""
    lines = [c for c in (cost or {}).get("lines", []) if case is None or c["case"] == case]
    if not lines:
        return None
    text = "; ".join(f"{c['usd']:.4g} USD per {c['per']}" + (f" ({c['case']})" if case is None else "") for c in lines)
    return f"{text} [from the system's price]" if (cost or {}).get("source") == SYSTEM_PRICE_SOURCE else text
