"""Moving the write-ahead log into the database in a thread of its own, for bulk writers.

A commit whose log has grown past ``PRAGMA wal_autocheckpoint`` pages checkpoints it before
the commit returns: the log's pages written again, at random places, into the database, and
two syncs. A writer of batches of a thousand memories at 1,000,000 stored waited for that
every second batch. SQLite's documentation suggests the remedy used here: checkpoint from
another thread. After a bulk batch commits, ``Checkpointer.request`` wakes a thread that runs
a PASSIVE checkpoint on its own connection, which blocks neither the writer nor readers; the
writer builds and commits its next batch meanwhile (the ``sqlite3`` module lets go of the
GIL inside SQLite). Requests made while a checkpoint runs fold into one more run.

Nothing is less safe: a checkpoint only copies committed pages, and with ``synchronous =
NORMAL`` a power loss may roll back what the log holds past the last checkpoint, as before.
The commit's own checkpoint stays as the backstop (the writer's ``wal_autocheckpoint``), and
closing the database stops the thread, after its checkpoint, before the connection closes.
Only bulk writes start the thread, so hooks and other short processes never have one.
"""

from __future__ import annotations

import sqlite3
import threading


class Checkpointer:
    """A thread with its own connection to ``url`` running a PASSIVE checkpoint per request."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.runs = 0
        """Checkpoints run so far (the tests read it)."""
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="cortex-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Checkpoint soon (at once, or after the checkpoint that runs now)."""
        self._wake.set()

    def stop(self) -> None:
        """End the thread once its checkpoint, if one runs, is done."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _loop(self) -> None:
        try:
            conn = sqlite3.connect(self.url, isolation_level=None)
        except sqlite3.Error:
            return  # the writer's commits and close still checkpoint
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.runs += 1
                except sqlite3.Error:
                    pass  # (a full disk, say) the commits' own checkpoints are the backstop
        finally:
            conn.close()
