"""The ``cortex`` console script: a standard-library-only front door.

Hook processes run once per agent event, so ``cortex hook ...`` must not pay for importing the
human CLI (click) or anything else heavy: this module looks at argv and imports only what
the command needs. Global options given before ``hook`` (``--home``, ``--now``, ``--set``,
``--json``) become the environment the hook reads (``CORTEX_HOME``, ``CORTEX_NOW``,
``CORTEX_<NAME>``), which is what they mean to every other command. ``session start`` and
``memory search`` with plain arguments run without click (``cortex.adapters.cli.plain``); every
other command line goes to the click CLI.
"""

from __future__ import annotations

import sys

from cortex.adapters.hooks.wire import EmptyHome, finish, quick_gc, refuse
from cortex.adapters.hooks.wire import hook_args as parse_hook_args


def main(argv: list[str] | None = None) -> int:
    """Run the ``cortex`` command; return its exit code."""
    args = sys.argv[1:] if argv is None else argv
    code = _quick(args)
    if code is not None:
        return code
    from cortex.adapters.cli.main import run

    return run(args)


def run() -> None:
    """The console script: ``main``, then a hook or a plain ``session start`` / ``memory
    search`` ends as the hook client does (``wire.finish``: exit functions, flushed streams,
    no teardown, ~5 ms of such a process); the click command line exits the ordinary way.
    Until the command line is known to be one of the quick ones, garbage is collected less
    often (``wire.quick_gc``); the click command line gets the interpreter's thresholds back."""
    args = sys.argv[1:]
    thresholds = quick_gc()
    code = _quick(args)
    if code is not None:
        finish(code)
    import gc

    gc.set_threshold(*thresholds)  # the click command line may run for hours (a server)
    from cortex.adapters.cli.main import run as run_click

    sys.exit(run_click(args))


def _quick(args: list[str]) -> int | None:
    """The exit code of a hook or a plain command; None for the click command line."""
    try:
        hook_args = parse_hook_args(args)
    except EmptyHome as exc:  # a hook still exits 0
        refuse(str(exc))
        return 0
    if hook_args is not None:
        from cortex.adapters.hooks import main as hook_main

        return hook_main(hook_args)
    from cortex.adapters.cli.plain import run as run_plain

    return run_plain(args)  # ``session start`` and ``memory search`` need no click


if __name__ == "__main__":  # pragma: no cover
    run()
