"""``perfsuite doctor``: is this machine quiet and set up for measuring?

Each check reads facts (NVML, ``/sys``, ``/proc``, psutil), judges them with a rule from
:mod:`perfsuite.doctor.rules` and reports ok / warn / fail with the value seen and why it
matters; a fact that cannot be read here is ``unknown`` with the reason, never a guess.
The same checks run before every ``perfsuite run`` and are stored in its record; nothing
on the machine is ever changed.
"""

from __future__ import annotations

from perfsuite.doctor.findings import VERDICTS, Finding, overall, to_dicts


def run_checks(gpu_indices: list[int] | None = None, quick: bool = False) -> list[Finding]:
    """Every check, host first, then each GPU (all visible GPUs unless ``gpu_indices``).
    ``quick`` shortens the busy-process sample, for the pre-flight of a run."""
    from perfsuite.doctor import gpu_facts, host_facts, rules

    findings = rules.judge_host(host_facts.read(busy_sample_s=0.1 if quick else 0.5))
    gpus, reason = gpu_facts.read(gpu_indices)
    if reason is not None:
        findings += rules.no_gpu(reason)
    for g in gpus:
        findings += rules.judge_gpu(g, host_facts.affinity_cpus())
    return findings


__all__ = ["VERDICTS", "Finding", "overall", "run_checks", "to_dicts"]
