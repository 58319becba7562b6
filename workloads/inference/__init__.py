"""Built-in inference workloads, driven by MLPerf LoadGen: a BERT-style classifier and a
greedy decoder with token latencies. A plugin module like any outside one (listed in
``perfsuite.plugins.DEFAULT_PLUGINS``); nothing here imports torch, transformers or LoadGen at
module level, so ``perfsuite list`` stays fast.
"""

from __future__ import annotations

from perfsuite import hookimpl
from perfsuite.workloads.inference.classifier import Classifier
from perfsuite.workloads.inference.generate import Generate

WORKLOADS = (Classifier, Generate)


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)
