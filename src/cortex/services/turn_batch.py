"""Group commit of captured turns: the turns a server process received at the same time,
of any tenants, captured in one transaction of two round trips once the process knows the
callers' keys (three before; a turn alone takes five).

Each turn keeps the answer it would get alone:

- its key is read in the batch's transaction, so a key revoked before the batch stops it
  (its claim taken back, its session left as it was); then ``admit`` (the server's rate
  limit and scope check) runs for it, once;
- its request id is claimed in the same transaction as its session's write: a replay,
  within the batch or after it, changes nothing and answers ``None``;
- a turn that fails (its session ended, a bad request id) gets its error and its claim is
  taken back; the others commit;
- what the batch cannot settle on its own (a session named by a prefix or not found, one
  another transaction holds, a second turn of one session or of one request id in the
  batch) is captured alone after the batch commits, through the same path a single request
  takes, in chains that may go at once (``Written.chains``: the turns of one session or one
  request id in their order); a held session is not waited for in the batch, so it holds up
  none of the batch's other turns, and its turn waits the lock bound once, alone, beside
  (not after) the turns of other held sessions;
- when the batch's transaction fails (PostgreSQL refused a row, a deadlock, the connection
  broke) nothing of it was committed, and every turn is captured alone.

A turn is answered only after the transaction that captured it committed; the turns the
batch settled can be answered as soon as it committed, before those left to capture alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cortex.clock import to_iso
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.sizing import fit_record
from cortex.core.tenancy import check_request_id, parse_key
from cortex.errors import BusyError, CortexError
from cortex.logs import getLogger
from cortex.services.hosting import ServiceHost, apply_once
from cortex.services.sessions.capture import fold_turn
from cortex.services.sessions.context import check_open, pending_tasks
from cortex.services.tenants import verify_key

if TYPE_CHECKING:
    from cortex.core.tenancy import ApiKeyRecord
    from cortex.store.protocol import TenantKey, TurnBatch

log = getLogger("cortex.server")

Outcome = SessionState | None | Exception
"""A turn's result: the stored session, None for a replayed request id, or its error."""
Admit = Callable[[str, str, tuple[str, ...]], None]
"""Called with (key id, tenant, scopes) of an authenticated caller; raises a ``CortexError``
when that caller may not capture a turn now (its rate limit, its scopes)."""


@dataclass(frozen=True)
class Turn:
    """One captured turn as a server received it."""

    token: str
    """The caller's API key."""
    session_id: str
    request_id: str | None
    signals: dict[str, Any] = field(default_factory=dict)
    """``SessionPersistenceManager.record``'s keyword arguments."""


class _Alone:
    """The outcome of a turn left to be captured on its own after the batch."""


ALONE = _Alone()


def capture_turns(host: ServiceHost, turns: Sequence[Turn], admit: Admit) -> list[Outcome]:
    """Capture ``turns`` (one batch of a PostgreSQL host); their outcomes, in order."""
    written = write_batch(host, turns, admit)
    found = dict(written.settled())
    for i in written.left():
        found[i] = written.alone(i)
    return [found[i] for i in range(len(turns))]


def write_batch(host: ServiceHost, turns: Sequence[Turn], admit: Admit) -> Written:
    """Write ``turns`` in one transaction: committed (or rolled back) when this returns, the
    turns it settled can be answered; the others are to be captured alone (``Written``)."""
    outcomes: list[Outcome | _Alone] = [ALONE] * len(turns)
    tenants: list[str | None] = [None] * len(turns)
    try:
        with host.turn_batch() as batch:
            _batch(host, batch, to_iso(host.clock.now()), turns, admit, outcomes, tenants)
    except CortexError as exc:
        log.warning("a batch of %d turns failed (%s); capturing each alone", len(turns), exc)
        outcomes = [ALONE if tenants[i] else found for i, found in enumerate(outcomes)]
    return Written(host, turns, admit, outcomes, tenants)


class Written:
    """A batch after its transaction: the outcome of each turn it settled, and the capture of
    each turn it left (``ALONE``) on its own, as a single request is, in their order.

    A session another transaction holds costs one lock bound once per batch: the first turn
    of it captured alone waits that long and gets ``BusyError``; a later one of the batch gets
    the same answer at once (nothing of either was written, their request ids stay unused).
    Turns of different chains (``chains``) may be captured alone in threads at the same time."""

    def __init__(
        self,
        host: ServiceHost,
        turns: Sequence[Turn],
        admit: Admit,
        outcomes: Sequence[Outcome | _Alone],
        tenants: Sequence[str | None],
    ) -> None:
        self.host = host
        self.turns = turns
        self.admit = admit
        self._outcomes = outcomes
        self._tenants = list(tenants)
        self._busy: dict[TenantKey, BusyError] = {}

    def settled(self) -> list[tuple[int, Outcome]]:
        """(index, outcome) of each turn the batch settled."""
        return [
            (i, found) for i, found in enumerate(self._outcomes) if not isinstance(found, _Alone)
        ]

    def left(self) -> list[int]:
        """The index of each turn to capture alone, in order."""
        return [i for i, found in enumerate(self._outcomes) if isinstance(found, _Alone)]

    def chains(self) -> list[list[int]]:
        """The turns to capture alone (``left``) in chains that may be captured at the same
        time: the turns that name one session id or one request id (whatever their tenants)
        are in one chain, in their order, since each must see what the one before it did (its
        write, its claim, its wait for a held session); two chains share neither."""
        left = self.left()
        root = {i: i for i in left}

        def find(i: int) -> int:
            while root[i] != i:
                i = root[i]
            return i

        first: dict[tuple[str, str], int] = {}  # the first turn that names each id
        for i in left:
            turn = self.turns[i]
            named = [("session", turn.session_id)]
            named += [("request", turn.request_id)] if turn.request_id is not None else []
            for key in named:
                if key in first:
                    root[find(i)] = find(first[key])
                first.setdefault(key, i)
        chains: dict[int, list[int]] = {}
        for i in left:
            chains.setdefault(find(i), []).append(i)
        return list(chains.values())

    def alone(self, index: int) -> Outcome:
        """Turn ``index`` captured on its own (authenticated and admitted first unless the
        batch did it)."""
        turn = self.turns[index]
        try:
            tenant = self._tenants[index] or self._admitted(turn)
        except Exception as exc:  # the answer of this turn only
            return exc
        self._tenants[index] = tenant
        where = (tenant, turn.session_id)
        if where in self._busy:
            return self._busy[where]  # waited for once in this batch: not again
        try:
            with self.host.open(tenant) as app:
                return apply_once(
                    app,
                    turn.request_id,
                    lambda: app.sessions.record(turn.session_id, **turn.signals),
                )
        except BusyError as exc:
            self._busy[where] = exc
            return exc
        except Exception as exc:
            return exc

    def _admitted(self, turn: Turn) -> str:
        tenant, scopes = self.host.authenticate(turn.token)
        self.admit(_key_id(turn.token), tenant, scopes)
        return tenant


def _batch(
    host: ServiceHost,
    batch: TurnBatch,
    at: str,
    turns: Sequence[Turn],
    admit: Admit,
    outcomes: list[Outcome | _Alone],
    tenants: list[str | None],
) -> None:
    """Fill ``outcomes`` (and ``tenants``, of the admitted turns) from one batch.

    When this process authenticated every caller's key before, their tenants are known:
    the claims and sessions are asked for with the keys, in one round trip, and a turn
    whose key is then refused has its claim taken back and its session left as it was.
    Otherwise the keys are read first, and only the admitted turns' claims and sessions.
    """
    key_ids = [_key_id(t.token) for t in turns]
    wanted = sorted({k for k in key_ids if k})
    known = {k: host.known_key(k) for k in wanted}
    if all(found is not None for found in known.values()):
        expected = [known[k] if k else None for k in key_ids]
        planned = [
            found[0] if found is not None and _valid_request(turn) else None
            for found, turn in zip(expected, turns, strict=True)
        ]
        chosen, claims = _plan(turns, planned)
        taken, states, tasks, records = batch.claim_and_read(list(claims), at, list(chosen), wanted)
        _admit(host, turns, key_ids, records, admit, outcomes, tenants, expected)
    else:
        _admit(host, turns, key_ids, batch.api_keys(wanted), admit, outcomes, tenants, None)
        chosen, claims = _plan(turns, tenants)
        taken, states, tasks, _ = batch.claim_and_read(list(claims), at, list(chosen))
    pipelines = {t: {task.task_id: task.to_dict() for task in found} for t, found in tasks.items()}
    saved: list[tuple[str, SessionState]] = []
    for (tenant, session_id), i in chosen.items():
        request_id = turns[i].request_id
        claimed = request_id is not None and (tenant, request_id) in taken
        if tenants[i] != tenant:  # refused once its key was read, or of another tenant
            if claimed:
                batch.release([(tenant, str(request_id))])
            continue
        if request_id is not None and not claimed:
            outcomes[i] = None  # a replay: claimed before
            continue
        found = _fold(states.get((tenant, session_id)), at, pipelines[tenant], turns[i])
        outcomes[i] = found
        if isinstance(found, SessionState):
            saved.append((tenant, found))
        elif claimed:
            batch.release([(tenant, str(request_id))])
    batch.save_sessions(saved)


def _valid_request(turn: Turn) -> bool:
    try:
        if turn.request_id is not None:
            check_request_id(turn.request_id)
    except CortexError:
        return False
    return True


def _admit(
    host: ServiceHost,
    turns: Sequence[Turn],
    key_ids: Sequence[str],
    records: Mapping[str, ApiKeyRecord],
    admit: Admit,
    outcomes: list[Outcome | _Alone],
    tenants: list[str | None],
    expected: Sequence[tuple[str, tuple[str, ...]] | None] | None,
) -> None:
    """Set ``tenants[i]`` of each turn whose key is live and admitted, else its error; a
    turn whose key reads otherwise than ``expected`` (the tenant and scopes it was planned
    with) is left to be captured alone."""
    for i, turn in enumerate(turns):
        try:
            found = verify_key(turn.token, records.get(key_ids[i]))
            if expected is None:
                host.remember_key(key_ids[i], found)  # the next batch reads it ahead
            elif found != expected[i]:
                continue  # ALONE: authenticated again on its own
            admit(key_ids[i], *found)
            if turn.request_id is not None:
                check_request_id(turn.request_id)
        except CortexError as exc:
            outcomes[i] = exc
            continue
        tenants[i] = found[0]


def _plan(
    turns: Sequence[Turn], tenants: Sequence[str | None]
) -> tuple[dict[TenantKey, int], dict[TenantKey, int]]:
    """The turn each session of the batch takes, and the request id each claims (the turns
    of a ``None`` tenant take none). A second turn of a session or of a request id is left
    to be captured alone after the batch: it must see the first one's outcome."""
    chosen: dict[TenantKey, int] = {}
    claims: dict[TenantKey, int] = {}
    for i, turn in enumerate(turns):
        tenant = tenants[i]
        if tenant is None:
            continue
        request = (tenant, turn.request_id) if turn.request_id is not None else None
        if (tenant, turn.session_id) in chosen or request in claims:
            continue
        chosen[(tenant, turn.session_id)] = i
        if request is not None:
            claims[request] = i
    return chosen, claims


def _fold(
    state: SessionState | None, at: str, pipeline: dict[str, dict[str, Any]], turn: Turn
) -> SessionState | Exception | _Alone:
    """The turn folded into its session as it will be stored, its error, or ``ALONE`` when
    the session was not read by its whole id."""
    if state is None:
        return ALONE

    def pending(pins: Sequence[Pin], *, project: str | None) -> tuple[PendingTask, ...]:
        return pending_tasks(pins, pipeline, project)

    try:
        return fit_record(fold_turn(check_open(state), at, pending, **turn.signals))
    except Exception as exc:  # one turn's failure (a bug included) is that turn's answer
        return exc


def _key_id(token: str) -> str:
    """The key id a bearer token names ("" for one that is not a key)."""
    parsed = parse_key(token)
    return parsed[0] if parsed else ""
