"""OpenClaw file mode: ``memory.md``, daily logs and snapshots in a workspace, kept in sync
with the database (``service.py`` the triggers, ``sync.py`` the sync and its source-of-truth
rule, ``workspace.py`` the files)."""

from cortex.services.filemode.service import Bootstrap, FileModeService, Written
from cortex.services.filemode.sync import SyncReport

__all__ = ["Bootstrap", "FileModeService", "SyncReport", "Written"]
