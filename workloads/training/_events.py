"""MLLOG events of a training run, as they happen: rank 0 notes each event with its own
wall-clock time; the record carries them in ``details["mllog"]`` and the host's
``perfsuite.engine.mllog`` writes them as ``:::MLLOG`` lines beside the record (adding the
``submission_*`` keys, which only the record knows: division, platform).

Keys and their order follow MLPerf Training's common rules (mlperf_logging's
``training_6.1.0/common.yaml``): ``cache_clear``, ``init_start``, the hyperparameters,
``init_stop``, ``run_start``, blocks (one per evaluation interval) and epochs with
``samples_count`` and ``epoch_num``, ``eval_start``/``eval_stop``/``eval_accuracy``,
and ``run_stop`` with a ``status`` of ``success`` or ``aborted``.
"""

from __future__ import annotations

import time
from typing import Any


class Events:
    """Collects events (only when ``enabled``: rank 0); cheap enough to call every step."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.items: list[dict] = []

    def _add(self, event_type: str, key: str, value: Any, metadata: dict | None) -> None:
        if self.enabled:
            self.items.append(
                {
                    "time_ms": time.time() * 1000.0,
                    "event_type": event_type,
                    "key": key,
                    "value": value,
                    "metadata": dict(metadata or {}),
                }
            )

    def point(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._add("POINT_IN_TIME", key, value, metadata)

    def start(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._add("INTERVAL_START", key, value, metadata)

    def end(self, key: str, value: Any = None, **metadata: Any) -> None:
        self._add("INTERVAL_END", key, value, metadata)
