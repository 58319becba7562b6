"""The null OpenAI-compatible streaming server (``perfsuite.workloads.inference.serving.null_server``): every
completion answered at once with N chunks, or with injected faults. Thin launcher.

    python bench/serving_null_server.py --port 8123 [--chunks 16] [--processes 2]
"""

from __future__ import annotations

import sys

from perfsuite.workloads.inference.serving.null_server import main

if __name__ == "__main__":
    sys.exit(main())
