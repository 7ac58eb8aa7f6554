"""The ``cortex`` console script: a standard-library-only front door.

Hook processes run once per agent event, so ``cortex hook ...`` must not pay for importing the
human CLI (click) or anything else heavy: this module looks at argv and imports only what
the command needs.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``cortex`` command; return its exit code."""
    args = sys.argv[1:] if argv is None else argv
    from cortex.cli import run

    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
