"""The public leaderboard: a static site written from the registry (no server, no network).

    from perfsuite.publish.leaderboard import build_site
    build_site(registry, Path("site"), submissions=Path("submissions"))

index.html (each benchmark's best result per system), workloads/<benchmark>.html (one table
per comparability key, its key settings as filters, its pictures), systems/<key>.html (a
system's results and its roofline), compare.html (system against system), record.html#<run_id>
(a record's page and its JSON, drawn from its shard records/shard-<n>.js), board.jsonl /
board.csv / board.parquet (the whole board).
"""

from __future__ import annotations

from .site import build_site

__all__ = ["build_site"]
