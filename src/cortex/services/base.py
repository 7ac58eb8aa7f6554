"""What every service holds: the store, the resolved settings and the clock."""

from __future__ import annotations

from cortex.clock import Clock, SystemClock, to_iso
from cortex.config import Config

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Self

    from cortex.store.protocol import Store


class Service:
    """A use case over one ``Store``, with the settings and the (injected) clock."""

    def __init__(self, store: Store, config: Config, clock: Clock | None = None) -> None:
        self.store = store
        self.config = config
        self.clock = clock or SystemClock()

    @classmethod
    def open(
        cls,
        config: Config,
        clock: Clock | None = None,
        store: Store | None = None,
        *,
        migrate: bool = True,
        migrate_max_bytes: int | None = None,
        busy_timeout_ms: int | None = None,
    ) -> Self:
        """Build the service over ``store``, else over the home's ``brain.db`` (migrated unless
        ``migrate`` is False: a diagnosis changes nothing; not when the file is larger than
        ``migrate_max_bytes``: see ``open_store``, as for ``busy_timeout_ms``), else, when
        the settings name a ``server_url`` and no store is given, what ``remote`` gives."""
        if store is None and config.server_url:
            return cls.remote(config, clock)
        if store is None:
            from cortex.store import open_store  # the factory imports a backend: only here

            store = open_store(
                config.db_path,
                migrate=migrate,
                migrate_max_bytes=migrate_max_bytes,
                busy_timeout_ms=busy_timeout_ms,
            )
        return cls(store, config, clock)

    @classmethod
    def remote(cls, config: Config, clock: Clock | None) -> Self:
        """The service over the Cortex server ``config.server_url`` names: a ``ConfigError``
        here (``Services`` and ``SessionPersistenceManager`` serve client mode)."""
        from cortex.errors import ConfigError

        # The local file here would split the home's data from its server's.
        raise ConfigError(
            f"{cls.__name__}.open opens the local database, and this config names a "
            "server (server_url); use Services.open(config), whose services go to it"
        )

    def close(self) -> None:
        """Close the store (what ``open`` opened; safe twice): every service over it is
        unusable afterwards."""
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now_iso(self) -> str:
        """The clock's current time as canonical UTC ISO 8601."""
        return to_iso(self.clock.now())
