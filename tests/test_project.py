"""Canonical project identity with real git repositories under tmp_path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cortex.services.project import CACHE_FILE, normalize_remote, project_identity
from git_helpers import git, make_repo


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Org/Repo.git", "github.com/org/repo"),
        ("https://github.com/org/repo", "github.com/org/repo"),
        ("https://github.com/org/repo/", "github.com/org/repo"),
        ("ssh://git@github.com:22/Org/Repo.git", "github.com/org/repo"),
        ("https://user:secret@GitHub.com/Org/Repo.git", "github.com/org/repo"),
        ("git://example.org/a/b.git", "example.org/a/b"),
        ("gitlab.example.com:group/sub/proj.git", "gitlab.example.com/group/sub/proj"),
        ("/srv/Git/Repo.git", "file/srv/Git/Repo"),
        ("file:///srv/Git/Repo.git", "file/srv/Git/Repo"),
        ("", None),
    ],
)
def test_remote_urls_normalize(url: str, expected: str | None) -> None:
    assert normalize_remote(url) == expected


def test_ssh_and_https_remotes_are_one_project(tmp_path: Path, cache: Path) -> None:
    origin = make_repo(tmp_path / "origin", remote=None)
    ssh = tmp_path / "ssh"
    https = tmp_path / "https"
    for clone, url in (
        (ssh, "git@github.com:Org/Repo.git"),
        (https, "https://github.com/org/repo"),
    ):
        git(tmp_path, "clone", "-q", str(origin), str(clone))
        git(clone, "remote", "set-url", "origin", url)
    assert project_identity(str(ssh), cache).id == project_identity(str(https), cache).id


def test_subdirectory_shares_the_repository_identity(tmp_path: Path, cache: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    root = git(repo, "rev-list", "--max-parents=0", "HEAD")
    top = project_identity(str(repo), cache)
    assert top.id == f"git:github.com/org/repo#{root[:12]}"
    assert (top.name, top.root, top.branch) == ("repo", str(repo.resolve()), "main")
    assert project_identity(str(deep), cache) == top


def test_worktree_shares_the_identity_and_has_its_own_branch(tmp_path: Path, cache: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "worktree", "add", "-q", "-b", "feat/login", str(tmp_path / "wt"))
    main = project_identity(str(repo), cache)
    tree = project_identity(str(tmp_path / "wt"), cache)
    assert tree.id == main.id
    assert (tree.name, tree.branch, tree.root) == ("repo", "feat/login", str(tmp_path / "wt"))


def test_renamed_clones_share_an_identity(tmp_path: Path, cache: Path) -> None:
    bare = tmp_path / "server" / "proj.git"
    seed = make_repo(tmp_path / "seed", remote=None)
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(tmp_path / "proj"))
    git(tmp_path, "clone", "-q", str(bare), str(tmp_path / "proj-copy"))
    first = project_identity(str(tmp_path / "proj"), cache)
    os.rename(tmp_path / "proj", tmp_path / "renamed")
    assert project_identity(str(tmp_path / "renamed"), cache).id == first.id
    assert project_identity(str(tmp_path / "proj-copy"), cache).id == first.id
    assert first.name == "proj"


def test_two_repositories_never_share(tmp_path: Path, cache: Path) -> None:
    one = make_repo(tmp_path / "one", remote="https://github.com/org/one")
    two = make_repo(tmp_path / "two", remote="https://github.com/org/two")
    same_remote = make_repo(tmp_path / "three", remote="https://github.com/org/one")
    ids = {project_identity(str(p), cache).id for p in (one, two, same_remote)}
    assert len(ids) == 3  # same remote URL, unrelated history: still two projects


def test_outside_any_repository_the_path_is_the_identity(tmp_path: Path, cache: Path) -> None:
    plain = tmp_path / "notes" / "sub"
    plain.mkdir(parents=True)
    found = project_identity(str(plain), cache)
    assert found.id == f"path:{plain.resolve()}"
    assert (found.name, found.branch) == ("sub", None)


def test_a_repository_without_remote_uses_its_root_commit(tmp_path: Path, cache: Path) -> None:
    repo = make_repo(tmp_path / "local", remote=None)
    root = git(repo, "rev-list", "--max-parents=0", "HEAD")
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(copy))
    git(copy, "remote", "remove", "origin")
    assert project_identity(str(repo), cache).id == f"git:#{root[:12]}"
    assert project_identity(str(copy), cache).id == f"git:#{root[:12]}"
    assert project_identity(str(repo), cache).name == "local"


def test_an_empty_repository_falls_back_to_its_path_until_the_first_commit(
    tmp_path: Path, cache: Path
) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q")
    assert project_identity(str(repo), cache).id == f"path:{repo.resolve()}"
    (repo / "a").write_text("a")
    git(repo, "add", "a")
    git(repo, "commit", "-q", "-m", "a")
    root = git(repo, "rev-list", "--max-parents=0", "HEAD")
    assert project_identity(str(repo), cache).id == f"git:#{root[:12]}"


def test_the_root_commit_is_cached_and_not_recomputed(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    first = project_identity(str(repo), cache)
    entries = json.loads((cache / CACHE_FILE).read_text())
    assert list(entries) == [str((repo / ".git").resolve())]
    # A cached root survives a PATH without git: no subprocess on the hot path.
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert project_identity(str(repo), cache) == first


def test_garbage_working_directories_never_raise(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # unusable values fall back to the process directory
    for cwd in ("", "   ", "\0bad", str(tmp_path / "missing" / "dir"), "relative/dir"):
        found = project_identity(cwd, cache)
        assert found.id.startswith("path:")
