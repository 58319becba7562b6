"""Stored records compressed with lz4 on PostgreSQL, where the server has it (PostgreSQL 14 and
later, built with lz4): a record of a few KiB is compressed when stored out of line (TOAST), and
the default, pglz, cost about 0.2 ms of server CPU per record of the scale bench, a third of
what the server spent storing one (``bench/registry_scale.py``); lz4 costs a tenth of that.

Records already stored keep their compression and read back as before; only values written
from now on are compressed with lz4. Nothing changes on SQLite (it does not compress).

Revision ID: 0006_record_lz4
Revises: 0005_compact_samples
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_record_lz4"
down_revision = "0005_compact_samples"
branch_labels = None
depends_on = None


def _lz4_available(bind) -> bool:
    """Whether this server can compress with lz4 (a build option of PostgreSQL 14 and later)."""
    found = bind.execute(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar_one_or_none()
    return found is not None and "lz4" in found


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and _lz4_available(bind):
        op.execute("ALTER TABLE runs ALTER COLUMN record SET COMPRESSION lz4")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and _lz4_available(bind):
        op.execute("ALTER TABLE runs ALTER COLUMN record SET COMPRESSION pglz")
