"""Alembic environment of the registry.

``perfsuite.registry.db.migrate`` passes an open connection in ``config.attributes["connection"]``
(it holds the cross-process migration lock on it). Run by hand (``alembic -c ...``), this
connects to ``sqlalchemy.url`` or, without one, to ``perfsuite.registry.db.default_url()``.

A new revision, after changing ``registry/models.py`` (from a checkout; the throwaway
database is first brought to the current head)::

    PERFSUITE_DB=sqlite:////tmp/rev.db python -c "import registry; registry.open_registry(); \
        from alembic import command; from registry.db import alembic_config; \
        command.revision(alembic_config(), 'what changed', autogenerate=True, rev_id='0002')"

then edit the generated file so that it no longer imports ``perfsuite.registry.models``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from perfsuite.registry.models import Base


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from perfsuite.registry.db import default_url

    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or default_url())
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("the registry's migrations run online only (they need a database connection)")
run_migrations_online()
