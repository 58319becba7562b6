"""Optimizer and learning-rate schedule from the workload's parameters, and the MLLOG
hyperparameter keys that describe them (MLPerf's ``opt_*`` names)."""

from __future__ import annotations

import math
from typing import Any

OPTIMIZERS = ("sgd", "adamw")
SCHEDULES = ("constant", "linear", "cosine")
SGD_MOMENTUM = 0.9
ADAMW_BETAS = (0.9, 0.95)
ADAMW_EPS = 1e-8


def build(p: Any, parameters: Any, fused: bool = False) -> tuple[Any, Any]:
    """(optimizer, LambdaLR scheduler): linear warm-up over ``warmup_steps``, then the
    schedule decays from ``lr`` towards 0 at ``max_steps`` (the step budget). ``fused``: torch's
    fused implementation (on a GPU: the update of every parameter and its state in one pass,
    where the default for-each one makes several), as a training script on a GPU would use."""
    import torch

    impl = {"fused": True} if fused else {}
    if p.optimizer == "sgd":
        opt = torch.optim.SGD(parameters, lr=p.lr, momentum=SGD_MOMENTUM, weight_decay=p.weight_decay, **impl)
    elif p.optimizer == "adamw":
        opt = torch.optim.AdamW(
            parameters, lr=p.lr, betas=ADAMW_BETAS, eps=ADAMW_EPS, weight_decay=p.weight_decay, **impl
        )
    else:
        raise ValueError(f"optimizer {p.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(p, step))


def lr_factor(p: Any, step: int) -> float:
    if step < p.warmup_steps:
        return (step + 1) / p.warmup_steps
    span = max(1, p.max_steps - p.warmup_steps)
    done = min(1.0, (step - p.warmup_steps) / span)
    if p.schedule == "constant":
        return 1.0
    if p.schedule == "linear":
        return 1.0 - done
    if p.schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * done))
    raise ValueError(f"schedule {p.schedule!r} is not one of {', '.join(SCHEDULES)}")


def mllog_hyperparameters(p: Any) -> dict[str, Any]:
    """MLPerf's names for what :func:`build` built."""
    out: dict[str, Any] = {
        "opt_name": p.optimizer,
        "opt_base_learning_rate": p.lr,
        "opt_end_learning_rate": p.lr if p.schedule == "constant" else 0.0,
        "opt_learning_rate_warmup_steps": p.warmup_steps,
        "opt_learning_rate_decay_steps": 0 if p.schedule == "constant" else max(0, p.max_steps - p.warmup_steps),
        "opt_learning_rate_decay_schedule": p.schedule if p.warmup_steps == 0 else f"{p.schedule} with linear warmup",
        "opt_weight_decay": p.weight_decay,
        "opt_gradient_clip_norm": p.grad_clip,
    }
    if p.optimizer == "sgd":
        out["opt_momentum"] = SGD_MOMENTUM
    else:
        out.update(
            opt_adamw_beta_1=ADAMW_BETAS[0],
            opt_adamw_beta_2=ADAMW_BETAS[1],
            opt_adamw_epsilon=ADAMW_EPS,
            opt_adamw_weight_decay=p.weight_decay,
        )
    return out
