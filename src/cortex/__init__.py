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
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Clock": "cortex.clock",
    "Config": "cortex.config",
    "CortexError": "cortex.errors",
    "FixedClock": "cortex.clock",
    "HotTopicExtractor": "cortex.topics",
    "PendingTask": "cortex.models",
    "Pin": "cortex.models",
    "RestoredSessionContext": "cortex.models",
    "SessionPersistenceManager": "cortex.sessions",
    "SessionState": "cortex.models",
    "Store": "cortex.store",
    "SystemClock": "cortex.clock",
    "apply_decay": "cortex.decay",
    "format_preamble": "cortex.preamble",
    "load_config": "cortex.config",
    "open_store": "cortex.store",
    "redact": "cortex.redaction",
    "score": "cortex.scoring",
    "score_all": "cortex.scoring",
    "should_inherit": "cortex.decay",
}

__all__ = [
    "Clock",
    "Config",
    "CortexError",
    "FixedClock",
    "HotTopicExtractor",
    "PendingTask",
    "Pin",
    "RestoredSessionContext",
    "SessionPersistenceManager",
    "SessionState",
    "Store",
    "SystemClock",
    "apply_decay",
    "format_preamble",
    "load_config",
    "open_store",
    "redact",
    "score",
    "score_all",
    "should_inherit",
]

if TYPE_CHECKING:  # pragma: no cover
    from cortex.clock import Clock, FixedClock, SystemClock
    from cortex.config import Config, load_config
    from cortex.decay import apply_decay, should_inherit
    from cortex.errors import CortexError
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
