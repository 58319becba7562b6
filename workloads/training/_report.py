"""``perfsuite show`` for training records: the goodput split and the evaluation curve."""

from __future__ import annotations

from typing import Any

from perfsuite.workloads.training._phases import PHASES


def render(record: dict) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    d = record.get("details") or {}
    parts: list[Any] = []
    training = d.get("training")
    if training:
        throughput = training.get("goal") == "throughput"
        reached = "reached" if training["reached_target"] else "NOT reached"
        claim = (
            f"goal throughput: {training['steps']} steps of its budget (target {training['target_accuracy']} "
            f"{reached} at the last evaluation, not its claim)"
            if throughput
            else f"target {training['target_accuracy']} {reached} after {training['steps']} steps"
        )
        model = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in training["model"].items())
        parts.append(
            Text(
                f"model: {model}; {training['flops_per_sample'] / 1e9:.4g} GFLOP per sample (forward + backward); "
                f"world size {training['world_size']}, global batch {training['global_batch']} "
                f"({training['per_rank_batch']} per rank); {claim}"
            )
        )
        if training.get("clock_rules"):
            warm = training.get("untimed_warmup_s")
            parts.append(
                Text(
                    f"clock: {training['clock_rules']}; untimed initialisation {training['untimed_init_s']:.1f} s"
                    + (f" (compilation and warm-up on synthetic batches {warm:.1f} s)" if warm is not None else "")
                )
            )
    convergence = d.get("convergence")
    if convergence:
        said = convergence.get("note") or convergence.get("reason")
        parts.append(Text(f"reference convergence points: {convergence['status']}: {said}"))
    goodput = d.get("goodput")
    if goodput:
        t = Table(
            title=f"goodput: {goodput['goodput'] * 100:.1f}% of {goodput['wall_s']:.2f} s in forward/backward/optimizer"
        )
        for col in ("phase", "seconds", "share"):
            t.add_column(col, justify="left" if col == "phase" else "right")
        for phase in PHASES:
            t.add_row(phase, f"{goodput['seconds'][phase]:.3f}", f"{goodput['fraction'][phase] * 100:.1f}%")
        if goodput.get("overlap_s"):
            t.caption = (
                f"named phases overlap by {goodput['overlap_s']:.3f} s (GPU compute beside the host's data wait)"
            )
        parts.append(t)
    evals = d.get("evals")
    if evals:
        t = Table(title="evaluations")
        for col in ("step", "samples", "epoch", "eval_accuracy", "eval loss", "time s"):
            t.add_column(col, justify="right")
        for e in evals:
            t.add_row(
                str(e["step"]),
                str(e["samples"]),
                f"{e['epoch']:.3f}",
                f"{e['accuracy']:.4f}",
                f"{e['loss']:.4f}",
                f"{e['time_s']:.2f}",
            )
        parts.append(t)
    return Group(*parts) if parts else None
