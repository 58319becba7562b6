"""Submitted systems and submissions; indexes for the leaderboard, history and compare.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Written out, not imported from registry.models (see 0001).
JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

RUN_INDEXES = {
    "ix_runs_workload_status_verification": ["workload_id", "status", "verification_status"],
    "ix_runs_workload_system_started": ["workload_id", "system_id", "started_at"],
    "ix_runs_workload_device_key_started": ["workload_id", "device_key", "started_at"],
    "ix_runs_comparability_key_started": ["comparability_key", "started_at"],
}


def upgrade() -> None:
    op.create_table(
        "submitted_systems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("org", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("description", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submitted_systems")),
        sa.UniqueConstraint("org", "name", name=op.f("uq_submitted_systems_org_name")),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_submissions_run_id_runs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["system_id"], ["submitted_systems.id"],
                                name=op.f("fk_submissions_system_id_submitted_systems")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
        sa.UniqueConstraint("run_id", name=op.f("uq_submissions_run_id")),
    )
    op.create_index(op.f("ix_submissions_system_id"), "submissions", ["system_id"])
    for name, columns in RUN_INDEXES.items():
        op.create_index(name, "runs", columns)
    op.create_index("ix_metrics_run_id_case_name", "metrics", ["run_id", "case", "name"])


def downgrade() -> None:
    op.drop_index("ix_metrics_run_id_case_name", table_name="metrics")
    for name in RUN_INDEXES:
        op.drop_index(name, table_name="runs")
    op.drop_table("submissions")
    op.drop_table("submitted_systems")
