"""The outside commands of the protocol: the smoke command, git history, the safety probe and
the ``session.complete`` delivery (a command and a webhook).

Commands are argument lists (a configured string is split like a shell would, and never run
through one), run with a time limit in their own process group, which is killed whole when the
limit passes. Their output is redacted before it is kept.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex.core.redaction import redact
from cortex.errors import ValidationError
from cortex.logs import getLogger

log = getLogger("cortex")
OUTPUT_TAIL_CHARS = 2_000
GIT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class CommandResult:
    """How a command ended: its exit code (None: it did not run or was stopped), output tail."""

    argv: tuple[str, ...]
    returncode: int | None
    output: str
    timed_out: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": list(self.argv),
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "error": self.error,
            "output": self.output,
        }


def split_command(command: str | list[str], what: str) -> list[str]:
    """A configured command as an argument list; ValidationError when it is empty or bad."""
    if isinstance(command, list) and command and all(isinstance(a, str) and a for a in command):
        return list(command)
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValidationError(
                f"{what} {command!r} cannot be split ({exc}); fix its quoting"
            ) from exc
        if argv:
            return argv
    raise ValidationError(f"{what} is empty or not a string or list of strings; fix it")


def run_command(
    argv: list[str], *, timeout: float, cwd: Path | None = None, stdin: str | None = None
) -> CommandResult:
    """Run ``argv`` with a time limit; never raises for the command's own failures.

    Its output goes to a temporary file, not a pipe, and the command is judged by its own exit:
    a helper it leaves running in the background (a smoke script starting a service) would
    hold a pipe open past it and make a command that passed look timed out."""
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.Popen(  # noqa: S603 - an argument list, no shell
                argv,
                cwd=cwd,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            error = f"cannot run {argv[0]!r}: {exc.strerror}"
            return CommandResult(tuple(argv), None, "", error=error)
        try:
            proc.communicate(stdin.encode("utf-8") if stdin is not None else None, timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            tail = _tail(_read_tail(output))
            return CommandResult(tuple(argv), None, tail, True, f"stopped after {timeout:g} s")
        return CommandResult(tuple(argv), proc.returncode, _tail(_read_tail(output)))


def _read_tail(output: Any) -> bytes:
    """The end of what a command wrote to ``output`` (enough for ``OUTPUT_TAIL_CHARS``)."""
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - 4 * OUTPUT_TAIL_CHARS))
    return bytes(output.read())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tail(out: bytes | None) -> str:
    text = (out or b"").decode("utf-8", "replace")
    return redact(text[-OUTPUT_TAIL_CHARS:])


def smoke_command(config_path: Path) -> list[str] | None:
    """The smoke command of a governance config (``smoke_command`` or ``commands.smoke``);
    None when the file does not exist or names none."""
    try:
        raw = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read {config_path} ({exc}); fix or remove it") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValidationError(f"{config_path} is not valid JSON ({exc}); fix it") from exc
    if not isinstance(data, dict):
        raise ValidationError(f"{config_path} is not a JSON object; fix it")
    commands = data.get("commands")
    command = data.get("smoke_command") or (
        commands.get("smoke") if isinstance(commands, dict) else None
    )
    if command is None:
        return None
    return split_command(command, f"the smoke command of {config_path}")


def repo_root(config_path: Path) -> Path:
    """The directory a governance config belongs to (the parent of ``.agentic-governance``)."""
    parent = config_path.parent
    return parent.parent if parent.name == ".agentic-governance" else parent


def git_history(cwd: Path, count: int = 10) -> list[str]:
    """``git log --oneline -<count>`` in ``cwd``; empty outside a repository."""
    result = run_command(
        ["git", "log", "--oneline", f"-{count}"], timeout=GIT_TIMEOUT_SECONDS, cwd=cwd
    )
    return result.output.splitlines() if result.ok else []


def deliver(
    payload: dict[str, Any], command: str, webhook: str, timeout: float
) -> list[dict[str, Any]]:
    """Send ``payload`` to the configured command (JSON on stdin) and webhook (JSON POST);
    return one result per target. Failures are returned and logged, never raised."""
    body = json.dumps(payload, ensure_ascii=False)
    results: list[dict[str, Any]] = []
    if command.strip():
        try:
            run = run_command(
                split_command(command, "session_complete_command"), timeout=timeout, stdin=body
            )
            error = None if run.ok else (run.error or f"exit code {run.returncode}")
        except ValidationError as exc:
            error = str(exc)
        results.append({"target": "command", "ok": error is None, "error": error})
    if webhook.strip():
        error = _post(webhook.strip(), body, timeout)
        results.append({"target": "webhook", "ok": error is None, "error": error})
    for failed in (r for r in results if not r["ok"]):
        log.warning(
            "session.complete delivery to the %s failed: %s", failed["target"], failed["error"]
        )
    return results


def _post(url: str, body: str, timeout: float) -> str | None:
    if not url.startswith(("http://", "https://")):
        return f"webhook {url[:60]!r} is not an http(s) URL"
    import urllib.error  # only when a webhook is configured: it costs ~100 ms to import
    import urllib.request

    request = urllib.request.Request(
        url, data=body.encode("utf-8"), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return redact(f"{type(exc).__name__}: {exc}")[:200]
    return None if 200 <= status < 300 else f"HTTP {status}"


PROBE_ANSWER = (
    'make safety_probe_command print {"refusal_rate_window": 0.1, "baseline_refusal_rate": 0.1, '
    '"severity": "none"}'
)
"""What a safety probe must answer, as a message's next step."""


def probe(command: str, text: str, timeout: float) -> dict[str, Any]:
    """Run the safety probe over ``text``; its JSON answer (raises ValidationError if bad)."""
    run = run_command(split_command(command, "safety_probe_command"), timeout=timeout, stdin=text)
    if not run.ok:
        raise ValidationError(
            f"the safety probe failed ({run.error or f'exit code {run.returncode}'}); fix the "
            "command in safety_probe_command"
        )
    try:
        data = json.loads(run.output)
    except ValueError as exc:
        raise ValidationError(
            f"the safety probe printed no JSON object ({exc}); {PROBE_ANSWER}"
        ) from exc
    if not isinstance(data, dict):
        raise ValidationError(f"the safety probe printed no JSON object; {PROBE_ANSWER}")
    return data
