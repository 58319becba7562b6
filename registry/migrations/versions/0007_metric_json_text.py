"""A metric's samples and statistics stored as PostgreSQL's ``json`` (the text as written), not
``jsonb``: no query looks inside them (history, the leaderboard and compare read them whole), and
turning each into ``jsonb`` on the way in was the server's largest cost per metric row at scale
(1,000,000 rows of the scale bench: about 6 of its 44 CPU-seconds; ``bench/registry_scale.py``).
``json`` also keeps each sample's digits as written, as the stored record does.

Existing rows are converted in place; nothing changes on SQLite (JSON is text there).

Revision ID: 0007_metric_json_text
Revises: 0006_record_lz4
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0007_metric_json_text"
down_revision = "0006_record_lz4"
branch_labels = None
depends_on = None

COLUMNS = ("samples", "statistics")


def _convert(to: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for column in COLUMNS:
        op.execute(f"ALTER TABLE metrics ALTER COLUMN {column} TYPE {to} USING {column}::{to}")


def upgrade() -> None:
    _convert("json")


def downgrade() -> None:
    _convert("jsonb")
