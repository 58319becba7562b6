"""The families' standard headlines, as MLPerf and nccl-tests report them.

A workload of a family declares one of these (``headline = LOADGEN_LLM``); the host reads the
same object for a record written before workloads declared a headline. One definition, so the
declaration and the fallback cannot drift apart.

- ``LOADGEN``: LoadGen's result per scenario with its VALID/INVALID verdict (SingleStream the
  90th-percentile latency, its early-stopping estimate first; MultiStream the 99th; Server
  completed samples/s; Offline samples/s).
- ``LOADGEN_LLM``: the same for a generating model: tokens/s for Server and Offline, with time
  to first token and time per output token beside.
- ``SWEEP``: nccl-tests' bus bandwidth at every size of the sweep.
- ``TIME_TO_TARGET``: MLPerf Training's time to the quality target.
"""

from perfsuite.schemas.headline import LOADGEN, LOADGEN_LLM, SWEEP, TIME_TO_TARGET

__all__ = ["LOADGEN", "LOADGEN_LLM", "SWEEP", "TIME_TO_TARGET"]
