"""Kill a real ``cortex`` process at an exact instant: ``killed(home, cwd, "module:Class.method",
"after", *args)``.

The command runs in a subprocess whose named method (of a class in a Cortex module, or a
function of the module, looked up by its callers at each call) sends the
process SIGKILL just before or just after it runs: no cleanup of any kind, as a kill -9 at that
instant would leave things. Timing-free, so the test is the same on every machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from cli_helpers import T0

KILLER = """
import importlib, os, signal, sys
module, name, when = sys.argv[1:4]
owner_name, _, attr = name.rpartition(".")
owner = importlib.import_module(module)
owner = getattr(owner, owner_name) if owner_name else owner
original = getattr(owner, attr)
def killing(*args, **kwargs):
    if when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    result = original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return result
setattr(owner, attr, killing)
from cortex.entry import main
sys.exit(main(sys.argv[4:]))
"""


def killed(
    home: Path, cwd: Path, target: str, when: str, *args: str, now: str = T0
) -> subprocess.CompletedProcess[str]:
    """``cortex ARGS`` killed ``when`` ("before" or "after") ``target`` ("module:Class.method")
    (or "module:function") first runs; asserts that the kill happened."""
    module, name = target.split(":")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=now)
    result = subprocess.run(
        [sys.executable, "-c", KILLER, module, name, when, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )
    assert result.returncode == -signal.SIGKILL, (result.returncode, result.stderr)
    return result
