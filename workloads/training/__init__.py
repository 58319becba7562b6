"""Built-in training workloads, MLPerf Training style (a plugin module listed in
``perfsuite.plugins.DEFAULT_PLUGINS``): time to a quality target for a torchvision ResNet
(``training.resnet``) and a transformers causal language model (``training.gpt``) on
deterministic synthetic tasks, with goodput, MFU, energy and MLLOG that MLPerf's
compliance checker reads (rules for these benchmarks: ``mlperf_rules/``).

Nothing here imports torch at module level, so ``perfsuite list`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

from perfsuite import hookimpl
from perfsuite.workloads.training.gpt import GPTTraining
from perfsuite.workloads.training.resnet import ResNetTraining

WORKLOADS = (ResNetTraining, GPTTraining)
# The compliance checker's rules for these benchmarks (mlperf_logging's YAML format), to run
# beside its common training rules: see perfsuite.engine.mllog_compliance.
MLPERF_RULES = Path(__file__).parent / "mlperf_rules" / "perfsuite_training.yaml"


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)
