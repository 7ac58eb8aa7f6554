"""The ``cortex`` console script: a standard-library-only front door.

Hook processes run once per agent event, so ``cortex hook ...`` must not pay for importing the
human CLI (click) or anything else heavy: this module looks at argv and imports only what
the command needs. Global options given before ``hook`` (``--home``, ``--now``, ``--set``,
``--json``) become the environment the hook reads (``CORTEX_HOME``, ``CORTEX_NOW``,
``CORTEX_<NAME>``), which is what they mean to every other command.
"""

from __future__ import annotations

import os
import sys

_VALUE_OPTIONS = ("--home", "--now", "--set")


def main(argv: list[str] | None = None) -> int:
    """Run the ``cortex`` command; return its exit code."""
    args = sys.argv[1:] if argv is None else argv
    hook_args = _hook_args(args)
    if hook_args is not None:
        from cortex.adapters.hooks import main as hook_main

        return hook_main(hook_args)
    from cortex.adapters.cli.main import run

    return run(args)


def _hook_args(args: list[str]) -> list[str] | None:
    """The arguments after ``hook`` when the command is ``cortex [global options] hook ...``.

    Applies the global options to the environment on the way; None for any other command.
    """
    env: dict[str, str] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        name, eq, inline = arg.partition("=")
        if name in _VALUE_OPTIONS:
            value = inline if eq else (args[index + 1] if index + 1 < len(args) else None)
            if value is None:
                return None
            _apply(name, value, env)
            index += 1 if eq else 2
        elif arg == "--json":
            index += 1
        elif arg == "hook":
            os.environ.update(env)
            return args[index + 1 :]
        else:
            return None
    return None


def _apply(option: str, value: str, env: dict[str, str]) -> None:
    if option == "--home":
        env["CORTEX_HOME"] = value
    elif option == "--now":
        env["CORTEX_NOW"] = value
    else:
        name, sep, setting = value.partition("=")
        if sep and name.strip():
            env["CORTEX_" + name.strip().upper()] = setting.strip()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
