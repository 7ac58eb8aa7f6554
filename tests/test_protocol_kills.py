"""The protocol's commands killed (SIGKILL) at exact instants, and the reruns that follow: the
store is where a checkpoint or an end commits, the task folder follows it, and nothing a
killed command left makes a later command fail or write twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from kill_helpers import killed

FOLDER = "cortex.services.protocol.folders:TaskFolder"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def started(home: Path, repo: Path, slug: str = "t1") -> str:
    ok(cortex(home, "task", "init", slug, cwd=repo))
    report = json.loads(ok(cortex(home, "--json", "task", "start", slug, "--goal", "g", cwd=repo)))
    return str(report["session_id"])


def stored_checkpoints(home: Path, repo: Path, slug: str = "t1") -> list[dict[str, object]]:
    listed = json.loads(ok(cortex(home, "--json", "checkpoint", "list", "--task", slug, cwd=repo)))
    assert isinstance(listed, list)
    return listed


def status_of(home: Path, slug: str = "t1") -> dict[str, object]:
    data = json.loads((home / "tasks" / slug / "json" / "task-status.json").read_text())
    assert isinstance(data, dict)
    return data


def test_a_checkpoint_killed_in_the_folder_leaves_no_phantom(home: Path, repo: Path) -> None:
    started(home, repo)
    killed(home, repo, f"{FOLDER}.write_checkpoint", "after",
           "checkpoint", "create", "--task", "t1", "--summary", "killed")  # fmt: skip
    assert [c["summary"] for c in stored_checkpoints(home, repo)] == ["killed"]
    (cid,) = [c["checkpoint_id"] for c in stored_checkpoints(home, repo)]
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert verify.returncode == 1  # its file and index entry agree; only its line is missing
    assert verify.stdout.splitlines()[:2] == [
        "MISMATCH:",
        f"  {cid}: no 'Checkpoint created' line in sessions.log",
    ]


def test_a_killed_gate_transition_moves_the_gate_only_with_its_checkpoint(
    home: Path, repo: Path
) -> None:
    sid = started(home, repo)
    killed(home, repo, f"{FOLDER}.update_status", "after",
           "checkpoint", "create", "--task", "t1", "--type", "gate_transition", "--gate", "G7",
           "--summary", "to G7", "--state-json", '{"decisions": []}')  # fmt: skip
    assert status_of(home)["current_gate"] == "G7"
    assert [c["gate"] for c in stored_checkpoints(home, repo)] == ["G7"]
    log = home / "tasks" / "t1" / "logs" / "sessions.log"
    assert "Checkpoint created" not in log.read_text()  # killed before it, after the store
    (cid,) = [c["checkpoint_id"] for c in stored_checkpoints(home, repo)]
    line = f"[cortex] Checkpoint created: {cid}"
    # Killed between the status and the pending task's title: the title still names G0.
    assert "[t1] t1 [G0] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))
    stale = "pipeline state.json: the pending task t1 reads 't1 [G0]', not 't1 [G7]' as "
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert verify.returncode == 1
    assert verify.stdout.splitlines()[1:3] == [
        f"  {cid}: no 'Checkpoint created' line in sessions.log",
        f"  {stale}task-status.json gives it",
    ]
    assert ok(cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo)) == (
        "repaired: pipeline state.json: retitled the pending task t1 't1 [G0]' -> 't1 [G7]', "
        f"as task-status.json gives it\nrepaired: {cid}: logged '{line}' in sessions.log\n"
        "ok: 1 checkpoints agree\n"
    )  # the status already had its gate: the title and the line were what it lacked
    assert log.read_text().count(line) == 1
    assert "[t1] t1 [G7] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))
    # A status file deleted by hand is made anew, where the task's checkpoints left it.
    (home / "tasks" / "t1" / "json" / "task-status.json").unlink()
    lost = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert lost.returncode == 1 and "create it with `cortex task init t1`" in lost.stderr
    assert ok(cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo)) == (
        "repaired: task-status.json: missing; made anew\n"
        "repaired: task-status.json: current_gate G0 -> G7, last_session unset -> "
        f"{sid}, as the checkpoints left it\nok: 1 checkpoints agree\n"
    )
    assert status_of(home)["current_gate"] == "G7"
    # The file it made and then moved was no one's: nothing is set aside.
    assert not list((home / "tasks" / "t1" / "json").glob("*set-aside*"))
    # The pending task shows the gate the checkpoint moved it to (G0 at the task start).
    assert "[t1] t1 [G7] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))


def test_a_checkpoint_killed_after_its_commit_is_repaired_from_the_store(
    home: Path, repo: Path
) -> None:
    started(home, repo)
    killed(home, repo, f"{FOLDER}.write_checkpoint", "before",
           "checkpoint", "create", "--task", "t1", "--summary", "stored only")  # fmt: skip
    (cid,) = [str(c["checkpoint_id"]) for c in stored_checkpoints(home, repo)]
    checkpoints = home / "tasks" / "t1" / "json" / "checkpoints"
    (checkpoints / "ckpt-phantom.json").write_text("{}")  # what an older version could leave
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert verify.returncode == 1
    assert verify.stdout.splitlines()[-1] == (
        "the store is authoritative: `cortex checkpoint verify --task t1 --repair` rewrites "
        "the folder from it (what it replaces is moved aside)"
    )
    repaired = cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo)
    assert repaired.returncode == 0, repaired.stdout
    lines = repaired.stdout.splitlines()
    assert lines[0].startswith("repaired: ckpt-phantom: not in the store; moved ckpt-phantom")
    assert lines[1:] == [
        f"repaired: {cid}: wrote {cid}.json from the store",
        "repaired: rebuilt checkpoint-index.json from the store (1 entries)",
        f"repaired: {cid}: logged '[cortex] Checkpoint created: {cid}' in sessions.log",
        "ok: 1 checkpoints agree",
    ]
    assert [p.name for p in checkpoints.iterdir() if p.name.startswith("ckpt-phantom")] != []
    assert ok(cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)) == (
        "ok: 1 checkpoints agree\n"
    )


def test_a_killed_compaction_leaves_no_phantom(home: Path, repo: Path) -> None:
    sid = started(home, repo)
    killed(home, repo, f"{FOLDER}.write_checkpoint", "after",
           "compact", "run", "--session-id", sid)  # fmt: skip
    assert [c["type"] for c in stored_checkpoints(home, repo)] == ["pre_compaction"]
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert [line for line in verify.stdout.splitlines() if line.startswith("  ")] == [
        f"  {stored_checkpoints(home, repo)[0]['checkpoint_id']}: no 'Checkpoint created' "
        "line in sessions.log"
    ]


def test_a_damaged_index_fails_a_checkpoint_before_anything_is_written(
    home: Path, repo: Path
) -> None:
    started(home, repo)
    index = home / "tasks" / "t1" / "json" / "checkpoint-index.json"
    index.write_text("{broken")
    made = cortex(home, "checkpoint", "create", "--task", "t1", "--summary", "x", cwd=repo)
    assert made.returncode == 1 and "checkpoint-index.json is not valid JSON" in made.stderr
    assert list((home / "tasks" / "t1" / "json" / "checkpoints").iterdir()) == []
    assert stored_checkpoints(home, repo) == []
    repaired = cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo)
    assert repaired.stdout.splitlines()[0].startswith(
        "repaired: moved the unreadable checkpoint-index.json aside to checkpoint-index.json."
    )
    assert repaired.returncode == 0
    ok(cortex(home, "checkpoint", "create", "--task", "t1", "--summary", "x", cwd=repo))


def test_an_end_killed_after_the_session_ended_is_finished_by_a_rerun(
    home: Path, repo: Path
) -> None:
    sid = started(home, repo)
    end = ("task", "end", "t1", "--outcome", "success", "--completed", "all done")
    killed(home, repo, "cortex.services.protocol.rituals:_close", "after", *end)
    assert status_of(home)["status"] == "in-progress"
    rerun = cortex(home, *end, cwd=repo)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.splitlines()[0] == f"[cortex] Session end: {sid} outcome=success"
    assert status_of(home)["status"] == "complete"
    again = cortex(home, *end, "--session-id", sid, cwd=repo)
    assert again.returncode == 0, again.stderr
    task = home / "tasks" / "t1"
    log = (task / "work" / "implementation-log.md").read_text()
    assert log.count("## Session") == 1 and "**Completed**: all done" in log
    assert [c["type"] for c in stored_checkpoints(home, repo)] == ["session_end"]
    evidence = (task / "logs" / "sessions.log").read_text()
    assert evidence.count(f"Session end: {sid}") == 1
    assert "[t1] t1 [G0] (stage: done" in ok(cortex(home, "task", "list", cwd=repo))


def test_an_end_killed_before_the_session_ended_writes_its_checkpoint_once(
    home: Path, repo: Path
) -> None:
    started(home, repo)
    end = ("task", "end", "t1", "--outcome", "partial", "--decision", "use JWT")
    killed(home, repo, "cortex.services.protocol.rituals:_close", "before", *end)
    ok(cortex(home, *end, cwd=repo))
    assert [c["type"] for c in stored_checkpoints(home, repo)] == ["session_end"]
    log = (home / "tasks" / "t1" / "work" / "implementation-log.md").read_text()
    assert log.count("## Session") == 1
    assert status_of(home)["status"] == "in-progress"


def test_a_failing_end_appends_no_log_entry(home: Path, repo: Path) -> None:
    started(home, repo)
    (home / "tasks" / "t1" / "json" / "checkpoint-index.json").write_text("{broken")
    for _ in range(3):
        failed = cortex(home, "task", "end", "t1", "--outcome", "success", cwd=repo)
        assert failed.returncode == 1 and "checkpoint-index.json" in failed.stderr
    log = (home / "tasks" / "t1" / "work" / "implementation-log.md").read_text()
    assert "## Session" not in log
    assert list((home / "tasks" / "t1" / "json" / "checkpoints").iterdir()) == []


def test_a_gate_transition_killed_after_its_commit_is_repaired_gate_and_line_included(
    home: Path, repo: Path
) -> None:
    sid = started(home, repo)
    gate = ("checkpoint", "create", "--task", "t1", "--type", "gate_transition",
            "--state-json", '{"decisions": []}')  # fmt: skip
    ok(cortex(home, *gate, "--gate", "G3", "--summary", "to G3", cwd=repo))
    later = "2026-02-16T09:10:00Z"
    killed(home, repo, f"{FOLDER}.write_checkpoint", "before",
           *gate, "--gate", "G7", "--summary", "to G7", now=later)  # fmt: skip
    first, second = [str(c["checkpoint_id"]) for c in stored_checkpoints(home, repo)]
    assert status_of(home)["current_gate"] == "G3"
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert verify.returncode == 1
    assert verify.stdout.splitlines()[1:5] == [
        f"  {second}: not in checkpoint-index.json",
        f"  {second}: no file {second}.json",
        f"  {second}: no 'Checkpoint created' line in sessions.log",
        "  task-status.json: current_gate is G3, not G7 as the checkpoints left it",
    ]
    repaired = cortex(home, "checkpoint", "verify", "--task", "t1", "--repair",
                      cwd=repo, now="2026-02-16T09:20:00Z")  # fmt: skip
    kept = "task-status.json.set-aside-20260216T092000000000Z"
    assert repaired.stdout.splitlines() == [
        f"repaired: {second}: wrote {second}.json from the store",
        "repaired: rebuilt checkpoint-index.json from the store (2 entries)",
        f"repaired: task-status.json: current_gate G3 -> G7, as the checkpoints left it "
        f"(the file it replaces kept as {kept})",
        "repaired: pipeline state.json: retitled the pending task t1 't1 [G3]' -> 't1 [G7]', "
        "as task-status.json gives it",
        f"repaired: {second}: logged '[cortex] Checkpoint created: {second}' in sessions.log",
        "ok: 2 checkpoints agree",
    ]
    status = status_of(home)
    assert (status["current_gate"], status["last_session"]) == ("G7", sid)
    assert status["last_activity"] == "2026-02-16T09:20:00.000000Z"
    json_dir = home / "tasks" / "t1" / "json"
    assert json.loads((json_dir / kept).read_text())["current_gate"] == "G3"
    evidence = home / "tasks" / "t1" / "logs" / "sessions.log"
    assert evidence.read_text().splitlines()[-1] == (
        f"2026-02-16T09:10:00.000000Z [cortex] Checkpoint created: {second}"
    )
    # A user deletes the checkpoint files and the log, writes a line of their own and moves
    # the gate by hand: the files and lines come back, once each, and the hand-set gate stays.
    for path in (json_dir / "checkpoints").iterdir():
        path.unlink()
    evidence.write_text("my own note\n")
    (json_dir / "task-status.json").write_text(
        json.dumps({**status_of(home), "current_gate": "G5"})
    )
    for _ in range(2):
        ok(cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo))
    assert evidence.read_text().splitlines() == [
        "my own note",
        f"2026-02-16T09:00:00.000000Z [cortex] Checkpoint created: {first}",
        f"2026-02-16T09:10:00.000000Z [cortex] Checkpoint created: {second}",
    ]
    assert status_of(home)["current_gate"] == "G5"
    assert "[t1] t1 [G5] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))


def test_a_repair_killed_before_its_retitle_is_finished_by_the_next(home: Path, repo: Path) -> None:
    """A repair moves the status, then the title: killed between the two, the next
    ``verify`` sees the title behind the status and the next repair rewrites it."""
    started(home, repo)
    killed(home, repo, f"{FOLDER}.write_checkpoint", "before",
           "checkpoint", "create", "--task", "t1", "--type", "gate_transition", "--gate", "G3",
           "--summary", "to G3", "--state-json", '{"decisions": []}')  # fmt: skip
    (cid,) = [c["checkpoint_id"] for c in stored_checkpoints(home, repo)]
    assert status_of(home)["current_gate"] == "G0"  # stored only
    killed(home, repo, "cortex.services.pipeline:retitle_task", "before",
           "checkpoint", "verify", "--task", "t1", "--repair")  # fmt: skip
    assert status_of(home)["current_gate"] == "G3"
    assert "[t1] t1 [G0] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert verify.returncode == 1
    assert verify.stdout.splitlines()[1:3] == [
        f"  {cid}: no 'Checkpoint created' line in sessions.log",
        "  pipeline state.json: the pending task t1 reads 't1 [G0]', not 't1 [G3]' as "
        "task-status.json gives it",
    ]
    assert ok(cortex(home, "checkpoint", "verify", "--task", "t1", "--repair", cwd=repo)) == (
        "repaired: pipeline state.json: retitled the pending task t1 't1 [G0]' -> 't1 [G3]', "
        f"as task-status.json gives it\nrepaired: {cid}: logged '[cortex] Checkpoint created: "
        f"{cid}' in sessions.log\nok: 1 checkpoints agree\n"
    )
    assert "[t1] t1 [G3] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))


def test_a_title_a_killed_checkpoint_left_behind_is_fixed_by_the_next_checkpoint(
    home: Path, repo: Path
) -> None:
    """A gate transition killed between its status and its title leaves the pending task at
    the old gate; the task's next checkpoint, one that moves no gate, titles it with the
    status's gate, and a checkpoint that finds the title right does not write the file."""
    started(home, repo)
    killed(home, repo, f"{FOLDER}.update_status", "after",
           "checkpoint", "create", "--task", "t1", "--type", "gate_transition", "--gate", "G7",
           "--summary", "to G7", "--state-json", '{"decisions": []}')  # fmt: skip
    assert status_of(home)["current_gate"] == "G7"
    assert "[t1] t1 [G0] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))
    made = cortex(home, "checkpoint", "create", "--task", "t1", "--summary", "next step",
                  cwd=repo, now="2026-02-16T09:05:00Z")  # fmt: skip
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert "[t1] t1 [G7] (stage: build" in ok(cortex(home, "task", "list", cwd=repo))
    pipeline = home / "pipeline" / "state.json"
    (entry,) = json.loads(pipeline.read_text())["active_tasks"]
    assert (entry["title"], entry["updated_at"]) == ("t1 [G7]", "2026-02-16T09:05:00.000000Z")
    verify = cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo)
    assert "pipeline state.json" not in verify.stdout  # only the killed one's line is missing
    # The title is right now: the next checkpoint leaves the pipeline file as it is.
    before = pipeline.stat()
    ok(cortex(home, "checkpoint", "create", "--task", "t1", "--summary", "one more", cwd=repo,
              now="2026-02-16T09:10:00Z"))  # fmt: skip
    after = pipeline.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_status_file_made_anew_keeps_the_title_that_survives_it(home: Path, repo: Path) -> None:
    """A repair that makes a deleted status file anew takes the task's title from what
    outlives it: the pipeline's entry less its gate, else a status copy a repair kept, else
    the pending tasks the task's checkpoints and sessions carried (newest first); never the
    slug while one has it. A compaction that finds the file gone makes it the same way."""
    ok(cortex(home, "task", "init", "feat-auth", "--title", "User auth", cwd=repo))
    started = json.loads(ok(cortex(home, "--json", "task", "start", "feat-auth", cwd=repo)))
    ok(cortex(home, "checkpoint", "create", "--task", "feat-auth", "--type", "gate_transition",
              "--gate", "G7", "--summary", "to G7", "--state-json", '{"decisions": []}',
              cwd=repo))  # fmt: skip
    json_dir = home / "tasks" / "feat-auth" / "json"
    status_file, pipeline = json_dir / "task-status.json", home / "pipeline" / "state.json"
    listed = "[feat-auth] User auth [G7] (stage: build"
    assert listed in ok(cortex(home, "task", "list", cwd=repo))
    repair = ("checkpoint", "verify", "--task", "feat-auth", "--repair")

    def stands() -> tuple[object, object]:
        status = status_of(home, "feat-auth")
        return status["title"], status["current_gate"]

    def made_anew() -> str:
        """Where the repair that makes the deleted status anew found its title."""
        status_file.unlink()
        line = ok(cortex(home, *repair, cwd=repo)).splitlines()[0]
        assert stands() == ("User auth", "G7")
        return line.removeprefix("repaired: task-status.json: missing; made anew, titled ")

    assert made_anew() == "'User auth' as the pipeline's task feat-auth has it"
    assert listed in ok(cortex(home, "task", "list", cwd=repo))
    # A compaction that finds the status file gone makes it at the gate the checkpoints left.
    status_file.unlink()
    ok(cortex(home, "compact", "run", "--session-id", started["session_id"], cwd=repo))
    assert stands() == ("User auth", "G7")
    assert listed in ok(cortex(home, "task", "list", cwd=repo))
    # A turn puts the pending task in the session's record; with the pipeline file gone, it
    # is what has the title (that compaction's checkpoint carried no pending task yet).
    ok(cortex(home, "session", "record", "--text", "login form", cwd=repo))
    pipeline.unlink()
    assert made_anew() == f"'User auth' as session {started['session_id']} has it"
    # A later compaction's checkpoint carries it, and is newer than the session's record.
    ok(cortex(home, "compact", "run", "--session-id", started["session_id"], cwd=repo))
    newest = str(stored_checkpoints(home, repo, "feat-auth")[-1]["checkpoint_id"])
    assert made_anew() == f"'User auth' as checkpoint {newest} has it"
    # A copy of the status a repair kept comes before the checkpoints (one that cannot be
    # read is passed over, however new).
    kept = json_dir / "task-status.json.set-aside-20260216T080000000000Z"
    kept.write_text(json.dumps(status_of(home, "feat-auth")))
    (json_dir / "task-status.json.set-aside-20260216T090000000000Z").mkdir()
    assert made_anew() == f"'User auth' as {kept.name} has it"
