"""Raw samples stored compactly: every stored record's long sample lists, and the metric rows'
samples, re-encoded by ``schemas.samples`` (the records keep their sha256, which covers the
decoded samples); records written before the encoding are otherwise kept exactly as they were.

Revision ID: 0005_compact_samples
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005_compact_samples"
down_revision = "0004"
branch_labels = None
depends_on = None

BATCH = 500
# The column types as 0001 made them: the record plain JSON, the samples JSONB on PostgreSQL.
RECORD = sa.JSON()
SAMPLES = sa.JSON().with_variant(JSONB(), "postgresql")


def _tables():
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("record", RECORD))
    metrics = sa.table(
        "metrics", sa.column("run_id", sa.Integer), sa.column("position", sa.Integer), sa.column("samples", SAMPLES)
    )
    return runs, metrics


def upgrade() -> None:
    from perfsuite.schemas.samples import MIN_ENCODED, compact_metrics, standalone

    bind = op.get_bind()
    runs, metrics = _tables()
    # Only runs with a metric of MIN_ENCODED samples or more change; find them by the metric rows.
    length = sa.func.jsonb_array_length if bind.dialect.name == "postgresql" else sa.func.json_array_length
    candidates = sorted(
        {row[0] for row in bind.execute(sa.select(metrics.c.run_id).where(length(metrics.c.samples) >= MIN_ENCODED))}
    )
    for start in range(0, len(candidates), BATCH):
        chunk = candidates[start : start + BATCH]
        for run_pk, record in bind.execute(sa.select(runs.c.id, runs.c.record).where(runs.c.id.in_(chunk))).all():
            compact = compact_metrics(record["metrics"])
            bind.execute(runs.update().where(runs.c.id == run_pk).values(record={**record, "metrics": compact}))
            for position, metric in enumerate(compact):
                if isinstance(metric["samples"], dict):
                    bind.execute(
                        metrics.update()
                        .where(metrics.c.run_id == run_pk, metrics.c.position == position)
                        .values(samples=standalone(metric, compact))
                    )


def downgrade() -> None:
    from perfsuite.schemas.samples import inline_metrics

    bind = op.get_bind()
    runs, metrics = _tables()
    for run_pk, record in bind.execute(sa.select(runs.c.id, runs.c.record)).all():
        if not any(isinstance(m["samples"], dict) for m in record["metrics"]):
            continue
        inline = inline_metrics(record["metrics"])
        bind.execute(runs.update().where(runs.c.id == run_pk).values(record={**record, "metrics": inline}))
        for position, metric in enumerate(inline):
            bind.execute(
                metrics.update()
                .where(metrics.c.run_id == run_pk, metrics.c.position == position)
                .values(samples=metric["samples"])
            )
