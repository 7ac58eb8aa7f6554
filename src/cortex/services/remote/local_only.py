"""What stands in for the store in client mode: any use of it names the missing local store.

The remote services subclass the local ones and override what the server contract covers;
anything else reaches the store, and this answers with a one-line ``ConfigError`` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from cortex.errors import ConfigError

if TYPE_CHECKING:
    from cortex.store.protocol import Store


class LocalOnly:
    """A ``Store`` look-alike for a home in client mode: every operation refuses."""

    def __init__(self, server_url: str) -> None:
        self.url = server_url

    @classmethod
    def store(cls, server_url: str) -> Store:
        return cast("Store", cls(server_url))

    def close(self) -> None:
        """Nothing is open."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise ConfigError(  # (``name`` is a store method: nothing a reader could act on)
            f"this operation is not in the team server's API and needs a local store, and this "
            f"home is a client of {self.url}; unset CORTEX_SERVER (server_url) to run it on the "
            "local database"
        )
