"""The first tables: systems, environments, workloads, runs and their metrics.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Written out here, not imported from registry.models: a migration must keep meaning what
# it meant when it was written, whatever the models become later.
JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("data", JSON_DOC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("sha256", name=op.f("uq_environments_sha256")),
    )
    op.create_table(
        "systems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(), nullable=False),
        sa.Column("cpu_model", sa.String(), nullable=False),
        sa.Column("gpu_name", sa.String(), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_systems")),
        sa.UniqueConstraint("key", name=op.f("uq_systems_key")),
    )
    op.create_table(
        "workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("category", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workloads")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_workloads_name_version")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("workload_id", sa.Integer(), nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("comparability_key", sa.String(length=64), nullable=False),
        sa.Column("params", JSON_DOC, nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("device_key", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=False),
        sa.Column("verification_status", sa.String(length=16), nullable=False),
        sa.Column("plugin_name", sa.String(), nullable=False),
        sa.Column("plugin_distribution", sa.String(), nullable=True),
        sa.Column("plugin_version", sa.String(), nullable=True),
        sa.Column("launcher", sa.String(length=16), nullable=False),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("record_sha256", sa.String(length=64), nullable=False),
        # Plain JSON even on PostgreSQL: JSONB would rewrite numbers inside the record.
        sa.Column("record", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["environment_id"], ["environments.id"],
                                name=op.f("fk_runs_environment_id_environments")),
        sa.ForeignKeyConstraint(["system_id"], ["systems.id"], name=op.f("fk_runs_system_id_systems")),
        sa.ForeignKeyConstraint(["workload_id"], ["workloads.id"], name=op.f("fk_runs_workload_id_workloads")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("run_id", name=op.f("uq_runs_run_id")),
    )
    op.create_index(op.f("ix_runs_comparability_key"), "runs", ["comparability_key"])
    op.create_index(op.f("ix_runs_started_at"), "runs", ["started_at"])
    op.create_index("ix_runs_device_key_started", "runs", ["device_key", "started_at"])
    op.create_index("ix_runs_workload_started", "runs", ["workload_id", "started_at"])
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("case", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("higher_is_better", sa.Boolean(), nullable=False),
        sa.Column("samples", JSON_DOC, nullable=False),
        sa.Column("statistics", JSON_DOC, nullable=True),
        sa.Column("roofline_resource", sa.String(), nullable=True),
        sa.Column("roofline_fraction", sa.Float(), nullable=True),
        sa.Column("ceiling_run_id", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_metrics_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metrics")),
    )
    op.create_index(op.f("ix_metrics_run_id"), "metrics", ["run_id"])


def downgrade() -> None:
    op.drop_table("metrics")
    op.drop_table("runs")
    op.drop_table("workloads")
    op.drop_table("systems")
    op.drop_table("environments")
