"""Projects found by what a person types, and a current session that never crosses projects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from cortex.errors import ConflictError, NotFoundError
from cortex.services.app import Services
from cortex.services.project import project_identity
from git_helpers import make_repo

REPO_A = "git:github.com/acme-corp/repoa#1a2b3c4d5e6f"
REPO_B = "git:github.com/acme-corp/repob#6f5e4d3c2b1a"


def test_project_filters_take_a_name_a_remote_a_path_or_the_id(
    services: Services, tmp_path: Path
) -> None:
    m = services.sessions
    m.on_session_start("in-a", project=REPO_A)
    m.on_session_start("in-b", project=REPO_B)
    repo = make_repo(tmp_path / "checkout", "git@github.com:Acme-Corp/RepoC.git")
    m.on_session_start("in-c", project=project_identity(str(repo)).id)

    def listed(typed: str) -> list[str]:
        return [s.session_id for s in m.list_sessions(project=typed)]

    assert listed("repoA") == ["in-a"]
    assert listed("acme-corp/repob") == ["in-b"]
    assert listed("github.com/acme-corp/repoa") == ["in-a"]
    assert listed("https://github.com/acme-corp/repob.git") == ["in-b"]
    assert listed(REPO_B) == ["in-b"]
    assert listed(str(repo / ".")) == ["in-c"]
    assert listed("acme-corp") == [] and listed("repo") == []


def test_session_list_tells_repositories_apart_and_says_why_it_is_empty(home: Path) -> None:
    assert ok(cortex(home, "session", "list")).strip() == (
        "no sessions yet; start one with `cortex session start`"
    )
    for project in (REPO_A, REPO_B):
        ok(cortex(home, "session", "start", "--project", project))
    rows = ok(cortex(home, "session", "list")).splitlines()
    assert [row.split()[3] for row in rows] == ["acme-corp/repob", "acme-corp/repoa"]
    only_a = json.loads(ok(cortex(home, "--json", "session", "list", "--project", "repoA")))
    assert [s["project"] for s in only_a] == [REPO_A]
    assert ok(cortex(home, "session", "list", "--project", "nope")).strip() == (
        "no sessions of project 'nope'; match a name, a path, a remote (org/repo) or an id, "
        "or see them all with `cortex session list`"
    )


def test_the_implicit_session_never_crosses_projects(home: Path, tmp_path: Path) -> None:
    a = make_repo(tmp_path / "repoa", "git@github.com:acme-corp/repoa.git")
    b = make_repo(tmp_path / "repob", "git@github.com:acme-corp/repob.git")
    c = make_repo(tmp_path / "repoc", "git@github.com:acme-corp/repoc.git")
    ids = {}
    for name, repo in (("a", a), ("b", b)):
        project = project_identity(str(repo)).id
        started = ok(cortex(home, "--json", "session", "start", "--project", project, cwd=repo))
        ids[name] = json.loads(started)["session_id"]
    ok(cortex(home, "pin", "add", "deploy", "make deploy", cwd=a))  # a is the newest activity
    ended = json.loads(ok(cortex(home, "--json", "session", "end", cwd=b)))
    assert ended["session_id"] == ids["b"]
    shown = json.loads(ok(cortex(home, "--json", "session", "show", cwd=a)))
    assert shown["session_id"] == ids["a"] and shown["end_time"] is None
    elsewhere = cortex(home, "session", "end", cwd=c)
    assert elsewhere.returncode == 1
    assert elsewhere.stderr.startswith(
        f"error: no open session of repoc (open elsewhere: {ids['a'][:8]} (acme-corp/repoa))"
    )


def test_open_sessions_of_several_typed_projects_are_ambiguous(services: Services) -> None:
    m = services.sessions
    here = project_identity("/nowhere/in/particular")
    m.on_session_start("s-radio", project="radio")
    assert m.current_session(here).session_id == "s-radio"
    m.on_session_start("s-api", project="api")
    with pytest.raises(ConflictError, match=r"none is of particular: .*s-api \(api\)"):
        m.current_session(here)
    assert m.current_session(project_identity("/home/u/src/api")).session_id == "s-api"
    m.on_session_end("s-api")
    m.on_session_end("s-radio")
    with pytest.raises(NotFoundError, match="no active session"):
        m.current_session(here)


def test_memory_and_task_commands_mean_the_project_a_typed_name_names(
    home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "api", "https://github.com/acme-corp/api.git")
    project = project_identity(str(repo)).id
    started = ok(cortex(home, "--json", "session", "start", "--project", project, cwd=repo))
    sid = json.loads(started)["session_id"]
    added = json.loads(
        ok(cortex(home, "--json", "memory", "add", "Deploys go to eu-west-1", "--project", "api"))
    )
    assert added["project"] == project  # the id the hooks record, not "api"
    ok(cortex(home, "memory", "add", "Builds use gradle eight", "--session-id", sid))

    def found(*args: str, cwd: Path = tmp_path) -> list[str]:
        hits = json.loads(ok(cortex(home, "--json", "memory", "search", *args, cwd=cwd)))
        return [h["content"] for h in hits]

    assert found("gradle", "--project", "api") == ["Builds use gradle eight"]
    assert found("deploys", "--project", "acme-corp/api") == ["Deploys go to eu-west-1"]
    assert found("gradle", cwd=repo) == []  # no --project: global memories only, as documented
    listed = json.loads(ok(cortex(home, "--json", "memory", "list", "--project", str(repo))))
    assert {m["project"] for m in listed} == {project}

    ok(cortex(home, "task", "add", "t-api", "Rotate keys", "--project", "API"))
    tasks = json.loads(ok(cortex(home, "--json", "task", "list", "--project", "acme-corp/api")))
    assert [(t["task_id"], t["project"]) for t in tasks] == [("t-api", project)]
    ok(cortex(home, "session", "end", "--session-id", sid))
    shown = json.loads(ok(cortex(home, "--json", "session", "show", sid)))
    assert [t["task_id"] for t in shown["pending_tasks"]] == ["t-api"]


def test_a_typed_name_of_several_projects_is_refused(home: Path) -> None:
    for project in (REPO_A, "git:gitlab.com/other/repoa#99aa88bb77cc"):
        ok(cortex(home, "session", "start", "--project", project))
    refused = cortex(home, "memory", "add", "x", "--project", "repoa")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("error: project 'repoa' names 2 projects: ")
    assert "give its remote (org/repo) or its id" in refused.stderr
    kept = json.loads(ok(cortex(home, "--json", "memory", "list", "--all-projects")))
    assert kept == []
    one = json.loads(ok(cortex(home, "--json", "memory", "add", "x", "--project", "other/repoa")))
    assert one["project"] == "git:gitlab.com/other/repoa#99aa88bb77cc"


def test_a_task_updated_elsewhere_keeps_its_project_and_a_move_says_so(
    home: Path, tmp_path: Path
) -> None:
    ok(cortex(home, "task", "add", "t1", "Project A work", "--project", "a"))
    ok(cortex(home, "task", "add", "t1", "Project A, renamed", "--stage", "verify", cwd=tmp_path))
    tasks = json.loads(ok(cortex(home, "--json", "task", "list")))
    assert [(t["title"], t["stage"], t["project"]) for t in tasks] == [
        ("Project A, renamed", "verify", "a")
    ]
    moved = ok(cortex(home, "task", "add", "t1", "Project B work", "--project", "b"))
    assert moved.strip() == "task t1 at stage build (moved from a)"
    secret = cortex(home, "task", "add", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "t")
    assert secret.returncode != 0
    assert secret.stderr.strip() == "error: that task id looks like a credential; pick another"


def test_credentials_in_typed_projects_and_directories_are_not_stored(
    home: Path, tmp_path: Path
) -> None:
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    secret_dir = tmp_path / "AKIAIOSFODNN7EXAMPLE"
    secret_dir.mkdir()
    assert "AKIA" not in project_identity(str(secret_dir)).id
    assert "AKIA" not in project_identity(str(secret_dir)).name
    started = cortex(
        home, "--json", "session", "start", "--project", f"deploy-{token}",
        "--workdir", str(secret_dir), "--keywords", f"rotate {token}",
    )  # fmt: skip
    state = json.loads(ok(cortex(home, "--json", "session", "show")))
    stored = json.dumps(state) + ok(started)
    assert token not in stored and "AKIAIOSFODNN7EXAMPLE" not in stored
    assert state["project"] == "deploy-[REDACTED]"
    assert "redacted" not in " ".join(state["hot_topics"]).split()
    assert "deploy" in state["hot_topics"]
