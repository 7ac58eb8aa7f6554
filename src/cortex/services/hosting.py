"""One database serving many requests of many tenants: the team server's composition root.

A ``ServiceHost`` holds the only state a server process keeps: on PostgreSQL one connection
pool, on SQLite (one person's development server) just the file's path. Each request gets
its own ``Services`` bound to its tenant (``open``) and closes it at the end; nothing else
outlives a request. The database is opened and migrated on first use, so a server whose
database is down still starts and answers ``/healthz``; ``ready`` says when it can serve.

Each tenant's settings resolve for a home of its own under the host's data directory
(``<data_dir>/tenants/<tenant>``): the session mirrors a service writes stay inside the
tenant's directory, never a shared one. A tenant's pipeline tasks live in the database
(``tasks_in_store``), so that every server process and every machine of the tenant sees
them. With a server ``secret`` each tenant's metrics key is derived from it (``tenant_key``),
never stored, so that every process behind a load balancer writes and verifies one chain per
tenant; without one (a development server) the key is a file in the tenant's home, as on a
laptop.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cortex.clock import Clock, SystemClock, to_iso
from cortex.config import CONFIG_FILES, Config, load_config
from cortex.core.server_numbers import POOL, SECRET_ENV
from cortex.core.tenancy import check_request_id, check_tenant_id, parse_key
from cortex.errors import (
    ConfigError,
    ContentionError,
    CortexError,
    RefusedAhead,
    RequestReplayed,
    ServerConfigError,
    UnauthorizedError,
    ValidationError,
)
from cortex.logs import getLogger
from cortex.services.app import Services
from cortex.services.metrics import tenant_key
from cortex.store import DEFAULT_TENANT, open_shared_store, open_store, postgres_url
from cortex.store.migrations import migration_names
from cortex.store.records import (
    SERVER_DECODED_CHARS,
    SERVER_DECODED_SESSIONS,
    keep_decoded_sessions,
)

if TYPE_CHECKING:
    from cortex.core.tenancy import ApiKeyRecord
    from cortex.services.tenants import TenantService
    from cortex.store.protocol import SharedStore, Store, TurnBatch

T = TypeVar("T")
log = getLogger("cortex.server")


UNAVAILABLE = "the database is unavailable or busy; retry shortly (the server's log says why)"
"""What a client of the server is told when the database fails: its host, port, role and name
are shared infrastructure, so the cause goes to the server's log only."""
MIN_SECRET_BYTES = 32
"""The shortest server secret taken: the metrics keys derived from it must not be guessable by
whoever can read the chains in the database."""
CONTENTION_ATTEMPTS = 3
"""How many times ``apply_once`` runs a change the database rolled back as a deadlock victim
(or a serialization failure) before the request gets the 503."""
MAX_CACHED_CONFIGS = 10_000
"""Tenants whose settings a server process keeps (then it starts over)."""
CONFIG_CHECK_S = 1.0
"""How often a process looks whether a tenant's settings files (``config.toml`` and
``openclaw.json``) changed (a ``stat`` of each): an edit takes effect within this, with no
restart, and a request costs no more than a clock read."""


def check_secret(secret: str) -> str:
    """``secret``, once it is long enough to derive the tenants' metrics keys from."""
    size = len(secret.encode())
    if size < MIN_SECRET_BYTES:
        raise ConfigError(
            f"{SECRET_ENV} is {size} bytes; use at least {MIN_SECRET_BYTES}, e.g. "
            "`openssl rand -hex 32` (the same on every server)"
        )
    return secret


def check_server_secret(url: str, secret: str | None, how: str) -> None:
    """The secret a server on ``url`` starts with: one is needed on PostgreSQL (else
    ``ConfigError``: not set, then ``how`` to set it), and one given must be long enough
    (``check_secret``). A URL of a scheme no store serves is refused here too."""
    if secret:
        check_secret(secret)
    elif postgres_url(url):
        raise ConfigError(f"{SECRET_ENV} is not set; {how}")


class ServiceHost:
    """The database of a server process and per-request ``Services`` over it.

    Args:
        url: a PostgreSQL URL (many tenants, one pool) or a SQLite path (tenant ``default``).
        data_dir: where each tenant's home directory goes.
        pool_size: most PostgreSQL connections this process holds.
        clock: the clock of every request (tests fix it).
        secret: the server secret each tenant's metrics key is derived from (at least
            ``MIN_SECRET_BYTES``).
        lock_timeout: on PostgreSQL, seconds a statement waits for a lock before the request
            fails with ``BusyError``; None (a command's) waits as long as it takes.
        config_check_seconds: how often a tenant's settings files are looked at for a change.
    """

    def __init__(
        self,
        url: str,
        data_dir: Path,
        *,
        pool_size: int = POOL.default,
        clock: Clock | None = None,
        secret: str | None = None,
        lock_timeout: float | None = None,
        config_check_seconds: float = CONFIG_CHECK_S,
    ) -> None:
        self.url = str(url)
        self.config_check_seconds = config_check_seconds
        self.lock_timeout = lock_timeout
        self.data_dir = data_dir
        self.pool_size = pool_size
        self.clock = clock or SystemClock()
        self.postgres = postgres_url(self.url)  # (another scheme: refused here, as such)
        self._root: SharedStore | None = None
        self._migrated = False
        self._lock = threading.Lock()
        self._secret = check_secret(secret) if secret is not None else None
        self._configs: dict[str, _Loaded] = {}
        self._own: Config | None = None
        self._invalid: dict[str, str] = {}
        """Each tenant whose settings failed to load, and the error last logged for it."""
        self._keys: TenantService | None = None
        self._known_keys: dict[str, tuple[str, tuple[str, ...]]] = {}
        if self.postgres:  # many tenants' restore candidates, each read at every start
            keep_decoded_sessions(SERVER_DECODED_SESSIONS, SERVER_DECODED_CHARS)

    def _store(self, tenant: str) -> Store:
        """A store of ``tenant``: on the shared pool, or a fresh SQLite connection."""
        if self.postgres:
            return self._shared().for_tenant(tenant)
        with self._lock:
            store = open_store(self.url, migrate=not self._migrated)
            self._migrated = True
            return store

    def _shared(self) -> SharedStore:
        """The PostgreSQL store owning the pool, opened (and migrated) on first use."""
        with self._lock:
            if self._root is None:
                self._root = open_shared_store(
                    self.url, pool_size=self.pool_size, lock_timeout=self.lock_timeout
                )
            return self._root

    def turn_batch(self) -> AbstractContextManager[TurnBatch]:
        """One transaction across tenants for a batch of captured turns (PostgreSQL only:
        a SQLite server serves one tenant, a turn at a time)."""
        if not self.postgres:
            raise ConfigError("batches of turns need a postgresql:// database")
        return self._shared().turn_batch()

    def config(self, tenant: str) -> Config:
        """``tenant``'s settings: defaults only, for a home inside the data directory. Kept
        between requests (building them costs about a millisecond) and read again when one of
        the tenant's settings files (``CONFIG_FILES``: its ``config.toml``, its
        ``openclaw.json``) changed (modification time, size or inode, or it came or went),
        which is looked at once every ``config_check_seconds`` at most: an edit takes effect
        without a restart, and an invalid one makes the tenant's requests fail (the old
        settings are no longer used) until it is fixed."""
        now = time.monotonic()
        kept = self._configs.get(tenant)
        if kept is not None and now < kept.check_at:
            return kept.config
        home = self._home(tenant)
        mark = tuple(_file_mark(home / name) for name in CONFIG_FILES)
        if kept is None or kept.mark != mark:
            try:
                kept = _Loaded(self._load_config(tenant), mark, 0.0)
            except ServerConfigError:
                self._configs.pop(tenant, None)
                raise
        kept = _Loaded(kept.config, mark, now + self.config_check_seconds)
        with self._lock:
            if len(self._configs) >= MAX_CACHED_CONFIGS:
                self._configs.clear()
            self._configs[tenant] = kept
        return kept.config

    def _home(self, tenant: str) -> Path:
        return self.data_dir / "tenants" / check_tenant_id(tenant)

    def _load_config(self, tenant: str) -> Config:
        """``tenant``'s settings read from its home, or ``ServerConfigError`` when its
        settings files are invalid: the operator's mistake, which no request can fix, so never
        a 4xx. Logged once per tenant and error (the file's path goes to the log only); read
        again at the tenant's next request, so fixing the file needs no restart."""
        try:
            found = load_config(self._home(tenant), env={})
        except ConfigError as exc:
            detail = str(exc)
            if self._invalid.get(tenant) != detail:
                self._invalid[tenant] = detail
                log.error("tenant %s cannot be served: invalid settings: %s", tenant, detail)
            shown = detail.replace(str(self.data_dir), "<server data>")
            raise ServerConfigError(
                f"the server's settings for tenant {tenant!r} are invalid ({shown}); the "
                "server's operator must fix them, then retry"
            ) from exc
        self._invalid.pop(tenant, None)
        return found

    def invalid_configs(self) -> list[str]:
        """Why each tenant with a home under the data directory cannot be served, if its
        settings are invalid (what ``cortex serve`` warns of as it starts)."""
        tenants = self.data_dir / "tenants"
        homes = {found.parent for name in CONFIG_FILES for found in tenants.glob(f"*/{name}")}
        found = []
        for home in sorted(homes):
            try:
                load_config(home, env={})
            except ConfigError as exc:
                found.append(f"tenant {home.name!r}: {exc}")
        return found

    def check_served(self, tenant: str) -> None:
        """Raise ``UnauthorizedError`` when this database cannot serve ``tenant``: a SQLite
        file holds tenant ``default`` only."""
        if not self.postgres and tenant != DEFAULT_TENANT:
            raise UnauthorizedError(
                f"a SQLite server serves tenant {DEFAULT_TENANT!r} only; use tenant "
                f"{DEFAULT_TENANT!r}, or a postgresql:// database for tenant {tenant!r}"
            )

    def check_database(self) -> None:
        """Raise a ``CortexError`` when this host could never serve a request: a URL of
        another scheme, a SQLite path that cannot be opened (or migrated). A PostgreSQL
        database is asked on first use only: a server whose database is down still starts."""
        if not self.postgres:
            self._store(DEFAULT_TENANT).close()

    def open(self, tenant: str) -> Services:
        """``tenant``'s services for one request; the caller closes them."""
        self.check_served(tenant)
        key = tenant_key(self._secret, tenant) if self._secret else None
        return Services(
            self._store(tenant),
            self.config(tenant),
            self.clock,
            metrics_key=key,
            tasks_in_store=True,
        )

    def own_config(self) -> Config:
        """The server's own settings: defaults only, for the data directory, whatever a
        tenant's settings files say (tenant ``default``'s included)."""
        if self._own is None:
            self._own = load_config(self.data_dir, env={}, files=False)
        return self._own

    def registry(self) -> Services:
        """Services for the tenant and key registry (authentication, management, readiness):
        the server's, so that no tenant's invalid settings stop another tenant's requests."""
        return Services(self._store(DEFAULT_TENANT), self.own_config(), self.clock)

    def authenticate(self, plaintext: str) -> tuple[str, tuple[str, ...]]:
        """(tenant, scopes) of a live API key, read from the registry now (no cache)."""
        if not self.postgres:
            with self.registry() as app:
                return app.tenants.authenticate(plaintext)
        found = self._key_reader().authenticate(plaintext)
        parsed = parse_key(plaintext)
        if parsed is not None:
            self.remember_key(parsed[0], found)
        return found

    def key_check(
        self, plaintext: str, admit: Callable[[tuple[str, ...]], None]
    ) -> KeyCheck | None:
        """On PostgreSQL, for a key this process authenticated before, its check to send with
        the request's first statement (its tenant and scopes, which never change for a key
        id, known beforehand); None when the key must be authenticated first."""
        parsed = parse_key(plaintext)
        known = self.known_key(parsed[0]) if parsed else None
        return KeyCheck(plaintext, known, admit) if known is not None else None

    def known_key(self, key_id: str) -> tuple[str, tuple[str, ...]] | None:
        """On PostgreSQL, (tenant, scopes) of key ``key_id`` as this process authenticated it
        before (the registry is still read with the request, never skipped); else None."""
        return self._known_keys.get(key_id) if self.postgres else None

    def remember_key(self, key_id: str, found: tuple[str, tuple[str, ...]]) -> None:
        """Note (tenant, scopes) of key ``key_id``, just authenticated (``known_key``)."""
        with self._lock:
            if len(self._known_keys) >= MAX_CACHED_CONFIGS:
                self._known_keys.clear()
            self._known_keys[key_id] = found

    def _key_reader(self) -> TenantService:
        """The key registry on the shared pool, built once per process (not per request):
        authenticating only reads, outside any transaction, each read on a connection
        checked out for it, so every request's thread can share this one."""
        found = self._keys
        if found is None:
            from cortex.services.tenants import TenantService

            found = TenantService(self._store(DEFAULT_TENANT), self.own_config(), self.clock)
            self._keys = found
        return found

    def ready(self) -> str | None:
        """None when the database answers and is fully migrated, else the migration missing;
        raises ``StorageError`` when the database cannot be reached."""
        with self.registry() as app:
            applied = {name for name, _ in app.applied_migrations()}
        missing = [name for name in migration_names() if name not in applied]
        return (
            f"migration {missing[0]} is not applied; run `cortex db migrate`" if missing else None
        )

    def close(self) -> None:
        with self._lock:
            self._keys = None
            self._known_keys.clear()
            if self._root is not None:
                self._root.close()
                self._root = None


def apply_once(
    app: Services,
    request_id: str | None,
    change: Callable[[], T],
    *,
    ahead: bool = False,
    key: KeyCheck | None = None,
) -> T | None:
    """Run ``change``; with a ``request_id``, at most once for the tenant: the claim and the
    change commit together, and a replay returns None having changed nothing.

    ``ahead``: the claim goes with ``change``'s first statement (one round trip fewer on
    PostgreSQL; see ``Store.claim_request_ahead``), for a change that does nothing outside
    its transaction before that statement (a start, a captured turn, an end); and so does
    the caller's ``key`` check, still to be made (see ``KeyCheck``), checked first; without
    a request id, in a transaction opened for it (the change's own, on PostgreSQL, costs no
    round trip more).

    A change the database rolled back to settle a conflict with another transaction (a
    deadlock between two writers of the same sessions; ``ContentionError``) is run again,
    up to ``CONTENTION_ATTEMPTS`` times in all: nothing of it was written (its claim
    included), so the client gets the answer instead of a 503 to retry itself."""
    attempts = 1
    while True:
        try:
            return _apply_once(app, request_id, change, ahead, key)
        except RefusedAhead as refused:
            raise refused.error from None  # rolled back, with whatever went with the key's read
        except ContentionError:
            if attempts == CONTENTION_ATTEMPTS:
                raise
            attempts += 1


def _apply_once(
    app: Services,
    request_id: str | None,
    change: Callable[[], T],
    ahead: bool,
    key: KeyCheck | None,
) -> T | None:
    if request_id is None and ahead and key is not None:
        # A key checked ahead is PostgreSQL's: a transaction of its own costs no round trip,
        # and sends the key's read with the change's first (a start's reads ahead).
        with app.store.transaction():
            key(app.store)
            return change()
    if request_id is None or not ahead:
        if key is not None:
            key(app.store)  # a round trip of its own
        if request_id is None:
            return change()
    at = to_iso(app.clock.now())
    if not ahead:
        check_request_id(request_id)
        with app.store.transaction():
            return change() if app.store.claim_request(request_id, at) else None
    try:
        check_request_id(request_id)
    except ValidationError:
        if key is not None:
            key(app.store)  # an unknown key is refused before a bad request id
        raise
    try:
        with app.store.transaction():
            if key is not None:
                key(app.store)
            app.store.claim_request_ahead(request_id, at)
            return change()
    except RequestReplayed:
        return None  # rolled back: whatever went with the claim is undone


@dataclass(frozen=True)
class _Loaded:
    """A tenant's settings as a process keeps them: what its settings files were when they
    were read (``_file_mark`` of each of ``CONFIG_FILES``), and when to look at them again
    (``time.monotonic``)."""

    config: Config
    mark: tuple[tuple[int, int, int] | None, ...]
    check_at: float


def _file_mark(path: Path) -> tuple[int, int, int] | None:
    """What tells an edit of ``path`` (modification time, size, inode), None when absent."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size, found.st_ino)


@dataclass(frozen=True)
class KeyCheck:
    """The check of a request's API key, made with the request's first statement rather than
    in a round trip before it (``ServiceHost.key_check``); what the key allows (``admit``:
    its rate limit and scope) runs once the key is found live, before anything else of that
    round trip is seen. The registry is read then, as ever: a revoked key fails at once."""

    plaintext: str
    known: tuple[str, tuple[str, ...]]
    admit: Callable[[tuple[str, ...]], None]
    """What the key's scopes allow, given them: raises to refuse the request."""

    def __call__(self, store: Store) -> None:
        parsed = parse_key(self.plaintext)
        assert parsed is not None  # known keys parse
        store.check_api_key_ahead(parsed[0], self._settle)

    def _settle(self, record: ApiKeyRecord | None) -> None:
        from cortex.services.tenants import verify_key

        try:
            if verify_key(self.plaintext, record) != self.known:  # key ids are never reused
                raise UnauthorizedError("this API key's tenant or scopes changed; send it again")
            self.admit(self.known[1])
        except CortexError as exc:
            raise RefusedAhead(exc) from exc
