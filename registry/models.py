"""The registry's tables, as SQLAlchemy 2 typed ORM models.

A run row keeps the whole record as JSON (so ``perfsuite show`` reproduces it exactly)
next to the columns queries filter on. Systems, environments and workloads are shared
rows, found by a natural key, so that "all runs on this box" or "all runs of gemm v2"
are joins rather than JSON scans.

Timestamps are stored in UTC and come back timezone-aware on every backend (SQLite has
no timezone type; see :class:`UTCDateTime`). The migration in
``migrations/versions`` must match these models: a test compares them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


class JSONDocument(TypeDecorator):
    """Queryable JSON (params, environment data): JSONB on PostgreSQL, JSON elsewhere.

    A decorator rather than ``JSON().with_variant(JSONB(), "postgresql")``: the variant needs
    the PostgreSQL dialect imported where the models are defined, a twentieth of a second
    every command on a SQLite registry paid for a type it never uses. Here JSONB is looked up
    when a PostgreSQL engine first asks for the column's type."""

    impl = JSON
    cache_ok = True
    should_evaluate_none = True  # as JSON's: a None is stored as JSON null, not left out

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


JSONDoc = JSONDocument()
# The record itself stays plain JSON everywhere: PostgreSQL's ``json`` keeps the text as
# written, while JSONB rewrites numbers (1e+20 comes back as an integer, -0.0 as 0.0), which
# would change the record's canonical JSON and so its sha256.
JSONText = JSON()


class UTCDateTime(TypeDecorator):
    """A timezone-aware datetime, stored as UTC; naive values are refused, not guessed."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given where a timezone is required")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:  # SQLite hands back what was stored: UTC without an offset
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# Named constraints, so that later migrations can drop or alter them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Free text (host names, plugin versions, case labels) is unbounded String: SQLite ignores
# lengths and PostgreSQL would enforce them, so a bound would make the backends disagree.
# Bounded columns hold fixed-format values the schema constrains (hex keys, enums).
class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class System(Base):
    """A machine as the records describe it: host, CPU model and its GPUs."""

    __tablename__ = "systems"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of host + cpu + gpu names
    hostname: Mapped[str] = mapped_column(String)
    cpu_model: Mapped[str] = mapped_column(String)
    gpu_name: Mapped[str | None] = mapped_column(String)  # distinct names, ", "-joined
    gpu_count: Mapped[int] = mapped_column(Integer)

    runs: Mapped[list["Run"]] = relationship(back_populates="system")


class Environment(Base):
    """One software + hardware fingerprint (the record's ``environment``), stored once."""

    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)  # of the canonical env JSON
    data: Mapped[dict[str, Any]] = mapped_column(JSONDoc)

    runs: Mapped[list["Run"]] = relationship(back_populates="environment")


class Workload(Base):
    """A workload at one version: results of different versions never compare."""

    __tablename__ = "workloads"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    version: Mapped[int] = mapped_column(Integer)
    category: Mapped[str] = mapped_column(String(32))

    runs: Mapped[list["Run"]] = relationship(back_populates="workload")


class Run(Base):
    """One run record, with the fields queries filter and sort on pulled out as columns."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_workload_started", "workload_id", "started_at"),
        Index("ix_runs_device_key_started", "device_key", "started_at"),
        # 0002: the leaderboard (ranked runs of a workload), history (one workload on one
        # system or device, in time order) and compare (runs of one key, in time order).
        # 0003: covering the leaderboard's aggregation (no row lookups for key and system)
        Index("ix_runs_ranked", "workload_id", "status", "verification_status", "comparability_key", "system_id"),
        Index("ix_runs_workload_system_started", "workload_id", "system_id", "started_at"),
        Index("ix_runs_workload_device_key_started", "workload_id", "device_key", "started_at"),
        Index("ix_runs_comparability_key_started", "comparability_key", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(32), unique=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    system_id: Mapped[int] = mapped_column(ForeignKey("systems.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    comparability_key: Mapped[str] = mapped_column(String(64), index=True)  # recomputed on store (0004)
    # 0004: what the key is made of (perfsuite.schemas.comparability.key_settings) and its regime,
    # filled on store from the record's content; readers filter and show them.
    key_settings: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc)
    regime: Mapped[str | None] = mapped_column(String(16))
    params: Mapped[dict[str, Any]] = mapped_column(JSONDoc)
    device: Mapped[str] = mapped_column(String(16))  # controls.device: "cpu" or "cuda"
    device_key: Mapped[str] = mapped_column(String(64))  # environment.measured_device.key
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    verification_status: Mapped[str] = mapped_column(String(16))
    plugin_name: Mapped[str] = mapped_column(String)
    plugin_distribution: Mapped[str | None] = mapped_column(String)
    plugin_version: Mapped[str | None] = mapped_column(String)
    launcher: Mapped[str] = mapped_column(String(16))
    world_size: Mapped[int] = mapped_column(Integer)
    record_sha256: Mapped[str] = mapped_column(String(64))
    record: Mapped[dict[str, Any]] = mapped_column(JSONText)

    workload: Mapped[Workload] = relationship(back_populates="runs")
    system: Mapped[System] = relationship(back_populates="runs")
    environment: Mapped[Environment] = relationship(back_populates="runs")
    metrics: Mapped[list["Metric"]] = relationship(
        back_populates="run", order_by="Metric.position", cascade="all, delete-orphan"
    )


class Metric(Base):
    """One metric of a run (per case), with its raw samples and statistics."""

    __tablename__ = "metrics"
    # 0003: covering one named metric's values of given runs (leaderboard, history, compare)
    __table_args__ = (Index("ix_metrics_run_id_name_case_value", "run_id", "name", "case", "value"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # index in the record's metrics list
    case: Mapped[str] = mapped_column(String)
    name: Mapped[str] = mapped_column(String)
    unit: Mapped[str] = mapped_column(String)
    value: Mapped[float] = mapped_column(Float)
    higher_is_better: Mapped[bool] = mapped_column(Boolean)
    # Read whole, never queried inside: plain JSON (0007), cheaper to store than JSONB at scale.
    samples: Mapped[list[float]] = mapped_column(JSONText)
    statistics: Mapped[dict[str, Any] | None] = mapped_column(JSONText)
    roofline_resource: Mapped[str | None] = mapped_column(String)
    roofline_fraction: Mapped[float | None] = mapped_column(Float)
    ceiling_run_id: Mapped[str | None] = mapped_column(String)

    run: Mapped[Run] = relationship(back_populates="metrics")


class SubmittedSystem(Base):
    """A system as a submitter described it (``submissions/<org>/systems/<name>.json``)."""

    __tablename__ = "submitted_systems"
    __table_args__ = (UniqueConstraint("org", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    org: Mapped[str] = mapped_column(String)
    name: Mapped[str] = mapped_column(String)
    sha256: Mapped[str] = mapped_column(String(64))  # of the canonical description JSON
    description: Mapped[dict[str, Any]] = mapped_column(JSONDoc)

    submissions: Mapped[list["Submission"]] = relationship(back_populates="system")


class Submission(Base):
    """A run published in a submissions tree: which org and system it was filed under."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), unique=True)
    system_id: Mapped[int] = mapped_column(ForeignKey("submitted_systems.id"), index=True)
    path: Mapped[str] = mapped_column(String)  # the record's path inside its tree

    system: Mapped[SubmittedSystem] = relationship(back_populates="submissions")
