"""The serving client's capacity on this machine, as ``inference.serving`` records it: streamed
requests per second against the null streaming server (16 chunks each), closed loop, with the
median TTFT of requests sent one at a time (what the client adds to a TTFT), then one
open-loop step at ``--rate`` (achieved rate, TTFT, how late requests left their schedule).
Thin launcher of ``perfsuite.workloads.inference._serving_capacity``; prints JSON.

    python bench/serving_client_capacity.py --processes 1 --rate 2000 --seconds 3
    python bench/serving_client_capacity.py --processes 2 --server-processes 2 --rate 2000
"""

from __future__ import annotations

import sys

from perfsuite.workloads.inference._serving_capacity import main

if __name__ == "__main__":
    sys.exit(main())
