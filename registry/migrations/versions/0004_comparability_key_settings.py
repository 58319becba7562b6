"""The comparability key recomputed from each stored record's own content, with what it is made
of beside it: every setting that moves a figure (parameters less harness ones, the timing controls
honoured, world size, the regime from NVML readings), where the key of a record was taken on
trust before (records with different parameters and one planted key pooled into one row).

Adds ``runs.key_settings`` (JSON) and ``runs.regime``, and rewrites ``runs.comparability_key``
of every stored run with ``perfsuite.schemas.comparability``, the rule the store applies. A later
change of that rule needs a migration of its own that recomputes again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BATCH = 500
JSON_DOC = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    from perfsuite.schemas.comparability import key_settings, settings_key

    op.add_column("runs", sa.Column("key_settings", JSON_DOC, nullable=True))
    op.add_column("runs", sa.Column("regime", sa.String(length=16), nullable=True))
    runs = sa.table(
        "runs",
        sa.column("id", sa.Integer),
        sa.column("record", sa.JSON),
        sa.column("comparability_key", sa.String),
        sa.column("key_settings", JSON_DOC),
        sa.column("regime", sa.String),
    )
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.select(runs.c.id, runs.c.record).where(runs.c.id > last).order_by(runs.c.id).limit(BATCH)
        ).all()
        if not rows:
            break
        updates = []
        for pk, record in rows:
            settings = key_settings(record)
            updates.append(
                {"pk": pk, "key": settings_key(settings), "settings": settings, "regime": settings["regime"]}
            )
        bind.execute(
            runs.update()
            .where(runs.c.id == sa.bindparam("pk"))
            .values(
                comparability_key=sa.bindparam("key"),
                key_settings=sa.bindparam("settings"),
                regime=sa.bindparam("regime"),
            ),
            updates,
        )
        last = rows[-1][0]


def downgrade() -> None:
    # The recomputed keys stay: the key a record carries was never checked, so there is nothing to restore.
    op.drop_column("runs", "regime")
    op.drop_column("runs", "key_settings")
