"""The comparability key: runs compare, pool, rank and form a history only when every setting
that moves their figure is equal. One rule, computed from a record's own content, by the runner
when it writes a record and by the registry when it stores one (a stored key is never trusted).

:func:`key_settings` is what the key is made of, as a JSON object readers can show (the
leaderboard's filters, ``compare``'s refusal):

- ``workload``, ``version``: the workload and the version its measurement has had since
  (``workload.comparable_since`` where a new version declares it measures the same thing).
- ``scenario``, ``division``.
- ``params``: the resolved parameters, less those the workload declares as steering only a
  self-test or the harness (``param(..., harness=True)``, recorded in ``workload.harness_params``).
  Output parameters (``param(..., output=True)``, recorded in ``workload.output_params``: where a
  run saves what it leaves behind) stay out too.
- ``self_test``: the harness parameters set away from their defaults, only when there are any:
  such a run never shares a key with a real one, and is never ranked (:func:`is_self_test`).
- ``device``, ``deterministic``; ``world``: world size and nodes.
- ``timing``: the timing controls the workload honoured (``controls.not_applied`` names the
  others): L2 flush, CUDA graph, and the iteration policy, a count or a minimum time, by its
  value class (:func:`iteration_policy`). A workload's own timing mode is one of its parameters.
- ``regime``: burst, sustained, power-capped or unobserved (:mod:`perfsuite.schemas.regime`).

:func:`comparability_key` is the sha256 (hex) of the canonical JSON of those settings.
Plain functions on record dicts: the registry uses them without importing the host.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from perfsuite.schemas.regime import regime

# Records written before workloads declared their harness parameters: the built-ins' self-test
# switches were these (collectives and inference), with these defaults.
LEGACY_HARNESS_PARAMS: Mapping[str, Any] = {"inject": "none", "inject_rank": 0}


def _value_class(value: float) -> float:
    """The power of two nearest ``value`` on a log scale: 20 and 16 share a class, 20 and 50 do not."""
    return float(2.0 ** round(math.log2(value))) if value > 0 else 0.0


def _number(value: float) -> str:
    return f"{value:g}"


def iteration_policy(controls: Mapping[str, Any]) -> str | None:
    """How many calls a timed loop made: ``count ~16`` (a fixed count, by its class), ``min-time
    ~1 s, <=10000 calls`` (a minimum time by its class, and the cap on calls, which binds for calls
    under min_time / max_iterations), or None where the workload times its own way."""
    if controls.get("iterations") is not None:
        return f"count ~{_number(_value_class(controls['iterations']))}"
    if controls.get("min_time_s") is not None:
        cap = controls.get("max_iterations")
        return f"min-time ~{_number(_value_class(controls['min_time_s']))} s" + (
            f", <={cap} calls" if cap is not None else ""
        )
    return None


def harness_params(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Name -> default of the parameters that steer only a self-test or the harness."""
    declared = workload.get("harness_params")
    if isinstance(declared, Mapping):
        return dict(declared)
    params = workload.get("params") or {}
    return {name: default for name, default in LEGACY_HARNESS_PARAMS.items() if name in params}


def self_test(record: Mapping[str, Any]) -> dict[str, Any]:
    """The harness parameters this run set away from their defaults ({} for a real run)."""
    workload = record["workload"]
    params = workload.get("params") or {}
    return {
        name: params[name] for name, default in harness_params(workload).items() if params.get(name, default) != default
    }


def is_self_test(record: Mapping[str, Any]) -> bool:
    """A run steered by a self-test switch: recorded, never ranked."""
    return bool(self_test(record))


def timing_settings(controls: Mapping[str, Any]) -> dict[str, Any]:
    """The timing controls a workload honoured that move its figure (not the warm-up count)."""
    out: dict[str, Any] = {}
    policy = iteration_policy(controls)
    if policy is not None:
        out["iterations"] = policy
    for name in ("l2_flush", "cuda_graph"):
        if controls.get(name) is not None:
            out[name] = bool(controls[name])
    return out


def key_settings(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting that moves a record's figure, by name (see the module docstring)."""
    w, controls, launch = record["workload"], record["controls"], record["launch"]
    harness = harness_params(w)
    settings: dict[str, Any] = {
        "workload": w["name"],
        "version": w.get("comparable_since") or w["version"],
        "scenario": w.get("scenario"),
        "division": w.get("division"),
        "params": {
            name: value
            for name, value in (w.get("params") or {}).items()
            if name not in harness and name not in (w.get("output_params") or ())
        },
        "device": controls.get("device"),
        "deterministic": bool(controls.get("deterministic")),
        "world": {"world_size": launch.get("world_size", 1), "nnodes": launch.get("nnodes", 1)},
        "timing": timing_settings(controls),
        "regime": regime(record),
    }
    steered = self_test(record)
    if steered:
        settings["self_test"] = steered
    return settings


def settings_key(settings: Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of key settings."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def comparability_key(record: Mapping[str, Any]) -> str:
    """Apples to apples: two records compare only when this key is equal."""
    return settings_key(key_settings(record))


def flat_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Key settings flattened to one level (``param.m``, ``timing.l2_flush``, ``world.world_size``):
    what a table of differences or a filter shows."""
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, Mapping):
            prefix = "param" if name == "params" else name
            for inner, v in value.items():
                out[f"{prefix}.{inner}"] = v
        else:
            out[name] = value
    return out


def settings_line(settings: Mapping[str, Any]) -> str:
    """Key settings as one line a table title shows: regime, timing, world, then parameters."""
    flat = flat_settings(settings)
    order = ["regime", *(k for k in flat if k.startswith(("timing.", "world."))), "device", "deterministic"]
    shown = [k for k in order if k in flat] + [k for k in flat if k.startswith(("param.", "self_test."))]
    return " · ".join(f"{k.split('.', 1)[-1] if '.' in k else k} {_text(flat[k])}" for k in shown)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
