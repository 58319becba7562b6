"""Built-in inference workloads, driven by MLPerf LoadGen: a BERT-style classifier, a greedy
decoder with token latencies, and an OpenAI-compatible serving endpoint (``inference.serving``).
A plugin module like any outside one (listed in ``perfsuite.plugins.DEFAULT_PLUGINS``); nothing
here imports torch, transformers, the HTTP client or LoadGen at module level, so ``perfsuite list``
stays fast.
"""

from __future__ import annotations

from perfsuite import hookimpl
from perfsuite.workloads.inference.classifier import Classifier
from perfsuite.workloads.inference.generate import Generate
from perfsuite.workloads.inference.serving import Serving

WORKLOADS = (Classifier, Generate, Serving)


@hookimpl
def perfsuite_register_workloads(register):
    for cls in WORKLOADS:
        register(cls)
