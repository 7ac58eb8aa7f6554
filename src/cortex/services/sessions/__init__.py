"""Session use cases: start, record, end, recover, continue, chain, pins."""

from cortex.services.sessions.manager import SessionPersistenceManager

__all__ = ["SessionPersistenceManager"]
