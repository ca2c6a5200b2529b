"""Alembic environment: Shoal passes the connection in; nothing is read from alembic.ini."""

from alembic import context

from shoal.lake.migrations import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
