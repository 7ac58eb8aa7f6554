"""Cortex: local-first session continuity and memory for AI agents.

The public Python API. Names are imported lazily so that ``import cortex`` (which every hook
process pays for) stays cheap.

    from cortex import SessionPersistenceManager, load_config
    cortex = SessionPersistenceManager.open(load_config())
    restored = cortex.on_session_start(project="api")
    print(restored.preamble)
"""

from __future__ import annotations

import importlib

# Not ``from typing import TYPE_CHECKING``: importing typing costs a hook process ~8 ms, and
# mypy treats any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS = {
    "AddResult": "cortex.memory",
    "Checkpoint": "cortex.memory_models",
    "Clock": "cortex.clock",
    "CompactionService": "cortex.compaction",
    "Config": "cortex.config",
    "ContextResult": "cortex.memory_models",
    "CortexError": "cortex.errors",
    "EventLog": "cortex.events",
    "FixedClock": "cortex.clock",
    "HotTopicExtractor": "cortex.topics",
    "Memory": "cortex.memory_models",
    "MemoryService": "cortex.memory",
    "NewMemory": "cortex.memory",
    "PendingTask": "cortex.models",
    "Pin": "cortex.models",
    "RestoredSessionContext": "cortex.models",
    "SessionEvent": "cortex.memory_models",
    "SessionPersistenceManager": "cortex.sessions",
    "SessionSnapshot": "cortex.memory_models",
    "SessionState": "cortex.models",
    "Store": "cortex.store",
    "SystemClock": "cortex.clock",
    "apply_decay": "cortex.decay",
    "compaction_due": "cortex.budgets",
    "format_preamble": "cortex.preamble",
    "load_config": "cortex.config",
    "open_store": "cortex.store",
    "redact": "cortex.redaction",
    "score": "cortex.scoring",
    "score_all": "cortex.scoring",
    "should_inherit": "cortex.decay",
}

__all__ = [
    "AddResult",
    "Checkpoint",
    "Clock",
    "CompactionService",
    "Config",
    "ContextResult",
    "CortexError",
    "EventLog",
    "FixedClock",
    "HotTopicExtractor",
    "Memory",
    "MemoryService",
    "NewMemory",
    "PendingTask",
    "Pin",
    "RestoredSessionContext",
    "SessionEvent",
    "SessionPersistenceManager",
    "SessionSnapshot",
    "SessionState",
    "Store",
    "SystemClock",
    "apply_decay",
    "compaction_due",
    "format_preamble",
    "load_config",
    "open_store",
    "redact",
    "score",
    "score_all",
    "should_inherit",
]

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from cortex.budgets import compaction_due
    from cortex.clock import Clock, FixedClock, SystemClock
    from cortex.compaction import CompactionService
    from cortex.config import Config, load_config
    from cortex.decay import apply_decay, should_inherit
    from cortex.errors import CortexError
    from cortex.events import EventLog
    from cortex.memory import AddResult, MemoryService, NewMemory
    from cortex.memory_models import (
        Checkpoint,
        ContextResult,
        Memory,
        SessionEvent,
        SessionSnapshot,
    )
    from cortex.models import PendingTask, Pin, RestoredSessionContext, SessionState
    from cortex.preamble import format_preamble
    from cortex.redaction import redact
    from cortex.scoring import score, score_all
    from cortex.sessions import SessionPersistenceManager
    from cortex.store import Store, open_store
    from cortex.topics import HotTopicExtractor


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cortex' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
