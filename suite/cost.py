"""Cost per result, as the runner records it for ``perfsuite run --price-per-hour``.

The rule lives in :mod:`schemas.cost` so the registry (``perfsuite submit``, the
leaderboard) applies the same one to a system description's price; this module keeps
the host's names for it.
"""
from __future__ import annotations

from schemas.cost import (PER_MILLION, RUN_OPTION_SOURCE, SYSTEM_PRICE_SOURCE, TIME_TO_TARGET, CostLine,
                          accelerators_held, cost_lines, cost_section, validate_price)

__all__ = ["PER_MILLION", "RUN_OPTION_SOURCE", "SYSTEM_PRICE_SOURCE", "TIME_TO_TARGET", "CostLine",
           "accelerators_held", "cost_lines", "cost_section", "validate_price"]
