"""The numbers a team server's processes take: each one's flag, the variable that carries it to
a worker process, its range and default, parsed and checked (no I/O: the environment is a
mapping its caller passes).

Apart from ``services/hosting.py``, so that a command defining one of these flags (``cortex
worker --lock-timeout``) does not import the server's composition root to do it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from cortex.errors import ConfigError

DB_ENV, DATA_ENV = "CORTEX_SERVER_DB", "CORTEX_SERVER_DATA"
"""The variables that carry `cortex serve --db` and the server's data folder to its worker
processes (and give the server commands their `--db`)."""
SECRET_ENV = "CORTEX_SERVER_SECRET"
"""The variable holding the servers' secret (every tenant's metrics key derives from it), read
by `cortex serve`'s workers and by the commands that work on a server database."""

N = TypeVar("N", int, float)


LOCK_TIMEOUT_S = 5.0
"""How long a request of the team server waits for a lock (a session's row another request
or an operator's transaction holds) before it answers 503 ``unavailable``: far above the
milliseconds writers of one session wait for each other, far below the pool's wait."""


@dataclass(frozen=True)
class ServerNumber(Generic[N]):
    """A number of the server's processes: the ``cortex serve`` flag that sets it, the
    variable that takes it to each worker process (``app_from_env``), its range and default.
    Both read it through this, so a value the flag refuses never reaches a worker."""

    flag: str
    env: str
    kind: Callable[[str], N]
    low: N
    high: N
    default: N
    unit: str
    metavar: str = "N"
    command: str = "cortex serve"
    """The command whose flag sets it (what an error of its variable tells to pass)."""

    @property
    def range_text(self) -> str:
        return f"{self.low:.15g}-{self.high:.15g}"

    def read(self, env: Mapping[str, str]) -> N:
        """The value ``env`` gives (the default when unset or empty), or ``ConfigError``
        naming the variable and the range."""
        text = env.get(self.env)
        if not text:
            return self.default
        try:
            return self.convert(text)
        except ValueError as exc:
            raise ConfigError(
                f"{self.env}={exc}; fix it, or pass `{self.command} {self.flag} {self.metavar}`"
            ) from None

    def convert(self, text: str) -> N:
        """``text`` as a value in range, else ``ValueError`` saying what it must be."""
        try:
            value: N | None = self.kind(text)
        except ValueError:
            value = None
        if value is None or not self.low <= value <= self.high:  # NaN is in no range
            whole = "a whole number" if self.kind is int else "a number"
            raise ValueError(f"{text!r} is not {whole} of {self.unit} in {self.range_text}")
        return value


POOL = ServerNumber("--pool-size", "CORTEX_SERVER_POOL", int, 1, 200, 10, "connections")
TURN_BATCHES = ServerNumber(
    "--turn-batches", "CORTEX_SERVER_TURN_BATCHES", int, 0, 16, 1, "batches"
)
RATE = ServerNumber("--rate", "CORTEX_SERVER_RATE", float, 0.01, 1e6, 50.0, "requests a second")
BURST = ServerNumber("--burst", "CORTEX_SERVER_BURST", int, 1, 1_000_000, 100, "requests")
LOCK_TIMEOUT = ServerNumber(
    "--lock-timeout", "CORTEX_SERVER_LOCK_TIMEOUT", float, 0.05, 3600.0, LOCK_TIMEOUT_S,
    "seconds", "SECONDS",
)  # fmt: skip
SERVER_NUMBERS: tuple[ServerNumber[int] | ServerNumber[float], ...] = (
    POOL, TURN_BATCHES, RATE, BURST, LOCK_TIMEOUT
)  # fmt: skip
"""Every number ``cortex serve`` passes to its worker processes."""
WORKER_LOCK_TIMEOUT = ServerNumber(
    "--lock-timeout", "CORTEX_WORKER_LOCK_TIMEOUT", float, 0.05, 3600.0, LOCK_TIMEOUT_S,
    "seconds", "SECONDS", "cortex worker",
)  # fmt: skip
"""How long ``cortex worker --db`` waits for a session another transaction holds before it
passes over that session until its next pass (the server's bound: a job waits no longer)."""
