"""What the leaderboard needs to know about a record, behind two small functions, so that the
rules live in one place: which settings make a result comparable (a board's tabs and
filters), and which metric is each case's headline (a board's cells).

- :func:`key_settings`: the settings of the comparability key a table is filtered by
  (workload version, scenario, division, the parameters), without the parameters that only
  steer the harness (self-test injection, the bounds of a sweep, correctness-check switches),
  which never appear on a page.
- :func:`case_headline`: the figure a family's users rank by: ``schemas.headline``'s rule,
  except that inference is ranked by LoadGen's metric of each scenario (never by its accuracy,
  which is a check) and collectives by their bus bandwidth.
"""

from __future__ import annotations

import hashlib
import json

from perfsuite.schemas.headline import case_headline as generic_case_headline

# Parameters that change what the harness does around the measurement, not the figure.
HARNESS_ONLY = frozenset({"max_bytes", "min_bytes", "check", "verify_images", "accuracy_threshold"})
HARNESS_PREFIXES = ("inject",)

# LoadGen's metric per scenario (MLPerf Inference's rules): latency for the streams, throughput
# at a VALID target for Server, throughput for Offline. The first one a record has is used.
LOADGEN_HEADLINE = {
    "SingleStream": ("early_stopping_latency_p90_ms", "latency_p90_ms"),
    "MultiStream": ("early_stopping_latency_p99_ms", "latency_p99_ms"),
    "Server": ("completed_samples_per_s", "peak_valid_qps", "tokens_per_s"),
    "Offline": ("samples_per_s", "tokens_per_s"),
}
SERVING_HEADLINE = ("goodput_at_slo_rps", "goodput_rps", "completed_rps")
COLLECTIVES_HEADLINE = ("busbw_gbps",)
TRAINING_HEADLINE = ("time_to_target_s", "time_to_train_s")


def is_harness_only(name: str) -> bool:
    return name in HARNESS_ONLY or name.startswith(HARNESS_PREFIXES)


def key_settings(workload: dict) -> dict:
    """The settings a board's table is filtered by: ``{"version": 2, "scenario": ..., "division": ...,
    "param.m": 8192, ...}`` (harness-only parameters left out)."""
    out: dict = {"version": workload["version"]}
    if workload.get("scenario") is not None:
        out["scenario"] = workload["scenario"]
    out["division"] = workload["division"]
    for name, value in sorted(workload["params"].items()):
        if not is_harness_only(name):
            out[f"param.{name}"] = value
    return out


def settings_id(settings: dict) -> str:
    """A short stable id of a set of key settings (a tab's permalink)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def settings_label(settings: dict, shared: dict | None = None) -> str:
    """The settings as short text, leaving out those every configuration of the board shares."""
    shared = shared or {}
    parts = [
        f"{k.removeprefix('param.')}={_show(v)}"
        for k, v in settings.items()
        if k != "version" and shared.get(k, object()) != v
    ]
    return f"v{settings['version']}" + (" · " + ", ".join(parts) if parts else "")


def _show(value) -> str:
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value)


def case_headline(metrics: list[dict], case: str, category: str, primary: str | None = None) -> dict | None:
    """The metric a case is ranked by (see the module docstring)."""
    mine = {m["name"]: m for m in metrics if m["case"] == case}
    order: tuple[str, ...] = ()
    if primary and primary in mine:
        return mine[primary]
    if category == "inference":
        order = LOADGEN_HEADLINE.get(case, ()) + SERVING_HEADLINE
    elif category == "collectives":
        order = COLLECTIVES_HEADLINE
    elif category == "training":
        order = TRAINING_HEADLINE
    for name in order:
        if name in mine:
            return mine[name]
    found = generic_case_headline(metrics, case, primary)
    if found is not None and category == "inference" and found["name"] == "accuracy_score":
        return next((m for name, m in mine.items() if name != "accuracy_score"), None)
    return found
