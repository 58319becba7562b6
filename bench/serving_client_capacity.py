"""The serving client's capacity on this machine, as ``inference.serving`` records it, against the
null streaming server (16 chunks an answer): closed-loop streamed requests per second, the TTFT
of requests sent one at a time, then one open-loop step at ``--rate`` (Poisson arrivals: rate
achieved, TTFT p50/p99, how late requests left their schedule). Every figure comes with the CPU
milliseconds per request of the client's processes and of the server's, each from its own
processes, and the machine's load while it was measured (1-minute load average, cores kept busy
by other processes): on a shared machine the wall figures move with the load, the CPU cost
much less. Thin launcher of ``perfsuite.workloads.inference.serving.capacity``; prints JSON.

    python bench/serving_client_capacity.py --processes 1 --rate 2000 --seconds 3
    python bench/serving_client_capacity.py --processes 2 --rate 2000 --seconds 3
    python bench/serving_client_capacity.py --processes 1 --write-each-event   # one write per SSE event
"""

from __future__ import annotations

import sys

from perfsuite.workloads.inference.serving.capacity import main

if __name__ == "__main__":
    sys.exit(main())
