"""The doctor's checks as a run's pre-flight: made by the runner just before each
measurement (never in the measuring process), stored in the record as ``preflight``, and
the reason ``run --strict`` refuses to measure. GPU checks are made for a run on the GPU
only: a CPU run's record does not judge GPUs it never used.
"""

from __future__ import annotations

MAX_NAMED = 3


def preflight_section(device: str) -> dict:
    """The record's ``preflight``: the overall verdict and every finding (quick sample)."""
    from perfsuite.doctor import overall, run_checks, to_dicts

    findings = run_checks(gpu_indices=None if device == "cuda" else [], quick=True)
    if device != "cuda":  # without NVML the doctor states each GPU check unknown: not this run's concern
        findings = [f for f in findings if f.scope == "host"]
    return {"verdict": overall(findings), "checks": to_dicts(findings)}


def failed_checks(section: dict) -> list[dict]:
    return [c for c in section["checks"] if c["verdict"] == "fail"]


def refusal(section: dict) -> str | None:
    """One line naming the failed checks (``--strict`` refuses on them), or None."""
    failed = failed_checks(section)
    if not failed:
        return None
    named = "; ".join(f"{c['scope']} {c['check']}: {c['value']} ({c['why']})" for c in failed[:MAX_NAMED])
    more = f" (and {len(failed) - MAX_NAMED} more)" if len(failed) > MAX_NAMED else ""
    return f"--strict: the pre-flight check failed: {named}{more}; nothing was measured"
