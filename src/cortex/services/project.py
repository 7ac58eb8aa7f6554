"""Canonical project identity: one id per repository, whatever directory an agent runs in.

Hooks write it to ``session_states.project`` and every reader scopes by it (restoration, the
MCP server's "current session", ``cortex session list --project``), so the rule is in one
place: ``project_identity(cwd).id`` is the session's ``project``.

The id of a git working tree is ``"git:" + remote + "#" + root``, each part present when known:

- ``remote`` is the normalized URL of ``origin`` (else the first remote): scheme, user,
  password, port and a ``.git`` suffix dropped, lower case, so ``git@github.com:Org/Repo.git``
  and ``https://github.com/org/repo`` are both ``github.com/org/repo``. A local path remote
  keeps its case (``file/srv/git/repo``).
- ``root`` is the first 12 hex digits of the oldest root commit of ``HEAD``.

So subdirectories, ``git worktree`` checkouts and renamed clones of one repository share an
id, and two repositories never do: a clone's remote and root commit are the origin's. A
repository with no remote is ``git:#<root>`` (its copies and worktrees still share it); one
with no commit yet (or no ``git`` binary) has no root part, and one with neither is
``path:<working tree root>``. Outside any repository the id is ``path:<cwd>``, resolved.
The id of a repository changes when its first commit is made or its first remote is added.

Finding the root commit runs ``git rev-list`` (a subprocess, ~5 ms), so it is cached per git
common directory (keyed by its path and inode, so a repository re-created at the same path is
looked up again) in ``<cache_dir>/projects.json``. A root commit never changes, so a cached one
is reused across branch switches; an unknown one is looked up again when ``HEAD`` moves. The
rest (``.git`` files, the config, ``HEAD``) is read directly: no subprocess on the hot path.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cortex.core.plaintext import is_plain, storable
from cortex.core.redaction import redact
from cortex.core.topics import display_name
from cortex.errors import StorageError
from cortex.files import atomic_write_text, read_json, read_regular

ROOT_CHARS = 12
PROJECT_DIR_VARS = ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CURSOR_PROJECT_DIR")
"""Variables a harness sets to its project's root; every adapter reads the same ones."""
CACHE_FILE = "projects.json"
GIT_TIMEOUT_SECONDS = 2.0
GIT_FILE_MAX_BYTES = 4 * 2**20
"""The most read of one git file (a config, ``HEAD``, a ref, ``packed-refs``): a repository's
are kilobytes (``packed-refs`` of 100,000 refs about 6 MB, of which the first 4 MB still
resolve most refs, and ``git rev-list`` the rest)."""
_MAX_CACHE_ENTRIES = 500
_SCHEME = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]*@)?(?P<host>\[[^\]]*\]|[^/:?#]*)"
    r"(?::\d*)?(?P<path>[^?#]*)"
)
_SCP = re.compile(r"(?:[^@/:]+@)?(?P<host>[^@/:]{2,}):(?P<path>(?!//).*)")
_SECTION = re.compile(r'\s*\[\s*remote\s+"(?P<name>(?:[^"\\]|\\.)*)"\s*\]')
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def harness_project_dir(env: Mapping[str, str]) -> str | None:
    """The project root a harness names in ``env`` (Claude Code, Gemini CLI, Cursor), if any."""
    return next((env[v] for v in PROJECT_DIR_VARS if env.get(v)), None)


@dataclass(frozen=True)
class ProjectIdentity:
    """A project: its canonical ``id``, a display ``name`` and the working tree ``root``.

    ``branch`` is the checked-out branch (None when detached or not a repository); it is a
    context keyword, not part of the identity.
    """

    id: str
    name: str
    root: str
    branch: str | None = None


@dataclass(frozen=True)
class _GitDirs:
    """A repository's work tree, its git directory and the common one (worktrees share it)."""

    worktree: Path
    git_dir: Path
    common_dir: Path


def project_identity(
    cwd: str, cache_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> ProjectIdentity:
    """The identity of the project ``cwd`` is in; never raises (falls back to the path).

    ``env`` is the caller's environment, which ``git`` runs in when the root commit is not
    cached, without its ``GIT_*`` variables (a hook run from a git hook must not point git at
    another repository); None runs git in this process's environment as it is.
    """
    start = _absolute(cwd)
    try:
        dirs = _find_git(start)
        found = (
            ProjectIdentity(f"path:{start}", _base_name(start), str(start))
            if dirs is None
            else _git_identity(dirs, cache_dir, env)
        )
    except (OSError, ValueError, UnicodeError):
        found = ProjectIdentity(f"path:{start}", _base_name(start), str(start))
    # The id and name are stored and shown (a directory or remote may hold a credential, or
    # bytes that are no UTF-8); the root stays the directory it is.
    shown = redact(_storable(found.id)), redact(_storable(found.name))
    return found if shown == (found.id, found.name) else replace(found, id=shown[0], name=shown[1])


def _storable(name: str) -> str:
    """``name`` with the bytes of a file name that are no UTF-8 (which ``os.fsdecode`` gives
    as lone surrogates, and no store keeps in a name) written as ``\\xff``: one directory
    always gets the same id, and two never share one."""
    if is_plain(name):
        return name
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # (a surrogate no file name gives: made U+FFFD)
        return storable(name)
    return storable(raw.decode("utf-8", "backslashreplace"))


def normalize_remote(url: str) -> str | None:
    """``git@github.com:Org/Repo.git`` -> ``github.com/org/repo``; None when empty."""
    text = url.strip()
    if not text:
        return None
    match = _SCHEME.fullmatch(text)
    if match and match["scheme"].lower() != "file":
        return _join(match["host"], match["path"]).lower()
    if match:
        return _join("file", match["path"])
    match = _SCP.fullmatch(text)
    if match:
        return _join(match["host"], match["path"]).lower()
    return _join("file", os.path.normpath(text))


def _join(host: str, path: str) -> str:
    parts = [p for p in path.replace("\\", "/").split("/") if p and p != "."]
    if parts and parts[-1].lower().endswith(".git"):
        parts[-1] = parts[-1][:-4]
    return "/".join([host.strip("[]"), *[p for p in parts if p]])


def _absolute(cwd: str) -> Path:
    """``cwd`` made absolute and resolved; the process directory when it is unusable."""
    try:
        text = cwd if isinstance(cwd, str) and cwd.strip() and "\0" not in cwd else os.getcwd()
        return Path(os.path.abspath(os.path.expanduser(text))).resolve()
    except (OSError, ValueError, RuntimeError):
        return Path(os.path.abspath(os.sep))


def _base_name(path: Path) -> str:
    return path.name or str(path)


def _find_git(start: Path) -> _GitDirs | None:
    """Walk up from ``start`` to the first ``.git`` (a directory, or a ``gitdir:`` file)."""
    for directory in (start, *start.parents):
        marker = directory / ".git"
        if marker.is_dir():
            return _GitDirs(directory, marker, _common_dir(marker))
        if marker.is_file():
            text = _read_git_file(marker).strip()
            if not text.startswith("gitdir:"):
                return None
            git_dir = Path(os.path.normpath(directory / text[len("gitdir:") :].strip()))
            return _GitDirs(directory, git_dir, _common_dir(git_dir))
    return None


def _read_git_file(path: Path) -> str:
    """The text of one of git's files, its first ``GIT_FILE_MAX_BYTES``: never waiting on a
    FIFO or a device among them (``read_regular``), and a huge one costs milliseconds."""
    return read_regular(path, GIT_FILE_MAX_BYTES).decode("utf-8", "replace")


def _common_dir(git_dir: Path) -> Path:
    """A linked worktree's ``commondir`` file names the main repository's git directory."""
    try:
        text = _read_git_file(git_dir / "commondir").strip()
    except OSError:
        return git_dir.resolve()
    return Path(os.path.normpath(git_dir / text)).resolve()


def _git_identity(
    dirs: _GitDirs, cache_dir: Path | None, env: Mapping[str, str] | None
) -> ProjectIdentity:
    remote = _remote_url(dirs.common_dir / "config")
    head_ref, head_sha = _head(dirs)
    root = _root_commit(dirs, head_sha, cache_dir, env)
    if remote is None and root is None:
        project_id = f"path:{dirs.worktree}"
    else:
        project_id = "git:" + (remote or "") + (f"#{root[:ROOT_CHARS]}" if root else "")
    name = remote.rsplit("/", 1)[-1] if remote else _repo_name(dirs)
    branch = head_ref[len("refs/heads/") :] if head_ref.startswith("refs/heads/") else None
    return ProjectIdentity(
        project_id, name or _base_name(dirs.worktree), str(dirs.worktree), branch
    )


def _repo_name(dirs: _GitDirs) -> str:
    """The main working tree's directory name (a worktree's own name is incidental)."""
    common = dirs.common_dir
    if common.name == ".git":
        return common.parent.name
    return common.name[:-4] if common.name.endswith(".git") else dirs.worktree.name


def _remote_url(config_path: Path) -> str | None:
    """``origin``'s URL (else the first remote's) from the git config file, normalized."""
    try:
        text = _read_git_file(config_path)
    except OSError:
        return None
    urls: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            match = _SECTION.match(stripped)
            current = match["name"] if match else None
            continue
        if current is None or current in urls:
            continue
        key, sep, value = stripped.partition("=")
        if sep and key.strip().lower() == "url":
            urls[current] = _config_value(value)
    url = urls.get("origin") or next(iter(urls.values()), None)
    return normalize_remote(url) if url else None


def _config_value(raw: str) -> str:
    """A git config value: unquoted, with a trailing ``#``/``;`` comment dropped."""
    value = raw.strip()
    if value.startswith('"'):
        end = value.find('"', 1)
        return value[1:end] if end > 0 else value[1:]
    return re.split(r"\s[#;]", value, maxsplit=1)[0].strip()


def _head(dirs: _GitDirs) -> tuple[str, str | None]:
    """(the ref ``HEAD`` points to or "", the commit it resolves to or None if unborn)."""
    try:
        text = _read_git_file(dirs.git_dir / "HEAD").strip()
    except OSError:
        return "", None
    if not text.startswith("ref:"):
        return "", text if _SHA.fullmatch(text) else None
    ref = text[4:].strip()
    return ref, _resolve_ref(dirs, ref)


def _resolve_ref(dirs: _GitDirs, ref: str) -> str | None:
    if ".." in ref:
        return None
    for base in (dirs.git_dir, dirs.common_dir):
        try:
            sha = _read_git_file(base / ref).strip()
        except OSError:
            continue
        return sha if _SHA.fullmatch(sha) else None
    try:
        packed = _read_git_file(dirs.common_dir / "packed-refs")
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _SHA.fullmatch(sha):
            return sha
    return None


def _root_commit(
    dirs: _GitDirs, head_sha: str | None, cache_dir: Path | None, env: Mapping[str, str] | None
) -> str | None:
    """The oldest root commit of ``HEAD``, from the cache or ``git rev-list`` (then cached)."""
    key = str(dirs.common_dir)
    inode = dirs.common_dir.stat().st_ino
    cache = _read_cache(cache_dir)
    entry = cache.get(key)
    if isinstance(entry, dict) and entry.get("inode") == inode:
        if entry.get("root") or entry.get("head") == head_sha:
            root = entry.get("root")
            return str(root) if root else None
    root = _run_rev_list(dirs.worktree, env) if head_sha else None
    cache[key] = {"inode": inode, "root": root, "head": head_sha}
    _write_cache(cache_dir, cache)
    return root


def _run_rev_list(worktree: Path, env: Mapping[str, str] | None) -> str | None:
    import subprocess  # only on a cache miss: it is a costly import on the hook path

    git_env = None if env is None else {k: v for k, v in env.items() if not k.startswith("GIT_")}
    try:
        result = subprocess.run(
            ["git", "rev-list", "--max-parents=0", "HEAD"],
            cwd=worktree,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env=git_env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    roots = [line for line in result.stdout.split() if _SHA.fullmatch(line)]
    # rev-list lists newest first: the last root is the oldest history's, the stablest pick.
    return roots[-1] if result.returncode == 0 and roots else None


def _read_cache(cache_dir: Path | None) -> dict[str, object]:
    if cache_dir is None:
        return {}
    try:
        data = read_json(cache_dir / CACHE_FILE)
    except (StorageError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(cache_dir: Path | None, cache: dict[str, object]) -> None:
    """Best effort, atomic (a lost update only costs one more ``git`` run)."""
    if cache_dir is None:
        return
    while len(cache) > _MAX_CACHE_ENTRIES:
        del cache[next(iter(cache))]
    with contextlib.suppress(StorageError):
        atomic_write_text(cache_dir / CACHE_FILE, json.dumps(cache), durable=False)


def project_label(project: str | None) -> str:
    """A project as a person tells it apart in a listing: ``org/repo`` for a git id with a
    remote (two repositories of one organisation differ), the directory name for a path,
    else the text."""
    if not project:
        return "-"
    if project.startswith("git:"):
        remote = project.removeprefix("git:").split("#", 1)[0].rstrip("/")
        return "/".join(remote.split("/")[-2:]) if remote else project
    return display_name(project) or project


def project_matches(typed: str, project: str, typed_path_id: str | None = None) -> bool:
    """Whether what a person typed names the stored ``project``.

    It does when it is the id itself; the project's name (any case: ``repoA`` names
    ``git:github.com/acme-corp/repoa#...``); its remote or a trailing part of it
    (``acme-corp/repoa``, ``github.com/acme-corp/repoa``, a clone URL); or a directory
    whose identity is the project (``typed_path_id``, when the caller resolved one).
    """
    text = typed.strip()
    if not text:
        return False
    if text == project or (typed_path_id is not None and typed_path_id == project):
        return True
    if text.casefold() == (display_name(project) or "").casefold():
        return True
    if project.startswith("git:"):
        remote = project.removeprefix("git:").split("#", 1)[0]
        url = normalize_remote(text) or ""
        wanted = url if not url.startswith("file/") else text.strip("/").lower()
        return bool(remote) and (remote == wanted or remote.endswith("/" + wanted))
    return False


def typed_path_identity(typed: str, cache_dir: Path | None = None) -> str | None:
    """The project id of ``typed`` when it names an existing directory, else None."""
    text = typed.strip()
    if not text or not any(mark in text for mark in ("/", os.sep, "~", ".")):
        return None
    try:
        path = Path(os.path.expanduser(text))
        if not path.is_dir():
            return None
    except (OSError, ValueError):
        return None
    return project_identity(str(path), cache_dir).id
