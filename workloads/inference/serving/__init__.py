"""``inference.serving``: an OpenAI-compatible HTTP endpoint as the system under test.

The workload (``workload``) and its parameters (``params``); the endpoint it measures, given
or started (``server``, with ``model`` writing a model from a config and ``null_server`` the
null streaming server the client is measured against, ``capacity``); the streaming client
(``http`` the keep-alive connections, ``client`` one streamed request, ``load`` the load shapes
and client processes); the prompts (``prompts``); LoadGen's side (``sut`` the system under
test, ``loadgen`` its scenarios); the sweeps (``sweep``) and their figures (``metrics``); what
``perfsuite show`` prints (``report``).
"""

from perfsuite.workloads.inference.serving.workload import Serving

__all__ = ["Serving"]
