"""Real git repositories for tests (project identity, hooks)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; return its stripped stdout."""
    env = {**os.environ, **GIT_ENV}
    result = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, env=env, check=True
    )
    return result.stdout.strip()


def make_repo(path: Path, remote: str | None = "git@github.com:Org/Repo.git") -> Path:
    """A repository at ``path`` with one commit (its own root) and ``remote`` as origin."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if remote:
        git(path, "remote", "add", "origin", remote)
    (path / "README").write_text(f"{path.name}\n")  # distinct repositories, distinct roots
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path
