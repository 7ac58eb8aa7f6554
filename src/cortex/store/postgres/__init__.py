"""The PostgreSQL backend: a team server's store, many tenants in one database.

Needs the ``[postgres]`` extra (psycopg 3 and psycopg_pool); only this package imports them.
"""

from cortex.store.postgres.db import open_pool
from cortex.store.postgres.migrations import MIGRATIONS
from cortex.store.postgres.store import PostgresStore

__all__ = ["MIGRATIONS", "PostgresStore", "open_pool"]
