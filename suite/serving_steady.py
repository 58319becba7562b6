"""Whether an ``inference.serving`` rate step's throughput is a steady-state figure: the record
rules' reading (``perfsuite.schemas.serving_steady``), public so that the serving workload's
``show`` and its rates use the one rule that ``export`` and the leaderboard mark filed steps by.
"""

from perfsuite.schemas.serving_steady import STEADY_WINDOW_SHARE, arrival_spread_s, no_steady_state

__all__ = ["STEADY_WINDOW_SHARE", "arrival_spread_s", "no_steady_state"]
