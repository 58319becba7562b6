"""Whether scraping the engine's ``/metrics`` during a step adds load the serving client's figures
can see: one open-loop step against the null server (``--metrics``) with the scrape on and off in
alternating rounds; the client's TTFT p50/p99, requests/s and output tokens/s both ways, with the
scrapes taken and the machine's load. Thin launcher of
``perfsuite.workloads.inference.serving.scrape_overhead``; prints JSON.

    python bench/serving_metrics_overhead.py --rate 500 --seconds 3 --rounds 4 --interval-s 1
    python bench/serving_metrics_overhead.py --rate 500 --seconds 3 --rounds 4 --interval-s 0.1
"""

from __future__ import annotations

import sys

from perfsuite.workloads.inference.serving.scrape_overhead import main

if __name__ == "__main__":
    sys.exit(main())
