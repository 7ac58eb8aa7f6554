"""The session-continuity protocol: task folders, rituals, checkpoints, gates, retries,
context budgets and the orphan sweep, over the one session entity and store."""

from cortex.services.protocol.service import ProtocolService, SweepReport

__all__ = ["ProtocolService", "SweepReport"]
